//! Each finding on a hand-built [`Diagnostics`], against the shipped DGX H100 blueprint: a
//! healthy reading gives none, and each fault gives its finding with cause and fix.

use serde_json::{Value, json};

use super::*;
use crate::diagnostics::{DiagKind, Diagnostics};
use gpuctl_model::blueprint::Blueprint;

const OP: &str = "gpu-operator";
const DRIVER: &str = "580.173.02";

fn blueprint() -> Blueprint {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../blueprints/dgx-h100-training.yaml"
    );
    let bytes = std::fs::read(path).expect("the shipped blueprint");
    gpuctl_model::blueprint::load_bytes("dgx.yaml", bytes)
        .expect("loads")
        .blueprint
}

/// A node of pool `pool` as GFD, the device plugin and the kubelet leave it.
fn node(name: &str, pool: &str, alloc: Value, driver: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {
            "node.kubernetes.io/instance-type": "dgx-h100",
            "gpuctl.dev/pool": pool,
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/cuda.driver-version.full": driver,
        }},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        }
    })
}

fn train(name: &str) -> Value {
    node(
        name,
        "h100-train",
        json!({"nvidia.com/gpu": "8", "cpu": "200"}),
        DRIVER,
    )
}

fn infer(name: &str) -> Value {
    node(
        name,
        "h100-infer",
        json!({"nvidia.com/mig-3g.40gb": "16"}),
        DRIVER,
    )
}

fn tolerations() -> Value {
    json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
}

/// A pod asking for `res`; bound to `node` (Running) or Pending with the scheduler's condition.
fn pod(ns: &str, name: &str, res: Value, node: Option<&str>) -> Value {
    let mut p = json!({
        "metadata": {"namespace": ns, "name": name,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("{name}-job"),
                "uid": "u", "controller": true}]},
        "spec": {
            "containers": [{"name": "main", "image": "img", "resources": {"limits": res}}],
            "tolerations": tolerations(),
            "nodeSelector": {"gpuctl.dev/pool": if res.to_string().contains("mig") {"h100-infer"} else {"h100-train"}}
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    });
    match node {
        Some(n) => p["spec"]["nodeName"] = json!(n),
        None => {
            p["status"] = json!({"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
                "lastTransitionTime": "2026-12-01T10:00:00Z"}]});
        }
    }
    p
}

fn operand(name: &str, app: &str, node: &str, ready: bool) -> Value {
    let status = if ready {
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "i", "imageID": ""}]})
    } else {
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "c", "ready": false, "restartCount": 7, "image": "i", "imageID": "",
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": "failed to get devices: nvml: Driver Not Loaded"}}}]})
    };
    json!({"metadata": {"namespace": OP, "name": name, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        "status": status})
}

/// A healthy cluster: two training and one inference node, operands Ready, a running job, the
/// PriorityClasses, an admitted workload.
fn healthy() -> Diagnostics {
    let mut d = Diagnostics::new(OP, Some("2026-12-01T12:00:00Z".into()));
    d.ingest(DiagKind::Node, vec![train("t0"), train("t1"), infer("i0")]);
    d.ingest(
        DiagKind::Pod,
        vec![
            pod(
                "team-a-train",
                "run-0",
                json!({"nvidia.com/gpu": "8"}),
                Some("t0"),
            ),
            operand(
                "nvidia-device-plugin-daemonset-a",
                "nvidia-device-plugin-daemonset",
                "t0",
                true,
            ),
            operand(
                "nvidia-device-plugin-daemonset-b",
                "nvidia-device-plugin-daemonset",
                "t1",
                true,
            ),
        ],
    );
    d.ingest(
        DiagKind::PriorityClass,
        ["training-critical", "inference-online", "batch-low"]
            .iter()
            .map(|n| json!({"metadata": {"name": n}, "value": 1}))
            .collect(),
    );
    d.ingest(
        DiagKind::ClusterPolicy,
        vec![json!({"metadata": {"name": "cluster-policy"}, "status": {"state": "ready"}})],
    );
    d.ingest(
        DiagKind::Workload,
        vec![json!({"metadata": {"namespace": "team-a-train", "name": "w"}, "spec": {"queueName": "lq"},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]}})],
    );
    d.finish();
    d
}

fn run(d: &Diagnostics) -> Report {
    diagnose(&blueprint(), Catalog::embedded(), d, "dgx.yaml")
}

fn ids(r: &Report) -> Vec<&str> {
    r.findings.iter().map(|f| f.id.as_str()).collect()
}

fn only<'a>(r: &'a Report, id: &str) -> &'a Finding {
    let f: Vec<&Finding> = r.findings.iter().filter(|f| f.id == id).collect();
    assert_eq!(f.len(), 1, "{id} once in {:#?}", r.findings);
    f[0]
}

fn with(mut d: Diagnostics, kind: DiagKind, items: Vec<Value>) -> Diagnostics {
    d.ingest(kind, items);
    d.finish();
    d
}

#[test]
fn a_healthy_cluster_has_no_findings() {
    let r = run(&healthy());
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert!(!r.has_errors());
    let train = r.pools.iter().find(|p| p.pool == "h100-train").unwrap();
    assert_eq!(train.free["nvidia.com/gpu"], (8, 8));
    assert_eq!((train.nodes, train.ready), (2, 2));
}

#[test]
fn gpu200_insufficient_gpus() {
    let d = with(
        healthy(),
        DiagKind::Pod,
        vec![
            pod(
                "team-a-train",
                "run-1",
                json!({"nvidia.com/gpu": "8"}),
                Some("t1"),
            ),
            pod("team-a-train", "big", json!({"nvidia.com/gpu": "4"}), None),
        ],
    );
    let r = run(&d);
    let f = only(&r, "GPU200");
    assert_eq!(f.severity, Severity::Error);
    assert!(f.subjects.contains(&"pod/team-a-train/big".to_string()));
    assert!(
        f.cause.contains("0 `nvidia.com/gpu` free") && f.cause.contains("needs 4"),
        "{}",
        f.cause
    );
    assert!(f.evidence[0].text.contains("Insufficient nvidia.com/gpu"));
    assert!(r.has_errors());
}

