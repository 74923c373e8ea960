//! `gpuctl status` against a real control plane (issue 16): the DGX example applied with the real
//! `gpuctl` binary to a fresh harness (kube-apiserver, etcd, kube-controller-manager, the real
//! Kueue v0.19.2), GPU nodes, pods bound to them, ResourceQuota status counted by the real
//! kube-controller-manager and ClusterQueue status written by the real Kueue controller; the figures
//! status computes from what the API server lists are checked against what was built, and drawn.
//!
//! Stand-ins, stated plainly: no kubelet or scheduler runs. GPU Nodes are API objects with the labels
//! GPU Feature Discovery and the GPU Operator publish and the status a kubelet would write (through
//! the status subresource: Ready, NotReady, capacity, an allocatable one GPU short as the device
//! plugin reports an unhealthy device); pods go through the real Kueue (their namespace's `default`
//! LocalQueue admits them and lifts their scheduling gates) and are then bound to the node the test
//! picks through the pods/binding subresource, which is what the scheduler writes. MIG Manager does not run: a small task reports
//! `nvidia.com/mig.config.state=success` once gpuctl sets a node's MIG config.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpuctl_core::diagnostics::{DiagKind, Diagnostics};
use gpuctl_core::status::StatusInput;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster};
use support::fresh::FreshCluster;
use support::gpuctl::{gpuctl, text};

const EXAMPLE: &str = "blueprints/dgx-h100-training.yaml";
const IMAGE: &str = "registry.k8s.io/pause:3.10";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(250);
const GPU: &str = "nvidia.com/gpu";
const MIG: &str = "nvidia.com/mig-3g.40gb";

/// The example with the GPU Operator's install switched to `none` (this test is about capacity,
/// quotas and queues; tests/cluster/cli_cluster.rs installs the real chart).
fn example_copy(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let text = std::fs::read_to_string(&src).unwrap();
    let text = text.replace("    install: helm\n", "    install: none\n");
    let dst = dir.join("dgx.yaml");
    std::fs::write(&dst, text).unwrap();
    dst
}

/// Creates a Ready GPU node of the pool and lifts the not-ready taint the API server adds (no node
/// lifecycle controller runs to lift it).
async fn pool_node(tc: &TestCluster, suffix: &str, gpu: &GpuNode) -> String {
    tc.create_ready_gpu_node(suffix, gpu)
        .await
        .expect("creates a Ready node")
}

/// A pod of `ns` requesting `amount` of `resource`: Kueue (its namespace's `default` LocalQueue)
/// admits it and lifts its scheduling gates; it is then bound to `node` through the binding
/// subresource, as the scheduler does.
async fn bound_pod(client: &Client, ns: &str, name: &str, node: &str, resource: &str, amount: u32) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{
                "name": "main",
                "image": IMAGE,
                "resources": {
                    "requests": {resource: amount.to_string()},
                    "limits": {resource: amount.to_string()},
                },
            }],
        },
    }))
    .unwrap();
    support::cluster::create_admitted(&pods, &pod)
        .await
        .unwrap_or_else(|e| panic!("creating pod {ns}/{name}: {e}"));
    wait_for(&format!("Kueue admits pod {ns}/{name}"), || {
        let pods = pods.clone();
        async move {
            let p = pods.get(name).await.map_err(|e| e.to_string())?;
            let gates = p.spec.and_then(|s| s.scheduling_gates).unwrap_or_default();
            if gates.is_empty() {
                Ok(())
            } else {
                Err(format!("gates {gates:?}"))
            }
        }
    })
    .await;
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    pods.create_subresource::<Value, Value>("binding", name, &PostParams::default(), &binding)
        .await
        .unwrap_or_else(|e| panic!("binding {ns}/{name} to {node}: {e}"));
}

fn api_resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// A suspended Job for the tenant's LocalQueue: Kueue admits (unsuspends) it or keeps it pending.
async fn queued_job(client: &Client, ns: &str, name: &str, pods: u32, slices: u32) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {
            "suspend": true,
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "main",
                    "image": IMAGE,
                    "resources": {
                        "requests": {MIG: slices.to_string()},
                        "limits": {MIG: slices.to_string()},
                    },
                }],
            }},
        },
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job)
        .await
        .unwrap_or_else(|e| panic!("creating Job {ns}/{name}: {e}"));
}

