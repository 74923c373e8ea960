//! The API client: connection (kubeconfig, context, exec plugins), discovery of the kinds a
//! rendered set uses, reads, server-side apply (real or dry-run), deletes, with retries on
//! transient errors. Every other module of this crate goes through [`Kube`] or its client.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use gpuctl_model::object::TypeRef;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    ValidationDirective,
};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::discovery::Scope;
use kube::{Client, Config};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Concurrent API requests of plan and apply unless `--parallelism` says otherwise. Measured with
/// `tools/bench-plan-apply` (4,160 objects, 2 cores shared with the API server): from 32 up, an apply
/// takes the same time within noise because the server's CPU is the bound; against a remote server,
/// where round trips dominate, 32 in flight keep it busy without flooding API Priority and Fairness
/// queues.
pub const DEFAULT_PARALLELISM: u16 = 32;

pub use gpuctl_plan::plan::FIELD_MANAGER;

/// Where to connect.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// `--kubeconfig`; otherwise `KUBECONFIG` or `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`; otherwise the kubeconfig's current context.
    pub context: Option<String>,
}

/// What went wrong talking to the cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig could not be read or has no usable context.
    #[error("cannot load the kubeconfig{}: {source}", .path.as_ref().map(|p| format!(" `{}`", p.display())).unwrap_or_default())]
    Kubeconfig {
        /// The file, when named.
        path: Option<PathBuf>,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The API server rejected the object as invalid (schema, strict field validation, admission).
    #[error("{object}: rejected as invalid: {message}")]
    Invalid {
        /// `Kind/ns/name`.
        object: String,
        /// The server's words.
        message: String,
    },
    /// An object gpuctl reads but does not write (a Helm release) has content it cannot decode.
    #[error("{object} cannot be read: {message}")]
    Unreadable {
        /// `Kind/ns/name`.
        object: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// Server-side apply found fields owned by another manager.
    #[error("{object}: {message}")]
    Conflict {
        /// `Kind/ns/name`.
        object: String,
        /// The server's words (names the managers and fields).
        message: String,
    },
    /// Not allowed by RBAC or admission.
    #[error("{object}: forbidden: {message}")]
    Forbidden {
        /// `Kind/ns/name`.
        object: String,
        /// The server's words.
        message: String,
    },
    /// An admission webhook the write must pass could not be called, and waiting for it did not
    /// help.
    #[error("{object}: {message}")]
    WebhookUnavailable {
        /// `Kind/ns/name`.
        object: String,
        /// Which webhook, what was waited for and what to check.
        message: String,
    },
    /// The kind is not served (its CRD is not installed).
    #[error("{api_version} {kind} is not served by this cluster (is its CRD installed?)")]
    KindNotServed {
        /// apiVersion.
        api_version: String,
        /// kind.
        kind: String,
    },
    /// Retries ran out or the error was not retryable.
    #[error("{object}: {source}")]
    Api {
        /// What was being done.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// A kind as the cluster serves it.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// True for namespaced kinds.
    pub namespaced: bool,
}

/// A connected cluster.
pub struct Kube {
    client: Client,
    kinds: Mutex<HashMap<TypeRef, Option<Resolved>>>,
    /// Server URL from the kubeconfig.
    pub server: String,
    /// Kubeconfig context in use (`--context`, else the kubeconfig's current context).
    pub context: Option<String>,
    /// `--kubeconfig`, when given (otherwise `KUBECONFIG` or `~/.kube/config`, as for kubectl).
    pub kubeconfig: Option<PathBuf>,
    /// The context's user entry (recorded on locks so a held lock says whose run it is).
    pub user: Option<String>,
    /// Waits for admission webhooks that cannot be called yet ([`crate::webhook`]).
    pub webhooks: crate::webhook::Waits,
}

/// Server-side apply parameters: field manager `gpuctl`, strict field validation.
pub fn apply_params(dry_run: bool, force: bool) -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        field_validation: Some(ValidationDirective::Strict),
        dry_run,
        force,
    }
}