#[test]
fn gpu201_untolerated_pool_taint() {
    let mut p = pod("team-a-train", "p", json!({"nvidia.com/gpu": "1"}), None);
    p["spec"]["tolerations"] = json!([]);
    let r = run(&with(healthy(), DiagKind::Pod, vec![p]));
    let f = only(&r, "GPU201");
    assert!(
        f.cause.contains("nvidia.com/gpu=present:NoSchedule"),
        "{}",
        f.cause
    );
    assert!(
        f.fix
            .contains("tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]"),
        "{}",
        f.fix
    );
}

#[test]
fn gpu202_selector_matches_no_pool_node() {
    let mut p = pod("team-a-train", "p", json!({"nvidia.com/gpu": "1"}), None);
    p["spec"]["nodeSelector"] = json!({"gpuctl.dev/pool": "h200-train"});
    let r = run(&with(healthy(), DiagKind::Pod, vec![p]));
    let f = only(&r, "GPU202");
    assert!(
        f.cause.contains("`gpuctl.dev/pool=h200-train`"),
        "{}",
        f.cause
    );
    assert!(f.subjects.contains(&"job/team-a-train/p-job".to_string()));
}

#[test]
fn gpu203_mig_profile_no_pool_advertises() {
    let p = pod(
        "online-infer",
        "p",
        json!({"nvidia.com/mig-2g.20gb": "1"}),
        None,
    );
    let r = run(&with(healthy(), DiagKind::Pod, vec![p]));
    let f = only(&r, "GPU203");
    assert!(f.title.contains("nvidia.com/mig-2g.20gb"));
    assert!(
        f.cause
            .contains("`nvidia.com/mig-3g.40gb` (pool h100-infer)"),
        "{}",
        f.cause
    );
    // The idle 3g.40gb slices nobody pending can use.
    let g = only(&r, "GPU221");
    assert!(
        g.title.contains("16 free `nvidia.com/mig-3g.40gb`"),
        "{}",
        g.title
    );
}

#[test]
fn gpu220_free_gpus_spread_over_nodes() {
    let d = with(
        healthy(),
        DiagKind::Pod,
        vec![
            pod(
                "team-a-train",
                "small-0",
                json!({"nvidia.com/gpu": "4"}),
                Some("t1"),
            ),
            pod("team-a-train", "half", json!({"nvidia.com/gpu": "6"}), None),
        ],
    );
    // t0 is full (run-0 holds 8); t1 has 4 free: not spread. Free 4 of t0 too.
    let mut d = d;
    d.pods
        .retain(|p| p.metadata.name.as_deref() != Some("run-0"));
    d.ingest(
        DiagKind::Pod,
        vec![pod(
            "team-a-train",
            "run-0",
            json!({"nvidia.com/gpu": "4"}),
            Some("t0"),
        )],
    );
    d.finish();
    let r = run(&d);
    let f = only(&r, "GPU220");
    assert!(
        f.cause.contains("8 are free across 2 nodes") && f.cause.contains("at most 4"),
        "{}",
        f.cause
    );
    assert!(f.fix.contains("at most 4"), "{}", f.fix);
    let train = r.pools.iter().find(|p| p.pool == "h100-train").unwrap();
    assert_eq!(train.free["nvidia.com/gpu"], (8, 4));
    assert!(!ids(&r).contains(&"GPU200"));
}

#[test]
fn gated_pods_are_left_to_the_workload_findings() {
    let mut p = pod("team-a-train", "p", json!({"nvidia.com/gpu": "64"}), None);
    p["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}]);
    let r = run(&with(healthy(), DiagKind::Pod, vec![p]));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

fn refusal(kind: &str, name: &str, msg: &str) -> Value {
    json!({"metadata": {"namespace": "team-a-train", "name": format!("{name}.1")},
        "involvedObject": {"kind": kind, "namespace": "team-a-train", "name": name},
        "reason": "FailedCreate", "message": msg, "count": 5,
        "lastTimestamp": "2026-12-01T11:00:00Z"})
}

#[test]
fn gpu204_exhausted_quota() {
    let mut d = healthy();
    d.ingest(
        DiagKind::ResourceQuota,
        vec![json!({"metadata": {"namespace": "team-a-train", "name": "gpuctl-quota"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
            "status": {"hard": {"requests.nvidia.com/gpu": "8"}, "used": {"requests.nvidia.com/gpu": "8"}}})],
    );
    d.ingest(
        DiagKind::Event,
        vec![refusal("Job", "train", "Error creating: pods \"train-x\" is forbidden: exceeded quota: gpuctl-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8")],
    );
    d.finish();
    let r = run(&d);
    let f = only(&r, "GPU204");
    assert!(
        f.subjects
            .contains(&"resourcequota/team-a-train/gpuctl-quota".to_string())
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.text.contains("requests.nvidia.com/gpu: used 8 of 8")),
        "{:?}",
        f.evidence
    );
    assert!(f.fix.contains("tenant `team-a`"), "{}", f.fix);
}

#[test]
fn gpu205_limitrange_default_missing() {
    let d = with(
        healthy(),
        DiagKind::Event,
        vec![refusal(
            "Job",
            "j",
            "Error creating: pods \"j-x\" is forbidden: failed quota: q: must specify requests.cpu",
        )],
    );
    let r = run(&d);
    let f = only(&r, "GPU205");
    assert!(f.title.contains("the quota needs `requests.cpu` and"));
    assert!(f.cause.contains("no LimitRange with defaults"));
}

/// Kubernetes 1.27 and later name the containers: `must specify R for: c1,c2; R2 for: c1`. The
/// finding names the resources, not `requests.cpu for: main` (as the real 1.35 API server writes).
#[test]
fn gpu205_names_resources_and_containers_of_newer_servers() {
    let d = with(
        healthy(),
        DiagKind::Event,
        vec![refusal(
            "Job",
            "j",
            "Error creating: pods \"j-x\" is forbidden: failed quota: q: must specify requests.cpu for: main,sidecar; requests.memory for: main",
        )],
    );
    let r = run(&d);
    let f = only(&r, "GPU205");
    assert!(
        f.title
            .contains("the quota needs `requests.cpu, requests.memory` and"),
        "{}",
        f.title
    );
    assert!(
        f.cause.contains(
            "limits requests.cpu, requests.memory, so every container must set it (missing in containers: main, sidecar)"
        ),
        "{}",
        f.cause
    );
}

#[test]
fn gpu212_missing_priority_class() {
    let mut d = healthy();
    d.priority_classes
        .retain(|p| p.metadata.name.as_deref() != Some("batch-low"));
    let r = run(&d);
    let f = only(&r, "GPU212");
    assert!(f.subjects.contains(&"tenant/dev".to_string()));
    assert!(f.fix.contains("gpuctl apply dgx.yaml"));
}

fn pending_workload(msg: &str, reason: &str) -> Value {
    json!({"metadata": {"namespace": "team-a-train", "name": "job-train-1"},
        "spec": {"queueName": "gpuctl-queue", "active": true},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": reason,
            "message": msg, "lastTransitionTime": "2026-12-01T11:00:00Z"}]}})
}

