//! The upgrade journal and its lock, both in the cluster so any machine can resume, report or roll
//! back: a ConfigMap `gpuctl-upgrade-<pool>` in the operator's namespace holds the journal (JSON),
//! written with resourceVersion preconditions; a `coordination.k8s.io/v1` Lease of the same name
//! lets one run at a time act on the pool. Every write first checks that this run still holds the
//! Lease, so a run that lost it (paused, partitioned) stops instead of racing its successor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gpuctl_core::applyset::{BLUEPRINT_LABEL, MANAGED_BY};
use gpuctl_core::journal::{DATA_KEY, Journal, LeaseInfo};
use gpuctl_core::names::journal_name;
use gpuctl_core::upgrade::{FIELD_MANAGER, UPGRADE_POOL_LABEL};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::UpgradeError;
use crate::client::{Kube, classify, retry};
use crate::read::{self, JournalsError};
use crate::report::Reporter;

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
            name: journal_name(pool),
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
            field_manager: Some(FIELD_MANAGER.to_string()),
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
    read::journal_of(name, cm).map_err(|e| upgrade_error(e, ""))
}

/// A journal read failure as an upgrade error (`pool`: for the hint, when known).
fn upgrade_error(e: JournalsError, pool: &str) -> UpgradeError {
    match e {
        JournalsError::Cluster(e) => UpgradeError::cluster(pool, e),
        JournalsError::Corrupt { name, message } => UpgradeError::JournalCorrupt { name, message },
    }
}

/// Every journal in the cluster (or in `namespace`), optionally only `pool`'s, sorted by pool.
pub async fn list(
    k: &Kube,
    namespace: Option<&str>,
    pool: Option<&str>,
) -> Result<Vec<Journal>, UpgradeError> {
    read::journal_list(k, namespace, pool)
        .await
        .map_err(|e| upgrade_error(e, pool.unwrap_or("")))
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

/// Who holds the Lease of `pool` (`None`: no Lease).
pub async fn lease_info(
    k: &Kube,
    namespace: &str,
    pool: &str,
) -> Result<Option<LeaseInfo>, UpgradeError> {
    let api: Api<Lease> = Api::namespaced(k.client(), namespace);
    let name = journal_name(pool);
    let l = retry(|| api.get_opt(&name)).await.map_err(|e| {
        UpgradeError::cluster(pool, classify(&format!("Lease/{namespace}/{name}"), e))
    })?;
    Ok(l.as_ref()
        .map(|l| LeaseInfo::of(l, k8s_openapi::jiff::Timestamp::now())))
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
    progress: &dyn Reporter,
) -> Result<LeaseGuard, UpgradeError> {
    let api: Api<Lease> = Api::namespaced(k.client(), namespace);
    let name = journal_name(pool);
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
                let i = LeaseInfo::of(&l, k8s_openapi::jiff::Timestamp::now());
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
            field_manager: Some(FIELD_MANAGER.to_string()),
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
        field_manager: Some(FIELD_MANAGER.to_string()),
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
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PostParams::default()
            };
            let _ = self.api.replace(&self.name, &pp, &l).await;
        }
    }
}
