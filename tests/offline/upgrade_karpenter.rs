//! The driver-upgrade plan of a Karpenter pool (issue 40): its nodes are replaced through
//! Karpenter's drift, not relabelled in batches. The plan names the NodePool and the budget that
//! paces the drift, refuses a budget of 0 for `Drifted` (the upgrade could never finish), warns
//! about pods that hold their node with `karpenter.sh/do-not-disrupt`, and its runbook gives the
//! `kubectl` steps of that path. The run itself is tested with the real Karpenter in
//! `tests/cluster/upgrade_karpenter.rs`.

use std::collections::BTreeMap;

use gpuctl_core::live::workloads::{LiveDriverCr, LiveNode, LivePod, PodRole, Workloads};
use gpuctl_core::render::{DRIVER_LABEL, Templates};
use gpuctl_core::upgrade::schedule as plan;
use gpuctl_core::upgrade::{Timing, preflight, runbook};
use gpuctl_model::located::Severity;

const FROM: &str = "580.173.02";
const TO: &str = "595.91.07";
const BLUE_CR: &str = "pool-train-580-173-02";

/// A Karpenter training pool on its own driver; `disruption` replaces gpuctl's training default.
fn blueprint(disruption: &str) -> String {
    format!(
        r#"apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: drift
spec:
  kubernetes:
    version: "1.35.1"
  gpuOperator:
    version: v26.7.0
    driver:
      version: "{FROM}"
      kernelModuleType: open
  nodeReadiness:
    taintKey: readiness.k8s.io/nvidia-gpu-not-ready
    signal: external
  nodePools:
    - name: train
      role: training
      selector: {{ gpuctl.dev/pool: train }}
      nodes: 0
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
      driver: {{ version: "{FROM}" }}
      provisioner:
        type: karpenter
        platform: kwok
        nodeClass: default
        minNodes: 0
        maxNodes: 4
        instanceTypes: [p5.48xlarge]{disruption}
      taints:
        - {{ key: nvidia.com/gpu, value: present, effect: NoSchedule }}
  upgrades:
    strategy: blue-green
    blueGreen: {{ batch: 1, drainTimeout: 10m }}
"#
    )
}

