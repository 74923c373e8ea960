//! Helm releases, read from Helm's own storage: the GPU Operator's, so a plan can say whether
//! `helm upgrade --install` would change anything (without a helm binary or chart download), and
//! for `gpuctl import` every release of the charts it maps, found by chart under any name.
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

use futures::StreamExt;
use gpuctl_pipeline::render::Stack;
use gpuctl_plan::live::Reading;
use gpuctl_plan::live::release::{
    LiveRelease, NamedRelease, OwnedRelease, decode, from_release_json,
};
use gpuctl_plan::plan::uninstall;

use crate::client::{ClusterError, Kube, classify, retry};

/// The Secret of the newest revision Helm stores of `release` in `namespace`, with its revision
/// number (from its `version` label; Secrets without a numeric one are not revisions); `None`
/// when Helm stores none there.
pub async fn newest_revision(
    k: &Kube,
    namespace: &str,
    release: &str,
) -> Result<Option<(u64, Secret)>, ClusterError> {
    let api: Api<Secret> = Api::namespaced(k.client(), namespace);
    let lp = ListParams::default().labels(&format!("owner=helm,name={release}"));
    let id = format!("Helm release {namespace}/{release}");
    let list = retry(|| api.list(&lp))
        .await
        .map_err(|e| classify(&id, e))?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|s| {
            let revision: u64 = s.metadata.labels.as_ref()?.get("version")?.parse().ok()?;
            Some((revision, s))
        })
        .max_by_key(|(revision, _)| *revision))
}

