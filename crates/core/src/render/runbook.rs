//! Runbooks: the GPU failure tables (scheduling, container start, runtime, node and hardware) with
//! this blueprint's pools, resource names, label keys
//! and namespaces filled in (`templates/runbooks/troubleshooting.md.j2`).

use std::collections::BTreeMap;

use serde_json::json;

use super::nodes::PoolPlan;
use super::objects::{LOCAL_QUEUE, limit_range_name, quota_key, quota_name};
use super::{
    DCGM_METRICS_CONFIGMAP, DEVICE_PLUGIN_CONFIGMAP, MIG_PARTED_CONFIGMAP, RenderError, Templates,
};
use crate::blueprint::resources::{is_gpu_resource, per_node};
use crate::blueprint::{Blueprint, PartitionMode, Queueing};
use crate::names::{DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL, TENANT_LABEL};

fn selector_text(m: &BTreeMap<String, String>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The troubleshooting runbook's Markdown.
pub fn troubleshooting(
    bp: &Blueprint,
    plan: &PoolPlan,
    templates: &Templates,
) -> Result<String, RenderError> {
    let pools: Vec<_> = bp
        .spec
        .node_pools
        .iter()
        .zip(&plan.node_patches)
        .map(|(p, patch)| {
            let mode = match p.partitioning.mode {
                PartitionMode::None => "none",
                PartitionMode::Mig => "mig",
                PartitionMode::TimeSlicing => "time-slicing",
                PartitionMode::Mps => "mps",
            };
            json!({
                "name": p.name,
                "role": p.role,
                "model": p.gpu.model,
                "gpus": p.gpu.count,
                "nodes": p.nodes,
                "selector": selector_text(&p.selector),
                "taints": patch.taints.iter().map(|t| match &t.value {
                    Some(v) => format!("{}={v}:{}", t.key, t.effect),
                    None => format!("{}:{}", t.key, t.effect),
                }).collect::<Vec<_>>(),
                "mode": mode,
                "resources": per_node(p),
                "migConfig": patch.labels.get(MIG_CONFIG_LABEL),
                "devicePluginConfig": patch.labels.get(DEVICE_PLUGIN_CONFIG_LABEL),
                "driverCr": patch.labels.get(DRIVER_LABEL),
                "driver": patch.expected_driver,
                "products": patch.expected_products,
            })
        })
        .collect();
    let tenants: Vec<_> = bp
        .spec
        .tenants
        .iter()
        .map(|t| {
            let gpu: BTreeMap<String, &str> = t
                .quota
                .iter()
                .filter(|(k, _)| is_gpu_resource(k.trim_start_matches("requests.")))
                .map(|(k, v)| (quota_key(k), v.0.as_str()))
                .collect();
            json!({
                "name": t.name,
                "namespaces": t.namespaces,
                "queue": t.queue,
                "priorityClass": t.priority_class,
                "gpuQuota": gpu,
                "quotaName": quota_name(&t.name),
                "limitRangeName": limit_range_name(&t.name),
            })
        })
        .collect();
    let queueing = match bp.spec.scheduling.queueing {
        Queueing::Kueue => "kueue",
        Queueing::Volcano => "volcano",
        Queueing::None => "none",
    };
    let ctx = json!({
        "blueprint": bp.metadata.name,
        "operator": {
            "namespace": bp.spec.gpu_operator.namespace,
            "version": bp.spec.gpu_operator.version,
            "driver": bp.spec.gpu_operator.driver.version,
        },
        "queueing": queueing,
        "localQueue": LOCAL_QUEUE,
        "pools": pools,
        "tenants": tenants,
        "resources": super::pool_resources(bp),
        "labels": {
            "migConfig": MIG_CONFIG_LABEL,
            "devicePluginConfig": DEVICE_PLUGIN_CONFIG_LABEL,
            "driver": DRIVER_LABEL,
            "tenant": TENANT_LABEL,
        },
        "configMaps": {
            "mig": (!plan.mig_configs.is_empty()).then_some(MIG_PARTED_CONFIGMAP),
            "devicePlugin": (!plan.device_plugin.is_empty()).then_some(DEVICE_PLUGIN_CONFIGMAP),
            "dcgm": bp.spec.gpu_operator.dcgm_exporter.enabled.then_some(DCGM_METRICS_CONFIGMAP),
        },
        "alerts": bp.spec.monitoring.alerts,
    });
    templates.render("runbooks/troubleshooting.md.j2", ctx)
}
