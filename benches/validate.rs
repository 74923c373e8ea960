//! Validation speed on the largest example blueprint (target: well under 50 ms).
//! Run: `cargo bench --bench validate`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};

fn largest_example() -> (String, String) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/blueprints");
    let mut best = (String::new(), String::new());
    for entry in std::fs::read_dir(dir).expect("blueprints/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        if text.len() > best.1.len() {
            best = (path.display().to_string(), text);
        }
    }
    best
}

fn bench(c: &mut Criterion) {
    let (file, text) = largest_example();
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let opts = gpuctl_core::validate::Options {
        today: jiff::civil::date(2026, 11, 30),
    };
    c.bench_function("load+validate largest example", |b| {
        b.iter(|| {
            let loaded = gpuctl_core::blueprint::load_str(&file, black_box(&text)).expect("loads");
            black_box(gpuctl_core::validate::check(&loaded, catalog, opts))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
