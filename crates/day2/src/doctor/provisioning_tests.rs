//! GPU225, GPU245 and GPU246 on hand-built readings of a Karpenter cluster, against the shipped
//! EKS Karpenter example (pool `h100-train`: Karpenter on EKS, readiness key
//! `readiness.k8s.io/nvidia-gpu-not-ready` removed by the Node Readiness Controller).

use serde_json::{Value, json};

use crate::diagnostics::{DiagKind, Diagnostics};
use crate::doctor::{Finding, Report, diagnose};
use gpuctl_model::blueprint::Blueprint;

const KEY: &str = "readiness.k8s.io/nvidia-gpu-not-ready";
const NOW: &str = "2026-12-01T12:00:00Z";

fn blueprint(edit: Option<(&str, &str)>) -> Blueprint {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../blueprints/eks-karpenter.yaml"
    );
    let mut text = std::fs::read_to_string(path).expect("the shipped blueprint");
    if let Some((from, to)) = edit {
        assert!(text.contains(from), "{from}");
        text = text.replace(from, to);
    }
    gpuctl_model::blueprint::load_bytes("eks.yaml", text.into_bytes())
        .expect("loads")
        .blueprint
}

fn run(bp: &Blueprint, d: &Diagnostics) -> Report {
    diagnose(
        bp,
        gpuctl_model::profiles::Catalog::embedded(),
        d,
        "eks.yaml",
    )
}

fn found<'a>(r: &'a Report, id: &str) -> Vec<&'a Finding> {
    r.findings.iter().filter(|f| f.id == id).collect()
}

fn text(f: &Finding) -> String {
    serde_json::to_string(f).unwrap()
}

fn nodepool(used: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "h100-train"},
        "spec": {
            "template": {
                "metadata": {"labels": {"gpuctl.dev/pool": "h100-train"}},
                "spec": {
                    "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}],
                    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                    "startupTaints": [{"key": KEY, "value": "pending", "effect": "NoSchedule"}]
                }
            },
            "limits": {"nvidia.com/gpu": "32"}
        },
        "status": {"resources": {"nvidia.com/gpu": used, "cpu": "768"}}
    })
}

fn pending_pod(name: &str, gpus: &str, tolerate: bool) -> Value {
    let tolerations = if tolerate {
        json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    json!({
        "metadata": {"namespace": "research", "name": name},
        "spec": {
            "containers": [{"name": "main", "image": "img", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
            "tolerations": tolerations,
            "nodeSelector": {"gpuctl.dev/pool": "h100-train"}
        },
        "status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available", "lastTransitionTime": "2026-12-01T11:50:00Z"}]}
    })
}

fn reading(kinds: Vec<(DiagKind, Vec<Value>)>) -> Diagnostics {
    let mut d = Diagnostics::new("gpu-operator", Some(NOW.into()));
    for (k, items) in kinds {
        d.ingest(k, items);
    }
    d.finish();
    d
}

