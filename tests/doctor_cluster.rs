//! `gpuctl doctor` against the real kube-apiserver (issue 16), one test per failure story, each
//! built from real objects and asserting the cause and the fix the doctor names.
//!
//! Real parts: the API server, etcd, kube-controller-manager (the Job controller creates pods; the
//! ResourceQuota admission refuses them and the Job controller writes the `FailedCreate` event),
//! and the real Kueue controller (it writes the Workload's `QuotaReserved` condition). The doctor
//! reads them with the same paged LIST calls `gpuctl doctor` makes.
//!
//! Stand-ins, stated plainly (the harness has no scheduler, kubelet or GPU Operator):
//! - GPU Nodes carry the labels GPU Feature Discovery and the operator set, and `status.allocatable`
//!   as the device plugin registers it (tests/support/cluster.rs).
//! - The scheduler: a test binds a pod with the `pods/binding` subresource, as kube-scheduler does,
//!   or, for a pod it cannot place, writes exactly what kube-scheduler writes: the pod's
//!   `PodScheduled=False` condition with reason `Unschedulable` and the scheduler's message, and an
//!   events.k8s.io/v1 `FailedScheduling` Event from `default-scheduler`.
//! - The kubelet: a test writes a bound pod's status (Running and Ready, or a container in
//!   `CrashLoopBackOff` with its last termination) through the status subresource.
//!
//! The cluster is shared with other tests, so each test's blueprint selects only its own nodes
//! (pools labelled with the test's prefix) and tenants in its own namespace, and the assertions
//! look at the findings about the test's own objects.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gpuctl_core::blueprint::{self, Blueprint};
use gpuctl_core::diag::Severity;
use gpuctl_core::diagnostics::Diagnostics;
use gpuctl_core::doctor::{self, Finding, Report};
use gpuctl_core::profiles::Catalog;
use k8s_openapi::api::core::v1::{Event, Pod, ResourceQuota};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster};

const DRIVER: &str = "580.173.02";
const IMAGE: &str = "registry.k8s.io/pause:3.10";
const KUEUE: &str = "v1beta2";
const WAIT: Duration = Duration::from_secs(40);

fn kubeconfig() -> PathBuf {
    PathBuf::from(std::env::var_os(support::cluster::KUBECONFIG_ENV).expect("kubeconfig"))
}

/// The blueprint of this test: pools `<prefix>-<name>` selecting nodes labelled
/// `gpuctl.dev/pool=<prefix>-<name>`, one tenant on the test's namespace, the operator in the test's
/// namespace. `extra` is appended under `spec` (scheduling, priorityClasses).
fn blueprint_text(tc: &TestCluster, pools: &[(&str, &str)], tenant: &str, extra: &str) -> String {
    let p = &tc.prefix;
    let mut s = format!(
        "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nmetadata:\n  name: {p}\nspec:\n  kubernetes:\n    version: \"1.35.1\"\n  gpuOperator:\n    version: v26.7.0\n    namespace: {ns}-op\n    install: none\n    driver:\n      version: \"{DRIVER}\"\n      kernelModuleType: open\n  nodePools:\n",
        ns = tc.prefix
    );
    for (name, partitioning) in pools {
        s.push_str(&format!(
            "    - name: {p}-{name}\n      role: training\n      selector: {{ gpuctl.dev/pool: {p}-{name} }}\n      nodes: 2\n      gpu: {{ model: H100-SXM5-80GB, count: 8 }}\n{partitioning}"
        ));
    }
    s.push_str(&format!(
        "  tenants:\n    - name: {p}-team\n      namespaces: [{ns}]\n{tenant}",
        ns = tc.namespace
    ));
    s.push_str(extra);
    s
}

fn load(text: &str) -> Blueprint {
    match blueprint::load_bytes("bp.yaml", text.as_bytes().to_vec()) {
        Ok(l) => l.blueprint,
        Err(r) => panic!("test blueprint does not load: {r:?}\n{text}"),
    }
}

async fn read(tc: &TestCluster) -> Diagnostics {
    let k = gpuctl_cluster::connect(&gpuctl_cluster::ConnectOptions {
        kubeconfig: Some(kubeconfig()),
        context: None,
    })
    .await
    .expect("connect");
    let r = gpuctl_cluster::diagnostics::read(&k, &operator_ns(tc), None)
        .await
        .expect("diagnostics");
    assert!(
        r.list_requests >= 14,
        "one LIST per kind at least: {}",
        r.list_requests
    );
    r.diagnostics
}

