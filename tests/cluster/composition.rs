//! Composition tests (issue 14): do a blueprint's quotas, queues and pools work *together* on a real
//! cluster? Each example blueprint is applied with the real `gpuctl` binary to a fresh harness of its
//! own (`tools/kube-harness/run up` in a temporary directory: kube-apiserver, etcd,
//! kube-controller-manager, the real Kueue v0.19.2 with its admission webhooks and Volcano v1.15.1's
//! admission webhook), a second plan must find nothing to do, and then, per tenant, suspended Jobs go
//! to the tenant's LocalQueue: GPUs with cpu and memory, GPUs only, a MIG slice where the queue has
//! MIG, and one that must borrow from the cohort. Each must be admitted by the real Kueue to the
//! intended flavor with the pool's node selector and tolerations injected, and the real Job
//! controller's pods must pass the API server's ResourceQuota admission: no job is admitted whose
//! pods are then refused. Tenants without Kueue get the same Jobs unsuspended (quota admission only).
//!
//! The fixtures in `tests/fixtures/composition/` reproduce each mismatch of issue 14 on the shared
//! harness, applied even where validation refuses them, and assert the real refusal message.
//!
//! Stand-ins, stated plainly: no kubelet or scheduler runs, so GPU Nodes are API objects with the
//! labels GPU Feature Discovery and the GPU Operator publish and Ready status (as in
//! tests/support/cluster.rs), and "could be scheduled" is checked here the way the scheduler's
//! node-selector, taint and resource-fit predicates would (a Ready node of the pool that the pod
//! selects, whose taints it tolerates and whose allocatable covers its requests). MIG Manager does not
//! run: a small task reports `nvidia.com/mig.config.state=success` once gpuctl sets a node's MIG
//! config, as in tests/cluster/cli_cluster.rs.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpuctl_cluster::apply::{self, ApplyOptions};
use gpuctl_cluster::read;
use gpuctl_core::blueprint::{
    self, Blueprint, DevicePluginKind, Fabric, MigStrategy, NodePool, PartitionMode, Queueing,
};
use gpuctl_core::located::Severity;
use gpuctl_core::plan::PlanOptions;
use gpuctl_core::profiles::Catalog;
use gpuctl_core::render::{self, LOCAL_QUEUE, Templates};
use gpuctl_core::validate;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, PropagationPolicy,
};
use serde_json::{Value, json};
use support::cluster::{GpuNode, Mig, TestCluster};
use support::fixture::quiet;
use support::fresh::FreshCluster;
use support::gpuctl::{gpuctl, text};

const TODAY: &str = "2026-11-30";
/// Longest wait for Kueue to admit a workload (it takes well under a second here).
const ADMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the Job controller to create all of a Job's pods.
const PODS_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a workload that must not be admitted is watched.
const PENDING_WATCH: Duration = Duration::from_secs(8);
const POLL: Duration = Duration::from_millis(250);
const IMAGE: &str = "registry.k8s.io/pause:3.10";
const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
const PRIORITY_LABEL: &str = "kueue.x-k8s.io/priority-class";

// --- a fresh harness per example -----------------------------------------------------------------

/// The example copied into `dir` with the GPU Operator's install switched to `none` (these tests are
/// about quotas, queues and pools; tests/cluster/cli_cluster.rs installs the real chart), and the chart
/// archive it names (if any) beside it, from ../shared/upstream.
fn example_copy(example: &str, bp: &Blueprint, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(example);
    let dst = dir.join(src.file_name().unwrap());
    let text = std::fs::read_to_string(&src).unwrap();
    let text = if text.contains("    install: helm\n") {
        text.replace("    install: helm\n", "    install: none\n")
    } else {
        text.replacen("  gpuOperator:\n", "  gpuOperator:\n    install: none\n", 1)
    };
    assert!(
        text.contains("    install: none\n"),
        "{example}: could not switch the install off"
    );
    std::fs::write(&dst, text).unwrap();
    if let Some(path) = &bp.spec.gpu_operator.chart.path {
        let v = &bp.spec.gpu_operator.version;
        let archive = support::releases::shared()
            .join("upstream/gpu-operator")
            .join(v)
            .join(format!("gpu-operator-{v}.tgz"));
        let to = dir.join(path);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&archive, &to)
            .unwrap_or_else(|e| panic!("copying {} to {}: {e}", archive.display(), to.display()));
    }
    dst
}

// --- GPU nodes for a blueprint's pools -----------------------------------------------------------

/// `3g.40gb` -> 40 GiB in MiB (the profile's nominal memory; GFD reports a little less).
fn mig_memory_mib(profile: &str) -> u64 {
    profile
        .split('.')
        .nth(1)
        .and_then(|m| m.trim_end_matches("gb").parse::<u64>().ok())
        .unwrap_or(1)
        * 1024
}

/// A node of `pool` as GFD, the device plugin and the GPU Operator show it, from the catalog's facts
/// about the pool's GPU model.
fn pool_node(bp: &Blueprint, pool: &NodePool) -> GpuNode {
    let catalog = Catalog::embedded();
    let model = catalog
        .gpu(&pool.gpu.model)
        .unwrap_or_else(|| panic!("the catalog knows {}", pool.gpu.model));
    let driver = pool
        .driver
        .as_ref()
        .map(|d| d.version.clone())
        .unwrap_or_else(|| bp.spec.gpu_operator.driver.version.clone());
    let mut node = GpuNode {
        product: model.gfd_products[0].clone(),
        count: pool.gpu.count,
        memory_mib: u64::from(
            model
                .memory_gb
                .unwrap_or_else(|| panic!("the catalog gives {}'s memory", model.key)),
        ) * 1024,
        family: model.architecture.to_lowercase().replace(' ', "-"),
        compute: (
            model.compute_capability.major,
            model.compute_capability.minor,
        ),
        driver,
        cuda: (13, 0),
        mig_capable: model.mig.is_some(),
        mig: Mig::Off,
        machine: "DGXH100".into(),
        extra_labels: BTreeMap::new(),
        cpu: "224".into(),
        memory: "2113456540Ki".into(),
        replicas: 1,
        extra_capacity: BTreeMap::new(),
        device_plugin: true,
    };
    // The Network Operator's RDMA shared device plugin advertises `rdma/<resourceName>` on the
    // nodes of pools with an RDMA fabric, shared by up to `hcaMax` pods.
    let rdma_fabric = pool
        .topology
        .as_ref()
        .and_then(|t| t.network.as_ref())
        .is_some_and(|n| matches!(n.fabric, Fabric::Infiniband | Fabric::Roce));
    if let Some(no) = &bp.spec.network_operator
        && no.device_plugin.kind == DevicePluginKind::RdmaShared
        && rdma_fabric
    {
        node.extra_capacity.insert(
            no.device_plugin.resource(),
            no.device_plugin.hca_max.to_string(),
        );
    }
    let p = &pool.partitioning;
    match p.mode {
        PartitionMode::Mig => {
            let mig = p.mig.as_ref().expect("mode mig has a mig section");
            // instances of each profile on the node
            let mut per_node: BTreeMap<String, u32> = BTreeMap::new();
            if let Some(layout) = &mig.layout {
                for (profile, n) in layout {
                    *per_node.entry(profile.clone()).or_default() += n * pool.gpu.count;
                }
            }
            for group in mig.devices.iter().flatten() {
                for (profile, n) in &group.layout {
                    *per_node.entry(profile.clone()).or_default() += n * group.gpus.len() as u32;
                }
            }
            if mig.strategy == MigStrategy::Single && per_node.len() == 1 {
                let (profile, n) = per_node.into_iter().next().unwrap();
                let mem = mig_memory_mib(&profile);
                node = node.mig_single(&profile, n / pool.gpu.count.max(1), mem);
            } else {
                let profiles: Vec<(String, u32, u64)> = per_node
                    .into_iter()
                    .map(|(p, n)| {
                        let mem = mig_memory_mib(&p);
                        (p, n, mem)
                    })
                    .collect();
                let refs: Vec<(&str, u32, u64)> = profiles
                    .iter()
                    .map(|(p, n, m)| (p.as_str(), *n, *m))
                    .collect();
                node = node.mig_mixed(&refs);
            }
        }
        PartitionMode::TimeSlicing => {
            if let Some(ts) = &p.time_slicing {
                node = node.time_slicing(ts.replicas);
            }
        }
        PartitionMode::Mps => {
            if let Some(m) = &p.mps {
                node = node.time_slicing(m.replicas);
            }
        }
        PartitionMode::None => {}
    }
    for (k, v) in &pool.selector {
        node = node.label(k, v);
    }
    node
}

