//! The shipped Day-2 example (`blueprints/snapshots/dgx-h100-training-day2.json`): it is exactly
//! what the generator makes (`GPUCTL_UPDATE_EXAMPLES=1` rewrites it; `tools/make-day2-snapshot`
//! does that), and `gpuctl doctor` on it answers each story with the right finding in every output
//! format, with the exit codes the docs promise.

use std::path::Path;
use std::process::Output;

use crate::support::gpuctl::Gpuctl;

use gpuctl_core::testgen::day2::{self, Size};

const BLUEPRINT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/blueprints/dgx-h100-training.yaml"
);
const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/blueprints/snapshots/dgx-h100-training-day2.json"
);

fn gpuctl(args: &[&str]) -> Output {
    Gpuctl::new(args).today("2026-12-01").no_color().output()
}

#[test]
fn the_shipped_example_is_what_the_generator_makes() {
    let want = day2::snapshot(Size::EXAMPLE).to_json();
    if std::env::var_os("GPUCTL_UPDATE_EXAMPLES").is_some() {
        std::fs::write(SNAPSHOT, &want).expect("write the example");
    }
    let have = std::fs::read_to_string(SNAPSHOT).unwrap_or_default();
    assert!(
        have == want,
        "{SNAPSHOT} is stale: run tools/make-day2-snapshot (or this test with GPUCTL_UPDATE_EXAMPLES=1)"
    );
    assert_eq!(
        want,
        day2::snapshot(Size::EXAMPLE).to_json(),
        "deterministic"
    );
    assert!(
        !have.contains("not-a-real-key"),
        "environment values are masked at capture"
    );
}

#[test]
fn doctor_on_the_example_names_every_story() {
    let out = gpuctl(&["doctor", BLUEPRINT, "--snapshot", SNAPSHOT]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "errors exit 1: {text}");
    for want in [
        "Scheduling",
        "Container start",
        "Nodes and hardware",
        "warning[GPU220] pod/team-a-train/eval-4gpu-0 is Pending: 8 `nvidia.com/gpu` are free in pool h100-train but spread over 4 nodes",
        "error[GPU203] pod/online-infer/embed-0 is Pending: no pool advertises `nvidia.com/mig-2g.20gb`",
        "warning[GPU221] 12 free `nvidia.com/mig-3g.40gb` slices in pool h100-infer",
        "error[GPU207] workload/team-b-train/job-vision-ft-large-3f9a1 is waiting on cohort gpu-all",
        "error[GPU204] ResourceQuota dev-test/gpuctl-quota is exhausted",
        "error[GPU230] device plugin pods are not Ready on pool h100-infer (CrashLoopBackOff)",
        "error[GPU235] driver 550.163.01 on pool h100-train is too old for tenant dev's CUDA 13.0",
        "warning[GPU234] pool h100-train runs driver 550.163.01; the blueprint says 580.173.02",
        "error[GPU241] nodes of pool h100-infer advertise no GPUs",
        "fix:      `gpuctl upgrade driver",
    ] {
        assert!(text.contains(want), "missing `{want}` in:\n{text}");
    }
    assert!(!text.contains('\x1b'), "NO_COLOR: no escape codes");
}

#[test]
fn json_and_markdown_and_the_format_spelling() {
    let out = gpuctl(&["doctor", BLUEPRINT, "--snapshot", SNAPSHOT, "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["format_version"], 1);
    assert_eq!(v["blueprint"], "train-prod");
    assert_eq!(v["read_at"], "2026-12-01T10:00:00Z");
    let f = &v["findings"][0];
    for k in [
        "id", "layer", "severity", "title", "subjects", "evidence", "cause", "fix",
    ] {
        assert!(!f[k].is_null(), "finding has `{k}`: {f}");
    }
    let errors = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .count();
    assert_eq!(v["summary"]["errors"], errors);
    let same = gpuctl(&[
        "doctor",
        BLUEPRINT,
        "--snapshot",
        SNAPSHOT,
        "--format",
        "json",
    ]);
    assert_eq!(
        same.stdout, out.stdout,
        "--format is -o's other spelling; same input, same bytes"
    );
    let md = gpuctl(&[
        "doctor",
        BLUEPRINT,
        "--snapshot",
        SNAPSHOT,
        "-o",
        "markdown",
    ]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.starts_with("## gpuctl doctor: `train-prod`"), "{md}");
    assert!(md.contains("| error | GPU235 | Container start |"), "{md}");
    assert!(md.contains("- **Fix:** "), "{md}");
}

#[test]
fn usage_errors_and_snapshots_without_diagnostics() {
    let out = gpuctl(&["doctor", BLUEPRINT, "--snapshot", SNAPSHOT, "-o", "yaml"]);
    assert_eq!(out.status.code(), Some(64));
    let plain =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("blueprints/snapshots/dgx-h100-training.json");
    let out = gpuctl(&["doctor", BLUEPRINT, "--snapshot", plain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has no diagnostics") && err.contains("--diagnostics --out FILE"),
        "{err}"
    );
}

/// Issue 16's bar: every finding kind the doctor can report has a scenario test (against the test
/// API server or the real Prometheus) that names it. The ids are read from the doctor's and the
/// metric checks' sources (their unit tests left out), so a new kind without a scenario fails here.
#[test]
fn every_finding_kind_has_a_scenario_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Quoted ids (`"GPU213"`, and the four-digit ones of their newer ranges) that the registry
    // gives to the doctor or the metric checks.
    let ids_in = |text: &str| -> std::collections::BTreeSet<String> {
        use gpuctl_core::finding::{Family, rule};
        text.match_indices("\"GPU")
            .filter_map(|(i, _)| {
                let rest = &text[i + 1..];
                let digits = rest[3..].bytes().take_while(u8::is_ascii_digit).count();
                let id = &rest[..3 + digits];
                ((3..=4).contains(&digits) && rest[3 + digits..].starts_with('"')).then_some(id)
            })
            .filter(|id| {
                rule(id).is_some_and(|r| matches!(r.family, Family::Doctor | Family::Metrics))
            })
            .map(str::to_string)
            .collect()
    };
    let mut kinds = std::collections::BTreeSet::new();
    for dir in ["crates/day2/src/doctor", "crates/day2/src/metrics"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n != "tests.rs") {
                kinds.extend(ids_in(&std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    assert!(kinds.len() >= 38, "the doctor's finding ids: {kinds:?}");
    let mut scenarios = std::collections::BTreeSet::new();
    for f in [
        "cluster/doctor_cluster.rs",
        "cluster/doctor_scheduling.rs",
        "cluster/doctor_stack.rs",
        "cluster/dra_extended.rs",
        "cluster/dra_harness.rs",
        "cluster/dra_kueue.rs",
        "cluster/provisioning_day2.rs",
        "external/doctor_metrics.rs",
    ] {
        scenarios.extend(ids_in(
            &std::fs::read_to_string(root.join("tests").join(f)).unwrap(),
        ));
    }
    let missing: Vec<&String> = kinds.difference(&scenarios).collect();
    assert!(
        missing.is_empty(),
        "finding kinds without a scenario test: {missing:?}"
    );
}