async fn diagnose(tc: &TestCluster, bp: &Blueprint) -> Report {
    let d = read(tc).await;
    doctor::diagnose(bp, Catalog::embedded(), &d, "bp.yaml")
}

/// The findings about this test's objects.
fn mine<'a>(r: &'a Report, tc: &TestCluster) -> Vec<&'a Finding> {
    r.findings
        .iter()
        .filter(|f| f.subjects.iter().any(|s| s.contains(&tc.prefix)))
        .collect()
}

fn one<'a>(r: &'a Report, tc: &TestCluster, id: &str) -> &'a Finding {
    let f: Vec<&Finding> = mine(r, tc).into_iter().filter(|f| f.id == id).collect();
    assert_eq!(f.len(), 1, "one {id} among {:#?}", mine(r, tc));
    f[0]
}

async fn gpu_node(tc: &TestCluster, suffix: &str, pool: &str, gpu: GpuNode) -> String {
    let gpu = gpu.label("gpuctl.dev/pool", &format!("{}-{pool}", tc.prefix));
    let n = tc.create_gpu_node(suffix, &gpu).await.expect("node");
    let name = n.metadata.name.unwrap_or_default();
    // The API server taints a new Node `node.kubernetes.io/not-ready:NoSchedule`; the node
    // lifecycle controller (not in the harness) removes it once the node reports Ready, as this
    // does. Other taints stay.
    let taints: Vec<Value> = n
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != "node.kubernetes.io/not-ready")
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    let nodes: Api<k8s_openapi::api::core::v1::Node> = tc.cluster_scoped();
    nodes
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": taints}})),
        )
        .await
        .expect("node taints");
    name
}

fn pod_manifest(name: &str, ns: &str, limits: Value, selector: Value, app: Option<&str>) -> Value {
    let mut labels = json!({});
    if let Some(a) = app {
        labels["app"] = json!(a);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "containers": [{"name": "main", "image": IMAGE, "resources": {"limits": limits}}],
            "nodeSelector": selector,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
    })
}

/// The GPU Operator's namespace of the test's blueprint (a tenant may not share it).
fn operator_ns(tc: &TestCluster) -> String {
    format!("{}-op", tc.prefix)
}

async fn create_operator_ns(tc: &TestCluster) -> String {
    let ns = operator_ns(tc);
    let api: Api<k8s_openapi::api::core::v1::Namespace> = tc.cluster_scoped();
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": ns, "labels": tc.owner_labels()}}))
            .unwrap(),
    )
    .await
    .expect("operator namespace");
    ns
}

fn pods_in(tc: &TestCluster, ns: &str) -> Api<Pod> {
    Api::namespaced(tc.client.clone(), ns)
}

async fn create_pod(tc: &TestCluster, manifest: Value) -> String {
    let ns = manifest["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    let pods = pods_in(tc, &ns);
    let p: Pod = serde_json::from_value(manifest).expect("pod");
    let p = pods
        .create(&PostParams::default(), &p)
        .await
        .expect("create pod");
    p.metadata.name.unwrap_or_default()
}

/// What kube-scheduler does for a pod it placed: a Binding to the node.
async fn bind(tc: &TestCluster, ns: &str, pod: &str, node: &str) {
    let pods = pods_in(tc, ns);
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    pods.create_subresource::<Value, Value>("binding", pod, &PostParams::default(), &binding)
        .await
        .expect("bind");
}

fn now() -> String {
    let t = jiff::Timestamp::now();
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// What kube-scheduler writes for a pod it cannot place: the condition and the event.
async fn unschedulable(tc: &TestCluster, pod: &str, message: &str) {
    let pods: Api<Pod> = tc.namespaced();
    let status = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": message, "lastTransitionTime": now()}]}});
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pod condition");
    let uid = pods
        .get(pod)
        .await
        .expect("pod")
        .metadata
        .uid
        .unwrap_or_default();
    let events: Api<DynamicObject> = Api::namespaced_with(
        tc.client.clone(),
        &tc.namespace,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("events.k8s.io", "v1", "Event"),
            "events",
        ),
    );
    let t = jiff::Timestamp::now();
    let micro = format!("{}", t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"));
    let ev: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": format!("{pod}.{}", t.as_nanosecond()), "namespace": tc.namespace},
        "eventTime": micro,
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-harness",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "type": "Warning",
        "note": message,
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": tc.namespace, "name": pod, "uid": uid},
    }))
    .unwrap();
    events
        .create(&PostParams::default(), &ev)
        .await
        .expect("event");
}

