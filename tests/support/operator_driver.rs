//! A small test driver that plays the GPU Operator (and the kubelet, MIG Manager, a ReplicaSet and
//! the disruption controller) against the real API server of the harness, for driver-upgrade tests.
//!
//! Include it beside `support::cluster` with
//!
//! ```ignore
//! mod support;
//! #[path = "support/operator_driver.rs"]
//! mod operator_driver;
//! ```
//!
//! What it does, every `tick`, for the nodes carrying this test's owner label only:
//!
//! - **Operator.** Finds the NVIDIADriver CR whose `nodeSelector` matches the node (two matches: a
//!   conflict, counted and left alone, as the operator fails closed; gpu-operator.md §2.2). When the
//!   node's owner label or GFD driver version differs from that CR, it walks the node through the
//!   upgrade-state labels the real controller uses (§2.4): `upgrade-required`, `cordon-required`
//!   (cordoning, or recording `node-initial-state.unschedulable` when the node is cordoned already),
//!   `wait-for-jobs-required`, `pod-deletion-required`, `drain-required`, `pod-restart-required`
//!   (the GFD driver labels and the validator pod go, MIG state `pending`), `validation-required`
//!   (new GFD labels for the CR's version, validator pod Ready, MIG state `success`),
//!   `uncordon-required`, `upgrade-done`, one step per `step_delay`. A node with a [`Failure`] for
//!   the version stays at `validation-required` (or goes `upgrade-failed`) until the failure is
//!   cleared.
//! - **MIG Manager.** A changed `nvidia.com/mig.config` goes `pending`, then `success`, or
//!   `failed` for a config listed in [`DriverConfig::mig_failures`] (mig-parted's reconfigure script
//!   sets `failed` when it cannot apply the config and leaves the GPUs as they were).
//! - **Kubelet.** Pods with a deletion timestamp in the test namespace are deleted for good after
//!   `pod_exit_delay` (nothing else would: there is no kubelet).
//!
//! [`ServeWorkload`] keeps N replicas of a GPU service running on schedulable nodes (a ReplicaSet
//! plus a scheduler) and writes its PodDisruptionBudget's status from the pods, as the disruption
//! controller does: the API server's eviction handler checks `status.disruptionsAllowed`, which no
//! controller fills in here. [`Invariants`] watches nodes and pods and checks the bounds on every
//! event the API server sends.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use serde_json::{Value, json};

use crate::support::cluster::nvidia_drivers;

/// The operator's field manager for the labels it writes.
pub const OPERATOR_MANAGER: &str = "gpu-operator-stand-in";
pub const STATE: &str = "nvidia.com/gpu-driver-upgrade-state";
pub const OWNER: &str = "nvidia.com/gpu-operator.driver.owner";
pub const INITIAL_UNSCHEDULABLE: &str =
    "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable";
pub const MIG_CONFIG: &str = "nvidia.com/mig.config";
pub const MIG_STATE: &str = "nvidia.com/mig.config.state";
pub const VALIDATOR_APP: &str = "nvidia-operator-validator";

const STATES: [&str; 9] = [
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "drain-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-done",
];

/// How a node fails on a driver version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// Stays at `validation-required` forever (the validator never succeeds).
    NeverValidates,
    /// Goes `upgrade-failed`.
    UpgradeFailed,
}

/// A node that fails on a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The node (`*`: every node, for nodes a provisioner launches under names not known ahead).
    pub node: String,
    pub version: String,
    pub mode: FailMode,
}

/// Settings, changeable while the driver runs.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    pub tick: Duration,
    pub step_delay: Duration,
    pub pod_exit_delay: Duration,
    pub failures: Vec<Failure>,
    /// At `pod-restart-required`, set `nvidia.com/mig.config` to this (something reset the label).
    pub reset_mig_config: Option<String>,
    /// MIG configs the MIG Manager fails to apply: `pending`, then `failed`.
    pub mig_failures: Vec<String>,
    /// Validator pods are owned by a DaemonSet `nvidia-operator-validator`, as the operator's
    /// are (created once, never run: the harness has no DaemonSet controller). Karpenter leaves
    /// DaemonSet pods out of the pods a disrupted node's replacement must hold; a bare validator
    /// pod, which tolerates none of the pool's taints, would keep Karpenter from ever replacing it.
    pub validator_daemonset: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            tick: Duration::from_millis(20),
            step_delay: Duration::from_millis(25),
            pod_exit_delay: Duration::from_millis(100),
            failures: Vec::new(),
            reset_mig_config: None,
            mig_failures: Vec::new(),
            validator_daemonset: false,
        }
    }
}

