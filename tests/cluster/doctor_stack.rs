//! `gpuctl doctor` against the real kube-apiserver (issue 16): the GPU stack's findings (GPU231
//! ClusterPolicy, GPU232 NVIDIADriver, GPU233 MIG configuration, GPU236 GPU containers), the pool
//! nodes' (GPU240 NotReady, GPU241 no GPUs advertised) and GPU249 (a kind the credentials may not
//! read), one test per failure story, each asserting the finding, its subjects, the cause and the
//! fix, and that the healthy counterpart in the same test gives none.
//!
//! Real parts: the API server and etcd; the ClusterPolicy and NVIDIADriver CRDs are the upstream
//! files the harness installs, so the status written below passes their schemas; RBAC and
//! ServiceAccount tokens are the API server's own (GPU249 reads with a token the TokenRequest API
//! issued to a ServiceAccount whose ClusterRole leaves out ClusterPolicies, and the 403 is the
//! authorizer's). The doctor reads with the same paged LIST calls `gpuctl doctor` makes.
//!
//! Stand-ins, stated plainly (the harness has no GPU Operator, kubelet or node lifecycle controller):
//! - The GPU Operator's controllers: `tests/support/operator_driver.rs` writes ClusterPolicy and
//!   NVIDIADriver status as the operator's condition updater does (`state: notReady`, `Ready=False`
//!   reason `Error`, `Error=True` with the controller's reason and message), and plays the MIG
//!   Manager, which walks `nvidia.com/mig.config.state` to `pending`, then `failed` for a config it
//!   cannot apply.
//! - GPU nodes carry the labels GPU Feature Discovery and the operator set, and the allocatable the
//!   device plugin registers (tests/support/cluster.rs). When the device plugin marks every GPU
//!   unhealthy, the kubelet keeps `capacity` and reports `allocatable: nvidia.com/gpu: "0"`; the test
//!   writes that.
//! - The node lifecycle controller: for a node whose kubelet stopped posting status it sets every
//!   kubelet condition to `Unknown` with reason `NodeStatusUnknown` and message "Kubelet stopped
//!   posting node status.", and taints the node `node.kubernetes.io/unreachable`; the test writes
//!   exactly that.
//! - The scheduler binds pods with the `pods/binding` subresource (tests/support/doctor.rs).
//! - The kubelet: for a container whose start fails in the NVIDIA Container Toolkit's prestart hook
//!   it writes the waiting reason `RunContainerError` with the runtime's message (containerd, runc,
//!   then `nvidia-container-cli`'s own error), and the last termination `StartError`, exit code 128,
//!   started at the epoch. For a container that crash-loops on an NVML error the pod sets
//!   `terminationMessagePolicy: FallbackToLogsOnError`, so the kubelet's termination message is the
//!   log's tail; with the default policy (`File`) it would be empty and the doctor could not tell a
//!   GPU crash from any other.
//!
//! The cluster is shared with other tests, so each test's blueprint selects only its own nodes
//! (pools labelled with the test's prefix), cluster-scoped objects carry the prefix, and the
//! assertions look at the findings about the test's own objects.

use crate::support;
use crate::support::operator_driver;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gpuctl_core::doctor::Finding;
use gpuctl_core::located::Severity;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use operator_driver::{DriverConfig, MIG_CONFIG, MIG_STATE, OperatorDriver};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster};
use support::doctor::*;

fn cluster_policies(tc: &TestCluster) -> Api<DynamicObject> {
    tc.dynamic(
        "nvidia.com",
        "v1",
        "ClusterPolicy",
        "clusterpolicies",
        false,
    )
}

/// The findings of `id` about this test's objects.
fn all<'a>(r: &'a gpuctl_core::doctor::Report, tc: &TestCluster, id: &str) -> Vec<&'a Finding> {
    mine(r, tc).into_iter().filter(|f| f.id == id).collect()
}

