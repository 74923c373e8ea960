//! Generated Day-2 diagnostics of the shipped DGX H100 blueprint (`blueprints/dgx-h100-training.yaml`):
//! the example snapshot a newcomer runs `gpuctl doctor` on without a cluster
//! (`blueprints/snapshots/dgx-h100-training-day2.json`, checked by `tests/offline/doctor_example.rs`), and
//! the same cluster scaled up for the doctor and status benchmarks. Deterministic: the same sizes
//! give the same bytes. Not part of the public interface.
//!
//! The cluster has the stories of issue 16 in it, each as the real controllers would leave it:
//! - a training node still on driver 550.163.01 after the pool moved to 580.173.02, where a `dev`
//!   pod built for CUDA 13.0 crash-loops with "CUDA driver version is insufficient" (seed 000);
//! - eight free GPUs spread over four training nodes while a 4-GPU pod is Pending;
//! - an inference pod asking for `nvidia.com/mig-2g.20gb`, which no pool offers, while 3g.40gb
//!   slices sit idle;
//! - the device plugin crash-looping on one inference node, which therefore advertises no slices;
//! - team-b's Workload waiting on the cohort (Kueue's own message);
//! - the dev namespace's quota used up (the Job controller's `FailedCreate`).

use serde_json::{Value, json};

use crate::diagnostics::{DiagKind, Diagnostics};
use crate::snapshot::{SNAPSHOT_FORMAT_VERSION, Snapshot};

const OP: &str = "gpu-operator";
const DRIVER: &str = "580.173.02";
const OLD_DRIVER: &str = "550.163.01";
const READ_AT: &str = "2026-12-01T10:00:00Z";
const T0: &str = "2026-12-01T09:00:00Z";

/// Sizes of a generated cluster.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// Training nodes (8 GPUs each); at least 16.
    pub train_nodes: usize,
    /// Inference nodes (16 MIG 3g.40gb slices each); at least 4.
    pub infer_nodes: usize,
    /// Extra finished GPU pods (completed Job pods) on the nodes.
    pub finished_pods: usize,
    /// Extra Pending 1-GPU pods (in Jobs of 50) that find no room.
    pub pending_pods: usize,
    /// Extra events (FailedScheduling and BackOff about the pods).
    pub events: usize,
}

impl Size {
    /// The shipped example: the blueprint's 16 training and 4 inference nodes.
    pub const EXAMPLE: Size = Size {
        train_nodes: 16,
        infer_nodes: 4,
        finished_pods: 0,
        pending_pods: 0,
        events: 0,
    };

    /// The benchmark of issue 16: 1,000 GPU nodes, 20,000 pods, 5,000 events.
    pub const BENCH: Size = Size {
        train_nodes: 800,
        infer_nodes: 200,
        finished_pods: 17_000,
        pending_pods: 2_000,
        events: 5_000,
    };
}

fn node(name: &str, pool: &str, alloc: Value, driver: &str, extra: &[(&str, &str)]) -> Value {
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": "dgx-h100",
        "gpuctl.dev/pool": pool,
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/mig.capable": "true",
    });
    for (k, v) in extra {
        labels[*k] = json!(v);
    }
    let mut capacity = json!({"cpu": "224", "memory": "2113456540Ki", "pods": "110"});
    for (k, v) in alloc.as_object().into_iter().flatten() {
        capacity[k] = v.clone();
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status", "lastTransitionTime": T0}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "osImage": "Ubuntu 22.04.5 LTS",
                "kernelVersion": "5.15.0-1055-aws", "containerRuntimeVersion": "containerd://2.1.4",
                "kubeletVersion": "v1.34.2", "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""}
        }
    })
}

fn ready_status() -> Value {
    json!({"phase": "Running", "startTime": T0,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T0}],
        "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0, "image": "img", "imageID": "",
            "state": {"running": {"startedAt": T0}}}]})
}

fn crash_status(message: &str, restarts: i32) -> Value {
    json!({"phase": "Running", "startTime": T0,
        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": T0}],
        "containerStatuses": [{"name": "main", "ready": false, "restartCount": restarts, "image": "img", "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container=main"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": message,
                "startedAt": "2026-12-01T09:55:00Z", "finishedAt": "2026-12-01T09:55:02Z"}}}]})
}

fn unschedulable(message: &str) -> Value {
    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": message, "lastTransitionTime": T0}]})
}