#[derive(Debug, Clone)]
struct Sim {
    owner: String,
    version: String,
    step: usize,
    next: Instant,
}

/// The running driver.
pub struct OperatorDriver {
    task: tokio::task::JoinHandle<()>,
    pub config: Arc<Mutex<DriverConfig>>,
    /// Nodes seen selected by two CRs at once (must stay empty).
    pub conflicts: Arc<Mutex<Vec<String>>>,
    /// Driver installs completed, as `node@version`.
    pub installs: Arc<Mutex<Vec<String>>>,
    /// Completed passes over the nodes (a test waits for one before changing what the driver
    /// compares against what it saw).
    pub passes: Arc<AtomicU64>,
}

impl Drop for OperatorDriver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// GFD's driver labels for `version` (gpu-operator.md §5).
pub fn driver_labels(version: &str) -> BTreeMap<String, Option<String>> {
    let mut f = version.splitn(3, '.');
    let (maj, min, rev) = (
        f.next().unwrap_or("0").to_string(),
        f.next().unwrap_or("0").to_string(),
        f.next().unwrap_or("0").to_string(),
    );
    BTreeMap::from([
        (
            "nvidia.com/cuda.driver-version.major".into(),
            Some(maj.clone()),
        ),
        (
            "nvidia.com/cuda.driver-version.minor".into(),
            Some(min.clone()),
        ),
        (
            "nvidia.com/cuda.driver-version.revision".into(),
            Some(rev.clone()),
        ),
        (
            "nvidia.com/cuda.driver-version.full".into(),
            Some(version.to_string()),
        ),
        ("nvidia.com/cuda.driver.major".into(), Some(maj)),
        ("nvidia.com/cuda.driver.minor".into(), Some(min)),
        ("nvidia.com/cuda.driver.rev".into(), Some(rev)),
    ])
}

fn gone(labels: BTreeMap<String, Option<String>>) -> BTreeMap<String, Option<String>> {
    labels.into_keys().map(|k| (k, None)).collect()
}

async fn patch_labels(api: &Api<Node>, node: &str, labels: &BTreeMap<String, Option<String>>) {
    let body = json!({"metadata": {"labels": labels}});
    let pp = PatchParams::apply(OPERATOR_MANAGER);
    let pp = PatchParams { force: false, ..pp };
    let _ = api.patch(node, &pp, &Patch::Merge(&body)).await;
}

/// Creates (or recreates) the operator's validator pod on `node` in `namespace`, Ready or not.
pub async fn put_validator(client: &Client, namespace: &str, node: &str, ready: bool) {
    put_validator_owned(client, namespace, node, ready, false).await;
}

/// The validator DaemonSet of `namespace` (created when missing), as an owner reference.
async fn validator_daemonset(client: &Client, namespace: &str) -> Value {
    let api: Api<k8s_openapi::api::apps::v1::DaemonSet> =
        Api::namespaced(client.clone(), namespace);
    let ds: k8s_openapi::api::apps::v1::DaemonSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": VALIDATOR_APP},
        "spec": {
            "selector": {"matchLabels": {"app": VALIDATOR_APP}},
            "template": {
                "metadata": {"labels": {"app": VALIDATOR_APP}},
                "spec": {"containers": [{"name": "validator", "image": "nvcr.io/nvidia/gpu-operator-validator:v26.7.0"}]},
            },
        },
    }))
    .expect("a DaemonSet");
    let _ = api.create(&PostParams::default(), &ds).await;
    let live = api
        .get(VALIDATOR_APP)
        .await
        .expect("the validator DaemonSet");
    json!([{
        "apiVersion": "apps/v1", "kind": "DaemonSet", "name": VALIDATOR_APP,
        "uid": live.metadata.uid, "controller": true, "blockOwnerDeletion": true,
    }])
}

