//! `--policy DIR` through the binary (docs/policy.md): results are findings GPU500/GPU501 in
//! validate's human, JSON and SARIF output and in the plan's text, JSON and Markdown; a policy
//! that cannot load or evaluate fails the run naming its file and line; `gpuctl policy test`
//! runs the policies' own tests; `--policy-input-out` writes the documented input.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::gpuctl::{Gpuctl, TODAY};

const POLICIES: &str = "examples/policies";
const DATA: &str = "examples/policies/data";

/// The fleet's base blueprint with its training tenant renamed to a dev tenant holding 128 H100
/// GPUs: the example policy `deny_dev_h100_quota` fires at the ClusterQueue's quota line.
fn dev_blueprint(dir: &Path) -> PathBuf {
    let base = std::fs::read_to_string("blueprints/fleet/base/training.yaml").unwrap();
    let text = base
        .replace("name: team-a\n", "name: dev-research\n")
        .replace(
            "quota: { nvidia.com/gpu: 64, cpu",
            "quota: { nvidia.com/gpu: 128, cpu",
        )
        .replace(
            "quota: { nvidia.com/gpu: 64, pods",
            "quota: { nvidia.com/gpu: 128, pods",
        );
    let path = dir.join("dev.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn policy_args() -> [&'static str; 4] {
    ["--policy", POLICIES, "--policy-data", DATA]
}

#[test]
fn validate_reports_policy_results_as_findings_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let bp = dev_blueprint(tmp.path());
    let human = Gpuctl::new(["validate"])
        .arg(&bp)
        .args(policy_args())
        .today(TODAY)
        .output();
    assert_eq!(human.status.code(), Some(1));
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("GPU500") && text.contains("deny_dev_h100_quota"),
        "{text}"
    );

    let json = Gpuctl::new(["validate", "-o", "json"])
        .arg(&bp)
        .args(policy_args())
        .today(TODAY)
        .output();
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    let found: Vec<&Value> = doc["files"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "GPU500")
        .collect();
    assert_eq!(found.len(), 1, "{doc:#}");
    // At the quota's line (56 in the base blueprint), as the policy's `_loc` said.
    let line = std::fs::read_to_string(&bp)
        .unwrap()
        .lines()
        .position(|l| l.contains("nvidia.com/gpu: 128, cpu"))
        .unwrap()
        + 1;
    assert_eq!(found[0]["pos"]["line"], line);

    let sarif = Gpuctl::new(["validate", "-o", "sarif"])
        .arg(&bp)
        .args(policy_args())
        .today(TODAY)
        .output();
    let log: Value = serde_json::from_slice(&sarif.stdout).unwrap();
    let result = log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "GPU500")
        .expect("a GPU500 result");
    assert_eq!(result["level"], "error");
    let index = result["ruleIndex"].as_u64().expect("indexed") as usize;
    assert_eq!(
        log["runs"][0]["tool"]["driver"]["rules"][index]["id"],
        "GPU500"
    );
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"]["startLine"],
        line
    );
}

#[test]
fn the_example_blueprint_passes_the_example_policies() {
    let o = Gpuctl::new(["validate", "blueprints/dgx-h100-training.yaml"])
        .args(policy_args())
        .today(TODAY)
        .output();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn plan_carries_policy_findings_in_text_json_markdown_and_the_saved_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let bp = dev_blueprint(tmp.path());
    let saved = tmp.path().join("plan.json");
    let md = Gpuctl::new(["plan", "--offline", "-o", "markdown", "--out"])
        .arg(&saved)
        .arg(&bp)
        .args(policy_args())
        .today(TODAY)
        .output();
    assert_eq!(md.status.code(), Some(1));
    let text = String::from_utf8_lossy(&md.stdout);
    // As every plan finding: id and message in text and Markdown, the id in the plan document.
    assert!(
        text.contains("- error `GPU500`: tenant dev-research")
            && text.contains("(data.main.deny_dev_h100_quota)"),
        "{text}"
    );
    let plan: Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert!(
        plan["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "GPU500" && f["severity"] == "error"),
        "{plan:#}"
    );
    let human = Gpuctl::new(["plan", "--offline"])
        .arg(&bp)
        .args(policy_args())
        .today(TODAY)
        .output();
    assert!(String::from_utf8_lossy(&human.stdout).contains("error[GPU500]: tenant dev-research"));
}

#[test]
fn a_policy_that_cannot_load_or_run_fails_the_run_naming_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "parse",
            "package main\n\ndeny contains msg if {\n  msg := \n",
        ),
        (
            "contains",
            "package main\n\ndeny[msg] if {\n  msg := \"x\"\n}\n",
        ),
        (
            "undefined",
            "package main\n\ndeny contains msg if {\n  input.never\n  msg := nosuch.fn(1)\n}\n",
        ),
        (
            "runtime",
            "package main\n\ndeny contains msg if {\n  msg := sprintf(\"%v\", [1 / 0])\n}\n",
        ),
        (
            "boolean",
            "package main\n\ndeny if {\n  input.blueprint\n}\n",
        ),
    ];
    for (name, rego) in cases {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("p.rego"), rego).unwrap();
        let o = Gpuctl::new(["validate", "blueprints/dgx-h100-training.yaml", "--policy"])
            .arg(&dir)
            .today(TODAY)
            .output();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains("p.rego:"), "{name}: {err}");
        assert!(err.starts_with("error: policy"), "{name}: {err}");
    }
}

