//! The accounting rules render writes for `tests/fixtures/accounting/blueprint.yaml`: `promtool
//! check rules` accepts the plain rules file, the PrometheusRule holds the same groups, and
//! `promtool test rules` (Debian's 2.42) proves what each series records: a pod's whole GPUs idle
//! (allocated 2, active 0, idle 2, the idle alert after `idle.for`), a 1g.10gb MIG slice counted as
//! 1/7 of a GPU (not 1) with its activity weighted alike, a finished pod not counted, a time-sliced
//! replica as 1/4, activity unknown where the exporter has no series (also for one pod of a tenant
//! whose other pod is reported: unknown, not idle), and Kueue borrowing as
//! reservation above nominal.

use std::process::Command;

use crate::render_common::{render_file, root};
use gpuctl_core::render::accounting::{PROMETHEUS_RULE, RULES_FILE, series};
use gpuctl_test_skip::needs_prometheus;
use serde_json::{Value, json};

const BLUEPRINT: &str = "tests/fixtures/accounting/blueprint.yaml";

fn promtool(args: &[&str], dir: &std::path::Path) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs (apt-get install prometheus)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}: {text}");
    text
}

/// An expected sample: the series (name and labels, promtool's notation) and its exact value.
fn sample(metric: &str, labels: &[(&str, &str)], value: f64) -> Value {
    json!({"labels": name(metric, labels), "value": value})
}

/// `metric{k="v",...}` as promtool's series notation.
fn name(metric: &str, labels: &[(&str, &str)]) -> String {
    let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{metric}{{{}}}", l.join(","))
}

fn input_series() -> Vec<Value> {
    let s = |metric: &str, labels: &[(&str, &str)], values: &str| json!({"series": name(metric, labels), "values": values});
    let req = "kube_pod_container_resource_requests";
    let phase = "kube_pod_status_phase";
    let gr = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
    let mut v = Vec::new();
    for (node, pool) in [("h100-n1", "h100"), ("a100-n1", "a100"), ("l4-n1", "l4")] {
        v.push(s(
            "kube_node_labels",
            &[("node", node), ("label_gpuctl_dev_pool", pool)],
            "1x60",
        ));
    }
    // team-a: 2 whole GPUs, idle; a finished pod whose requests remain.
    v.push(s(
        req,
        &[
            ("namespace", "team-a"),
            ("pod", "p"),
            ("node", "h100-n1"),
            ("resource", "nvidia_com_gpu"),
        ],
        "2x60",
    ));
    v.push(s(
        phase,
        &[("namespace", "team-a"), ("pod", "p"), ("phase", "Running")],
        "1x60",
    ));
    v.push(s(
        req,
        &[
            ("namespace", "team-a"),
            ("pod", "done"),
            ("node", "h100-n1"),
            ("resource", "nvidia_com_gpu"),
        ],
        "1x60",
    ));
    v.push(s(
        phase,
        &[
            ("namespace", "team-a"),
            ("pod", "done"),
            ("phase", "Running"),
        ],
        "0x60",
    ));
    v.push(s(
        phase,
        &[
            ("namespace", "team-a"),
            ("pod", "done"),
            ("phase", "Succeeded"),
        ],
        "1x60",
    ));
    // A second team-a pod whose GPU the exporter does not report: unknown, not idle.
    v.push(s(
        req,
        &[
            ("namespace", "team-a"),
            ("pod", "q"),
            ("node", "h100-n1"),
            ("resource", "nvidia_com_gpu"),
        ],
        "1x60",
    ));
    v.push(s(
        phase,
        &[("namespace", "team-a"), ("pod", "q"), ("phase", "Running")],
        "1x60",
    ));
    for gpu in ["0", "1"] {
        v.push(s(
            gr,
            &[
                ("node", "h100-n1"),
                ("gpu", gpu),
                ("exported_namespace", "team-a"),
                ("exported_pod", "p"),
            ],
            "0x60",
        ));
    }
    // serving: one 1g.10gb slice at 0.5.
    v.push(s(
        req,
        &[
            ("namespace", "serve"),
            ("pod", "infer"),
            ("node", "a100-n1"),
            ("resource", "nvidia_com_mig_1g_10gb"),
        ],
        "1x60",
    ));
    v.push(s(
        phase,
        &[
            ("namespace", "serve"),
            ("pod", "infer"),
            ("phase", "Running"),
        ],
        "1x60",
    ));
    v.push(s(
        gr,
        &[
            ("node", "a100-n1"),
            ("gpu", "0"),
            ("GPU_I_PROFILE", "1g.10gb"),
            ("GPU_I_ID", "7"),
            ("exported_namespace", "serve"),
            ("exported_pod", "infer"),
        ],
        "0.5x60",
    ));
    // dev: one time-sliced replica, no exporter series (unknown activity).
    v.push(s(
        req,
        &[
            ("namespace", "dev"),
            ("pod", "nb"),
            ("node", "l4-n1"),
            ("resource", "nvidia_com_gpu"),
        ],
        "1x60",
    ));
    v.push(s(
        phase,
        &[("namespace", "dev"), ("pod", "nb"), ("phase", "Running")],
        "1x60",
    ));
    // Kueue: cq-b reserves 12 of its nominal 8.
    let kq = [
        ("cohort", "all"),
        ("cluster_queue", "cq-b"),
        ("flavor", "h100"),
        ("resource", "nvidia.com/gpu"),
    ];
    v.push(s("kueue_cluster_queue_resource_reservation", &kq, "12x60"));
    v.push(s("kueue_cluster_queue_nominal_quota", &kq, "8x60"));
    v
}