/// [`put_validator`], the pod owned by the validator DaemonSet when `daemonset`.
async fn put_validator_owned(
    client: &Client,
    namespace: &str,
    node: &str,
    ready: bool,
    daemonset: bool,
) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let name = format!("validator-{node}");
    let owners = if daemonset {
        validator_daemonset(client, namespace).await
    } else {
        Value::Null
    };
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": VALIDATOR_APP}, "ownerReferences": owners},
        "spec": {"nodeName": node, "containers": [{"name": "validator", "image": "nvcr.io/nvidia/gpu-operator-validator:v26.7.0"}]},
    }))
    .expect("a pod");
    // Already there (recreated) is fine; a refusal past the webhook's cache lag is not.
    match super::cluster::create_admitted(&pods, &pod).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("validator pod {namespace}/{name}: {e}"),
    }
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
    let _ = pods
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await;
}

async fn drop_validator(client: &Client, namespace: &str, node: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let _ = pods
        .delete(
            &format!("validator-{node}"),
            &DeleteParams::default().grace_period(0),
        )
        .await;
}

impl OperatorDriver {
    /// Starts playing the operator for the nodes matching `node_selector`; validator pods and the
    /// kubelet's pod deletions happen in `namespace`.
    pub fn spawn(
        client: Client,
        namespace: &str,
        node_selector: &str,
        config: DriverConfig,
    ) -> OperatorDriver {
        let config = Arc::new(Mutex::new(config));
        let conflicts = Arc::new(Mutex::new(Vec::new()));
        let installs = Arc::new(Mutex::new(Vec::new()));
        let passes = Arc::new(AtomicU64::new(0));
        let (cfg, conf, inst, done) = (
            config.clone(),
            conflicts.clone(),
            installs.clone(),
            passes.clone(),
        );
        let ns = namespace.to_string();
        let sel = node_selector.to_string();
        let task = tokio::spawn(async move {
            let mut sims: HashMap<String, Sim> = HashMap::new();
            let mut mig_seen: HashMap<String, String> = HashMap::new();
            let mut mig_success_at: HashMap<String, Instant> = HashMap::new();
            let mut terminating: HashMap<String, Instant> = HashMap::new();
            let nodes: Api<Node> = Api::all(client.clone());
            let crs = nvidia_drivers(&client);
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
            loop {
                let c = cfg.lock().unwrap().clone();
                let now = Instant::now();
                // Kubelet: finish terminating pods.
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    for p in list
                        .items
                        .iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_some())
                    {
                        let name = p.metadata.name.clone().unwrap_or_default();
                        let first = *terminating.entry(name.clone()).or_insert(now);
                        if now.duration_since(first) >= c.pod_exit_delay {
                            let _ = pods
                                .delete(&name, &DeleteParams::default().grace_period(0))
                                .await;
                            terminating.remove(&name);
                        }
                    }
                }
                let (Ok(node_list), Ok(cr_list)) = (
                    nodes.list(&ListParams::default().labels(&sel)).await,
                    crs.list(&ListParams::default()).await,
                ) else {
                    tokio::time::sleep(c.tick).await;
                    continue;
                };
                for n in node_list.items {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    let labels = n.metadata.labels.clone().unwrap_or_default();
                    let unschedulable = n
                        .spec
                        .as_ref()
                        .and_then(|s| s.unschedulable)
                        .unwrap_or(false);
                    // MIG Manager: a new config reconfigures.
                    if let Some(cfg_now) = labels.get(MIG_CONFIG) {
                        match mig_seen.get(&name) {
                            Some(old) if old != cfg_now => {
                                patch_labels(
                                    &nodes,
                                    &name,
                                    &BTreeMap::from([(
                                        MIG_STATE.to_string(),
                                        Some("pending".to_string()),
                                    )]),
                                )
                                .await;
                                mig_success_at.insert(name.clone(), now + c.step_delay);
                            }
                            _ => {}
                        }
                        mig_seen.insert(name.clone(), cfg_now.clone());
                    }
                    if let Some(at) = mig_success_at.get(&name).copied()
                        && now >= at
                        // No MIG reconfiguration while the driver is being swapped.
                        && sims.get(&name).is_none_or(|s| s.step != 6)
                    {
                        let fails = labels
                            .get(MIG_CONFIG)
                            .is_some_and(|cfg_now| c.mig_failures.contains(cfg_now));
                        let outcome = if fails { "failed" } else { "success" };
                        patch_labels(
                            &nodes,
                            &name,
                            &BTreeMap::from([(MIG_STATE.to_string(), Some(outcome.to_string()))]),
                        )
                        .await;
                        mig_success_at.remove(&name);
                    }
                    // Operator: which CR owns the node.
                    let matching: Vec<&DynamicObject> = cr_list
                        .items
                        .iter()
                        .filter(|cr| cr.data["spec"]["default"].as_bool() != Some(true))
                        .filter(|cr| {
                            cr.data["spec"]["nodeSelector"]
                                .as_object()
                                .is_some_and(|sel| {
                                    !sel.is_empty()
                                        && sel.iter().all(|(k, v)| {
                                            labels.get(k).map(String::as_str) == v.as_str()
                                        })
                                })
                        })
                        .collect();
                    if matching.len() > 1 {
                        conf.lock().unwrap().push(format!(
                            "{name}: {}",
                            matching
                                .iter()
                                .map(|c| c.metadata.name.clone().unwrap_or_default())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                        continue;
                    }
                    let Some(cr) = matching.first() else { continue };
                    let owner = cr.metadata.name.clone().unwrap_or_default();
                    let version = cr.data["spec"]["version"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let in_sync = labels.get(OWNER) == Some(&owner)
                        && labels.get("nvidia.com/cuda.driver-version.full") == Some(&version);
                    let restart = match sims.get(&name) {
                        Some(s) => s.owner != owner || s.version != version,
                        None => !in_sync,
                    };
                    if restart {
                        sims.insert(
                            name.clone(),
                            Sim {
                                owner: owner.clone(),
                                version: version.clone(),
                                step: 0,
                                next: now,
                            },
                        );
                    }
                    let Some(sim) = sims.get_mut(&name) else {
                        continue;
                    };
                    if now < sim.next {
                        continue;
                    }
                    let failure = c
                        .failures
                        .iter()
                        .find(|f| (f.node == name || f.node == "*") && f.version == sim.version)
                        .cloned();
                    let state = STATES[sim.step];
                    let mut l: BTreeMap<String, Option<String>> = BTreeMap::new();
                    l.insert(STATE.into(), Some(state.into()));
                    match state {
                        "upgrade-required" => {
                            l.insert(OWNER.into(), Some(sim.owner.clone()));
                        }
                        "cordon-required" => {
                            if unschedulable {
                                let body = json!({"metadata": {"annotations": {INITIAL_UNSCHEDULABLE: "true"}}});
                                let _ = nodes
                                    .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                                    .await;
                            } else {
                                let body = json!({"spec": {"unschedulable": true}});
                                let _ = nodes
                                    .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                                    .await;
                            }
                        }
                        "pod-restart-required" => {
                            l.extend(gone(driver_labels("0.0.0")));
                            if labels.contains_key(MIG_CONFIG) {
                                l.insert(MIG_STATE.into(), Some("pending".into()));
                                if let Some(reset) = &c.reset_mig_config {
                                    l.insert(MIG_CONFIG.into(), Some(reset.clone()));
                                    mig_seen.insert(name.clone(), reset.clone());
                                }
                            }
                            drop_validator(&client, &ns, &name).await;
                        }
                        "validation-required" => {
                            if let Some(f) = &failure {
                                if f.mode == FailMode::UpgradeFailed {
                                    l.insert(STATE.into(), Some("upgrade-failed".into()));
                                }
                                if labels.get(STATE).map(String::as_str) != l[STATE].as_deref() {
                                    put_validator_owned(
                                        &client,
                                        &ns,
                                        &name,
                                        false,
                                        c.validator_daemonset,
                                    )
                                    .await;
                                    patch_labels(&nodes, &name, &l).await;
                                }
                                // Stuck here until the failure is cleared.
                                sim.next = now + c.step_delay;
                                continue;
                            }
                            l.extend(driver_labels(&sim.version));
                            if labels.contains_key(MIG_CONFIG) {
                                l.insert(MIG_STATE.into(), Some("success".into()));
                                mig_success_at.remove(&name);
                            }
                            put_validator_owned(&client, &ns, &name, true, c.validator_daemonset)
                                .await;
                        }
                        "uncordon-required" => {
                            let ann = n.metadata.annotations.clone().unwrap_or_default();
                            let body = if ann.contains_key(INITIAL_UNSCHEDULABLE) {
                                json!({"metadata": {"annotations": {INITIAL_UNSCHEDULABLE: null}}})
                            } else {
                                json!({"spec": {"unschedulable": null}})
                            };
                            let _ = nodes
                                .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                                .await;
                        }
                        _ => {}
                    }
                    patch_labels(&nodes, &name, &l).await;
                    if state == "upgrade-done" {
                        inst.lock().unwrap().push(format!("{name}@{}", sim.version));
                        sims.remove(&name);
                    } else {
                        sim.step += 1;
                        sim.next = now + c.step_delay;
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(c.tick).await;
            }
        });
        OperatorDriver {
            task,
            config,
            conflicts,
            installs,
            passes,
        }
    }

    /// Replaces the failure rules.
    pub fn set_failures(&self, failures: Vec<Failure>) {
        self.config.lock().unwrap().failures = failures;
    }
}

/// A GPU service with `replicas` pods of `gpus` GPUs each, kept running on schedulable nodes of
/// `node_selector`, and its PodDisruptionBudget (`minAvailable`) whose status is kept current.
pub struct ServeWorkload {
    task: tokio::task::JoinHandle<()>,
    pub app: String,
    pub created: Arc<Mutex<usize>>,
}

impl Drop for ServeWorkload {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A serve pod's manifest.
pub fn serve_pod(name: &str, app: &str, node: &str, gpus: u32) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "serve", "image": "nvcr.io/nvidia/tritonserver:25.01-py3",
                "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}],
        },
    }))
    .expect("a pod")
}