#[test]
fn gpu225_names_the_pod_the_nodepool_its_limit_and_usage() {
    let bp = blueprint(None);
    let d = reading(vec![
        (DiagKind::NodePool, vec![nodepool("32")]),
        (DiagKind::Pod, vec![pending_pod("train-9", "8", true)]),
    ]);
    let r = run(&bp, &d);
    let f = found(&r, "GPU225");
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    let t = text(f[0]);
    for want in [
        "pod/research/train-9",
        "nodepool/h100-train",
        "limit of 32 `nvidia.com/gpu` (32 in use)",
        "the pod asks 8",
        "provisioner.maxNodes",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }

    // Room left under the limit: no finding.
    let d = reading(vec![
        (DiagKind::NodePool, vec![nodepool("24")]),
        (DiagKind::Pod, vec![pending_pod("train-9", "8", true)]),
    ]);
    assert!(found(&run(&bp, &d), "GPU225").is_empty());
    // A pod that could not use the pool anyway (its taint not tolerated): not this finding.
    let d = reading(vec![
        (DiagKind::NodePool, vec![nodepool("32")]),
        (DiagKind::Pod, vec![pending_pod("train-9", "8", false)]),
    ]);
    assert!(found(&run(&bp, &d), "GPU225").is_empty());
    // A pod Karpenter nominated to a node already there waits for that node (its startup
    // taint), not for room under the limit.
    let nominated = json!({
        "metadata": {"namespace": "research", "name": "train-9.2"},
        "involvedObject": {"kind": "Pod", "namespace": "research", "name": "train-9"},
        "reason": "Nominated", "type": "Normal",
        "message": "Pod should schedule on: nodeclaim/h100-train-x, node/gpu-a",
        "lastTimestamp": "2026-12-01T11:59:00Z"
    });
    let d = reading(vec![
        (DiagKind::NodePool, vec![nodepool("32")]),
        (DiagKind::Pod, vec![pending_pod("train-9", "8", true)]),
        (DiagKind::Event, vec![nominated]),
    ]);
    assert!(found(&run(&bp, &d), "GPU225").is_empty());
    // Without Karpenter's CRDs nothing is read and nothing is found; not an unread finding either.
    let mut d = reading(vec![(
        DiagKind::Pod,
        vec![pending_pod("train-9", "8", true)],
    )]);
    d.mark_unread(
        DiagKind::NodePool,
        crate::diagnostics::UnreadWhy::NotServed,
        "",
    );
    let r = run(&bp, &d);
    assert!(found(&r, "GPU225").is_empty() && found(&r, "GPU249").is_empty());
}

#[test]
fn gpu225_follows_karpenters_event_when_usage_leaves_room() {
    // On a cloud a pool's limit refuses an instance larger than what is left, even when the pod's
    // own request would fit: Karpenter's event says so.
    let bp = blueprint(None);
    let event = json!({
        "metadata": {"namespace": "research", "name": "train-9.1"},
        "involvedObject": {"kind": "Pod", "namespace": "research", "name": "train-9"},
        "reason": "FailedScheduling", "type": "Warning",
        "message": "Failed to schedule pod, incompatible with nodepool \"l40s-infer\", did not tolerate taint; all available instance types exceed limits for nodepool (NodePool=h100-train)",
        "lastTimestamp": "2026-12-01T11:59:00Z"
    });
    let d = reading(vec![
        (DiagKind::NodePool, vec![nodepool("30")]),
        (DiagKind::Pod, vec![pending_pod("train-9", "1", true)]),
        (DiagKind::Event, vec![event]),
    ]);
    let r = run(&bp, &d);
    let f = found(&r, "GPU225");
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(
        text(f[0]).contains("exceed limits for nodepool"),
        "{}",
        text(f[0])
    );
}

#[test]
fn karpenters_limit_message_is_read_for_its_own_nodepool_only() {
    let m = "Failed to schedule pod, incompatible with nodepool \"kd-mig\", did not tolerate taint; all available instance types exceed limits for nodepool (NodePool=kd-train)";
    let lim = "exceed limits for nodepool";
    assert!(super::limit_names(m, lim, "kd-train"));
    assert!(!super::limit_names(m, lim, "kd-mig"));
    assert!(!super::limit_names(m, lim, "kd-trai"));
    assert!(super::limit_names(
        "... exceed limits for nodepool: \"a\"",
        lim,
        "a"
    ));
}

fn node(name: &str, ready_since: &str, taint: bool, ready: bool) -> Value {
    let mut taints =
        vec![json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})];
    if taint {
        taints.push(json!({"key": KEY, "value": "pending", "effect": "NoSchedule"}));
    }
    json!({
        "metadata": {"name": name, "creationTimestamp": "2026-12-01T10:00:00Z",
            "labels": {"gpuctl.dev/pool": "h100-train", "karpenter.sh/nodepool": "h100-train"}},
        "spec": {"taints": taints},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"},
                "reason": "KubeletReady", "lastTransitionTime": ready_since}]
        }
    })
}

