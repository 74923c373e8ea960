//! The upgrade journal and its lock, both in the cluster so any machine can resume, report or roll
//! back: a ConfigMap `gpuctl-upgrade-<pool>` in the operator's namespace holds the journal (JSON),
//! written with resourceVersion preconditions; a `coordination.k8s.io/v1` Lease of the same name
//! lets one run at a time act on the pool. Every write first checks that this run still holds the
//! Lease, so a run that lost it (paused, partitioned) stops instead of racing its successor.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::plan::UpgradePlan;
use super::{UPGRADE_POOL_LABEL, UpgradeError};
use crate::applyset::{BLUEPRINT_LABEL, MANAGED_BY};
use crate::cluster::{Kube, classify, retry};

/// Journal format version (refused when newer than this build knows).
pub const FORMAT: u32 = 1;
/// Key of the journal in the ConfigMap.
pub const DATA_KEY: &str = "journal.json";
/// Events kept in the journal (the oldest are dropped).
const MAX_EVENTS: usize = 200;

/// Name of the journal ConfigMap and of the Lease for `pool`.
pub fn object_name(pool: &str) -> String {
    format!("gpuctl-upgrade-{pool}")
}

/// Where the whole upgrade is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalPhase {
    /// Batches are being moved.
    Running,
    /// A batch stopped (a node did not drain or validate); `--resume` retries it.
    Failed,
    /// Every node runs the target driver.
    Completed,
    /// Nodes are being moved back.
    RollingBack,
    /// Every node is back where it was.
    RolledBack,
}

impl JournalPhase {
    /// Nothing left to do.
    pub fn is_final(self) -> bool {
        matches!(self, JournalPhase::Completed | JournalPhase::RolledBack)
    }

    /// For messages: "in progress", "stopped", ...
    pub fn describe(self) -> &'static str {
        match self {
            JournalPhase::Running => "in progress",
            JournalPhase::Failed => "stopped on a failure",
            JournalPhase::Completed => "completed",
            JournalPhase::RollingBack => "being rolled back",
            JournalPhase::RolledBack => "rolled back",
        }
    }
}

/// Where one node is. The order is the forward order; rollback moves nodes to `RolledBack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeState {
    /// On the old driver, untouched (apart from colour and steering taint).
    Blue,
    /// Cordoned by the upgrade.
    Cordoned,
    /// GPU pods gone.
    Drained,
    /// Labelled for the green CR; the operator is swapping the driver.
    Moved,
    /// Runs the target driver and passed every check.
    Validated,
    /// Labels restored, uncordoned: finished.
    Done,
    /// Did not validate (or drain); the run stopped here.
    Failed,
    /// Back on the blue CR with its recorded labels.
    RolledBack,
}

impl NodeState {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            NodeState::Blue => "blue",
            NodeState::Cordoned => "cordoned",
            NodeState::Drained => "drained",
            NodeState::Moved => "moved",
            NodeState::Validated => "validated",
            NodeState::Done => "done",
            NodeState::Failed => "failed",
            NodeState::RolledBack => "rolled-back",
        }
    }
}

/// What the journal knows about a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// Batch (1-based).
    pub batch: usize,
    /// State.
    pub state: NodeState,
    /// Cordoned before the upgrade: never uncordoned by it.
    pub initially_unschedulable: bool,
    /// Labels recorded before the upgrade (`None`: absent).
    pub recorded: BTreeMap<String, Option<String>>,
    /// MIG-capable (MIG config state must be `success` again).
    pub mig_capable: bool,
    /// Driver before the upgrade.
    pub driver_before: Option<String>,
    /// Last problem, for status and rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One journal event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Step number.
    pub step: u64,
    /// When (RFC 3339, UTC).
    pub at: String,
    /// What happened.
    pub message: String,
}