async fn set_running(pods: &Api<Pod>, name: &str) {
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    let _ = pods
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await;
}

fn healthy(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl ServeWorkload {
    /// Creates the PDB and the pods (Running and Ready), then keeps both current every `tick`.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        client: Client,
        namespace: &str,
        app: &str,
        node_selector: &str,
        replicas: usize,
        min_available: i32,
        gpus: u32,
        tick: Duration,
    ) -> ServeWorkload {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace);
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": app},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
        }))
        .expect("a PDB");
        pdbs.create(&PostParams::default(), &pdb)
            .await
            .expect("PDB created");
        let created = Arc::new(Mutex::new(0usize));
        let service = Service {
            pods,
            pdbs,
            nodes: Api::all(client.clone()),
            node_selector: node_selector.to_string(),
            app: app.to_string(),
            replicas,
            min_available,
            gpus,
            created: created.clone(),
        };
        // First replicas now, so the test starts from a healthy service.
        reconcile(&service).await;
        let task = tokio::spawn(async move {
            loop {
                reconcile(&service).await;
                tokio::time::sleep(tick).await;
            }
        });
        ServeWorkload {
            task,
            app: app.to_string(),
            created,
        }
    }
}

/// What [`ServeWorkload`]'s ReplicaSet, scheduler and disruption controller keep current.
struct Service {
    pods: Api<Pod>,
    pdbs: Api<PodDisruptionBudget>,
    nodes: Api<Node>,
    node_selector: String,
    app: String,
    replicas: usize,
    min_available: i32,
    gpus: u32,
    created: Arc<Mutex<usize>>,
}