/// Polls `check` until it returns `Ok`, or panics with its last `Err` after [`WAIT`].
async fn wait_for<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        match check().await {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => {
                panic!("{what}: not within {}s: {e}", WAIT.as_secs())
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

fn resource<'a>(status: &'a Value, pool: &str, res: &str) -> &'a Value {
    status["pools"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == pool))
        .and_then(|p| p["resources"].as_array())
        .and_then(|rs| rs.iter().find(|r| r["resource"] == res))
        .unwrap_or_else(|| panic!("pool {pool} has no {res} in\n{status:#}"))
}

fn figures(r: &Value) -> [u64; 6] {
    [
        "capacity",
        "allocated",
        "free",
        "cordoned",
        "unhealthy",
        "largestPlaceable",
    ]
    .map(|k| r[k].as_u64().unwrap_or(u64::MAX))
}

/// Lists what `gpuctl status` reads (nodes, pods, ResourceQuotas, ClusterQueues, Volcano Queues)
/// into the Day-2 model, one list per kind.
async fn diagnostics(client: &Client) -> Diagnostics {
    let mut d = Diagnostics::new("gpu-operator", None);
    for (kind, group, version, k, plural) in [
        (DiagKind::Node, "", "v1", "Node", "nodes"),
        (DiagKind::Pod, "", "v1", "Pod", "pods"),
        (
            DiagKind::ResourceQuota,
            "",
            "v1",
            "ResourceQuota",
            "resourcequotas",
        ),
        (
            DiagKind::ClusterQueue,
            "kueue.x-k8s.io",
            "v1beta2",
            "ClusterQueue",
            "clusterqueues",
        ),
        (
            DiagKind::VolcanoQueue,
            "scheduling.volcano.sh",
            "v1beta1",
            "Queue",
            "queues",
        ),
    ] {
        let api: Api<DynamicObject> =
            Api::all_with(client.clone(), &api_resource(group, version, k, plural));
        let items = api
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing {plural}: {e}"))
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect();
        d.ingest(kind, items);
    }
    d.finish();
    d
}

async fn status_report(client: &Client, bp: &Path) -> gpuctl_core::status::StatusReport {
    let bp = gpuctl_core::blueprint::load_file(bp)
        .expect("the blueprint loads")
        .blueprint;
    let d = diagnostics(client).await;
    gpuctl_core::status::compute(&bp, &StatusInput::from_diagnostics(&d), "test cluster")
}

