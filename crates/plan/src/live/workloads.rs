//! What the cluster has for a pool, read once into plain data: its nodes (labels, cordon, Ready),
//! the GPU pods on them (requests, owner, queue), the PodDisruptionBudgets that cover those pods,
//! and the NVIDIADriver CRs. Planning, validation checks and the tests work on these types, so
//! everything after the read is pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Serialize;
use serde_json::Value;

use gpuctl_model::names::DRAIN_SKIP_LABEL;
use gpuctl_model::quantity::parse_count;

/// A node of the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveNode {
    /// Name.
    pub name: String,
    /// Every label.
    pub labels: BTreeMap<String, String>,
    /// Cordoned.
    pub unschedulable: bool,
    /// Ready condition is True.
    pub ready: bool,
    /// Taints as `key=value:effect` (or `key:effect`).
    pub taints: Vec<String>,
    /// Allocatable GPU resources (`nvidia.com/*`).
    pub gpus: BTreeMap<String, u64>,
}

impl LiveNode {
    /// Label value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// Not cordoned and Ready: the scheduler may use it.
    pub fn available(&self) -> bool {
        !self.unschedulable && self.ready
    }
}

/// What controls a pod, for drain decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodRole {
    /// A batch job's pod (Job, Volcano Job, Kubeflow training jobs): `waitForJobs` waits for it.
    Job,
    /// Anything else that can be evicted (Deployment, StatefulSet, bare pod, ...).
    Service,
    /// A DaemonSet pod: never drained (the operator's operands are DaemonSets).
    DaemonSet,
    /// A static (mirror) pod: cannot be evicted.
    Mirror,
    /// Labelled `nvidia.com/gpu-driver-upgrade-drain.skip=true`: left alone, as the operator does.
    Skipped,
}

/// Owner kinds whose pods are batch jobs (`waitForJobs`).
pub const JOB_OWNER_KINDS: &[&str] = &[
    "Job",
    "PyTorchJob",
    "TFJob",
    "MPIJob",
    "XGBoostJob",
    "PaddleJob",
    "JAXJob",
    "TrainJob",
];

/// A pod on a pool node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LivePod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID (a recreated pod with the same name is another pod).
    pub uid: String,
    /// Node it runs on.
    pub node: String,
    /// `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    pub phase: String,
    /// Being deleted.
    pub terminating: bool,
    /// Every container reports ready.
    pub ready: bool,
    /// GPU resources requested (`nvidia.com/*`), summed over containers.
    pub gpus: BTreeMap<String, u64>,
    /// DRA claims the pod holds (`spec.resourceClaims`): on a DRA pool these are its GPUs, which
    /// no `nvidia.com/*` request shows.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub claims: usize,
    /// Controller kind/name, when it has one.
    pub owner: Option<String>,
    /// How a drain treats it.
    pub role: PodRole,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `terminationGracePeriodSeconds` (default 30).
    pub grace_seconds: i64,
    /// Annotated `karpenter.sh/do-not-disrupt: "true"`: Karpenter takes its node away for no
    /// voluntary reason (consolidation, drift) while it runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub do_not_disrupt: bool,
}

impl LivePod {
    /// `namespace/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Requests a GPU resource or holds a DRA claim (a claim pod on a GPU pool's node holds that
    /// node's devices: a drain must move it as it moves a device-plugin pod).
    pub fn uses_gpus(&self) -> bool {
        self.claims > 0 || self.gpus.values().any(|n| *n > 0)
    }

    /// Finished (holds no GPU any more).
    pub fn finished(&self) -> bool {
        self.phase == "Succeeded" || self.phase == "Failed"
    }
}

/// A PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LivePdb {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its selector (an empty one selects every pod of the namespace).
    #[serde(skip)]
    pub selector: Option<LabelSelector>,
    /// `minAvailable=2` or `maxUnavailable=1`.
    pub rule: String,
    /// `status.disruptionsAllowed` (what the eviction API checks).
    pub disruptions_allowed: i32,
}

impl LivePdb {
    /// `namespace/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether it covers `pod`.
    pub fn covers(&self, pod: &LivePod) -> bool {
        pod.namespace == self.namespace
            && self
                .selector
                .as_ref()
                .is_none_or(|s| selector_matches(s, &pod.labels))
    }
}

/// An NVIDIADriver CR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveDriverCr {
    /// Name.
    pub name: String,
    /// `spec.version`.
    pub version: String,
    /// `spec.default`.
    pub default: bool,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Labels (tells a CR an upgrade created).
    pub labels: BTreeMap<String, String>,
    /// `status.state`.
    pub state: Option<String>,
}

