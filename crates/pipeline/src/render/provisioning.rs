//! Provisioned pools: Karpenter NodePools and the NodeOverlays that declare a pool's MIG or shared
//! resources for scale from zero, the NodeReadinessRule that removes the GPU startup taint, the
//! Cluster API MachineDeployment annotations the Cluster Autoscaler reads at zero, and for managed
//! node groups the settings they must have (documents; gpuctl renders nothing for the group).
//! Names come from `profiles/provisioning.yaml`. docs/node-pools.md.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::nodes::{PoolPlan, effect_name};
use super::{Builder, NodeTaint, Phase, RenderError};

use gpuctl_model::blueprint::provisioning::{ProvisionerKind, ReadinessSignal};
use gpuctl_model::blueprint::resources::{GPU, per_node};
use gpuctl_model::blueprint::{Blueprint, NodePool, Role};
use gpuctl_model::profiles::Catalog;
use gpuctl_model::profiles::provisioning::ProvisioningFacts;

/// The readiness taint every gated pool's nodes start with (`None` without `nodeReadiness`).
pub fn readiness_taint(bp: &Blueprint, catalog: &Catalog) -> Option<NodeTaint> {
    let (key, value) = catalog.provisioning().readiness_taint(bp)?;
    Some(NodeTaint {
        key,
        value: Some(value),
        effect: "NoSchedule".to_string(),
    })
}

fn taint_value(t: &NodeTaint) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("key".into(), json!(t.key));
    if let Some(v) = &t.value {
        m.insert("value".into(), json!(v));
    }
    m.insert("effect".into(), json!(t.effect));
    Value::Object(m)
}

fn pool_taints(pool: &NodePool) -> Vec<NodeTaint> {
    pool.taints
        .iter()
        .map(|t| NodeTaint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: effect_name(t.effect).to_string(),
        })
        .collect()
}

/// Resources a pool's nodes advertise that no provider infers from the instance type: MIG
/// profiles and renamed shared GPUs (a NodeOverlay may only add resources, never replace
/// `nvidia.com/gpu`).
pub fn overlay_resources(pool: &NodePool) -> BTreeMap<String, u64> {
    let mut r = per_node(pool);
    r.remove(GPU);
    r
}

/// NodePools, NodeOverlays and the NodeReadinessRule.
pub(crate) fn objects(
    bp: &Blueprint,
    catalog: &Catalog,
    plan: &PoolPlan,
    out: &mut Builder<'_>,
) -> Result<(), RenderError> {
    let facts = catalog.provisioning();
    let readiness = readiness_taint(bp, catalog);
    for pool in &bp.spec.node_pools {
        if pool.provisioner.kind != ProvisionerKind::Karpenter {
            continue;
        }
        let labels = plan
            .node_patches
            .iter()
            .find(|p| p.pool == pool.name)
            .map(|p| {
                let mut l = p.selector.clone();
                l.extend(p.labels.clone());
                l
            })
            .unwrap_or_default();
        out.push(
            Phase::Operator,
            "karpenter/nodepool",
            format!("spec.nodePools[{}]", pool.name),
            node_pool(bp, pool, facts, &labels, readiness.as_ref()),
        )?;
        let extra = overlay_resources(pool);
        if pool.provisioner.node_overlay != Some(false) && !extra.is_empty() {
            out.push(
                Phase::Operator,
                "karpenter/nodeoverlay",
                format!("spec.nodePools[{}]", pool.name),
                node_overlay(pool, facts, &extra),
            )?;
        }
    }
    if let (Some(r), Some(t)) = (&bp.spec.node_readiness, &readiness)
        && r.signal == ReadinessSignal::NodeReadinessController
        && bp.spec.node_pools.iter().any(|p| p.provisioner.scales())
    {
        out.push(
            Phase::Operator,
            "readiness/nodereadinessrule",
            "spec.nodeReadiness".to_string(),
            readiness_rule(catalog, t),
        )?;
    }
    Ok(())
}

