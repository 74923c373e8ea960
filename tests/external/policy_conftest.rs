//! Differential tests of `--policy DIR` against the real conftest v0.71.1 (built by
//! `tools/kube-harness/run build` from the Go module proxy; docs/policy.md): the same policies on
//! the same input JSON, which gpuctl writes with `--policy-input-out`, give the same results with
//! gpuctl's in-process evaluation (gpuctl-policy, regorus) and with `conftest test --output json`.
//! Compared per namespace: successes, failures and warnings (message, `loc`, metadata),
//! exceptions; order aside (conftest orders by rule, then result).
//!
//! Also where the two differ on purpose: what conftest refuses at load gpuctl refuses too, and a
//! boolean `deny` (a silent pass under conftest) is an error under gpuctl.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpuctl_policy::{Options, PolicySet};
use gpuctl_test_skip::needs_conftest;
use serde_json::{Value, json};

use crate::support::gpuctl::{Gpuctl, TODAY};

/// The conftest the harness built (found the way build.rs finds it for `#[needs_conftest]`).
fn conftest() -> PathBuf {
    let p = match std::env::var_os("GPUCTL_CONFTEST").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("GPUCTL_KUBE_CACHE")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(&std::env::var_os("HOME").expect("HOME")).join(".cache/gpuctl/kube")
            })
            .join("conftest-v0.71.1/conftest"),
    };
    assert!(
        p.is_file(),
        "conftest not found at {} (build it: tools/kube-harness/run build; or set GPUCTL_CONFTEST)",
        p.display()
    );
    p
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `conftest test --output json` of `input` with `args` (`-p`, `-d`, `-n`, ...): its JSON
/// and exit code.
fn run_conftest(input: &Path, args: &[&str]) -> (Value, i32, String) {
    let out = Command::new(conftest())
        .args(["test", "--no-color", "--output", "json"])
        .args(args)
        .arg(input)
        .current_dir(root())
        .output()
        .expect("run conftest");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (v, out.status.code().unwrap_or(-1), stderr)
}

