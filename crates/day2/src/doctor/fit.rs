//! Where a pod could go: the scheduler's node-selector, required node affinity, taint and
//! resource-fit predicates for accelerator resources, over the nodes of a [`Diagnostics`]
//! reading, and what each pool has free.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

use super::{Ctx, PoolRoom};
use crate::diagnostics::{Diagnostics, node_allocatable, node_ready, pod_requests};
use gpuctl_model::blueprint::Blueprint;
use gpuctl_model::profiles::Catalog;
use serde_json::Value;

/// A node with its pool and what it has free.
pub(crate) struct NodeRoom<'a> {
    pub node: &'a Node,
    pub name: &'a str,
    /// The blueprint pool whose selector it matches (the first, in blueprint order).
    pub pool: Option<usize>,
    pub ready: bool,
    pub unschedulable: bool,
    /// Allocatable accelerator resources.
    pub allocatable: BTreeMap<String, u64>,
    /// Requested by pods bound to it that have not finished.
    pub used: BTreeMap<String, u64>,
}

impl NodeRoom<'_> {
    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.node.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }

    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels().get(k).map(String::as_str)
    }

    /// Free units of `resource` (allocatable minus used, never below zero).
    pub fn free(&self, resource: &str) -> u64 {
        self.allocatable
            .get(resource)
            .copied()
            .unwrap_or(0)
            .saturating_sub(self.used.get(resource).copied().unwrap_or(0))
    }

    /// Ready and not cordoned.
    pub fn usable(&self) -> bool {
        self.ready && !self.unschedulable
    }

    pub fn taints(&self) -> &[Taint] {
        self.node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default()
    }
}

/// The GPUs a node serves from DRA under extended-resource names (KEP-5004, on by default from
/// Kubernetes 1.36): for each name a DeviceClass serves ([`gpuctl_pipeline::extended::classes`]:
/// `nvidia.com/gpu` by the driver chart's `gpu.nvidia.com`, `nvidia.com/mig-<profile>` by gpuctl's
/// classes), the node's devices of that class's type (and profile) in its ResourceSlices, and how
/// many of them claims hold that are no pod's extended-resource claim (a pod served through one,
/// `status.extendedResourceClaimStatus`, is counted by its requests like a device-plugin pod).
/// The scheduler serves a name from DRA only on a node that does not advertise it, which the
/// caller checks. Keyed by node, then name: `(devices, held by other claims)`.
pub(crate) fn dra_served(
    bp: &Blueprint,
    catalog: &Catalog,
    d: &Diagnostics,
) -> BTreeMap<String, BTreeMap<String, (u64, u64)>> {
    let classes = gpuctl_pipeline::extended::classes(bp, catalog);
    let mut out: BTreeMap<String, BTreeMap<String, (u64, u64)>> = BTreeMap::new();
    if classes.is_empty() {
        return out;
    }
    let attr = |dev: &Value, k: &str| dev["attributes"][k]["string"].as_str().map(str::to_string);
    let serves = |dev: &Value| -> Option<String> {
        let ty = attr(dev, "type")?;
        classes
            .iter()
            .find(|c| {
                c.device_type == ty && (c.profile.is_none() || c.profile == attr(dev, "profile"))
            })
            .map(|c| c.resource.clone())
    };
    // (driver, pool, device) -> (node, name served)
    let mut devices: BTreeMap<(&str, &str, &str), (&str, String)> = BTreeMap::new();
    for slice in &d.resource_slices {
        let spec = &slice["spec"];
        let (Some(node), Some(driver), Some(pool)) = (
            spec["nodeName"].as_str(),
            spec["driver"].as_str(),
            spec["pool"]["name"].as_str(),
        ) else {
            continue;
        };
        for dev in spec["devices"].as_array().into_iter().flatten() {
            let (Some(name), Some(r)) = (dev["name"].as_str(), serves(dev)) else {
                continue;
            };
            if devices
                .insert((driver, pool, name), (node, r.clone()))
                .is_none()
            {
                out.entry(node.to_string())
                    .or_default()
                    .entry(r)
                    .or_default()
                    .0 += 1;
            }
        }
    }
    let extended_claims: std::collections::BTreeSet<(&str, &str)> = d
        .pods
        .iter()
        .filter_map(|p| {
            let claim = p.status.as_ref()?.extended_resource_claim_status.as_ref()?;
            Some((
                p.metadata.namespace.as_deref()?,
                claim.resource_claim_name.as_str(),
            ))
        })
        .collect();
    for c in &d.resource_claims {
        let id = (
            c["metadata"]["namespace"].as_str().unwrap_or_default(),
            c["metadata"]["name"].as_str().unwrap_or_default(),
        );
        if extended_claims.contains(&id) {
            continue;
        }
        for r in c["status"]["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let key = (
                r["driver"].as_str().unwrap_or_default(),
                r["pool"].as_str().unwrap_or_default(),
                r["device"].as_str().unwrap_or_default(),
            );
            if let Some((node, name)) = devices.get(&key)
                && let Some(e) = out.get_mut(*node).and_then(|m| m.get_mut(name))
            {
                e.1 += 1;
            }
        }
    }
    out
}