fn kueue(d: Diagnostics, msg: &str, reason: &str) -> Report {
    kueue_in(d, msg, reason, Some("gpu-all"))
}

fn kueue_in(d: Diagnostics, msg: &str, reason: &str, cohort: Option<&str>) -> Report {
    let mut d = d;
    d.workloads.clear();
    d.ingest(DiagKind::Workload, vec![pending_workload(msg, reason)]);
    d.ingest(
        DiagKind::LocalQueue,
        vec![json!({"metadata": {"namespace": "team-a-train", "name": "gpuctl-queue"}, "spec": {"clusterQueue": "cq-team-a"}})],
    );
    d.ingest(
        DiagKind::ClusterQueue,
        vec![
            json!({"metadata": {"name": "cq-team-a"}, "spec": {"cohortName": cohort},
                "status": {"flavorsUsage": [{"name": "h100-train", "resources": [{"name": "nvidia.com/gpu", "total": "80", "borrowed": "16"}]}]}}),
            json!({"metadata": {"name": "cq-team-b"}, "spec": {"cohortName": cohort},
                "status": {"flavorsUsage": [{"name": "h100-train", "resources": [{"name": "nvidia.com/gpu", "total": "48"}]}]}}),
        ],
    );
    d.finish();
    run(&d)
}

#[test]
fn gpu206_to_gpu210_kueue_reasons() {
    // No cohort: the queue's own quota.
    let r = kueue_in(
        healthy(),
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100-train, 8 more needed",
        "Pending",
        None,
    );
    let f = only(&r, "GPU206");
    assert!(f.cause.contains("nominal quota 64"), "{}", f.cause);
    assert!(f.evidence.iter().any(|e| {
        e.text
            .contains("h100-train/nvidia.com/gpu: 80 in use (16 borrowed)")
    }));

    let r = kueue(
        healthy(),
        "couldn't assign flavors to pod set main: insufficient unused quota in cohort for nvidia.com/gpu in flavor h100-train, 8 more needed",
        "Pending",
    );
    let f = only(&r, "GPU207");
    assert!(f.subjects.contains(&"cohort/gpu-all".to_string()));
    // Kueue v0.19 says the same without "in cohort": the queue's cohort decides.
    let r = kueue(
        healthy(),
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100-train, 8 more needed",
        "Pending",
    );
    let g = only(&r, "GPU207");
    assert!(
        g.evidence.iter().any(
            |e| e.source.contains("clusterqueue/cq-team-b (same cohort)")
                && e.text.contains("48 in use")
        ),
        "{:#?}",
        g.evidence
    );
    assert!(
        f.cause
            .contains("borrowing limit for `nvidia.com/gpu` is 16"),
        "{}",
        f.cause
    );

    let r = kueue(
        healthy(),
        // Kueue v0.19.2's own text and reason (workload.ErrNamespaceMismatch).
        "workload namespace doesn't match ClusterQueue selector",
        "Pending",
    );
    assert!(
        only(&r, "GPU208")
            .title
            .contains("namespace team-a-train is not selected")
    );

    let r = kueue(
        healthy(),
        "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue",
        "Pending",
    );
    assert!(only(&r, "GPU209").title.contains("does not cover `cpu`"));

    let r = kueue(
        healthy(),
        "ClusterQueue cq-team-a is inactive",
        "Inadmissible",
    );
    only(&r, "GPU210");
    // Kueue v0.19.2 with its UnadmittedWorkloadsObservability gate writes granular reasons
    // (`Misconfigured`) instead of `Inadmissible`: the message alone still says it.
    for msg in [
        "LocalQueue gpuctl-queue is terminating or missing",
        "ClusterQueue cq-team-a is terminating or missing",
        "ClusterQueue cq-team-a not found",
    ] {
        let r = kueue(healthy(), msg, "Misconfigured");
        assert!(only(&r, "GPU210").title.contains(msg), "{msg}");
    }
}

