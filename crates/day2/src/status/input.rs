//! What `gpuctl status` reads, as plain data: nodes (Ready, cordoned, GPU capacity and allocatable),
//! pods (node, phase, GPU requests), ResourceQuotas (hard and used), Kueue ClusterQueues and Volcano
//! Queues (spec and status, as the API server returned them). Built from Kubernetes JSON, so a live
//! read and a diagnostics snapshot give the same input; everything after this is pure.

use std::collections::BTreeMap;

use serde_json::Value;

use gpuctl_model::blueprint::resources::is_gpu_resource;
use gpuctl_model::quantity::parse_count;

/// A node, as status needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeFacts {
    /// Name.
    pub name: String,
    /// Every label.
    pub labels: BTreeMap<String, String>,
    /// The Ready condition is True.
    pub ready: bool,
    /// Cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    /// `status.capacity` of GPU resources (`nvidia.com/gpu`, `nvidia.com/gpu.shared`,
    /// `nvidia.com/mig-*`).
    pub capacity: BTreeMap<String, u64>,
    /// `status.allocatable` of the same resources.
    pub allocatable: BTreeMap<String, u64>,
}

/// A pod that requests GPU resources.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.nodeName` (empty: not bound).
    pub node: String,
    /// `status.phase` (`Pending` when absent).
    pub phase: String,
    /// GPU resources requested (the scheduler's effective request: the sum over containers, or the
    /// largest init container's when that is larger).
    pub gpus: BTreeMap<String, u64>,
}

impl PodFacts {
    /// Holds its devices: bound to a node and not finished.
    pub fn holds_devices(&self) -> bool {
        !self.node.is_empty() && self.phase != "Succeeded" && self.phase != "Failed"
    }
}

/// A ResourceQuota: what the API server (`status.hard`) and kube-controller-manager (`status.used`)
/// report, quantities as written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuotaFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `status.hard` (falls back to `spec.hard` before the controller has written a status).
    pub hard: BTreeMap<String, String>,
    /// `status.used` (empty until kube-controller-manager has counted).
    pub used: BTreeMap<String, String>,
}

/// Everything `gpuctl status` reads from a cluster.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatusInput {
    /// Every node (the blueprint's pool selectors pick theirs).
    pub nodes: Vec<NodeFacts>,
    /// Pods that request GPU resources (others are dropped when read).
    pub pods: Vec<PodFacts>,
    /// ResourceQuotas.
    pub quotas: Vec<QuotaFacts>,
    /// Kueue ClusterQueues as JSON (`None`: Kueue's CRD is not served or was not read).
    pub cluster_queues: Option<Vec<Value>>,
    /// Volcano Queues as JSON (`None`: Volcano's CRD is not served or was not read).
    pub volcano_queues: Option<Vec<Value>>,
    /// Karpenter NodeClaims as JSON (`None`: Karpenter's CRDs are not served or were not read).
    pub node_claims: Option<Vec<Value>>,
}

/// Quantities may be JSON numbers or strings (`x-kubernetes-int-or-string`).
fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `{name: quantity}` maps as text.
pub(crate) fn quantity_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| quantity_text(v).map(|q| (k.clone(), q)))
                .collect()
        })
        .unwrap_or_default()
}

