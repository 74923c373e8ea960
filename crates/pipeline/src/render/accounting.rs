//! GPU-hours accounting (`spec.accounting`, docs/report.md): the table that joins tenants,
//! namespaces, queues, pools, GPU models and slice weights, the PromQL built from it, and the
//! recording and alerting rules render writes (a PrometheusRule and a plain rules file). The same
//! expressions feed `gpuctl report` (crates/accounting), so a recorded series and a report agree.
//!
//! Metric and label names come from the catalog (`profiles/accounting.yaml`, `profiles/dcgm.yaml`);
//! the engine-activity metric follows the dcgm-exporter release the GPU Operator values deploy.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use gpuctl_model::blueprint::accounting::{Accounting, Weighting};
use gpuctl_model::blueprint::resources::{self, GPU, GPU_SHARED};
use gpuctl_model::blueprint::{
    Blueprint, GpuPlugin, MigStrategy, NodePool, PartitionMode, Queueing,
};
use gpuctl_model::profiles::Catalog;
use gpuctl_model::profiles::accounting::ExporterAccounting;

/// Path of the plain rules file in the render output (`promtool check rules` reads it).
pub const RULES_FILE: &str = "prometheus/gpuctl-accounting.rules.yaml";
/// Name of the accounting PrometheusRule.
pub const PROMETHEUS_RULE: &str = "gpuctl-accounting";
/// Evaluation interval of the accounting rules.
pub const RULE_INTERVAL: &str = "1m";

/// The alert for GPUs allocated and idle past `spec.accounting.idle`.
pub const IDLE_ALERT: &str = "GPUAllocatedIdle";

/// Recorded series names (level:metric:operation).
pub mod series {
    /// Weighted GPUs held by a running pod, per namespace, pod and pool.
    pub const POD_ALLOCATED: &str = "gpuctl:pod_gpu_allocated:sum";
    /// Weighted engine activity of the devices a pod holds.
    pub const POD_ACTIVE: &str = "gpuctl:pod_gpu_active:sum";
    /// A pod's activity, at most its allocation (where activity is known).
    pub const POD_USED: &str = "gpuctl:pod_gpu_used:sum";
    /// A pod's allocation minus its use, where activity is known.
    pub const POD_IDLE: &str = "gpuctl:pod_gpu_idle:sum";
    /// A pod's allocation where no activity series exists.
    pub const POD_UNKNOWN: &str = "gpuctl:pod_gpu_activity_unknown:sum";
    /// Allocated GPUs per tenant, pool, GPU model and queue.
    pub const ALLOCATED: &str = "gpuctl:gpu_allocated:sum";
    /// Used GPUs (engine activity, at most the allocation) per tenant, pool, GPU model and queue.
    pub const ACTIVE: &str = "gpuctl:gpu_active:sum";
    /// Allocated and inactive: the pods' allocation minus their use, where activity is known.
    pub const IDLE: &str = "gpuctl:gpu_idle:sum";
    /// Allocated GPUs whose activity is not known (no dcgm-exporter series).
    pub const UNKNOWN: &str = "gpuctl:gpu_activity_unknown:sum";
    /// Kueue quota reserved above the nominal quota, per ClusterQueue, flavor and resource.
    pub const BORROWED: &str = "gpuctl:queue_gpu_borrowed:sum";
    /// Kueue quota a ClusterQueue lent to its cohort (attributed: `AccountingTable::lent_expr`).
    pub const LENT: &str = "gpuctl:queue_gpu_lent:sum";
    /// Kueue nominal quota of GPU resources.
    pub const NOMINAL: &str = "gpuctl:queue_gpu_nominal:sum";
    /// Volcano: GPUs allocated per queue (milli-units divided out).
    pub const VOLCANO_ALLOCATED: &str = "gpuctl:volcano_queue_gpu_allocated:sum";
}

/// One pool as accounting sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolAccount {
    /// Pool name (also its Kueue flavor).
    pub name: String,
    /// GPU model key.
    pub model: String,
    /// `kube_node_labels` label -> value selecting the pool's nodes.
    pub node_labels: BTreeMap<String, String>,
    /// Claims through DRA (allocation read from dcgm-exporter's claim mapping).
    pub dra: bool,
    /// Sanitised kube-state-metrics resource name -> share of a GPU one unit is.
    pub request_weights: BTreeMap<String, f64>,
    /// Raw resource name (Kueue's `resource` label) -> share of a GPU.
    pub quota_weights: BTreeMap<String, f64>,
    /// MIG profile (`""` for a whole or shared GPU) -> share of a GPU one activity series is.
    pub activity_weights: BTreeMap<String, f64>,
    /// Price of a GPU-hour, if any.
    pub price: Option<f64>,
}