/// GPU216: each claim form Kueue refuses (profiles/dra.yaml `kueue.refused`, Kueue's own words)
/// is named with the fix for that form, before any quota reading of the message.
#[test]
fn kueue_refusing_a_dra_claim_form_is_its_own_finding() {
    let refused = &gpuctl_model::profiles::Catalog::embedded()
        .dra()
        .kueue
        .refused;
    assert_eq!(refused.len(), 5);
    for r in refused {
        let msg = format!("failed to process podset main: {}", r.message);
        let rep = kueue(healthy(), &msg, "Inadmissible");
        let f = only(&rep, "GPU216");
        assert!(
            f.title.contains("Kueue refuses its DRA claims"),
            "{}",
            f.title
        );
        assert!(f.cause.contains(&r.message), "{}", f.cause);
        let want = match r.form.as_str() {
            "unmapped_class" => "deviceClassMappings",
            "direct_claim" => "resourceClaimTemplateName",
            "first_available" => "firstAvailable",
            "admin_access" => "adminAccess",
            _ => "ExactCount",
        };
        assert!(f.fix.contains(want), "{}: {}", r.form, f.fix);
    }
    // Kueue v0.19.2's wording of an unmapped class.
    let rep = kueue(
        healthy(),
        "DeviceClass gpu.nvidia.com is not mapped in DRA configuration for podset main",
        "Pending",
    );
    only(&rep, "GPU216");
}

/// Every Kueue text of `profiles/queueing.yaml` (`scheduling_messages.kueue`) classifies a
/// workload as the finding it stands for, written as Kueue v0.19.2 writes it.
#[test]
fn kueue_texts_come_from_the_profile() {
    let t = &gpuctl_model::profiles::Catalog::embedded()
        .queueing()
        .messages
        .kueue;
    assert_eq!(t.release, "v0.19.2");
    let mut cases: Vec<(String, Option<&str>, &str)> = vec![
        (t.namespace_mismatch.clone(), Some("gpu-all"), "GPU208"),
        (
            format!(
                "couldn't assign flavors to pod set main: {}cpu{}",
                t.resource_uncovered.before, t.resource_uncovered.after
            ),
            Some("gpu-all"),
            "GPU209",
        ),
        (
            format!(
                "{}cq-team-a{}",
                t.queue_not_found.before, t.queue_not_found.after
            ),
            None,
            "GPU210",
        ),
    ];
    for q in &t.quota_in_use {
        cases.push((
            format!("{q} nvidia.com/gpu in flavor h100-train, 8 more needed"),
            None,
            "GPU206",
        ));
        cases.push((
            format!("{q} nvidia.com/gpu in flavor h100-train, 8 more needed"),
            Some("gpu-all"),
            "GPU207",
        ));
    }
    for q in &t.quota_in_use_cohort {
        cases.push((
            format!("{q} for nvidia.com/gpu in flavor h100-train, 8 more needed"),
            Some("gpu-all"),
            "GPU207",
        ));
    }
    for q in &t.request_above_quota {
        cases.push((format!("{q} nvidia.com/gpu in flavor h100-train, previously considered podsets requests (0) + current podset request (80) > maximum capacity (64)"), None, "GPU206"));
    }
    for q in &t.queue_unusable {
        cases.push((format!("LocalQueue gpuctl-queue {q}"), None, "GPU210"));
    }
    for (msg, cohort, id) in cases {
        let r = kueue_in(healthy(), &msg, "Pending", cohort);
        only(&r, id);
    }
    // The reason alone says it, whatever the message.
    only(
        &kueue(healthy(), "something new", &t.inadmissible_reason),
        "GPU210",
    );
    // Kueue's words matter, not their case; text in other scripts around them is kept whole.
    let r = kueue(
        healthy(),
        "RESOURCE CPU UNAVAILABLE IN CLUSTERQUEUE",
        "Pending",
    );
    assert!(only(&r, "GPU209").title.contains("`CPU`"));
    let r = kueue(
        healthy(),
        "İ resource é unavailable in ClusterQueue İİ",
        "Pending",
    );
    assert!(only(&r, "GPU209").title.contains("`é`"));
    // An unknown wording is the generic finding, with Kueue's own words.
    let r = kueue(healthy(), "ressource unavailable", "Pending");
    assert!(only(&r, "GPU206").title.contains("ressource unavailable"));
}

#[test]
fn gpu211_stuck_pod_group() {
    let d = with(
        healthy(),
        DiagKind::PodGroup,
        vec![
            json!({"metadata": {"namespace": "team-a-train", "name": "pg"}, "spec": {"minMember": 4, "queue": "q"},
            "status": {"phase": "Inqueue", "running": 1, "conditions": [{"type": "Unschedulable", "status": "True",
                "message": "3/4 tasks in gang unschedulable: pod group is not ready, 1 Pending, 3 minAvailable"}]}}),
        ],
    );
    let f = only(&run(&d), "GPU211").clone();
    assert!(f.title.contains("1 of 4 members running"));
}

#[test]
fn gpu230_device_plugin_crash_looping_on_one_pool() {
    let mut d = healthy();
    d.pods
        .retain(|p| p.metadata.name.as_deref() != Some("nvidia-device-plugin-daemonset-b"));
    d.ingest(
        DiagKind::Pod,
        vec![operand(
            "nvidia-device-plugin-daemonset-b",
            "nvidia-device-plugin-daemonset",
            "t1",
            false,
        )],
    );
    d.finish();
    let r = run(&d);
    let f = only(&r, "GPU230");
    assert!(
        f.title
            .contains("device plugin pods are not Ready on pool h100-train (CrashLoopBackOff)"),
        "{}",
        f.title
    );
    assert!(f.subjects.contains(&"node/t1".to_string()));
    assert!(
        f.evidence[0].text.contains("7 restarts")
            && f.evidence[0].text.contains("Driver Not Loaded")
    );
    assert!(f.fix.contains("--previous"));
}

