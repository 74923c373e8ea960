//! The live GPU Operator Helm release, read from Helm's own storage so a plan can say whether
//! `helm upgrade --install` would change anything, without a helm binary or chart download.
//!
//! Helm 3's default storage driver keeps each revision in a Secret `sh.helm.release.v1.<name>.v<N>`
//! in the release namespace, labelled `owner=helm`, `name=<name>`, `version=<N>`, `status=<status>`;
//! its `release` key holds the release as JSON, gzip-compressed, then base64-encoded (helm's
//! `pkg/storage/driver/util.go`, `encodeRelease`). The JSON's `config` is the values the user
//! supplied, which is exactly what `helm upgrade --install --values FILE` replaces. Releases kept
//! with another driver (`HELM_DRIVER=configmap|sql`) are not found: the plan then says the release
//! is not installed, and apply's `helm upgrade --install` still does the right thing.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};

use gpuctl_core::live::release::{LiveRelease, decode, from_release_json};

use crate::client::{ClusterError, Kube, classify, retry};

/// Reads the newest revision of `release` in `namespace`; `None` when Helm stores none there.
pub async fn read_release(
    k: &Kube,
    namespace: &str,
    release: &str,
) -> Result<Option<LiveRelease>, ClusterError> {
    let api: Api<Secret> = Api::namespaced(k.client(), namespace);
    let lp = ListParams::default().labels(&format!("owner=helm,name={release}"));
    let id = format!("Helm release {namespace}/{release}");
    let list = retry(|| api.list(&lp))
        .await
        .map_err(|e| classify(&id, e))?;
    let newest = list
        .items
        .iter()
        .filter_map(|s| {
            let labels = s.metadata.labels.as_ref()?;
            let revision: u64 = labels.get("version")?.parse().ok()?;
            Some((revision, s))
        })
        .max_by_key(|(revision, _)| *revision);
    let Some((revision, secret)) = newest else {
        return Ok(None);
    };
    let name = secret.metadata.name.clone().unwrap_or_default();
    let unreadable = |what: String| ClusterError::Unreadable {
        object: format!("Secret/{namespace}/{name}"),
        message: format!(
            "{what}; it is labelled as revision {revision} of Helm release {release}: check it with `helm history {release} -n {namespace}` (a release stored by another tool under helm's labels is not one gpuctl can compare)"
        ),
    };
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get("release"))
        .ok_or_else(|| unreadable("it has no `release` key".into()))?;
    let json = decode(&data.0).map_err(|m| unreadable(format!("its `release` key is {m}")))?;
    Ok(Some(from_release_json(revision, &json)))
}