async fn reconcile(service: &Service) {
    let Service {
        pods,
        pdbs,
        nodes,
        node_selector: sel,
        app,
        replicas,
        min_available,
        gpus,
        created,
    } = service;
    let (replicas, min_available, gpus) = (*replicas, *min_available, *gpus);
    let lp = ListParams::default().labels(&format!("app={app}"));
    let Ok(list) = pods.list(&lp).await else {
        return;
    };
    let alive: Vec<&Pod> = list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    // ReplicaSet + scheduler: replace missing replicas on the schedulable node with the fewest.
    if alive.len() < replicas
        && let Ok(nl) = nodes.list(&ListParams::default().labels(sel)).await
    {
        let mut candidates: Vec<(usize, String)> = nl
            .items
            .iter()
            .filter(|n| {
                !n.spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
            })
            .map(|n| {
                let name = n.metadata.name.clone().unwrap_or_default();
                let load = alive
                    .iter()
                    .filter(|p| {
                        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str())
                    })
                    .count();
                (load, name)
            })
            .collect();
        candidates.sort();
        for (_, node) in candidates.into_iter().take(replicas - alive.len()) {
            let n = {
                let mut c = created.lock().unwrap();
                *c += 1;
                *c
            };
            let name = format!("{app}-{n}");
            if pods
                .create(&PostParams::default(), &serve_pod(&name, app, &node, gpus))
                .await
                .is_ok()
            {
                set_running(pods, &name).await;
            }
        }
    }
    // Disruption controller: status from the pods, excluding pods the eviction handler recorded as
    // disrupted but not yet deleted; written with the PDB's resourceVersion so an eviction in
    // between wins.
    let Ok(pdb) = pdbs.get(app).await else { return };
    let Ok(list) = pods.list(&lp).await else {
        return;
    };
    let disrupted: BTreeMap<String, Value> = pdb
        .status
        .as_ref()
        .and_then(|s| s.disrupted_pods.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|(name, _)| {
            list.items.iter().any(|p| {
                p.metadata.name.as_deref() == Some(name) && p.metadata.deletion_timestamp.is_none()
            })
        })
        .map(|(k, v)| (k, serde_json::to_value(v).unwrap_or(Value::Null)))
        .collect();
    let healthy_n = list
        .items
        .iter()
        .filter(|p| {
            healthy(p) && !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or_default())
        })
        .count() as i32;
    let status = json!({
        "metadata": {"resourceVersion": pdb.metadata.resource_version},
        "status": {
            "observedGeneration": pdb.metadata.generation.unwrap_or(1),
            "disruptionsAllowed": (healthy_n - min_available).max(0),
            "currentHealthy": healthy_n,
            "desiredHealthy": min_available,
            "expectedPods": replicas,
            "disruptedPods": disrupted,
        }
    });
    let _ = pdbs
        .patch_status(app, &PatchParams::default(), &Patch::Merge(&status))
        .await;
}