/// `spec.disruption` of a pool's NodePool (`None`: Karpenter's defaults). A training pool
/// without settings of its own consolidates only empty nodes, never an underutilized one, and
/// lets drift (a driver upgrade changes the template: docs/upgrades.md) replace at most
/// `upgrades.blueGreen.batch` nodes at once.
fn disruption(bp: &Blueprint, pool: &NodePool, facts: &ProvisioningFacts) -> Option<Value> {
    let k = &facts.karpenter;
    match &pool.provisioner.disruption {
        Some(d) => {
            let mut m = serde_json::Map::new();
            if let Some(v) = &d.consolidation_policy {
                m.insert("consolidationPolicy".into(), json!(v));
            }
            if let Some(v) = &d.consolidate_after {
                m.insert("consolidateAfter".into(), json!(v));
            }
            if !d.budgets.is_empty() {
                m.insert(
                    "budgets".into(),
                    serde_json::to_value(&d.budgets).unwrap_or_default(),
                );
            }
            Some(Value::Object(m))
        }
        None if pool.role == Role::Training => Some(json!({
            "consolidationPolicy": k.training_defaults.consolidation_policy,
            "consolidateAfter": k.training_defaults.consolidate_after,
            "budgets": [
                {"nodes": "0", "reasons": [k.underutilized_reason]},
                {"nodes": upgrade_batch(bp), "reasons": [k.drifted_reason]},
            ],
        })),
        None => None,
    }
}

/// `upgrades.blueGreen.batch` as written (its default when unset).
fn upgrade_batch(bp: &Blueprint) -> String {
    bp.spec.upgrades.blue_green.as_ref().map_or_else(
        || gpuctl_model::blueprint::BlueGreen::default_batch().to_string(),
        |b| b.batch.to_string(),
    )
}

/// The `nodes` of the NodePool's budgets that bound Karpenter's drift of `pool` (always active:
/// no `schedule`), Karpenter's default budget when the NodePool declares none. Empty: nothing
/// bounds how many of the pool's nodes drift replaces at once.
pub fn drift_budgets(bp: &Blueprint, pool: &NodePool, catalog: &Catalog) -> Vec<String> {
    let k = &catalog.provisioning().karpenter;
    let d = disruption(bp, pool, catalog.provisioning());
    let Some(budgets) = d.as_ref().and_then(|d| d["budgets"].as_array()) else {
        return vec![k.default_budget.clone()];
    };
    budgets
        .iter()
        .filter(|b| b.get("schedule").is_none())
        .filter(|b| {
            b["reasons"].as_array().is_none_or(|r| {
                r.is_empty()
                    || r.iter()
                        .any(|r| r.as_str() == Some(k.drifted_reason.as_str()))
            })
        })
        .filter_map(|b| b["nodes"].as_str().map(str::to_string))
        .collect()
}