/// The state of one pool's upgrade, as stored in the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    /// [`FORMAT`].
    pub format: u32,
    /// Blueprint name.
    pub blueprint: String,
    /// Blueprint file (as given when the upgrade started).
    pub file: String,
    /// Pool.
    pub pool: String,
    /// Namespace of this journal (the operator's).
    pub namespace: String,
    /// The pool's selector.
    pub selector: BTreeMap<String, String>,
    /// Driver before.
    pub from_version: String,
    /// Target driver.
    pub to_version: String,
    /// CR the nodes came from.
    pub blue_cr: String,
    /// CR the nodes go to.
    pub green_cr: String,
    /// The green CR's manifest.
    pub green_manifest: Value,
    /// The green CR existed before this upgrade started (then rollback keeps it).
    pub green_cr_existed: bool,
    /// Delete the blue CR at the end.
    pub remove_blue_cr: bool,
    /// Colour label key.
    pub color_label: String,
    /// Colour of old nodes.
    pub blue_color: String,
    /// Colour of upgraded nodes.
    pub green_color: String,
    /// Most pool nodes unavailable at once.
    pub max_unavailable: usize,
    /// Drain bound per batch (seconds).
    pub drain_timeout_s: u64,
    /// Wait for running jobs instead of evicting them.
    pub wait_for_jobs: bool,
    /// Blueprint edit to make at the end.
    pub blueprint_change: String,
    /// Batches, in order, by node name.
    pub batches: Vec<Vec<String>>,
    /// Nodes.
    pub nodes: BTreeMap<String, NodeRecord>,
    /// The green CR exists and the nodes carry their colour and steering taint.
    #[serde(default)]
    pub prepared: bool,
    /// Phase.
    pub phase: JournalPhase,
    /// Steps recorded so far (every write adds one).
    pub step: u64,
    /// The last events.
    pub events: Vec<Event>,
}

impl Journal {
    /// A fresh journal for `plan` (which must have no errors and a green manifest).
    pub fn from_plan(plan: &UpgradePlan) -> Journal {
        let nodes = plan
            .nodes
            .iter()
            .map(|n| {
                (
                    n.name.clone(),
                    NodeRecord {
                        batch: n.batch,
                        state: NodeState::Blue,
                        initially_unschedulable: n.unschedulable,
                        recorded: n.recorded.clone(),
                        mig_capable: n.mig_capable,
                        driver_before: n.driver.clone(),
                        message: None,
                    },
                )
            })
            .collect();
        Journal {
            format: FORMAT,
            blueprint: plan.blueprint.clone(),
            file: plan.file.clone(),
            pool: plan.pool.clone(),
            namespace: plan.namespace.clone(),
            selector: plan.selector.clone(),
            from_version: plan.from_version.clone(),
            to_version: plan.to_version.clone(),
            blue_cr: plan.blue_cr.clone(),
            green_cr: plan.green_cr.clone(),
            green_manifest: plan.green_manifest.clone().unwrap_or(Value::Null),
            green_cr_existed: false,
            remove_blue_cr: plan.remove_blue_cr,
            color_label: plan.policy.color_label.clone(),
            blue_color: plan.blue_color.clone(),
            green_color: plan.green_color.clone(),
            max_unavailable: plan.policy.max_unavailable,
            drain_timeout_s: plan.policy.drain_timeout_s,
            wait_for_jobs: plan.policy.wait_for_jobs,
            blueprint_change: plan.blueprint_change.clone(),
            batches: plan.batches.iter().map(|b| b.nodes.clone()).collect(),
            nodes,
            prepared: false,
            phase: JournalPhase::Running,
            step: 0,
            events: Vec::new(),
        }
    }

    /// Nodes of batch `b` (1-based).
    pub fn batch(&self, b: usize) -> &[String] {
        self.batches.get(b - 1).map_or(&[], Vec::as_slice)
    }