/// The operator reports the ClusterPolicy not ready (the device plugin's state is not ready) and
/// the pool's NVIDIADriver waiting on its driver pods; the other NVIDIADriver is ready.
#[needs_test_cluster]
#[tokio::test]
async fn operator_crs_not_ready() {
    let Some(tc) = TestCluster::connect("doctor_stack_crs").await else {
        return;
    };
    let op = create_operator_ns(&tc).await;
    let cp = tc.name("cluster-policy");
    let cps = cluster_policies(&tc);
    let spec = json!({"operator": {"defaultRuntime": "containerd"}, "daemonsets": {},
        "driver": {"enabled": true, "useNvidiaDriverCRD": true}, "toolkit": {"enabled": true},
        "devicePlugin": {"enabled": true}, "dcgm": {"enabled": false}, "dcgmExporter": {"enabled": true},
        "gfd": {"enabled": true}, "nodeStatusExporter": {"enabled": false}});
    tc.apply(
        &cps,
        &json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": cp, "labels": tc.owner_labels()}, "spec": spec}),
    )
    .await
    .expect("cluster policy");
    let states = "ClusterPolicy is not ready, states not ready: [state-device-plugin]";
    operator_driver::report_not_ready(&cps, &cp, &op, "OperandNotReady", states).await;
    let drivers = tc.nvidia_drivers();
    let (waiting, ready) = (tc.name("train"), tc.name("infer"));
    for (name, pool) in [(&waiting, "train"), (&ready, "infer")] {
        tc.apply(
            &drivers,
            &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
                "metadata": {"name": name, "labels": tc.owner_labels()},
                "spec": {"driverType": "gpu", "default": false, "repository": "nvcr.io/nvidia",
                    "image": "driver", "version": DRIVER, "kernelModuleType": "open",
                    "nodeSelector": {"gpuctl.dev/pool": format!("{}-{pool}", tc.prefix)}}}),
        )
        .await
        .expect("nvidia driver");
    }
    operator_driver::report_not_ready(
        &drivers,
        &waiting,
        &op,
        "DriverNotReady",
        "Waiting for driver pod to be ready",
    )
    .await;
    operator_driver::report_ready(&drivers, &ready, &op).await;

    let bp = load(&blueprint_text(
        &tc,
        &[("train", ""), ("infer", "")],
        "",
        "",
    ));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU231");
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.title, format!("ClusterPolicy {cp} is notReady"));
    assert_eq!(f.subjects, [format!("clusterpolicy/{cp}")]);
    assert!(
        f.evidence.iter().any(|e| e.source
            == format!("condition Error=True (OperandNotReady) on clusterpolicy/{cp}")
            && e.text == states),
        "the operator's own words: {:#?}",
        f.evidence
    );
    assert!(
        f.cause
            .contains(&format!("reports ClusterPolicy `{cp}` as notReady")),
        "{}",
        f.cause
    );
    assert!(
        f.fix.contains(&format!(
            "`kubectl get clusterpolicy {cp} -o jsonpath='{{.status.conditions}}'`"
        )) && f
            .fix
            .contains(&format!("`kubectl get pods -n {op} -o wide`")),
        "{}",
        f.fix
    );

    let d = one(&r, &tc, "GPU232");
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.subjects, [format!("nvidiadriver/{waiting}")]);
    assert!(
        d.evidence.iter().any(|e| e.source
            == format!("condition Error=True (DriverNotReady) on nvidiadriver/{waiting}")
            && e.text == "Waiting for driver pod to be ready"),
        "{:#?}",
        d.evidence
    );
    assert!(
        d.fix
            .contains(&format!("kubectl get nvidiadriver {waiting} -o jsonpath")),
        "{}",
        d.fix
    );
    // The ready NVIDIADriver is no finding.
    assert!(
        !mine(&r, &tc)
            .iter()
            .any(|f| f.subjects.contains(&format!("nvidiadriver/{ready}"))),
        "{:#?}",
        mine(&r, &tc)
    );
}