impl LiveDriverCr {
    /// Whether this CR's selector matches `labels` (a default CR matches only as a fallback).
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.default
            && self
                .node_selector
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// Everything read for one pool's upgrade: the workloads a drain moves.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Workloads {
    /// The pool's nodes, sorted by name.
    pub nodes: Vec<LiveNode>,
    /// Pods on those nodes (all namespaces), sorted by node, namespace, name.
    pub pods: Vec<LivePod>,
    /// Every PodDisruptionBudget covering a pod on those nodes.
    pub pdbs: Vec<LivePdb>,
    /// NVIDIADriver CRs (`None`: the CRD is not served).
    pub driver_crs: Option<Vec<LiveDriverCr>>,
    /// The API version the cluster serves DeviceTaintRule in (`None`: not served).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_taint_rule_api: Option<String>,
}

impl Workloads {
    /// The CR that owns a node with `labels`: the one non-default CR whose selector matches, else
    /// the default CR. `Err` names the CRs when more than one matches (the operator fails closed).
    pub fn owner_of(&self, labels: &BTreeMap<String, String>) -> Result<Option<&str>, Vec<String>> {
        let crs = self.driver_crs.as_deref().unwrap_or_default();
        let matching: Vec<&LiveDriverCr> = crs.iter().filter(|c| c.selects(labels)).collect();
        match matching.as_slice() {
            [] => Ok(crs.iter().find(|c| c.default).map(|c| c.name.as_str())),
            [one] => Ok(Some(one.name.as_str())),
            many => Err(many.iter().map(|c| c.name.clone()).collect()),
        }
    }