    /// Nodes in `state`.
    pub fn in_state(&self, state: NodeState) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, r)| r.state == state)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Adds an event (bounded history).
    pub fn event(&mut self, message: impl Into<String>) {
        self.events.push(Event {
            step: self.step,
            at: jiff::Timestamp::now()
                .round(jiff::Unit::Second)
                .unwrap_or_else(|_| jiff::Timestamp::now())
                .to_string(),
            message: message.into(),
        });
        if self.events.len() > MAX_EVENTS {
            let drop = self.events.len() - MAX_EVENTS;
            self.events.drain(..drop);
        }
    }

    /// One line per batch: where the pool is now.
    pub fn where_it_is(&self) -> String {
        let count = |s: NodeState| self.nodes.values().filter(|r| r.state == s).count();
        let green = count(NodeState::Done) + count(NodeState::Validated);
        let blue = count(NodeState::Blue) + count(NodeState::RolledBack);
        let moving =
            count(NodeState::Cordoned) + count(NodeState::Drained) + count(NodeState::Moved);
        let failed = self.in_state(NodeState::Failed);
        let mut s = format!(
            "pool `{}`: {green} node(s) on {} ({}), {blue} on {} ({}), {moving} in between",
            self.pool, self.to_version, self.green_cr, self.from_version, self.blue_cr
        );
        if !failed.is_empty() {
            s.push_str(&format!(", failed: {}", failed.join(", ")));
        }
        s
    }
}

/// The journal ConfigMap of one pool, with the resourceVersion of the last read or write.
pub struct JournalStore {
    api: Api<ConfigMap>,
    name: String,
    resource_version: Option<String>,
    lease: Option<Arc<AtomicBool>>,
}

impl JournalStore {
    /// The store for `pool` in `namespace` (nothing is read yet).
    pub fn new(k: &Kube, namespace: &str, pool: &str) -> JournalStore {
        JournalStore {
            api: Api::namespaced(k.client(), namespace),
            name: object_name(pool),
            resource_version: None,
            lease: None,
        }
    }

    /// Writes refuse once `lost` is set (the Lease was lost).
    pub fn guard(&mut self, lease: &LeaseGuard) {
        self.lease = Some(lease.lost.clone());
    }

    /// Reads the journal (`None` when there is none).
    pub async fn load(&mut self) -> Result<Option<Journal>, UpgradeError> {
        let cm = retry(|| self.api.get_opt(&self.name)).await.map_err(|e| {
            UpgradeError::cluster("", classify(&format!("ConfigMap/{}", self.name), e))
        })?;
        let Some(cm) = cm else {
            self.resource_version = None;
            return Ok(None);
        };
        self.resource_version = cm.metadata.resource_version.clone();
        parse(&self.name, &cm).map(Some)
    }

    /// Writes the journal (one step more), creating the ConfigMap when it does not exist yet.
    pub async fn save(&mut self, j: &mut Journal) -> Result<(), UpgradeError> {
        if self
            .lease
            .as_ref()
            .is_some_and(|l| l.load(Ordering::SeqCst))
        {
            return Err(UpgradeError::LeaseLost(j.pool.clone()));
        }
        j.step += 1;
        let text = serde_json::to_string_pretty(j).unwrap_or_default();
        let body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": j.namespace,
                "labels": {
                    UPGRADE_POOL_LABEL: j.pool,
                    BLUEPRINT_LABEL: j.blueprint,
                    MANAGED_BY: "gpuctl",
                },
                "annotations": {
                    "gpuctl.dev/upgrade-phase": format!("{:?}", j.phase).to_lowercase(),
                },
            },
            "data": { DATA_KEY: text },
        });
        let mut cm: ConfigMap = serde_json::from_value(body).expect("a ConfigMap");
        let pp = PostParams {
            field_manager: Some(super::FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        let result = match &self.resource_version {
            None => retry(|| self.api.create(&pp, &cm)).await,
            Some(rv) => {
                cm.metadata.resource_version = Some(rv.clone());
                retry(|| self.api.replace(&self.name, &pp, &cm)).await
            }
        };
        match result {
            Ok(stored) => {
                self.resource_version = stored.metadata.resource_version;
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // A write that succeeded but whose answer was lost (and was retried) conflicts with
                // itself: that is our own journal, not someone else's.
                if let Ok(Some(cm)) = self.api.get_opt(&self.name).await
                    && parse(&self.name, &cm).is_ok_and(|stored| stored == *j)
                {
                    self.resource_version = cm.metadata.resource_version;
                    return Ok(());
                }
                j.step -= 1;
                Err(UpgradeError::JournalConflict(j.pool.clone()))
            }
            Err(e) => {
                j.step -= 1;
                Err(UpgradeError::cluster(
                    &j.pool,
                    classify(&format!("ConfigMap/{}/{}", j.namespace, self.name), e),
                ))
            }
        }
    }
}