#[test]
fn gpu231_gpu232_operator_crs_not_ready() {
    let mut d = healthy();
    d.cluster_policies.clear();
    d.ingest(
        DiagKind::ClusterPolicy,
        vec![json!({"metadata": {"name": "cluster-policy"}, "status": {"state": "notReady",
            "conditions": [{"type": "Error", "status": "True", "reason": "OperandNotReady", "message": "ClusterPolicy is not ready, states not ready: [state-device-plugin]"}]}})],
    );
    d.ingest(
        DiagKind::NvidiaDriver,
        vec![json!({"metadata": {"name": "cluster-default"}, "status": {"state": "notReady"}})],
    );
    d.finish();
    let r = run(&d);
    assert!(
        only(&r, "GPU231")
            .evidence
            .iter()
            .any(|e| e.text.contains("state-device-plugin"))
    );
    only(&r, "GPU232");
}

#[test]
fn gpu233_mig_config_failed() {
    let mut n = infer("i1");
    n["metadata"]["labels"]["nvidia.com/mig.config"] = json!("all-3g.40gb");
    n["metadata"]["labels"]["nvidia.com/mig.config.state"] = json!("failed");
    let r = run(&with(healthy(), DiagKind::Node, vec![n]));
    let f = only(&r, "GPU233");
    assert!(
        f.fix
            .contains("nvidia.com/mig.config=all-3g.40gb --overwrite")
    );
}

