//! The upgrade journal and its lock, both in the cluster so any machine can resume, report or roll
//! back: a ConfigMap `gpuctl-upgrade-<pool>` in the operator's namespace holds the journal (JSON),
//! written with resourceVersion preconditions; a `coordination.k8s.io/v1` Lease of the same name
//! lets one run at a time act on the pool. Every write first checks that this run still holds the
//! Lease, so a run that lost it (paused, partitioned) stops instead of racing its successor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gpuctl_model::applyset::{BLUEPRINT_LABEL, MANAGED_BY};
use gpuctl_model::names::journal_name;
use gpuctl_plan::journal::{DATA_KEY, Journal, LeaseInfo};
use gpuctl_plan::upgrade::{FIELD_MANAGER, UPGRADE_POOL_LABEL};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::UpgradeError;
use crate::client::{Kube, classify, retry};
pub use crate::lock::LeaseGuard;
use crate::lock::{self, LockError, LockRef, Policy};
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
        self.lease = Some(lease.lost_flag());
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

/// Who holds the Lease of `pool` (`None`: no Lease).
pub async fn lease_info(
    k: &Kube,
    namespace: &str,
    pool: &str,
) -> Result<Option<LeaseInfo>, UpgradeError> {
    lock::info(k, namespace, &journal_name(pool))
        .await
        .map_err(|e| UpgradeError::cluster(pool, e))
}

/// The Lease of `pool`'s upgrade.
pub fn lock_ref(namespace: &str, pool: &str) -> LockRef {
    LockRef {
        namespace: namespace.to_string(),
        name: journal_name(pool),
        labels: [
            (UPGRADE_POOL_LABEL.to_string(), pool.to_string()),
            (MANAGED_BY.to_string(), "gpuctl".to_string()),
        ]
        .into(),
    }
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
    let policy = Policy {
        duration,
        poll,
        wait: Duration::ZERO,
        outwait_silent: true,
    };
    let holder = lock::this_run("upgrade driver", k.user.as_deref());
    lock::acquire(k, &lock_ref(namespace, pool), &holder, &policy, progress)
        .await
        .map_err(|e| match e {
            LockError::Busy { info, .. } => UpgradeError::Busy {
                pool: pool.to_string(),
                holder: info.describe(),
                namespace: namespace.to_string(),
                lease: journal_name(pool),
                age_s: info.age_s,
                duration_s: info.duration_s,
            },
            LockError::Cluster(e) => UpgradeError::cluster(pool, e),
        })
}
