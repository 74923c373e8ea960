//! Node decisions: the labels and taints gpuctl manages on each pool's nodes, and what the nodes
//! say about the blueprint (node counts, GPU models, drivers, nodes moving between NVIDIADriver
//! CRs).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::diff::{self, Change};
use super::{NodeAction, PlanFinding};
use crate::live::LiveView;
use gpuctl_model::names::{DRIVER_VERSION_LABEL, PRODUCT_LABEL};
use gpuctl_pipeline::render::{DRIVER_LABEL, NodePatch};

/// Node actions and findings of a plan.
#[derive(Debug, Default)]
pub struct NodePlan {
    /// Label and taint changes, node by node.
    pub actions: Vec<NodeAction>,
    /// What the nodes say about the blueprint.
    pub findings: Vec<PlanFinding>,
    /// Findings about nodes moving between NVIDIADriver CRs, by pool (kept apart: a pool an
    /// upgrade journal already explains gets that finding instead).
    pub cr_moves: BTreeMap<String, Vec<PlanFinding>>,
}

/// Label selector string of a pool.
pub fn selector_string(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Longest label selector [`node_list_selectors`] writes: a LIST's URL stays far below what
/// proxies in front of an API server accept (8 KiB is a common bound).
const MAX_LIST_SELECTOR: usize = 4000;

/// Whether `v` can be written inside a set-based selector (`key in (a,b)`): a non-empty label
/// value (alphanumerics, `-`, `_`, `.`). Anything else is listed with its own equality selector.
fn set_value(v: &str) -> bool {
    !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The label selectors that read the nodes of every pool in as few LISTs as possible: pools
/// whose selectors use the same label keys share one set-based selector
/// (`gpuctl.dev/pool in (p000,p001,...)`), so a 64-pool blueprint costs one LIST instead of 64.
/// With several keys the selector can also match nodes no pool selects (the cross product of
/// the values): keep only the nodes [`selects`] finds for some pool.
pub fn node_list_selectors(patches: &[NodePatch]) -> Vec<String> {
    let mut by_keys: BTreeMap<Vec<&str>, Vec<&BTreeMap<String, String>>> = BTreeMap::new();
    let mut out: Vec<String> = Vec::new();
    for p in patches {
        if p.selector.values().all(|v| set_value(v)) && !p.selector.is_empty() {
            let keys = p.selector.keys().map(String::as_str).collect();
            by_keys.entry(keys).or_default().push(&p.selector);
        } else {
            out.push(selector_string(&p.selector));
        }
    }
    for (keys, selectors) in by_keys {
        let mut values: Vec<std::collections::BTreeSet<&str>> =
            vec![Default::default(); keys.len()];
        let written = |values: &[std::collections::BTreeSet<&str>]| {
            keys.iter()
                .zip(values)
                .map(|(k, vs)| match vs.len() {
                    1 => format!("{k}={}", vs.iter().next().unwrap_or(&"")),
                    _ => format!(
                        "{k} in ({})",
                        vs.iter().copied().collect::<Vec<_>>().join(",")
                    ),
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        for sel in selectors {
            let mut next = values.clone();
            for (i, v) in sel.values().enumerate() {
                next[i].insert(v.as_str());
            }
            if values[0].is_empty() || written(&next).len() <= MAX_LIST_SELECTOR {
                values = next;
            } else {
                out.push(written(&values));
                values = vec![Default::default(); keys.len()];
                for (i, v) in sel.values().enumerate() {
                    values[i].insert(v.as_str());
                }
            }
        }
        out.push(written(&values));
    }
    out.sort();
    out.dedup();
    out
}

pub use crate::live::selects;

/// GFD's driver version label, or the deprecated triple.
pub fn node_driver(node: &Value) -> Option<String> {
    let l = &node["metadata"]["labels"];
    if let Some(full) = l[DRIVER_VERSION_LABEL].as_str() {
        return Some(full.to_string());
    }
    let (ma, mi, rev) = (
        l["nvidia.com/cuda.driver.major"].as_str()?,
        l["nvidia.com/cuda.driver.minor"].as_str()?,
        l["nvidia.com/cuda.driver.rev"].as_str().unwrap_or(""),
    );
    Some(if rev.is_empty() {
        format!("{ma}.{mi}")
    } else {
        format!("{ma}.{mi}.{rev}")
    })
}

/// Node names for a message: all of up to three, else the first two and the last.
fn shown_names(names: &[String]) -> String {
    if names.len() > 3 {
        format!("{}, ... {}", names[..2].join(", "), names[names.len() - 1])
    } else {
        names.join(", ")
    }
}

fn taint_string(key: &str, value: Option<&str>, effect: &str) -> String {
    match value {
        Some(v) => format!("{key}={v}:{effect}"),
        None => format!("{key}:{effect}"),
    }
}

/// The node part of a plan (empty when nodes were not read: offline).
pub fn plan_nodes(live: &LiveView, patches: &[NodePatch]) -> NodePlan {
    let mut plan = NodePlan::default();
    for p in patches {
        let Some(nodes) = live.nodes_matching(&p.selector) else {
            continue;
        };
        plan_pool(p, &nodes, &mut plan);
    }
    plan
}

fn plan_pool(p: &NodePatch, nodes: &[&Value], plan: &mut NodePlan) {
    let n = nodes.len();
    let expected = match p.node_range {
        // A provisioned pool: any count its provisioner may reach.
        Some([min, max]) => (!(min as usize..=max as usize).contains(&n)).then(|| {
            format!("between {min} and {max} nodes (its provisioner's minimum and maximum)")
        }),
        None => (n != p.expected_nodes as usize).then(|| format!("{} nodes", p.expected_nodes)),
    };
    if let Some(expected) = expected {
        plan.findings.push(PlanFinding::warning(
            "GPU400",
            format!(
                "pool `{}` expects {expected} but {n} match `{}`",
                p.pool,
                selector_string(&p.selector)
            ),
        ));
    }
    // Nodes on another driver, grouped so a 64-node pool gives one finding, not 64.
    let mut old_drivers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Nodes that would leave one NVIDIADriver CR for another, by (from, to).
    let mut cr_moves: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for n in nodes {
        let name = n["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(f) = wrong_product(p, n, &name) {
            plan.findings.push(f);
        }
        if let Some(driver) = node_driver(n)
            && driver != p.expected_driver
        {
            old_drivers.entry(driver).or_default().push(name.clone());
        }
        if let Some((from, to)) = cr_move(p, n) {
            cr_moves.entry((from, to)).or_default().push(name.clone());
        }
        let labels = label_changes(p, n);
        let taints = missing_taints(p, n);
        if !labels.is_empty() || !taints.is_empty() {
            plan.actions.push(NodeAction {
                pool: p.pool.clone(),
                node: name,
                resource_version: n["metadata"]["resourceVersion"]
                    .as_str()
                    .map(str::to_string),
                labels,
                taints,
            });
        }
    }
    for ((from, to), names) in cr_moves {
        plan.cr_moves
            .entry(p.pool.clone())
            .or_default()
            .push(cr_move_finding(p, &from, &to, &names));
    }
    // Topology-aware scheduling reads every level label from every node of the flavor: a node
    // without one is invisible to Kueue's topology placement.
    for level in &p.topology_levels {
        let missing: Vec<String> = nodes
            .iter()
            .filter(|n| n["metadata"]["labels"][level.as_str()].as_str().is_none())
            .map(|n| {
                n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        if !missing.is_empty() {
            plan.findings.push(PlanFinding::warning("GPU402", format!(
                "{} node(s) of pool `{}` lack the topology level label `{level}` ({}): Kueue's topology-aware scheduling cannot place pods on them; label them (for example from the fabric manager or your provider's topology labels)",
                missing.len(),
                p.pool,
                shown_names(&missing),
            )));
        }
    }
    for (driver, names) in old_drivers {
        plan.findings.push(PlanFinding::warning("GPU403", format!(
            "{} node(s) of pool `{}` run driver {driver} ({}); the blueprint says {}: the GPU Operator moves them after apply (or use `gpuctl upgrade driver` for a blue-green rollout)",
            names.len(),
            p.pool,
            shown_names(&names),
            p.expected_driver
        )));
    }
}

/// An error when GFD reports a GPU model the pool does not declare.
fn wrong_product(p: &NodePatch, n: &Value, name: &str) -> Option<PlanFinding> {
    let product = n["metadata"]["labels"][PRODUCT_LABEL].as_str()?;
    let expected = p.expected_products.is_empty()
        || p.expected_products
            .iter()
            .any(|e| product == e || product.starts_with(&format!("{e}-")));
    (!expected).then(|| {
        PlanFinding::error(
            "GPU401",
            format!(
                "node `{name}` of pool `{}` reports GPU `{product}`; the blueprint says {}",
                p.pool,
                p.expected_products.join(" or ")
            ),
        )
    })
}

/// `(from, to)` when applying moves the node to another NVIDIADriver CR.
fn cr_move(p: &NodePatch, n: &Value) -> Option<(String, String)> {
    let want = p.labels.get(DRIVER_LABEL)?;
    let from = n["metadata"]["labels"][DRIVER_LABEL].as_str()?;
    (from != want).then(|| (from.to_string(), want.clone()))
}

fn label_changes(p: &NodePatch, n: &Value) -> Vec<Change> {
    let labels = &n["metadata"]["labels"];
    p.labels
        .iter()
        .filter_map(|(k, v)| {
            let current = labels[k].as_str();
            (current != Some(v.as_str())).then(|| Change {
                path: diff::join("labels", k),
                before: current.map(|c| json!(c)),
                after: Some(json!(v)),
            })
        })
        .collect()
}

/// Taints the node lacks (or carries with another value), as `key=value:Effect`.
fn missing_taints(p: &NodePatch, n: &Value) -> Vec<String> {
    p.taints
        .iter()
        .filter(|t| {
            let same = n["spec"]["taints"].as_array().and_then(|ts| {
                ts.iter()
                    .find(|x| x["key"] == t.key.as_str() && x["effect"] == t.effect.as_str())
            });
            match same {
                None => true,
                Some(x) => x["value"].as_str() != t.value.as_deref(),
            }
        })
        .map(|t| taint_string(&t.key, t.value.as_deref(), &t.effect))
        .collect()
}

fn cr_move_finding(p: &NodePatch, from: &str, to: &str, names: &[String]) -> PlanFinding {
    let what = format!(
        "{} node(s) of pool `{}` ({}) would move from NVIDIADriver `{from}` to `{to}` all at once: the driver pod on every one of them restarts, and nothing cordons or drains them first",
        names.len(),
        p.pool,
        shown_names(names)
    );
    if p.blue_green {
        PlanFinding::error(
            "GPU404",
            format!(
                "{what}. The blueprint upgrades drivers blue-green: move them with `gpuctl upgrade driver BLUEPRINT --pool {} --to VERSION` (batched, drained, resumable; if the blueprint already names the new version, put the old one back until the upgrade finishes), or set `upgrades.strategy: rolling` to let the operator replace drivers in place",
                p.pool
            ),
        )
    } else {
        PlanFinding::warning(
            "GPU404",
            format!("{what}; apply when the pool can take that"),
        )
    }
}

/// A warning for the nodes of a DRA pool that carry the device-plugin switch's value already and
/// still advertise device-plugin GPUs in their allocatable: the GPU Operator has not removed the
/// device plugin there (yet), and until it does both plugins hand out the same GPUs.
fn still_advertised(p: &NodePatch, key: &str, want: &str, nodes: &[&Value]) -> Option<PlanFinding> {
    let mut held: Vec<String> = Vec::new();
    let mut resources = std::collections::BTreeSet::new();
    for n in nodes {
        if n["metadata"]["labels"][key].as_str() != Some(want) {
            continue;
        }
        let Some(alloc) = n["status"]["allocatable"].as_object() else {
            continue;
        };
        let gpus: Vec<&String> = alloc
            .iter()
            .filter(|(r, v)| {
                gpuctl_model::blueprint::resources::is_gpu_resource(r)
                    && v.as_str().is_some_and(|v| v != "0")
            })
            .map(|(r, _)| r)
            .collect();
        if !gpus.is_empty() {
            resources.extend(gpus.into_iter().cloned());
            held.push(
                n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    (!held.is_empty()).then(|| {
        PlanFinding::warning("GPU405", format!(
            "{} node(s) of pool `{}` ({}) are switched to DRA (`{key}={want}`) but still advertise device-plugin GPUs ({}): the GPU Operator has not removed the device plugin there yet, and until it does the scheduler can place device-plugin pods on GPUs the DRA driver also hands out; keep the nodes cordoned until their allocatable shows none (runbooks/dra-migration.md, step 4)",
            held.len(),
            p.pool,
            shown_names(&held),
            resources.into_iter().collect::<Vec<_>>().join(", ")
        ))
    })
}

/// Moves of pools from the device plugin to DRA (the standalone path): per pool whose nodes'
/// device-plugin switch changes, an error naming the pods on those nodes that hold device-plugin
/// GPUs (`nvidia.com/gpu`, `nvidia.com/gpu.shared`, `nvidia.com/mig-*`): the device plugin leaves
/// the node under them and the scheduler stops accounting for their GPUs. `force` makes it a
/// warning. Pods not read (a snapshot) give a warning.
pub fn dra_migrations(live: &LiveView, patches: &[NodePatch], force: bool) -> Vec<PlanFinding> {
    let mut out = Vec::new();
    for p in patches {
        let Some(key) = &p.dra_switch else {
            continue;
        };
        let Some(want) = p.labels.get(key) else {
            continue;
        };
        let Some(nodes) = live.nodes_matching(&p.selector) else {
            continue;
        };
        if let Some(f) = still_advertised(p, key, want, &nodes) {
            out.push(f);
        }
        let moving: Vec<String> = nodes
            .iter()
            .filter(|n| n["metadata"]["labels"][key.as_str()].as_str() != Some(want.as_str()))
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        if moving.is_empty() {
            continue;
        }
        let Some(pods) = &live.migrating_pods else {
            out.push(PlanFinding::warning("GPU406", format!(
                "{} node(s) of pool `{}` ({}) move from the device plugin to DRA, and the pods on them were not read (a snapshot): make sure none holds `nvidia.com/gpu` or `nvidia.com/mig-*` before applying (runbooks/dra-migration.md)",
                moving.len(),
                p.pool,
                shown_names(&moving)
            )));
            continue;
        };
        let holders: Vec<String> = moving
            .iter()
            .flat_map(|n| pods.get(n).into_iter().flatten())
            .filter(|pod| !pod.finished())
            .filter_map(|pod| {
                let held: Vec<String> = pod
                    .gpus
                    .iter()
                    .filter(|(r, n)| {
                        **n > 0 && gpuctl_model::blueprint::resources::is_gpu_resource(r)
                    })
                    .map(|(r, n)| format!("{r}: {n}"))
                    .collect();
                (!held.is_empty())
                    .then(|| format!("{} ({} on {})", pod.id(), held.join(", "), pod.node))
            })
            .collect();
        if holders.is_empty() {
            continue;
        }
        let what = format!(
            "pool `{}` moves {} node(s) ({}) from the device plugin to DRA while {} pod(s) hold device-plugin GPUs there: {}; the device plugin leaves those nodes under them and the scheduler stops accounting for their GPUs",
            p.pool,
            moving.len(),
            shown_names(&moving),
            holders.len(),
            holders.join(", ")
        );
        out.push(if force {
            PlanFinding::warning("GPU407", format!("{what} (--force-migration)"))
        } else {
            PlanFinding::error("GPU407", format!(
                "{what}. Cordon the nodes and drain those pods first (runbooks/dra-migration.md), or re-run with --force-migration"
            ))
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::{node, patch, snapshot_view};
    use serde_json::json;

    fn gpu400(range: Option<[u32; 2]>, count: usize) -> Vec<String> {
        let mut v = snapshot_view();
        v.nodes = Some(
            (0..count)
                .map(|i| node(&format!("n{i}"), json!({"pool": "train"}), json!([])))
                .collect(),
        );
        let mut p = patch();
        p.node_range = range;
        plan_nodes(&v, &[p])
            .findings
            .into_iter()
            .filter(|f| f.id == "GPU400")
            .map(|f| f.message)
            .collect()
    }

    /// A static pool must have its declared count; a provisioned one any count between its
    /// provisioner's minimum and maximum (a Karpenter pool of `nodes: 2` with one node is fine).
    #[test]
    fn a_provisioned_pool_is_counted_against_its_minimum_and_maximum() {
        assert_eq!(
            gpu400(None, 1),
            ["pool `train` expects 2 nodes but 1 match `pool=train`"]
        );
        assert!(gpu400(None, 2).is_empty());
        assert!(gpu400(Some([0, 4]), 1).is_empty());
        assert!(gpu400(Some([0, 4]), 0).is_empty());
        assert_eq!(
            gpu400(Some([1, 4]), 5),
            [
                "pool `train` expects between 1 and 4 nodes (its provisioner's minimum and maximum) but 5 match `pool=train`"
            ]
        );
        assert_eq!(gpu400(Some([1, 4]), 0).len(), 1);
    }
}
