//! `gpuctl status` speed on the generated Day-2 cluster of the DGX example scaled to 1,000 GPU nodes,
//! 20,000 pods and 5,000 events (`gpuctl_core::testgen::day2::Size::BENCH`, the same cluster the doctor
//! benchmark reads). Target (issue 16): from a diagnostics snapshot (read the file, load and
//! validate the blueprint, compute, print the table, JSON and the SVG) under 1 s and 300 MB
//! resident. Run: `cargo bench --bench status`.

mod common;

use std::hint::black_box;
use std::time::Instant;

use common::peak_rss_mib;
use criterion::{Criterion, criterion_group, criterion_main};
use gpuctl_core::snapshot::Snapshot;
use gpuctl_core::status::{StatusInput, compute};
use gpuctl_core::testgen::day2::{Size, snapshot};

fn today() -> jiff::civil::Date {
    jiff::civil::date(2026, 11, 30)
}

/// What `gpuctl status BP --snapshot FILE -o json --svg` does, minus writing: returns the sizes.
fn status_from_file(bp_text: &str, path: &std::path::Path) -> (usize, usize, usize) {
    let loaded = gpuctl_core::blueprint::load_str("dgx.yaml", bp_text).expect("loads");
    let v = gpuctl_core::validate::validate(
        loaded,
        gpuctl_core::profiles::Catalog::embedded(),
        gpuctl_core::validate::Options { today: today() },
    )
    .expect("validates");
    let snap = Snapshot::read(path).expect("reads");
    let diag = snap.diagnostics.as_ref().expect("a diagnostics snapshot");
    let r = compute(
        v.blueprint(),
        &StatusInput::from_diagnostics(diag),
        "snapshot",
    );
    let table = gpuctl::output::status::human(&r);
    let json = gpuctl::output::status::json(&r);
    let svg = gpuctl::output::status::svg::svg(&r);
    (table.len(), json.len(), svg.len())
}

fn bench(c: &mut Criterion) {
    let bp = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/blueprints/dgx-h100-training.yaml"
    ))
    .unwrap();
    let snap = snapshot(Size::BENCH);
    let d = snap.diagnostics.as_ref().unwrap();
    let (nodes, pods, events) = (d.nodes.len(), d.pods.len(), d.events.len());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("diagnostics.json");
    std::fs::write(&path, snap.to_json()).unwrap();
    drop(snap);
    let start = Instant::now();
    let (table, json, svg) = status_from_file(&bp, &path);
    let first = start.elapsed();
    eprintln!(
        "status bench: snapshot of {} bytes ({nodes} nodes, {pods} pods, {events} events); first run {:.0} ms; table {table} B, JSON {json} B, SVG {svg} B; peak RSS {:.0} MiB",
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        first.as_secs_f64() * 1000.0,
        peak_rss_mib().unwrap_or(f64::NAN),
    );
    let mut group = c.benchmark_group("status");
    group.sample_size(10);
    group.bench_function(
        "status from a diagnostics snapshot of 1,000 nodes and 20,000 pods",
        |b| b.iter(|| black_box(status_from_file(black_box(&bp), black_box(&path)))),
    );
    group.finish();
    eprintln!(
        "status bench: peak RSS after the runs {:.0} MiB",
        peak_rss_mib().unwrap_or(f64::NAN)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
