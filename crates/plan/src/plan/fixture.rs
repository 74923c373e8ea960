//! A small rendered set and live views to plan it against: the fixture of the plan's unit tests,
//! public so the snapshot tests a layer above (day-2's `snapshot`) plan the same set. Not part of
//! the public interface.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::live::Reading;
use crate::live::release::LiveRelease;
use gpuctl_model::applyset::{BLUEPRINT_LABEL, PART_OF};
use gpuctl_model::blueprint::InstallMode;
use gpuctl_pipeline::render::{ChartSource, HelmRelease, NodeTaint, RenderedObject, Stack};

pub const BLUEPRINT: &str = "lab";
pub const OPERATOR_NS: &str = "gpu-operator";

pub fn set_id() -> String {
    parent_of(&set()).id()
}

pub fn labels() -> Value {
    json!({ PART_OF: set_id_raw(), BLUEPRINT_LABEL: BLUEPRINT })
}

/// The ApplySet id without building a set (it depends only on the blueprint and namespace).
pub fn set_id_raw() -> String {
    ApplySetParent::for_blueprint(BLUEPRINT, OPERATOR_NS).id()
}

pub fn object(phase: Phase, manifest: Value) -> RenderedObject {
    RenderedObject {
        phase,
        api_version: manifest["apiVersion"].as_str().unwrap().into(),
        kind: manifest["kind"].as_str().unwrap().into(),
        namespace: manifest["metadata"]["namespace"]
            .as_str()
            .map(str::to_string),
        name: manifest["metadata"]["name"].as_str().unwrap().into(),
        manifest,
    }
}

pub fn namespace() -> RenderedObject {
    object(
        Phase::Foundation,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": labels()}}),
    )
}

pub fn quota() -> RenderedObject {
    object(
        Phase::Quotas,
        json!({"apiVersion": "v1", "kind": "ResourceQuota",
               "metadata": {"name": "team-a-quota", "namespace": "team-a", "labels": labels()},
               "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}}),
    )
}

pub fn queue() -> RenderedObject {
    object(
        Phase::Queues,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
               "metadata": {"name": "train", "labels": labels()},
               "spec": {"cohort": "all"}}),
    )
}

/// A Volcano queue, a child of `parent` when given (the hierarchy tests' object).
pub fn volcano_queue(name: &str, parent: Option<&str>) -> RenderedObject {
    let mut spec = json!({"weight": 1});
    if let Some(p) = parent {
        spec["parent"] = json!(p);
    }
    object(
        Phase::Queues,
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
               "metadata": {"name": name, "labels": labels()}, "spec": spec}),
    )
}

pub fn patch() -> NodePatch {
    NodePatch {
        pool: "train".into(),
        selector: BTreeMap::from([("pool".into(), "train".into())]),
        expected_nodes: 2,
        node_range: None,
        labels: BTreeMap::from([(
            gpuctl_pipeline::render::DRIVER_LABEL.into(),
            "train-580".into(),
        )]),
        taints: vec![NodeTaint {
            key: "nvidia.com/gpu".into(),
            value: Some("present".into()),
            effect: "NoSchedule".into(),
        }],
        expected_products: vec!["NVIDIA-H100-80GB-HBM3".into()],
        expected_driver: "580.95.05".into(),
        blue_green: true,
        topology_levels: Vec::new(),
        dra_switch: None,
    }
}

pub fn helm(install: InstallMode) -> HelmRelease {
    HelmRelease {
        stack: Default::default(),
        release: "gpu-operator".into(),
        chart: "nvidia/gpu-operator".into(),
        version: "v26.7.0".into(),
        namespace: OPERATOR_NS.into(),
        install,
        values: json!({"driver": {"enabled": true}}),
        source: Default::default(),
    }
}

pub fn set() -> RenderedSet {
    RenderedSet {
        releases: vec![],
        undeclared: vec![],
        blueprint: BLUEPRINT.into(),
        objects: vec![namespace(), quota(), queue()],
        node_patches: vec![patch()],
        helm: helm(InstallMode::Helm),
        documents: BTreeMap::new(),
    }
}

/// A live view from a snapshot-like source: no dry-runs, every kind served.
pub fn snapshot_view() -> LiveView {
    let mut v = LiveView::empty(Source::Snapshot {
        server: Some("https://example:6443".into()),
        fingerprint: Some("fp".into()),
        captured_at: Some("2026-11-28T09:30:00Z".into()),
    });
    v.members = Some(BTreeMap::new());
    v.nodes = Some(vec![]);
    v.journals = Reading::Read(vec![]);
    v.helm_release = Reading::Read(None);
    v
}

/// `o` as the API server stores it: gpuctl's fields plus server-set metadata.
pub fn stored(o: &RenderedObject) -> Value {
    let mut v = o.manifest.clone();
    v["metadata"]["resourceVersion"] = json!("41");
    v["metadata"]["uid"] = json!("u-1");
    v
}

pub fn with_member(view: &mut LiveView, v: Value) {
    let id = gpuctl_model::object::ObjectRef::of(&v).unwrap();
    view.members.get_or_insert_with(BTreeMap::new).insert(id, v);
}

pub fn node(name: &str, labels: Value, taints: Value) -> Value {
    json!({"metadata": {"name": name, "resourceVersion": "7", "labels": labels}, "spec": {"taints": taints}})
}

pub fn kinds(plan: &Plan) -> Vec<(String, ActionKind)> {
    plan.actions.iter().map(|a| (a.id(), a.action)).collect()
}

pub fn messages(plan: &Plan, severity: Severity) -> Vec<&str> {
    plan.findings
        .iter()
        .filter(|f| f.severity == severity)
        .map(|f| f.message.as_str())
        .collect()
}

pub fn plan_of(view: &LiveView) -> Plan {
    plan(&set(), view, PlanOptions::default()).unwrap()
}

pub fn release(version: &str, status: &str, values: Value) -> LiveRelease {
    LiveRelease {
        revision: 4,
        status: status.into(),
        chart: "gpu-operator".into(),
        chart_version: version.into(),
        values,
    }
}

pub fn kueue_release(config: &str) -> HelmRelease {
    HelmRelease {
        stack: Stack::Kueue,
        release: "kueue".into(),
        chart: "kueue".into(),
        version: "0.19.2".into(),
        namespace: "kueue-system".into(),
        install: InstallMode::Helm,
        values: json!({"managerConfig": {"controllerManagerConfigYaml": config}}),
        source: ChartSource::Oci {
            reference: "oci://registry.k8s.io/kueue/charts/kueue".into(),
        },
    }
}

pub fn kueue_live(revision: u64, config: &str) -> LiveRelease {
    LiveRelease {
        revision,
        status: "deployed".into(),
        chart: "kueue".into(),
        chart_version: "0.19.2".into(),
        values: json!({"managerConfig": {"controllerManagerConfigYaml": config}}),
    }
}