async fn read_status(client: &Client, bp: &Path) -> Value {
    serde_json::to_value(status_report(client, bp).await).unwrap()
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_what_the_control_plane_reports() {
    let Some(_shared) = TestCluster::connect("status").await else {
        return;
    };
    let fresh = FreshCluster::up("status");
    let tc = TestCluster::connect_kubeconfig(&fresh.kubeconfig(), "status")
        .await
        .expect("connects to the fresh cluster");
    let client = tc.client.clone();
    let kc = fresh.kubeconfig();
    let kc = kc.to_str().unwrap();

    // Four training nodes (8 H100 each) and two MIG inference nodes (16 3g.40gb slices each).
    let mut train = GpuNode::h100(8);
    for (k, v) in [
        ("node.kubernetes.io/instance-type", "dgx-h100"),
        ("gpuctl.dev/pool", "h100-train"),
        // The pool's topology levels (Kueue's topology-aware scheduling finds no domain without).
        ("network.topology.nvidia.com/spine", "spine-0"),
        ("network.topology.nvidia.com/leaf", "leaf-0"),
    ] {
        train = train.label(k, v);
    }
    let mut infer = GpuNode::h100(8).mig_mixed(&[("3g.40gb", 16, 40192)]);
    for (k, v) in [
        ("node.kubernetes.io/instance-type", "dgx-h100"),
        ("gpuctl.dev/pool", "h100-infer"),
    ] {
        infer = infer.label(k, v);
    }
    let mut t = Vec::new();
    for i in 0..4 {
        t.push(pool_node(&tc, &format!("train-{i}"), &train).await);
    }
    let i0 = pool_node(&tc, "infer-0", &infer).await;
    pool_node(&tc, "infer-1", &infer).await;
    let mig = support::mig_manager::stand_in(client.clone(), tc.owner_selector());

    let dir = tempfile::tempdir().unwrap();
    let bp = example_copy(dir.path());
    let bp = bp.to_str().unwrap();
    let o = gpuctl(&[
        "apply",
        bp,
        "--kubeconfig",
        kc,
        "--yes",
        "--no-helm",
        "--wait-timeout",
        "60s",
        "--crd-timeout",
        "30s",
    ]);
    mig.abort();
    assert!(o.status.success(), "apply failed: {}", text(&o));

    // train-1 cordoned, train-2 NotReady, train-3 with one GPU withdrawn from allocatable.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            &t[1],
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    nodes
        .patch_status(
            &t[2],
            &PatchParams::default(),
            &Patch::Strategic(&json!({"status": {"conditions": [{
                "type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": "container runtime is down",
            }]}})),
        )
        .await
        .unwrap();
    nodes
        .patch_status(
            &t[3],
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"allocatable": {GPU: "7"}}})),
        )
        .await
        .unwrap();

    // Pods admitted by Kueue and bound to nodes: team-a 4 + 2 on train-0, 2 on train-1, 4 on
    // train-2; dev 1 on train-3; serving 3 slices on infer-0.
    for (ns, name, node, res, n) in [
        ("team-a-train", "a-0", &t[0], GPU, 4),
        ("team-a-train", "a-1", &t[0], GPU, 2),
        ("team-a-train", "a-2", &t[1], GPU, 2),
        ("team-a-train", "a-3", &t[2], GPU, 4),
        ("dev-test", "d-0", &t[3], GPU, 1),
        ("offline-batch", "s-0", &i0, MIG, 3),
    ] {
        bound_pod(&client, ns, name, node, res, n).await;
    }
    // Through Kueue: 2 pods of one slice each are admitted; 100 slices exceed cq-infer's 64.
    queued_job(&client, "online-infer", "fits", 2, 1).await;
    queued_job(&client, "online-infer", "too-big", 1, 100).await;

    // kube-controller-manager counts the quota; Kueue writes the ClusterQueue's status.
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "team-a-train");
    wait_for("team-a's ResourceQuota counts 12 GPUs", || {
        let quotas = quotas.clone();
        async move {
            let q = quotas
                .get("team-a-quota")
                .await
                .map_err(|e| e.to_string())?;
            let used = q
                .status
                .and_then(|s| s.used)
                .and_then(|u| u.get("requests.nvidia.com/gpu").cloned());
            match used {
                Some(u) if u.0 == "12" => Ok(()),
                other => Err(format!("used {other:?}")),
            }
        }
    })
    .await;
    let cqs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &api_resource("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues"),
    );
    wait_for(
        "cq-infer admits two workloads and keeps one pending",
        || {
            let cqs = cqs.clone();
            async move {
                let q = cqs.get("cq-infer").await.map_err(|e| e.to_string())?;
                let s = &q.data["status"];
                if s["admittedWorkloads"] == 2 && s["pendingWorkloads"] == 1 {
                    Ok(())
                } else {
                    Err(format!("status {s}"))
                }
            }
        },
    )
    .await;

    let job_pods: Api<Pod> = Api::namespaced(client.clone(), "online-infer");
    wait_for(
        "the Job controller creates the admitted Job's 2 pods",
        || {
            let job_pods = job_pods.clone();
            async move {
                let n = job_pods
                    .list(&ListParams::default().labels("batch.kubernetes.io/job-name=fits"))
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .len();
                if n == 2 {
                    Ok(())
                } else {
                    Err(format!("{n} pods"))
                }
            }
        },
    )
    .await;

    // What the control plane holds, listed here (one list per kind, as `gpuctl snapshot
    // --diagnostics` does) into the Day-2 model; status computes from it.
    let live = read_status(&client, Path::new(bp)).await;
    assert_eq!(live["formatVersion"], 1);

    // h100-train: 32 = 9 allocated (6 + 2 + 1; train-2's 4 are on a NotReady node) + 8 free
    // (2 + 6) + 6 cordoned + 9 unhealthy (train-2's 8, train-3's withdrawn 1); the largest request
    // placeable now is train-3's 6 of a packed 8.
    let g = resource(&live, "h100-train", GPU);
    assert_eq!(figures(g), [32, 9, 8, 6, 9, 6], "{g:#}");
    assert_eq!(g["fragmentation"], 0.25);
    let pool = live["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "h100-train")
        .unwrap();
    assert_eq!(pool["nodes"]["total"], 4);
    assert_eq!(pool["nodes"]["ready"], 3);
    assert_eq!(pool["nodes"]["cordoned"], 1);
    assert_eq!(pool["nodes"]["notReady"], 1);
    // h100-infer: 32 slices, 3 held by a bound pod; the Job's pods wait for a scheduler.
    let m = resource(&live, "h100-infer", MIG);
    assert_eq!(figures(m), [32, 3, 29, 0, 0, 16], "{m:#}");
    assert_eq!(m["largestPacked"], 16);
    assert_eq!(m["fragmentation"], 0.0);
    assert!(
        live["pendingGpuPods"].as_u64().unwrap() >= 2,
        "the admitted Job's 2 unbound pods: {}",
        live["pendingGpuPods"]
    );

    // Quotas as kube-controller-manager counted them.
    let team_a = live["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "team-a")
        .unwrap();
    let gpu_quota = team_a["quotas"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "requests.nvidia.com/gpu")
        .unwrap();
    assert_eq!(gpu_quota["used"], "12");
    assert_eq!(gpu_quota["hard"], "80");
    assert_eq!(gpu_quota["ratio"], 0.15);
    assert_eq!(team_a["allocated"][GPU], 12);

    // The ClusterQueue as Kueue reports it.
    let cq = live["clusterQueues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "cq-infer")
        .unwrap();
    // Admitted: the pod s-0 (3 slices) and the Job `fits` (2 x 1); pending: `too-big`.
    assert_eq!(cq["admitted"], 2);
    assert_eq!(cq["pending"], 1);
    assert_eq!(cq["cohort"], "gpu-all");
    assert_eq!(cq["active"], true);
    let f = cq["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["resource"] == MIG)
        .unwrap();
    assert_eq!(f["flavor"], "h100-infer");
    assert_eq!(f["nominal"], "64");
    assert_eq!(f["used"], "5");
    assert_eq!(f["borrowed"], "0");
    let team_a_cq = live["clusterQueues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "cq-team-a")
        .unwrap();
    assert_eq!(team_a_cq["admitted"], 4);
    let f = team_a_cq["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["resource"] == GPU)
        .unwrap();
    assert_eq!(
        (&f["nominal"], &f["used"], &f["borrowed"]),
        (&json!("64"), &json!("12"), &json!("0"))
    );

    // `gpuctl status` live, and from `gpuctl snapshot --diagnostics`: the same figures.
    let mut expected = live.clone();
    expected["source"] = Value::Null;
    let o = gpuctl(&["status", bp, "--kubeconfig", kc, "-o", "json"]);
    assert!(o.status.success(), "status failed: {}", text(&o));
    let mut cli: Value = serde_json::from_slice(&o.stdout).expect("status -o json is JSON");
    cli["source"] = Value::Null;
    assert_eq!(
        cli, expected,
        "gpuctl status live differs from the listed objects"
    );
    let snap = dir.path().join("diag.json");
    let o = gpuctl(&[
        "snapshot",
        bp,
        "--diagnostics",
        "--kubeconfig",
        kc,
        "--out",
        snap.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "snapshot --diagnostics failed: {}",
        text(&o)
    );
    let o = gpuctl(&[
        "status",
        bp,
        "--snapshot",
        snap.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "status --snapshot failed: {}", text(&o));
    let mut offline: Value = serde_json::from_slice(&o.stdout).unwrap();
    offline["source"] = Value::Null;
    assert_eq!(
        offline, expected,
        "the snapshot gives other figures than the cluster"
    );

    // The same figures drawn: the picture of this status renders.
    let report: gpuctl_core::status::StatusReport = status_report(&client, Path::new(bp)).await;
    let picture = gpuctl::output::status::svg::svg(&report);
    assert!(picture.starts_with("<svg ") && picture.ends_with("</svg>\n"));
    assert!(picture.contains("Pool h100-train"));
}