#[test]
fn gpu245_names_node_pool_taint_age_and_who_removes_it() {
    let bp = blueprint(None);
    let d = reading(vec![(
        DiagKind::Node,
        vec![node("gpu-a", "2026-12-01T11:20:00Z", true, true)],
    )]);
    let r = run(&bp, &d);
    let f = found(&r, "GPU245");
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    let t = text(f[0]);
    for want in [
        "node/gpu-a",
        "pool/h100-train",
        KEY,
        "after 40m",
        "Node Readiness Controller",
        "nvidia.com/GPUReady",
        "15 min",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }
    // Within the grace (10 min), not Ready yet, or without the taint: nothing.
    for n in [
        node("gpu-a", "2026-12-01T11:50:00Z", true, true),
        node("gpu-a", "2026-12-01T11:20:00Z", true, false),
        node("gpu-a", "2026-12-01T11:20:00Z", false, true),
    ] {
        let d = reading(vec![(DiagKind::Node, vec![n])]);
        assert!(found(&run(&bp, &d), "GPU245").is_empty());
    }
    // Something else removes it: the finding says so.
    let bp = blueprint(Some((
        "signal: nodeReadinessController",
        "signal: external",
    )));
    let d = reading(vec![(
        DiagKind::Node,
        vec![node("gpu-a", "2026-12-01T11:20:00Z", true, true)],
    )]);
    let t = text(found(&run(&bp, &d), "GPU245")[0]);
    assert!(t.contains("signal: external"), "{t}");
}

fn claim(name: &str, conditions: Value) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "h100-train"}},
        "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]},
        "status": {"conditions": conditions}
    })
}

#[test]
fn gpu246_failed_nodeclaims_and_not_those_in_progress() {
    let bp = blueprint(None);
    let launch_failed = claim(
        "h100-train-a",
        json!([{"type": "Launched", "status": "Unknown", "reason": "LaunchFailed",
            "message": "translating nodeclaim to node, instance type not found (instance-type=p9.huge)",
            "lastTransitionTime": "2026-12-01T11:58:00Z"}]),
    );
    let two_nodes = claim(
        "h100-train-b",
        json!([{"type": "Launched", "status": "True", "reason": "Launched"},
            {"type": "Registered", "status": "False", "reason": "MultipleNodesFound",
            "message": "Invariant violated, matched multiple nodes"}]),
    );
    let waiting = claim(
        "h100-train-c",
        json!([{"type": "Launched", "status": "True", "reason": "Launched"},
            {"type": "Registered", "status": "True", "reason": "Registered"},
            {"type": "Initialized", "status": "Unknown", "reason": "StartupTaintsExist"}]),
    );
    let fresh = claim(
        "h100-train-d",
        json!([{"type": "Launched", "status": "Unknown", "reason": "AwaitingReconciliation"}]),
    );
    let ice = json!({
        "metadata": {"namespace": "default", "name": "h100-train-e.1"},
        "involvedObject": {"kind": "NodeClaim", "name": "h100-train-e"},
        "reason": "InsufficientCapacityError", "type": "Warning",
        "message": "NodeClaim h100-train-e event: creating instance, insufficient capacity",
        "lastTimestamp": "2026-12-01T11:59:00Z"
    });
    let d = reading(vec![
        (
            DiagKind::NodeClaim,
            vec![launch_failed, two_nodes, waiting, fresh],
        ),
        (DiagKind::Event, vec![ice]),
    ]);
    let r = run(&bp, &d);
    let f = found(&r, "GPU246");
    let all: Vec<String> = f.iter().map(|f| text(f)).collect();
    assert_eq!(f.len(), 3, "{all:#?}");
    let find = |claim: &str| {
        all.iter()
            .find(|t| t.contains(&format!("nodeclaim/{claim}")))
            .unwrap_or_else(|| panic!("{claim}: {all:#?}"))
    };
    let a = find("h100-train-a");
    for want in [
        "failed to launch",
        "LaunchFailed",
        "instance type not found",
        "p5.48xlarge",
        "nodepool/h100-train",
    ] {
        assert!(a.contains(want), "{want}: {a}");
    }
    assert!(find("h100-train-b").contains("MultipleNodesFound"));
    assert!(find("h100-train-e").contains("insufficient capacity"));
    assert!(
        !all.iter()
            .any(|t| t.contains("h100-train-c") || t.contains("h100-train-d"))
    );
}
