//! Helpers for the doctor's scenario tests against the test API server: the test's blueprint,
//! GPU nodes, pods, and what the scheduler, the kubelet and Kueue write (see doctor_cluster.rs for
//! which real component or stand-in plays each part).
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gpuctl_core::blueprint::{self, Blueprint};
use gpuctl_core::diagnostics::{DOCTOR_READS, Diagnostics, UnreadWhy};
use gpuctl_core::doctor::{self, Finding, Report};
use gpuctl_core::profiles::Catalog;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use super::cluster::{GpuNode, TestCluster};

pub const DRIVER: &str = "580.173.02";
pub const IMAGE: &str = "registry.k8s.io/pause:3.10";
pub const KUEUE: &str = "v1beta2";
pub const WAIT: Duration = Duration::from_secs(40);

pub fn kubeconfig() -> PathBuf {
    PathBuf::from(std::env::var_os(super::cluster::KUBECONFIG_ENV).expect("kubeconfig"))
}

/// The blueprint of this test: pools `<prefix>-<name>` selecting nodes labelled
/// `gpuctl.dev/pool=<prefix>-<name>`, one tenant on the test's namespace, the operator in the test's
/// namespace. `extra` is appended under `spec` (scheduling, priorityClasses).
pub fn blueprint_text(
    tc: &TestCluster,
    pools: &[(&str, &str)],
    tenant: &str,
    extra: &str,
) -> String {
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

pub fn load(text: &str) -> Blueprint {
    match blueprint::load_bytes("bp.yaml", text.as_bytes().to_vec()) {
        Ok(l) => l.blueprint,
        Err(r) => panic!("test blueprint does not load: {r:?}\n{text}"),
    }
}

pub async fn read(tc: &TestCluster) -> Diagnostics {
    let k = gpuctl_cluster::connect(&gpuctl_cluster::ConnectOptions {
        kubeconfig: Some(kubeconfig()),
        context: None,
    })
    .await
    .expect("connect");
    let r = gpuctl_cluster::diagnostics::read(&k, DOCTOR_READS, &operator_ns(tc), None)
        .await
        .expect("diagnostics");
    // One LIST per kind served at least (a kind not served is found by discovery, not listed).
    let served = DOCTOR_READS
        .iter()
        .filter(|k| {
            r.diagnostics
                .unread(**k)
                .is_none_or(|u| u.why != UnreadWhy::NotServed)
        })
        .count();
    assert!(
        r.list_requests >= served as u64,
        "one LIST per kind served at least: {} for {served} kinds",
        r.list_requests
    );
    r.diagnostics
}

pub async fn diagnose(tc: &TestCluster, bp: &Blueprint) -> Report {
    let d = read(tc).await;
    doctor::diagnose(bp, Catalog::embedded(), &d, "bp.yaml")
}

/// The findings about this test's objects.
pub fn mine<'a>(r: &'a Report, tc: &TestCluster) -> Vec<&'a Finding> {
    r.findings
        .iter()
        .filter(|f| f.subjects.iter().any(|s| s.contains(&tc.prefix)))
        .collect()
}

pub fn one<'a>(r: &'a Report, tc: &TestCluster, id: &str) -> &'a Finding {
    let f: Vec<&Finding> = mine(r, tc).into_iter().filter(|f| f.id == id).collect();
    assert_eq!(f.len(), 1, "one {id} among {:#?}", mine(r, tc));
    f[0]
}

pub async fn gpu_node(tc: &TestCluster, suffix: &str, pool: &str, gpu: GpuNode) -> String {
    let gpu = gpu.label("gpuctl.dev/pool", &format!("{}-{pool}", tc.prefix));
    tc.create_ready_gpu_node(suffix, &gpu)
        .await
        .expect("Ready node")
}

pub fn pod_manifest(
    name: &str,
    ns: &str,
    limits: Value,
    selector: Value,
    app: Option<&str>,
) -> Value {
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
pub fn operator_ns(tc: &TestCluster) -> String {
    format!("{}-op", tc.prefix)
}

pub async fn create_operator_ns(tc: &TestCluster) -> String {
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

pub fn pods_in(tc: &TestCluster, ns: &str) -> Api<Pod> {
    Api::namespaced(tc.client.clone(), ns)
}

pub async fn create_pod(tc: &TestCluster, manifest: Value) -> String {
    let ns = manifest["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    let pods = pods_in(tc, &ns);
    let p: Pod = serde_json::from_value(manifest).expect("pod");
    let p = super::cluster::create_admitted(&pods, &p)
        .await
        .expect("create pod");
    p.metadata.name.unwrap_or_default()
}

/// What kube-scheduler does for a pod it placed: a Binding to the node.
pub async fn bind(tc: &TestCluster, ns: &str, pod: &str, node: &str) {
    let pods = pods_in(tc, ns);
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    pods.create_subresource::<Value, Value>("binding", pod, &PostParams::default(), &binding)
        .await
        .expect("bind");
}

pub fn now() -> String {
    let t = jiff::Timestamp::now();
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// What kube-scheduler writes for a pod it cannot place: the condition and the event.
pub async fn unschedulable(tc: &TestCluster, pod: &str, message: &str) {
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
pub async fn kubelet(tc: &TestCluster, ns: &str, pod: &str, crash: Option<(&str, i32)>) {
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

pub fn kueue_api(
    tc: &TestCluster,
    kind: &str,
    plural: &str,
    namespaced: bool,
) -> Api<DynamicObject> {
    tc.dynamic("kueue.x-k8s.io", KUEUE, kind, plural, namespaced)
}

pub fn cluster_queue(name: &str, cohort: &str, flavor: &str, gpus: u32) -> Value {
    json!({"apiVersion": format!("kueue.x-k8s.io/{KUEUE}"), "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"cohortName": cohort, "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}})
}

pub fn queued_job(name: &str, queue: &str, pods: u32) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"suspend": true, "parallelism": pods, "completions": pods, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": IMAGE,
                "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}}})
}

/// The condition of the Workload Kueue made for `job`, once `pred` holds for it.
pub async fn workload_condition(
    tc: &TestCluster,
    job: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
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

pub fn condition(v: &Value, t: &str) -> Option<Value> {
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .cloned()
}
