//! Node pools from nodes: the GPU nodes grouped first by the ResourceFlavors that already select
//! them, then by what render would write on them (GPU product, MIG and device-plugin config,
//! driver CR, operand switches, taints); each group's selector is the smallest set of its shared
//! labels that picks exactly its nodes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Draft, labels};
use gpuctl_model::names::{
    DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL, OPERAND_DEPLOY_LABEL_PREFIX,
    PRODUCT_LABEL,
};

/// Pools a selector may use labels of (searched in this order, then the rest by name).
const PREFERRED_SELECTOR_KEYS: &[&str] = &[
    "gpuctl.dev/pool",
    "node.kubernetes.io/instance-type",
    "nodepool",
];

/// Label keys (or prefixes) a selector never uses: per-node, written by controllers, or written
/// by gpuctl itself.
const NOT_SELECTOR: &[&str] = &[
    "nvidia.com/",
    "feature.node.kubernetes.io/",
    "kubernetes.io/hostname",
    "beta.kubernetes.io/",
    "node-role.kubernetes.io/",
    "gpuctl.dev/driver",
    "gpuctl.dev/color",
    "gpuctl.dev/upgrade-pool",
    "gpuctl-test",
];

/// Taint keys controllers set and remove by themselves.
const SYSTEM_TAINTS: &[&str] = &[
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "gpuctl.dev/driver-upgrade",
];

/// One node as import reads it.
#[derive(Debug, Clone)]
pub struct NodeView {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Taints `(key, value, effect)`, sorted, without controller taints.
    pub taints: Vec<(String, Option<String>, String)>,
    /// `status.nodeInfo` when read.
    pub info: Value,
    /// `status.capacity` when read.
    pub capacity: Value,
}

impl NodeView {
    /// A node object as import reads it.
    pub fn of(n: &Value) -> NodeView {
        let mut taints: Vec<(String, Option<String>, String)> = n["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let key = t["key"].as_str()?.to_string();
                if SYSTEM_TAINTS.iter().any(|p| key.starts_with(p)) {
                    return None;
                }
                Some((
                    key,
                    t["value"]
                        .as_str()
                        .filter(|v| !v.is_empty())
                        .map(str::to_string),
                    t["effect"].as_str()?.to_string(),
                ))
            })
            .collect();
        taints.sort();
        taints.dedup();
        NodeView {
            name: n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            labels: labels(n),
            taints,
            info: n["status"]["nodeInfo"].clone(),
            capacity: n["status"]["capacity"].clone(),
        }
    }

    /// The node's GPU product, when GPU Feature Discovery labelled it.
    pub fn product(&self) -> Option<&str> {
        self.labels.get(PRODUCT_LABEL).map(String::as_str)
    }
}

/// A group of nodes that becomes one pool.
#[derive(Debug, Clone)]
pub struct Group {
    /// Name (from a flavor, a config label, or the GPU).
    pub name: String,
    /// Selector.
    pub selector: BTreeMap<String, String>,
    /// Nodes, sorted by name.
    pub nodes: Vec<NodeView>,
    /// Whether the selector came from a ResourceFlavor.
    pub from_flavor: bool,
    /// The selector also picks nodes outside the group (no shared label set picks exactly it).
    pub overlaps: Vec<String>,
}