/// A kubeconfig that could not be loaded. kube-rs' "cannot read" error prints the path again, in
/// Rust debug quotes (`'"/path"'`); the path is said once, by [`ClusterError::Kubeconfig`].
fn kubeconfig_error(path: Option<PathBuf>, e: KubeconfigError) -> ClusterError {
    match e {
        KubeconfigError::ReadConfig(source, read) => ClusterError::Kubeconfig {
            path: Some(path.unwrap_or(read)),
            source: Box::new(source),
        },
        e => ClusterError::Kubeconfig {
            path,
            source: Box::new(e),
        },
    }
}

/// Connects using the kubeconfig (exec credential plugins included, as kube-rs supports them).
pub async fn connect(opts: &ConnectOptions) -> Result<Kube, ClusterError> {
    let kc_err = |path: Option<PathBuf>, e: Box<dyn std::error::Error + Send + Sync>| {
        ClusterError::Kubeconfig { path, source: e }
    };
    let kubeconfig = match &opts.kubeconfig {
        Some(p) => Kubeconfig::read_from(p).map_err(|e| kubeconfig_error(Some(p.clone()), e))?,
        None => Kubeconfig::read().map_err(|e| kubeconfig_error(None, e))?,
    };
    // The context actually used, so tools gpuctl runs (helm) talk to the same cluster.
    let context = opts
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone());
    let user = context.as_ref().and_then(|c| {
        kubeconfig
            .contexts
            .iter()
            .find(|n| &n.name == c)
            .and_then(|n| n.context.as_ref())
            .and_then(|c| c.user.clone())
    });
    let options = KubeConfigOptions {
        context: opts.context.clone(),
        ..KubeConfigOptions::default()
    };
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| kc_err(opts.kubeconfig.clone(), Box::new(e)))?;
    config.read_timeout = Some(Duration::from_secs(30));
    // gpuctl retries with its own bounded backoff (`retry`); kube's built-in retry of 429 would
    // otherwise wait out a PodDisruptionBudget's Retry-After up to 15 times per call.
    config.default_retry = false;
    config.connect_timeout = Some(Duration::from_secs(10));
    let server = config.cluster_url.to_string();
    let client =
        Client::try_from(config).map_err(|e| kc_err(opts.kubeconfig.clone(), Box::new(e)))?;
    Ok(Kube {
        client,
        kinds: Mutex::new(HashMap::new()),
        server,
        context,
        kubeconfig: opts.kubeconfig.clone(),
        user,
        webhooks: crate::webhook::Waits::default(),
    })
}

/// `Kind/ns/name` or `Kind/name`.
pub fn display_id(kind: &str, namespace: Option<&str>, name: &str) -> String {
    gpuctl_model::object::ObjectRef::new("", kind, namespace, name).to_string()
}