#[test]
fn policy_test_runs_the_policies_own_tests() {
    let ok = Gpuctl::new(["policy", "test", POLICIES, "--policy-data", DATA]).output();
    let text = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{text}");
    assert!(text.contains("0 failed"), "{text}");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("p_test.rego"),
        "package main\n\ndeny contains \"x\" if input.x\n\ntest_fires if { deny[\"x\"] with input as {\"x\": true} }\n\ntest_wrong if { count(deny) == 1 with input as {\"x\": false} }\n",
    )
    .unwrap();
    let bad = Gpuctl::new(["policy", "test"]).arg(tmp.path()).output();
    let text = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL") && text.contains("data.main.test_wrong"),
        "{text}"
    );
    assert!(text.contains("2 tests, 1 passed, 1 failed"), "{text}");
}

#[test]
fn policy_input_out_writes_the_documented_input() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input.json");
    let o = Gpuctl::new([
        "plan",
        "blueprints/fleet/clusters/us-canary.yaml",
        "--offline",
        "--policy-input-out",
    ])
    .arg(&input)
    .today(TODAY)
    .output();
    assert!(input.is_file(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&std::fs::read(&input).unwrap()).unwrap();
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["command"], "plan");
    assert!(doc["plan"]["actions"].is_array());
    let bp = &doc["blueprint"];
    assert_eq!(bp["file"], "blueprints/fleet/clusters/us-canary.yaml");
    assert_eq!(bp["extends"].as_array().unwrap().len(), 2, "{bp:#}");
    // A value the overlay inherits points into the base file, at its line.
    let loc = &bp["locations"]["spec.nodePools[0].gpu.model"];
    assert_eq!(loc["file"], "blueprints/fleet/base/training.yaml");
    let base = std::fs::read_to_string("blueprints/fleet/base/training.yaml").unwrap();
    let line = base
        .lines()
        .position(|l| l.contains("gpu: { model: H100-SXM5-80GB, count: 8 }"))
        .unwrap()
        + 1;
    assert_eq!(loc["line"], line);
}

#[test]
fn explain_prints_the_policy_ids() {
    for id in ["GPU500", "GPU501"] {
        let o = Gpuctl::new(["explain", id]).output();
        assert_eq!(o.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&o.stdout).contains("(policy, "));
    }
}

#[test]
fn fleet_plan_evaluates_once_over_every_cluster_and_routes_results_naming_a_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("fleet.rego"),
        r#"package main

import rego.v1

# One result per cluster with more than 20 creates, routed to that cluster's plan.
deny contains {"msg": sprintf("%s creates %d objects", [c.name, c.plan.summary.create]), "cluster": c.name} if {
	some c in input.clusters
	c.plan.summary.create > 20
}

# One result about the fleet as a whole.
warn contains sprintf("%d clusters in %d waves", [count(input.clusters), count(input.fleet.document.spec.waves)])
"#,
    )
    .unwrap();
    let o = Gpuctl::new([
        "fleet",
        "plan",
        "blueprints/fleet/fleet.yaml",
        "--offline",
        "-o",
        "json",
        "--policy",
    ])
    .arg(tmp.path())
    .today(TODAY)
    .output();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let routed: Vec<String> = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["plan"]["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["id"] == "GPU500")
        })
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(routed, ["us-east", "eu-onprem"], "{doc:#}");
    assert_eq!(doc["policy_findings"][0]["id"], "GPU501");
    assert_eq!(
        doc["policy_findings"][0]["message"],
        "4 clusters in 3 waves (data.main.warn)"
    );
}

/// Issue 42: a hostile policy cannot take unbounded memory. regorus bounds time only; gpuctl's
/// allocator counts what the evaluation allocates and stops the run past 1 GiB, at once (well
/// inside the 20 s time limit, which would stop it otherwise), saying which budget it was.
#[test]
fn a_policy_that_allocates_without_bound_is_stopped_by_the_memory_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("policies");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("greedy.rego"),
        "package main\n\ndeny contains msg if {\n  xs := numbers.range(1, 300000000)\n  msg := sprintf(\"%d numbers\", [count(xs)])\n}\n",
    )
    .unwrap();
    let start = std::time::Instant::now();
    let o = Gpuctl::new(["validate", "blueprints/mixed-lab-fixed.yaml", "--policy"])
        .arg(&dir)
        .today(TODAY)
        .output();
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("policy evaluation (--policy) needed more than its memory budget of 1024 MiB"),
        "{err}"
    );
    assert!(
        took < std::time::Duration::from_secs(15),
        "stopped by the memory budget, not the 20 s time limit: {took:?}"
    );
    // The same policy over a small range passes the budget and reports its result.
    std::fs::write(
        dir.join("greedy.rego"),
        "package main\n\ndeny contains msg if {\n  xs := numbers.range(1, 1000)\n  msg := sprintf(\"%d numbers\", [count(xs)])\n}\n",
    )
    .unwrap();
    let small = Gpuctl::new(["validate", "blueprints/mixed-lab-fixed.yaml", "--policy"])
        .arg(&dir)
        .today(TODAY)
        .output();
    let out = String::from_utf8_lossy(&small.stdout);
    assert!(
        out.contains("1000 numbers"),
        "{out}{}",
        String::from_utf8_lossy(&small.stderr)
    );
}
