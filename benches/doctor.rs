//! `gpuctl doctor` over a generated snapshot of 1,000 GPU nodes (800 training, 200 MIG inference),
//! 20,000 pods and 5,000 events (`gpuctl_core::testgen::day2::Size::BENCH`: the shipped Day-2 example's
//! stories, plus finished and Pending pods and scheduler events at scale). Target: reading the
//! snapshot and diagnosing under 1 s on a 2-core machine, under 300 MB resident. Criterion measures
//! the time; the peak resident set (VmHWM) of the whole run is printed at the end.
//! Run: `cargo bench --bench doctor`.

mod common;

use std::hint::black_box;
use std::time::Instant;

use common::peak_rss_mib;
use criterion::{Criterion, criterion_group, criterion_main};
use gpuctl_core::doctor;
use gpuctl_core::profiles::Catalog;
use gpuctl_core::snapshot::Snapshot;
use gpuctl_core::testgen::day2::{self, Size};

fn bench(c: &mut Criterion) {
    let bp_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/blueprints/dgx-h100-training.yaml"
    );
    let text = std::fs::read_to_string(bp_path).expect("blueprint");
    let bp = gpuctl_core::blueprint::load_str("dgx-h100-training.yaml", &text)
        .expect("loads")
        .blueprint;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("day2.json");
    let generated = day2::snapshot(Size::BENCH);
    let g = generated.diagnostics.as_ref().expect("diagnostics");
    let counts = (g.nodes.len(), g.pods.len(), g.events.len());
    std::fs::write(&path, generated.to_json()).unwrap();
    drop(generated);
    let run = || {
        let snap = Snapshot::read(&path).expect("reads");
        let d = snap.diagnostics.expect("diagnostics");
        doctor::diagnose(&bp, Catalog::embedded(), &d, "dgx-h100-training.yaml")
    };
    let t = Instant::now();
    let r = run();
    // The counts are the file's: reading skips the finished pods (Diagnostics::pods).
    eprintln!(
        "doctor: {} nodes, {} pods, {} events, snapshot {:.1} MiB -> {} findings ({} errors) in {:?} (first run)",
        counts.0,
        counts.1,
        counts.2,
        std::fs::metadata(&path).unwrap().len() as f64 / 1048576.0,
        r.findings.len(),
        r.summary.errors,
        t.elapsed()
    );
    c.bench_function(
        "doctor: read snapshot + diagnose (1,000 nodes, 20,000 pods, 5,000 events)",
        |b| b.iter(|| black_box(run())),
    );
    if let Some(m) = peak_rss_mib() {
        eprintln!("doctor: peak resident set of the benchmark process {m:.0} MiB");
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