/// What the kubelet writes for a running pod: Running and Ready, or a container crash-looping.
async fn kubelet(tc: &TestCluster, ns: &str, pod: &str, crash: Option<(&str, i32)>) {
    let pods = pods_in(tc, ns);
    let t = now();
    let status = match crash {
        None => json!({"status": {"phase": "Running", "startTime": t,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t}],
            "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0, "image": IMAGE,
                "imageID": "", "started": true, "state": {"running": {"startedAt": t}}}]}}),
        Some((message, restarts)) => json!({"status": {"phase": "Running", "startTime": t,
            "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": t}],
            "containerStatuses": [{"name": "main", "ready": false, "restartCount": restarts, "image": IMAGE,
                "imageID": "", "started": false,
                "state": {"waiting": {"reason": "CrashLoopBackOff",
                    "message": "back-off 5m0s restarting failed container=main"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": message,
                    "startedAt": t, "finishedAt": t}}}]}}),
    };
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pod status");
}

/// Seed 000: a team's CUDA image on a pool whose nodes run a driver too old for it. The containers
/// crash with the runtime's message; the doctor names the driver, the tenant and the upgrade.
#[tokio::test]
#[cfg_attr(
    gpuctl_no_test_cluster,
    ignore = "skipped: needs the test API server (docs/testing.md)"
)]
async fn driver_too_old_for_the_tenants_cuda() {
    let Some(tc) = TestCluster::connect("doctor_cuda").await else {
        return;
    };
    let node = gpu_node(
        &tc,
        "n0",
        "train",
        GpuNode::h100(8).driver("550.163.01", (12, 4)),
    )
    .await;
    let bp = load(&blueprint_text(
        &tc,
        &[("train", "")],
        "      cuda: [\"13.0\"]\n",
        "",
    ));
    let pod = create_pod(
        &tc,
        pod_manifest(
            "train-0",
            &tc.namespace,
            json!({"nvidia.com/gpu": "8"}),
            json!({}),
            None,
        ),
    )
    .await;
    bind(&tc, &tc.namespace, &pod, &node).await;
    kubelet(
        &tc,
        &tc.namespace,
        &pod,
        Some((
            "RuntimeError: CUDA driver version is insufficient for CUDA runtime version",
            6,
        )),
    )
    .await;
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU235");
    assert_eq!(f.severity, Severity::Error);
    assert!(f.subjects.contains(&format!("node/{node}")), "{f:#?}");
    assert!(
        f.subjects.contains(&format!("tenant/{}-team", tc.prefix)),
        "{f:#?}"
    );
    assert!(
        f.cause
            .contains("CUDA 13.0 needs driver 580.65.06 or newer"),
        "{}",
        f.cause
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.text.contains("CUDA driver version is insufficient")),
        "the crashing container is evidence: {:#?}",
        f.evidence
    );
    assert!(
        f.fix.contains(&format!(
            "gpuctl upgrade driver bp.yaml --pool {}-train --to {DRIVER}",
            tc.prefix
        )),
        "{}",
        f.fix
    );
    let drift = one(&r, &tc, "GPU234");
    assert!(
        drift
            .title
            .contains("runs driver 550.163.01; the blueprint says 580.173.02")
    );
    assert!(r.has_errors());
}