fn gpu_counts(v: &Value) -> BTreeMap<String, u64> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| is_gpu_resource(k))
                .filter_map(|(k, v)| {
                    quantity_text(v)
                        .and_then(|q| parse_count(&q).ok())
                        .map(|n| (k.clone(), n))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl NodeFacts {
    /// From a Node's JSON.
    pub fn from_json(v: &Value) -> NodeFacts {
        let ready = v["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        NodeFacts {
            name: v["metadata"]["name"].as_str().unwrap_or_default().into(),
            labels: gpuctl_model::object::string_map(&v["metadata"]["labels"]),
            ready,
            unschedulable: v["spec"]["unschedulable"].as_bool().unwrap_or(false),
            capacity: gpu_counts(&v["status"]["capacity"]),
            allocatable: gpu_counts(&v["status"]["allocatable"]),
        }
    }
}

impl PodFacts {
    /// From a Pod's JSON; `None` when it requests no GPU resource.
    pub fn from_json(v: &Value) -> Option<PodFacts> {
        let mut gpus: BTreeMap<String, u64> = BTreeMap::new();
        let requests = |c: &Value| {
            // Extended resources: requests default to limits (and must equal them when both are set).
            let r = &c["resources"];
            if r["requests"].is_object() {
                gpu_counts(&r["requests"])
            } else {
                gpu_counts(&r["limits"])
            }
        };
        for c in v["spec"]["containers"].as_array().into_iter().flatten() {
            for (k, n) in requests(c) {
                let e = gpus.entry(k).or_default();
                *e = e.saturating_add(n);
            }
        }
        for c in v["spec"]["initContainers"].as_array().into_iter().flatten() {
            for (k, n) in requests(c) {
                let e = gpus.entry(k).or_default();
                *e = (*e).max(n);
            }
        }
        gpus.retain(|_, n| *n > 0);
        if gpus.is_empty() {
            return None;
        }
        Some(PodFacts {
            namespace: v["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .into(),
            name: v["metadata"]["name"].as_str().unwrap_or_default().into(),
            node: v["spec"]["nodeName"].as_str().unwrap_or_default().into(),
            phase: v["status"]["phase"].as_str().unwrap_or("Pending").into(),
            gpus,
        })
    }
}

impl QuotaFacts {
    /// From a ResourceQuota's JSON.
    pub fn from_json(v: &Value) -> QuotaFacts {
        let status_hard = quantity_map(&v["status"]["hard"]);
        QuotaFacts {
            namespace: v["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .into(),
            name: v["metadata"]["name"].as_str().unwrap_or_default().into(),
            hard: if status_hard.is_empty() {
                quantity_map(&v["spec"]["hard"])
            } else {
                status_hard
            },
            used: quantity_map(&v["status"]["used"]),
        }
    }
}

impl StatusInput {
    /// What status needs from a Day-2 reading (live, or a snapshot's `diagnostics`). Queue kinds
    /// that were not read and hold nothing are `None` (not read), never an empty list.
    pub fn from_diagnostics(d: &crate::diagnostics::Diagnostics) -> StatusInput {
        use crate::diagnostics::{DiagKind, node_ready, pod_requests};
        let gpu_counts = |m: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >|
         -> BTreeMap<String, u64> {
            m.into_iter()
                .flatten()
                .filter(|(k, _)| is_gpu_resource(k))
                .filter_map(|(k, q)| parse_count(&q.0).ok().map(|n| (k.clone(), n)))
                .collect()
        };
        let texts = |m: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >|
         -> BTreeMap<String, String> {
            m.into_iter()
                .flatten()
                .map(|(k, q)| (k.clone(), q.0.clone()))
                .collect()
        };
        let nodes = d
            .nodes
            .iter()
            .map(|n| {
                let status = n.status.as_ref();
                NodeFacts {
                    name: n.metadata.name.clone().unwrap_or_default(),
                    labels: n.metadata.labels.clone().unwrap_or_default(),
                    ready: node_ready(n),
                    unschedulable: n
                        .spec
                        .as_ref()
                        .and_then(|s| s.unschedulable)
                        .unwrap_or(false),
                    capacity: gpu_counts(status.and_then(|s| s.capacity.as_ref())),
                    allocatable: gpu_counts(status.and_then(|s| s.allocatable.as_ref())),
                }
            })
            .collect();
        let pods = d
            .pods
            .iter()
            .filter_map(|p| {
                let mut gpus = pod_requests(p);
                gpus.retain(|k, _| is_gpu_resource(k));
                (!gpus.is_empty()).then(|| PodFacts {
                    namespace: p.metadata.namespace.clone().unwrap_or_default(),
                    name: p.metadata.name.clone().unwrap_or_default(),
                    node: p
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_name.clone())
                        .unwrap_or_default(),
                    phase: p
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or_else(|| "Pending".into()),
                    gpus,
                })
            })
            .collect();
        let quotas = d
            .resource_quotas
            .iter()
            .map(|q| {
                let status_hard = texts(q.status.as_ref().and_then(|s| s.hard.as_ref()));
                QuotaFacts {
                    namespace: q.metadata.namespace.clone().unwrap_or_default(),
                    name: q.metadata.name.clone().unwrap_or_default(),
                    hard: if status_hard.is_empty() {
                        texts(q.spec.as_ref().and_then(|s| s.hard.as_ref()))
                    } else {
                        status_hard
                    },
                    used: texts(q.status.as_ref().and_then(|s| s.used.as_ref())),
                }
            })
            .collect();
        let list = |kind: DiagKind, items: &Vec<Value>| {
            (d.read(kind) || !items.is_empty()).then(|| items.clone())
        };
        let mut nodes: Vec<NodeFacts> = nodes;
        let mut pods: Vec<PodFacts> = pods;
        add_dra(d, &mut nodes, &mut pods);
        StatusInput {
            nodes,
            pods,
            quotas,
            cluster_queues: list(DiagKind::ClusterQueue, &d.cluster_queues),
            volcano_queues: list(DiagKind::VolcanoQueue, &d.volcano_queues),
            node_claims: list(DiagKind::NodeClaim, &d.node_claims),
        }
    }
}

/// The claims the 1.36 scheduler made for pods' extended resources
/// (`status.extendedResourceClaimStatus`), as (namespace, claim): those pods are counted by their
/// requests already.
fn extended_resource_claims(
    d: &crate::diagnostics::Diagnostics,
) -> std::collections::BTreeSet<(&str, &str)> {
    d.pods
        .iter()
        .filter_map(|p| {
            let c = p.status.as_ref()?.extended_resource_claim_status.as_ref()?;
            Some((
                p.metadata.namespace.as_deref()?,
                c.resource_claim_name.as_str(),
            ))
        })
        .collect()
}

/// GPUs and MIG devices that NVIDIA's DRA driver publishes and claims hold, counted under the
/// names the device plugin gives the same devices (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`,
/// profiles/dra.yaml `kueue.resource_names`): a node's published devices as its capacity and
/// allocatable (unless the device plugin already advertises that resource there), and each
/// allocated claim's devices as requests of the first pod it is reserved for. So a pool served
/// by DRA shows its GPUs, and tenants the GPUs their claims hold, as a device-plugin pool does.
fn add_dra(d: &crate::diagnostics::Diagnostics, nodes: &mut [NodeFacts], pods: &mut Vec<PodFacts>) {
    let catalog = gpuctl_model::profiles::Catalog::embedded();
    let Some(driver) = gpuctl_pipeline::cel::driver_of(catalog, "gpu") else {
        return;
    };
    let names = &catalog.dra().kueue.resource_names;
    let mut device_resource: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut per_node: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for slice in &d.resource_slices {
        let spec = &slice["spec"];
        if spec["driver"] != driver {
            continue;
        }
        let node = spec["nodeName"].as_str().unwrap_or_default().to_string();
        let pool = spec["pool"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for dev in spec["devices"].as_array().into_iter().flatten() {
            let attr = |k: &str| dev["attributes"][k]["string"].as_str().unwrap_or_default();
            let resource = match attr("type") {
                "gpu" => names.gpu.clone(),
                "mig" if !attr("profile").is_empty() => names.mig(attr("profile")),
                _ => continue,
            };
            let name = dev["name"].as_str().unwrap_or_default().to_string();
            *per_node
                .entry(node.clone())
                .or_default()
                .entry(resource.clone())
                .or_default() += 1;
            device_resource.insert((pool.clone(), name), resource);
        }
    }
    for n in nodes.iter_mut() {
        for (resource, count) in per_node.remove(&n.name).unwrap_or_default() {
            if !n.capacity.contains_key(&resource) {
                n.capacity.insert(resource.clone(), count);
                n.allocatable.insert(resource, count);
            }
        }
    }
    let extended = extended_resource_claims(d);
    let mut held: BTreeMap<(String, String), BTreeMap<String, u64>> = BTreeMap::new();
    for claim in &d.resource_claims {
        let ns = claim["metadata"]["namespace"].as_str().unwrap_or_default();
        if extended.contains(&(ns, claim["metadata"]["name"].as_str().unwrap_or_default())) {
            continue;
        }
        let Some(pod) = claim["status"]["reservedFor"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["resource"] == "pods")
            .and_then(|r| r["name"].as_str())
        else {
            continue;
        };
        for r in claim["status"]["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if r["driver"] != driver {
                continue;
            }
            let key = (
                r["pool"].as_str().unwrap_or_default().to_string(),
                r["device"].as_str().unwrap_or_default().to_string(),
            );
            if let Some(resource) = device_resource.get(&key) {
                *held
                    .entry((ns.to_string(), pod.to_string()))
                    .or_default()
                    .entry(resource.clone())
                    .or_default() += 1;
            }
        }
    }
    for ((ns, name), devices) in held {
        if let Some(p) = pods
            .iter_mut()
            .find(|p| p.namespace == ns && p.name == name)
        {
            for (r, n) in devices {
                *p.gpus.entry(r).or_default() += n;
            }
            continue;
        }
        let Some(pod) = d.pods.iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(ns.as_str())
                && p.metadata.name.as_deref() == Some(name.as_str())
        }) else {
            continue;
        };
        pods.push(PodFacts {
            namespace: ns,
            name,
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            phase: pod
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Pending".into()),
            gpus: devices,
        });
    }
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
}