#[test]
fn gpu234_gpu235_driver_against_blueprint_and_cuda() {
    // Seed 000: a node on an older driver than the tenants' CUDA needs.
    let mut old = train("t2");
    old["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] = json!("550.163.01");
    let r = run(&with(healthy(), DiagKind::Node, vec![old]));
    let drift = only(&r, "GPU234");
    assert!(
        drift
            .title
            .contains("runs driver 550.163.01; the blueprint says 580.173.02")
    );
    assert!(
        drift
            .fix
            .contains("gpuctl upgrade driver dgx.yaml --pool h100-train --to 580.173.02")
    );
    let cuda: Vec<&Finding> = r.findings.iter().filter(|f| f.id == "GPU235").collect();
    // team-a 12.8 (570.26) -> MVC warning; team-b 12.8 likewise; dev 13.0 -> error.
    let dev = cuda
        .iter()
        .find(|f| f.subjects.contains(&"tenant/dev".to_string()) && f.severity == Severity::Error)
        .expect("dev's CUDA 13.0 on driver 550");
    assert!(dev.title.contains("CUDA 13.0"), "{}", dev.title);
    assert!(
        dev.cause.contains("CUDA driver version is insufficient"),
        "{}",
        dev.cause
    );
    assert!(dev.subjects.contains(&"node/t2".to_string()));
    let a = cuda
        .iter()
        .find(|f| f.subjects.contains(&"tenant/team-a".to_string()))
        .unwrap();
    assert_eq!(a.severity, Severity::Warning);
    // The serving tenant's queue uses the inference pool only.
    assert!(
        !cuda
            .iter()
            .any(|f| f.subjects.contains(&"tenant/serving".to_string()))
    );
}

#[test]
fn gpu236_gpu_containers_do_not_start() {
    let mut p = pod(
        "team-a-train",
        "p",
        json!({"nvidia.com/gpu": "1"}),
        Some("t1"),
    );
    p["status"] = json!({"phase": "Pending", "containerStatuses": [{"name": "main", "ready": false, "restartCount": 0,
        "image": "i", "imageID": "", "state": {"waiting": {"reason": "RunContainerError",
        "message": "failed to create containerd task: OCI runtime create failed: nvidia-container-cli: initialization error"}}}]});
    let r = run(&with(healthy(), DiagKind::Pod, vec![p]));
    let f = only(&r, "GPU236");
    assert!(f.evidence[0].text.contains("nvidia-container-cli"));
}

#[test]
fn gpu240_gpu241_pool_nodes() {
    let mut down = train("t2");
    down["status"]["conditions"] = json!([{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}]);
    let mut bare = train("t3");
    bare["status"]["allocatable"] = json!({"cpu": "200"});
    let r = run(&with(healthy(), DiagKind::Node, vec![down, bare]));
    assert!(
        only(&r, "GPU240").evidence[0]
            .text
            .contains("Kubelet stopped posting")
    );
    assert!(only(&r, "GPU241").subjects.contains(&"node/t3".to_string()));
}

#[test]
fn gpu249_queueing_system_missing_and_forbidden_kinds() {
    let mut d = healthy();
    d.mark_unread(
        DiagKind::Workload,
        crate::diagnostics::UnreadWhy::NotServed,
        "",
    );
    d.mark_unread(
        DiagKind::PodGroup,
        crate::diagnostics::UnreadWhy::NotServed,
        "",
    );
    d.mark_unread(
        DiagKind::Event,
        crate::diagnostics::UnreadWhy::Forbidden,
        "events is forbidden",
    );
    d.finish();
    let r = run(&d);
    let f: Vec<&Finding> = r.findings.iter().filter(|f| f.id == "GPU249").collect();
    assert_eq!(f.len(), 2, "Volcano is not this blueprint's: {f:#?}");
    assert!(
        f.iter()
            .any(|f| f.severity == Severity::Error && f.cause.contains("Kueue is not installed"))
    );
    assert!(
        f.iter()
            .any(|f| f.severity == Severity::Warning && f.fix.contains("kubectl auth can-i list"))
    );
}

#[test]
fn many_pods_for_one_reason_are_one_finding_and_output_is_deterministic() {
    let pods: Vec<Value> = (0..30)
        .map(|i| {
            let mut p = pod(
                "team-a-train",
                &format!("w-{i}"),
                json!({"nvidia.com/gpu": "1"}),
                None,
            );
            p["metadata"]["ownerReferences"][0]["name"] = json!("one-job");
            p["spec"]["tolerations"] = json!([]);
            p
        })
        .collect();
    let d = with(healthy(), DiagKind::Pod, pods);
    let a = run(&d);
    let f = only(&a, "GPU201");
    assert_eq!(f.subjects.len(), 31, "30 pods and their job");
    assert!(f.evidence.len() <= MAX_EVIDENCE);
    let b = run(&d);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

#[test]
fn credentials_in_messages_are_masked() {
    let d = with(
        healthy(),
        DiagKind::Event,
        vec![refusal(
            "Job",
            "j",
            "Error creating: must specify requests.cpu; token=abcdefghijklmnop1234",
        )],
    );
    let text = serde_json::to_string(&run(&d)).unwrap();
    assert!(!text.contains("abcdefghijklmnop1234"), "{text}");
}

#[test]
fn cluster_text_in_findings_is_bounded_and_carries_no_control_characters() {
    let mut r = run(&healthy());
    let hostile = format!("\u{1b}]0;owned\u{7}\u{1b}[2J{}\nnext", "x".repeat(5000));
    r.extend([Finding {
        id: "GPU200".into(),
        layer: Layer::Scheduling,
        severity: Severity::Error,
        title: hostile.clone(),
        subjects: vec![hostile.clone()],
        evidence: vec![Evidence {
            source: hostile.clone(),
            text: hostile.clone(),
            time: None,
        }],
        cause: hostile.clone(),
        fix: hostile,
    }]);
    let f = &r.findings[0];
    let e = &f.evidence[0];
    for s in [
        &f.title,
        &f.subjects[0],
        &e.source,
        &e.text,
        &f.cause,
        &f.fix,
    ] {
        assert!(!s.chars().any(char::is_control), "{s:?}");
        assert!(
            s.len() <= gpuctl_model::located::MAX_MESSAGE + 32,
            "{} bytes",
            s.len()
        );
        assert!(s.starts_with("?]0;owned??[2J"), "{}", &s[..20]);
    }
}

/// A pod whose template claim the resourceclaim controller could not create for quota (the event
/// it records, the pod without `resourceClaimStatuses`): GPU214 names the quota and the claim. The
/// same event for a pod that has its claim now (the quota was raised) is history, not a finding.
#[test]
fn gpu214_claim_refused_by_quota() {
    let claim_pod = |name: &str, claimed: bool| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "research", "name": name},
            "spec": {"containers": [{"name": "c", "image": "img", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100"}]},
            "status": {"phase": "Pending"}});
        if claimed {
            p["status"]["resourceClaimStatuses"] =
                json!([{"name": "gpu", "resourceClaimName": format!("{name}-gpu-x")}]);
        }
        p
    };
    let event = |pod: &str| {
        json!({"metadata": {"namespace": "research", "name": format!("{pod}.1")},
            "involvedObject": {"kind": "Pod", "namespace": "research", "name": pod},
            "reason": "FailedResourceClaimCreation", "type": "Warning",
            "message": format!("PodResourceClaim gpu: create ResourceClaim : resourceclaims.resource.k8s.io \"{pod}-gpu-8lgwg\" is forbidden: exceeded quota: research-dra-quota, requested: h100.shapes.gpuctl.dev.deviceclass.resource.k8s.io/devices=1, used: h100.shapes.gpuctl.dev.deviceclass.resource.k8s.io/devices=8, limited: h100.shapes.gpuctl.dev.deviceclass.resource.k8s.io/devices=8"),
            "count": 3, "lastTimestamp": "2026-12-01T11:00:00Z"})
    };
    let mut d = healthy();
    d.ingest(
        DiagKind::Pod,
        vec![claim_pod("waiting", false), claim_pod("served", true)],
    );
    d.ingest(
        DiagKind::ResourceQuota,
        vec![
            json!({"metadata": {"namespace": "research", "name": "research-dra-quota"},
            "spec": {"hard": {"h100.shapes.gpuctl.dev.deviceclass.resource.k8s.io/devices": "8"}},
            "status": {"hard": {"h100.shapes.gpuctl.dev.deviceclass.resource.k8s.io/devices": "8"},
                "used": {"h100.shapes.gpuctl.dev.deviceclass.resource.k8s.io/devices": "8"}}}),
        ],
    );
    d.ingest(DiagKind::Event, vec![event("waiting"), event("served")]);
    d.finish();
    // DRA pods are kept although they request no nvidia.com resource.
    assert_eq!(
        d.pods
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some("research"))
            .count(),
        2
    );
    let r = run(&d);
    let f = only(&r, "GPU214");
    assert!(
        f.title.contains("research/research-dra-quota"),
        "{}",
        f.title
    );
    assert!(
        f.title.contains("claim `gpu` of pod/research/waiting"),
        "{}",
        f.title
    );
    assert!(
        f.evidence.iter().any(|e| e
            .text
            .contains("h100.shapes.gpuctl.dev.deviceclass.resource.k8s.io/devices: used 8 of 8")),
        "{:?}",
        f.evidence
    );
    // No other finding for these pods: they request no device-plugin resource.
    assert!(
        !r.findings
            .iter()
            .any(|f| f.id != "GPU214" && f.subjects.iter().any(|s| s.contains("research"))),
        "{:#?}",
        r.findings
    );
}

