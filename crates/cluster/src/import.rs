//! Reads what `gpuctl import` maps into the core's one [`LiveView`]: every Node, Namespace,
//! ResourceQuota, LimitRange and PriorityClass, the GPU Operator's ConfigMaps and CRs, the Helm
//! releases of the GPU Operator, Network Operator and Kueue charts (found by chart, under any
//! name), the Kueue (Topology included) and Volcano queue objects, the Network Operator's
//! objects, and the monitoring objects. One LIST per kind, all at
//! once (a bounded number at a time); kinds the cluster does not serve are skipped.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use gpuctl_core::import::ImportContext;
use gpuctl_core::import::releases::{Chart, choose};
use gpuctl_core::live::{LiveView, Reading, Source};
use gpuctl_core::object::{ObjectRef, TypeRef};
use gpuctl_core::profiles::Catalog;
use gpuctl_core::render::RELEASE_NAME;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::client::{ClusterError, Kube, classify, retry};

/// `(group, kind, versions)` of every kind import reads (in every namespace, except ConfigMaps):
/// the versions gpuctl maps are tried first, then the group's preferred version (a group can serve
/// kinds in different versions: nvidia.com has ClusterPolicy in v1, NVIDIADriver in v1alpha1).
pub const IMPORT_KINDS: &[(&str, &str, &[&str])] = &[
    ("", "Namespace", &["v1"]),
    ("", "ResourceQuota", &["v1"]),
    ("", "LimitRange", &["v1"]),
    ("scheduling.k8s.io", "PriorityClass", &["v1"]),
    ("nvidia.com", "NVIDIADriver", &["v1alpha1"]),
    ("nvidia.com", "ClusterPolicy", &["v1"]),
    (
        "kueue.x-k8s.io",
        "Cohort",
        &["v1beta2", "v1beta1", "v1alpha1"],
    ),
    ("kueue.x-k8s.io", "ClusterQueue", &["v1beta2", "v1beta1"]),
    ("kueue.x-k8s.io", "LocalQueue", &["v1beta2", "v1beta1"]),
    ("kueue.x-k8s.io", "ResourceFlavor", &["v1beta2", "v1beta1"]),
    (
        "kueue.x-k8s.io",
        "WorkloadPriorityClass",
        &["v1beta2", "v1beta1"],
    ),
    (
        "kueue.x-k8s.io",
        "Topology",
        &["v1beta2", "v1beta1", "v1alpha1"],
    ),
    ("scheduling.volcano.sh", "Queue", &["v1beta1"]),
    ("mellanox.com", "NicClusterPolicy", &["v1alpha1"]),
    ("mellanox.com", "IPoIBNetwork", &["v1alpha1"]),
    ("mellanox.com", "MacvlanNetwork", &["v1alpha1"]),
    ("mellanox.com", "HostDeviceNetwork", &["v1alpha1"]),
    ("nv-ipam.nvidia.com", "IPPool", &["v1alpha1"]),
    ("monitoring.coreos.com", "ServiceMonitor", &["v1"]),
    ("monitoring.coreos.com", "PrometheusRule", &["v1"]),
];

/// One kind's objects.
type KindList = (TypeRef, Vec<Value>);

/// Kinds listed at once.
const PARALLELISM: usize = 8;

/// The live view import maps, and what it needs besides.
pub async fn everything(k: &Kube) -> Result<(LiveView, ImportContext), ClusterError> {
    let fingerprint = k.fingerprint().await?;
    let mut view = LiveView::empty(Source::Cluster {
        server: k.server.clone(),
        fingerprint,
    });
    let kubernetes_version = k
        .client()
        .apiserver_version()
        .await
        .ok()
        .map(|v| v.git_version);
    // The releases of the charts import maps, by chart; where the operator's release lives
    // decides which namespace's ConfigMaps are read.
    let catalog = Catalog::embedded();
    let charts: Vec<String> = Chart::ALL.iter().map(|c| c.chart_name(catalog)).collect();
    let (releases, releases_unread) = crate::release::releases_by_chart(k, &charts).await?;
    let operator = choose(&releases, catalog).gpu_operator.cloned();
    let operator_namespace = operator.as_ref().map(|r| r.namespace.clone());
    let lists: Vec<Result<Option<KindList>, ClusterError>> =
        futures::stream::iter(IMPORT_KINDS.iter().copied())
            .map(|(group, kind, versions)| async move {
                let Some(r) = k.resolve_in(group, kind, versions).await? else {
                    return Ok(None);
                };
                let t = TypeRef::new(&r.resource.api_version, &r.resource.kind);
                Ok(Some((t, k.list(&r, "").await?)))
            })
            .buffered(PARALLELISM)
            .collect()
            .await;
    let mut served = BTreeSet::new();
    for list in lists {
        let Some((t, items)) = list? else { continue };
        for v in items {
            insert(&mut view.objects, with_type(v, &t));
        }
        served.insert(t);
    }
    let ns = operator_namespace
        .clone()
        .unwrap_or_else(|| "gpu-operator".into());
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(k.client(), &ns);
    let lp = ListParams::default();
    let list = retry(|| cms.list(&lp))
        .await
        .map_err(|e| classify(&format!("list ConfigMaps in {ns}"), e))?;
    for cm in list.items {
        let v = serde_json::to_value(cm).unwrap_or(Value::Null);
        insert(
            &mut view.objects,
            with_type(v, &TypeRef::new("v1", "ConfigMap")),
        );
    }
    served.insert(TypeRef::new("v1", "ConfigMap"));
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(k.client());
    let list = retry(|| nodes.list(&lp))
        .await
        .map_err(|e| classify("list Nodes", e))?;
    view.nodes = Some(
        list.items
            .into_iter()
            .map(|n| {
                let mut v = serde_json::to_value(n).unwrap_or(Value::Null);
                v["apiVersion"] = json!("v1");
                v["kind"] = json!("Node");
                v
            })
            .collect(),
    );
    // What a plan reads: the release gpuctl's helm mode manages (named `gpu-operator`).
    view.helm_release = Reading::Read(
        operator
            .filter(|r| r.name == RELEASE_NAME)
            .map(|r| r.release),
    );
    view.served = Some(served);
    view.members = Some(BTreeMap::new());
    view.journals = Reading::Read(vec![]);
    Ok((
        view,
        ImportContext {
            operator_namespace,
            kubernetes_version,
            releases: Some(releases),
            releases_unread,
        },
    ))
}

fn insert(objects: &mut BTreeMap<ObjectRef, Value>, v: Value) {
    if let Some(id) = ObjectRef::of(&v) {
        objects.insert(id, v);
    }
}

fn with_type(mut v: Value, t: &TypeRef) -> Value {
    v["apiVersion"] = json!(t.api_version);
    v["kind"] = json!(t.kind);
    v
}
