//! Karpenter NodePools into pools with `provisioner.type: karpenter`: the inverse of the NodePool
//! render writes (crates/pipeline/src/render/provisioning.rs). The template's labels give the
//! selector (`gpuctl.dev/pool` when there, else every label) and the pool's `labels` (labels gpuctl
//! derives itself, under `nvidia.com/` and `gpuctl.dev/`, are left to render); the
//! `node.kubernetes.io/instance-type` requirement gives `instanceTypes` and, through the catalog,
//! the GPU model and count; `spec.limits` in GPUs divided by the GPUs per node gives `maxNodes`;
//! taints, `startupTaints` (the blueprint's `nodeReadiness` key), disruption and `expireAfter` are
//! read back (the training defaults mean `role: training`). What a NodePool holds that a pool does
//! not express is a warning at the field it would belong to.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Draft;
use super::emit::Y;
use gpuctl_model::profiles::Catalog;

/// Render's training budgets: none for busy nodes (`Underutilized`), then (since drift carries
/// driver upgrades, docs/upgrades.md) one for `Drifted`, which an older gpuctl did not write.
fn training_budgets(
    budgets: &Value,
    k: &gpuctl_model::profiles::provisioning::KarpenterFacts,
) -> bool {
    let Some(b) = budgets.as_array() else {
        return false;
    };
    let busy = json!({"nodes": "0", "reasons": [k.underutilized_reason]});
    match b.as_slice() {
        [only] => *only == busy,
        [first, drift] => *first == busy && drift["reasons"] == json!([k.drifted_reason]),
        _ => false,
    }
}

/// The pools read from NodePools, and the readiness key their startup taints carry.
pub(super) struct Imported {
    /// `spec.nodePools` entries, in NodePool name order.
    pub pools: Vec<Y>,
    /// Their names.
    pub names: Vec<String>,
    /// The startup taint's key (`spec.nodeReadiness.taintKey`), when a NodePool has one.
    pub readiness_key: Option<String>,
}

/// The NodePool a node belongs to (`karpenter.sh/nodepool`), from its labels.
pub(super) fn node_pool_of<'a>(
    labels: &'a BTreeMap<String, String>,
    catalog: &Catalog,
) -> Option<&'a str> {
    labels
        .get(&catalog.provisioning().karpenter.nodepool_label)
        .map(String::as_str)
}

fn taint_list(v: &Value) -> Y {
    Y::List(
        v.as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let mut m = vec![("key".to_string(), Y::Scalar(t["key"].clone()))];
                if let Some(v) = t["value"].as_str().filter(|v| !v.is_empty()) {
                    m.push(("value".into(), Y::s(v)));
                }
                m.push(("effect".into(), Y::Scalar(t["effect"].clone())));
                Y::Map(m)
            })
            .collect(),
    )
}