/// One tenant as accounting sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantAccount {
    /// Tenant name.
    pub name: String,
    /// Its namespaces.
    pub namespaces: Vec<String>,
    /// Its Kueue ClusterQueue or Volcano queue.
    pub queue: Option<String>,
    /// Its cost centre.
    pub cost_centre: Option<String>,
}

/// The metric and label names the expressions use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricNames {
    pub requests: String,
    pub phase: String,
    pub running: String,
    pub node_labels: String,
    pub ksm_node_label: String,
    pub activity: String,
    pub activity_scale: f64,
    pub exporter: String,
    pub ns_label: String,
    pub pod_label: String,
    pub node_label: String,
    pub uuid_label: String,
    pub profile_label: String,
    pub dra_claim_label: String,
    pub reservation: String,
    pub nominal: String,
    pub queue_label: String,
    pub flavor_label: String,
    pub resource_label: String,
    pub cohort_label: String,
    pub volcano_allocated: String,
    pub volcano_queue_label: String,
    pub volcano_divisor: f64,
}

/// Everything accounting joins, from the blueprint and the catalog.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccountingTable {
    pub blueprint: String,
    pub currency: String,
    pub pools: Vec<PoolAccount>,
    pub tenants: Vec<TenantAccount>,
    /// Activity ratio below which an allocated GPU is idle (alerts).
    pub idle_below: f64,
    /// How long, as written (`30m`).
    pub idle_for: String,
    pub queueing: Queueing,
    pub names: MetricNames,
}

/// The kube-state-metrics form of a resource name (`[^a-zA-Z0-9_]` -> `_`).
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A PromQL string literal.
fn lit(s: &str) -> String {
    format!("{:?}", s)
}

/// A float as PromQL reads it back exactly (Rust's shortest round-trip form).
fn num(f: f64) -> String {
    format!("{f:?}")
}

fn mig_weight(acc: &Accounting, catalog: &Catalog, pool: &NodePool, profile: &str) -> f64 {
    if acc.weighting == Weighting::Table {
        return acc.weights.get(profile).copied().unwrap_or(1.0);
    }
    let mig = catalog.gpu(&pool.gpu.model).and_then(|g| g.mig.as_ref());
    let Some(mig) = mig else { return 1.0 };
    let Some(p) = mig.profiles.iter().find(|p| p.name == profile) else {
        return 1.0;
    };
    let (part, whole) = match acc.weighting {
        Weighting::Memory => (p.memory_slices, mig.memory_slices),
        _ => (p.compute_slices, mig.compute_slices),
    };
    if whole == 0 {
        1.0
    } else {
        f64::from(part) / f64::from(whole)
    }
}

fn pool_account(acc: &Accounting, catalog: &Catalog, pool: &NodePool, prefix: &str) -> PoolAccount {
    let mut request_weights = BTreeMap::new();
    let mut quota_weights = BTreeMap::new();
    let mut activity_weights = BTreeMap::new();
    let p = &pool.partitioning;
    let replicas = match p.mode {
        PartitionMode::TimeSlicing => p.time_slicing.as_ref().map_or(1, |t| t.replicas.max(1)),
        PartitionMode::Mps => p.mps.as_ref().map_or(1, |m| m.replicas.max(1)),
        _ => 1,
    };
    let shared = 1.0 / f64::from(replicas);
    activity_weights.insert(String::new(), shared);
    for name in resources::per_node(pool).into_keys() {
        let w = if name == GPU || name == GPU_SHARED {
            shared
        } else {
            let profile = name.trim_start_matches("nvidia.com/mig-");
            mig_weight(acc, catalog, pool, profile)
        };
        request_weights.insert(sanitize(&name), w);
        quota_weights.insert(name, w);
    }
    if p.mode == PartitionMode::Mig {
        let single = p
            .mig
            .as_ref()
            .is_some_and(|m| m.strategy == MigStrategy::Single);
        for layout in resources::mig_layout_per_gpu(pool).into_iter().flatten() {
            for profile in layout.keys() {
                let w = mig_weight(acc, catalog, pool, profile);
                activity_weights.insert(profile.clone(), w);
                if single {
                    request_weights.insert(sanitize(GPU), w);
                    quota_weights.insert(GPU.to_owned(), w);
                }
            }
        }
    }
    // A DRA pool's claims may hold any MIG device its GPUs offer (pre-created or made on demand
    // by the driver), which dcgm-exporter labels with its profile: each is weighted, or the
    // join would drop the claim's allocation without a trace.
    if pool.gpu_plugin == GpuPlugin::Dra
        && let Some(mig) = catalog.gpu(&pool.gpu.model).and_then(|g| g.mig.as_ref())
    {
        for profile in &mig.profiles {
            activity_weights
                .entry(profile.name.clone())
                .or_insert_with(|| mig_weight(acc, catalog, pool, &profile.name));
        }
    }
    let price = acc
        .prices
        .iter()
        .find(|x| x.pool.as_deref() == Some(&pool.name))
        .or_else(|| {
            acc.prices
                .iter()
                .find(|x| x.model.as_deref() == Some(&pool.gpu.model))
        })
        .map(|x| x.per_gpu_hour);
    PoolAccount {
        name: pool.name.clone(),
        model: pool.gpu.model.clone(),
        node_labels: pool
            .selector
            .iter()
            .map(|(k, v)| (format!("{prefix}{}", sanitize(k)), v.clone()))
            .collect(),
        dra: pool.gpu_plugin == GpuPlugin::Dra,
        request_weights,
        quota_weights,
        activity_weights,
        price,
    }
}