/// Eight GPUs free, but spread: a 4-GPU pod stays Pending although the pool has room in total.
#[tokio::test]
#[cfg_attr(
    gpuctl_no_test_cluster,
    ignore = "skipped: needs the test API server (docs/testing.md)"
)]
async fn free_gpus_spread_over_nodes() {
    let Some(tc) = TestCluster::connect("doctor_spread").await else {
        return;
    };
    let pool = format!("{}-train", tc.prefix);
    let mut nodes = Vec::new();
    for i in 0..4 {
        nodes.push(
            gpu_node(
                &tc,
                &format!("n{i}"),
                "train",
                GpuNode::h100(8).driver(DRIVER, (13, 0)),
            )
            .await,
        );
    }
    for (i, n) in nodes.iter().enumerate() {
        let p = create_pod(
            &tc,
            pod_manifest(
                &format!("busy-{i}"),
                &tc.namespace,
                json!({"nvidia.com/gpu": "6"}),
                json!({"gpuctl.dev/pool": pool}),
                None,
            ),
        )
        .await;
        bind(&tc, &tc.namespace, &p, n).await;
        kubelet(&tc, &tc.namespace, &p, None).await;
    }
    let big = create_pod(
        &tc,
        pod_manifest(
            "train-4gpu",
            &tc.namespace,
            json!({"nvidia.com/gpu": "4"}),
            json!({"gpuctl.dev/pool": pool}),
            None,
        ),
    )
    .await;
    unschedulable(
        &tc,
        &big,
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.",
    )
    .await;
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU220");
    assert!(
        f.subjects
            .contains(&format!("pod/{}/train-4gpu", tc.namespace))
    );
    assert!(
        f.cause.contains("8 are free across 4 nodes") && f.cause.contains("at most 2"),
        "{}",
        f.cause
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.source.contains("FailedScheduling")),
        "{:#?}",
        f.evidence
    );
    assert!(f.evidence.iter().any(|e| {
        e.source
            .starts_with("condition PodScheduled=False (Unschedulable)")
    }));
    let room = r.pools.iter().find(|p| p.pool == pool).unwrap();
    assert_eq!(
        room.free["nvidia.com/gpu"],
        (8, 2),
        "8 free, at most 2 on one node"
    );
    assert!(
        mine(&r, &tc).iter().all(|f| f.id != "GPU200"),
        "not reported as insufficient"
    );
}

