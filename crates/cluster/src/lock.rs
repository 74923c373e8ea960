//! Locks in the cluster: a `coordination.k8s.io/v1` Lease held by one gpuctl run at a time and
//! renewed in the background while it runs. `gpuctl apply` holds one per blueprint (beside the
//! ApplySet parent), a driver upgrade one per pool. A holder that stops renewing (killed, paused,
//! partitioned) loses the Lease once its duration has passed; `gpuctl unlock` removes one at once.
//! Who holds it (user, host, CI job, command, since when) is recorded on the Lease, so whoever
//! finds it held is told whom to ask.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpuctl_plan::lock::{self as core_lock, Holder, LeaseInfo};
use gpuctl_plan::plan::FIELD_MANAGER;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use serde_json::json;

use crate::client::{ClusterError, Kube, classify, retry};
use crate::report::Reporter;

/// Which Lease.
#[derive(Debug, Clone)]
pub struct LockRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels the Lease carries (so `kubectl get lease -l ...` finds it).
    pub labels: BTreeMap<String, String>,
}

impl LockRef {
    /// `Lease/ns/name`.
    pub fn id(&self) -> String {
        format!("Lease/{}/{}", self.namespace, self.name)
    }
}

/// How a lock is taken and kept.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// How long a holder that stops renewing keeps the lock.
    pub duration: Duration,
    /// How often a waiting run looks again.
    pub poll: Duration,
    /// How long to wait for a held lock (zero: refuse at once).
    pub wait: Duration,
    /// Also wait, beyond `wait`, for a holder that has not renewed since this run started
    /// looking to expire (a crashed predecessor), bounded by its lease duration.
    pub outwait_silent: bool,
}

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another run holds it.
    #[error("{lease} is held by {}", .info.describe())]
    Busy {
        /// `Lease/ns/name`.
        lease: String,
        /// Who holds it.
        info: LeaseInfo,
        /// How long this run waited.
        waited_s: u64,
    },
    /// The cluster failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

/// Who this process is, for `command` run with the kubeconfig user `user`.
pub fn this_run(command: &str, user: Option<&str>) -> Holder {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into());
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Holder::new(command, user, &host, std::process::id(), nonce, |k| {
        std::env::var(k).ok()
    })
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

impl LeaseGuard {
    /// Whether the Lease was lost (taken over, removed, or not renewed within its duration).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// The flag [`LeaseGuard::is_lost`] reads, for stores that check it before each write.
    pub fn lost_flag(&self) -> Arc<AtomicBool> {
        self.lost.clone()
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
            let _ = self.api.replace(&self.name, &post_params(), &l).await;
        }
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Who holds `lock` now (`None`: no Lease).
pub async fn info(
    k: &Kube,
    namespace: &str,
    name: &str,
) -> Result<Option<LeaseInfo>, ClusterError> {
    let api: Api<Lease> = Api::namespaced(k.client(), namespace);
    let l = retry(|| api.get_opt(name))
        .await
        .map_err(|e| classify(&format!("Lease/{namespace}/{name}"), e))?;
    Ok(l.as_ref()
        .map(|l| LeaseInfo::of(l, k8s_openapi::jiff::Timestamp::now())))
}

/// The live holders of the Leases in `namespace` carrying `selector`, by Lease name.
pub async fn live(
    k: &Kube,
    namespace: &str,
    selector: &str,
) -> Result<Vec<(String, LeaseInfo)>, ClusterError> {
    let api: Api<Lease> = Api::namespaced(k.client(), namespace);
    let lp = ListParams::default().labels(selector);
    let list = retry(|| api.list(&lp))
        .await
        .map_err(|e| classify(&format!("list Leases in {namespace}"), e))?;
    let t = k8s_openapi::jiff::Timestamp::now();
    let mut out: Vec<(String, LeaseInfo)> = list
        .items
        .iter()
        .map(|l| {
            (
                l.metadata.name.clone().unwrap_or_default(),
                LeaseInfo::of(l, t),
            )
        })
        .filter(|(_, i)| i.live())
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Removes `lock` if its holder is still `holder` (what the person who confirmed the removal
/// saw): a Lease taken over meanwhile is left alone. Returns whether it was removed.
pub async fn remove(k: &Kube, lock: &LockRef, holder: &str) -> Result<bool, ClusterError> {
    let api: Api<Lease> = Api::namespaced(k.client(), &lock.namespace);
    let Some(l) = retry(|| api.get_opt(&lock.name))
        .await
        .map_err(|e| classify(&lock.id(), e))?
    else {
        return Ok(false);
    };
    if l.spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or_default()
        != holder
    {
        return Ok(false);
    }
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: l.metadata.resource_version.clone(),
            uid: l.metadata.uid.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&lock.name, &dp).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(classify(&lock.id(), e)),
    }
}

/// Makes sure `namespace` exists so a Lease can live in it (a first apply creates the namespace
/// it plans; the lock comes before that). Returns whether this call created it.
pub async fn ensure_namespace(k: &Kube, namespace: &str) -> Result<bool, ClusterError> {
    let api: Api<Namespace> = Api::all(k.client());
    let id = format!("Namespace/{namespace}");
    if retry(|| api.get_opt(namespace))
        .await
        .map_err(|e| classify(&id, e))?
        .is_some()
    {
        return Ok(false);
    }
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": namespace}})).map_err(|e| {
            ClusterError::Unreadable {
                object: id.clone(),
                message: e.to_string(),
            }
        })?;
    let pp = post_params();
    match retry(|| api.create(&pp, &ns)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(classify(&id, e)),
    }
}