impl Kube {
    /// The underlying client (for waits and node operations).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Resolves a kind through discovery; `None` when the cluster does not serve it.
    pub async fn resolve(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Resolved>, ClusterError> {
        let key = TypeRef::new(api_version, kind);
        if let Some(r) = self.kinds().get(&key) {
            return Ok(r.clone());
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = retry(|| kube::discovery::pinned_kind(&self.client, &gvk)).await;
        let resolved = match found {
            Ok((resource, caps)) => Some(Resolved {
                resource,
                namespaced: caps.scope == Scope::Namespaced,
            }),
            Err(e) if is_not_served(&e) => None,
            Err(source) => {
                return Err(ClusterError::Api {
                    object: format!("discovery of {api_version} {kind}"),
                    source,
                });
            }
        };
        self.kinds().insert(key, resolved.clone());
        Ok(resolved)
    }

    /// The discovery cache. A poisoned lock only means another task panicked while holding it;
    /// every entry is still a complete discovery answer, so the cache is recovered, not refused.
    fn kinds(&self) -> std::sync::MutexGuard<'_, HashMap<TypeRef, Option<Resolved>>> {
        self.kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets discovery results (after CRDs were installed).
    pub fn forget_kinds(&self) {
        self.kinds().clear();
    }

    fn api(&self, r: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        match (r.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &r.resource),
            (true, None) => Api::all_with(self.client.clone(), &r.resource),
            (false, _) => Api::all_with(self.client.clone(), &r.resource),
        }
    }

    /// Reads one object; `None` when it does not exist.
    pub async fn get(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ClusterError> {
        let api = self.api(r, namespace);
        let id = display_id(&r.resource.kind, namespace, name);
        let obj = retry(|| api.get_opt(name))
            .await
            .map_err(|e| classify(&id, e))?;
        Ok(obj.map(to_value))
    }

    /// Server-side applies `manifest` (dry-run when asked) and returns what the server stored.
    pub async fn apply(
        &self,
        r: &Resolved,
        manifest: &Value,
        dry_run: bool,
        force: bool,
    ) -> Result<Value, ClusterError> {
        let namespace = manifest["metadata"]["namespace"].as_str();
        let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
        let api = self.api(r, namespace);
        let id = display_id(&r.resource.kind, namespace, name);
        let params = apply_params(dry_run, force);
        let patch = Patch::Apply(manifest);
        let mut waited: Option<String> = None;
        loop {
            let e = match retry(|| api.patch(name, &params, &patch)).await {
                Ok(obj) => return Ok(to_value(obj)),
                Err(e) => e,
            };
            let Some(webhook) = crate::webhook::unreachable_webhook(&e) else {
                return Err(classify(&id, e));
            };
            if waited.as_deref() == Some(webhook.as_str()) {
                return Err(ClusterError::WebhookUnavailable {
                    object: id,
                    message: format!(
                        "admission webhook `{webhook}` answered a probe but not this write: {}",
                        status_message(&e)
                    ),
                });
            }
            // One wait per webhook and connection; the probe is this write, dry-run.
            let probe_params = apply_params(true, force);
            let probe = || async { api.patch(name, &probe_params, &patch).await.map(|_| ()) };
            if let Err(message) = self.webhooks.wait(&self.client, &webhook, probe).await {
                return Err(ClusterError::WebhookUnavailable {
                    object: id,
                    message,
                });
            }
            waited = Some(webhook);
        }
    }

    /// Deletes an object, guarded by its resourceVersion so a changed object is not deleted blind.
    pub async fn delete(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), ClusterError> {
        let api = self.api(r, namespace);
        let id = display_id(&r.resource.kind, namespace, name);
        // Background propagation: the object goes at once and the garbage collector removes dependents;
        // foreground would leave it behind a finalizer until every dependent is gone.
        let mut dp = DeleteParams::background();
        if let Some(rv) = resource_version {
            dp = dp.preconditions(kube::api::Preconditions {
                resource_version: Some(rv.to_string()),
                uid: None,
            });
        }
        match retry(|| api.delete(name, &dp)).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(classify(&id, e)),
        }
    }

    /// A stable identity of the cluster: the kube-system namespace UID and the server URL, hashed.
    /// Saved plans carry it so a plan made against one cluster is never applied to another.
    pub async fn fingerprint(&self) -> Result<String, ClusterError> {
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let ks = retry(|| ns.get("kube-system"))
            .await
            .map_err(|e| classify("Namespace/kube-system", e))?;
        let uid = ks.metadata.uid.unwrap_or_default();
        let digest = Sha256::digest(format!("{uid}|{}", self.server));
        Ok(digest.iter().take(12).map(|b| format!("{b:02x}")).collect())
    }
}

fn to_value(obj: DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or(Value::Null)
}

fn is_not_served(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 404,
        kube::Error::Discovery(_) => true,
        _ => false,
    }
}

/// kube-apiserver 1.35 answers server-side apply of an undeclared field with HTTP 500
/// "failed to create typed patch object (...): field not declared in schema" instead of 4xx
/// (kubernetes/kubernetes#139253): that is an invalid manifest, never retried.
fn is_invalid_500(s: &kube::core::Status) -> bool {
    s.code == 500
        && (s.message.contains("field not declared in schema")
            || s.message.contains("failed to create typed patch object"))
}