/// Two Ready nodes per pool (fewer when the pool has fewer). The API server's TaintNodesByCondition
/// admission taints every new Node `node.kubernetes.io/not-ready:NoSchedule`; the node lifecycle
/// controller lifts it once the kubelet reports Ready. Neither runs here (the controller would mark
/// kubelet-less nodes NotReady), so the test lifts it for its Ready nodes.
async fn create_pool_nodes(tc: &TestCluster, bp: &Blueprint) {
    let nodes: Api<Node> = Api::all(tc.client.clone());
    for pool in &bp.spec.node_pools {
        let node = pool_node(bp, pool);
        // Two nodes per pool, or every node of a pool with topology levels (capped at 80): Kueue's
        // topology-aware scheduling places pods on the nodes it sees, and a job that borrows
        // needs more than two of them.
        let count = if pool.topology.as_ref().is_some_and(|t| !t.levels.is_empty()) {
            pool.nodes.min(80)
        } else {
            pool.nodes.min(2)
        };
        for i in 0..count {
            let created = tc
                .create_gpu_node(&format!("{}-{i}", pool.name), &node)
                .await
                .unwrap_or_else(|e| panic!("node for pool {}: {e:#}", pool.name));
            let name = created.metadata.name.unwrap_or_default();
            let taints: Vec<_> = created
                .spec
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t.key != "node.kubernetes.io/not-ready")
                .collect();
            // The labels of the pool's topology levels, as the node's provisioning (or the
            // kubelet, for `kubernetes.io/hostname`) sets them: Kueue's topology-aware
            // scheduling finds no domain on a node without them. One domain per level here.
            let mut labels = serde_json::Map::new();
            for level in pool.topology.iter().flat_map(|t| &t.levels) {
                let value = if level == "kubernetes.io/hostname" {
                    name.clone()
                } else {
                    format!(
                        "{}-{}",
                        pool.name,
                        level.rsplit('/').next().unwrap_or("domain")
                    )
                };
                labels.insert(level.clone(), json!(value));
            }
            nodes
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(
                        &json!({"metadata": {"labels": labels}, "spec": {"taints": taints}}),
                    ),
                )
                .await
                .unwrap_or_else(|e| panic!("lifting the not-ready taint of {name}: {e}"));
        }
    }
}

// --- Kueue and Job helpers -----------------------------------------------------------------------

fn api_resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn workloads(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &api_resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads"),
    )
}

fn cluster_queues(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &api_resource("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues"),
    )
}

fn volcano_queues(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &api_resource("scheduling.volcano.sh", "v1beta1", "Queue", "queues"),
    )
}

/// One Job a test submits.
#[derive(Clone, Debug)]
struct JobCase {
    /// What it checks, for the report.
    what: String,
    name: String,
    namespace: String,
    /// The LocalQueue (Kueue tenants); `None`: a plain Job, quota admission only.
    queue: Option<String>,
    priority_class: Option<String>,
    pods: u32,
    /// Per-pod requests (extended resources get equal limits, as the API server requires).
    requests: BTreeMap<String, String>,
    /// The flavor (pool) Kueue must assign.
    flavor: Option<String>,
    /// `(ClusterQueue, flavor, resource)` that must show borrowed quota once admitted.
    borrows: Option<(String, String, String)>,
}

fn job_manifest(c: &JobCase) -> Value {
    let mut labels = serde_json::Map::new();
    if let Some(q) = &c.queue {
        labels.insert(QUEUE_LABEL.into(), json!(q));
        if let Some(pc) = &c.priority_class {
            labels.insert(PRIORITY_LABEL.into(), json!(pc));
        }
    }
    let limits: BTreeMap<&String, &String> =
        c.requests.iter().filter(|(k, _)| k.contains('/')).collect();
    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "containers": [{
            "name": "main",
            "image": IMAGE,
            "resources": {"requests": c.requests, "limits": limits},
        }],
    });
    if let Some(pc) = &c.priority_class {
        pod_spec["priorityClassName"] = json!(pc);
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": c.name, "namespace": c.namespace, "labels": labels},
        "spec": {
            "suspend": c.queue.is_some(),
            "parallelism": c.pods,
            "completions": c.pods,
            "backoffLimit": 0,
            "template": {"spec": pod_spec},
        },
    })
}