/// Seed 004's worked case: a pod asks for a MIG profile no pool offers while the pool's slices of
/// another profile sit idle.
#[tokio::test]
#[cfg_attr(
    gpuctl_no_test_cluster,
    ignore = "skipped: needs the test API server (docs/testing.md)"
)]
async fn mig_profile_no_pool_offers() {
    let Some(tc) = TestCluster::connect("doctor_mig").await else {
        return;
    };
    let pool = format!("{}-infer", tc.prefix);
    gpu_node(
        &tc,
        "n0",
        "infer",
        GpuNode::h100(8)
            .driver(DRIVER, (13, 0))
            .mig_mixed(&[("3g.40gb", 16, 40192)]),
    )
    .await;
    let p = create_pod(
        &tc,
        pod_manifest(
            "infer-0",
            &tc.namespace,
            json!({"nvidia.com/mig-2g.20gb": "1"}),
            json!({"gpuctl.dev/pool": pool}),
            None,
        ),
    )
    .await;
    unschedulable(&tc, &p, "0/1 nodes are available: 1 Insufficient nvidia.com/mig-2g.20gb. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.").await;
    let mig = "      partitioning:\n        mode: mig\n        mig:\n          strategy: mixed\n          layout: { \"3g.40gb\": 2 }\n";
    let bp = load(&blueprint_text(&tc, &[("infer", mig)], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU203");
    assert!(
        f.title
            .contains("no pool advertises `nvidia.com/mig-2g.20gb`"),
        "{}",
        f.title
    );
    assert!(
        f.cause
            .contains(&format!("`nvidia.com/mig-3g.40gb` (pool {pool})")),
        "{}",
        f.cause
    );
    assert!(f.fix.contains("nvidia.com/mig-3g.40gb"), "{}", f.fix);
    let idle = one(&r, &tc, "GPU221");
    assert!(
        idle.title
            .starts_with("16 free `nvidia.com/mig-3g.40gb` slices"),
        "{}",
        idle.title
    );
}

/// The device plugin crash-loops on one pool only: the doctor names that pool, its node and the
/// log command, and nothing about the healthy pool.
#[tokio::test]
#[cfg_attr(
    gpuctl_no_test_cluster,
    ignore = "skipped: needs the test API server (docs/testing.md)"
)]
async fn device_plugin_crash_looping_on_one_pool() {
    let Some(tc) = TestCluster::connect("doctor_plugin").await else {
        return;
    };
    let a = gpu_node(&tc, "a0", "a", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let b = gpu_node(&tc, "b0", "b", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let op = create_operator_ns(&tc).await;
    for (node, crash) in [
        (&a, None),
        (
            &b,
            Some((
                "failed to initialize NVML: Driver/library version mismatch",
                9,
            )),
        ),
    ] {
        let p = create_pod(
            &tc,
            pod_manifest(
                &format!("nvidia-device-plugin-daemonset-{node}"),
                &op,
                json!({}),
                json!({}),
                Some("nvidia-device-plugin-daemonset"),
            ),
        )
        .await;
        bind(&tc, &op, &p, node).await;
        kubelet(&tc, &op, &p, crash).await;
    }
    let bp = load(&blueprint_text(&tc, &[("a", ""), ("b", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU230");
    assert_eq!(
        f.title,
        format!(
            "device plugin pods are not Ready on pool {}-b (CrashLoopBackOff)",
            tc.prefix
        )
    );
    assert!(
        f.subjects.contains(&format!("node/{b}")) && !f.subjects.contains(&format!("node/{a}"))
    );
    assert!(
        f.evidence[0].text.contains("9 restarts")
            && f.evidence[0]
                .text
                .contains("Driver/library version mismatch")
    );
    assert!(f.fix.contains(&format!(
        "kubectl logs -n {op} nvidia-device-plugin-daemonset-{b}"
    )));
}

/// A team's quota is used up: the Job controller's pods are refused by ResourceQuota admission.
#[tokio::test]
#[cfg_attr(
    gpuctl_no_test_cluster,
    ignore = "skipped: needs the test API server (docs/testing.md)"
)]
async fn exhausted_team_quota() {
    let Some(tc) = TestCluster::connect("doctor_quota").await else {
        return;
    };
    let quotas: Api<ResourceQuota> = tc.namespaced();
    let q: ResourceQuota = serde_json::from_value(json!({"metadata": {"name": "gpu-quota"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}))
    .unwrap();
    quotas
        .create(&PostParams::default(), &q)
        .await
        .expect("quota");
    tc.sync_quota_status("gpu-quota")
        .await
        .expect("quota status");
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = tc.namespaced();
    let job = serde_json::from_value(json!({"metadata": {"name": "train"}, "spec": {
        "parallelism": 3, "completions": 3, "backoffLimit": 0,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": IMAGE,
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}))
    .unwrap();
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("job");
    // The Job controller creates pods until quota admission refuses one and records it.
    let events: Api<Event> = tc.namespaced();
    let deadline = Instant::now() + WAIT;
    loop {
        let list = events.list(&ListParams::default()).await.expect("events");
        if list.items.iter().any(|e| {
            e.reason.as_deref() == Some("FailedCreate")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("exceeded quota"))
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no FailedCreate from the Job controller within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU204");
    assert!(
        f.subjects
            .contains(&format!("resourcequota/{}/gpu-quota", tc.namespace)),
        "{f:#?}"
    );
    assert!(
        f.subjects.contains(&format!("job/{}/train", tc.namespace)),
        "{f:#?}"
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.text.contains("exceeded quota: gpu-quota")),
        "{:#?}",
        f.evidence
    );
    assert!(
        f.fix.contains(&format!("tenant `{}-team`", tc.prefix)),
        "{}",
        f.fix
    );
}

fn kueue_api(tc: &TestCluster, kind: &str, plural: &str, namespaced: bool) -> Api<DynamicObject> {
    tc.dynamic("kueue.x-k8s.io", KUEUE, kind, plural, namespaced)
}

fn cluster_queue(name: &str, cohort: &str, flavor: &str, gpus: u32) -> Value {
    json!({"apiVersion": format!("kueue.x-k8s.io/{KUEUE}"), "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"cohortName": cohort, "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}})
}

fn queued_job(name: &str, queue: &str, pods: u32) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"suspend": true, "parallelism": pods, "completions": pods, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": IMAGE,
                "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}}})
}

/// The condition of the Workload Kueue made for `job`, once `pred` holds for it.
async fn workload_condition(tc: &TestCluster, job: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let api = kueue_api(tc, "Workload", "workloads", true);
    let deadline = Instant::now() + WAIT;
    loop {
        let list = api.list(&ListParams::default()).await.expect("workloads");
        let w = list.items.into_iter().find(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name == job)
        });
        if let Some(w) = w {
            let v = serde_json::to_value(&w).unwrap();
            if pred(&v) {
                return v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Kueue did not get workload of {job} there within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn condition(v: &Value, t: &str) -> Option<Value> {
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .cloned()
}

/// A Workload waits on its cohort: its ClusterQueue is past its own quota and the other queue of
/// the cohort uses all it could lend. The real Kueue writes why; the doctor says it and the fix.
#[tokio::test]
#[cfg_attr(
    gpuctl_no_test_cluster,
    ignore = "skipped: needs the test API server (docs/testing.md)"
)]
async fn workload_waiting_on_its_cohort() {
    let Some(tc) = TestCluster::connect("doctor_cohort").await else {
        return;
    };
    let p = tc.prefix.clone();
    let flavor = format!("{p}-train");
    let (cq_a, cq_b, cohort) = (format!("{p}-a"), format!("{p}-b"), format!("{p}-c"));
    tc.apply(
        &kueue_api(&tc, "ResourceFlavor", "resourceflavors", false),
        &json!({"apiVersion": format!("kueue.x-k8s.io/{KUEUE}"), "kind": "ResourceFlavor",
            "metadata": {"name": flavor}, "spec": {"nodeLabels": {"gpuctl.dev/pool": flavor}}}),
    )
    .await
    .expect("flavor");
    let cqs = kueue_api(&tc, "ClusterQueue", "clusterqueues", false);
    tc.apply(&cqs, &cluster_queue(&cq_a, &cohort, &flavor, 4))
        .await
        .expect("cq a");
    tc.apply(&cqs, &cluster_queue(&cq_b, &cohort, &flavor, 4))
        .await
        .expect("cq b");
    let lqs = kueue_api(&tc, "LocalQueue", "localqueues", true);
    for (lq, cq) in [("lq-a", &cq_a), ("lq-b", &cq_b)] {
        tc.apply(
            &lqs,
            &json!({"apiVersion": format!("kueue.x-k8s.io/{KUEUE}"), "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": tc.namespace}, "spec": {"clusterQueue": cq}}),
        )
        .await
        .expect("local queue");
    }
    let jobs: Api<DynamicObject> = tc.dynamic("batch", "v1", "Job", "jobs", true);
    // Team b takes its whole quota first; then team a needs 6: its own 4 and 2 borrowed.
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(queued_job("job-b", "lq-b", 4)).unwrap(),
    )
    .await
    .expect("job b");
    workload_condition(&tc, "job-b", |w| {
        condition(w, "Admitted").is_some_and(|c| c["status"] == "True")
    })
    .await;
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(queued_job("job-a", "lq-a", 6)).unwrap(),
    )
    .await
    .expect("job a");
    let w = workload_condition(&tc, "job-a", |w| {
        condition(w, "QuotaReserved").is_some_and(|c| {
            c["status"] == "False"
                && c["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("insufficient unused quota")
        })
    })
    .await;
    // Kueue writes a ClusterQueue's usage to its status a moment after admitting.
    let deadline = Instant::now() + WAIT;
    loop {
        let q = cqs.get(&cq_b).await.expect("cq b");
        let v = serde_json::to_value(&q).unwrap();
        if v["status"]["flavorsUsage"][0]["resources"][0]["total"] == "4" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Kueue did not report cq b's usage: {v}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let kueue = format!(
        "  scheduling:\n    queueing: kueue\n    kueue:\n      version: v0.19.2\n      install: none\n      cohorts:\n        - {{ name: {cohort} }}\n      clusterQueues:\n        - name: {cq_a}\n          cohort: {cohort}\n          resources:\n            - pool: {flavor}\n              quota: {{ nvidia.com/gpu: 4 }}\n              borrowingLimit: {{ nvidia.com/gpu: 4 }}\n        - name: {cq_b}\n          cohort: {cohort}\n          resources:\n            - pool: {flavor}\n              quota: {{ nvidia.com/gpu: 4 }}\n"
    );
    let bp = load(&blueprint_text(
        &tc,
        &[("train", "")],
        &format!("      queue: {cq_a}\n"),
        &kueue,
    ));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU207");
    let wname = w["metadata"]["name"].as_str().unwrap();
    assert!(
        f.subjects
            .contains(&format!("workload/{}/{wname}", tc.namespace)),
        "{f:#?}"
    );
    assert!(
        f.subjects.contains(&format!("cohort/{cohort}"))
            && f.subjects.contains(&format!("clusterqueue/{cq_a}"))
    );
    assert!(
        f.evidence.iter().any(|e| e
            .text
            .contains("insufficient unused quota for nvidia.com/gpu")
            && e.text.contains("2 more needed")),
        "Kueue's own words: {:#?}",
        f.evidence
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.source.contains(&format!("clusterqueue/{cq_b}"))
                && e.text.contains("4 in use")),
        "the cohort's other queue holds what could be lent: {:#?}",
        f.evidence
    );
    assert!(
        f.cause
            .contains("borrowing limit for `nvidia.com/gpu` is 4"),
        "{}",
        f.cause
    );
    assert!(f.fix.contains("kubectl get clusterqueues"), "{}", f.fix);
}

/// A healthy cluster: pools Ready with the declared driver, the device plugin Ready everywhere, a
/// running GPU pod, the PriorityClass present, quota with room: no finding, exit 0 for its part.
/// Also runs the real binary live and on a `snapshot --diagnostics` file.
#[tokio::test]
#[cfg_attr(
    gpuctl_no_test_cluster,
    ignore = "skipped: needs the test API server (docs/testing.md)"
)]
async fn healthy_cluster_has_no_findings() {
    let Some(tc) = TestCluster::connect("doctor_healthy").await else {
        return;
    };
    let pool = format!("{}-train", tc.prefix);
    let mut nodes = Vec::new();
    for i in 0..2 {
        nodes.push(
            gpu_node(
                &tc,
                &format!("n{i}"),
                "train",
                GpuNode::h100(8).driver(DRIVER, (13, 0)),
            )
            .await,
        );
    }
    let op = create_operator_ns(&tc).await;
    for n in &nodes {
        let p = create_pod(
            &tc,
            pod_manifest(
                &format!("nvidia-device-plugin-daemonset-{n}"),
                &op,
                json!({}),
                json!({}),
                Some("nvidia-device-plugin-daemonset"),
            ),
        )
        .await;
        bind(&tc, &op, &p, n).await;
        kubelet(&tc, &op, &p, None).await;
    }
    let run = create_pod(
        &tc,
        pod_manifest(
            "train-0",
            &tc.namespace,
            json!({"nvidia.com/gpu": "8"}),
            json!({"gpuctl.dev/pool": pool}),
            None,
        ),
    )
    .await;
    bind(&tc, &tc.namespace, &run, &nodes[0]).await;
    kubelet(&tc, &tc.namespace, &run, None).await;
    let pc = tc.name("critical");
    let pcs: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = tc.cluster_scoped();
    pcs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": pc}, "value": 1000})).unwrap(),
    )
    .await
    .expect("priority class");
    let extra = format!("  priorityClasses:\n    - {{ name: {pc}, value: 1000 }}\n");
    let text = blueprint_text(
        &tc,
        &[("train", "")],
        &format!("      priorityClass: {pc}\n      cuda: [\"12.8\", \"13.0\"]\n"),
        &extra,
    );
    let bp = load(&text);
    let r = diagnose(&tc, &bp).await;
    assert!(mine(&r, &tc).is_empty(), "{:#?}", mine(&r, &tc));
    let room = r.pools.iter().find(|p| p.pool == pool).unwrap();
    assert_eq!((room.nodes, room.ready), (2, 2));
    assert_eq!(room.free["nvidia.com/gpu"], (8, 8));

    // The binary, live and from a diagnostics snapshot, agrees.
    let dir = tempfile::tempdir().unwrap();
    let bp_path = dir.path().join("bp.yaml");
    std::fs::write(&bp_path, &text).unwrap();
    let snap = dir.path().join("snap.json");
    let gpuctl = env!("CARGO_BIN_EXE_gpuctl");
    let kc = kubeconfig();
    let out = std::process::Command::new(gpuctl)
        .args(["snapshot"])
        .arg(&bp_path)
        .args(["--diagnostics", "--out"])
        .arg(&snap)
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["--today", "2026-12-01"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&snap).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "snapshots are owner-only");
    }
    for source in [
        vec!["--kubeconfig".to_string(), kc.display().to_string()],
        vec!["--snapshot".to_string(), snap.display().to_string()],
    ] {
        let out = std::process::Command::new(gpuctl)
            .arg("doctor")
            .arg(&bp_path)
            .args(&source)
            .args(["-o", "json", "--today", "2026-12-01"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(v["format_version"], 1);
        let findings = v["findings"].as_array().unwrap();
        let ours = findings
            .iter()
            .filter(|f| f["subjects"].to_string().contains(&tc.prefix))
            .count();
        assert_eq!(ours, 0, "{source:?}: {findings:#?}");
        let errors = v["summary"]["errors"].as_u64().unwrap();
        assert_eq!(
            out.status.code(),
            Some(if errors > 0 { 1 } else { 0 }),
            "{source:?}"
        );
    }
}