/// The server's message of an API error, else the error.
fn status_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Whether an error is worth retrying: throttling, server errors, connection trouble. A webhook
/// the server cannot call is not retried blind: [`Kube::apply`] waits for it once instead.
pub fn is_transient(e: &kube::Error) -> bool {
    if crate::webhook::unreachable_webhook(e).is_some() {
        return false;
    }
    match e {
        kube::Error::Api(s) => {
            (s.code == 429
                || s.code >= 500
                || s.code == 0
                || s.reason == "Timeout"
                || s.reason == "ServerTimeout")
                && !is_invalid_500(s)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Runs `op`, again after a backoff while it fails with a transient error ([`is_transient`]), as
/// [`crate::wait::API_CALL`] says (6 tries, 100 ms doubling).
pub async fn retry<T, F, Fut>(op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    crate::wait::retry(crate::wait::API_CALL, is_transient, op).await
}

/// Maps a client error to what the user can act on.
pub fn classify(object: &str, e: kube::Error) -> ClusterError {
    match e {
        kube::Error::Api(s) if s.code == 409 => ClusterError::Conflict {
            object: object.to_string(),
            message: s.message.clone(),
        },
        kube::Error::Api(s) if s.code == 400 || s.code == 422 || is_invalid_500(&s) => {
            ClusterError::Invalid {
                object: object.to_string(),
                message: s.message.clone(),
            }
        }
        kube::Error::Api(s) if s.code == 403 => ClusterError::Forbidden {
            object: object.to_string(),
            message: s.message.clone(),
        },
        source => ClusterError::Api {
            object: object.to_string(),
            source,
        },
    }
}

impl Kube {
    /// How the cluster serves `kind` of `group` (`""`: the core group): the first of `versions`
    /// it serves, else the group's preferred version that serves the kind (diagnostics and import
    /// read kinds whose version moves between releases this way). `None`: not served.
    pub async fn resolve_in(
        &self,
        group: &str,
        kind: &str,
        versions: &[&str],
    ) -> Result<Option<Resolved>, ClusterError> {
        for v in versions {
            let api_version = if group.is_empty() {
                (*v).to_string()
            } else {
                format!("{group}/{v}")
            };
            if let Some(r) = self.resolve(&api_version, kind).await? {
                return Ok(Some(r));
            }
        }
        if group.is_empty() {
            return Ok(None);
        }
        self.resolve_group_kind(group, kind).await
    }

    /// Resolves a kind by group and kind only (the ApplySet parent records no versions): the
    /// group's preferred version when it serves the kind, else the first other version (in the
    /// server's order) that does. A group can serve kinds in different versions: nvidia.com
    /// prefers v1 (ClusterPolicy) and serves NVIDIADriver in v1alpha1 only.
    pub async fn resolve_group_kind(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Option<Resolved>, ClusterError> {
        let discovery = match retry(|| {
            kube::discovery::Discovery::new(self.client.clone())
                .filter(&[group])
                .run()
        })
        .await
        {
            Ok(d) => d,
            // A group whose CRD was just created or deleted is listed before (or after) its
            // versions are served: not served.
            Err(e) if is_not_served(&e) => return Ok(None),
            Err(source) => {
                return Err(ClusterError::Api {
                    object: format!("discovery of {kind}.{group}"),
                    source,
                });
            }
        };
        for g in discovery.groups() {
            let found = g.recommended_kind(kind).or_else(|| {
                g.versions()
                    .flat_map(|v| g.versioned_resources(v))
                    .find(|(r, _)| r.kind == kind)
            });
            if let Some((resource, caps)) = found {
                return Ok(Some(Resolved {
                    resource,
                    namespaced: caps.scope == Scope::Namespaced,
                }));
            }
        }
        Ok(None)
    }
}