/// `v` with every object's keys in order (Go writes maps sorted; gpuctl keeps the policy's order).
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&o[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// A conftest JSON report made comparable: per namespace, sorted lists, no file name.
fn normal(report: &Value) -> Value {
    let mut checks: Vec<Value> = report
        .as_array()
        .unwrap_or_else(|| panic!("not a conftest report: {report}"))
        .iter()
        .map(|c| {
            let sorted = |key: &str| {
                let mut items: Vec<String> = c[key]
                    .as_array()
                    .map(|a| a.iter().map(|r| canonical(r).to_string()).collect())
                    .unwrap_or_default();
                items.sort();
                items
            };
            json!({
                "namespace": c["namespace"],
                "successes": c["successes"],
                "failures": sorted("failures"),
                "warnings": sorted("warnings"),
                "exceptions": sorted("exceptions"),
            })
        })
        .collect();
    checks.sort_by_key(|c| c["namespace"].to_string());
    Value::Array(checks)
}

/// gpuctl's evaluation of the same input, as conftest's JSON.
fn gpuctl_report(policy: &[PathBuf], data: &[PathBuf], input: &Path, opts: &Options) -> Value {
    let set = PolicySet::load(policy, data).expect("policies load");
    let doc: Value = serde_json::from_slice(&std::fs::read(input).unwrap()).unwrap();
    let report = set.evaluate(&doc, opts).expect("policies evaluate");
    report.conftest_json(&input.display().to_string())
}

/// Both engines over one input; returns conftest's normalised report after asserting equality.
fn same_results(
    policy: &[PathBuf],
    data: &[PathBuf],
    input: &Path,
    opts: &Options,
    conftest_args: &[&str],
) -> Value {
    let mut args: Vec<String> = Vec::new();
    for p in policy {
        args.extend(["-p".into(), p.display().to_string()]);
    }
    for d in data {
        args.extend(["-d".into(), d.display().to_string()]);
    }
    args.extend(conftest_args.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (theirs, code, stderr) = run_conftest(input, &args);
    assert!(code == 0 || code == 1, "conftest failed ({code}): {stderr}");
    let theirs = normal(&theirs);
    let ours = normal(&gpuctl_report(policy, data, input, opts));
    assert_eq!(
        ours,
        theirs,
        "gpuctl and conftest disagree on {}",
        input.display()
    );
    theirs
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn failures(n: &Value) -> usize {
    n.as_array()
        .unwrap()
        .iter()
        .map(|c| c["failures"].as_array().map_or(0, Vec::len))
        .sum()
}

fn examples() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let dir = root().join("examples/policies");
    (vec![dir.clone()], vec![dir.join("data")])
}

#[needs_conftest]
#[test]
fn example_policies_agree_with_conftest_on_validate_plan_and_fleet_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let (policy, data) = examples();
    // A dev tenant with 128 H100 GPUs: deny_dev_h100_quota fires at the quota's line.
    let base = std::fs::read_to_string(root().join("blueprints/fleet/base/training.yaml")).unwrap();
    let dev = base
        .replace("name: team-a\n", "name: dev-research\n")
        .replace(
            "quota: { nvidia.com/gpu: 64, cpu",
            "quota: { nvidia.com/gpu: 128, cpu",
        )
        .replace(
            "quota: { nvidia.com/gpu: 64, pods",
            "quota: { nvidia.com/gpu: 128, pods",
        );
    let bp = tmp.path().join("dev.yaml");
    std::fs::write(&bp, dev).unwrap();
    let mut inputs = Vec::new();
    for (name, args) in [
        ("validate-dev.json", vec!["validate", bp.to_str().unwrap()]),
        (
            "validate-example.json",
            vec!["validate", "blueprints/dgx-h100-training.yaml"],
        ),
        (
            "plan-dev.json",
            vec!["plan", bp.to_str().unwrap(), "--offline"],
        ),
        (
            "fleet.json",
            vec![
                "fleet",
                "plan",
                "blueprints/fleet/fleet.yaml",
                "--snapshot-dir",
                "blueprints/snapshots",
            ],
        ),
    ] {
        let input = tmp.path().join(name);
        let o = Gpuctl::new(args)
            .today(TODAY)
            .arg("--policy-input-out")
            .arg(&input)
            .output();
        assert!(
            input.is_file(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        inputs.push(input);
    }
    let mut seen = 0;
    for input in &inputs {
        let n = same_results(&policy, &data, input, &Options::default(), &[]);
        seen += failures(&n);
    }
    // The dev quota twice (validate, plan), the fleet's waves and driver branch.
    assert!(seen >= 4, "the examples found too little: {seen} failures");
}

#[needs_conftest]
#[test]
fn edge_cases_agree_with_conftest() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = tmp.path().join("policy");
    let data = tmp.path().join("data");
    write(
        &policy,
        &[
            (
                "main.rego",
                r#"package main

import rego.v1

# Undefined values: a missing field, an undefined sprintf argument: no result, a pass.
deny contains msg if {
	input.missing.deep > 1
	msg := "never"
}

deny contains sprintf("nope %v", [input.nope])

# Strings and objects; an empty message counts as a pass.
deny contains sprintf("tenant %s over %d", [t.name, t.gpus]) if {
	some t in input.tenants
	t.gpus > data.limits.max
}

deny contains "" if input.empty_message

violation contains {"msg": "object message", "_loc": {"file": "bp.yaml", "line": 12}, "rule": "ORG-7", "details": {"n": [1, 2]}} if input.object

violation_second contains {"msg": "no loc", "_loc": "not an object"} if input.object

warn contains "just a warning" if input.warn

warn_quota contains sprintf("team %s", [data.sub.team.name]) if input.warn

# Not conftest rule names: never queried.
denyX contains "no" if true

warning contains "no" if true

# Two definitions of one name: two counted, as conftest counts.
deny_twice contains "first" if input.twice

deny_twice contains "second" if input.twice

deny_quota contains "excepted" if true

exception contains rules if {
	input.allow_quota
	rules := ["quota"]
}
"#,
            ),
            (
                "k8s.rego",
                "package k8s.gpu.quota\n\nimport rego.v1\n\ndeny contains \"k8s\" if input.k8s\n\nwarn contains \"k8s warn\" if input.k8s\n",
            ),
            (
                "lib/other.rego",
                "package other\n\nimport rego.v1\n\nviolation contains \"other\" if true\n",
            ),
        ],
    );
    write(
        &data,
        &[
            ("limits.json", r#"{"limits": {"max": 64}}"#),
            ("sub/team.yaml", "team:\n  name: dev-research\n"),
        ],
    );
    let inputs = [
        json!({"tenants": [{"name": "a", "gpus": 65}, {"name": "b", "gpus": 64}], "object": true, "warn": true, "twice": true, "empty_message": true, "k8s": true}),
        json!({"tenants": [], "allow_quota": true}),
        json!({"object": true, "allow_quota": false, "warn": false}),
    ];
    let ns = |n: &[&str]| Options {
        namespaces: n.iter().map(|s| s.to_string()).collect(),
        all_namespaces: false,
    };
    let all = Options {
        namespaces: vec![],
        all_namespaces: true,
    };
    for (i, input) in inputs.iter().enumerate() {
        let file = tmp.path().join(format!("input-{i}.json"));
        std::fs::write(&file, serde_json::to_string_pretty(input).unwrap()).unwrap();
        let (p, d) = (vec![policy.clone()], vec![data.clone()]);
        same_results(&p, &d, &file, &Options::default(), &[]);
        same_results(&p, &d, &file, &ns(&["k8s.*"]), &["-n", "k8s.*"]);
        same_results(
            &p,
            &d,
            &file,
            &ns(&["othe?", "main"]),
            &["-n", "othe?", "-n", "main"],
        );
        same_results(&p, &d, &file, &all, &["--all-namespaces"]);
    }
}

#[needs_conftest]
#[test]
fn what_conftest_refuses_gpuctl_refuses_and_a_boolean_deny_is_gpuctl_s_documented_difference() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input.json");
    std::fs::write(&input, r#"{"x": true}"#).unwrap();
    let refused = [
        (
            "contains",
            "package main\n\ndeny[msg] if {\n  msg := \"x\"\n}\n",
        ),
        (
            "undefined",
            "package main\n\ndeny contains msg if {\n  input.never\n  msg := nosuch.fn(1)\n}\n",
        ),
        (
            "kinds",
            "package main\n\ndeny contains \"a\" if true\n\ndeny := {\"b\"}\n",
        ),
    ];
    for (name, rego) in refused {
        let dir = tmp.path().join(name);
        write(&dir, &[("p.rego", rego)]);
        let (_, code, stderr) = run_conftest(&input, &["-p", dir.to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: conftest accepted it: {stderr}");
        assert!(
            PolicySet::load(std::slice::from_ref(&dir), &[]).is_err(),
            "{name}: gpuctl accepted what conftest refuses ({stderr})"
        );
        // And the command fails naming the policy file.
        let o = Gpuctl::new(["validate", "blueprints/dgx-h100-training.yaml", "--policy"])
            .arg(&dir)
            .today(TODAY)
            .output();
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("p.rego"),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // A built-in OPA has and regorus lacks: conftest evaluates it, gpuctl refuses the policy at
    // load naming the function (docs/policy.md lists them); never a silent pass.
    let dir = tmp.path().join("split_n");
    write(
        &dir,
        &[(
            "p.rego",
            "package main\n\ndeny contains msg if {\n  input.x\n  msg := strings.split_n(\"a.b\", \".\", 1)[0]\n}\n",
        )],
    );
    let (theirs, code, _) = run_conftest(&input, &["-p", dir.to_str().unwrap()]);
    assert_eq!((code, failures(&normal(&theirs))), (1, 1));
    let err = PolicySet::load(std::slice::from_ref(&dir), &[]).unwrap_err();
    assert!(err.to_string().contains("strings.split_n"), "{err}");
    // A boolean deny: conftest passes it whatever its body says; gpuctl refuses it.
    let dir = tmp.path().join("boolean");
    write(
        &dir,
        &[("p.rego", "package main\n\ndeny if {\n  input.x\n}\n")],
    );
    let (theirs, code, _) = run_conftest(&input, &["-p", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(failures(&normal(&theirs)), 0);
    let set = PolicySet::load(std::slice::from_ref(&dir), &[]).unwrap();
    let doc: Value = serde_json::from_str(r#"{"x": true}"#).unwrap();
    assert!(set.evaluate(&doc, &Options::default()).is_err());
}