/// The Karpenter NodePool of a pool.
fn node_pool(
    bp: &Blueprint,
    pool: &NodePool,
    facts: &ProvisioningFacts,
    labels: &BTreeMap<String, String>,
    readiness: Option<&NodeTaint>,
) -> Value {
    let k = &facts.karpenter;
    let p = &pool.provisioner;
    let class = p
        .platform
        .and_then(|pl| k.node_classes.get(pl.as_str()))
        .map(|c| json!({"group": c.group, "kind": c.kind, "name": p.node_class.clone().unwrap_or_default()}))
        .unwrap_or(Value::Null);
    let mut requirements = vec![json!({
        "key": k.instance_type_label,
        "operator": "In",
        "values": p.instance_types,
    })];
    // Karpenter picks the cheapest offering: without this a GPU pool may come up on spot.
    requirements.push(
        json!({"key": k.capacity_type.label, "operator": "In", "values": [k.capacity_type.on_demand]}),
    );
    let mut spec = json!({
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "nodeClassRef": class,
                "requirements": requirements,
            }
        },
    });
    let template = spec
        .pointer_mut("/template/spec")
        .and_then(Value::as_object_mut)
        .expect("built above");
    let taints: Vec<Value> = pool_taints(pool).iter().map(taint_value).collect();
    if !taints.is_empty() {
        template.insert("taints".into(), json!(taints));
    }
    if let Some(t) = readiness {
        template.insert("startupTaints".into(), json!([taint_value(t)]));
    }
    let training = pool.role == Role::Training;
    let expire = p
        .expire_after
        .clone()
        .or_else(|| training.then(|| k.training_defaults.expire_after.clone()));
    if let Some(e) = expire {
        template.insert("expireAfter".into(), json!(e));
    }
    // Limits in GPUs: the most the pool may reach.
    let gpus = u64::from(pool.gpu.count) * u64::from(pool.max_nodes());
    spec["limits"] = json!({ GPU: gpus.to_string() });
    let disruption = disruption(bp, pool, facts);
    if let Some(d) = disruption
        && d.as_object().is_some_and(|m| !m.is_empty())
    {
        spec["disruption"] = d;
    }
    json!({
        "apiVersion": k.nodepool_api,
        "kind": "NodePool",
        "metadata": {"name": pool.name},
        "spec": spec,
    })
}

/// The NodeOverlay that declares a pool's MIG or shared resources on its instance types, only
/// for this NodePool.
fn node_overlay(
    pool: &NodePool,
    facts: &ProvisioningFacts,
    extra: &BTreeMap<String, u64>,
) -> Value {
    let k = &facts.karpenter;
    let capacity: BTreeMap<&String, String> =
        extra.iter().map(|(r, n)| (r, n.to_string())).collect();
    json!({
        "apiVersion": k.nodeoverlay_api,
        "kind": "NodeOverlay",
        "metadata": {"name": pool.name},
        "spec": {
            "requirements": [
                {"key": k.nodepool_label, "operator": "In", "values": [pool.name]},
                {"key": k.instance_type_label, "operator": "In", "values": pool.provisioner.instance_types},
            ],
            "capacity": capacity,
        },
    })
}

/// The Node Readiness Controller's rule: taint the gated pools' nodes until Node Problem
/// Detector reports the GPU condition, once per node.
fn readiness_rule(catalog: &Catalog, t: &NodeTaint) -> Value {
    let r = &catalog.provisioning().readiness;
    json!({
        "apiVersion": r.rule_api,
        "kind": "NodeReadinessRule",
        "metadata": {"name": "nvidia-gpu-readiness"},
        "spec": {
            "conditions": [{"type": r.condition, "requiredStatus": "True"}],
            "enforcementMode": r.enforcement_mode,
            "taint": taint_value(t),
            "nodeSelector": {"matchLabels": {gpuctl_model::names::READINESS_GATED_LABEL: "gated"}},
        },
    })
}

/// Documents: the Cluster API annotations per clusterAPI pool, the settings of managed node
/// groups.
pub(crate) fn documents(
    bp: &Blueprint,
    catalog: &Catalog,
    plan: &PoolPlan,
    docs: &mut BTreeMap<String, String>,
) {
    let readiness = readiness_taint(bp, catalog);
    for pool in &bp.spec.node_pools {
        let mut labels = pool.selector.clone();
        if let Some(p) = plan.node_patches.iter().find(|p| p.pool == pool.name) {
            labels.extend(p.labels.clone());
        }
        match pool.provisioner.kind {
            ProvisionerKind::ClusterApi => {
                if let Some((name, text)) =
                    cluster_api_document(pool, catalog, &labels, readiness.as_ref())
                {
                    docs.insert(name, text);
                }
            }
            ProvisionerKind::Managed => {
                docs.insert(
                    format!("managed/{}.md", pool.name),
                    managed_document(pool, catalog, &labels),
                );
            }
            _ => {}
        }
    }
}