/// The blueprint asks for a MIG layout; MIG Manager cannot apply it on one pool's node (the label
/// goes `pending`, then `failed`) and applies it on the other pool's.
#[needs_test_cluster]
#[tokio::test]
async fn mig_config_failed_on_a_pool() {
    let Some(tc) = TestCluster::connect("doctor_stack_mig").await else {
        return;
    };
    let bad = gpu_node(&tc, "a0", "a", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let good = gpu_node(&tc, "b0", "b", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    // gpuctl names a pool's MIG config after the pool (render/nodes.rs); MIG Manager fails on a's.
    let (pa, pb) = (format!("{}-a", tc.prefix), format!("{}-b", tc.prefix));
    let mig = OperatorDriver::spawn(
        tc.client.clone(),
        &tc.namespace,
        &tc.owner_selector(),
        DriverConfig {
            mig_failures: vec![pa.clone()],
            ..DriverConfig::default()
        },
    );
    // MIG Manager reacts to a change of the label from what it saw: let it see the nodes first.
    let deadline = Instant::now() + WAIT;
    while mig.passes.load(Ordering::SeqCst) < 2 {
        assert!(
            Instant::now() < deadline,
            "the MIG Manager stand-in never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // What `gpuctl apply` does for the pool's layout: the node's `nvidia.com/mig.config` label.
    let nodes: Api<Node> = tc.cluster_scoped();
    for (n, config) in [(&bad, &pa), (&good, &pb)] {
        nodes
            .patch(
                n,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"labels": {MIG_CONFIG: config}}})),
            )
            .await
            .expect("mig config label");
    }
    if !mig_state(&nodes, &bad, "failed").await || !mig_state(&nodes, &good, "success").await {
        panic!("MIG Manager did not finish within {WAIT:?}");
    }
    drop(mig);
    let layout = "      partitioning:\n        mode: mig\n        mig:\n          strategy: mixed\n          layout: { \"3g.40gb\": 2 }\n";
    let bp = load(&blueprint_text(
        &tc,
        &[("a", layout), ("b", layout)],
        "",
        "",
    ));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU233");
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(
        f.title,
        format!("MIG configuration `{pa}` failed on pool {pa}")
    );
    assert_eq!(f.subjects, [format!("node/{bad}"), format!("pool/{pa}")]);
    assert_eq!(
        f.evidence[0].text,
        format!("{MIG_CONFIG}={pa}, {MIG_STATE}=failed")
    );
    assert!(
        f.cause
            .contains(&format!("MIG Manager could not apply `{pa}`")),
        "{}",
        f.cause
    );
    assert!(
        f.fix.contains("kubectl logs -n ")
            && f.fix.contains("-l app=nvidia-mig-manager")
            && f.fix.contains(&format!(
                "kubectl label node {bad} {MIG_CONFIG}={pa} --overwrite"
            )),
        "{}",
        f.fix
    );
}

async fn mig_state(nodes: &Api<Node>, node: &str, want: &str) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        let n = nodes.get(node).await.expect("node");
        let labels = n.metadata.labels.unwrap_or_default();
        if labels.get(MIG_STATE).map(String::as_str) == Some(want) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The container runtime's message when the NVIDIA Container Toolkit's prestart hook fails because
/// no driver is loaded (containerd 2, runc 1.2, toolkit in legacy mode).
const TOOLKIT_ERROR: &str = "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: initialization error: nvml error: driver not loaded: unknown";