/// What the invariant watchers saw.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Node events checked.
    pub node_events: usize,
    /// Most pool nodes unavailable at once.
    pub max_unavailable: usize,
    /// Pod events checked.
    pub pod_events: usize,
    /// Fewest healthy serve pods at once (after the watcher was armed).
    pub min_healthy: Option<usize>,
    /// Every violated bound, with the state that violated it.
    pub violations: Vec<String>,
}

/// Watches nodes (and a service's pods) and checks the bounds on every event.
pub struct Invariants {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    pub seen: Arc<Mutex<Seen>>,
}

impl Drop for Invariants {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Invariants {
    /// Checks that at most `max_unavailable` nodes of `node_selector` are cordoned or NotReady.
    pub async fn start(client: Client, node_selector: &str, max_unavailable: usize) -> Invariants {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        let task = watch_states(
            Api::<Node>::all(client),
            node_selector.to_string(),
            |n: &Node| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
                    || !n
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            },
            move |state| {
                let down: Vec<&String> =
                    state.iter().filter(|(_, u)| **u).map(|(n, _)| n).collect();
                let mut g = s.lock().unwrap();
                g.node_events += 1;
                g.max_unavailable = g.max_unavailable.max(down.len());
                if down.len() > max_unavailable {
                    let v = format!(
                        "{} nodes unavailable (bound {max_unavailable}): {down:?}",
                        down.len()
                    );
                    g.violations.push(v);
                }
            },
        )
        .await;
        Invariants {
            tasks: vec![task],
            seen,
        }
    }

    /// Also checks that at least `min_healthy` pods of `app` in `namespace` are Running, Ready
    /// and not terminating, on every pod event.
    pub async fn watch_service(
        &mut self,
        client: Client,
        namespace: &str,
        app: &str,
        min_healthy: usize,
    ) {
        let sel = format!("app={app}");
        let s = self.seen.clone();
        let task = watch_states(
            Api::<Pod>::namespaced(client, namespace),
            sel.clone(),
            healthy,
            move |state| {
                // A replacement that is created but not yet Running is not healthy: that is
                // fine; only a drop below the budget is a violation.
                let up = state.values().filter(|h| **h).count();
                let mut g = s.lock().unwrap();
                g.pod_events += 1;
                g.min_healthy = Some(g.min_healthy.map_or(up, |m| m.min(up)));
                if up < min_healthy {
                    let v = format!(
                        "{up} healthy `{}` pods (budget {min_healthy}): {state:?}",
                        sel
                    );
                    g.violations.push(v);
                }
            },
        )
        .await;
        self.tasks.push(task);
    }

