//! What an upgrade does to one node or pod: cordon and uncordon, the colour and driver labels
//! (server-side apply, field manager `gpuctl-upgrade`), the restore of recorded labels and the
//! steering taint (plain patches), evictions through the Eviction API, and the validation checks
//! a node must pass on its new driver. Every call is idempotent, so a resumed run can repeat any.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use gpuctl_plan::live::workloads::{LivePod, live_pod};
use gpuctl_plan::upgrade::{
    FIELD_MANAGER, PENDING_TAINT_EFFECT, PENDING_TAINT_KEY, PENDING_TAINT_VALUE, VALIDATOR_SELECTOR,
};

use crate::client::{ClusterError, Kube, classify, retry};
use crate::wait;

fn nodes(k: &Kube) -> Api<Node> {
    Api::all(k.client())
}

fn update_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    }
}

/// Cordons (`true`) or uncordons a node.
pub async fn set_unschedulable(k: &Kube, node: &str, on: bool) -> Result<(), ClusterError> {
    let body = json!({"spec": {"unschedulable": if on { Value::Bool(true) } else { Value::Null }}});
    let api = nodes(k);
    let (params, patch) = (update_params(), Patch::Merge(&body));
    retry(|| api.patch(node, &params, &patch))
        .await
        .map(|_| ())
        .map_err(|e| classify(&format!("Node/{node}"), e))
}

/// Declares the labels the upgrade owns on `node` (server-side apply, forced: `gpuctl.dev/driver`
/// is `gpuctl apply`'s otherwise). Keys the upgrade declared before and leaves out are released,
/// which removes them when no other manager owns them (how rollback drops a colour that was absent).
pub async fn apply_owned_labels(
    k: &Kube,
    node: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), ClusterError> {
    let body =
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        force: true,
        ..PatchParams::default()
    };
    let api = nodes(k);
    let patch = Patch::Apply(&body);
    retry(|| api.patch(node, &params, &patch))
        .await
        .map(|_| ())
        .map_err(|e| classify(&format!("Node/{node}"), e))
}

/// Sets (or, for `None`, removes) labels with a merge patch: restores what was recorded without
/// claiming keys `gpuctl apply` declares.
pub async fn restore_labels(
    k: &Kube,
    node: &str,
    labels: &BTreeMap<String, Option<String>>,
) -> Result<(), ClusterError> {
    if labels.is_empty() {
        return Ok(());
    }
    let body = json!({"metadata": {"labels": labels}});
    let api = nodes(k);
    let (params, patch) = (update_params(), Patch::Merge(&body));
    retry(|| api.patch(node, &params, &patch))
        .await
        .map(|_| ())
        .map_err(|e| classify(&format!("Node/{node}"), e))
}

/// Adds (`true`) or removes the steering taint, keeping every other taint; optimistic concurrency
/// through resourceVersion (re-read on conflict, up to 5 times).
pub async fn set_pending_taint(k: &Kube, node: &str, on: bool) -> Result<(), ClusterError> {
    let api = &nodes(k);
    let id = &format!("Node/{node}");
    // Each failure says whether it was a conflict of the write (the node moved since it was read).
    let written = wait::retry(wait::CONFLICT, |(_, moved): &(ClusterError, bool)| *moved, || async move {
        let current = retry(|| api.get(node))
            .await
            .map_err(|e| (classify(id, e), false))?;
        let taints = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let has = taints
            .iter()
            .any(|t| t.key == PENDING_TAINT_KEY && t.effect == PENDING_TAINT_EFFECT);
        if has == on {
            return Ok(());
        }
        let mut list: Vec<Value> = taints
            .into_iter()
            .filter(|t| !(t.key == PENDING_TAINT_KEY && t.effect == PENDING_TAINT_EFFECT))
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
            .collect();
        if on {
            list.push(json!({"key": PENDING_TAINT_KEY, "value": PENDING_TAINT_VALUE, "effect": PENDING_TAINT_EFFECT}));
        }
        let body = json!({"metadata": {"resourceVersion": current.metadata.resource_version}, "spec": {"taints": list}});
        match api
            .patch(node, &update_params(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let moved = matches!(&e, kube::Error::Api(s) if s.code == 409);
                Err((classify(id, e), moved))
            }
        }
    })
    .await;
    match written {
        Ok(()) => Ok(()),
        Err((_, true)) => Err(ClusterError::Conflict {
            object: id.clone(),
            message: "the node kept changing while its taints were updated".into(),
        }),
        Err((e, false)) => Err(e),
    }
}

/// How an eviction request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    /// Accepted: the pod is terminating.
    Accepted,
    /// Gone already.
    Gone,
    /// Refused because a PodDisruptionBudget allows no disruption now (HTTP 429); the server's words.
    Blocked(String),
}

/// How long one eviction request may take. kube's client retries HTTP 429 by itself (up to 15
/// times, honouring the server's `Retry-After`, which is 10 s for a PodDisruptionBudget refusal),
/// so a refused eviction would otherwise block the drain for minutes instead of being retried at
/// the drain's own pace and within its timeout.
pub const EVICTION_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Asks the Eviction API to evict a pod (never a delete: PodDisruptionBudgets are honoured).
pub async fn evict(k: &Kube, namespace: &str, name: &str) -> Result<Eviction, ClusterError> {
    let api: Api<Pod> = Api::namespaced(k.client(), namespace);
    let ep = EvictParams::default();
    match tokio::time::timeout(EVICTION_CALL_TIMEOUT, api.evict(name, &ep)).await {
        Err(_) => Ok(Eviction::Blocked(format!(
            "not accepted within {}s (the API server answers 429 while a PodDisruptionBudget allows no disruption)",
            EVICTION_CALL_TIMEOUT.as_secs()
        ))),
        Ok(Ok(_)) => Ok(Eviction::Accepted),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => Ok(Eviction::Gone),
        Ok(Err(kube::Error::Api(s))) if s.code == 429 => Ok(Eviction::Blocked(
            s.details
                .as_ref()
                .and_then(|d| d.causes.first())
                .map_or_else(|| s.message.clone(), |c| c.message.clone()),
        )),
        Ok(Err(e)) => Err(classify(&format!("Pod/{namespace}/{name}"), e)),
    }
}

/// One pod, by UID: `None` when it is gone (or replaced by a namesake).
pub async fn pod(
    k: &Kube,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<Option<LivePod>, ClusterError> {
    let api: Api<Pod> = Api::namespaced(k.client(), namespace);
    let p = retry(|| api.get_opt(name))
        .await
        .map_err(|e| classify(&format!("Pod/{namespace}/{name}"), e))?;
    Ok(p.as_ref().map(live_pod).filter(|p| p.uid == uid))
}

/// The operator-validator pods on `node`, in any namespace.
pub async fn validator_pods(k: &Kube, node: &str) -> Result<Vec<LivePod>, ClusterError> {
    let api: Api<Pod> = Api::all(k.client());
    let lp = ListParams::default()
        .labels(VALIDATOR_SELECTOR)
        .fields(&format!("spec.nodeName={node}"));
    let list = retry(|| api.list(&lp))
        .await
        .map_err(|e| classify(&format!("list validator pods on {node}"), e))?;
    Ok(list.items.iter().map(live_pod).collect())
}