    /// A CR by name.
    pub fn driver_cr(&self, name: &str) -> Option<&LiveDriverCr> {
        self.driver_crs
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|c| c.name == name)
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&LiveNode> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// Whether a label selector matches `labels` (matchLabels and matchExpressions, as Kubernetes).
pub fn selector_matches(s: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let ml = s
        .match_labels
        .as_ref()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let me = s.match_expressions.as_ref().is_none_or(|exprs| {
        exprs.iter().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let have = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
    });
    ml && me
}

/// `k=v,k2=v2`.
pub fn selector_text(m: &BTreeMap<String, String>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Plain-data view of a node.
pub fn live_node(n: &Node) -> LiveNode {
    let spec = n.spec.clone().unwrap_or_default();
    let status = n.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let gpus = status
        .allocatable
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k.starts_with("nvidia.com/"))
        .filter_map(|(k, q)| parse_count(&q.0).ok().map(|n| (k, n)))
        .collect();
    LiveNode {
        name: n.metadata.name.clone().unwrap_or_default(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        unschedulable: spec.unschedulable.unwrap_or(false),
        ready,
        taints: spec
            .taints
            .unwrap_or_default()
            .iter()
            .map(|t| match &t.value {
                Some(v) => format!("{}={v}:{}", t.key, t.effect),
                None => format!("{}:{}", t.key, t.effect),
            })
            .collect(),
        gpus,
    }
}

/// Plain-data view of a pod.
pub fn live_pod(p: &Pod) -> LivePod {
    let spec = p.spec.clone().unwrap_or_default();
    let status = p.status.clone().unwrap_or_default();
    let mut gpus: BTreeMap<String, u64> = BTreeMap::new();
    for c in &spec.containers {
        let res = c.resources.clone().unwrap_or_default();
        // Extended resources: requests default to limits, and both must be equal when both are set.
        let amounts = res.requests.or(res.limits).unwrap_or_default();
        for (k, q) in amounts {
            if k.starts_with("nvidia.com/")
                && let Ok(n) = parse_count(&q.0)
            {
                *gpus.entry(k).or_default() += n;
            }
        }
    }
    for c in spec.init_containers.as_deref().unwrap_or_default() {
        let res = c.resources.clone().unwrap_or_default();
        for (k, q) in res.requests.or(res.limits).unwrap_or_default() {
            if k.starts_with("nvidia.com/")
                && let Ok(n) = parse_count(&q.0)
            {
                let e = gpus.entry(k).or_default();
                *e = (*e).max(n);
            }
        }
    }
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let owner = p
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.clone(), o.name.clone()));
    let annotations = p.metadata.annotations.as_ref();
    let mirror = annotations.is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let do_not_disrupt_key = &gpuctl_model::profiles::Catalog::embedded()
        .provisioning()
        .karpenter
        .do_not_disrupt;
    let do_not_disrupt =
        annotations.is_some_and(|a| a.get(do_not_disrupt_key).is_some_and(|v| v == "true"));
    let role = if mirror {
        PodRole::Mirror
    } else if owner.as_ref().is_some_and(|(k, _)| k == "DaemonSet") {
        PodRole::DaemonSet
    } else if labels.get(DRAIN_SKIP_LABEL).is_some_and(|v| v == "true") {
        PodRole::Skipped
    } else if owner
        .as_ref()
        .is_some_and(|(k, _)| JOB_OWNER_KINDS.contains(&k.as_str()))
    {
        PodRole::Job
    } else {
        PodRole::Service
    };
    let ready = status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    LivePod {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        uid: p.metadata.uid.clone().unwrap_or_default(),
        node: spec.node_name.clone().unwrap_or_default(),
        phase: status.phase.clone().unwrap_or_else(|| "Pending".into()),
        terminating: p.metadata.deletion_timestamp.is_some(),
        ready,
        gpus,
        claims: spec.resource_claims.as_deref().unwrap_or_default().len(),
        owner: owner.map(|(k, n)| format!("{k}/{n}")),
        role,
        labels,
        grace_seconds: spec.termination_grace_period_seconds.unwrap_or(30),
        do_not_disrupt,
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Plain-data view of a PodDisruptionBudget in `namespace`.
pub fn live_pdb(namespace: &str, pdb: &PodDisruptionBudget) -> LivePdb {
    let spec = pdb.spec.clone().unwrap_or_default();
    let rule = match (&spec.min_available, &spec.max_unavailable) {
        (Some(m), _) => format!("minAvailable={}", int_or_string(m)),
        (None, Some(m)) => format!("maxUnavailable={}", int_or_string(m)),
        (None, None) => "maxUnavailable=0".into(),
    };
    LivePdb {
        namespace: namespace.to_string(),
        name: pdb.metadata.name.clone().unwrap_or_default(),
        selector: spec.selector.clone(),
        rule,
        disruptions_allowed: pdb.status.as_ref().map_or(0, |s| s.disruptions_allowed),
    }
}

fn int_or_string(v: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString) -> String {
    match v {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i) => i.to_string(),
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => s.clone(),
    }
}

/// Plain-data view of an NVIDIADriver CR.
pub fn live_driver_cr(v: &Value) -> LiveDriverCr {
    let strings = gpuctl_model::object::string_map;
    LiveDriverCr {
        name: v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        version: v["spec"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        default: v["spec"]["default"].as_bool().unwrap_or(false),
        node_selector: strings(&v["spec"]["nodeSelector"]),
        labels: strings(&v["metadata"]["labels"]),
        state: v["status"]["state"].as_str().map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn selectors_match_like_kubernetes() {
        let labels = BTreeMap::from([
            ("app".to_string(), "serve".to_string()),
            ("tier".to_string(), "gpu".to_string()),
        ]);
        let s = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".into(), "serve".into())])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["gpu".into(), "cpu".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        assert!(selector_matches(&s, &labels));
        let mut other = labels.clone();
        other.insert("canary".into(), "yes".into());
        assert!(!selector_matches(&s, &other));
        assert!(selector_matches(&LabelSelector::default(), &labels));
    }

    /// A claim pod on a DRA pool asks for no `nvidia.com/*` resource: it still holds the node's
    /// GPUs, so the upgrade's drain moves it; a pod with neither stays out of the drain.
    #[test]
    fn a_pod_holding_a_dra_claim_uses_gpus() {
        let pod = |spec: Value| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": spec,
            }))
            .unwrap()
        };
        let claim = live_pod(&pod(serde_json::json!({
            "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100x2"}],
        })));
        assert_eq!((claim.claims, claim.uses_gpus()), (1, true));
        let plain = live_pod(&pod(serde_json::json!({"containers": [{"name": "c"}]})));
        assert_eq!((plain.claims, plain.uses_gpus()), (0, false));
        let device_plugin = live_pod(&pod(serde_json::json!({
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
        })));
        assert_eq!((device_plugin.claims, device_plugin.uses_gpus()), (0, true));
    }

    #[test]
    fn the_owner_of_a_node_is_the_one_matching_cr_or_the_default() {
        let cr = |name: &str, default: bool, sel: &[(&str, &str)]| LiveDriverCr {
            name: name.into(),
            version: "1".into(),
            default,
            node_selector: sel
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            labels: BTreeMap::new(),
            state: None,
        };
        let view = Workloads {
            driver_crs: Some(vec![
                cr("cluster-default", true, &[]),
                cr("pool-a", false, &[("gpuctl.dev/driver", "pool-a")]),
                cr("clash", false, &[("gpuctl.dev/pool", "a")]),
            ]),
            ..Workloads::default()
        };
        let l = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            view.owner_of(&l(&[("gpuctl.dev/driver", "pool-a")])),
            Ok(Some("pool-a"))
        );
        assert_eq!(
            view.owner_of(&l(&[("gpuctl.dev/driver", "cluster-default")])),
            Ok(Some("cluster-default"))
        );
        assert_eq!(
            view.owner_of(&l(&[
                ("gpuctl.dev/driver", "pool-a"),
                ("gpuctl.dev/pool", "a")
            ])),
            Err(vec!["pool-a".to_string(), "clash".to_string()])
        );
    }
}