    /// What was seen so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }
}

/// Lists the objects `selector` matches, then watches them (again whenever a watch ends),
/// keeping `flag(object)` per name, and calls `check` with the whole state after every event,
/// so a bound is checked on each change the API server reports, not by sampling. Returns once
/// the first list is in.
async fn watch_states<K>(
    api: Api<K>,
    selector: String,
    flag: fn(&K) -> bool,
    mut check: impl FnMut(&BTreeMap<String, bool>) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let ready = Arc::new(tokio::sync::Notify::new());
    let r = ready.clone();
    let task = tokio::spawn(async move {
        let mut first = true;
        loop {
            let Ok(list) = api.list(&ListParams::default().labels(&selector)).await else {
                continue;
            };
            let mut state: BTreeMap<String, bool> = list
                .items
                .iter()
                .map(|o| (o.meta().name.clone().unwrap_or_default(), flag(o)))
                .collect();
            let rv = list.metadata.resource_version.clone().unwrap_or_default();
            if first {
                r.notify_one();
                first = false;
            }
            let Ok(stream) = api
                .watch(&WatchParams::default().labels(&selector).timeout(60), &rv)
                .await
            else {
                continue;
            };
            let mut stream = stream.boxed();
            while let Some(ev) = stream.next().await {
                let (o, deleted) = match ev {
                    Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => (o, false),
                    Ok(WatchEvent::Deleted(o)) => (o, true),
                    _ => continue,
                };
                let name = o.meta().name.clone().unwrap_or_default();
                if deleted {
                    state.remove(&name);
                } else {
                    state.insert(name, flag(&o));
                }
                check(&state);
            }
        }
    });
    ready.notified().await;
    task
}

/// What the operator's condition updater writes on a ClusterPolicy (`nvidia.com/v1`) or NVIDIADriver
/// (`nvidia.com/v1alpha1`) it cannot bring up (internal/conditions/clusterpolicy.go and
/// nvidiadriver.go, `SetConditionsError`): `status.state` `notReady`, condition `Ready=False` with
/// reason `Error`, condition `Error=True` with the controller's reason and message (for a
/// ClusterPolicy `OperandNotReady` and "ClusterPolicy is not ready, states not ready: [...]"; for an
/// NVIDIADriver waiting on its driver pods `DriverNotReady` and "Waiting for driver pod to be
/// ready"), and `status.namespace`, the operator's namespace.
pub async fn report_not_ready(
    api: &Api<DynamicObject>,
    name: &str,
    namespace: &str,
    reason: &str,
    message: &str,
) {
    let t = jiff::Timestamp::now();
    let t = t.round(jiff::Unit::Second).unwrap_or(t).to_string();
    let status = json!({"status": {"state": "notReady", "namespace": namespace, "conditions": [
        {"type": "Ready", "status": "False", "reason": "Error", "message": "", "lastTransitionTime": t},
        {"type": "Error", "status": "True", "reason": reason, "message": message, "lastTransitionTime": t},
    ]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("operator CR status");
}

/// What the operator's condition updater writes on a CR it brought up (`SetConditionsReady`):
/// `status.state` `ready`, `Ready=True` (`Reconciled`), `Error=False` (reason `Ready`).
pub async fn report_ready(api: &Api<DynamicObject>, name: &str, namespace: &str) {
    let t = jiff::Timestamp::now();
    let t = t.round(jiff::Unit::Second).unwrap_or(t).to_string();
    let status = json!({"status": {"state": "ready", "namespace": namespace, "conditions": [
        {"type": "Ready", "status": "True", "reason": "Reconciled",
            "message": "All resources have been successfully reconciled", "lastTransitionTime": t},
        {"type": "Error", "status": "False", "reason": "Ready", "message": "", "lastTransitionTime": t},
    ]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("operator CR status");
}