fn parse(name: &str, cm: &ConfigMap) -> Result<Journal, UpgradeError> {
    let corrupt = |message: String| UpgradeError::JournalCorrupt {
        name: name.to_string(),
        message,
    };
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .ok_or_else(|| corrupt(format!("no `{DATA_KEY}` key")))?;
    let v: Value = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
    let format = v["format"].as_u64().unwrap_or(0);
    if format > u64::from(FORMAT) {
        return Err(corrupt(format!(
            "journal format {format} is newer than this gpuctl ({FORMAT}); use a newer gpuctl"
        )));
    }
    serde_json::from_value(v).map_err(|e| corrupt(e.to_string()))
}

/// Every journal in the cluster (or in `namespace`), optionally only `pool`'s, sorted by pool.
pub async fn list(
    k: &Kube,
    namespace: Option<&str>,
    pool: Option<&str>,
) -> Result<Vec<Journal>, UpgradeError> {
    let api: Api<ConfigMap> = match namespace {
        Some(ns) => Api::namespaced(k.client(), ns),
        None => Api::all(k.client()),
    };
    let selector = match pool {
        Some(p) => format!("{UPGRADE_POOL_LABEL}={p}"),
        None => UPGRADE_POOL_LABEL.to_string(),
    };
    let lp = ListParams::default().labels(&selector);
    let items = retry(|| api.list(&lp)).await.map_err(|e| {
        UpgradeError::cluster(pool.unwrap_or(""), classify("list upgrade journals", e))
    })?;
    let mut out = Vec::new();
    for cm in items
        .items
        .iter()
        .filter(|c| c.data.as_ref().is_some_and(|d| d.contains_key(DATA_KEY)))
    {
        out.push(parse(cm.metadata.name.as_deref().unwrap_or_default(), cm)?);
    }
    out.sort_by(|a, b| (&a.pool, &a.namespace).cmp(&(&b.pool, &b.namespace)));
    Ok(out)
}