/// A Pending DRA pod the scheduler cannot place for its claims (its condition quotes the
/// DynamicResources plugin) is GPU215 with the scheduler's words; a DRA pod without that message
/// (not yet tried) is not.
#[test]
fn gpu215_claim_unallocatable() {
    let dra_pod = |name: &str, message: Option<&str>| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "research", "name": name},
            "spec": {"containers": [{"name": "c", "image": "img", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100"}]},
            "status": {"phase": "Pending"}});
        if let Some(m) = message {
            p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": m}]);
        }
        p
    };
    let mut d = healthy();
    d.ingest(
        DiagKind::Pod,
        vec![
            dra_pod("big", Some("0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")),
            dra_pod("cel", Some("running \"DynamicResources\" filter plugin: claim research/cel-gpu-x: selector #0: CEL runtime error: no such key: profile")),
            dra_pod("fresh", None),
        ],
    );
    d.finish();
    let r = run(&d);
    let found: Vec<&Finding> = r.findings.iter().filter(|f| f.id == "GPU215").collect();
    let subjects: Vec<&str> = found.iter().map(|f| f.subjects[0].as_str()).collect();
    assert_eq!(
        subjects,
        ["pod/research/big", "pod/research/cel"],
        "{found:#?}"
    );
    assert!(
        found[0]
            .evidence
            .iter()
            .any(|e| e.text.contains("cannot allocate all claims"))
    );
    assert!(found[1].cause.contains("attribute"), "{}", found[1].cause);
}

/// Device taints: a device NVIDIA's driver tainted after Xid 79 is GPU217 with the catalog's words
/// (an informational `None` taint is not reported); a Pending DRA pod the scheduler cannot place
/// while devices of the nodes it may use are tainted by a DeviceTaintRule is GPU218 naming the
/// taint and the rule; a pod pinned to a node whose devices are untainted is not.
#[test]
fn gpu217_gpu218_device_taints() {
    let slice = |node: &str, devices: Value| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-gpu")},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
    };
    let gpu = |name: &str, taints: Value| json!({"name": name, "attributes": {"type": {"string": "gpu"}}, "taints": taints});
    let dra_pod = |name: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "research", "name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [{"name": "c", "image": "img", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": "0/1 nodes are available: 1 cannot allocate all claims."}]}})
    };
    let mut d = healthy();
    let mut nodes = vec![train("t0"), train("t1")];
    for (n, host) in nodes.iter_mut().zip(["t0", "t1"]) {
        n["metadata"]["labels"]["kubernetes.io/hostname"] = json!(host);
    }
    d.nodes.clear();
    d.ingest(DiagKind::Node, nodes);
    d.ingest(
        DiagKind::ResourceSlice,
        vec![
            slice(
                "t0",
                json!([
                    gpu("gpu-0", json!([{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}])),
                    gpu("gpu-1", json!([{"key": "gpu.nvidia.com/xid", "value": "43", "effect": "None"}])),
                ]),
            ),
            slice("t1", json!([gpu("gpu-0", json!([]))])),
        ],
    );
    d.ingest(
        DiagKind::DeviceTaintRule,
        vec![json!({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
            "metadata": {"name": "gpuctl-maintenance-rma"},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "t0", "device": "gpu-1"},
                "taint": {"key": "gpuctl.dev/maintenance", "value": "rma", "effect": "NoSchedule"}}})],
    );
    d.ingest(
        DiagKind::Pod,
        vec![dra_pod("on-t0", "t0"), dra_pod("on-t1", "t1")],
    );
    d.finish();
    let r = run(&d);
    let xid = only(&r, "GPU217");
    assert_eq!(xid.subjects[0], "node/t0/gpu-0");
    assert!(
        xid.title.contains("Xid 79") && xid.title.contains("gpu.nvidia.com/xid=79:NoSchedule"),
        "{}",
        xid.title
    );
    assert!(xid.fix.contains("restart"), "{}", xid.fix);
    let pending = only(&r, "GPU218");
    assert_eq!(pending.subjects[0], "pod/research/on-t0");
    assert!(
        pending
            .subjects
            .contains(&"devicetaintrule/gpuctl-maintenance-rma".to_string()),
        "{:?}",
        pending.subjects
    );
    let evidence: Vec<&str> = pending.evidence.iter().map(|e| e.text.as_str()).collect();
    assert!(
        evidence.iter().any(|e| e.contains(
            "device gpu-1 of node t0 tainted gpuctl.dev/maintenance=rma:NoSchedule by DeviceTaintRule gpuctl-maintenance-rma"
        )),
        "{evidence:#?}"
    );
    assert!(
        evidence
            .iter()
            .any(|e| e.contains("gpu.nvidia.com/xid=79:NoSchedule by its DRA driver")),
        "{evidence:#?}"
    );
    assert!(
        pending.fix.contains("spec.dra.maintenance"),
        "{}",
        pending.fix
    );
}

/// A cluster on Kubernetes 1.36 with one pool on the device plugin and one moved to DRA under
/// `spec.dra.extendedResources` (the chart's `gpu.nvidia.com` serves `nvidia.com/gpu`).
fn migrated_blueprint(kube: &str) -> Blueprint {
    let text = format!(
        r#"apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: migrated
spec:
  kubernetes:
    version: "{kube}"
  gpuOperator:
    version: v26.7.0
    driver:
      version: "{DRIVER}"
      kernelModuleType: open
  nodePools:
    - name: dp
      selector: {{ gpuctl.dev/pool: dp }}
      nodes: 1
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
    - name: dra
      selector: {{ gpuctl.dev/pool: dra }}
      nodes: 2
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
      gpuPlugin: dra
  dra:
    driver: {{ deployment: standalone, version: v25.12.0 }}
    extendedResources: true
"#
    );
    gpuctl_model::blueprint::load_str("migrated.yaml", &text)
        .expect("loads")
        .blueprint
}