type Labels = [(&'static str, &'static str); 4];

fn tenant(t: &'static str, q: &'static str, pool: &'static str, model: &'static str) -> Labels {
    [
        ("model", model),
        ("pool", pool),
        ("queue", q),
        ("tenant", t),
    ]
}

fn unit_test(rule: &Value) -> Value {
    let seventh = 1.0 / 7.0;
    let team_a = tenant("team-a", "cq-a", "h100", "H100-SXM5-80GB");
    let serving = tenant("serving", "cq-serve", "a100", "A100-SXM4-80GB");
    let dev = tenant("dev", "cq-dev", "l4", "L4");
    let at = |expr: &str, samples: Vec<Value>| json!({"expr": expr, "eval_time": "10m", "exp_samples": samples});
    let idle = &rule["spec"]["groups"][1]["rules"][0];
    let labels = json!({"namespace": "team-a", "pod": "p", "pool": "h100", "severity": "warning", "blueprint": "accounting"});
    let summary = idle["annotations"]["summary"]
        .as_str()
        .unwrap()
        .replace("{{ $labels.namespace }}", "team-a")
        .replace("{{ $labels.pod }}", "p")
        .replace("{{ $labels.pool }}", "h100");
    json!({
        "interval": "1m",
        "input_series": input_series(),
        "promql_expr_test": [
            at(&format!("sort({})", series::ALLOCATED), vec![
                sample(series::ALLOCATED, &serving, seventh),
                sample(series::ALLOCATED, &dev, 0.25),
                sample(series::ALLOCATED, &team_a, 3.0),
            ]),
            at(&format!("sort({})", series::ACTIVE), vec![
                sample(series::ACTIVE, &team_a, 0.0),
                sample(series::ACTIVE, &serving, 0.5 * seventh),
            ]),
            at(&format!("sort({})", series::IDLE), vec![
                sample(series::IDLE, &serving, seventh - 0.5 * seventh),
                sample(series::IDLE, &team_a, 2.0),
            ]),
            at(&format!("sort({})", series::UNKNOWN), vec![
                sample(series::UNKNOWN, &dev, 0.25),
                sample(series::UNKNOWN, &team_a, 1.0),
            ]),
            at(series::BORROWED, vec![sample(
                series::BORROWED,
                &[("cluster_queue", "cq-b"), ("flavor", "h100"), ("resource", "nvidia.com/gpu")],
                4.0,
            )]),
        ],
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": "GPUAllocatedIdle", "exp_alerts": []},
            {"eval_time": "45m", "alertname": "GPUAllocatedIdle", "exp_alerts": [{
                "exp_labels": labels,
                "exp_annotations": {"summary": summary, "description": idle["annotations"]["description"]},
            }]},
        ],
    })
}

