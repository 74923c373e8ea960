//! A stand-in for the NVIDIA Network Operator chart archive, which is not available here (it is not
//! in ../shared, and the Go module proxy refuses github.com/Mellanox/network-operator), built on
//! the fly so `gpuctl apply` can install it with the real helm through the same code as every
//! release (`networkOperator.install: helm`, `chart.path`).
//!
//! What is real: the chart's own `Chart.yaml` (name and version 26.4.1; its subchart
//! `dependencies` are left out, as their charts are not here either), its `values.yaml` (the
//! defaults helm merges gpuctl's values into) and its CRDs (`crds/`, which helm creates on install
//! when missing). What is not: the templates. In their place one ConfigMap,
//! `<release>-stand-in-values`, records the values helm rendered the chart with, so a test can see
//! what the real templates would have been given. Nothing of the real operator is deployed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The folder of the real chart's files in ../shared.
fn upstream() -> PathBuf {
    let shared = std::env::var_os("GPUCTL_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    shared.join("upstream/network-operator/v26.4.1")
}

/// The ConfigMap the stand-in's only template writes.
pub fn values_config_map(release: &str) -> String {
    format!("{release}-stand-in-values")
}

/// Writes the stand-in chart as the directory `dir/name` and returns it.
pub fn network_operator(dir: &Path, name: &str) -> PathBuf {
    let src = upstream();
    let chart = dir.join(name);
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::create_dir_all(chart.join("crds")).unwrap();
    let meta = std::fs::read_to_string(src.join("Chart.yaml"))
        .expect("the Network Operator's Chart.yaml is in ../shared/upstream");
    // Everything before `dependencies:` (its last block): the subcharts are not here.
    let cut = meta.find("\ndependencies:").map_or(meta.len(), |i| i + 1);
    std::fs::write(
        chart.join("Chart.yaml"),
        format!(
            "{}annotations:\n  gpuctl.dev/stand-in: \"real Chart.yaml, values.yaml and CRDs of network-operator v26.4.1; templates replaced (tests/support/standin_chart.rs)\"\n",
            &meta[..cut]
        ),
    )
    .unwrap();
    std::fs::copy(src.join("values.yaml"), chart.join("values.yaml")).unwrap();
    for e in std::fs::read_dir(src.join("crds")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), chart.join("crds").join(e.file_name())).unwrap();
    }
    std::fs::write(
        chart.join("templates/stand-in-values.yaml"),
        "# Stand-in for the real templates: records the values this release was rendered with.\n\
         apiVersion: v1\n\
         kind: ConfigMap\n\
         metadata:\n  name: {{ .Release.Name }}-stand-in-values\n  namespace: {{ .Release.Namespace }}\n\
         data:\n  values.json: {{ toJson .Values | quote }}\n",
    )
    .unwrap();
    chart
}
