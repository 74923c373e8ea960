//! MultiKueue credentials (docs/fleet.md "MultiKueue"): a worker's ServiceAccount token, its
//! endpoint from a kubeconfig context, the kubeconfig Kueue accepts (embedded CA, bearer token,
//! no exec plugin, no file path) and the manager's Secret holding it, written with server-side
//! apply under its own field manager (no ApplySet member: a prune leaves it alone).

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use gpuctl_fleet::multikueue::{TOKEN_SECRET, kueue_namespace};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::wait::{GiveUp, Look, TimedOut, Wait};

pub use gpuctl_model::names::MULTIKUEUE_FIELD_MANAGER as FIELD_MANAGER;

/// How long [`worker_token`] waits for the worker's token controller to fill a Secret that was
/// just applied: 10 s was too short once on a loaded CI machine (four cluster tests at a time).
pub const TOKEN_WAIT: Duration = Duration::from_secs(60);

/// Why a worker has no token to give (see [`worker_token`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoToken {
    /// Its token Secret does not exist: its wave is not applied.
    NoSecret,
    /// The Secret exists but the token controller left it empty for [`TOKEN_WAIT`].
    Empty,
    /// The worker could not be read for [`TOKEN_WAIT`] (the last error).
    Unreadable(String),
}

/// The worker's token and CA (base64) from its token Secret, waiting up to [`TOKEN_WAIT`] for the
/// token controller to fill a new one and retrying a read that fails (a loaded API server times
/// out now and then); [`NoToken::NoSecret`] at once when the Secret does not exist.
pub async fn worker_token(worker: &Client) -> Result<(String, String), NoToken> {
    let api = &Api::<Secret>::namespaced(worker.clone(), kueue_namespace());
    let filled = Wait::new(TOKEN_WAIT, Duration::from_millis(250))
        .giving_up(GiveUp::AfterSleep)
        .until(
            &mut (),
            |_, _| {
                Box::pin(async move {
                    match api.get_opt(TOKEN_SECRET).await {
                        Ok(None) => Err(NoToken::NoSecret),
                        Ok(Some(s)) => {
                            let data = s.data.unwrap_or_default();
                            if let (Some(t), Some(ca)) = (data.get("token"), data.get("ca.crt"))
                                && let Ok(token) = String::from_utf8(t.0.clone())
                            {
                                return Ok(Look::Done((token, STANDARD.encode(&ca.0))));
                            }
                            Ok(Look::Pending(NoToken::Empty))
                        }
                        Err(e) => Ok(Look::Pending(NoToken::Unreadable(e.to_string()))),
                    }
                })
            },
            |_, _| {},
        )
        .await?;
    filled.map_err(|TimedOut(last)| last)
}

/// The server URL and, when the context has one, the CA (base64) of `context` in `kubeconfig`
/// (default: KUBECONFIG, then ~/.kube/config).
pub fn endpoint(
    kubeconfig: Option<&Path>,
    context: &str,
) -> Result<(String, Option<String>), String> {
    let fail = |m: String| m;
    let kc = match kubeconfig {
        Some(p) => kube::config::Kubeconfig::read_from(p),
        None => kube::config::Kubeconfig::read(),
    }
    .map_err(|e| fail(format!("cannot read the kubeconfig: {e}")))?;
    let ctx = context;
    let cluster = kc
        .contexts
        .iter()
        .find(|c| c.name == ctx)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .ok_or_else(|| fail(format!("no context `{ctx}` in the kubeconfig")))?;
    let c = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| fail(format!("context `{ctx}` names no cluster")))?;
    let server = c
        .server
        .ok_or_else(|| fail(format!("context `{ctx}` has no server")))?;
    let ca =
        match (c.certificate_authority_data, c.certificate_authority) {
            (Some(d), _) => Some(d),
            (None, Some(file)) => {
                Some(STANDARD.encode(std::fs::read(&file).map_err(|e| {
                    fail(format!("cannot read the CA file of context `{ctx}`: {e}"))
                })?))
            }
            _ => None,
        };
    Ok((server, ca))
}

/// A kubeconfig Kueue accepts: embedded CA, a bearer token, no exec plugin, no file path.
pub fn kubeconfig_text(worker: &str, server: &str, ca: &str, token: &str) -> String {
    let kc = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": worker,
        "clusters": [{"name": worker, "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": worker, "user": {"token": token}}],
        "contexts": [{"name": worker, "context": {"cluster": worker, "user": worker}}],
    });
    serde_json::to_string_pretty(&kc).unwrap_or_default()
}

/// Of `kinds` (API group and resource), those `worker` does not serve, as `resource.group`
/// (`jobsets.jobset.x-k8s.io`): Kueue's MultiKueue client watches each kind the manager's Kueue
/// enables on every worker and does not connect a worker that lacks one.
pub async fn unserved(
    worker: &Client,
    kinds: &[(String, String)],
) -> Result<Vec<String>, kube::Error> {
    let mut groups: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (g, r) in kinds {
        groups.entry(g.as_str()).or_default().push(r.as_str());
    }
    let mut out = Vec::new();
    for (group, resources) in groups {
        let served: Vec<String> = match kube::discovery::group(worker, group).await {
            Ok(g) => g
                .resources_by_stability()
                .into_iter()
                .map(|(ar, _)| ar.plural)
                .collect(),
            // The group is not served at all.
            Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => {
                Vec::new()
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
            Err(e) => return Err(e),
        };
        for r in resources {
            if !served.iter().any(|p| p == r) {
                out.push(if group.is_empty() {
                    r.to_string()
                } else {
                    format!("{r}.{group}")
                });
            }
        }
    }
    Ok(out)
}

/// Whether the manager has Kueue's namespace, where the Secrets go (`Err` when it cannot be
/// read). A manager whose wave comes after its workers' has none yet when its Kueue is installed by
/// gpuctl's own apply.
pub async fn manager_ready(manager: &Client) -> Result<bool, kube::Error> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(manager.clone());
    Ok(api.get_opt(kueue_namespace()).await?.is_some())
}

pub async fn write_secret(
    manager: &Client,
    name: &str,
    kubeconfig: &str,
) -> Result<(), kube::Error> {
    let api: Api<Secret> = Api::namespaced(manager.clone(), kueue_namespace());
    let body = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": kueue_namespace(),
            "labels": {"app.kubernetes.io/managed-by": "gpuctl"}},
        "data": {"kubeconfig": STANDARD.encode(kubeconfig)},
    });
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &pp, &Patch::Apply(&body)).await.map(|_| ())
}
