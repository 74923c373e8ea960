//! Cluster objects other than the operator's: namespaces, PriorityClasses, per-tenant quotas and
//! defaults, Kueue and Volcano queues, and monitoring.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::json;

use super::helm::{dcgm_interval_ms, prometheus_duration};
use super::nodes::Toleration;
use super::{Builder, DCGM_METRICS_CONFIGMAP, Phase, RenderError};
use gpuctl_model::blueprint::resources::is_extended_resource;
use gpuctl_model::blueprint::{Blueprint, ClusterQueue, Quantity, Queueing, Tenant};
use gpuctl_model::names::TENANT_LABEL;
use gpuctl_model::profiles::Catalog;
use gpuctl_model::profiles::dcgm::{DcgmFacts, XidResponse};

/// Name of the LocalQueue gpuctl makes in every tenant namespace (Kueue uses a LocalQueue named
/// `default` for workloads without a queue-name label).
pub const LOCAL_QUEUE: &str = "default";

/// The ResourceQuota key gpuctl writes for a tenant quota key: extended resources by bare name
/// become `requests.<name>`, the only form the API server enforces for them.
pub fn quota_key(key: &str) -> String {
    let catalog = gpuctl_model::profiles::Catalog::embedded();
    // Object counts (`count/pods`) and DRA device-class keys have a '/' but are no extended
    // resources: `requests.` in front of them is accepted by the API server and never enforced.
    let as_written = key.starts_with(&catalog.limits().resource_quota.object_count_prefix)
        || catalog.dra().kubernetes.quota.class_of_key(key).is_some();
    if as_written
        || key.starts_with("requests.")
        || key.starts_with("limits.")
        || !is_extended_resource(key)
    {
        key.to_string()
    } else {
        format!("requests.{key}")
    }
}

pub use gpuctl_model::names::quota_name;

/// Name of a tenant's LimitRange in each of its namespaces.
pub fn limit_range_name(tenant: &str) -> String {
    format!("{tenant}-defaults")
}

/// `amounts` in Kubernetes' canonical form: what the API server stores for a ResourceQuota or
/// LimitRange and Kueue's webhooks write for a queue it creates (`1000` becomes `1k`), so the
/// live object reads back as rendered and a plan finds nothing to change.
fn canonical(amounts: &BTreeMap<String, Quantity>) -> BTreeMap<String, Quantity> {
    amounts
        .iter()
        .map(|(k, v)| (k.clone(), canonical_one(v)))
        .collect()
}

/// One amount in canonical form (as written when it is not a quantity: validation says so).
fn canonical_one(q: &Quantity) -> Quantity {
    Quantity(gpuctl_model::quantity::canonical(&q.0))
}

/// A tenant with its quota and defaults in canonical form (the templates read both).
fn canonical_tenant(t: &Tenant) -> Tenant {
    Tenant {
        quota: canonical(&t.quota),
        defaults: canonical(&t.defaults),
        ..t.clone()
    }
}

fn volcano_queue_of(bp: &Blueprint, t: &Tenant) -> Option<String> {
    (bp.spec.scheduling.queueing == Queueing::Volcano)
        .then(|| t.queue.clone())
        .flatten()
}

/// Namespaces and PriorityClasses.
pub fn foundation(bp: &Blueprint, out: &mut Builder<'_>) -> Result<(), RenderError> {
    out.object(
        Phase::Foundation,
        "objects/operator-namespace.yaml.j2",
        "spec.gpuOperator.namespace".to_string(),
        json!({ "namespace": bp.spec.gpu_operator.namespace }),
    )?;
    for (ti, t) in bp.spec.tenants.iter().enumerate() {
        for ns in &t.namespaces {
            out.object(
                Phase::Foundation,
                "objects/tenant-namespace.yaml.j2",
                format!("spec.tenants[{ti}].namespaces"),
                json!({
                    "tenant": t,
                    "namespace": ns,
                    "tenantLabel": TENANT_LABEL,
                    "volcanoQueue": volcano_queue_of(bp, t),
                }),
            )?;
        }
    }
    for (i, pc) in bp.spec.priority_classes.iter().enumerate() {
        out.object(
            Phase::Foundation,
            "objects/priorityclass.yaml.j2",
            format!("spec.priorityClasses[{i}]"),
            json!({ "priorityClass": pc }),
        )?;
    }
    Ok(())
}

