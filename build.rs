//! Marks cluster tests `ignored` when no test API server is configured, so a local `cargo test`
//! reports them as `ignored, needs the test API server` (and counts them in each summary line)
//! instead of passing them silently. Cluster tests carry
//! `#[cfg_attr(gpuctl_no_test_cluster, ignore = "...")]`; in CI (`CI` or `GPUCTL_REQUIRE_CLUSTER`
//! set) or with `GPUCTL_TEST_KUBECONFIG` set they run, and fail when the server is missing.
//!
//! Likewise `gpuctl_no_chromium` marks the browser check of the status picture ignored where
//! Debian's `chromium` is not on PATH (or named by `CHROMIUM`), except in CI, where it must run.

fn set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

fn main() {
    for var in ["GPUCTL_TEST_KUBECONFIG", "CI", "GPUCTL_REQUIRE_CLUSTER"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(gpuctl_no_test_cluster)");
    let configured = std::env::var_os("GPUCTL_TEST_KUBECONFIG").is_some_and(|v| !v.is_empty());
    if !configured && !set("CI") && !set("GPUCTL_REQUIRE_CLUSTER") {
        println!("cargo::rustc-cfg=gpuctl_no_test_cluster");
    }
    println!("cargo::rerun-if-env-changed=CHROMIUM");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rustc-check-cfg=cfg(gpuctl_no_chromium)");
    if !set("CI") && !chromium_on_path() {
        println!("cargo::rustc-cfg=gpuctl_no_chromium");
    }
}

/// `CHROMIUM` names a file, or `chromium` / `chromium-browser` is on PATH.
fn chromium_on_path() -> bool {
    if std::env::var_os("CHROMIUM").is_some_and(|p| std::path::Path::new(&p).is_file()) {
        return true;
    }
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .any(|d| d.join("chromium").is_file() || d.join("chromium-browser").is_file())
    })
}