/// GPU pods that cannot start on one pool (the toolkit's hook fails) and crash at start on another
/// (NVML finds a driver/library mismatch); a running GPU pod on a third pool is no finding.
#[needs_test_cluster]
#[tokio::test]
async fn gpu_containers_do_not_start() {
    let Some(tc) = TestCluster::connect("doctor_stack_start").await else {
        return;
    };
    let mut node = Vec::new();
    for pool in ["a", "b", "c"] {
        node.push(
            gpu_node(
                &tc,
                &format!("{pool}0"),
                pool,
                GpuNode::h100(8).driver(DRIVER, (13, 0)),
            )
            .await,
        );
    }
    let mut pods = Vec::new();
    for (i, name) in ["train-a", "train-b", "train-c"].iter().enumerate() {
        let mut m = pod_manifest(
            name,
            &tc.namespace,
            json!({"nvidia.com/gpu": "8"}),
            json!({}),
            None,
        );
        m["spec"]["containers"][0]["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
        let p = create_pod(&tc, m).await;
        bind(&tc, &tc.namespace, &p, &node[i]).await;
        pods.push(p);
    }
    let api = pods_in(&tc, &tc.namespace);
    let t = now();
    // Pool a: the kubelet's status after the first start failed.
    let start = json!({"status": {"phase": "Running", "startTime": t,
        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
            "message": "containers with unready status: [main]", "lastTransitionTime": t}],
        "containerStatuses": [{"name": "main", "ready": false, "restartCount": 1, "image": IMAGE,
            "imageID": "", "started": false,
            "state": {"waiting": {"reason": "RunContainerError", "message": TOOLKIT_ERROR}},
            "lastState": {"terminated": {"exitCode": 128, "reason": "StartError", "message": TOOLKIT_ERROR,
                "startedAt": "1970-01-01T00:00:00Z", "finishedAt": t}}}]}});
    api.patch_status(&pods[0], &PatchParams::default(), &Patch::Merge(&start))
        .await
        .expect("pod status");
    // Pool b: the process starts, fails NVML's init and exits; the log's tail is the message.
    kubelet(
        &tc,
        &tc.namespace,
        &pods[1],
        Some((
            "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.173",
            4,
        )),
    )
    .await;
    kubelet(&tc, &tc.namespace, &pods[2], None).await;

    let bp = load(&blueprint_text(
        &tc,
        &[("a", ""), ("b", ""), ("c", "")],
        "",
        "",
    ));
    let r = diagnose(&tc, &bp).await;
    let found = all(&r, &tc, "GPU236");
    assert_eq!(found.len(), 2, "{found:#?}");
    let ns = &tc.namespace;
    let f = found
        .iter()
        .find(|f| f.subjects.contains(&format!("pod/{ns}/{}", pods[0])))
        .expect("the pod that does not start");
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(
        f.title,
        format!("GPU containers do not start on pool {}-a", tc.prefix)
    );
    assert!(f.subjects.contains(&format!("node/{}", node[0])), "{f:#?}");
    assert!(
        f.evidence[0].text.starts_with(
            "container main waiting: RunContainerError: failed to create containerd task"
        ) && f.evidence[0]
            .text
            .contains("nvidia-container-cli: initialization error: nvml error: driver not loaded")
            && f.evidence[0].text.contains("last exit 128 (StartError)"),
        "{:#?}",
        f.evidence
    );
    assert!(
        f.cause
            .contains("the container runtime cannot create GPU containers on the node"),
        "{}",
        f.cause
    );
    assert!(
        f.fix
            .contains(&format!("`kubectl describe pod -n {ns} {}`", pods[0]))
            && f.fix.contains("crictl info"),
        "{}",
        f.fix
    );
    let c = found
        .iter()
        .find(|f| f.subjects.contains(&format!("pod/{ns}/{}", pods[1])))
        .expect("the pod that crashes");
    assert_eq!(
        c.title,
        format!("GPU containers crash at start on pool {}-b", tc.prefix)
    );
    assert!(c.subjects.contains(&format!("node/{}", node[1])), "{c:#?}");
    assert!(
        c.evidence[0]
            .text
            .contains("Driver/library version mismatch"),
        "{:#?}",
        c.evidence
    );
    assert!(
        c.cause.contains("exit with a CUDA/NVML error"),
        "{}",
        c.cause
    );
    assert!(
        !mine(&r, &tc)
            .iter()
            .any(|f| f.subjects.contains(&format!("pod/{ns}/{}", pods[2]))),
        "the running pod: {:#?}",
        mine(&r, &tc)
    );
}