/// ResourceQuota and LimitRange in every tenant namespace.
pub fn tenants(bp: &Blueprint, out: &mut Builder<'_>) -> Result<(), RenderError> {
    for (ti, t) in bp.spec.tenants.iter().enumerate() {
        let t = &canonical_tenant(t);
        let hard: BTreeMap<String, &str> = t
            .quota
            .iter()
            .map(|(k, v)| (quota_key(k), v.0.as_str()))
            .collect();
        for ns in &t.namespaces {
            if !hard.is_empty() {
                out.object(
                    Phase::Quotas,
                    "objects/resourcequota.yaml.j2",
                    format!("spec.tenants[{ti}].quota"),
                    json!({ "tenant": t, "namespace": ns, "name": quota_name(&t.name), "hard": hard }),
                )?;
            }
            if !t.defaults.is_empty() {
                out.object(
                    Phase::Quotas,
                    "objects/limitrange.yaml.j2",
                    format!("spec.tenants[{ti}].defaults"),
                    json!({ "tenant": t, "namespace": ns, "name": limit_range_name(&t.name) }),
                )?;
            }
        }
    }
    Ok(())
}

/// One resource of a flavor in a ClusterQueue resource group.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FlavorResource {
    name: String,
    nominal_quota: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    borrowing_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lending_limit: Option<String>,
}

