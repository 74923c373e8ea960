//! What the benchmarks share (`mod common;`).
#![allow(dead_code)]

/// Peak resident memory of this process so far (Linux `VmHWM`), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// [`peak_rss_kib`] in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    peak_rss_kib().map(|k| k as f64 / 1024.0)
}
