//! Issue 40: provisioned pools with the real Karpenter (v1.15.0, KWOK cloud provider), the real
//! kwok controller and the real kube-scheduler on the test API server (`tools/kube-harness/run up
//! --with-karpenter`). gpuctl renders and applies the NodePools and NodeOverlay; the instance types
//! Karpenter offers are the catalog's (tools/kube-harness/karpenter/instance-types.json).
//!
//! What is played by the test, and why: the Node Readiness Controller cannot be built here, so the
//! test removes the readiness taint as it would once Node Problem Detector reports the GPU ready (and
//! says so); the harness's kube-controller-manager runs without the node-lifecycle controller, so the
//! test also removes `node.kubernetes.io/not-ready` as that controller would for a Ready node. kwok
//! plays each Node's kubelet (Ready, heartbeats, pods Running). Under KWOK a node's capacity is what
//! its NodeClaim requested, not the instance's size (shared/reference/node-pools.md §3.2): the GPU
//! limit test fills the pool's limit with one 8-GPU pod.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::dra_harness::poll;
use crate::support;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::fresh::FreshCluster;
use support::gpuctl::{Gpuctl, TODAY};

pub(crate) const READINESS: &str = "readiness.k8s.io/nvidia-gpu-not-ready";
pub(crate) const NOT_READY: &str = "node.kubernetes.io/not-ready";

pub(crate) fn gpuctl(args: &[&str], kubeconfig: &str) -> Output {
    Gpuctl::new(args)
        .args(["--kubeconfig", kubeconfig])
        .today(TODAY)
        .output()
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A training pool of one p5.48xlarge at most (limit 8 GPUs) and a MIG pool on the same type
/// kept apart by its own taint; both at zero. `overlay: false` turns the MIG pool's NodeOverlay off
/// (what validation reports as GPU1401: the test shows why).
pub(crate) fn blueprint(p: &str, overlay: bool) -> String {
    let overlay = if overlay {
        ""
    } else {
        "\n        nodeOverlay: false"
    };
    format!(
        r#"{head}  nodeReadiness:
    taintKey: {READINESS}
    signal: external
  nodePools:
    - name: {p}-train
      role: training
      selector: {{ gpuctl.dev/pool: {p}-train }}
      nodes: 0
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
      provisioner:
        type: karpenter
        platform: kwok
        nodeClass: {p}
        minNodes: 0
        maxNodes: 1
        instanceTypes: [p5.48xlarge]
      taints:
        - {{ key: nvidia.com/gpu, value: present, effect: NoSchedule }}
    - name: {p}-mig
      role: inference
      selector: {{ gpuctl.dev/pool: {p}-mig }}
      nodes: 0
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
      partitioning:
        mode: mig
        mig: {{ strategy: mixed, layout: {{ "1g.10gb": 7 }} }}
      provisioner:
        type: karpenter
        platform: kwok
        nodeClass: {p}
        minNodes: 0
        maxNodes: 1
        instanceTypes: [p5.48xlarge]{overlay}
      taints:
        - {{ key: gpuctl.dev/mig, value: {p}, effect: NoSchedule }}
"#,
        head = crate::dra_apply::head_with_driver(p, "580.173.02")
    )
}

pub(crate) fn dynamic(
    tc: &TestCluster,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::all_with(tc.client.clone(), &ar)
}

pub(crate) fn node_claims(tc: &TestCluster) -> Api<DynamicObject> {
    dynamic(tc, "karpenter.sh", "v1", "NodeClaim", "nodeclaims")
}

/// A pod of `ns` asking for `resources`, tolerating `tolerate` (keys), bound by the harness's
/// scheduler profile.
pub(crate) fn gpu_pod(name: &str, resources: Value, tolerate: &[&str]) -> Pod {
    let tolerations: Vec<Value> = tolerate
        .iter()
        .map(|k| json!({"key": k, "operator": "Exists", "effect": "NoSchedule"}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": support::dra::SCHEDULER,
            "tolerations": tolerations,
            "containers": [{
                "name": "main",
                "image": "registry.example/cuda:12.8",
                "resources": {"requests": resources.clone(), "limits": resources},
            }],
        },
    }))
    .unwrap()
}