/// One pool's node stopped posting status (the node lifecycle controller marked it Unknown);
/// another pool's node is Ready but its device plugin reports every GPU unhealthy. The third pool
/// is healthy.
#[needs_test_cluster]
#[tokio::test]
async fn pool_nodes_not_ready_or_without_gpus() {
    let Some(tc) = TestCluster::connect("doctor_stack_nodes").await else {
        return;
    };
    let lost = gpu_node(&tc, "a0", "a", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let sick = gpu_node(&tc, "b0", "b", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let fine = gpu_node(&tc, "c0", "c", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let nodes: Api<Node> = tc.cluster_scoped();
    // The node lifecycle controller, after the grace period without a heartbeat.
    let n = nodes.get(&lost).await.expect("node");
    let heartbeat = n.status.as_ref().unwrap().conditions.as_ref().unwrap()[0]
        .last_heartbeat_time
        .clone();
    let t = now();
    let unknown = |type_: &str| {
        json!({"type": type_, "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
            "lastHeartbeatTime": heartbeat, "lastTransitionTime": t})
    };
    nodes
        .patch_status(
            &lost,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [
                unknown("Ready"), unknown("MemoryPressure"), unknown("DiskPressure"), unknown("PIDPressure"),
            ]}})),
        )
        .await
        .expect("node conditions");
    nodes
        .patch(
            &lost,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [
                {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": t},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": t},
            ]}})),
        )
        .await
        .expect("node taints");
    // The kubelet, once the device plugin reports every GPU unhealthy: capacity stays, allocatable 0.
    nodes
        .patch_status(
            &sick,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocatable": {"nvidia.com/gpu": "0"}}})),
        )
        .await
        .expect("allocatable");

    let bp = load(&blueprint_text(
        &tc,
        &[("a", ""), ("b", ""), ("c", "")],
        "",
        "",
    ));
    let r = diagnose(&tc, &bp).await;
    let (pa, pb) = (format!("{}-a", tc.prefix), format!("{}-b", tc.prefix));
    let f = one(&r, &tc, "GPU240");
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.title, format!("nodes of pool {pa} are NotReady"));
    assert_eq!(f.subjects, [format!("node/{lost}"), format!("pool/{pa}")]);
    assert_eq!(
        f.evidence[0].text,
        "Unknown (NodeStatusUnknown): Kubelet stopped posting node status."
    );
    assert!(
        f.cause.contains(&format!("GPUs are lost to pool `{pa}`")),
        "{}",
        f.cause
    );
    assert!(
        f.fix.contains(&format!("`kubectl describe node {lost}`"))
            && f.fix.contains("journalctl -u kubelet"),
        "{}",
        f.fix
    );
    let g = one(&r, &tc, "GPU241");
    assert_eq!(g.severity, Severity::Error);
    assert_eq!(g.title, format!("nodes of pool {pb} advertise no GPUs"));
    assert_eq!(g.subjects, [format!("node/{sick}"), format!("pool/{pb}")]);
    assert!(
        g.cause.contains("has registered no GPU resource")
            && g.cause.contains(&format!("pool `{pb}` expects 8 per node")),
        "{}",
        g.cause
    );
    assert!(
        g.fix
            .contains(&format!("--field-selector spec.nodeName={sick}"))
            && g.fix.contains("-l app=nvidia-device-plugin-daemonset"),
        "{}",
        g.fix
    );
    assert!(
        !mine(&r, &tc)
            .iter()
            .any(|f| f.subjects.contains(&format!("node/{fine}"))),
        "{:#?}",
        mine(&r, &tc)
    );
    // The NotReady node is not also reported as advertising no GPUs.
    assert!(!g.subjects.contains(&format!("node/{lost}")));
}

