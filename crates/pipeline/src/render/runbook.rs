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
use gpuctl_model::blueprint::resources::{is_gpu_resource, per_node};
use gpuctl_model::blueprint::{Blueprint, PartitionMode, Queueing};
use gpuctl_model::names::{
    DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL, TENANT_LABEL,
};
use gpuctl_model::profiles::Catalog;

fn selector_text(m: &BTreeMap<String, String>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The troubleshooting runbook's Markdown.
pub fn troubleshooting(
    bp: &Blueprint,
    catalog: &Catalog,
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
        "xid": super::objects::xid_context(catalog.dcgm()),
        "network": network_context(bp),
    });
    templates.render("runbooks/troubleshooting.md.j2", ctx)
}

/// What the runbook's network section needs: each pool with a network, topology levels or a
/// kubelet policy; the fabric kinds present; the RDMA mechanism and the Network Operator's names.
fn network_context(bp: &Blueprint) -> serde_json::Value {
    use gpuctl_model::blueprint::{Fabric, RdmaMechanism, TopologyManagerPolicy};
    let mut infiniband = false;
    let mut roce = false;
    let mut any_rdma = false;
    let mut selectors = Vec::new();
    let pools: Vec<_> = bp
        .spec
        .node_pools
        .iter()
        .filter_map(|p| {
            let t = p.topology.as_ref()?;
            let net = t.network.as_ref();
            let kubelet = t
                .kubelet
                .as_ref()
                .and_then(|k| k.topology_manager_policy)
                .filter(|p| *p != TopologyManagerPolicy::None)
                .map(|p| {
                    serde_json::to_value(p)
                        .ok()
                        .and_then(|v| v.as_str().map(|s| format!("topologyManagerPolicy: {s}")))
                        .unwrap_or_default()
                });
            if net.is_none() && t.levels.is_empty() && kubelet.is_none() {
                return None;
            }
            if let Some(n) = net {
                infiniband |= n.fabric == Fabric::Infiniband;
                roce |= n.fabric == Fabric::Roce;
                any_rdma |= n.gpu_direct_rdma;
                if n.fabric != Fabric::Ethernet {
                    selectors.push(selector_text(&p.selector));
                }
            }
            let numa = t.numa_nodes.unwrap_or(1).max(1);
            Some(json!({
                "name": p.name,
                "selector": selector_text(&p.selector),
                "fabric": net.map(|n| match n.fabric {
                    Fabric::Infiniband => "InfiniBand",
                    Fabric::Roce => "RoCE",
                    Fabric::Ethernet => "Ethernet",
                }).unwrap_or("no declared network"),
                "nics": net.and_then(|n| n.nics_per_node),
                "rdma": net.is_some_and(|n| n.gpu_direct_rdma),
                "mtu": net.and_then(|n| n.mtu),
                "levels": t.levels,
                "kubelet": kubelet,
                "gpusPerNuma": (p.gpu.count / numa).max(1),
            }))
        })
        .collect();
    let mechanism = match bp
        .spec
        .gpu_operator
        .rdma
        .as_ref()
        .map(|r| r.mechanism)
        .unwrap_or_default()
    {
        RdmaMechanism::DmaBuf => "dma-buf",
        RdmaMechanism::NvidiaPeermem => "nvidia-peermem",
    };
    let no = bp.spec.network_operator.as_ref();
    let secondary = no.and_then(|n| n.secondary_network.as_ref());
    json!({
        "pools": pools,
        "infiniband": infiniband,
        "roce": roce,
        "anyRdma": any_rdma,
        "mechanism": mechanism,
        "minKernel": gpuctl_model::profiles::Catalog::embedded().network().gpudirect_rdma.dma_buf.min_kernel,
        "resource": no.map(|n| n.device_plugin.resource()),
        "namespace": no.map(|n| n.namespace.clone()),
        // One selector when a single pool carries the fabric; otherwise all nodes.
        "selector": (selectors.len() == 1).then(|| selectors[0].clone()),
        "secondary": secondary.map(|s| s.name.clone()),
        "secondaryRef": secondary.map(|s| match &s.network_namespace {
            Some(ns) => format!("{ns}/{}", s.name),
            None => format!("default/{}", s.name),
        }),
    })
}