/// `node_pools`: the NodePool objects; `node_counts`: nodes per NodePool name; `index_of`: a
/// pool's index in `spec.nodePools`; `partitioning`: the pool's partitioning read from the
/// template's labels (as a static pool's from its nodes').
pub(super) fn pools(
    node_pools: &[&Value],
    overlays: &[&Value],
    node_counts: &BTreeMap<String, usize>,
    catalog: &Catalog,
    index_of: &dyn Fn(&str) -> usize,
    partitioning: &mut dyn FnMut(&Value, &str, &mut Draft) -> Option<Y>,
    draft: &mut Draft,
) -> Imported {
    let k = &catalog.provisioning().karpenter;
    let mut sorted: Vec<&Value> = node_pools.to_vec();
    sorted.sort_by_key(|n| {
        n["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    let mut out = Imported {
        pools: Vec::new(),
        names: Vec::new(),
        readiness_key: None,
    };
    for np in sorted {
        let name = np["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let p = format!("spec.nodePools[{}]", index_of(&name));
        let t = &np["spec"]["template"];
        let mut m: Vec<(String, Y)> = vec![("name".into(), Y::s(name.clone()))];

        // Training defaults (render's, not Karpenter's): role training.
        let d = &np["spec"]["disruption"];
        let td = &k.training_defaults;
        let training = d["consolidationPolicy"] == td.consolidation_policy.as_str()
            && d["consolidateAfter"] == td.consolidate_after.as_str()
            && training_budgets(&d["budgets"], k)
            && t["spec"]["expireAfter"] == td.expire_after.as_str();
        m.push((
            "role".into(),
            Y::s(if training { "training" } else { "inference" }),
        ));
        if training {
            draft.comment(
                &format!("{p}.role"),
                "the NodePool has gpuctl's training disruption and expiry",
            );
        } else {
            draft.comment(
                &format!("{p}.role"),
                "role is not recorded in the NodePool: check it",
            );
        }

        let (selector, rest) = selector_and_labels(t, &name, &p, draft);
        m.push(("selector".into(), Y::from_json(&json!(selector))));
        draft.comment(
            &format!("{p}.selector"),
            format!("the labels of NodePool `{name}`'s node template"),
        );

        let (types, model, per_node) = instance_types(t, catalog, &name, &p, draft);
        let nodes = node_counts.get(&name).copied().unwrap_or(0) as u64;
        let max = max_nodes(np, per_node, nodes, &name, &p, draft);

        m.push(("nodes".into(), Y::Scalar(json!(nodes.min(max)))));
        m.push((
            "gpu".into(),
            Y::from_json(&json!({"model": model, "count": per_node})),
        ));
        let prov = provisioner(np, training, max, &types, catalog, &name, &p, draft);

        let part = partitioning(&t["metadata"]["labels"], &p, draft);
        if part.is_none()
            && overlays
                .iter()
                .any(|o| o["metadata"]["name"] == name.as_str())
        {
            draft.warn(
                &format!("{p}.partitioning"),
                format!("NodeOverlay `{name}` declares resources for this pool, but its MIG or sharing layout is not recovered (no MIG or device-plugin configuration the NodePool's labels name): set `partitioning` (gpuctl renders the overlay from it)"),
            );
        }
        if let Some(part) = part {
            m.push(("partitioning".into(), part));
        }
        m.push(("provisioner".into(), prov));
        if !rest.is_empty() {
            m.push(("labels".into(), Y::from_json(&json!(rest))));
        }
        if t["spec"]["taints"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            m.push(("taints".into(), taint_list(&t["spec"]["taints"])));
        }
        let startup: Vec<&str> = t["spec"]["startupTaints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["key"].as_str())
            .collect();
        match (startup.as_slice(), &out.readiness_key) {
            ([], _) => {}
            ([key], None) => out.readiness_key = Some(key.to_string()),
            ([key], Some(have)) if have == key => {}
            _ => draft.warn(
                &format!("{p}.provisioner"),
                format!("NodePool `{name}`'s startup taints {startup:?} are not the one readiness key of the other pools; gpuctl renders one key everywhere"),
            ),
        }
        draft.comment(
            &p,
            format!("from Karpenter NodePool `{name}`: {nodes} node(s) now"),
        );
        out.pools.push(Y::Map(m));
        out.names.push(name);
    }
    out
}

/// The instance types a NodePool's template requires, with the GPU model and count the
/// catalog gives the first catalogued one; other requirements are warnings.
fn instance_types(
    t: &Value,
    catalog: &Catalog,
    name: &str,
    p: &str,
    draft: &mut Draft,
) -> (Vec<String>, String, u32) {
    let facts = catalog.provisioning();
    let k = &facts.karpenter;
    let mut types: Vec<String> = Vec::new();
    for r in t["spec"]["requirements"].as_array().into_iter().flatten() {
        let key = r["key"].as_str().unwrap_or_default();
        let op = r["operator"].as_str().unwrap_or_default();
        let values: Vec<String> = r["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if key == k.instance_type_label && op == "In" {
            types.extend(values);
        } else if key == k.capacity_type.label
            && op == "In"
            && values == [k.capacity_type.on_demand.clone()]
        {
            // Render always writes it.
        } else {
            draft.warn(
                &format!("{p}.provisioner.instanceTypes"),
                format!("NodePool `{name}` requires `{key} {op} {values:?}`, which a pool does not express; the first apply drops it"),
            );
        }
    }
    let typed = types.iter().find_map(|t| facts.instance_type(t));
    let (model, per_node) = match typed {
        Some(it) => (it.gpu.clone(), it.gpus),
        None => {
            draft.warn(
                &format!("{p}.gpu"),
                format!("none of NodePool `{name}`'s instance types {types:?} is in gpuctl's catalog (profiles/provisioning.yaml): name the GPU model and count"),
            );
            ("unknown".to_string(), 1)
        }
    };
    (types, model, per_node)
}

/// `maxNodes`: the NodePool's `nvidia.com/gpu` limit in nodes of `per_node` GPUs.
fn max_nodes(np: &Value, per_node: u32, nodes: u64, name: &str, p: &str, draft: &mut Draft) -> u64 {
    let limit = np["spec"]["limits"][gpuctl_model::blueprint::resources::GPU]
        .as_str()
        .and_then(|s| gpuctl_model::quantity::parse_count(s).ok())
        .or_else(|| np["spec"]["limits"]["nvidia.com/gpu"].as_u64());
    match limit {
        Some(l) => {
            if l % u64::from(per_node.max(1)) != 0 {
                draft.warn(
                    &format!("{p}.provisioner.maxNodes"),
                    format!("NodePool `{name}` limits `nvidia.com/gpu` to {l}, not a multiple of {per_node} per node; maxNodes is rounded down and the first apply lowers the limit"),
                );
            }
            l / u64::from(per_node.max(1))
        }
        None => {
            draft.warn(
                &format!("{p}.provisioner.maxNodes"),
                format!("NodePool `{name}` has no `nvidia.com/gpu` limit; maxNodes is the {nodes} node(s) it has, and the first apply sets the limit"),
            );
            nodes.max(1)
        }
    }
}

/// `provisioner:` of a NodePool: platform and NodeClass, bounds, instance types, driver
/// ownership, and (not training) its disruption and expiry.
#[allow(clippy::too_many_arguments)]
fn provisioner(
    np: &Value,
    training: bool,
    max: u64,
    types: &[String],
    catalog: &Catalog,
    name: &str,
    p: &str,
    draft: &mut Draft,
) -> Y {
    let facts = catalog.provisioning();
    let k = &facts.karpenter;
    let t = &np["spec"]["template"];
    let d = &np["spec"]["disruption"];
    let mut prov: Vec<(String, Y)> = vec![("type".into(), Y::s("karpenter"))];
    let class = &t["spec"]["nodeClassRef"];
    let platform = k
        .node_classes
        .iter()
        .find(|(_, c)| class["group"] == c.group.as_str() && class["kind"] == c.kind.as_str())
        .map(|(p, _)| p.clone());
    match &platform {
        Some(pl) => prov.push(("platform".into(), Y::s(pl.clone()))),
        None => draft.warn(
            &format!("{p}.provisioner.platform"),
            format!(
                "NodePool `{name}`'s NodeClass kind `{}` is not one gpuctl knows",
                class["kind"]
            ),
        ),
    }
    if let Some(c) = class["name"].as_str() {
        prov.push(("nodeClass".into(), Y::s(c)));
    }
    prov.push(("minNodes".into(), Y::Scalar(json!(0))));
    prov.push(("maxNodes".into(), Y::Scalar(json!(max))));
    prov.push((
        "instanceTypes".into(),
        Y::List(types.iter().map(|t| Y::s(t.clone())).collect()),
    ));
    draft.comment(
        &format!("{p}.provisioner.minNodes"),
        "Karpenter keeps no minimum; maxNodes from the NodePool's `nvidia.com/gpu` limit",
    );
    // Driver ownership: the operand switch render writes for `host`.
    let host_label = t["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] == "false";
    let default_host = platform
        .as_deref()
        .and_then(|pl| facts.platform_driver(pl))
        .is_some_and(|d| d.default == "host");
    if host_label != default_host {
        prov.push((
            "driver".into(),
            Y::s(if host_label { "host" } else { "operator" }),
        ));
    }
    if !training {
        if d.is_object() && d.as_object().is_some_and(|o| !o.is_empty()) {
            let mut dm: Vec<(String, Y)> = Vec::new();
            for key in ["consolidationPolicy", "consolidateAfter", "budgets"] {
                if !d[key].is_null() {
                    dm.push((key.into(), Y::from_json(&d[key])));
                }
            }
            prov.push(("disruption".into(), Y::Map(dm)));
        }
        if let Some(e) = t["spec"]["expireAfter"].as_str() {
            prov.push(("expireAfter".into(), Y::s(e)));
        }
    }
    Y::Map(prov)
}

/// A NodePool template's labels as a pool's `selector` and `labels` (labels gpuctl derives
/// itself are left to render).
fn selector_and_labels(
    t: &Value,
    name: &str,
    p: &str,
    draft: &mut Draft,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let labels: BTreeMap<String, String> = t["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    let derived = |key: &str| {
        key != "gpuctl.dev/pool"
            && (key.starts_with("nvidia.com/") || key.starts_with("gpuctl.dev/"))
    };
    let own: BTreeMap<String, String> = labels
        .into_iter()
        .filter(|(key, _)| !derived(key))
        .collect();
    let selector: BTreeMap<String, String> = match own.get("gpuctl.dev/pool") {
        Some(v) => BTreeMap::from([("gpuctl.dev/pool".to_string(), v.clone())]),
        None if !own.is_empty() => own.clone(),
        None => {
            draft.warn(
                &format!("{p}.selector"),
                format!("NodePool `{name}` gives its nodes no label of their own; the pool selects `gpuctl.dev/pool: {name}`, which the first apply adds to the NodePool's template"),
            );
            BTreeMap::from([("gpuctl.dev/pool".to_string(), name.to_string())])
        }
    };
    let rest: BTreeMap<String, String> = own
        .clone()
        .into_iter()
        .filter(|(key, _)| !selector.contains_key(key))
        .collect();
    (selector, rest)
}