/// What render writes on a pool's nodes, which must be the same on every node of a pool.
fn group_key(n: &NodeView) -> Vec<(String, String)> {
    let mut key: Vec<(String, String)> = n
        .labels
        .iter()
        .filter(|(k, _)| {
            k.as_str() == PRODUCT_LABEL
                || k.as_str() == MIG_CONFIG_LABEL
                || k.as_str() == DEVICE_PLUGIN_CONFIG_LABEL
                || k.as_str() == DRIVER_LABEL
                || k.as_str() == "nvidia.com/gpu.count"
                || k.starts_with(OPERAND_DEPLOY_LABEL_PREFIX)
                || k.as_str() == "gpuctl.dev/pool"
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v, e) in &n.taints {
        key.push((
            format!("taint:{k}"),
            format!("{}:{e}", v.clone().unwrap_or_default()),
        ));
    }
    key
}

fn selects(selector: &BTreeMap<String, String>, n: &NodeView) -> bool {
    selector.iter().all(|(k, v)| n.labels.get(k) == Some(v))
}

/// The pools of `nodes`. `flavors` are `(name, nodeLabels)` of live ResourceFlavors.
pub fn groups(
    nodes: &[NodeView],
    flavors: &[(String, BTreeMap<String, String>)],
    draft: &mut Draft,
) -> Vec<Group> {
    let gpu: Vec<&NodeView> = nodes.iter().filter(|n| n.product().is_some()).collect();
    let mut taken: BTreeSet<&str> = BTreeSet::new();
    let mut out: Vec<Group> = Vec::new();
    for (name, selector) in flavors {
        if selector.is_empty() {
            continue;
        }
        let picked: Vec<&NodeView> = gpu
            .iter()
            .copied()
            .filter(|n| selects(selector, n))
            .collect();
        if picked.is_empty() || picked.iter().any(|n| taken.contains(n.name.as_str())) {
            continue;
        }
        let keys: BTreeSet<Vec<(String, String)>> = picked.iter().map(|n| group_key(n)).collect();
        if keys.len() > 1 {
            draft.note(
                "GPU300",
                "spec.nodePools",
                format!(
                    "ResourceFlavor `{name}` selects GPU nodes that differ in GPU, partitioning, driver or taints; they are imported as separate pools"
                ),
            );
            continue;
        }
        let non_gpu = nodes
            .iter()
            .filter(|n| n.product().is_none() && selects(selector, n))
            .map(|n| n.name.clone())
            .collect();
        taken.extend(picked.iter().map(|n| n.name.as_str()));
        out.push(Group {
            name: name.clone(),
            selector: selector.clone(),
            nodes: picked.into_iter().cloned().collect(),
            from_flavor: true,
            overlaps: non_gpu,
        });
    }
    let mut rest: BTreeMap<Vec<(String, String)>, Vec<&NodeView>> = BTreeMap::new();
    for n in gpu.iter().filter(|n| !taken.contains(n.name.as_str())) {
        rest.entry(group_key(n)).or_default().push(n);
    }
    let mut used_names: BTreeSet<String> = out.iter().map(|g| g.name.clone()).collect();
    for (_, members) in rest {
        let (selector, overlaps) = smallest_selector(nodes, &members);
        let name = unique(&mut used_names, &pool_name(members[0]));
        out.push(Group {
            name,
            selector,
            nodes: members.into_iter().cloned().collect(),
            from_flavor: false,
            overlaps,
        });
    }
    for g in &mut out {
        g.nodes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out
}

fn unique(used: &mut BTreeSet<String>, base: &str) -> String {
    let mut name = base.to_string();
    let mut i = 2;
    while used.contains(&name) {
        name = format!("{base}-{i}");
        i += 1;
    }
    used.insert(name.clone());
    name
}

/// A pool name from what render wrote on the node (config labels name the pool), a pool label,
/// or the GPU product.
fn pool_name(n: &NodeView) -> String {
    let l = |k: &str| n.labels.get(k).map(String::as_str);
    if let Some(v) = l(MIG_CONFIG_LABEL).filter(|v| *v != "all-disabled" && !v.starts_with("all-"))
    {
        return v.to_string();
    }
    if let Some(v) = l(DEVICE_PLUGIN_CONFIG_LABEL).filter(|v| *v != "cluster-default") {
        return v.to_string();
    }
    if let Some(v) = l("gpuctl.dev/pool") {
        return v.to_string();
    }
    if let Some(v) = l(DRIVER_LABEL).and_then(|v| v.strip_prefix("pool-")) {
        return v.to_string();
    }
    let product = n.product().unwrap_or("gpu");
    let slug = gpuctl_model::names::slug(product.trim_start_matches("NVIDIA-"));
    let slug = slug.trim_matches('-').to_string();
    let slug: String = slug.chars().take(40).collect();
    slug.trim_end_matches('-').to_string()
}

fn selectable(key: &str) -> bool {
    !NOT_SELECTOR.iter().any(|p| key.starts_with(p))
}

/// The smallest set (up to 3 labels) of the labels every member shares that selects exactly the
/// members among `all`; failing that, every shared label, and the nodes it picks besides.
fn smallest_selector(
    all: &[NodeView],
    members: &[&NodeView],
) -> (BTreeMap<String, String>, Vec<String>) {
    let names: BTreeSet<&str> = members.iter().map(|n| n.name.as_str()).collect();
    let mut shared: Vec<(String, String)> = members[0]
        .labels
        .iter()
        .filter(|(k, v)| selectable(k) && members.iter().all(|n| n.labels.get(*k) == Some(v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    shared.sort_by_key(|(k, _)| {
        (
            PREFERRED_SELECTOR_KEYS
                .iter()
                .position(|p| p == k)
                .unwrap_or(PREFERRED_SELECTOR_KEYS.len()),
            k.clone(),
        )
    });
    let exact = |sel: &BTreeMap<String, String>| {
        all.iter()
            .filter(|n| selects(sel, n))
            .all(|n| names.contains(n.name.as_str()))
    };
    let n = shared.len();
    for size in 1..=3.min(n) {
        let mut idx: Vec<usize> = (0..size).collect();
        loop {
            let sel: BTreeMap<String, String> = idx.iter().map(|&i| shared[i].clone()).collect();
            if exact(&sel) {
                return (sel, vec![]);
            }
            // Next combination in lexicographic order.
            let mut i = size;
            while i > 0 && idx[i - 1] == n - size + i - 1 {
                i -= 1;
            }
            if i == 0 {
                break;
            }
            idx[i - 1] += 1;
            for j in i..size {
                idx[j] = idx[j - 1] + 1;
            }
        }
    }
    let mut sel: BTreeMap<String, String> = shared.into_iter().collect();
    if !exact(&sel) {
        // The GPU product tells pools of different GPUs apart where no other label does.
        if let Some(p) = members[0].product() {
            sel.insert(PRODUCT_LABEL.to_string(), p.to_string());
        }
    }
    let extra = all
        .iter()
        .filter(|n| selects(&sel, n) && !names.contains(n.name.as_str()))
        .map(|n| n.name.clone())
        .collect();
    (sel, extra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: Value) -> NodeView {
        NodeView::of(&json!({"metadata": {"name": name, "labels": labels}}))
    }

    #[test]
    fn the_selector_is_the_smallest_label_set_that_picks_exactly_the_pool() {
        let nodes = vec![
            node(
                "a0",
                json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "zone": "z1", "rack": "r1"}),
            ),
            node(
                "a1",
                json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "zone": "z1", "rack": "r1"}),
            ),
            node(
                "b0",
                json!({"nvidia.com/gpu.product": "NVIDIA-L4", "zone": "z1", "rack": "r2"}),
            ),
            node("c0", json!({"zone": "z1", "rack": "r1"})),
        ];
        let mut d = Draft::default();
        let g = groups(&nodes, &[], &mut d);
        assert_eq!(g.len(), 2);
        let h100 = g.iter().find(|g| g.nodes.len() == 2).unwrap();
        // rack=r1 alone also picks the CPU node c0; zone+rack too: only the product tells them apart.
        assert_eq!(
            h100.selector.get(PRODUCT_LABEL).map(String::as_str),
            Some("NVIDIA-H100-80GB-HBM3")
        );
        let l4 = g.iter().find(|g| g.nodes.len() == 1).unwrap();
        assert_eq!(
            l4.selector,
            BTreeMap::from([("rack".to_string(), "r2".to_string())])
        );
        assert_eq!(l4.name, "l4");
    }

    #[test]
    fn a_flavor_that_selects_a_uniform_group_names_the_pool() {
        let nodes = vec![
            node(
                "a0",
                json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "pool": "x"}),
            ),
            node(
                "a1",
                json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "pool": "x"}),
            ),
        ];
        let mut d = Draft::default();
        let flavors = vec![(
            "train".to_string(),
            BTreeMap::from([("pool".to_string(), "x".to_string())]),
        )];
        let g = groups(&nodes, &flavors, &mut d);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].name, "train");
        assert!(g[0].from_flavor);
    }
}