/// NodeClaims of NodePool `pool`.
pub(crate) async fn claims_of(tc: &TestCluster, pool: &str) -> Vec<DynamicObject> {
    node_claims(tc)
        .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={pool}")))
        .await
        .unwrap()
        .items
}

/// The registered Node of the first NodeClaim of `pool`.
pub(crate) async fn launched_node(tc: &TestCluster, pool: &str, secs: u64) -> Node {
    let nodes: Api<Node> = Api::all(tc.client.clone());
    let name = poll(
        secs,
        &format!("Karpenter to launch and register a node for {pool}"),
        async || {
            let c = claims_of(tc, pool).await.into_iter().next()?;
            c.data["status"]["nodeName"].as_str().map(str::to_string)
        },
    )
    .await;
    poll(30, &format!("node {name} to be Ready (kwok)"), async || {
        let n = nodes.get(&name).await.ok()?;
        is_ready(&n).then_some(n)
    })
    .await
}

/// The node reports `Ready=True`.
pub(crate) fn is_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub(crate) fn taint_keys(n: &Node) -> Vec<String> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect()
}

/// Removes taints by key (what the Node Readiness Controller and the node-lifecycle controller do).
async fn remove_taints(tc: &TestCluster, node: &str, keys: &[&str]) {
    let nodes: Api<Node> = Api::all(tc.client.clone());
    let n = nodes.get(node).await.unwrap();
    strip_taints(&nodes, &n, keys).await.unwrap();
}

/// Writes `n`'s taints without those of `keys` (a merge patch of the whole list).
pub(crate) async fn strip_taints(
    nodes: &Api<Node>,
    n: &Node,
    keys: &[&str],
) -> Result<(), kube::Error> {
    let node = n.metadata.name.clone().unwrap_or_default();
    let kept: Vec<Value> = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !keys.contains(&t.key.as_str()))
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": kept}})),
        )
        .await
        .map(|_| ())
}

pub(crate) async fn pod_node(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get(name).await.ok()?.spec?.node_name
}

/// A cluster of the test's own with the real Karpenter, kwok and kube-scheduler (`run up
/// --with-karpenter`, no Kueue or Volcano), the test's name prefix `p` (at most 20 characters:
/// NodePool and NodeClass names carry it) and the KWOKNodeClass named `p` the blueprints' pools
/// reference (gpuctl names it and renders none; the clouds' own are schema-checked only).
pub(crate) struct KarpenterCluster {
    /// Stopped when dropped.
    pub fresh: FreshCluster,
    pub tc: TestCluster,
    /// Its kubeconfig's path.
    pub kc: String,
    pub p: String,
    /// Seconds from the call to the cluster being up.
    pub up: f64,
}

