//! Import speed on a generated cluster of about 5,000 objects (64 pools of 8 nodes, 600 tenants of
//! 2 namespaces, built by hand: every object without gpuctl's labels, the Helm release with the
//! rendered values). Target: import from a snapshot (read the file, map, validate, render, self-plan)
//! under 1 s on a 2-core machine. Live import is measured by `tools/bench-import` against a real
//! kube-apiserver. Run: `cargo bench --bench import`.

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use gpuctl_core::import::{ImportOptions, fixture, import};
use gpuctl_core::profiles::Catalog;
use gpuctl_core::render::{Templates, render};
use gpuctl_core::snapshot::Snapshot;

fn today() -> jiff::civil::Date {
    jiff::civil::date(2026, 11, 30)
}

fn from_snapshot(path: &std::path::Path) -> gpuctl_core::import::Imported {
    let snap = Snapshot::read(path).expect("reads");
    let (live, ctx) = snap.import_view().expect("an --all snapshot");
    import(
        &live,
        &ctx,
        Catalog::embedded(),
        &ImportOptions {
            name: None,
            today: today(),
        },
    )
}

fn bench(c: &mut Criterion) {
    let catalog = Catalog::embedded();
    let text = gpuctl_core::testgen::blueprint(64, 600, 2);
    let loaded = gpuctl_core::blueprint::load_str("scale.yaml", &text).expect("loads");
    let v = gpuctl_core::validate::validate(
        loaded,
        catalog,
        gpuctl_core::validate::Options { today: today() },
    )
    .expect("validates");
    let set = render(&v, catalog, &Templates::embedded()).expect("renders");
    let (live, ctx) = fixture::hand_built(v.blueprint(), &set);
    let snap = Snapshot::capture_all(&live, &ctx);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.json");
    std::fs::write(&path, snap.to_json()).unwrap();

    let start = Instant::now();
    let imported = from_snapshot(&path);
    let cold = start.elapsed();
    eprintln!(
        "import bench: {} objects and {} nodes in the snapshot ({} bytes); first import {:.0} ms; its plan adopts {}, changes {}, creates {}; valid {}",
        snap.objects.len(),
        snap.nodes.len(),
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        cold.as_secs_f64() * 1000.0,
        imported.plan_counts.adopt,
        imported.plan_counts.change,
        imported.plan_counts.create,
        imported.valid,
    );
    assert!(imported.valid && imported.plan_counts.change == 0);

    let mut group = c.benchmark_group("import");
    group.sample_size(10);
    group.bench_function("import from a snapshot of ~5,000 objects", |b| {
        b.iter(|| black_box(from_snapshot(black_box(&path))))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
