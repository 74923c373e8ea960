//! A hand-built cluster for tests and benchmarks: what a team that set its cluster up by hand
//! (`kubectl apply` of the same objects under its own field manager, `helm install` with the same
//! values) would have, as a live view. Not part of the public interface.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::ImportContext;
use gpuctl_model::applyset::{BLUEPRINT_LABEL, MANAGED_BY, PART_OF};
use gpuctl_model::blueprint::{Blueprint, InstallMode};
use gpuctl_model::names::PRODUCT_LABEL;
use gpuctl_model::object::ObjectRef;
use gpuctl_pipeline::render::RenderedSet;
use gpuctl_plan::live::release::{LiveRelease, NamedRelease};
use gpuctl_plan::live::{LiveView, Reading, Source};

/// `manifest` as a hand-built cluster has it: without the labels gpuctl adds to what it owns.
pub fn unowned(manifest: &Value) -> Value {
    let mut m = manifest.clone();
    if let Some(labels) = m["metadata"]["labels"].as_object_mut() {
        for k in [PART_OF, MANAGED_BY, BLUEPRINT_LABEL] {
            labels.remove(k);
        }
        if labels.is_empty()
            && let Some(meta) = m["metadata"].as_object_mut()
        {
            meta.remove("labels");
        }
    }
    m
}

/// The nodes of `bp`'s pools as GPU Feature Discovery and gpuctl's node patches left them:
/// `<pool>-n<i>`, the pool's selector and declared labels, the GPU product and count.
pub fn nodes(bp: &Blueprint, set: &RenderedSet) -> Vec<Value> {
    let mut out = Vec::new();
    for (pool, patch) in bp.spec.node_pools.iter().zip(&set.node_patches) {
        let mut labels: BTreeMap<String, String> = patch.selector.clone();
        labels.extend(patch.labels.clone());
        if let Some(p) = patch.expected_products.first() {
            labels.insert(PRODUCT_LABEL.to_string(), p.clone());
        }
        labels.insert("nvidia.com/gpu.count".into(), pool.gpu.count.to_string());
        if pool.provisioner.kind
            == gpuctl_model::blueprint::provisioning::ProvisionerKind::Karpenter
        {
            // Karpenter labels the nodes it makes with their NodePool.
            labels.insert("karpenter.sh/nodepool".into(), pool.name.clone());
        }
        let taints: Vec<Value> = patch
            .taints
            .iter()
            .map(|t| match &t.value {
                Some(v) => json!({"key": t.key, "value": v, "effect": t.effect}),
                None => json!({"key": t.key, "effect": t.effect}),
            })
            .collect();
        for i in 0..patch.expected_nodes {
            let mut n = json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": format!("{}-n{i}", pool.name), "labels": labels, "resourceVersion": "1"},
            });
            if !taints.is_empty() {
                n["spec"] = json!({ "taints": taints });
            }
            out.push(n);
        }
    }
    out
}

/// The cluster `set` describes, built by hand: every rendered object un-owned, the nodes, and
/// (`install: helm`) the operator's release with the rendered values.
pub fn hand_built(bp: &Blueprint, set: &RenderedSet) -> (LiveView, ImportContext) {
    let mut view = LiveView::empty(Source::Snapshot {
        server: None,
        fingerprint: None,
        captured_at: None,
    });
    for o in &set.objects {
        let mut m = unowned(&o.manifest);
        m["metadata"]["resourceVersion"] = json!("1");
        if let Some(id) = ObjectRef::of(&m) {
            view.objects.insert(id, m);
        }
    }
    view.members = Some(BTreeMap::new());
    view.nodes = Some(nodes(bp, set));
    view.journals = Reading::Read(vec![]);
    let helm = bp.spec.gpu_operator.install == InstallMode::Helm;
    view.helm_release = Reading::Read(helm.then(|| LiveRelease {
        revision: 1,
        status: "deployed".into(),
        chart: "gpu-operator".into(),
        chart_version: set.helm.version.clone(),
        values: set.helm.values.clone(),
    }));
    let ctx = ImportContext {
        operator_namespace: helm.then(|| set.helm.namespace.clone()),
        kubernetes_version: Some(bp.spec.kubernetes.version.clone()),
        releases: Some(releases(bp, set)),
        releases_unread: 0,
    };
    (view, ctx)
}

/// The Helm releases of the hand-built cluster, as `helm install` of the rendered values leaves
/// them: the GPU Operator's and (`install: helm`) the Network Operator's, each under the name
/// gpuctl gives it.
pub fn releases(bp: &Blueprint, set: &RenderedSet) -> Vec<NamedRelease> {
    let mut out = Vec::new();
    if bp.spec.gpu_operator.install == InstallMode::Helm {
        out.push(NamedRelease {
            name: gpuctl_pipeline::render::RELEASE_NAME.into(),
            namespace: set.helm.namespace.clone(),
            release: LiveRelease {
                revision: 1,
                status: "deployed".into(),
                chart: "gpu-operator".into(),
                chart_version: set.helm.version.clone(),
                values: set.helm.values.clone(),
            },
        });
    }
    if let Some(no) = &bp.spec.network_operator
        && no.install == InstallMode::Helm
        && let Some(text) = set
            .documents
            .get(gpuctl_pipeline::render::network::NETWORK_OPERATOR_VALUES)
        && let Ok(values) = serde_saphyr::from_str::<Value>(text)
    {
        out.push(NamedRelease {
            name: "network-operator".into(),
            namespace: no.namespace.clone(),
            release: LiveRelease {
                revision: 1,
                status: "deployed".into(),
                chart: "network-operator".into(),
                // Chart.yaml's version has no `v`.
                chart_version: no.version.trim_start_matches('v').to_string(),
                values,
            },
        });
    }
    out
}
