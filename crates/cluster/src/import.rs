//! Reads what `gpuctl import` maps into the core's one [`LiveView`]: every Node, Namespace,
//! ResourceQuota, LimitRange and PriorityClass, the GPU Operator's ConfigMaps and CRs, the Helm
//! releases of the GPU Operator, Network Operator and Kueue charts (found by chart, under any
//! name), the Kueue (Topology included) and Volcano queue objects, the Network Operator's
//! objects, and the monitoring objects. One paged LIST per kind, all at once (a bounded number at a
//! time, [`crate::lists`]); kinds the cluster does not serve are skipped.

use std::collections::{BTreeMap, BTreeSet};

use gpuctl_day2::diagnostics::UnreadWhy;
use gpuctl_day2::import::ImportContext;
use gpuctl_day2::import::releases::{Chart, choose};
use gpuctl_model::object::{ObjectRef, TypeRef};
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::render::RELEASE_NAME;
use gpuctl_plan::live::{LiveView, Reading, Source};
use serde_json::{Value, json};

use crate::client::{ClusterError, Kube};
use crate::lists::{self, Listing, Query, Want};

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
        gpuctl_model::profiles::KUEUE_API_VERSIONS_FROM_ALPHA,
    ),
    (
        "kueue.x-k8s.io",
        "ClusterQueue",
        gpuctl_model::profiles::KUEUE_API_VERSIONS,
    ),
    (
        "kueue.x-k8s.io",
        "LocalQueue",
        gpuctl_model::profiles::KUEUE_API_VERSIONS,
    ),
    (
        "kueue.x-k8s.io",
        "ResourceFlavor",
        gpuctl_model::profiles::KUEUE_API_VERSIONS,
    ),
    (
        "kueue.x-k8s.io",
        "WorkloadPriorityClass",
        gpuctl_model::profiles::KUEUE_API_VERSIONS,
    ),
    (
        "kueue.x-k8s.io",
        "Topology",
        gpuctl_model::profiles::KUEUE_API_VERSIONS_FROM_ALPHA,
    ),
    ("scheduling.volcano.sh", "Queue", &["v1beta1"]),
    ("karpenter.sh", "NodePool", &["v1"]),
    ("karpenter.sh", "NodeOverlay", &["v1alpha1"]),
    (
        "readiness.node.x-k8s.io",
        "NodeReadinessRule",
        &["v1alpha1"],
    ),
    ("mellanox.com", "NicClusterPolicy", &["v1alpha1"]),
    ("mellanox.com", "IPoIBNetwork", &["v1alpha1"]),
    ("mellanox.com", "MacvlanNetwork", &["v1alpha1"]),
    ("mellanox.com", "HostDeviceNetwork", &["v1alpha1"]),
    ("nv-ipam.nvidia.com", "IPPool", &["v1alpha1"]),
    ("nv-ipam.nvidia.com", "CIDRPool", &["v1alpha1"]),
    ("monitoring.coreos.com", "ServiceMonitor", &["v1"]),
    ("monitoring.coreos.com", "PrometheusRule", &["v1"]),
];

/// The kinds import reads besides [`IMPORT_KINDS`]: every Node (the pools), and the ConfigMaps of
/// the GPU Operator's namespace (the operator's own configuration), listed only there.
const NODES: Want<'static> = Want {
    group: "",
    kind: "Node",
    versions: &["v1"],
    fields: "",
};
const CONFIG_MAPS: Want<'static> = Want {
    group: "",
    kind: "ConfigMap",
    versions: &["v1"],
    fields: "",
};

/// The live view import maps, and what it needs besides: the Helm releases of the charts it maps
/// first (where the operator's release lives decides which namespace's ConfigMaps are read), then
/// every kind at once through the crate's one bulk read ([`crate::lists`]).
pub async fn everything(k: &Kube) -> Result<(LiveView, ImportContext), ClusterError> {
    let catalog = Catalog::embedded();
    let charts: Vec<String> = Chart::ALL.iter().map(|c| c.chart_name(catalog)).collect();
    let version = async { Ok::<_, ClusterError>(k.client().apiserver_version().await.ok()) };
    let (fingerprint, kubernetes_version, (releases, releases_unread)) = futures::try_join!(
        k.fingerprint(),
        version,
        crate::release::releases_by_chart(k, &charts)
    )?;
    let mut view = LiveView::empty(Source::Cluster {
        server: k.server.clone(),
        fingerprint,
    });
    let operator = choose(&releases, catalog).gpu_operator.cloned();
    let operator_namespace = operator.as_ref().map(|r| r.namespace.clone());
    let ns = operator_namespace
        .clone()
        .unwrap_or_else(gpuctl_model::blueprint::default_operator_namespace);
    let (objects, nodes, served) = read_kinds(k, &ns).await?;
    view.objects = objects;
    view.nodes = Some(nodes);
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
            kubernetes_version: kubernetes_version.map(|v| v.git_version),
            releases: Some(releases),
            releases_unread,
        },
    ))
}

/// Objects by identity, the nodes, and the kinds served.
type Read = (BTreeMap<ObjectRef, Value>, Vec<Value>, BTreeSet<TypeRef>);

/// Every kind of [`IMPORT_KINDS`], the ConfigMaps of `operator_namespace` and the Nodes. A kind
/// the cluster does not serve is skipped; any other failure stops the import (an import that
/// silently missed a kind would write a blueprint that deletes it).
async fn read_kinds(k: &Kube, operator_namespace: &str) -> Result<Read, ClusterError> {
    let wants: Vec<Want<'_>> = IMPORT_KINDS
        .iter()
        .map(|&(group, kind, versions)| Want {
            group,
            kind,
            versions,
            fields: "",
        })
        .chain([CONFIG_MAPS, NODES])
        .collect();
    let mut queries = Vec::new();
    for (w, r) in wants.iter().zip(lists::resolve(k, &wants).await) {
        let Some(r) = r? else { continue };
        let mut q = Query::all(r, w.fields);
        if w == &CONFIG_MAPS {
            q.namespace = Some(operator_namespace.to_string());
        }
        queries.push(q);
    }
    let types: Vec<TypeRef> = queries
        .iter()
        .map(|q| TypeRef::new(&q.resolved.resource.api_version, &q.resolved.resource.kind))
        .collect();
    let mut objects = BTreeMap::new();
    let mut nodes = Vec::new();
    let mut served: BTreeSet<TypeRef> = types.iter().cloned().collect();
    let mut failed = None;
    lists::each_page(k, &queries, |i, listing| match listing {
        Listing::Page(items) => {
            for v in items {
                let v = with_type(v, &types[i]);
                if types[i].kind == NODES.kind && types[i].api_version == "v1" {
                    nodes.push(v);
                } else {
                    insert(&mut objects, v);
                }
            }
            true
        }
        Listing::Stopped(s) if s.why == UnreadWhy::NotServed => {
            served.remove(&types[i]);
            false
        }
        Listing::Stopped(s) => {
            failed.get_or_insert(s.error);
            false
        }
    })
    .await;
    if let Some(e) = failed {
        return Err(e);
    }
    // The nodes are the pools' (`view.nodes`), not objects the blueprint owns.
    served.remove(&TypeRef::new("v1", NODES.kind));
    Ok((objects, nodes, served))
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