/// Takes `lock` for `holder`: creates the Lease, or takes it over once it is free (released, or
/// not renewed within its duration). A live holder is waited for up to `policy.wait` (and, with
/// `outwait_silent`, until a silent holder's lease runs out); then [`LockError::Busy`] names it.
pub async fn acquire(
    k: &Kube,
    lock: &LockRef,
    holder: &Holder,
    policy: &Policy,
    progress: &dyn Reporter,
) -> Result<LeaseGuard, LockError> {
    let api: Api<Lease> = Api::namespaced(k.client(), &lock.namespace);
    let secs = i32::try_from(policy.duration.as_secs().max(1)).unwrap_or(i32::MAX);
    let id = lock.id();
    let started = Instant::now();
    // The renewal time seen when this run started waiting; a different one later means the
    // holder is alive.
    let mut first_seen: Option<Option<MicroTime>> = None;
    let mut renewing = false;
    loop {
        let current = retry(|| api.get_opt(&lock.name))
            .await
            .map_err(|e| classify(&id, e))?;
        let lease = match current {
            None => new_lease(lock, holder, secs),
            // A create whose answer was lost (and retried) already made it ours.
            Some(l)
                if l.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
                    == Some(holder.identity.as_str()) =>
            {
                return Ok(guard(api, lock, holder, l, policy));
            }
            Some(l) => {
                let i = LeaseInfo::of(&l, k8s_openapi::jiff::Timestamp::now());
                if i.live() {
                    let renew = l.spec.as_ref().and_then(|s| s.renew_time.clone());
                    match &first_seen {
                        None => first_seen = Some(renew),
                        Some(seen) if *seen != renew => renewing = true,
                        Some(_) => {}
                    }
                    let silent_bound = if policy.outwait_silent && !renewing {
                        Duration::from_secs(u64::try_from(i.duration_s).unwrap_or(0))
                            + policy.poll * 2
                    } else {
                        Duration::ZERO
                    };
                    let bound = policy.wait.max(silent_bound);
                    if started.elapsed() >= bound {
                        return Err(LockError::Busy {
                            lease: id,
                            info: i,
                            waited_s: started.elapsed().as_secs(),
                        });
                    }
                    progress.waiting(
                        &format!("{id} held by {}", i.describe()),
                        started.elapsed().as_secs(),
                        bound.as_secs(),
                    );
                    tokio::time::sleep(policy.poll).await;
                    continue;
                }
                take_over(l, lock, holder, secs)
            }
        };
        let pp = post_params();
        let result = if lease.metadata.resource_version.is_some() {
            retry(|| api.replace(&lock.name, &pp, &lease)).await
        } else {
            retry(|| api.create(&pp, &lease)).await
        };
        match result {
            Ok(stored) => return Ok(guard(api, lock, holder, stored, policy)),
            // Someone else created or took it between our read and write: read again.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(classify(&id, e).into()),
        }
    }
}

/// The guard of a Lease this run now holds, renewing it in the background.
fn guard(
    api: Api<Lease>,
    lock: &LockRef,
    holder: &Holder,
    stored: Lease,
    policy: &Policy,
) -> LeaseGuard {
    let lost = Arc::new(AtomicBool::new(false));
    let renewer = tokio::spawn(renew(
        api.clone(),
        lock.name.clone(),
        holder.identity.clone(),
        stored,
        policy.duration,
        lost.clone(),
    ));
    LeaseGuard {
        api,
        name: lock.name.clone(),
        holder: holder.identity.clone(),
        lost,
        renewer,
    }
}

fn new_lease(lock: &LockRef, holder: &Holder, secs: i32) -> Lease {
    let now = now();
    serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lock.name,
            "namespace": lock.namespace,
            "labels": lock.labels,
            "annotations": holder.annotations(),
        },
        "spec": {"holderIdentity": holder.identity, "leaseDurationSeconds": secs, "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
    }))
    .expect("a Lease from known fields")
}

fn take_over(mut l: Lease, lock: &LockRef, holder: &Holder, secs: i32) -> Lease {
    let now = now();
    let annotations = l.metadata.annotations.get_or_insert_with(Default::default);
    for key in [
        core_lock::USER_ANNOTATION,
        core_lock::HOST_ANNOTATION,
        core_lock::CI_ANNOTATION,
        core_lock::COMMAND_ANNOTATION,
    ] {
        annotations.remove(key);
    }
    annotations.extend(holder.annotations());
    let labels = l.metadata.labels.get_or_insert_with(Default::default);
    labels.extend(lock.labels.clone());
    let spec = l.spec.get_or_insert_with(Default::default);
    let transitions = spec.lease_transitions.unwrap_or(0);
    spec.holder_identity = Some(holder.identity.clone());
    spec.lease_duration_seconds = Some(secs);
    spec.acquire_time = Some(now.clone());
    spec.renew_time = Some(now);
    spec.lease_transitions = Some(transitions + 1);
    l
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
    let mut last_ok = Instant::now();
    loop {
        tokio::time::sleep(every).await;
        if let Some(spec) = lease.spec.as_mut() {
            spec.renew_time = Some(now());
        }
        match api.replace(&name, &post_params(), &lease).await {
            Ok(stored) => {
                lease = stored;
                last_ok = Instant::now();
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
            // Removed (`gpuctl unlock`): lost.
            Err(kube::Error::Api(s)) if s.code == 404 => {
                lost.store(true, Ordering::SeqCst);
                return;
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