/// A pod of Job `job` asking for `limits`, bound to `node` with `status`, or Pending.
fn pod(
    ns: &str,
    name: &str,
    job: &str,
    limits: Value,
    pool: &str,
    node: Option<&str>,
    status: Value,
) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{ns}-{name}"),
            "labels": {"batch.kubernetes.io/job-name": job},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": format!("uid-job-{job}"),
                "controller": true}]},
        "spec": {
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "env": [{"name": "WANDB_API_KEY", "value": "not-a-real-key"}],
                "resources": {"limits": limits}}],
            "nodeSelector": {"gpuctl.dev/pool": pool},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": "Never"
        },
        "status": status
    });
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    p
}

fn operand(app: &str, node: &str, status: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": OP, "name": format!("{app}-{node}"), "labels": {"app": app},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": app, "uid": format!("uid-ds-{app}"), "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"}]},
        "status": status
    })
}

fn event(ns: &str, kind: &str, name: &str, reason: &str, msg: &str, count: i32, i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"namespace": ns, "name": format!("{name}.{i:08x}")},
        "involvedObject": {"kind": kind, "namespace": ns, "name": name},
        "reason": reason, "message": msg, "type": "Warning", "count": count,
        "firstTimestamp": T0,
        "lastTimestamp": format!("2026-12-01T09:{:02}:{:02}Z", 10 + (i / 60) % 50, i % 60),
        "source": {"component": if reason == "FailedScheduling" { "default-scheduler" } else { "kubelet" }}
    })
}

const INSUFFICIENT: &str = "0/20 nodes are available: 16 Insufficient nvidia.com/gpu, 4 node(s) didn't match Pod's node affinity/selector. preemption: 0/20 nodes are available: 16 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling.";

/// The diagnostics of the generated cluster of `size`.
pub fn diagnostics(size: Size) -> Diagnostics {
    let mut d = Diagnostics::new(OP, Some(READ_AT.into()));
    let train: Vec<String> = (0..size.train_nodes.max(16))
        .map(|i| format!("dgx-train-{i:04}"))
        .collect();
    let infer: Vec<String> = (0..size.infer_nodes.max(4))
        .map(|i| format!("dgx-infer-{i:04}"))
        .collect();
    d.ingest(DiagKind::Node, nodes(&train, &infer));
    let mut pods = Vec::new();
    operand_pods(&train, &infer, &mut pods);
    training_pods(&train, &mut pods);
    inference_pods(&infer, &mut pods);
    scale_pods(size, &train, &mut pods);
    d.ingest(DiagKind::Pod, pods);
    d.ingest(DiagKind::Event, events(size));
    queues_and_operator(&mut d);
    d.finish();
    d
}

