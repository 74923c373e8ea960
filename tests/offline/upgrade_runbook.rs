//! Golden test: the driver-upgrade plan, runbook and timeline for the DGX H100 example blueprint
//! (pool `h100-train`, 580.173.02 -> 595.91.07), against a fixed picture of the cluster: 16 nodes
//! on `cluster-default`, two training jobs, a notebook behind a PodDisruptionBudget that allows no
//! disruption. Cargo runs integration tests from the package root, so the blueprint's path (shown
//! in the output) is relative. Snapshotted in `golden/upgrade/`; review changes with `cargo insta review`.

use std::collections::BTreeMap;
use std::path::Path;

use gpuctl_core::live::workloads::{LiveDriverCr, LiveNode, LivePdb, LivePod, PodRole, Workloads};
use gpuctl_core::render::{DRIVER_LABEL, Templates};
use gpuctl_core::upgrade::schedule as plan;
use gpuctl_core::upgrade::{Timing, preflight, runbook};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn node(i: usize) -> LiveNode {
    let labels: BTreeMap<String, String> = [
        ("node.kubernetes.io/instance-type", "dgx-h100"),
        ("gpuctl.dev/pool", "h100-train"),
        ("gpu.example.com/tier", "premium"),
        (DRIVER_LABEL, "cluster-default"),
        ("nvidia.com/gpu-operator.driver.owner", "cluster-default"),
        ("nvidia.com/gpu-driver-upgrade-state", "upgrade-done"),
        ("nvidia.com/cuda.driver-version.full", "580.173.02"),
        ("nvidia.com/mig.capable", "true"),
        ("nvidia.com/mig.config", "all-disabled"),
        ("nvidia.com/mig.config.state", "success"),
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    LiveNode {
        name: format!("dgx-h100-{i:03}"),
        labels,
        unschedulable: false,
        ready: true,
        taints: vec!["nvidia.com/gpu=present:NoSchedule".into()],
        gpus: BTreeMap::from([("nvidia.com/gpu".to_string(), 8)]),
    }
}

fn pod(
    ns: &str,
    name: &str,
    node: usize,
    gpus: u64,
    owner: &str,
    role: PodRole,
    app: &str,
) -> LivePod {
    let mut labels = BTreeMap::from([("app".to_string(), app.to_string())]);
    if role == PodRole::Job {
        labels.insert("kueue.x-k8s.io/queue-name".into(), "default".into());
    }
    LivePod {
        namespace: ns.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        node: format!("dgx-h100-{node:03}"),
        phase: "Running".into(),
        terminating: false,
        ready: true,
        gpus: BTreeMap::from([("nvidia.com/gpu".to_string(), gpus)]),
        claims: 0,
        owner: Some(owner.into()),
        role,
        labels,
        grace_seconds: if role == PodRole::Job { 120 } else { 30 },
        do_not_disrupt: false,
    }
}

fn cluster() -> Workloads {
    let mut pods = Vec::new();
    for (k, n) in (5..=8).enumerate() {
        pods.push(pod(
            "team-a-train",
            &format!("llama-ft-worker-{k}"),
            n,
            8,
            "Job/llama-ft",
            PodRole::Job,
            "llama-ft",
        ));
    }
    for (k, n) in (9..=10).enumerate() {
        pods.push(pod(
            "team-b-train",
            &format!("bert-pretrain-{k}"),
            n,
            8,
            "Job/bert-pretrain",
            PodRole::Job,
            "bert",
        ));
    }
    pods.push(pod(
        "dev-test",
        "notebook-7d9f5-x2x4q",
        11,
        1,
        "ReplicaSet/notebook-7d9f5",
        PodRole::Service,
        "notebook",
    ));
    Workloads {
        nodes: (1..=16).map(node).collect(),
        pods,
        pdbs: vec![LivePdb {
            namespace: "dev-test".into(),
            name: "notebook".into(),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "app".to_string(),
                    "notebook".to_string(),
                )])),
                match_expressions: None,
            }),
            rule: "minAvailable=1".into(),
            disruptions_allowed: 0,
        }],
        driver_crs: Some(vec![LiveDriverCr {
            name: "cluster-default".into(),
            version: "580.173.02".into(),
            default: true,
            node_selector: BTreeMap::new(),
            labels: BTreeMap::new(),
            state: Some("ready".into()),
        }]),
        device_taint_rule_api: None,
    }
}

fn example_plan() -> plan::UpgradePlan {
    let prep = preflight::prepare(
        Path::new("blueprints/dgx-h100-training.yaml"),
        "h100-train",
        "595.91.07",
        jiff::civil::date(2026, 11, 30),
        &Templates::embedded(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    plan::build(&prep, &cluster(), None, &Timing::default())
}

#[test]
fn the_example_upgrade_plan_runbook_and_timeline_match_their_golden_files() {
    let plan = example_plan();
    assert_eq!(
        plan.errors(),
        0,
        "{}",
        gpuctl::output::upgrade::plan(&plan, false)
    );
    assert_eq!(plan.batches.len(), 4);
    let md = runbook::markdown(
        &plan,
        &Templates::embedded(),
        "upgrade-h100-train.timeline.svg",
    )
    .unwrap();
    let svg = runbook::timeline_svg(&plan);
    insta::with_settings!({
        snapshot_path => root().join("golden/upgrade"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("dgx-h100-training.h100-train.plan", gpuctl::output::upgrade::plan(&plan, false));
        insta::assert_snapshot!("dgx-h100-training.h100-train.runbook", md);
        insta::assert_snapshot!("dgx-h100-training.h100-train.timeline", svg);
    });
}

#[test]
fn the_same_inputs_give_the_same_bytes() {
    let (a, b) = (example_plan(), example_plan());
    assert_eq!(runbook::timeline_svg(&a), runbook::timeline_svg(&b));
    let t = Templates::embedded();
    assert_eq!(
        runbook::markdown(&a, &t, "x.svg").unwrap(),
        runbook::markdown(&b, &t, "x.svg").unwrap()
    );
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

#[test]
fn the_timeline_is_well_formed_svg() {
    let svg = runbook::timeline_svg(&example_plan());
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    for (open, close) in [
        ("<svg", "</svg>"),
        ("<text", "</text>"),
        ("<title>", "</title>"),
    ] {
        assert_eq!(
            svg.matches(open).count(),
            svg.matches(close).count(),
            "{open}"
        );
    }
}