/// The exporter tag the GPU Operator values deploy: the blueprint's `dcgmExporter.version` value,
/// else the release's default.
fn exporter_tag(bp: &Blueprint, facts: &ExporterAccounting) -> String {
    bp.spec
        .gpu_operator
        .values
        .get("dcgmExporter")
        .and_then(|d| d.get("version"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            facts
                .default_for(&bp.spec.gpu_operator.version)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

fn names(bp: &Blueprint, catalog: &Catalog) -> MetricNames {
    let a = catalog.accounting();
    let d = catalog.dcgm();
    let tag = exporter_tag(bp, &a.dcgm_exporter);
    let activity = a
        .dcgm_exporter
        .activity_for(&tag)
        .or_else(|| a.dcgm_exporter.activity.last())
        .cloned();
    let first = |l: &[String]| l.first().cloned().unwrap_or_default();
    MetricNames {
        requests: a.kube_state_metrics.requests.clone(),
        phase: a.kube_state_metrics.phase.clone(),
        running: a.kube_state_metrics.running_phase.clone(),
        node_labels: a.kube_state_metrics.node_labels.clone(),
        ksm_node_label: a.kube_state_metrics.node_label.clone(),
        activity: activity
            .as_ref()
            .map(|x| x.metric.clone())
            .unwrap_or_default(),
        activity_scale: activity.as_ref().map_or(1.0, |x| x.scale),
        exporter: tag,
        ns_label: first(&d.exporter.labels.namespace),
        pod_label: first(&d.exporter.labels.pod),
        node_label: first(&d.exporter.labels.node),
        uuid_label: first(&d.exporter.labels.uuid),
        profile_label: a.dcgm_exporter.labels.mig_profile.clone(),
        dra_claim_label: a.dcgm_exporter.labels.dra_claim.clone(),
        reservation: a.kueue.reservation.clone(),
        nominal: a.kueue.nominal.clone(),
        queue_label: a.kueue.labels.queue.clone(),
        flavor_label: a.kueue.labels.flavor.clone().unwrap_or_default(),
        resource_label: a.kueue.labels.resource.clone(),
        cohort_label: a.kueue.labels.cohort.clone().unwrap_or_default(),
        volcano_allocated: a.volcano.allocated.clone(),
        volcano_queue_label: a.volcano.labels.queue.clone(),
        volcano_divisor: a.volcano.unit_divisor,
    }
}

impl AccountingTable {
    /// The table of a blueprint with `spec.accounting`; `None` without it.
    pub fn new(bp: &Blueprint, catalog: &Catalog) -> Option<AccountingTable> {
        let acc = bp.spec.accounting.as_ref()?;
        let prefix = catalog
            .accounting()
            .kube_state_metrics
            .node_label_prefix
            .clone();
        Some(AccountingTable {
            blueprint: bp.metadata.name.clone(),
            currency: acc.currency.clone(),
            pools: bp
                .spec
                .node_pools
                .iter()
                .map(|p| pool_account(acc, catalog, p, &prefix))
                .collect(),
            tenants: bp
                .spec
                .tenants
                .iter()
                .map(|t| TenantAccount {
                    name: t.name.clone(),
                    namespaces: t.namespaces.clone(),
                    queue: t.queue.clone(),
                    cost_centre: acc.cost_centres.get(&t.name).cloned(),
                })
                .collect(),
            idle_below: acc.idle.activity_below_percent / 100.0,
            idle_for: acc.idle.for_.clone(),
            queueing: bp.spec.scheduling.queueing,
            names: names(bp, catalog),
        })
    }

    /// The tenant owning `namespace`.
    pub fn tenant_of(&self, namespace: &str) -> Option<&TenantAccount> {
        self.tenants
            .iter()
            .find(|t| t.namespaces.iter().any(|n| n == namespace))
    }

    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&PoolAccount> {
        self.pools.iter().find(|p| p.name == name)
    }

    /// A constant vector with `labels`: `label_replace(vector(v), ...)`.
    fn constant(value: f64, labels: &[(&str, &str)]) -> String {
        let mut e = format!("vector({})", num(value));
        for (k, v) in labels {
            e = format!("label_replace({e}, {}, {}, \"\", \"\")", lit(k), lit(v));
        }
        e
    }

    /// Node -> pool: `kube_node_labels` of each pool's selector, labelled `pool`.
    pub fn node_pool_expr(&self, only_dra: Option<bool>, join: &str) -> String {
        let n = &self.names;
        let parts: Vec<String> = self
            .pools
            .iter()
            .filter(|p| only_dra.is_none_or(|d| p.dra == d))
            .map(|p| {
                let sel: Vec<String> = p
                    .node_labels
                    .iter()
                    .map(|(k, v)| format!("{k}={}", lit(v)))
                    .collect();
                let mut e = format!(
                    "label_replace(max by ({node}) ({m}{{{sel}}}), \"pool\", {pool}, \"\", \"\")",
                    node = n.ksm_node_label,
                    m = n.node_labels,
                    sel = sel.join(","),
                    pool = lit(&p.name)
                );
                if join != n.ksm_node_label {
                    e = format!(
                        "label_replace({e}, {}, \"$1\", {}, \"(.*)\")",
                        lit(join),
                        lit(&n.ksm_node_label)
                    );
                }
                e
            })
            .collect();
        if parts.is_empty() {
            return "vector(0) > 1".to_owned();
        }
        format!("({})", parts.join(" or "))
    }

    /// (pool, resource) -> weight, as a constant vector.
    fn request_weights_expr(&self) -> String {
        let parts: Vec<String> = self
            .pools
            .iter()
            .filter(|p| !p.dra)
            .flat_map(|p| {
                p.request_weights
                    .iter()
                    .map(|(r, w)| Self::constant(*w, &[("pool", &p.name), ("resource", r)]))
            })
            .collect();
        if parts.is_empty() {
            return "vector(0) > 1".to_owned();
        }
        format!("({})", parts.join(" or "))
    }

    /// (pool, MIG profile) -> weight of one activity series.
    fn activity_weights_expr(&self) -> String {
        let profile = &self.names.profile_label;
        let parts: Vec<String> = self
            .pools
            .iter()
            .flat_map(|p| {
                p.activity_weights
                    .iter()
                    .map(|(pr, w)| Self::constant(*w, &[("pool", &p.name), (profile, pr)]))
            })
            .collect();
        format!("({})", parts.join(" or "))
    }

    /// dcgm-exporter's activity series of devices a pod holds, as a 0..1 ratio, with the pod as
    /// `namespace` and `pod` and the node's pool as `pool`.
    fn held_activity(&self, extra: &str, only_dra: Option<bool>) -> String {
        let n = &self.names;
        let mut e = format!("{}{{{}!=\"\"{extra}}}", n.activity, n.pod_label);
        if n.activity_scale != 1.0 {
            e = format!("({e} * {})", num(n.activity_scale));
        }
        for (to, from) in [("namespace", &n.ns_label), ("pod", &n.pod_label)] {
            if to != from.as_str() {
                e = format!(
                    "label_replace({e}, {}, \"$1\", {}, \"(.*)\")",
                    lit(to),
                    lit(from)
                );
            }
        }
        format!(
            "({e} * on ({node}) group_left (pool) {np})",
            node = n.node_label,
            np = self.node_pool_expr(only_dra, &n.node_label)
        )
    }

    /// Weighted GPUs held by running pods, per namespace, pod and pool: kube-state-metrics
    /// requests of running pods for device-plugin pools, dcgm-exporter's claim mapping for DRA pools.
    pub fn pod_allocated_expr(&self) -> String {
        let n = &self.names;
        let resources: Vec<String> = self
            .pools
            .iter()
            .flat_map(|p| p.request_weights.keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let device_plugin = format!(
            "sum by (namespace, pod, pool) ({req}{{resource=~{res}}} * on (namespace, pod) group_left () (max by (namespace, pod) ({ph}{{phase={run}}}) == 1) * on ({node}) group_left (pool) {np} * on (pool, resource) group_left () {w})",
            req = n.requests,
            res = lit(&resources.join("|")),
            ph = n.phase,
            run = lit(&n.running),
            node = n.ksm_node_label,
            np = self.node_pool_expr(Some(false), &n.ksm_node_label),
            w = self.request_weights_expr(),
        );
        if !self.pools.iter().any(|p| p.dra) {
            return device_plugin;
        }
        let claimed = format!(
            "sum by (namespace, pod, pool) (group by (namespace, pod, pool, {uuid}, {profile}) ({held}) * on (pool, {profile}) group_left () {w})",
            uuid = n.uuid_label,
            profile = n.profile_label,
            held = self.held_activity(&format!(",{}!=\"\"", n.dra_claim_label), Some(true)),
            w = self.activity_weights_expr(),
        );
        format!("{device_plugin} or {claimed}")
    }

    /// Weighted engine activity of the devices running pods hold, per namespace, pod and pool.
    pub fn pod_active_expr(&self) -> String {
        format!(
            "sum by (namespace, pod, pool) ({held} * on (pool, {profile}) group_left () {w})",
            held = self.held_activity("", None),
            profile = self.names.profile_label,
            w = self.activity_weights_expr(),
        )
    }

    /// The share of its allocation a running pod's devices were active, per namespace, pod and
    /// pool: the condition of the idle alert ([`IDLE_ALERT`]) over the expressions its recording
    /// rules record, so `gpuctl doctor` judges idleness exactly as the alert does without waiting
    /// for rule history.
    pub fn pod_activity_ratio_expr(&self) -> String {
        format!(
            "({}) / on (namespace, pod, pool) ({})",
            self.pod_active_expr(),
            self.pod_allocated_expr()
        )
    }

    /// dcgm-exporter's activity series per pool, held or not: a pool absent at a step had no
    /// exporter data then (a scrape gap, or no dcgm-exporter on the pool).
    pub fn pool_coverage_expr(&self) -> String {
        let n = &self.names;
        format!(
            "count by (pool) ({act} * on ({node}) group_left (pool) {np})",
            act = n.activity,
            node = n.node_label,
            np = self.node_pool_expr(None, &n.node_label)
        )
    }

    /// Nodes of each pool in `kube_node_labels`: a pool absent at a step had none there (the
    /// selector labels not allowed by kube-state-metrics, or no node), so its allocation is blind.
    pub fn node_coverage_expr(&self) -> String {
        format!(
            "count by (pool) ({})",
            self.node_pool_expr(None, &self.names.ksm_node_label)
        )
    }

    /// kube-state-metrics present at all (a step without it has unknown allocation).
    pub fn coverage_expr(&self) -> String {
        format!("count({})", self.names.phase)
    }

    /// Kueue quota reserved above nominal, per ClusterQueue, flavor and resource (raw names).
    pub fn borrowed_expr(&self) -> Option<String> {
        (self.queueing == Queueing::Kueue).then(|| {
            let n = &self.names;
            let by = format!("{}, {}, {}", n.queue_label, n.flavor_label, n.resource_label);
            format!(
                "clamp_min(sum by ({by}) ({r}{{{res}=~{gpu}}}) - on ({by}) sum by ({by}) ({nom}{{{res}=~{gpu}}}), 0)",
                r = n.reservation,
                nom = n.nominal,
                res = n.resource_label,
                gpu = lit(&self.quota_resources().join("|")),
            )
        })
    }

    /// Kueue GPU quota each ClusterQueue lent to its cohort, per cohort, ClusterQueue, flavor and
    /// resource (raw names). Kueue has no lending metric (kueue#4039), so what the queues of a
    /// cohort borrow at a step is attributed to the queues of that cohort whose nominal quota sat
    /// unused, in proportion to it and at most all of it: `unused_q x min(1, borrowed_c /
    /// unused_c)`. Queues in no cohort lend nothing.
    pub fn lent_expr(&self) -> Option<String> {
        (self.queueing == Queueing::Kueue && !self.names.cohort_label.is_empty()).then(|| {
            let n = &self.names;
            let c = &n.cohort_label;
            let by_q = format!(
                "{c}, {}, {}, {}",
                n.queue_label, n.flavor_label, n.resource_label
            );
            let by_c = format!("{c}, {}, {}", n.flavor_label, n.resource_label);
            let sel = format!(
                "{{{res}=~{gpu},{c}!=\"\"}}",
                res = n.resource_label,
                gpu = lit(&self.quota_resources().join("|")),
            );
            let nominal = format!("sum by ({by_q}) ({}{sel})", n.nominal);
            let reserved = format!("sum by ({by_q}) ({}{sel})", n.reservation);
            let unused =
                format!("clamp_min({nominal} - ({reserved} or {nominal} * 0), 0)");
            let borrowed = format!("clamp_min({reserved} - {nominal}, 0)");
            format!(
                "{unused} * on ({by_c}) group_left () clamp_max(sum by ({by_c}) ({borrowed}) / sum by ({by_c}) ({unused}), 1)"
            )
        })
    }

    /// Kueue nominal GPU quota per ClusterQueue, flavor and resource.
    pub fn nominal_expr(&self) -> String {
        let n = &self.names;
        let by = format!(
            "{}, {}, {}",
            n.queue_label, n.flavor_label, n.resource_label
        );
        format!(
            "sum by ({by}) ({nom}{{{res}=~{gpu}}})",
            nom = n.nominal,
            res = n.resource_label,
            gpu = lit(&self.quota_resources().join("|")),
        )
    }

    /// GPU resource names as Kueue and Volcano write them, escaped for a regex.
    fn quota_resources(&self) -> Vec<String> {
        let set: std::collections::BTreeSet<String> = self
            .pools
            .iter()
            .flat_map(|p| p.quota_weights.keys().map(|r| r.replace('.', "\\.")))
            .collect();
        set.into_iter().collect()
    }

    /// Namespace -> tenant (and queue), a constant vector.
    fn tenant_expr(&self) -> String {
        let parts: Vec<String> = self
            .tenants
            .iter()
            .flat_map(|t| {
                t.namespaces.iter().map(|ns| {
                    Self::constant(
                        1.0,
                        &[
                            ("namespace", ns),
                            ("tenant", &t.name),
                            ("queue", t.queue.as_deref().unwrap_or("")),
                        ],
                    )
                })
            })
            .collect();
        if parts.is_empty() {
            return "vector(0) > 1".to_owned();
        }
        format!("({})", parts.join(" or "))
    }

    /// Pool -> GPU model, a constant vector.
    fn model_expr(&self) -> String {
        let parts: Vec<String> = self
            .pools
            .iter()
            .map(|p| Self::constant(1.0, &[("pool", &p.name), ("model", &p.model)]))
            .collect();
        format!("({})", parts.join(" or "))
    }
}

impl AccountingTable {
    /// The recording rules: per pod, then per tenant, pool, GPU model and queue.
    fn recording_rules(&self) -> Vec<Value> {
        let by = "tenant, queue, pool, model";
        let per_tenant = |rec: &str| {
            format!(
                "sum by ({by}) ({rec} * on (namespace) group_left (tenant, queue) {t} * on (pool) group_left (model) {m})",
                t = self.tenant_expr(),
                m = self.model_expr()
            )
        };
        // Per pod first, so a tenant's pods without activity data count as unknown, never as
        // idle, and activity above the allocation is never counted as more than it.
        let pod = "on (namespace, pod, pool)";
        let (alloc, active, used) = (series::POD_ALLOCATED, series::POD_ACTIVE, series::POD_USED);
        let mut rules = vec![
            json!({"record": alloc, "expr": self.pod_allocated_expr()}),
            json!({"record": active, "expr": self.pod_active_expr()}),
            json!({"record": used, "expr": format!(
                "({active} <= {pod} {alloc}) or {pod} ({alloc} and {pod} {active})"
            )}),
            json!({"record": series::POD_IDLE, "expr": format!("{alloc} - {pod} {used}")}),
            json!({"record": series::POD_UNKNOWN, "expr": format!("{alloc} unless {pod} {active}")}),
            json!({"record": series::ALLOCATED, "expr": per_tenant(alloc)}),
            json!({"record": series::ACTIVE, "expr": per_tenant(used)}),
            json!({"record": series::IDLE, "expr": per_tenant(series::POD_IDLE)}),
            json!({"record": series::UNKNOWN, "expr": per_tenant(series::POD_UNKNOWN)}),
        ];
        if let Some(b) = self.borrowed_expr() {
            rules.push(json!({"record": series::BORROWED, "expr": b}));
            rules.push(json!({"record": series::NOMINAL, "expr": self.nominal_expr()}));
            if let Some(l) = self.lent_expr() {
                rules.push(json!({"record": series::LENT, "expr": l}));
            }
        }
        if self.queueing == Queueing::Volcano {
            let n = &self.names;
            rules.push(json!({"record": series::VOLCANO_ALLOCATED, "expr": format!(
                "sum by ({q}, resource) ({m}{{resource=~{res}}}) / {d}",
                q = n.volcano_queue_label,
                m = n.volcano_allocated,
                res = lit(&self.quota_resources().join("|")),
                d = num(n.volcano_divisor),
            )}));
        }
        rules
    }

    /// The idle alert: a running pod's GPUs active less than the threshold for the window.
    fn alert_rules(&self) -> Vec<Value> {
        let pct = self.idle_below * 100.0;
        vec![json!({
            "alert": IDLE_ALERT,
            "expr": format!(
                "({act} / on (namespace, pod, pool) {alloc}) < {th}",
                act = series::POD_ACTIVE,
                alloc = series::POD_ALLOCATED,
                th = num(self.idle_below)
            ),
            "for": self.idle_for,
            "labels": {"severity": "warning", "blueprint": self.blueprint},
            "annotations": {
                "summary": format!("Pod {{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} holds GPUs of pool {{{{ $labels.pool }}}} that were active less than {} of the time for {}", format_pct(pct), self.idle_for),
                "description": "The pod's GPUs are allocated (a running pod holds them) but their graphics/compute engines were nearly idle; other tenants cannot use them meanwhile. `gpuctl report` counts these hours as idle (docs/report.md).",
            },
        })]
    }

    /// The rule groups (Prometheus's rule file `groups:`).
    pub fn rule_groups(&self) -> Value {
        json!([
            {"name": "gpuctl-accounting", "interval": RULE_INTERVAL, "rules": self.recording_rules()},
            {"name": "gpuctl-accounting-alerts", "interval": RULE_INTERVAL, "rules": self.alert_rules()},
        ])
    }
}

fn format_pct(p: f64) -> String {
    let s = format!("{p:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// The accounting PrometheusRule, as a manifest.
pub fn prometheus_rule(table: &AccountingTable, namespace: &str) -> Value {
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": PROMETHEUS_RULE,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/component": "accounting"},
        },
        "spec": {"groups": table.rule_groups()},
    })
}

/// The plain rules file (for Prometheus without the operator, and `promtool check rules`).
pub fn rules_file(table: &AccountingTable) -> String {
    format!(
        "# gpuctl accounting rules for blueprint `{}` (docs/report.md). Load with Prometheus's\n# rule_files:, or apply the PrometheusRule `{}`; `promtool check rules` reads this file.\n{}",
        table.blueprint,
        PROMETHEUS_RULE,
        super::yaml(&json!({"groups": table.rule_groups()}))
    )
}

/// The dcgm-exporter environment accounting needs, by what the blueprint has: per-pod copies of
/// shared GPUs' series, the renamed shared resource mapped to pods, DRA claims mapped.
pub fn exporter_env(bp: &Blueprint, catalog: &Catalog) -> Vec<(String, String)> {
    if bp.spec.accounting.is_none() {
        return Vec::new();
    }
    let env = &catalog.accounting().dcgm_exporter.env;
    let pools = &bp.spec.node_pools;
    let mut out = Vec::new();
    let shared = |p: &&NodePool| {
        matches!(
            p.partitioning.mode,
            PartitionMode::TimeSlicing | PartitionMode::Mps
        )
    };
    if pools.iter().any(|p| shared(&p)) {
        out.push((env.virtual_gpus.clone(), "true".to_owned()));
    }
    if pools
        .iter()
        .filter(shared)
        .any(|p| resources::per_node(p).contains_key(GPU_SHARED))
    {
        out.push((env.resource_names.clone(), GPU_SHARED.to_owned()));
    }
    if pools.iter().any(|p| p.gpu_plugin == GpuPlugin::Dra) {
        out.push((env.dra.clone(), "true".to_owned()));
    }
    out
}

/// Appends `env` to the GPU Operator values' `dcgmExporter.env` (when dcgm-exporter is rendered).
pub fn add_exporter_env(values: &mut Value, env: &[(String, String)]) {
    if env.is_empty() {
        return;
    }
    let Some(list) = values
        .get_mut("dcgmExporter")
        .and_then(|d| d.get_mut("env"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for (name, value) in env {
        list.retain(|e| e.get("name").and_then(Value::as_str) != Some(name.as_str()));
        list.push(json!({"name": name, "value": value}));
    }
}

/// Kueue's Configuration facts, with the ClusterQueue resource metrics the borrowed series need
/// turned on when the blueprint has `accounting` (`profiles/accounting.yaml` `kueue.enable_setting`).
pub fn kueue_configuration(
    bp: &Blueprint,
    catalog: &Catalog,
) -> gpuctl_model::profiles::KueueConfiguration {
    let mut facts = catalog.queueing().kueue_configuration.clone();
    if bp.spec.accounting.is_none() {
        return facts;
    }
    let mut cur = &mut facts.chart_defaults;
    let path: Vec<&str> = catalog
        .accounting()
        .kueue
        .enable_setting
        .split('.')
        .collect();
    for (i, key) in path.iter().enumerate() {
        let Some(map) = cur.as_object_mut() else {
            return facts;
        };
        let last = i + 1 == path.len();
        cur = map
            .entry(key.to_string())
            .or_insert_with(|| if last { Value::Bool(true) } else { json!({}) });
        if last {
            *cur = Value::Bool(true);
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../../../tests/fixtures/accounting/blueprint.yaml");

    fn table(text: &str) -> AccountingTable {
        let bp = gpuctl_model::blueprint::load_str("a.yaml", text)
            .expect("loads")
            .blueprint;
        AccountingTable::new(&bp, Catalog::embedded()).expect("accounting set")
    }

    /// The activity metric follows the exporter release the values deploy: the operator's
    /// default (4.6.0-4.8.3 on v26.7.0) keeps the DCGM 4.6 name, a 4.9.0 override takes the
    /// renamed field; neither falls back to GPU_UTIL (absent on MIG).
    #[test]
    fn activity_metric_follows_the_rendered_exporter_release() {
        let t = table(FIXTURE);
        assert_eq!(t.names.exporter, "4.6.0-4.8.3");
        assert_eq!(t.names.activity, "DCGM_FI_PROF_GR_ENGINE_ACTIVE");
        let newer = FIXTURE.replace(
            "      kernelModuleType: open\n",
            "      kernelModuleType: open\n    values: { dcgmExporter: { version: 4.9.0-4.7.1-distroless } }\n",
        );
        let t = table(&newer);
        assert_eq!(t.names.activity, "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO");
        assert!(!t.pod_active_expr().contains("GPU_UTIL\""));
    }

    /// Memory weighting: a 1g.10gb instance is 1/8 of an A100's memory slices.
    #[test]
    fn memory_weighting_uses_memory_slices() {
        let t = table(&FIXTURE.replace("weighting: compute", "weighting: memory"));
        assert_eq!(t.pool("a100").unwrap().activity_weights["1g.10gb"], 0.125);
        assert_eq!(
            t.pool("l4").unwrap().request_weights["nvidia_com_gpu"],
            0.25
        );
    }

    /// The exporter env and Kueue's resource metrics are set only for a blueprint with accounting.
    #[test]
    fn exporter_and_kueue_settings_only_with_accounting() {
        let bp = gpuctl_model::blueprint::load_str("a.yaml", FIXTURE)
            .unwrap()
            .blueprint;
        let env = exporter_env(&bp, Catalog::embedded());
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["KUBERNETES_VIRTUAL_GPUS", "KUBERNETES_ENABLE_DRA"]);
        let k = kueue_configuration(&bp, Catalog::embedded());
        assert_eq!(
            k.chart_defaults["metrics"]["enableClusterQueueResources"],
            true
        );
        let mut without = bp.clone();
        without.spec.accounting = None;
        assert!(exporter_env(&without, Catalog::embedded()).is_empty());
        let k = kueue_configuration(&without, Catalog::embedded());
        assert!(
            k.chart_defaults["metrics"]
                .get("enableClusterQueueResources")
                .is_none()
        );
    }
}