/// Finds the one journal a command means: `pool` if given (in `namespace` if given), else the only
/// unfinished one.
pub async fn find(
    k: &Kube,
    namespace: Option<&str>,
    pool: Option<&str>,
) -> Result<Journal, UpgradeError> {
    let all = list(k, namespace, pool).await?;
    match pool {
        Some(p) => match all.len() {
            0 => Err(UpgradeError::NoJournal(format!(
                "no upgrade journal for pool `{p}`{}; `gpuctl upgrade status` lists every upgrade",
                namespace
                    .map(|n| format!(" in namespace {n}"))
                    .unwrap_or_default()
            ))),
            1 => Ok(all.into_iter().next().expect("one")),
            _ => Err(UpgradeError::NoJournal(format!(
                "pool `{p}` has journals in several namespaces ({}); add --namespace",
                all.iter()
                    .map(|j| j.namespace.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        },
        None => {
            let open: Vec<Journal> = all.into_iter().filter(|j| !j.phase.is_final()).collect();
            match open.len() {
                0 => Err(UpgradeError::NoJournal(
                    "no unfinished upgrade in this cluster; `gpuctl upgrade status` lists every upgrade".into(),
                )),
                1 => Ok(open.into_iter().next().expect("one")),
                _ => Err(UpgradeError::NoJournal(format!(
                    "several upgrades are unfinished ({}); name one with --pool",
                    open.iter().map(|j| j.pool.as_str()).collect::<Vec<_>>().join(", ")
                ))),
            }
        }
    }
}

/// A held Lease, renewed in the background until released or dropped.
pub struct LeaseGuard {
    api: Api<Lease>,
    name: String,
    /// This run's identity.
    pub holder: String,
    lost: Arc<AtomicBool>,
    renewer: tokio::task::JoinHandle<()>,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        // A crashed or dropped run stops renewing; its lease expires after the duration.
        self.renewer.abort();
    }
}

/// Who holds a Lease now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseInfo {
    /// Holder identity (empty when released).
    pub holder: String,
    /// Seconds since the last renewal.
    pub age_s: i64,
    /// Lease duration (seconds).
    pub duration_s: i64,
}

impl LeaseInfo {
    /// Held by a live run (renewed within its duration).
    pub fn live(&self) -> bool {
        !self.holder.is_empty() && self.age_s < self.duration_s
    }
}

fn info(l: &Lease) -> LeaseInfo {
    let spec = l.spec.clone().unwrap_or_default();
    let renewed = spec.renew_time.or(spec.acquire_time).map(|t| t.0);
    LeaseInfo {
        holder: spec.holder_identity.unwrap_or_default(),
        age_s: renewed.map_or(i64::MAX, |t| {
            (k8s_openapi::jiff::Timestamp::now() - t)
                .total(k8s_openapi::jiff::Unit::Second)
                .map_or(i64::MAX, |s| s.floor() as i64)
        }),
        duration_s: i64::from(spec.lease_duration_seconds.unwrap_or(0)),
    }
}

/// Who holds the Lease of `pool` (`None`: no Lease).
pub async fn lease_info(
    k: &Kube,
    namespace: &str,
    pool: &str,
) -> Result<Option<LeaseInfo>, UpgradeError> {
    let api: Api<Lease> = Api::namespaced(k.client(), namespace);
    let name = object_name(pool);
    let l = retry(|| api.get_opt(&name)).await.map_err(|e| {
        UpgradeError::cluster(pool, classify(&format!("Lease/{namespace}/{name}"), e))
    })?;
    Ok(l.as_ref().map(info))
}

fn identity() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}/pid-{}/{nanos:08x}", std::process::id())
}