#[needs_prometheus]
#[test]
fn accounting_rules_pass_promtool_check_and_unit_tests() {
    let set = render_file(&root().join(BLUEPRINT));
    let rule = set
        .objects
        .iter()
        .find(|o| o.kind == "PrometheusRule" && o.name == PROMETHEUS_RULE)
        .expect("the accounting PrometheusRule is rendered");
    let file = &set.documents[RULES_FILE];
    let plain: Value = serde_json::to_value(
        serde_saphyr::from_str::<serde_json::Value>(file).expect("the rules file is YAML"),
    )
    .unwrap();
    assert_eq!(plain["groups"], rule.manifest["spec"]["groups"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yaml"), file).unwrap();
    let out = promtool(&["check", "rules", "rules.yaml"], dir.path());
    assert!(out.contains("SUCCESS"), "{out}");
    let tests = json!({
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "group_eval_order": ["gpuctl-accounting", "gpuctl-accounting-alerts"],
        "tests": [unit_test(&rule.manifest)],
    });
    std::fs::write(
        dir.path().join("test.yaml"),
        serde_json::to_vec_pretty(&tests).unwrap(),
    )
    .unwrap();
    promtool(&["test", "rules", "test.yaml"], dir.path());
}

/// A blueprint without `accounting` renders none of it (the examples' goldens stay as they are).
#[test]
fn no_accounting_no_rules() {
    let set = render_file(&root().join("blueprints/dgx-h100-training.yaml"));
    assert!(!set.documents.contains_key(RULES_FILE));
    assert!(!set.objects.iter().any(|o| o.name == PROMETHEUS_RULE));
}

/// The fixture with Volcano queues of the same names in place of Kueue.
fn volcano_fixture() -> String {
    let s = std::fs::read_to_string(root().join(BLUEPRINT)).unwrap();
    let (a, b) = (
        s.find("  scheduling:\n").unwrap(),
        s.find("  dra:\n").unwrap(),
    );
    let queues: String = ["cq-a", "cq-b", "cq-serve", "cq-dev", "cq-research"]
        .iter()
        .map(|q| format!("        - {{ name: {q}, parent: root, weight: 1 }}\n"))
        .collect();
    format!(
        "{}  scheduling:\n    queueing: volcano\n    volcano:\n      version: v1.15.1\n      queues:\n{queues}{}",
        &s[..a],
        &s[b..]
    )
}

/// Volcano reports GPUs in milli-units (1 nvidia.com/gpu = 1000): the recorded series divides
/// them out. No Kueue, so no borrowed series.
#[needs_prometheus]
#[test]
fn volcano_queue_gpus_are_whole_units() {
    let set = crate::render_common::render_text("volcano.yaml", &volcano_fixture());
    let file = &set.documents[RULES_FILE];
    assert!(!file.contains(series::BORROWED), "{file}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yaml"), file).unwrap();
    promtool(&["check", "rules", "rules.yaml"], dir.path());
    let metric = "volcano_queue_allocated_scalar_resources";
    let tests = json!({
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": name(metric, &[("queue_name", "cq-a"), ("resource", "nvidia.com/gpu")]), "values": "2000x10"},
                {"series": name(metric, &[("queue_name", "cq-a"), ("resource", "cpu")]), "values": "8000x10"},
            ],
            "promql_expr_test": [{
                "expr": series::VOLCANO_ALLOCATED,
                "eval_time": "5m",
                "exp_samples": [sample(series::VOLCANO_ALLOCATED, &[("queue_name", "cq-a"), ("resource", "nvidia.com/gpu")], 2.0)],
            }],
        }],
    });
    std::fs::write(
        dir.path().join("test.yaml"),
        serde_json::to_vec_pretty(&tests).unwrap(),
    )
    .unwrap();
    promtool(&["test", "rules", "test.yaml"], dir.path());
}