/// A least-privilege identity (a ServiceAccount token from the TokenRequest API) whose ClusterRole
/// lists everything the doctor reads except ClusterPolicies: the doctor says it could not read
/// them and which grant is missing, instead of reporting a clean GPU Operator. A not-ready
/// ClusterPolicy that the admin's reading reports (GPU231) is what this identity cannot see.
#[needs_test_cluster]
#[tokio::test]
async fn kind_the_credentials_may_not_list() {
    let Some(tc) = TestCluster::connect("doctor_stack_rbac").await else {
        return;
    };
    let op = create_operator_ns(&tc).await;
    let cp = tc.name("cluster-policy");
    let cps = cluster_policies(&tc);
    tc.apply(
        &cps,
        &json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": cp, "labels": tc.owner_labels()},
            "spec": {"operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {}, "devicePlugin": {},
                "dcgm": {}, "dcgmExporter": {}, "gfd": {}, "nodeStatusExporter": {}}}),
    )
    .await
    .expect("cluster policy");
    operator_driver::report_not_ready(
        &cps,
        &cp,
        &op,
        "OperandNotReady",
        "ClusterPolicy is not ready, states not ready: [state-driver]",
    )
    .await;
    let sa = "doctor-reader";
    let kubeconfig = reader_kubeconfig(&tc, sa).await;
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));

    let k = gpuctl_cluster::connect(&gpuctl_cluster::ConnectOptions {
        kubeconfig: Some(kubeconfig.path().to_path_buf()),
        context: None,
    })
    .await
    .expect("connect as the reader");
    let reading =
        gpuctl_cluster::diagnostics::read(&k, gpuctl_core::diagnostics::DOCTOR_READS, &op, None)
            .await
            .expect("a reading despite the forbidden kind");
    let r = gpuctl_core::doctor::diagnose(
        &bp,
        gpuctl_core::profiles::Catalog::embedded(),
        &reading.diagnostics,
        "bp.yaml",
    );
    let f: Vec<&Finding> = r.findings.iter().filter(|f| f.id == "GPU249").collect();
    assert_eq!(f.len(), 1, "only ClusterPolicies are forbidden: {f:#?}");
    let f = f[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(
        f.title,
        "ClusterPolicy.nvidia.com could not be read: forbidden"
    );
    assert_eq!(f.subjects, ["kind/ClusterPolicy.nvidia.com"]);
    let user = format!("system:serviceaccount:{}:{sa}", tc.namespace);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.text.contains(&format!("User \"{user}\""))
                && e.text.contains("cannot list resource \"clusterpolicies\"")),
        "the authorizer's message names the identity: {:#?}",
        f.evidence
    );
    assert!(
        f.cause
            .contains("may not list ClusterPolicy.nvidia.com, so findings about it are missing"),
        "{}",
        f.cause
    );
    assert!(
        f.fix.contains("grant list on ClusterPolicy.nvidia.com")
            && f.fix
                .contains("kubectl auth can-i list clusterpolicy.nvidia.com"),
        "{}",
        f.fix
    );
    assert!(
        all(&r, &tc, "GPU231").is_empty(),
        "this identity cannot see the ClusterPolicy"
    );
    // The admin sees what the reader could not, and reads everything.
    let admin = diagnose(&tc, &bp).await;
    assert_eq!(
        all(&admin, &tc, "GPU231").len(),
        1,
        "{:#?}",
        mine(&admin, &tc)
    );
    assert!(
        !admin.findings.iter().any(|f| f.id == "GPU249"),
        "{:#?}",
        admin.unread
    );
}

/// A kubeconfig for ServiceAccount `sa` in the test's namespace, bound to a ClusterRole that may
/// list every kind the doctor reads but ClusterPolicies, with a token from the TokenRequest API.
async fn reader_kubeconfig(tc: &TestCluster, sa: &str) -> tempfile::NamedTempFile {
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = tc.namespaced();
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": sa}})).unwrap(),
    )
    .await
    .expect("service account");
    let role = tc.name("doctor-reader");
    let list = ["get", "list"];
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = tc.cluster_scoped();
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": role, "labels": tc.owner_labels()},
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes", "pods", "events", "resourcequotas", "limitranges"], "verbs": list},
                    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": list},
                    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "clusterqueues", "localqueues", "cohorts"], "verbs": list},
                    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups", "queues"], "verbs": list},
                    {"apiGroups": ["nvidia.com"], "resources": ["nvidiadrivers"], "verbs": list},
                    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceslices"], "verbs": list},
                ]}))
            .unwrap(),
        )
        .await
        .expect("cluster role");
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = tc.cluster_scoped();
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": role, "labels": tc.owner_labels()},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": tc.namespace}]}))
            .unwrap(),
        )
        .await
        .expect("cluster role binding");
    let tr: Value = sas
        .create_subresource(
            "token",
            sa,
            &PostParams::default(),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600}}),
        )
        .await
        .expect("token request");
    let token = tr["status"]["token"].as_str().expect("a token").to_string();
    let admin = kube::config::Kubeconfig::read_from(kubeconfig()).expect("admin kubeconfig");
    let cluster = admin.clusters[0].cluster.clone().expect("cluster");
    let kc = json!({"apiVersion": "v1", "kind": "Config", "current-context": "reader",
        "clusters": [{"name": "harness", "cluster": {"server": cluster.server,
            "certificate-authority-data": cluster.certificate_authority_data}}],
        "users": [{"name": "reader", "user": {"token": token}}],
        "contexts": [{"name": "reader", "context": {"cluster": "harness", "user": "reader"}}]});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), serde_json::to_vec(&kc).unwrap()).unwrap();
    file
}