/// The nodes of `d` with their pools and free room, sorted by name. A name a node serves from
/// DRA ([`dra_served`]) and does not advertise counts as allocatable, the devices other claims
/// hold as used.
pub(crate) fn node_rooms<'a>(
    bp: &Blueprint,
    catalog: &Catalog,
    d: &'a Diagnostics,
) -> Vec<NodeRoom<'a>> {
    let mut served = dra_served(bp, catalog, d);
    let mut used: BTreeMap<&str, BTreeMap<String, u64>> = BTreeMap::new();
    for p in &d.pods {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let u = used.entry(node).or_default();
        for (k, n) in pod_requests(p) {
            *u.entry(k).or_default() += n;
        }
    }
    let mut out: Vec<NodeRoom<'a>> = d
        .nodes
        .iter()
        .map(|n| {
            let name = n.metadata.name.as_deref().unwrap_or_default();
            let labels = n.metadata.labels.clone().unwrap_or_default();
            let pool = bp.spec.node_pools.iter().position(|p| {
                !p.selector.is_empty() && p.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            });
            let mut allocatable = node_allocatable(n);
            let mut used = used.remove(name).unwrap_or_default();
            for (r, (devices, held)) in served.remove(name).unwrap_or_default() {
                if allocatable.get(&r).is_some_and(|c| *c > 0) {
                    continue;
                }
                allocatable.insert(r.clone(), devices);
                *used.entry(r).or_default() += held;
            }
            NodeRoom {
                node: n,
                name,
                pool,
                ready: node_ready(n),
                unschedulable: n
                    .spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false),
                allocatable,
                used,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(b.name));
    out
}

/// Whether `pod`'s node selector and required node affinity select `node`.
pub(crate) fn selects(pod: &Pod, node: &NodeRoom<'_>) -> bool {
    let Some(spec) = &pod.spec else { return true };
    let labels = node.labels();
    if let Some(sel) = &spec.node_selector
        && !sel.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice());
    match terms {
        None | Some([]) => true,
        Some(terms) => terms.iter().any(|t| term_matches(t, node)),
    }
}

fn term_matches(t: &NodeSelectorTerm, node: &NodeRoom<'_>) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        // An empty term matches nothing (the scheduler's rule).
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, node.labels().get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let v = (r.key == "metadata.name").then_some(node.name);
            requirement_matches(r, v)
        })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(x)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|x| x.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if r.operator == "Gt" { v > x } else { v < x }
        }
        _ => false,
    }
}

/// The node's `NoSchedule` / `NoExecute` taints `pod` does not tolerate.
pub(crate) fn untolerated<'n>(pod: &Pod, node: &'n NodeRoom<'_>) -> Vec<&'n Taint> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    node.taints()
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .filter(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
        .collect()
}

/// The scheduler's toleration rule.
pub(crate) fn tolerates(tol: &Toleration, t: &Taint) -> bool {
    if let Some(e) = tol.effect.as_deref()
        && !e.is_empty()
        && e != t.effect
    {
        return false;
    }
    let key = tol.key.as_deref().unwrap_or_default();
    let exists = tol.operator.as_deref() == Some("Exists");
    if key.is_empty() {
        return exists;
    }
    if key != t.key {
        return false;
    }
    exists || tol.value.as_deref().unwrap_or_default() == t.value.as_deref().unwrap_or_default()
}

/// `key=value:effect` (or `key:effect`).
pub(crate) fn taint_text(t: &Taint) -> String {
    match t.value.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => format!("{}={v}:{}", t.key, t.effect),
        None => format!("{}:{}", t.key, t.effect),
    }
}

/// What each blueprint pool has free now.
pub(crate) fn pool_rooms(ctx: &Ctx<'_>) -> Vec<PoolRoom> {
    ctx.bp
        .spec
        .node_pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let nodes: Vec<&NodeRoom<'_>> =
                ctx.nodes.iter().filter(|n| n.pool == Some(i)).collect();
            let mut free: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for n in nodes.iter().filter(|n| n.usable()) {
                for r in n.allocatable.keys() {
                    let f = n.free(r);
                    let e = free.entry(r.clone()).or_default();
                    e.0 += f;
                    e.1 = e.1.max(f);
                }
            }
            PoolRoom {
                pool: p.name.clone(),
                nodes: nodes.len(),
                ready: nodes.iter().filter(|n| n.usable()).count(),
                free,
            }
        })
        .collect()
}