/// The GPU nodes: the last training node still on the old driver, the last inference node
/// without slices (its device plugin crash-loops).
fn nodes(train: &[String], infer: &[String]) -> Vec<Value> {
    let last_train = train.len() - 1;
    let last_infer = infer.len() - 1;
    let mut nodes = Vec::new();
    for (i, n) in train.iter().enumerate() {
        let driver = if i == last_train { OLD_DRIVER } else { DRIVER };
        nodes.push(node(
            n,
            "h100-train",
            json!({"nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "63"}),
            driver,
            &[],
        ));
    }
    for (i, n) in infer.iter().enumerate() {
        // The device plugin crash-loops on the last inference node: it advertises nothing.
        let alloc = if i == last_infer {
            json!({})
        } else {
            json!({"nvidia.com/mig-3g.40gb": "16"})
        };
        nodes.push(node(
            n,
            "h100-infer",
            alloc,
            DRIVER,
            &[
                ("nvidia.com/mig.config", "all-3g.40gb"),
                ("nvidia.com/mig.config.state", "success"),
                ("nvidia.com/mig.strategy", "mixed"),
            ],
        ));
    }
    nodes
}

fn operand_pods(train: &[String], infer: &[String], pods: &mut Vec<Value>) {
    let last_infer = infer.len() - 1;
    // Operands: device plugin everywhere (crash-looping on the last inference node).
    for n in train.iter().chain(infer) {
        let st = if *n == infer[last_infer] {
            crash_status(
                "failed to initialize NVML: could not load NVML library: ERROR_LIBRARY_NOT_FOUND",
                14,
            )
        } else {
            ready_status()
        };
        pods.push(operand("nvidia-device-plugin-daemonset", n, st));
    }
}

fn training_pods(train: &[String], pods: &mut Vec<Value>) {
    let last_train = train.len() - 1;
    // Training: nodes 0-3 hold 6 GPUs each (2 free each: 8 spread), the others are full; the old
    // node runs dev's CUDA 13.0 pod, crash-looping.
    for (i, n) in train.iter().enumerate() {
        if i == last_train {
            pods.push(pod(
                "dev-test",
                "cuda13-smoke-0",
                "cuda13-smoke",
                json!({"nvidia.com/gpu": "8"}),
                "h100-train",
                Some(n.as_str()),
                crash_status(
                    "RuntimeError: CUDA driver version is insufficient for CUDA runtime version",
                    9,
                ),
            ));
            continue;
        }
        let (ns, job) = if i % 2 == 0 {
            ("team-a-train", "llm-pretrain")
        } else {
            ("team-b-train", "vision-ft")
        };
        let gpus = if i < 4 { "6" } else { "8" };
        pods.push(pod(
            ns,
            &format!("{job}-{i}"),
            job,
            json!({"nvidia.com/gpu": gpus, "rdma/rdma_shared_device_a": "1"}),
            "h100-train",
            Some(n.as_str()),
            ready_status(),
        ));
    }
    pods.push(pod(
        "team-a-train",
        "eval-4gpu-0",
        "eval-4gpu",
        json!({"nvidia.com/gpu": "4"}),
        "h100-train",
        None,
        unschedulable(INSUFFICIENT),
    ));
}

fn inference_pods(infer: &[String], pods: &mut Vec<Value>) {
    let last_infer = infer.len() - 1;
    // Inference: 12 of 16 slices used on the healthy nodes; a pod asks for a profile no pool has.
    for n in infer.iter().take(last_infer) {
        pods.push(pod(
            "online-infer",
            &format!("llm-serve-{n}"),
            "llm-serve",
            json!({"nvidia.com/mig-3g.40gb": "12"}),
            "h100-infer",
            Some(n.as_str()),
            ready_status(),
        ));
    }
    pods.push(pod("online-infer", "embed-0", "embed", json!({"nvidia.com/mig-2g.20gb": "1"}), "h100-infer", None,
        unschedulable("0/20 nodes are available: 4 Insufficient nvidia.com/mig-2g.20gb, 16 node(s) didn't match Pod's node affinity/selector. preemption: 0/20 nodes are available: 20 Preemption is not helpful for scheduling.")));
}

fn scale_pods(size: Size, train: &[String], pods: &mut Vec<Value>) {
    // Scale: finished pods on the nodes, Pending 1-GPU pods in Jobs of 50.
    for i in 0..size.finished_pods {
        let n = &train[i % train.len()];
        let mut st = ready_status();
        st["phase"] = json!("Succeeded");
        pods.push(pod(
            "team-a-train",
            &format!("sweep-{i:06}"),
            &format!("sweep-{:04}", i / 50),
            json!({"nvidia.com/gpu": "1"}),
            "h100-train",
            Some(n.as_str()),
            st,
        ));
    }
    for i in 0..size.pending_pods {
        pods.push(pod(
            "team-b-train",
            &format!("queue-{i:06}"),
            &format!("queue-{:04}", i / 50),
            json!({"nvidia.com/gpu": "1"}),
            "h100-train",
            None,
            unschedulable(INSUFFICIENT),
        ));
    }
}

/// The events about the stuck pods and the Job refused by its quota, then the scale's.
fn events(size: Size) -> Vec<Value> {
    let mut events = vec![
        event(
            "team-a-train",
            "Pod",
            "eval-4gpu-0",
            "FailedScheduling",
            INSUFFICIENT,
            37,
            0,
        ),
        event(
            "online-infer",
            "Pod",
            "embed-0",
            "FailedScheduling",
            "0/20 nodes are available: 4 Insufficient nvidia.com/mig-2g.20gb, 16 node(s) didn't match Pod's node affinity/selector.",
            52,
            1,
        ),
        event(
            "dev-test",
            "Pod",
            "cuda13-smoke-0",
            "BackOff",
            "Back-off restarting failed container main in pod cuda13-smoke-0_dev-test",
            41,
            2,
        ),
        event(
            "dev-test",
            "Job",
            "cuda13-sweep",
            "FailedCreate",
            "Error creating: pods \"cuda13-sweep-x7k2p\" is forbidden: exceeded quota: gpuctl-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=26, limited: requests.nvidia.com/gpu=26",
            12,
            3,
        ),
    ];
    for i in 0..size.events {
        let j = i % size.pending_pods.max(1);
        if size.pending_pods > 0 {
            events.push(event(
                "team-b-train",
                "Pod",
                &format!("queue-{j:06}"),
                "FailedScheduling",
                INSUFFICIENT,
                3,
                i + 10,
            ));
        }
    }
    events
}

/// The quota, PriorityClasses, Kueue's objects, the operator's CRs; Volcano not installed.
fn queues_and_operator(d: &mut Diagnostics) {
    d.ingest(DiagKind::ResourceQuota, vec![json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"namespace": "dev-test", "name": "gpuctl-quota"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "26", "pods": "50"}},
        "status": {"hard": {"requests.nvidia.com/gpu": "26", "pods": "50"}, "used": {"requests.nvidia.com/gpu": "26", "pods": "4"}}
    })]);
    d.ingest(DiagKind::PriorityClass, ["training-critical", "inference-online", "batch-low"].iter().map(|n| json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": 1000})).collect());
    let kueue = "kueue.x-k8s.io/v1beta2";
    d.ingest(DiagKind::ClusterQueue, ["cq-team-a", "cq-team-b", "cq-infer", "cq-dev"].iter().map(|q| json!({
        "apiVersion": kueue, "kind": "ClusterQueue", "metadata": {"name": q},
        "spec": {"cohortName": "gpu-all"},
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}],
            "flavorsUsage": [{"name": if *q == "cq-infer" {"h100-infer"} else {"h100-train"},
                "resources": [{"name": if *q == "cq-infer" {"nvidia.com/mig-3g.40gb"} else {"nvidia.com/gpu"},
                    "total": if *q == "cq-team-b" {"48"} else {"8"}, "borrowed": "0"}]}]}})).collect());
    d.ingest(
        DiagKind::LocalQueue,
        [
            ("team-a-train", "cq-team-a"),
            ("team-b-train", "cq-team-b"),
            ("online-infer", "cq-infer"),
            ("offline-batch", "cq-infer"),
            ("dev-test", "cq-dev"),
        ]
        .iter()
        .map(|(ns, q)| {
            json!({"apiVersion": kueue, "kind": "LocalQueue",
            "metadata": {"namespace": ns, "name": "gpuctl-queue"}, "spec": {"clusterQueue": q}})
        })
        .collect(),
    );
    d.ingest(DiagKind::Cohort, vec![json!({"apiVersion": kueue, "kind": "Cohort", "metadata": {"name": "gpu-all"}, "spec": {}})]);
    d.ingest(DiagKind::Workload, vec![json!({
        "apiVersion": kueue, "kind": "Workload",
        "metadata": {"namespace": "team-b-train", "name": "job-vision-ft-large-3f9a1",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "vision-ft-large", "uid": "uid-job-vision-ft-large", "controller": true}]},
        "spec": {"queueName": "gpuctl-queue", "active": true,
            "podSets": [{"name": "main", "count": 32, "template": {"spec": {"containers": [{"name": "main", "image": "img",
                "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
            "message": "couldn't assign flavors to pod set main: insufficient unused quota in cohort for nvidia.com/gpu in flavor h100-train, 16 more needed",
            "lastTransitionTime": T0}]}
    })]);
    d.ingest(
        DiagKind::ClusterPolicy,
        vec![
            json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"}, "status": {"state": "ready", "namespace": OP}}),
        ],
    );
    d.ingest(DiagKind::NvidiaDriver, vec![json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
        "metadata": {"name": "cluster-default"}, "spec": {"version": DRIVER}, "status": {"state": "ready"}})]);
    d.mark_unread(
        DiagKind::PodGroup,
        crate::diagnostics::UnreadWhy::NotServed,
        "",
    );
    d.mark_unread(
        DiagKind::VolcanoQueue,
        crate::diagnostics::UnreadWhy::NotServed,
        "",
    );
}

/// A snapshot holding only [`diagnostics`] of `size` (what `gpuctl doctor --snapshot` reads).
pub fn snapshot(size: Size) -> Snapshot {
    Snapshot {
        format_version: SNAPSHOT_FORMAT_VERSION,
        server: Some("https://dgx-h100-training.example:6443".into()),
        fingerprint: Some("0f3c9a1e5b7d".into()),
        captured_at: Some(READ_AT.into()),
        diagnostics: Some(diagnostics(size)),
        ..Snapshot::default()
    }
}