/// The migrated cluster as the 1.36 scheduler leaves it: the device-plugin node advertises
/// `nvidia.com/gpu: 8`; DRA node `dra0` advertises no GPU and publishes 8 GPUs in its slice; pod
/// `on-dra` (asking `nvidia.com/gpu: 2`) is bound to it through the claim the scheduler made
/// (`status.extendedResourceClaimStatus`, 2 devices), and a tenant's template claim holds a third
/// device; `waiting` asks `nvidia.com/gpu: 8` on the DRA pool and is Pending.
fn migrated() -> Diagnostics {
    let node = |name: &str, pool: &str, alloc: Value| {
        let mut n = self::node(name, pool, alloc, DRIVER);
        n["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
        n
    };
    let gpus: Vec<Value> = (0..8)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"}}}))
        .collect();
    let plain = |name: &str, n: u32, node: Option<&str>| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "research", "name": name},
            "spec": {"nodeSelector": {"gpuctl.dev/pool": "dra"}, "tolerations": tolerations(),
                "containers": [{"name": "c", "image": "img",
                    "resources": {"requests": {"nvidia.com/gpu": n.to_string()}, "limits": {"nvidia.com/gpu": n.to_string()}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        match node {
            Some(node) => {
                p["spec"]["nodeName"] = json!(node);
                p["status"]["extendedResourceClaimStatus"] = json!({
                    "resourceClaimName": format!("{name}-extended-resources-x7k2p"),
                    "requestMappings": [{"containerName": "c", "resourceName": "nvidia.com/gpu", "requestName": "container-0-request-0"}]});
            }
            None => {
                p["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                    "reason": "Unschedulable", "message": "0/3 nodes are available: 1 cannot allocate all claims.",
                    "lastTransitionTime": "2026-12-01T10:00:00Z"}]});
            }
        }
        p
    };
    let claim = |name: &str, devices: &[&str]| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"namespace": "research", "name": name},
            "status": {"allocation": {"devices": {"results": devices.iter().map(|d| json!(
                {"request": "r", "driver": "gpu.nvidia.com", "pool": "dra0", "device": d})).collect::<Vec<_>>()}},
                "reservedFor": [{"resource": "pods", "name": "x", "uid": "u"}]}})
    };
    let mut d = Diagnostics::new(OP, Some("2026-12-01T12:00:00Z".into()));
    d.ingest(
        DiagKind::Node,
        vec![
            node("dp0", "dp", json!({"nvidia.com/gpu": "8", "cpu": "200"})),
            node("dra0", "dra", json!({"cpu": "200"})),
        ],
    );
    d.ingest(
        DiagKind::ResourceSlice,
        vec![json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "dra0-gpu.nvidia.com-abcde"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "dra0",
                "pool": {"name": "dra0", "generation": 1, "resourceSliceCount": 1}, "devices": gpus}})],
    );
    d.ingest(
        DiagKind::ResourceClaim,
        vec![
            claim("on-dra-extended-resources-x7k2p", &["gpu-0", "gpu-1"]),
            claim("train-gpu-q8r4s", &["gpu-2"]),
        ],
    );
    d.ingest(
        DiagKind::Pod,
        vec![plain("on-dra", 2, Some("dra0")), plain("waiting", 8, None)],
    );
    d.ingest(
        DiagKind::ClusterPolicy,
        vec![json!({"metadata": {"name": "cluster-policy"}, "status": {"state": "ready"}})],
    );
    d.finish();
    d
}

/// Kubernetes 1.36 serves `nvidia.com/gpu` from DRA on a migrated node that advertises none: the
/// doctor counts the node's slice devices as that name (less the devices other claims hold; the
/// pod bound through its extended-resource claim counts by its request), so the healthy migrated
/// node and pod are no finding and a pod asking more than is free there is GPU200 with the real
/// room, not "matches no node that has it" (GPU202). The device plugin's own failure stays GPU241,
/// and a DRA node without a slice is GPU241 naming the slice.
#[test]
fn dra_served_extended_resources_are_room_not_a_missing_device_plugin() {
    let bp = migrated_blueprint("1.36.3");
    let r = diagnose(&bp, Catalog::embedded(), &migrated(), "migrated.yaml");
    assert_eq!(ids(&r), ["GPU200"], "{:#?}", r.findings);
    let f = only(&r, "GPU200");
    assert_eq!(f.subjects[0], "pod/research/waiting");
    assert!(
        f.cause.contains("5 `nvidia.com/gpu` free") && f.cause.contains("needs 8"),
        "{}",
        f.cause
    );
    let dra = r.pools.iter().find(|p| p.pool == "dra").unwrap();
    assert_eq!(dra.free["nvidia.com/gpu"], (5, 5));

    // The device plugin's node lost its GPUs; a second DRA node published no slice.
    let mut d = migrated();
    let mut bare = d.nodes[0].clone();
    bare.metadata.name = Some("dp1".into());
    let status = bare.status.as_mut().unwrap();
    status
        .allocatable
        .as_mut()
        .unwrap()
        .remove("nvidia.com/gpu");
    status.capacity.as_mut().unwrap().remove("nvidia.com/gpu");
    let mut sliceless = d.nodes[1].clone();
    sliceless.metadata.name = Some("dra1".into());
    d.nodes.push(bare);
    d.nodes.push(sliceless);
    let r = diagnose(&bp, Catalog::embedded(), &d, "migrated.yaml");
    let nogpu: Vec<&Finding> = r.findings.iter().filter(|f| f.id == "GPU241").collect();
    assert_eq!(nogpu.len(), 2, "{nogpu:#?}");
    assert!(nogpu[0].subjects.contains(&"node/dp1".to_string()));
    assert!(nogpu[0].evidence[0].text.contains("no nvidia.com/*"));
    assert!(nogpu[1].subjects.contains(&"node/dra1".to_string()));
    assert!(
        nogpu[1].evidence[0].text.contains("no ResourceSlice"),
        "{:?}",
        nogpu[1].evidence
    );

    // Declared for 1.35 (the field dropped, nothing served from DRA by name): the Pending pod asks
    // a name no node it selects has, as the 1.35 scheduler sees it.
    let r = diagnose(
        &migrated_blueprint("1.35.4"),
        Catalog::embedded(),
        &migrated(),
        "migrated.yaml",
    );
    assert!(ids(&r).contains(&"GPU202"), "{:#?}", r.findings);
    assert!(!ids(&r).contains(&"GPU241"), "{:#?}", r.findings);
}