/// Takes the Lease of `pool`: creates it, or takes it over once its holder stopped renewing. When
/// the holder is silent but not yet expired (a crashed run), waits for the expiry, bounded by the
/// lease duration; a holder that renews meanwhile is alive, and the call fails with [`UpgradeError::Busy`].
pub async fn acquire(
    k: &Kube,
    namespace: &str,
    pool: &str,
    duration: Duration,
    poll: Duration,
    progress: &crate::apply::Progress,
) -> Result<LeaseGuard, UpgradeError> {
    let api: Api<Lease> = Api::namespaced(k.client(), namespace);
    let name = object_name(pool);
    let holder = identity();
    let secs = i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX);
    let cluster_err = |e: kube::Error| {
        UpgradeError::cluster(pool, classify(&format!("Lease/{namespace}/{name}"), e))
    };
    let started = std::time::Instant::now();
    let mut seen_renew: Option<Option<MicroTime>> = None;
    loop {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let current = retry(|| api.get_opt(&name)).await.map_err(cluster_err)?;
        let lease: Lease = match current {
            None => serde_json::from_value(json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace, "labels": {UPGRADE_POOL_LABEL: pool, MANAGED_BY: "gpuctl"}},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": secs, "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
            }))
            .expect("a Lease"),
            Some(mut l) => {
                let i = info(&l);
                if i.live() {
                    let renew = l.spec.as_ref().and_then(|s| s.renew_time.clone());
                    // Renewed since we started waiting (its holder is alive), or held longer than
                    // its own duration allows: busy either way.
                    let renewed = seen_renew.as_ref().is_some_and(|r| *r != renew);
                    let bound = Duration::from_secs(u64::try_from(i.duration_s).unwrap_or(0)) + poll * 2;
                    if renewed || started.elapsed() > bound {
                        return Err(UpgradeError::Busy {
                            pool: pool.to_string(),
                            holder: i.holder,
                            namespace: namespace.to_string(),
                            lease: name,
                            age_s: i.age_s,
                            duration_s: i.duration_s,
                        });
                    }
                    if seen_renew.is_none() {
                        seen_renew = Some(renew);
                    }
                    progress.waiting(
                        &format!(
                            "the lease of the previous run ({}) to expire (renewed {}s ago, lasts {}s)",
                            i.holder, i.age_s, i.duration_s
                        ),
                        started.elapsed().as_secs(),
                        bound.as_secs(),
                    );
                    tokio::time::sleep(poll).await;
                    continue;
                }
                let spec = l.spec.get_or_insert_with(Default::default);
                let transitions = spec.lease_transitions.unwrap_or(0);
                spec.holder_identity = Some(holder.clone());
                spec.lease_duration_seconds = Some(secs);
                spec.acquire_time = Some(now.clone());
                spec.renew_time = Some(now);
                spec.lease_transitions = Some(transitions + 1);
                l
            }
        };
        let pp = PostParams {
            field_manager: Some(super::FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        let result = if lease.metadata.resource_version.is_some() {
            api.replace(&name, &pp, &lease).await
        } else {
            api.create(&pp, &lease).await
        };
        match result {
            Ok(stored) => {
                let lost = Arc::new(AtomicBool::new(false));
                let renewer = tokio::spawn(renew(
                    api.clone(),
                    name.clone(),
                    holder.clone(),
                    stored,
                    duration,
                    lost.clone(),
                ));
                return Ok(LeaseGuard {
                    api,
                    name,
                    holder,
                    lost,
                    renewer,
                });
            }
            // Someone else created or took it between our read and write: read again.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(cluster_err(e)),
        }
    }
}

async fn renew(
    api: Api<Lease>,
    name: String,
    holder: String,
    mut lease: Lease,
    duration: Duration,
    lost: Arc<AtomicBool>,
) {
    let every = (duration / 3).max(Duration::from_millis(100));
    let pp = PostParams {
        field_manager: Some(super::FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let mut last_ok = std::time::Instant::now();
    loop {
        tokio::time::sleep(every).await;
        if let Some(spec) = lease.spec.as_mut() {
            spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        }
        match api.replace(&name, &pp, &lease).await {
            Ok(stored) => {
                lease = stored;
                last_ok = std::time::Instant::now();
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Changed under us: still ours only if the holder is.
                match api.get(&name).await {
                    Ok(l)
                        if l.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
                            == Some(holder.as_str()) =>
                    {
                        lease = l;
                    }
                    _ => {
                        lost.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            }
            Err(_) => {
                if last_ok.elapsed() >= duration {
                    lost.store(true, Ordering::SeqCst);
                    return;
                }
            }
        }
    }
}

impl LeaseGuard {
    /// Whether the Lease was lost.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Releases the Lease (empties the holder) so the next run starts at once.
    pub async fn release(self) {
        self.renewer.abort();
        if let Ok(mut l) = self.api.get(&self.name).await
            && l.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
                == Some(self.holder.as_str())
        {
            if let Some(spec) = l.spec.as_mut() {
                spec.holder_identity = None;
            }
            let pp = PostParams {
                field_manager: Some(super::FIELD_MANAGER.to_string()),
                ..PostParams::default()
            };
            let _ = self.api.replace(&self.name, &pp, &l).await;
        }
    }
}