fn taint_text(t: &NodeTaint) -> String {
    format!(
        "{}={}:{}",
        t.key,
        t.value.clone().unwrap_or_default(),
        t.effect
    )
}

/// The MachineDeployment annotations the Cluster Autoscaler reads for a clusterAPI pool.
fn cluster_api_document(
    pool: &NodePool,
    catalog: &Catalog,
    labels: &BTreeMap<String, String>,
    readiness: Option<&NodeTaint>,
) -> Option<(String, String)> {
    let md = pool.provisioner.machine_deployment.as_ref()?;
    let c = &catalog.provisioning().cluster_api;
    let mut ann = BTreeMap::new();
    ann.insert(
        c.min_size.clone(),
        pool.provisioner.min_nodes.unwrap_or(0).to_string(),
    );
    ann.insert(c.max_size.clone(), pool.max_nodes().to_string());
    let res = per_node(pool);
    let (gpu_type, count) = match res.iter().find(|(k, _)| k.as_str() != GPU) {
        Some((k, n)) => (k.clone(), *n),
        None => (GPU.to_string(), res.get(GPU).copied().unwrap_or(0)),
    };
    ann.insert(format!("{}gpu-type", c.capacity_prefix), gpu_type);
    ann.insert(format!("{}gpu-count", c.capacity_prefix), count.to_string());
    let mut l = labels.clone();
    l.insert(c.gpu_label.clone(), pool.gpu.model.clone());
    ann.insert(
        format!("{}labels", c.capacity_prefix),
        l.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    );
    let mut taints = pool_taints(pool);
    taints.extend(readiness.cloned());
    if !taints.is_empty() {
        ann.insert(
            format!("{}taints", c.capacity_prefix),
            taints.iter().map(taint_text).collect::<Vec<_>>().join(","),
        );
    }
    let doc = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "MachineDeployment",
        "metadata": {"name": md.name, "namespace": md.namespace, "annotations": ann},
    });
    Some((
        format!("cluster-api/{}.yaml", pool.name),
        format!(
            "# Merge into MachineDeployment {}/{} (pool `{}`): the Cluster Autoscaler's node-group bounds and\n# scale-from-zero template (cluster-autoscaler clusterapi provider). Nodes must carry the same labels and taints\n# at registration (kubelet --node-labels / --register-with-taints).\n{}",
            md.namespace,
            md.name,
            pool.name,
            serde_saphyr::to_string(&doc).unwrap_or_default()
        ),
    ))
}

/// What a managed node group must have (gpuctl renders nothing for it).
fn managed_document(
    pool: &NodePool,
    catalog: &Catalog,
    labels: &BTreeMap<String, String>,
) -> String {
    let facts = catalog.provisioning();
    let pl = pool.provisioner.platform.map_or("", |p| p.as_str());
    let owner = facts.driver_owner(pool);
    let mut text = format!(
        "# Managed node group for pool `{}` ({pl})\n\ngpuctl renders nothing for the group itself. It must have:\n\n- size: min {}, max {}\n- instance types: {}\n- node labels: {}\n",
        pool.name,
        pool.provisioner.min_nodes.unwrap_or(0),
        pool.max_nodes(),
        pool.provisioner.instance_types.join(", "),
        labels
            .iter()
            .map(|(k, v)| format!("`{k}={v}`"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let taints = pool_taints(pool);
    if !taints.is_empty() {
        text.push_str(&format!(
            "- taints: {}\n",
            taints
                .iter()
                .map(|t| format!("`{}`", taint_text(t)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    text.push_str(&format!(
        "- driver: {} ({})\n",
        owner.as_str(),
        facts.platform_driver(pl).map_or("", |r| r.why.as_str())
    ));
    let extra = overlay_resources(pool);
    if pool.provisioner.can_reach_zero() && !extra.is_empty() {
        text.push_str(&format!(
            "- scale-from-zero resources on the group's template: {}\n",
            extra
                .iter()
                .map(|(k, v)| format!("`{k}: {v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    text
}