#[derive(Debug, Serialize)]
struct GroupFlavor {
    name: String,
    resources: Vec<FlavorResource>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceGroup {
    covered_resources: Vec<String>,
    flavors: Vec<GroupFlavor>,
}

/// A ClusterQueue's resource groups: flavors that quota the same resources share a group, in the
/// blueprint's flavor order (Kueue tries flavors in list order); resources sorted by name.
fn resource_groups(cq: &ClusterQueue) -> Vec<ResourceGroup> {
    let mut groups: Vec<ResourceGroup> = Vec::new();
    for r in &cq.resources {
        let covered: Vec<String> = r.quota.keys().cloned().collect();
        let flavor = GroupFlavor {
            name: r.pool.clone(),
            resources: r
                .quota
                .iter()
                .map(|(name, q)| FlavorResource {
                    name: name.clone(),
                    nominal_quota: canonical_one(q).0,
                    borrowing_limit: r.borrowing_limit.get(name).map(|q| canonical_one(q).0),
                    lending_limit: r.lending_limit.get(name).map(|q| canonical_one(q).0),
                })
                .collect(),
        };
        match groups.iter_mut().find(|g| g.covered_resources == covered) {
            Some(g) => g.flavors.push(flavor),
            None => groups.push(ResourceGroup {
                covered_resources: covered,
                flavors: vec![flavor],
            }),
        }
    }
    groups
}

/// Kueue or Volcano objects, per `scheduling.queueing`.
/// Each is written in the API version its declared release serves (`profiles/queueing.yaml`);
/// a release gpuctl cannot write for is refused (validation reports it first, GPU076 / GPU084).
pub fn queues(bp: &Blueprint, catalog: &Catalog, out: &mut Builder<'_>) -> Result<(), RenderError> {
    let q = catalog.queueing();
    let api = |system: &gpuctl_model::profiles::QueueSystem, version: &str| {
        system
            .renderable(version)
            .map_err(|p| RenderError::QueueRelease {
                message: p.message(system),
                hint: p.hint(system),
            })
    };
    match bp.spec.scheduling.queueing {
        Queueing::Kueue => match &bp.spec.scheduling.kueue {
            Some(k) => kueue(bp, k, &api(&q.kueue, &k.version)?, out),
            None => Ok(()),
        },
        Queueing::Volcano => match &bp.spec.scheduling.volcano {
            Some(v) => volcano(v, &api(&q.volcano, &v.version)?, out),
            None => Ok(()),
        },
        Queueing::None => Ok(()),
    }
}

fn kueue(
    bp: &Blueprint,
    k: &gpuctl_model::blueprint::Kueue,
    api: &str,
    out: &mut Builder<'_>,
) -> Result<(), RenderError> {
    let mut flavors: Vec<&str> = Vec::new();
    for cq in &k.cluster_queues {
        for r in &cq.resources {
            if !flavors.contains(&r.pool.as_str()) {
                flavors.push(&r.pool);
            }
        }
    }
    for (pi, pool) in bp.spec.node_pools.iter().enumerate() {
        if !flavors.contains(&pool.name.as_str()) {
            continue;
        }
        let tolerations: Vec<Toleration> = pool.taints.iter().map(Toleration::exact).collect();
        let levels: &[String] = pool
            .topology
            .as_ref()
            .map_or(&[][..], |t| t.levels.as_slice());
        let topology = (!levels.is_empty()).then(|| pool.name.clone());
        out.object(
            Phase::Queues,
            "objects/kueue-resourceflavor.yaml.j2",
            format!("spec.nodePools[{pi}]"),
            json!({ "apiVersion": api, "pool": pool, "tolerations": tolerations, "topologyName": topology }),
        )?;
        if topology.is_some() {
            out.object(
                Phase::Queues,
                "objects/kueue-topology.yaml.j2",
                format!("spec.nodePools[{pi}].topology.levels"),
                json!({ "apiVersion": api, "name": pool.name, "levels": levels }),
            )?;
        }
    }
    for (i, c) in k.cohorts.iter().enumerate() {
        let c = &gpuctl_model::blueprint::Cohort {
            fair_sharing_weight: c.fair_sharing_weight.as_ref().map(canonical_one),
            ..c.clone()
        };
        out.object(
            Phase::Queues,
            "objects/kueue-cohort.yaml.j2",
            format!("spec.scheduling.kueue.cohorts[{i}]"),
            json!({ "apiVersion": api, "cohort": c }),
        )?;
    }
    for (i, cq) in k.cluster_queues.iter().enumerate() {
        let tenants: Vec<&str> = bp
            .spec
            .tenants
            .iter()
            .filter(|t| t.queue.as_deref() == Some(cq.name.as_str()))
            .map(|t| t.name.as_str())
            .collect();
        let cq = &ClusterQueue {
            fair_sharing_weight: cq.fair_sharing_weight.as_ref().map(canonical_one),
            ..cq.clone()
        };
        out.object(
            Phase::Queues,
            "objects/kueue-clusterqueue.yaml.j2",
            format!("spec.scheduling.kueue.clusterQueues[{i}]"),
            json!({
                "apiVersion": api,
                "clusterQueue": cq,
                "tenants": tenants,
                "tenantLabel": TENANT_LABEL,
                "resourceGroups": resource_groups(cq),
            }),
        )?;
    }
    for (ti, t) in bp.spec.tenants.iter().enumerate() {
        let Some(q) = &t.queue else { continue };
        for ns in &t.namespaces {
            out.object(
                Phase::Queues,
                "objects/kueue-localqueue.yaml.j2",
                format!("spec.tenants[{ti}].queue"),
                json!({ "apiVersion": api, "tenant": t, "namespace": ns, "name": LOCAL_QUEUE, "clusterQueue": q }),
            )?;
        }
    }
    for (i, pc) in bp.spec.priority_classes.iter().enumerate() {
        out.object(
            Phase::Queues,
            "objects/kueue-workloadpriorityclass.yaml.j2",
            format!("spec.priorityClasses[{i}]"),
            json!({ "apiVersion": api, "priorityClass": pc }),
        )?;
    }
    Ok(())
}

fn volcano(
    v: &gpuctl_model::blueprint::Volcano,
    api: &str,
    out: &mut Builder<'_>,
) -> Result<(), RenderError> {
    for (i, q) in v.queues.iter().enumerate() {
        let q = &gpuctl_model::blueprint::VolcanoQueue {
            capability: canonical(&q.capability),
            deserved: canonical(&q.deserved),
            guarantee: canonical(&q.guarantee),
            ..q.clone()
        };
        out.object(
            Phase::Queues,
            "objects/volcano-queue.yaml.j2",
            format!("spec.scheduling.volcano.queues[{i}]"),
            json!({ "apiVersion": api, "queue": q }),
        )?;
    }
    Ok(())
}

/// dcgm-exporter metrics ConfigMap, ServiceMonitor and PrometheusRule (when dcgm-exporter runs).
/// Metric and label names and the Xid classes come from the catalog (`profiles/dcgm.yaml`), the facts
/// `gpuctl doctor` reads too.
pub fn monitoring(
    bp: &Blueprint,
    catalog: &Catalog,
    out: &mut Builder<'_>,
) -> Result<(), RenderError> {
    let dcgm = &bp.spec.gpu_operator.dcgm_exporter;
    if !dcgm.enabled {
        return Ok(());
    }
    let ns = &bp.spec.gpu_operator.namespace;
    let alerts = &bp.spec.monitoring.alerts;
    let facts = catalog.dcgm();
    let metrics = &facts.exporter.metrics;
    let csv = out.templates().render(
        "config/dcgm-metrics.csv.j2",
        json!({ "alerts": alerts, "m": metrics }),
    )?;
    out.object(
        Phase::Monitoring,
        "objects/configmap.yaml.j2",
        "spec.monitoring".to_string(),
        json!({
            "name": DCGM_METRICS_CONFIGMAP,
            "namespace": ns,
            "component": "dcgm-exporter",
            "data": { "dcgm-metrics.csv": csv },
        }),
    )?;
    if bp.spec.monitoring.service_monitor || dcgm.service_monitor {
        out.object(
            Phase::Monitoring,
            "objects/servicemonitor.yaml.j2",
            "spec.monitoring.serviceMonitor".to_string(),
            json!({
                "namespace": ns,
                "interval": prometheus_duration(dcgm_interval_ms(bp)),
            }),
        )?;
    }
    if alerts.xid || alerts.ecc_errors || alerts.temperature_c.is_some() {
        out.object(
            Phase::Monitoring,
            "objects/prometheusrule.yaml.j2",
            "spec.monitoring.alerts".to_string(),
            json!({
                "namespace": ns,
                "alerts": alerts,
                "blueprint": bp.metadata.name,
                "m": metrics,
                "l": facts.exporter.labels,
                "t": facts.thresholds,
                "xid": xid_context(facts),
            }),
        )?;
    }
    Ok(())
}

/// The Xid lists the rendered alerts and the troubleshooting runbook read, each from the catalog's
/// immediate action ([`XidResponse`], the same mapping the doctor's findings follow), and what a
/// recurring IGNORE Xid asks for.
pub(crate) fn xid_context(facts: &DcgmFacts) -> serde_json::Value {
    let x = &facts.xid;
    let labels = &facts.exporter.labels;
    // IGNORE Xids by their investigatory action (what the catalog asks for when they recur).
    let mut recurring: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for xid in x.with_response(XidResponse::Ignore) {
        if let Some(c) = x.code(xid) {
            recurring
                .entry(c.investigatory.as_str().to_owned())
                .or_default()
                .push(xid);
        }
    }
    let recurring: Vec<_> = recurring
        .into_iter()
        .map(|(action, xids)| {
            json!({
                "action": action,
                "text": x.buckets.get(&action),
                "xids": xids,
            })
        })
        .collect();
    let window_ms = gpuctl_model::quantity::parse_duration_ms(&facts.thresholds.error_window)
        .unwrap_or(3_600_000);
    let span_s = gpuctl_model::quantity::parse_duration_ms(&x.recurring.span).unwrap_or(0) / 1000;
    json!({
        "restartNode": x.with_response(XidResponse::RestartNode),
        "resetGpu": x.with_response(XidResponse::ResetGpu),
        "restartApp": x.with_response(XidResponse::RestartApp),
        "ignore": x.with_response(XidResponse::Ignore),
        "ifAlone": x.with_response(XidResponse::IfAlone),
        "decode": x.with_response(XidResponse::DecodeMessage),
        "recovery": x.with_response(XidResponse::RecoveryAction),
        "recurring": recurring,
        "recurCount": x.recurring.count,
        "recurSpanSeconds": span_s,
        "window": prometheus_duration(window_ms),
        "step": format!("{}s", gpuctl_model::promql::resolution_s(window_ms)),
        // The pod holding the GPU, in an annotation: the labels gpuctl's ServiceMonitor
        // (honorLabels: false) leaves it in.
        "workload": format!(
            "{{{{ with $labels.{pod} }}}} (pod {{{{ $labels.{ns} }}}}/{{{{ . }}}}){{{{ end }}}}",
            pod = labels.pod[0],
            ns = labels.namespace[0]
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_resources_are_quoted_as_requests() {
        assert_eq!(quota_key("nvidia.com/gpu"), "requests.nvidia.com/gpu");
        assert_eq!(
            quota_key("requests.nvidia.com/gpu"),
            "requests.nvidia.com/gpu"
        );
        assert_eq!(quota_key("pods"), "pods");
        // Object counts and DRA device classes are written as is (a `requests.` form would be
        // accepted and never enforced).
        assert_eq!(quota_key("count/pods"), "count/pods");
        assert_eq!(
            quota_key("count/resourceclaims.resource.k8s.io"),
            "count/resourceclaims.resource.k8s.io"
        );
        assert_eq!(
            quota_key("gpu.nvidia.com.deviceclass.resource.k8s.io/devices"),
            "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
        );
        assert_eq!(quota_key("requests.cpu"), "requests.cpu");
        assert_eq!(
            quota_key("nvidia.com/mig-3g.40gb"),
            "requests.nvidia.com/mig-3g.40gb"
        );
    }
}
