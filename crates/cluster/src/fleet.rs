//! The fleet revision stamp in a cluster (docs/fleet.md "Apply in waves"): two annotations on the
//! blueprint's ApplySet parent, read by `fleet apply` to decide which wave is next and written
//! once a cluster's apply succeeded. They are the only state of a rollout, so any machine (a CI
//! run) can continue it.

use gpuctl_fleet::rollout::{APPLIED_AT_ANNOTATION, REVISION_ANNOTATION, STAMP_MANAGER, Stamp};
use gpuctl_model::applyset::ApplySetParent;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::client::{ClusterError, Kube, classify, retry};

/// The stamp on `parent` (`None`: no parent, or a parent without a revision).
pub async fn read_stamp(k: &Kube, parent: &ApplySetParent) -> Result<Option<Stamp>, ClusterError> {
    let Some(r) = k.resolve("v1", "ConfigMap").await? else {
        return Ok(None);
    };
    let Some(cm) = k.get(&r, Some(&parent.namespace), &parent.name).await? else {
        return Ok(None);
    };
    let annotations = &cm["metadata"]["annotations"];
    let Some(revision) = annotations[REVISION_ANNOTATION].as_str() else {
        return Ok(None);
    };
    Ok(Some(Stamp {
        revision: revision.to_string(),
        applied_at: annotations[APPLIED_AT_ANNOTATION]
            .as_str()
            .and_then(|t| t.parse().ok()),
    }))
}

/// Stamps `parent` with `revision`, applied at `at`. A merge patch (field manager
/// `gpuctl-fleet`), so a parent that does not exist is an error, never created half-empty, and a
/// later plain `gpuctl apply` (field manager `gpuctl`, which does not own them) keeps both.
pub async fn write_stamp(
    k: &Kube,
    parent: &ApplySetParent,
    revision: &str,
    at: k8s_openapi::jiff::Timestamp,
) -> Result<(), ClusterError> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        k.client(),
        &parent.namespace,
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let body = json!({"metadata": {"annotations": {
        REVISION_ANNOTATION: revision,
        // Whole seconds, truncated: a time rounded up lies up to half a second in the future,
        // and a gate read in that half second would count more than the whole bake time.
        APPLIED_AT_ANNOTATION: k8s_openapi::jiff::Timestamp::from_second(at.as_second())
            .unwrap_or(at)
            .to_string(),
    }}});
    let params = PatchParams {
        field_manager: Some(STAMP_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let id = crate::client::display_id("ConfigMap", Some(&parent.namespace), &parent.name);
    let patch = Patch::Merge(&body);
    retry(|| api.patch(&parent.name, &params, &patch))
        .await
        .map_err(|e| classify(&id, e))?;
    Ok(())
}