pub(crate) async fn karpenter_cluster(harness: &str, test: &str, prefix: &str) -> KarpenterCluster {
    let started = Instant::now();
    let fresh = FreshCluster::up_with(
        harness,
        &["--with-karpenter", "--without-kueue", "--without-volcano"],
    );
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, test)
        .await
        .expect("connects to the fresh cluster");
    let kc = kc.to_str().unwrap().to_string();
    let up = started.elapsed().as_secs_f64();
    let mut p = tc.name(prefix);
    p.truncate(20);
    let p = p.trim_end_matches('-').to_string();
    let classes = dynamic(
        &tc,
        "karpenter.kwok.sh",
        "v1alpha1",
        "KWOKNodeClass",
        "kwoknodeclasses",
    );
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
        "metadata": {"name": p}, "spec": {}
    }))
    .unwrap();
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    KarpenterCluster {
        fresh,
        tc,
        kc,
        p,
        up,
    }
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpenter_provisions_gpuctls_pools() {
    let Some(_shared) = TestCluster::connect("provisioning").await else {
        return;
    };
    let started = Instant::now();
    let KarpenterCluster {
        fresh: _fresh,
        tc,
        kc,
        p,
        up,
    } = karpenter_cluster("karpenter", "provisioning", "kp").await;
    let (train, mig) = (format!("{p}-train"), format!("{p}-mig"));

    // 1. Without the MIG pool's NodeOverlay a MIG pod on the pool at zero gets no node: validation
    // refuses that blueprint (GPU1401); the cluster shows why once the overlay gpuctl applied is gone.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kp.yaml");
    std::fs::write(&path, blueprint(&p, false)).unwrap();
    let no_overlay = path.to_str().unwrap().to_string();
    let o = Gpuctl::new(["validate", &no_overlay]).today(TODAY).output();
    assert!(
        !o.status.success() && text(&o).contains("GPU1401"),
        "validation names the missing overlay: {}",
        text(&o)
    );
    let path = dir.path().join("kp-ok.yaml");
    std::fs::write(&path, blueprint(&p, true)).unwrap();
    let bp = path.to_str().unwrap().to_string();
    let o = gpuctl(&["apply", &bp, "--yes", "--wait-timeout", "60s"], &kc);
    assert!(o.status.success(), "apply: {}", text(&o));
    let overlays = dynamic(
        &tc,
        "karpenter.sh",
        "v1alpha1",
        "NodeOverlay",
        "nodeoverlays",
    );
    let overlay = overlays
        .get(&mig)
        .await
        .expect("gpuctl applied the MIG pool's NodeOverlay");
    assert_eq!(
        overlay.data["spec"]["capacity"]["nvidia.com/mig-1g.10gb"], "56",
        "{}",
        overlay.data
    );
    overlays.delete(&mig, &Default::default()).await.unwrap();
    poll(30, "the NodeOverlay to be gone", async || {
        overlays.get(&mig).await.is_err().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ns = format!("{p}-ns");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(tc.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), &ns);
    let mig_pod = gpu_pod(
        "mig",
        json!({"cpu": "1", "nvidia.com/mig-1g.10gb": "1"}),
        &["gpuctl.dev/mig"],
    );
    pods.create(&PostParams::default(), &mig_pod).await.unwrap();
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(
        claims_of(&tc, &mig).await.is_empty(),
        "no NodeClaim without the overlay"
    );
    assert!(pod_node(&pods, "mig").await.is_none());
    eprintln!("provisioning: without the overlay nothing launched in 15 s");

    // 2. gpuctl puts the overlay back, and Karpenter picks the MIG pool for the same pod.
    let o = gpuctl(&["plan", &bp, "--detailed-exitcode"], &kc);
    assert_eq!(
        o.status.code(),
        Some(2),
        "plan sees the missing overlay: {}",
        text(&o)
    );
    let o = gpuctl(&["apply", &bp, "--yes", "--wait-timeout", "60s"], &kc);
    assert!(o.status.success(), "apply: {}", text(&o));
    let mig_node = launched_node(&tc, &mig, 90).await;
    let labels = mig_node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("p5.48xlarge")
    );
    assert_eq!(
        labels.get("nvidia.com/mig.config").map(String::as_str),
        Some(mig.as_str()),
        "born with its MIG layout label"
    );
    let alloc = mig_node
        .status
        .as_ref()
        .unwrap()
        .allocatable
        .clone()
        .unwrap_or_default();
    assert!(alloc.contains_key("nvidia.com/mig-1g.10gb"), "{alloc:?}");
    assert!(
        claims_of(&tc, &train).await.is_empty(),
        "the MIG pod did not start a training node"
    );
    eprintln!(
        "provisioning: the MIG pod made Karpenter launch {} in pool {mig}",
        mig_node.metadata.name.as_deref().unwrap()
    );

    // 3. An 8-GPU pod on the training pool: a p5.48xlarge node with the startup taint; the pod
    // does not run until the readiness taint is gone.
    let big = gpu_pod(
        "train",
        json!({"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "8"}),
        &["nvidia.com/gpu"],
    );
    pods.create(&PostParams::default(), &big).await.unwrap();
    let node = launched_node(&tc, &train, 90).await;
    let name = node.metadata.name.clone().unwrap();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("p5.48xlarge")
    );
    assert!(
        taint_keys(&node).iter().any(|k| k == READINESS),
        "{:?}",
        taint_keys(&node)
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pod_node(&pods, "train").await,
        None,
        "not bound while the readiness taint is there"
    );
    assert_eq!(
        claims_of(&tc, &train).await.len(),
        1,
        "no second NodeClaim while the first waits"
    );
    // Playing the Node Readiness Controller (NPD reported nvidia.com/GPUReady) and node-lifecycle.
    eprintln!(
        "provisioning: the test plays the Node Readiness Controller: removing {READINESS} from {name}"
    );
    remove_taints(&tc, &name, &[READINESS, NOT_READY]).await;
    let bound = poll(60, "the 8-GPU pod to be bound and Running", async || {
        let pod = pods.get("train").await.ok()?;
        let phase = pod.status.as_ref()?.phase.clone()?;
        (phase == "Running").then(|| pod.spec?.node_name)?
    })
    .await;
    assert_eq!(bound, name);
    poll(60, "the NodeClaim to be Initialized", async || {
        let c = claims_of(&tc, &train).await.into_iter().next()?;
        let conds = c.data["status"]["conditions"].as_array()?.clone();
        conds
            .iter()
            .any(|c| c["type"] == "Initialized" && c["status"] == "True")
            .then_some(())
    })
    .await;

    // 4. The pool is at its limit (8 GPUs): a second 8-GPU pod launches nothing.
    let more = gpu_pod(
        "train-2",
        json!({"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "8"}),
        &["nvidia.com/gpu"],
    );
    pods.create(&PostParams::default(), &more).await.unwrap();
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(
        claims_of(&tc, &train).await.len(),
        1,
        "nothing launched beyond the limit"
    );
    assert_eq!(pod_node(&pods, "train-2").await, None);
    let nodepools = dynamic(&tc, "karpenter.sh", "v1", "NodePool", "nodepools");
    let np = nodepools.get(&train).await.unwrap();
    assert_eq!(
        np.data["spec"]["limits"]["nvidia.com/gpu"], "8",
        "{}",
        np.data
    );

    // 5. The busy training node is not consolidated: gpuctl's disruption settings (WhenEmpty, a
    // budget of 0 for Underutilized) keep it while its job runs.
    assert_eq!(
        np.data["spec"]["disruption"]["consolidationPolicy"], "WhenEmpty",
        "{}",
        np.data
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    let c = claims_of(&tc, &train).await;
    assert_eq!(c.len(), 1);
    assert!(
        c[0].metadata.deletion_timestamp.is_none(),
        "the busy node is not being removed"
    );
    assert_eq!(
        pod_node(&pods, "train").await.as_deref(),
        Some(name.as_str())
    );

    // 7 (first). The EKS example's NodePools and NodeOverlay pass the real API server's validation
    // of Karpenter's CRDs, CEL rules included (a server-side dry run; the EC2NodeClass they name is the
    // cloud's and is not needed for that).
    let example = crate::render_common::render_file(
        &crate::render_common::root().join("blueprints/eks-karpenter.yaml"),
    );
    let mut dry_run = 0;
    for o in example
        .objects
        .iter()
        .filter(|o| o.group() == "karpenter.sh")
    {
        let plural = if o.kind == "NodePool" {
            "nodepools"
        } else {
            "nodeoverlays"
        };
        let api = dynamic(&tc, "karpenter.sh", o.version(), &o.kind, plural);
        let obj: DynamicObject = serde_json::from_value(o.manifest.clone()).unwrap();
        let pp = PostParams {
            dry_run: true,
            ..Default::default()
        };
        api.create(&pp, &obj)
            .await
            .unwrap_or_else(|e| panic!("{} is refused by the API server: {e}", o.display_id()));
        dry_run += 1;
    }
    assert_eq!(
        dry_run, 3,
        "two NodePools and one NodeOverlay in the EKS example"
    );

    // 6. Plan after apply: nothing to change (Karpenter's defaulting and status do not count).
    let o = gpuctl(&["plan", &bp, "--detailed-exitcode"], &kc);
    assert_eq!(o.status.code(), Some(0), "plan after apply: {}", text(&o));
    eprintln!(
        "provisioning: done in {:.1}s (cluster with Karpenter up in {up:.1}s)",
        started.elapsed().as_secs_f64()
    );
}