/// Reads the newest revision of `release` in `namespace`; `None` when Helm stores none there.
pub async fn read_release(
    k: &Kube,
    namespace: &str,
    release: &str,
) -> Result<Option<LiveRelease>, ClusterError> {
    let Some((revision, secret)) = newest_revision(k, namespace, release).await? else {
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

/// At most this many releases are decoded by [`releases_by_chart`] (one GET and one decode
/// each); the rest are counted, and import says so.
pub const MAX_RELEASES: usize = 1000;

/// Releases listed per page of Helm's storage Secrets.
const PAGE: u32 = 500;

/// The newest revision of every Helm release in the cluster whose chart is one of `charts`,
/// found in any namespace under any release name, and how many releases were not decoded
/// (beyond [`MAX_RELEASES`]). Helm's storage Secrets are listed by label (`owner=helm`, metadata
/// only, paged); only the newest revision of each release is fetched and decoded. A revision
/// that does not decode is skipped: it cannot be a release of a chart import maps that anyone
/// could compare with.
pub async fn releases_by_chart(
    k: &Kube,
    charts: &[String],
) -> Result<(Vec<NamedRelease>, usize), ClusterError> {
    let api: Api<Secret> = Api::all(k.client());
    let mut newest: std::collections::BTreeMap<(String, String), (u64, String)> =
        std::collections::BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().labels("owner=helm").limit(PAGE);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = retry(|| api.list_metadata(&lp))
            .await
            .map_err(|e| classify("list Helm release Secrets", e))?;
        for s in &page.items {
            let (Some(ns), Some(secret), Some(labels)) = (
                s.metadata.namespace.clone(),
                s.metadata.name.clone(),
                s.metadata.labels.as_ref(),
            ) else {
                continue;
            };
            let (Some(release), Some(revision)) = (
                labels.get("name"),
                labels.get("version").and_then(|v| v.parse::<u64>().ok()),
            ) else {
                continue;
            };
            let e = newest
                .entry((ns, release.clone()))
                .or_insert((revision, secret.clone()));
            if revision > e.0 {
                *e = (revision, secret);
            }
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    // Releases named like a chart first, so a bound never hides the likely ones.
    let mut all: Vec<((String, String), (u64, String))> = newest.into_iter().collect();
    all.sort_by_key(|((ns, name), _)| {
        (
            !charts.iter().any(|c| name.contains(c.as_str())),
            ns.clone(),
            name.clone(),
        )
    });
    let unread = all.len().saturating_sub(MAX_RELEASES);
    all.truncate(MAX_RELEASES);
    let found: Vec<Option<NamedRelease>> =
        futures::stream::iter(all.into_iter().map(|((ns, name), (revision, secret))| {
            async move {
                let api: Api<Secret> = Api::namespaced(k.client(), &ns);
                let s = match retry(|| api.get_opt(&secret)).await {
                    Ok(Some(s)) => s,
                    // Deleted since the list (an upgrade pruned an old revision): not there.
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(classify(&format!("Secret/{ns}/{secret}"), e)),
                };
                let Some(data) = s.data.as_ref().and_then(|d| d.get("release")) else {
                    return Ok(None);
                };
                let Ok(json) = decode(&data.0) else {
                    return Ok(None);
                };
                Ok::<_, ClusterError>(Some(NamedRelease {
                    name,
                    namespace: ns,
                    release: from_release_json(revision, &json),
                }))
            }
        }))
        .buffered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    Ok((
        found
            .into_iter()
            .flatten()
            .filter(|r| charts.contains(&r.release.chart))
            .collect(),
        unread,
    ))
}

/// The Helm releases gpuctl installed for `blueprint`: those whose storage Secrets carry its
/// [`gpuctl_model::applyset::BLUEPRINT_LABEL`] and a [`gpuctl_model::names::STACK_LABEL`] gpuctl
/// knows (`helm upgrade --install --labels` records both), in any namespace, each read at its
/// newest revision. Their objects are not read here ([`objects_in_groups`]).
pub async fn owned_releases(k: &Kube, blueprint: &str) -> Result<Vec<OwnedRelease>, ClusterError> {
    let api: Api<Secret> = Api::all(k.client());
    let lp = ListParams::default().labels(&format!(
        "owner=helm,{}={blueprint},{}",
        gpuctl_model::applyset::BLUEPRINT_LABEL,
        gpuctl_model::names::STACK_LABEL
    ));
    let list = retry(|| api.list_metadata(&lp))
        .await
        .map_err(|e| classify("list Helm release Secrets", e))?;
    let mut found: std::collections::BTreeMap<(String, String), Stack> =
        std::collections::BTreeMap::new();
    for s in &list.items {
        let (Some(ns), Some(labels)) = (s.metadata.namespace.clone(), s.metadata.labels.as_ref())
        else {
            continue;
        };
        let (Some(name), Some(stack)) = (
            labels.get("name"),
            labels
                .get(gpuctl_model::names::STACK_LABEL)
                .and_then(|v| uninstall::stack_of_label(v)),
        ) else {
            continue;
        };
        found.insert((ns, name.clone()), stack);
    }
    let mut out = Vec::new();
    for ((namespace, name), stack) in found {
        // The newest revision, labelled or not (a later `helm upgrade` keeps the labels).
        let Some(release) = read_release(k, &namespace, &name).await? else {
            continue;
        };
        out.push(OwnedRelease {
            named: NamedRelease {
                name,
                namespace,
                release,
            },
            stack,
            objects: Reading::NotRead,
        });
    }
    Ok(out)
}

/// Every object of the kinds the cluster serves in `groups` (their preferred versions), as
/// `Kind/ns/name`, sorted. A group the cluster does not serve has none.
pub async fn objects_in_groups(k: &Kube, groups: &[String]) -> Result<Vec<String>, ClusterError> {
    let allow: Vec<&str> = groups.iter().map(String::as_str).collect();
    let discovery = kube::discovery::Discovery::new(k.client())
        .filter(&allow)
        .run()
        .await
        .map_err(|e| classify(&format!("discovery of {}", allow.join(", ")), e))?;
    let mut out = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if !caps.supports_operation(kube::discovery::verbs::LIST) {
                continue;
            }
            let api: Api<kube::api::DynamicObject> = Api::all_with(k.client(), &ar);
            let lp = ListParams::default();
            let list = retry(|| api.list_metadata(&lp))
                .await
                .map_err(|e| classify(&format!("list {}", ar.kind), e))?;
            out.extend(list.items.iter().map(|o| {
                crate::client::display_id(
                    &ar.kind,
                    o.metadata.namespace.as_deref(),
                    o.metadata.name.as_deref().unwrap_or_default(),
                )
            }));
        }
    }
    out.sort();
    Ok(out)
}