fn node(i: usize) -> LiveNode {
    let labels: BTreeMap<String, String> = [
        ("gpuctl.dev/pool", "train"),
        ("karpenter.sh/nodepool", "train"),
        (DRIVER_LABEL, BLUE_CR),
        ("nvidia.com/gpu-operator.driver.owner", BLUE_CR),
        ("nvidia.com/gpu-driver-upgrade-state", "upgrade-done"),
        ("nvidia.com/cuda.driver-version.full", FROM),
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    LiveNode {
        name: format!("train-{i}"),
        labels,
        unschedulable: false,
        ready: true,
        taints: vec!["nvidia.com/gpu=present:NoSchedule".into()],
        gpus: BTreeMap::from([("nvidia.com/gpu".to_string(), 8)]),
    }
}

fn pod(name: &str, node: usize, do_not_disrupt: bool) -> LivePod {
    LivePod {
        namespace: "team-a".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        node: format!("train-{node}"),
        phase: "Running".into(),
        terminating: false,
        ready: true,
        gpus: BTreeMap::from([("nvidia.com/gpu".to_string(), 8)]),
        claims: 0,
        owner: Some("Job/pretrain".into()),
        role: PodRole::Job,
        labels: BTreeMap::new(),
        grace_seconds: 30,
        do_not_disrupt,
    }
}

fn cluster(pods: Vec<LivePod>) -> Workloads {
    Workloads {
        nodes: vec![node(1), node(2)],
        pods,
        pdbs: Vec::new(),
        driver_crs: Some(vec![LiveDriverCr {
            name: BLUE_CR.into(),
            version: FROM.into(),
            default: false,
            node_selector: BTreeMap::from([(DRIVER_LABEL.to_string(), BLUE_CR.to_string())]),
            labels: BTreeMap::new(),
            state: Some("ready".into()),
        }]),
        device_taint_rule_api: None,
    }
}

fn plan_of(disruption: &str, pods: Vec<LivePod>) -> plan::UpgradePlan {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drift.yaml");
    std::fs::write(&path, blueprint(disruption)).unwrap();
    let prep = preflight::prepare(
        &path,
        "train",
        TO,
        jiff::civil::date(2026, 11, 30),
        &Templates::embedded(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    plan::build(&prep, &cluster(pods), None, &Timing::default())
}

fn messages(p: &plan::UpgradePlan, level: Severity) -> Vec<String> {
    p.checks
        .iter()
        .filter(|c| c.level == level)
        .map(|c| c.message.clone())
        .collect()
}

/// The training default: drift paced by `upgrades.blueGreen.batch` (rendered as the NodePool's
/// budget for `Drifted`), no DeviceTaintRule, and a runbook of the drift steps, not of batches.
#[test]
fn a_karpenter_pool_is_upgraded_through_drift_paced_by_its_budget() {
    let p = plan_of("", vec![pod("pretrain-0", 1, false)]);
    assert_eq!(
        p.errors(),
        0,
        "{}",
        gpuctl::output::upgrade::plan(&p, false)
    );
    let k = p.karpenter.as_ref().expect("a drift plan");
    assert_eq!(k.node_pool, "train");
    assert_eq!(k.budgets, vec!["1".to_string()]);
    assert!(k.do_not_disrupt.is_empty());
    assert!(p.device_taints.rules.is_empty());
    let infos = messages(&p, Severity::Info).join("\n");
    assert!(
        infos.contains("its nodes are replaced, not relabelled")
            && infos.contains("at most 1 at a time (the NodePool's budgets for `Drifted`)")
            && infos.contains(&format!("`{BLUE_CR}` is deleted once no node uses it")),
        "{infos}"
    );
    let human = gpuctl::output::upgrade::plan(&p, false);
    assert!(
        human.contains("1. NodePool train: template label gpuctl.dev/driver=pool-train-595-91-07")
            && human.contains("2. Karpenter replaces the 2 node(s)")
            && human.contains("3. finish: delete NVIDIADriver pool-train-580-173-02"),
        "{human}"
    );
    assert!(!human.contains("cordon"), "{human}");
    let md = runbook::markdown(&p, &Templates::embedded(), "t.svg").unwrap();
    for want in [
        "kind: NodePool",
        "        gpuctl.dev/driver: pool-train-595-91-07",
        "kubectl get nodeclaims -l karpenter.sh/nodepool=train",
        "## Step 3: finish",
        "moves the template back and follows Karpenter's drift",
    ] {
        assert!(md.contains(want), "{want}:\n{md}");
    }
    assert!(!md.contains("kubectl cordon"), "{md}");
}

/// A budget of 0 for `Drifted` would keep every node on the old driver forever: an error, with
/// the field to change. A budget that covers every reason paces drift too.
#[test]
fn a_budget_of_zero_for_drift_is_refused_and_one_for_every_reason_paces_it() {
    let zero = "\n        disruption: { consolidationPolicy: WhenEmpty, budgets: [{ nodes: \"0\", reasons: [Drifted] }] }";
    let p = plan_of(zero, Vec::new());
    let errors = messages(&p, Severity::Error);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("NodePool `train` has a budget of 0 nodes for `Drifted`"),
        "{errors:?}"
    );
    let hint = p
        .checks
        .iter()
        .find(|c| c.level == Severity::Error)
        .unwrap();
    assert!(
        hint.hint
            .as_deref()
            .unwrap()
            .contains("spec.nodePools[train].provisioner.disruption.budgets")
    );

    let all =
        "\n        disruption: { consolidationPolicy: WhenEmpty, budgets: [{ nodes: \"25%\" }] }";
    let p = plan_of(all, Vec::new());
    assert_eq!(p.errors(), 0, "{:#?}", p.checks);
    assert_eq!(p.karpenter.unwrap().budgets, vec!["25%".to_string()]);

    // Only an Underutilized budget: nothing bounds drift.
    let none = "\n        disruption: { consolidationPolicy: WhenEmpty, budgets: [{ nodes: \"0\", reasons: [Underutilized] }] }";
    let p = plan_of(none, Vec::new());
    assert!(p.karpenter.as_ref().unwrap().budgets.is_empty());
    let warnings = messages(&p, Severity::Warning).join("\n");
    assert!(
        warnings.contains("no always-active budget of NodePool `train` covers `Drifted`"),
        "{warnings}"
    );
}

/// A pod annotated `karpenter.sh/do-not-disrupt` holds its node: the plan names it (and the
/// runbook lists it); a pod without the annotation is not named.
#[test]
fn pods_that_hold_their_node_are_named() {
    let p = plan_of(
        "",
        vec![pod("pretrain-0", 1, true), pod("pretrain-1", 2, false)],
    );
    let k = p.karpenter.as_ref().unwrap();
    assert_eq!(
        k.do_not_disrupt,
        vec!["team-a/pretrain-0 on train-1".to_string()]
    );
    let warnings = messages(&p, Severity::Warning).join("\n");
    assert!(
        warnings.contains("1 pod(s) carry `karpenter.sh/do-not-disrupt: \"true\"`")
            && warnings.contains("team-a/pretrain-0 on train-1")
            && !warnings.contains("pretrain-1"),
        "{warnings}"
    );
    let md = runbook::markdown(&p, &Templates::embedded(), "t.svg").unwrap();
    assert!(md.contains("- `team-a/pretrain-0 on train-1`"), "{md}");
}