fn conditions(obj: &DynamicObject) -> Vec<Value> {
    obj.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn condition_true(obj: &DynamicObject, kind: &str) -> bool {
    conditions(obj)
        .iter()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

fn condition_messages(obj: &DynamicObject) -> String {
    conditions(obj)
        .iter()
        .map(|c| {
            format!(
                "{}={} ({})",
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The Workload Kueue made for Job `job` in `ns`.
async fn workload_of(client: &Client, ns: &str, job: &str) -> Option<DynamicObject> {
    let list = workloads(client, ns)
        .list(&ListParams::default())
        .await
        .ok()?;
    list.items.into_iter().find(|w| {
        w.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Job" && o.name == job)
    })
}

/// Waits until Kueue admits the Job's Workload; `Err` with its conditions when it does not.
async fn wait_admitted(client: &Client, ns: &str, job: &str) -> Result<DynamicObject, String> {
    let deadline = Instant::now() + ADMIT_TIMEOUT;
    loop {
        let wl = workload_of(client, ns, job).await;
        if let Some(w) = &wl
            && condition_true(w, "Admitted")
        {
            return Ok(w.clone());
        }
        if Instant::now() > deadline {
            return Err(match wl {
                Some(w) => format!(
                    "not admitted within {}s: {}",
                    ADMIT_TIMEOUT.as_secs(),
                    condition_messages(&w)
                ),
                None => format!(
                    "Kueue made no Workload within {}s (is Kueue running? tools/kube-harness/run up starts it)",
                    ADMIT_TIMEOUT.as_secs()
                ),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `FailedCreate` events of the Job controller for `job`.
async fn failed_creates(client: &Client, ns: &str, job: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!(
        "involvedObject.kind=Job,involvedObject.name={job},reason=FailedCreate"
    ));
    events
        .list(&lp)
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|e| e.message)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
}

async fn job_pods(client: &Client, ns: &str, job: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Waits for all `want` pods of the Job; `Err` with the Job controller's `FailedCreate` message as
/// soon as quota admission refuses one. Other refusals may pass: Kueue's Pod webhook looks a new
/// Pod's owning Job up in its informer cache and refuses the Pod (`Job.batch "x" not found`) while
/// the cache lags, and the Job controller retries, as on a real cluster; they are reported only if
/// the pods never come.
async fn wait_pods(client: &Client, ns: &str, job: &str, want: u32) -> Result<Vec<Pod>, String> {
    let deadline = Instant::now() + PODS_TIMEOUT;
    loop {
        let pods = job_pods(client, ns, job).await;
        let refused = failed_creates(client, ns, job).await;
        if let Some(msg) = refused.iter().find(|m| m.contains(" quota")) {
            return Err(format!(
                "{} of {want} pods created, then refused: {msg}",
                pods.len()
            ));
        }
        if pods.len() as u32 >= want {
            return Ok(pods);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} of {want} pods after {}s; last refusal: {}",
                pods.len(),
                PODS_TIMEOUT.as_secs(),
                refused.last().map_or("none", String::as_str)
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Deletes the Job (its pods by the garbage collector) and waits until its Workload is gone, so
/// the quota it held is free for the next case.
async fn delete_job(client: &Client, ns: &str, job: &str) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    let _ = jobs.delete(job, &dp).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let job_gone = jobs
            .get_opt(job)
            .await
            .map(|j| j.is_none())
            .unwrap_or(false);
        if job_gone && workload_of(client, ns, job).await.is_none() {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("Job {ns}/{job} or its Workload was not deleted within 30s");
}

/// Parses a Kubernetes quantity far enough for these tests: integers with an optional binary or
/// decimal suffix, and millis.
fn quantity(q: &str) -> f64 {
    let units: [(&str, f64); 9] = [
        ("Ki", 1024.0),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("m", 0.001),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    for (suffix, mult) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<f64>().unwrap_or(f64::NAN) * mult;
        }
    }
    q.parse::<f64>().unwrap_or(f64::NAN)
}

/// The scheduler's node-selector, taint and resource-fit predicates, for one pod against the
/// test's nodes: the name of a node that could run it, or why none could. With `placement` false
/// only resources are compared (a Job outside Kueue: its node selector and tolerations are the
/// user's to write, nothing injects them).
fn fitting_node(pod: &Pod, nodes: &[Node], placement: bool) -> Result<String, String> {
    let spec = pod.spec.as_ref().expect("pod spec");
    let selector = spec.node_selector.clone().unwrap_or_default();
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    let mut requests: BTreeMap<String, f64> = BTreeMap::new();
    for c in &spec.containers {
        let r = c.resources.clone().unwrap_or_default();
        for (k, v) in r.requests.unwrap_or_default() {
            *requests.entry(k).or_default() += quantity(&v.0);
        }
    }
    let mut why = Vec::new();
    for n in nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        let labels = n.metadata.labels.clone().unwrap_or_default();
        if let Some((k, v)) = selector
            .iter()
            .filter(|_| placement)
            .find(|(k, v)| labels.get(*k) != Some(*v))
        {
            why.push(format!("{name}: nodeSelector {k}={v} does not match"));
            continue;
        }
        let taints = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let untolerated = taints.iter().filter(|_| placement).find(|t| {
            (t.effect == "NoSchedule" || t.effect == "NoExecute")
                && !tolerations.iter().any(|tol| {
                    let key_ok = tol.key.as_deref().is_none_or(|k| k == t.key);
                    let effect_ok = tol
                        .effect
                        .as_deref()
                        .is_none_or(|e| e.is_empty() || e == t.effect);
                    let value_ok = tol.operator.as_deref() == Some("Exists")
                        || tol.value.as_deref().unwrap_or("") == t.value.as_deref().unwrap_or("");
                    key_ok && effect_ok && value_ok
                })
        });
        if let Some(t) = untolerated {
            why.push(format!(
                "{name}: taint {}:{} not tolerated",
                t.key, t.effect
            ));
            continue;
        }
        let alloc = n
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default();
        let short = requests
            .iter()
            .find(|(k, want)| alloc.get(*k).map(|q| quantity(&q.0)).unwrap_or(0.0) < **want);
        if let Some((k, want)) = short {
            why.push(format!("{name}: allocatable {k} below {want}"));
            continue;
        }
        let ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if !ready {
            why.push(format!("{name}: not Ready"));
            continue;
        }
        return Ok(name);
    }
    Err(format!(
        "no node could run pod {}: {}",
        pod.metadata.name.clone().unwrap_or_default(),
        why.join("; ")
    ))
}

/// Submits one Job and checks what the issue asks of it; returns `Err` with what went wrong.
async fn run_case(
    client: &Client,
    bp: &Blueprint,
    nodes: &[Node],
    c: &JobCase,
) -> Result<String, String> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), &c.namespace);
    let job: Job = serde_json::from_value(job_manifest(c)).expect("a Job");
    if let Err(e) = jobs.create(&PostParams::default(), &job).await {
        return Err(format!("creating the Job was refused: {e}"));
    }
    let result = check_case(client, bp, nodes, c).await;
    delete_job(client, &c.namespace, &c.name).await;
    result
}

async fn check_case(
    client: &Client,
    bp: &Blueprint,
    nodes: &[Node],
    c: &JobCase,
) -> Result<String, String> {
    let mut said = Vec::new();
    if c.queue.is_some() {
        let wl = wait_admitted(client, &c.namespace, &c.name).await?;
        let assignments = wl.data["status"]["admission"]["podSetAssignments"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let flavors: BTreeMap<String, String> = assignments
            .iter()
            .flat_map(|a| {
                a["flavors"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(r, f)| (r, f.as_str().unwrap_or("").to_string()))
            })
            .collect();
        let cq = wl.data["status"]["admission"]["clusterQueue"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if let Some(want) = &c.flavor
            && flavors.values().any(|f| f != want)
        {
            return Err(format!(
                "admitted by {cq} with flavors {flavors:?}, expected {want} for every resource"
            ));
        }
        said.push(format!("admitted by {cq} to {flavors:?}"));
        if let Some((cq_name, flavor, resource)) = &c.borrows {
            // Kueue writes the ClusterQueue's usage shortly after admitting.
            let deadline = Instant::now() + ADMIT_TIMEOUT;
            let borrowed = loop {
                let cq_obj = cluster_queues(client)
                    .get(cq_name)
                    .await
                    .map_err(|e| format!("reading ClusterQueue {cq_name}: {e}"))?;
                let borrowed = cq_obj.data["status"]["flavorsUsage"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|f| f["name"] == flavor.as_str())
                    .flat_map(|f| f["resources"].as_array().cloned().unwrap_or_default())
                    .filter(|r| r["name"] == resource.as_str())
                    .map(|r| quantity(r["borrowed"].as_str().unwrap_or("0")))
                    .sum::<f64>();
                if borrowed > 0.0 || Instant::now() > deadline {
                    break borrowed;
                }
                tokio::time::sleep(POLL).await;
            };
            if borrowed <= 0.0 {
                return Err(format!(
                    "admitted, but ClusterQueue {cq_name} shows no borrowed {resource} on {flavor}"
                ));
            }
            said.push(format!("borrowing {borrowed} {resource}"));
        }
        // Kueue unsuspends the Job with the flavor's node labels and tolerations in its template.
        let pool = c
            .flavor
            .as_ref()
            .and_then(|f| bp.spec.node_pools.iter().find(|p| &p.name == f));
        let jobs: Api<Job> = Api::namespaced(client.clone(), &c.namespace);
        let deadline = Instant::now() + ADMIT_TIMEOUT;
        let job = loop {
            let j = jobs.get(&c.name).await.map_err(|e| e.to_string())?;
            if j.spec.as_ref().and_then(|s| s.suspend) == Some(false) {
                break j;
            }
            if Instant::now() > deadline {
                return Err("admitted, but the Job stayed suspended".into());
            }
            tokio::time::sleep(POLL).await;
        };
        if let Some(pool) = pool {
            let tmpl = job
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.clone())
                .unwrap_or_default();
            let sel = tmpl.node_selector.unwrap_or_default();
            for (k, v) in &pool.selector {
                if sel.get(k) != Some(v) {
                    return Err(format!(
                        "admitted, but the pod template's nodeSelector {sel:?} lacks {k}={v} of pool {}",
                        pool.name
                    ));
                }
            }
            let tols = tmpl.tolerations.unwrap_or_default();
            for t in &pool.taints {
                let effect = serde_json::to_value(t.effect).unwrap();
                if !tols.iter().any(|tol| {
                    tol.key.as_deref() == Some(t.key.as_str())
                        && tol.value.as_deref() == t.value.as_deref()
                        && tol.effect.as_deref() == effect.as_str()
                }) {
                    return Err(format!(
                        "admitted, but the pod template's tolerations {tols:?} lack the pool taint {}",
                        t.key
                    ));
                }
            }
            said.push(format!("selector and tolerations of pool {}", pool.name));
        }
    }
    let pods = wait_pods(client, &c.namespace, &c.name, c.pods)
        .await
        .map_err(|e| {
            if c.queue.is_some() {
                format!("admitted by Kueue, but {e}")
            } else {
                e
            }
        })?;
    said.push(format!("{} pods passed quota admission", pods.len()));
    let mut fits = BTreeMap::new();
    for p in &pods {
        let node = fitting_node(p, nodes, c.queue.is_some())
            .map_err(|e| format!("{} pods passed quota admission, but {e}", pods.len()))?;
        fits.insert(node, ());
    }
    said.push(format!(
        "{} on nodes like {}",
        if c.queue.is_some() {
            "each fits"
        } else {
            "each fits by resources"
        },
        fits.keys().next().map_or("", String::as_str)
    ));
    Ok(said.join(", "))
}

// --- the cases of a blueprint --------------------------------------------------------------------

fn gpu_key(keys: impl Iterator<Item = String>) -> Option<String> {
    let keys: Vec<String> = keys
        .map(|k| {
            k.trim_start_matches("requests.")
                .trim_start_matches("limits.")
                .to_string()
        })
        .filter(|k| k.starts_with("nvidia.com/"))
        .collect();
    keys.iter()
        .find(|k| *k == "nvidia.com/gpu")
        .or_else(|| keys.first())
        .cloned()
}

fn int(q: &blueprint::Quantity) -> u64 {
    q.0.parse().unwrap_or(0)
}

fn with_cpu_mem(mut r: BTreeMap<String, String>) -> BTreeMap<String, String> {
    r.insert("cpu".into(), "1".into());
    r.insert("memory".into(), "1Gi".into());
    r
}

/// The Jobs the issue asks for, per tenant (in its first namespace).
fn cases(bp: &Blueprint) -> (Vec<JobCase>, Vec<String>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let kueue = bp.spec.scheduling.kueue.as_ref();
    for t in &bp.spec.tenants {
        let Some(ns) = t.namespaces.first() else {
            continue;
        };
        let case = |what: &str,
                    suffix: &str,
                    queue: bool,
                    pods: u32,
                    req: BTreeMap<String, String>,
                    flavor: Option<String>| JobCase {
            what: format!("{}: {what}", t.name),
            name: format!("compose-{suffix}"),
            namespace: ns.clone(),
            queue: queue.then(|| LOCAL_QUEUE.to_string()),
            priority_class: t.priority_class.clone(),
            pods,
            requests: req,
            flavor,
            borrows: None,
        };
        let cq = (bp.spec.scheduling.queueing == Queueing::Kueue)
            .then(|| {
                t.queue.as_ref().and_then(|q| {
                    kueue.and_then(|k| k.cluster_queues.iter().find(|c| &c.name == q))
                })
            })
            .flatten();
        match cq {
            Some(cq) => {
                let Some(first) = cq.resources.first() else {
                    continue;
                };
                let Some(gpu) = gpu_key(first.quota.keys().cloned()) else {
                    skipped.push(format!(
                        "{}: ClusterQueue {} quotas no GPU resource",
                        t.name, cq.name
                    ));
                    continue;
                };
                let one = BTreeMap::from([(gpu.clone(), "1".to_string())]);
                let flavor = Some(first.pool.clone());
                out.push(case(
                    "GPUs with cpu and memory",
                    "gpu-cpu-mem",
                    true,
                    1,
                    with_cpu_mem(one.clone()),
                    flavor.clone(),
                ));
                out.push(case("GPUs only", "gpu-only", true, 1, one, flavor.clone()));
                // RDMA devices where the queue has quota on them (the GPUs of one node with the
                // node's RDMA devices, as an NCCL job asks).
                match first.quota.keys().find(|k| k.starts_with("rdma/")) {
                    Some(rdma) => {
                        let per_node = bp
                            .spec
                            .node_pools
                            .iter()
                            .find(|p| p.name == first.pool)
                            .map_or(1, |p| p.gpu.count);
                        let req = BTreeMap::from([
                            (gpu.clone(), per_node.to_string()),
                            (rdma.clone(), "1".to_string()),
                        ]);
                        out.push(case(
                            &format!("GPUs with RDMA devices ({rdma})"),
                            "rdma",
                            true,
                            1,
                            with_cpu_mem(req),
                            flavor.clone(),
                        ));
                    }
                    None => skipped.push(format!(
                        "{}: GPUs with RDMA devices (ClusterQueue {} has no RDMA quota)",
                        t.name, cq.name
                    )),
                }
                match cq.resources.iter().find_map(|r| {
                    r.quota
                        .keys()
                        .find(|k| k.starts_with("nvidia.com/mig-"))
                        .map(|k| (r, k))
                }) {
                    Some((r, mig)) => out.push(case(
                        &format!("a MIG slice ({mig})"),
                        "mig",
                        true,
                        1,
                        with_cpu_mem(BTreeMap::from([(mig.clone(), "1".to_string())])),
                        Some(r.pool.clone()),
                    )),
                    None => skipped.push(format!(
                        "{}: a MIG slice (ClusterQueue {} has no MIG resource)",
                        t.name, cq.name
                    )),
                }
                // Borrowing: what the other queues of the cohort have on the same flavor and resource.
                let nominal = first.quota.get(&gpu).map(int).unwrap_or(0);
                let lendable: u64 = match &cq.cohort {
                    Some(cohort) => kueue
                        .into_iter()
                        .flat_map(|k| &k.cluster_queues)
                        .filter(|o| o.name != cq.name && o.cohort.as_ref() == Some(cohort))
                        .flat_map(|o| &o.resources)
                        .filter(|r| r.pool == first.pool)
                        .map(|r| {
                            let q = r.quota.get(&gpu).map(int).unwrap_or(0);
                            r.lending_limit.get(&gpu).map(int).map_or(q, |l| l.min(q))
                        })
                        .sum(),
                    None => 0,
                };
                let can = first
                    .borrowing_limit
                    .get(&gpu)
                    .map(int)
                    .map_or(lendable, |l| l.min(lendable));
                if can == 0 {
                    skipped.push(format!(
                        "{}: a job that must borrow (nothing to borrow on {} for {gpu} in ClusterQueue {}'s cohort)",
                        t.name, first.pool, cq.name
                    ));
                    continue;
                }
                let pool = bp.spec.node_pools.iter().find(|p| p.name == first.pool);
                let mut size = if gpu == "nvidia.com/gpu" {
                    pool.map_or(1, |p| u64::from(p.gpu.count)).max(1)
                } else {
                    1
                };
                let mut total = (nominal / size + 1) * size;
                if total - nominal > can {
                    size = 1;
                    total = nominal + 1;
                }
                let mut c = case(
                    &format!(
                        "a job that must borrow ({} x {size} {gpu}, nominal {nominal})",
                        total / size
                    ),
                    "borrow",
                    true,
                    (total / size) as u32,
                    with_cpu_mem(BTreeMap::from([(gpu.clone(), size.to_string())])),
                    flavor,
                );
                c.borrows = Some((cq.name.clone(), first.pool.clone(), gpu.clone()));
                out.push(c);
            }
            None => {
                let Some(gpu) = gpu_key(t.quota.keys().cloned()) else {
                    skipped.push(format!("{}: its quota names no GPU resource", t.name));
                    continue;
                };
                let one = BTreeMap::from([(gpu.clone(), "1".to_string())]);
                out.push(case(
                    "GPUs with cpu and memory (no Kueue: quota admission)",
                    "gpu-cpu-mem",
                    false,
                    1,
                    with_cpu_mem(one.clone()),
                    None,
                ));
                out.push(case(
                    "GPUs only (no Kueue: quota admission)",
                    "gpu-only",
                    false,
                    1,
                    one,
                    None,
                ));
                let mig = t
                    .quota
                    .keys()
                    .map(|k| k.trim_start_matches("requests.").to_string())
                    .find(|k| k.starts_with("nvidia.com/mig-"));
                match mig {
                    Some(mig) => out.push(case(
                        &format!("a MIG slice ({mig}, no Kueue: quota admission)"),
                        "mig",
                        false,
                        1,
                        with_cpu_mem(BTreeMap::from([(mig, "1".to_string())])),
                        None,
                    )),
                    None => skipped.push(format!(
                        "{}: a MIG slice (its quota names no MIG resource)",
                        t.name
                    )),
                }
                skipped.push(format!(
                    "{}: a job that must borrow (no Kueue queue)",
                    t.name
                ));
            }
        }
    }
    (out, skipped)
}

// --- the example tests ---------------------------------------------------------------------------

/// Applies `example` to a fresh cluster and runs its Jobs; fails listing every check that failed.
async fn compose_example(example: &str) {
    let stem = Path::new(example)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let Some(_shared) = TestCluster::connect(&format!("compose-{stem}")).await else {
        return;
    };
    let loaded = blueprint::load_file(&Path::new(env!("CARGO_MANIFEST_DIR")).join(example))
        .unwrap_or_else(|r| panic!("{example} loads: {r:?}"));
    let bp = loaded.blueprint;
    let fresh = FreshCluster::up(&stem);
    let tc = TestCluster::connect_kubeconfig(&fresh.kubeconfig(), &stem)
        .await
        .expect("connects to the fresh cluster");
    create_pool_nodes(&tc, &bp).await;
    let mig = support::mig_manager::stand_in(tc.client.clone(), tc.owner_selector());

    let mut failures: Vec<String> = Vec::new();
    let mut passed: Vec<String> = Vec::new();
    let dir = tempfile::tempdir().unwrap();
    let copy = example_copy(example, &bp, dir.path());
    let copy = copy.to_str().unwrap();
    let kc = fresh.kubeconfig();
    let kc = kc.to_str().unwrap();
    let started = Instant::now();
    let o = gpuctl(&[
        "apply",
        copy,
        "--kubeconfig",
        kc,
        "--no-helm",
        "--wait-timeout",
        "60s",
        "--crd-timeout",
        "30s",
    ]);
    if o.status.success() {
        passed.push(format!(
            "apply to a fresh cluster in one run ({:.1}s)",
            started.elapsed().as_secs_f64()
        ));
        let o = gpuctl(&["plan", copy, "--kubeconfig", kc, "--detailed-exitcode"]);
        if o.status.code() == Some(0) {
            passed.push("a second plan finds nothing to do".into());
        } else {
            failures.push(format!(
                "a second plan after apply is not clean: {}",
                text(&o)
            ));
        }
    } else {
        failures.push(format!("apply to a fresh cluster failed: {}", text(&o)));
    }
    mig.abort();

    let nodes = tc.gpu_nodes().await.unwrap();
    let (cases, skipped) = cases(&bp);
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(tc.client.clone());
    let mut missing: Vec<String> = Vec::new();
    for c in &cases {
        // A namespace the failed apply did not create: its tenant's cases cannot run (said once).
        if namespaces.get_opt(&c.namespace).await.unwrap().is_none() {
            if !missing.contains(&c.namespace) {
                missing.push(c.namespace.clone());
                failures.push(format!(
                    "{}: not run, namespace {} does not exist (the apply failed)",
                    c.what.split(':').next().unwrap_or(""),
                    c.namespace
                ));
            }
            continue;
        }
        match run_case(&tc.client, &bp, &nodes, c).await {
            Ok(s) => passed.push(format!("{}: {s}", c.what)),
            Err(e) => failures.push(format!("{}: {e}", c.what)),
        }
    }
    eprintln!(
        "{example}: {} passed, {} failed, {} not applicable\n  passed:\n    {}\n  not applicable:\n    {}",
        passed.len(),
        failures.len(),
        skipped.len(),
        passed.join("\n    "),
        skipped.join("\n    ")
    );
    assert!(
        failures.is_empty(),
        "{example}: {} check(s) failed:\n- {}",
        failures.len(),
        failures.join("\n- ")
    );
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dgx_h100_training_composes() {
    compose_example("blueprints/dgx-h100-training.yaml").await;
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inference_mig_composes() {
    compose_example("blueprints/inference-mig.yaml").await;
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_lab_fixed_composes() {
    compose_example("blueprints/mixed-lab-fixed.yaml").await;
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn air_gapped_composes() {
    compose_example("blueprints/air-gapped.yaml").await;
}

/// GPUs, RDMA quota (the RDMA shared device plugin's `rdma/rdma_shared_device_a` on the nodes of
/// its InfiniBand pool) and NVLink-clique topology levels.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gb200_nvl72_training_composes() {
    compose_example("blueprints/gb200-nvl72-training.yaml").await;
}

/// `mixed-lab.yaml` is the broken half of a before/after pair (`mixed-lab-fixed.yaml` is the
/// repair): gpuctl must refuse to apply it, and change nothing.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_lab_is_refused_before_it_reaches_the_cluster() {
    let Some(tc) = TestCluster::connect("compose-mixed-lab").await else {
        return;
    };
    let kc = std::env::var(support::cluster::KUBECONFIG_ENV).unwrap();
    let o = gpuctl(&[
        "apply",
        "blueprints/mixed-lab.yaml",
        "--kubeconfig",
        &kc,
        "--no-helm",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("fix the findings above"),
        "{}",
        text(&o)
    );
    // Nothing of the example reached the cluster: its tenant namespace carries no gpuctl label of it.
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(tc.client.clone());
    let labelled = ns.get_opt("team-a").await.unwrap().is_some_and(|n| {
        n.metadata
            .labels
            .unwrap_or_default()
            .get(gpuctl_core::applyset::BLUEPRINT_LABEL)
            .is_some_and(|v| v == "mixed-lab")
    });
    assert!(!labelled, "a refused apply created the example's namespace");
}

// --- the mismatches of issue 14, applied anyway ---------------------------------------------------

/// A fixture of tests/fixtures/composition with `@P@` replaced by a prefix unique to this test,
/// rendered even when validation refuses it (what `gpuctl apply` would send had it not refused),
/// planned and applied to the shared harness. Returns the rendered blueprint, the error findings
/// validation has for it (reported, not asserted: the rules are another change's), and the apply's
/// outcome.
async fn apply_fixture(file: &str, prefix: &str) -> (Blueprint, Vec<String>, Result<(), String>) {
    let text = fixture_text(file).replace("@P@", prefix);
    apply_fixture_text(file, &text).await
}

fn fixture_text(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/composition")
        .join(file);
    std::fs::read_to_string(&path).unwrap()
}

/// [`apply_fixture`] of fixture text already filled in; `file` names it in messages.
async fn apply_fixture_text(
    file: &str,
    text: &str,
) -> (Blueprint, Vec<String>, Result<(), String>) {
    let text = text.to_string();
    let loaded = blueprint::load_str(file, &text).unwrap_or_else(|r| panic!("{file} loads: {r:?}"));
    let catalog = Catalog::embedded();
    let opts = validate::Options {
        today: TODAY.parse().unwrap(),
    };
    let report = validate::check(&loaded, catalog, opts);
    let errors: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| format!("{} {}", f.rule, f.message))
        .collect();
    let bp = loaded.blueprint.clone();
    let v = validate::unchecked_for_tests(loaded);
    let mut set = render::render(&v, catalog, &Templates::load(None).unwrap())
        .unwrap_or_else(|e| panic!("{file} renders: {e}"));
    // Every blueprint renders the cluster-wide NVIDIADriver `cluster-default`: a fixed name the
    // fixtures (sharing one harness, in parallel) would fight over, and nothing these mismatches
    // are about.
    set.objects.retain(|o| o.kind != "NVIDIADriver");
    let k = support::cluster::gpuctl_kube().await;
    let result = async {
        let plan = read::plan(&k, &set, PlanOptions::default(), 32)
            .await
            .map_err(|e| format!("plan: {e}"))?;
        let plan_errors = support::fixture::errors(&plan);
        if !plan_errors.is_empty() {
            return Err(format!("plan: {}", plan_errors.join("; ")));
        }
        let opts = ApplyOptions {
            poll: Duration::from_millis(200),
            crd_timeout: Duration::from_secs(5),
            wait_timeout: Duration::from_secs(20),
            lock_duration: Duration::from_secs(5),
            lock_timeout: Duration::from_secs(20),
            ..ApplyOptions::default()
        };
        apply::apply(&k, &plan, &opts, &quiet())
            .await
            .map(|_| ())
            .map_err(|e| format!("apply: {e}"))
    }
    .await;
    if !errors.is_empty() {
        eprintln!(
            "{file}: validation refuses it ({}); applied anyway",
            errors.join("; ")
        );
    }
    (bp, errors, result)
}

/// A short prefix for the fixture's names (they end up in label values and 63-character names).
fn fixture_prefix(tc: &TestCluster) -> String {
    let mut p = tc.prefix.clone();
    p.truncate(40);
    p.trim_end_matches('-').to_string()
}

/// Mismatch 1: the tenant's quota (8 GPUs) is below what its ClusterQueue admits (16). Kueue admits
/// a 2 x 8-GPU job; the quota admission refuses its second pod, and the job runs partly.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_below_queue_admits_jobs_whose_pods_are_refused() {
    let Some(tc) = TestCluster::connect("quota-below-queue").await else {
        return;
    };
    let p = fixture_prefix(&tc);
    let (_bp, _errors, applied) = apply_fixture("quota-below-queue.yaml", &p).await;
    applied.expect("the fixture applies (the mismatch is between objects the API server accepts)");
    let ns = format!("{p}-ns");
    let c = JobCase {
        what: "2 x 8 GPUs".into(),
        name: "over-quota".into(),
        namespace: ns.clone(),
        queue: Some(LOCAL_QUEUE.into()),
        priority_class: None,
        pods: 2,
        requests: BTreeMap::from([("nvidia.com/gpu".into(), "8".into())]),
        flavor: Some(format!("{p}-h100")),
        borrows: None,
    };
    let jobs: Api<Job> = Api::namespaced(tc.client.clone(), &ns);
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(job_manifest(&c)).unwrap(),
    )
    .await
    .unwrap();
    let wl = wait_admitted(&tc.client, &ns, &c.name)
        .await
        .expect("Kueue admits 16 GPUs within the queue's 16");
    assert_eq!(
        wl.data["status"]["admission"]["clusterQueue"],
        json!(format!("{p}-cq"))
    );
    let err = wait_pods(&tc.client, &ns, &c.name, 2)
        .await
        .expect_err("the second pod exceeds the namespace quota");
    let quota = format!("{p}-t-quota");
    for want in [
        format!("exceeded quota: {quota}"),
        "requested: requests.nvidia.com/gpu=8".to_string(),
        "used: requests.nvidia.com/gpu=8".to_string(),
        "limited: requests.nvidia.com/gpu=8".to_string(),
    ] {
        assert!(err.contains(&want), "expected `{want}` in: {err}");
    }
    assert!(err.starts_with("1 of 2 pods created"), "{err}");
}

/// Mismatch 2: the quota lists requests.cpu and requests.memory, the LimitRange defaults only the
/// GPU. Kueue admits a GPU-only job; quota admission refuses every pod.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_keys_without_defaults_refuse_every_pod_kueue_admits() {
    let Some(tc) = TestCluster::connect("quota-requires-requests").await else {
        return;
    };
    let p = fixture_prefix(&tc);
    let (_bp, _errors, applied) = apply_fixture("quota-requires-requests.yaml", &p).await;
    applied.expect("the fixture applies");
    let ns = format!("{p}-ns");
    let c = JobCase {
        what: "GPUs only".into(),
        name: "gpu-only".into(),
        namespace: ns.clone(),
        queue: Some(LOCAL_QUEUE.into()),
        priority_class: None,
        pods: 1,
        requests: BTreeMap::from([("nvidia.com/gpu".into(), "1".into())]),
        flavor: Some(format!("{p}-h100")),
        borrows: None,
    };
    let jobs: Api<Job> = Api::namespaced(tc.client.clone(), &ns);
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(job_manifest(&c)).unwrap(),
    )
    .await
    .unwrap();
    wait_admitted(&tc.client, &ns, &c.name)
        .await
        .expect("Kueue admits: the queue covers what the job requests");
    let err = wait_pods(&tc.client, &ns, &c.name, 1)
        .await
        .expect_err("quota admission refuses a pod without cpu and memory requests");
    let want = format!(
        "failed quota: {p}-t-quota: must specify requests.cpu for: main; requests.memory for: main"
    );
    assert!(err.contains(&want), "expected `{want}` in: {err}");
    assert!(err.starts_with("0 of 1 pods created"), "{err}");
}

/// Mismatch 3: a ClusterQueue that quotas only GPUs never admits a job that also requests cpu and
/// memory (Kueue's default quota check strategy).
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_without_cpu_and_memory_never_admits_jobs_that_request_them() {
    let Some(tc) = TestCluster::connect("queue-uncovered").await else {
        return;
    };
    let p = fixture_prefix(&tc);
    let (_bp, _errors, applied) = apply_fixture("queue-uncovered-cpu-memory.yaml", &p).await;
    applied.expect("the fixture applies");
    let ns = format!("{p}-ns");
    let c = JobCase {
        what: "GPUs with cpu and memory".into(),
        name: "gpu-cpu-mem".into(),
        namespace: ns.clone(),
        queue: Some(LOCAL_QUEUE.into()),
        priority_class: None,
        pods: 1,
        requests: with_cpu_mem(BTreeMap::from([("nvidia.com/gpu".into(), "1".into())])),
        flavor: None,
        borrows: None,
    };
    let jobs: Api<Job> = Api::namespaced(tc.client.clone(), &ns);
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(job_manifest(&c)).unwrap(),
    )
    .await
    .unwrap();
    // Watched for a while: Kueue evaluates it at once and keeps it pending with the reason.
    let deadline = Instant::now() + PENDING_WATCH;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Some(w) = workload_of(&tc.client, &ns, &c.name).await {
            assert!(
                !condition_true(&w, "Admitted"),
                "admitted: {}",
                condition_messages(&w)
            );
            last = condition_messages(&w);
        }
        tokio::time::sleep(POLL).await;
    }
    assert!(
        last.contains("resource cpu unavailable in ClusterQueue")
            || last.contains("resource memory unavailable in ClusterQueue"),
        "expected Kueue's `resource cpu|memory unavailable in ClusterQueue`, got: {last}"
    );
    assert!(job_pods(&tc.client, &ns, &c.name).await.is_empty());
}

/// Mismatch 5: children with a deserved share under a parent that declares only a capability.
/// Volcano v1.15.1's webhook counts the parent's missing deserved as zero and refuses them (the
/// parent exists first, so the refusal is the arithmetic, whatever order apply creates things in).
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcano_refuses_children_whose_parent_declares_no_deserved() {
    let Some(tc) = TestCluster::connect("volcano-children").await else {
        return;
    };
    let p = fixture_prefix(&tc);
    let (_bp, _e, parent) = apply_fixture("volcano-parent-capability-only.yaml", &p).await;
    parent.expect("the parent alone is accepted");
    let (_bp, _e, children) = apply_fixture("volcano-children-exceed-parent.yaml", &p).await;
    let err = children.expect_err("Volcano's webhook refuses the children");
    let want = format!("parent queue {p}-serving validation failed: sum of children's deserved");
    assert!(err.contains(&want), "expected `{want}` in: {err}");
    assert!(err.contains("exceeds parent's deserved limit"), "{err}");
    let queues = volcano_queues(&tc.client);
    for child in ["serving-online", "serving-batch"] {
        assert!(
            queues
                .get_opt(&format!("{p}-{child}"))
                .await
                .unwrap()
                .is_none(),
            "{child} was created"
        );
    }
}

/// Mismatch 5, second form: a guarantee without a deserved share is refused by Volcano's webhook.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcano_refuses_a_guarantee_without_deserved() {
    let Some(tc) = TestCluster::connect("volcano-guarantee").await else {
        return;
    };
    let p = fixture_prefix(&tc);
    let (_bp, _e, applied) = apply_fixture("volcano-guarantee-without-deserved.yaml", &p).await;
    let err = applied.expect_err("Volcano's webhook refuses the queue");
    let want = "deserved[nvidia.com/gpu] must be >= guarantee[nvidia.com/gpu]=8";
    assert!(err.contains(want), "expected `{want}` in: {err}");
    assert!(
        volcano_queues(&tc.client)
            .get_opt(&format!("{p}-reserved"))
            .await
            .unwrap()
            .is_none()
    );
}

/// A hierarchy Volcano accepts must apply to a cluster where none of it exists, in one run: the
/// parent first, its children after (issue 14, Deliver 3).
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcano_parent_and_children_apply_in_one_run() {
    let Some(tc) = TestCluster::connect("volcano-one-run").await else {
        return;
    };
    let p = fixture_prefix(&tc);
    let (_bp, errors, applied) = apply_fixture("volcano-hierarchy-one-run.yaml", &p).await;
    assert!(errors.is_empty(), "the hierarchy is valid: {errors:?}");
    applied.expect("parent and children are created in one apply");
    let queues = volcano_queues(&tc.client);
    for q in ["serving", "serving-online", "serving-batch"] {
        let got = queues.get(&format!("{p}-{q}")).await.unwrap();
        if q != "serving" {
            assert_eq!(got.data["spec"]["parent"], json!(format!("{p}-serving")));
        }
    }
}

/// A tenant moves to another ClusterQueue: its LocalQueue's `spec.clusterQueue` is immutable
/// (Kueue's CRD rule `self == oldSelf`), so the live plan replaces it (never dry-running an update
/// the server refuses), and apply deletes and re-creates it through the real Kueue webhook.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_moves_queue_by_replacing_its_local_queue() {
    let Some(tc) = TestCluster::connect("compose-move-queue").await else {
        return;
    };
    let prefix = fixture_prefix(&tc);
    let file = "tenant-moves-queue.yaml";
    let text = fixture_text(file).replace("@P@", &prefix);
    let (_, errors, result) =
        apply_fixture_text(file, &text.replace("@Q@", &format!("{prefix}-cq-a"))).await;
    assert!(errors.is_empty(), "{errors:?}");
    result.expect("the first apply");
    let lqs = Api::<DynamicObject>::namespaced_with(
        tc.client.clone(),
        &format!("{prefix}-ns"),
        &api_resource("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues"),
    );
    let before = lqs.get(LOCAL_QUEUE).await.unwrap();
    assert_eq!(
        before.data["spec"]["clusterQueue"],
        format!("{prefix}-cq-a")
    );

    // The move: planned live as a replace, without the dry-run the server would refuse.
    let moved = text.replace("@Q@", &format!("{prefix}-cq-b"));
    let loaded = blueprint::load_str(file, &moved).unwrap();
    let v = validate::validate(
        loaded,
        Catalog::embedded(),
        validate::Options {
            today: TODAY.parse().unwrap(),
        },
    )
    .unwrap_or_else(|r| panic!("{:?}", r.findings));
    let mut set = render::render(&v, Catalog::embedded(), &Templates::load(None).unwrap()).unwrap();
    set.objects.retain(|o| o.kind != "NVIDIADriver");
    let k = support::cluster::gpuctl_kube().await;
    let plan = read::plan(&k, &set, PlanOptions::default(), 32)
        .await
        .expect("a live plan of the move (no refused dry-run)");
    let changed: Vec<String> = plan
        .actions
        .iter()
        .filter(|a| a.action != gpuctl_core::plan::ActionKind::NoOp)
        .map(|a| format!("{:?} {} replace={}", a.action, a.id(), a.replace))
        .collect();
    // The LocalQueue is replaced; the two ClusterQueues (whose namespace selectors name the
    // tenant's namespaces) are ordinary updates.
    assert!(
        changed.contains(&format!(
            "Update LocalQueue/{prefix}-ns/{LOCAL_QUEUE} replace=true"
        )),
        "{changed:?}"
    );
    assert!(
        changed.iter().all(|c| c.contains("LocalQueue/")
            || (c.contains("ClusterQueue/") && c.ends_with("replace=false"))),
        "{changed:?}"
    );
    let (_, _, result) = apply_fixture_text(file, &moved).await;
    result.expect("the replace applies through the Kueue webhook");
    let after = lqs.get(LOCAL_QUEUE).await.unwrap();
    assert_eq!(after.data["spec"]["clusterQueue"], format!("{prefix}-cq-b"));
    assert_ne!(
        after.metadata.uid, before.metadata.uid,
        "a new LocalQueue, not an update"
    );
    let plan = read::plan(&k, &set, PlanOptions::default(), 32)
        .await
        .unwrap();
    assert!(
        plan.actions
            .iter()
            .all(|a| a.action == gpuctl_core::plan::ActionKind::NoOp),
        "the move converged"
    );
}

/// Issue 26: the move of a tenant to another ClusterQueue with the real `gpuctl` binary, as an SRE
/// does it (`plan --out`, review, `apply PLAN`), against the real Kueue on a cluster of its own
/// (the CLI applies the blueprint's cluster-wide NVIDIADriver too, which the shared harness's
/// fixtures must not fight over). While the plan waits for review a Job is queued in the tenant's
/// LocalQueue, so Kueue writes the LocalQueue's status and moves its resourceVersion: the replace
/// must still go through, the new LocalQueue must name the new ClusterQueue, the waiting job must
/// be admitted there, and the next plan must find nothing to do.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpuctl_apply_moves_a_tenant_while_kueue_writes_its_local_queue() {
    let Some(_shared) = TestCluster::connect("compose-move-cli").await else {
        return;
    };
    let fresh = FreshCluster::up("move-queue");
    let tc = TestCluster::connect_kubeconfig(&fresh.kubeconfig(), "move-queue")
        .await
        .expect("connects to the fresh cluster");
    let kc = fresh.kubeconfig();
    let kc = kc.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tenant-moves-queue.yaml");
    let file_s = file.to_str().unwrap();
    let fixture = fixture_text("tenant-moves-queue.yaml").replace("@P@", "mv");
    let (ns, cq_a, cq_b) = ("mv-ns", "mv-cq-a", "mv-cq-b");
    let apply = |target: &str| {
        gpuctl(&[
            "apply",
            target,
            "--kubeconfig",
            kc,
            "--no-helm",
            "--wait-timeout",
            "30s",
            "--crd-timeout",
            "30s",
        ])
    };

    std::fs::write(&file, fixture.replace("@Q@", cq_a)).unwrap();
    let o = apply(file_s);
    assert_eq!(o.status.code(), Some(0), "the first apply: {}", text(&o));
    let o = gpuctl(&["plan", file_s, "--kubeconfig", kc, "--detailed-exitcode"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "nothing to do after it: {}",
        text(&o)
    );

    // One GPU in use in cq-a before the move.
    let job = |name: &str, gpus: &str| JobCase {
        what: name.into(),
        name: name.into(),
        namespace: ns.into(),
        queue: Some(LOCAL_QUEUE.into()),
        priority_class: None,
        pods: 1,
        requests: BTreeMap::from([("nvidia.com/gpu".to_string(), gpus.to_string())]),
        flavor: None,
        borrows: None,
    };
    let jobs: Api<Job> = Api::namespaced(tc.client.clone(), ns);
    let submit = |c: JobCase| {
        let jobs = jobs.clone();
        async move {
            let j: Job = serde_json::from_value(job_manifest(&c)).unwrap();
            jobs.create(&PostParams::default(), &j)
                .await
                .unwrap_or_else(|e| panic!("creating Job {}: {e}", c.name));
        }
    };
    submit(job("held", "1")).await;
    let held = wait_admitted(&tc.client, ns, "held").await.unwrap();
    assert_eq!(held.data["status"]["admission"]["clusterQueue"], cq_a);

    // The move, planned: a replace of the LocalQueue, saved for review.
    std::fs::write(&file, fixture.replace("@Q@", cq_b)).unwrap();
    let o = gpuctl(&["plan", file_s, "--kubeconfig", kc, "--detailed-exitcode"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "the move is a change: {}",
        text(&o)
    );
    let plan_path = dir.path().join("move.plan.json");
    let plan_s = plan_path.to_str().unwrap();
    let o = gpuctl(&["plan", file_s, "--kubeconfig", kc, "--out", plan_s]);
    assert_eq!(o.status.code(), Some(0), "plan --out: {}", text(&o));
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    let lq_action = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "LocalQueue")
        .expect("the plan has the LocalQueue")
        .clone();
    assert_eq!(lq_action["action"], "update", "{lq_action}");
    assert_eq!(lq_action["replace"], true, "{lq_action}");
    let changed: Vec<String> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] != "no-op")
        .map(|a| {
            format!(
                "{} {}",
                a["action"].as_str().unwrap_or_default(),
                a["kind"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert!(
        changed
            .iter()
            .all(|c| c.ends_with("LocalQueue") || c.ends_with("ClusterQueue")),
        "only the queues change: {changed:?}"
    );

    // Meanwhile a job that needs 8 GPUs waits in cq-a (7 free): Kueue writes the LocalQueue's
    // status, and its resourceVersion is no longer the planned one.
    let lqs = Api::<DynamicObject>::namespaced_with(
        tc.client.clone(),
        ns,
        &api_resource("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues"),
    );
    submit(job("waiting", "8")).await;
    let planned_rv = lq_action["resource_version"].as_str().unwrap().to_string();
    let deadline = Instant::now() + ADMIT_TIMEOUT;
    let before = loop {
        let lq = lqs.get(LOCAL_QUEUE).await.unwrap();
        if lq.data["status"]["pendingWorkloads"].as_i64().unwrap_or(0) >= 1
            && lq.metadata.resource_version.as_deref() != Some(planned_rv.as_str())
        {
            break lq;
        }
        assert!(
            Instant::now() < deadline,
            "Kueue did not write the LocalQueue's status for the waiting job: {:?}",
            lq.data["status"]
        );
        tokio::time::sleep(POLL).await;
    };

    let o = apply(plan_s);
    assert_eq!(
        o.status.code(),
        Some(0),
        "gpuctl apply of the saved move: {}",
        text(&o)
    );
    let after = lqs.get(LOCAL_QUEUE).await.unwrap();
    assert_eq!(after.data["spec"]["clusterQueue"], cq_b);
    assert_ne!(
        after.metadata.uid, before.metadata.uid,
        "a new LocalQueue, not an update"
    );
    // The real Kueue queues the waiting job in the new ClusterQueue (8 GPUs free there).
    let waiting = wait_admitted(&tc.client, ns, "waiting").await.unwrap();
    assert_eq!(waiting.data["status"]["admission"]["clusterQueue"], cq_b);

    let o = gpuctl(&["plan", file_s, "--kubeconfig", kc, "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(0), "the move converged: {}", text(&o));
}
