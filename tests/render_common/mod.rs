//! Helpers shared by the render tests: where the repository and `../shared` are, and how an
//! example blueprint is loaded, validated and rendered.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use gpuctl_core::render::{RenderedSet, Templates};
use gpuctl_core::validate::Options;

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared` beside the repository, or `$GPUCTL_SHARED`.
pub fn shared() -> PathBuf {
    let dir = std::env::var_os("GPUCTL_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared"));
    assert!(
        dir.join("upstream").is_dir(),
        "upstream files not found in {}: set GPUCTL_SHARED to the shared/ directory",
        dir.display()
    );
    dir
}

/// A fixed "today", so end-of-life findings do not change with the calendar.
pub fn opts() -> Options {
    Options {
        today: jiff::civil::date(2026, 11, 30),
    }
}

/// Every `blueprints/*.yaml`, sorted.
pub fn blueprints() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("blueprints"))
        .expect("blueprints/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// The blueprints meant to be valid (mixed-lab.yaml is broken on purpose).
pub fn valid_blueprints() -> Vec<PathBuf> {
    blueprints()
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "mixed-lab.yaml"))
        .collect()
}

/// Loads, validates and renders blueprint text, panicking with the findings on failure.
pub fn render_text(file: &str, text: &str) -> RenderedSet {
    let loaded =
        gpuctl_core::blueprint::load_str(file, text).unwrap_or_else(|r| panic!("{file}: {r:#?}"));
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let v = gpuctl_core::validate::validate(loaded, catalog, opts())
        .unwrap_or_else(|r| panic!("{file}: {:#?}", r.findings));
    gpuctl_core::render::render(&v, catalog, &Templates::embedded())
        .unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Renders a blueprint file.
pub fn render_file(path: &Path) -> RenderedSet {
    let text = std::fs::read_to_string(path).expect("readable blueprint");
    let rel = path.strip_prefix(root()).unwrap_or(path);
    render_text(&rel.display().to_string(), &text)
}

/// A valid blueprint on GPU Operator v25.10.1 (no `spec.default` in its NVIDIADriver CRD), with a
/// per-pool driver override, a tainted pool and Volcano-free Kueue queues: the other chart release
/// render supports.
pub const V25_BLUEPRINT: &str = r#"
apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: older-operator
spec:
  kubernetes:
    version: "1.33.5"
  gpuOperator:
    version: v25.10.1
    driver:
      version: "580.105.08"
      upgradePolicy: { maxParallelUpgrades: 1, maxUnavailable: 1 }
    dcgmExporter: { enabled: true, interval: 1m, serviceMonitor: false }
  nodePools:
    - name: a100
      selector: { gpuctl.dev/pool: a100 }
      nodes: 2
      gpu: { model: A100-SXM4-80GB, count: 8 }
      partitioning:
        mode: mig
        mig: { strategy: single, layout: { "1g.10gb": 7 } }
      taints:
        - { key: dedicated, value: ml, effect: NoExecute }
    - name: l4
      selector: { gpuctl.dev/pool: l4 }
      nodes: 2
      gpu: { model: L4, count: 4 }
      driver: { version: "580.95.05" }
  priorityClasses:
    - { name: high, value: 1000 }
  scheduling:
    queueing: kueue
    kueue:
      version: v0.19.2
      clusterQueues:
        - name: shared
          resources:
            - pool: a100
              quota: { nvidia.com/gpu: 112, cpu: "1000", memory: 8Ti }
            - pool: l4
              quota: { nvidia.com/gpu: 8, cpu: "100", memory: 512Gi }
  tenants:
    - name: ml
      namespaces: [ml]
      queue: shared
      priorityClass: high
      # What `shared` can admit into the namespace (GPU112).
      quota: { nvidia.com/gpu: 120 }
  monitoring:
    alerts: { xid: true }
"#;
