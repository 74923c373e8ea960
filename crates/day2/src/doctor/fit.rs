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

/// The nodes of `d` with their pools and free room, sorted by name.
pub(crate) fn node_rooms<'a>(bp: &Blueprint, d: &'a Diagnostics) -> Vec<NodeRoom<'a>> {
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
                allocatable: node_allocatable(n),
                used: used.remove(name).unwrap_or_default(),
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
