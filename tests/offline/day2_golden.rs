//! Golden output of the Day-2 commands on the shipped snapshots, so a refactor of doctor, status or
//! import shows every changed line (`golden/day2/`; run with `INSTA_UPDATE=always` and review the
//! diff line by line):
//!
//! - `gpuctl doctor` and `gpuctl status`, human and Markdown, on
//!   `blueprints/snapshots/dgx-h100-training-day2.json` (a `--diagnostics` snapshot);
//! - `gpuctl import`, the blueprint and its warnings, on
//!   `blueprints/snapshots/dgx-h100-training-all.json`, a `gpuctl snapshot --all` of the DGX H100
//!   example's cluster as a team that set it up by hand would have it (`import::fixture`). That
//!   file is exactly what [`example_import_snapshot`] makes: `tools/make-import-snapshot` (or this
//!   module's first test with `GPUCTL_UPDATE_EXAMPLES=1`) rewrites it.

use std::path::Path;

use crate::support::gpuctl::Gpuctl;
use gpuctl_core::import::fixture;
use gpuctl_core::profiles::Catalog;
use gpuctl_core::render::Templates;
use gpuctl_core::snapshot::Snapshot;

const BLUEPRINT: &str = "blueprints/dgx-h100-training.yaml";
const DAY2: &str = "blueprints/snapshots/dgx-h100-training-day2.json";
const ALL: &str = "blueprints/snapshots/dgx-h100-training-all.json";
/// When the `--all` example says it was captured: a fixed time, so the file never changes by itself.
const ALL_CAPTURED_AT: &str = "2026-12-01T10:00:00Z";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs gpuctl in the repository with a fixed day and no colour: (exit code, stdout, stderr).
fn gpuctl(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Gpuctl::new(args).today("2026-12-01").no_color().output();
    (
        o.status.code(),
        String::from_utf8(o.stdout).expect("utf-8 stdout"),
        String::from_utf8(o.stderr).expect("utf-8 stderr"),
    )
}

/// The `--all` snapshot of the DGX H100 example's cluster, built by hand: every rendered object
/// without gpuctl's labels, the pools' nodes as GPU Feature Discovery labels them, the operator's
/// Helm release with the rendered values.
fn example_import_snapshot() -> String {
    let text = std::fs::read_to_string(root().join(BLUEPRINT)).expect("the example exists");
    let loaded = gpuctl_core::blueprint::load_str(BLUEPRINT, &text).expect("the example loads");
    let today = jiff::civil::date(2026, 12, 1);
    let valid = gpuctl_core::validate::validate(
        loaded,
        Catalog::embedded(),
        gpuctl_core::validate::Options { today },
    )
    .unwrap_or_else(|r| panic!("the example validates: {:?}", r.findings));
    let set = gpuctl_core::render::render(&valid, Catalog::embedded(), &Templates::embedded())
        .expect("the example renders");
    let (view, ctx) = fixture::hand_built(valid.blueprint(), &set);
    let mut snap = Snapshot::capture_all(&view, &ctx);
    snap.captured_at = Some(ALL_CAPTURED_AT.into());
    snap.to_json()
}

#[test]
fn the_shipped_import_snapshot_is_what_the_generator_makes() {
    let want = example_import_snapshot();
    let path = root().join(ALL);
    if std::env::var_os("GPUCTL_UPDATE_EXAMPLES").is_some() {
        std::fs::write(&path, &want).expect("write the example");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{ALL} is stale: run tools/make-import-snapshot (or this test with GPUCTL_UPDATE_EXAMPLES=1)"
    );
    assert_eq!(want, example_import_snapshot(), "deterministic");
    let snap: serde_json::Value = serde_json::from_str(&have).unwrap();
    assert!(!snap["import"].is_null(), "a `--all` snapshot: {ALL}");
}

#[test]
fn doctor_and_status_on_the_day2_snapshot() {
    let mut outputs = Vec::new();
    for format in ["human", "markdown"] {
        let (code, out, err) = gpuctl(&["doctor", BLUEPRINT, "--snapshot", DAY2, "-o", format]);
        assert_eq!(
            code,
            Some(1),
            "the example has errors, so doctor exits 1: {err}"
        );
        outputs.push((format!("dgx-h100-training.doctor.{format}"), out));
        let (code, out, err) = gpuctl(&["status", BLUEPRINT, "--snapshot", DAY2, "-o", format]);
        assert_eq!(code, Some(0), "status reports, it does not judge: {err}");
        outputs.push((format!("dgx-h100-training.status.{format}"), out));
    }
    insta::with_settings!({
        snapshot_path => root().join("golden/day2"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        for (name, out) in outputs {
            insta::assert_snapshot!(name, out);
        }
    });
}

#[test]
fn import_of_the_all_snapshot() {
    let (code, blueprint, warnings) = gpuctl(&["import", "--snapshot", ALL]);
    assert_eq!(code, Some(0), "{warnings}");
    insta::with_settings!({
        snapshot_path => root().join("golden/day2"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("dgx-h100-training.import.blueprint", blueprint);
        insta::assert_snapshot!("dgx-h100-training.import.warnings", warnings);
    });
}

/// The PromQL `gpuctl doctor --prometheus` runs with the profile's default windows and
/// thresholds, one query per line: a change to a query is a reviewed change here (the real
/// Prometheus runs them in `tests/external/doctor_metrics.rs`).
#[test]
fn doctor_metric_queries() {
    use gpuctl_core::metrics::{MetricSettings, plan};
    let facts = Catalog::embedded().dcgm();
    let settings = MetricSettings::new(facts, None, None).expect("profile defaults are valid");
    let text: String = plan(facts, &settings)
        .iter()
        .map(|q| format!("{:?} {:?}: {}\n", q.check, q.part, q.promql))
        .collect();
    insta::with_settings!({
        snapshot_path => root().join("golden/day2"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("doctor.metric-queries", text);
    });
}
