//! Quotas: ResourceQuota keys, extended-resource rules, LimitRange defaults, capacity (GPU050-GPU055).

use std::collections::BTreeMap;

use crate::validate::Ctx;
use gpuctl_model::blueprint::resources::{
    GPU, GPU_SHARED, is_extended_resource, is_gpu_resource, pool_capacity,
};
use gpuctl_model::quantity::{parse_count, parse_nonneg_milli};

/// Capacity of every pool together, per resource.
pub(crate) fn cluster_capacity(ctx: &Ctx<'_>) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for p in &ctx.bp.spec.node_pools {
        if !ctx.pool_in_bounds(p) {
            continue;
        }
        for (k, v) in pool_capacity(p) {
            let t = total.entry(k).or_insert(0u64);
            *t = t.saturating_add(v);
        }
    }
    total
}

/// The resource a quota key limits, if it is a GPU resource: `nvidia.com/gpu` and
/// `requests.nvidia.com/gpu` both mean `nvidia.com/gpu`.
pub(crate) fn gpu_resource_of_key(key: &str) -> Option<&str> {
    let r = key.strip_prefix("requests.").unwrap_or(key);
    is_gpu_resource(r).then_some(r)
}

pub(super) fn check(ctx: &mut Ctx<'_>) {
    let capacity = cluster_capacity(ctx);
    let limits = ctx.catalog.limits();
    let q = Quotas {
        // With a pool out of bounds (GPU018) the cluster's capacity is unknown: say nothing
        // about it.
        bounded: ctx.bp.spec.node_pools.iter().all(|p| ctx.pool_in_bounds(p)),
        provided: capacity.keys().cloned().collect(),
        standard: limits.resource_quota.standard_keys.clone(),
        standard_prefixes: limits.resource_quota.standard_key_prefixes.clone(),
        capacity,
    };
    // resource -> (total promised, path of the biggest contributor)
    let mut promised: Promised = BTreeMap::new();
    let bp = ctx.bp;
    for (ti, t) in bp.spec.tenants.iter().enumerate() {
        let base = format!("spec.tenants[{ti}]");
        let mut tenant_gpu: BTreeMap<String, u64> = BTreeMap::new();
        for (key, amount) in &t.quota {
            q.quota_key(ctx, t, &base, (key, amount), &mut tenant_gpu, &mut promised);
        }
        for (res, amount) in &t.defaults {
            q.default_amount(ctx, &base, (res, amount), &tenant_gpu);
        }
    }
    for (r, (total, path, _)) in promised {
        let cap = if q.bounded {
            q.capacity.get(&r).copied().unwrap_or(0)
        } else {
            0
        };
        if cap > 0 && total > cap {
            ctx.emit(
                "GPU055",
                path,
                format!("tenant quotas promise {total} `{r}` in total (quota x namespaces) but the pools have {cap}"),
                "lower quotas or add nodes; over-commit is fine only when tenants rarely peak together",
            );
        }
    }
}

/// Per GPU resource: the tenants' quotas in total (quota x namespaces), the path of the biggest
/// contributor and its amount.
type Promised = BTreeMap<String, (u64, String, u64)>;

/// What every tenant's quota is checked against: the pools' capacity (when every pool is in
/// bounds) and the ResourceQuota keys the API server knows.
struct Quotas {
    capacity: BTreeMap<String, u64>,
    bounded: bool,
    provided: Vec<String>,
    standard: Vec<String>,
    standard_prefixes: Vec<String>,
}

impl Quotas {
    /// GPU050-GPU053 for one quota key of tenant `t`: enforced, known, a quantity, a GPU resource
    /// spelt right that some pool provides; its GPU amount counts towards `promised` unless
    /// Kueue admits the tenant's use of it.
    fn quota_key(
        &self,
        ctx: &mut Ctx<'_>,
        t: &gpuctl_model::blueprint::Tenant,
        base: &str,
        (key, amount): (&String, &gpuctl_model::blueprint::Quantity),
        tenant_gpu: &mut BTreeMap<String, u64>,
        promised: &mut Promised,
    ) {
        let q = self;
        let path = gpuctl_model::blueprint::yaml::join(&format!("{base}.quota"), key);
        if let Some(rest) = key.strip_prefix("limits.")
            && is_extended_resource(rest)
        {
            ctx.emit_at_key(
                "GPU050",
                path,
                format!("`{key}` is accepted but never enforced by the API server"),
                format!("write `{rest}: {amount}` and gpuctl renders `requests.{rest}`"),
            );
            return;
        }
        let resource = key.strip_prefix("requests.").unwrap_or(key);
        let is_ext = is_extended_resource(resource);
        if !is_ext
            && !q.standard.iter().any(|s| s == key)
            && !q
                .standard_prefixes
                .iter()
                .any(|p| key.starts_with(p.as_str()))
        {
            let hint = match gpuctl_model::suggest::closest(key, q.standard.iter().map(String::as_str)) {
                Some(c) => format!("did you mean `{c}`?"),
                None => "use a ResourceQuota key such as `pods`, `requests.cpu`, `limits.memory`, or an extended resource name".into(),
            };
            ctx.emit_at_key(
                "GPU051",
                path,
                format!("`{key}` is not a ResourceQuota key"),
                hint,
            );
            return;
        }
        if let Err(e) = parse_nonneg_milli(&amount.0) {
            ctx.emit(
                "GPU051",
                path.clone(),
                e,
                "write a quantity such as `200`, `500m` or `12Ti`",
            );
            return;
        }
        if misspelt_gpu_resource(ctx, &path, resource, &q.provided) {
            return;
        }
        if let Some(r) = gpu_resource_of_key(key) {
            match parse_count(&amount.0) {
                Err(e) => ctx.emit(
                    "GPU052",
                    path.clone(),
                    format!("GPU amount {e}"),
                    "GPUs are whole devices; share them with MIG or time-slicing",
                ),
                Ok(n) => {
                    if q.bounded && !q.capacity.contains_key(r) {
                        ctx.emit_at_key(
                            "GPU053",
                            path.clone(),
                            format!("no pool provides `{r}`, so this quota admits nothing"),
                            format!(
                                "pools provide: {}",
                                if q.provided.is_empty() {
                                    "nothing".into()
                                } else {
                                    q.provided.join(", ")
                                }
                            ),
                        );
                    }
                    tenant_gpu.insert(r.to_string(), n);
                    if kueue_governs(ctx, t, r) {
                        return;
                    }
                    let total = n.saturating_mul(t.namespaces.len() as u64);
                    let e = promised
                        .entry(r.to_string())
                        .or_insert((0, path.clone(), 0));
                    e.0 = e.0.saturating_add(total);
                    if total > e.2 {
                        e.1 = path.clone();
                        e.2 = total;
                    }
                }
            }
        }
    }

    /// GPU051-GPU054 for one default of tenant `base`: a quantity, a GPU resource some pool
    /// provides, within the tenant's quota.
    fn default_amount(
        &self,
        ctx: &mut Ctx<'_>,
        base: &str,
        (res, amount): (&String, &gpuctl_model::blueprint::Quantity),
        tenant_gpu: &BTreeMap<String, u64>,
    ) {
        let q = self;
        let path = gpuctl_model::blueprint::yaml::join(&format!("{base}.defaults"), res);
        if let Err(e) = parse_nonneg_milli(&amount.0) {
            ctx.emit(
                "GPU051",
                path,
                e,
                "write a quantity such as `1`, `500m` or `4Gi`",
            );
            return;
        }
        if misspelt_gpu_resource(ctx, &path, res, &q.provided) || !is_gpu_resource(res) {
            return;
        }
        match parse_count(&amount.0) {
            Err(e) => ctx.emit(
                "GPU052",
                path,
                format!("GPU default {e}"),
                "GPUs are whole devices",
            ),
            Ok(n) => {
                if q.bounded && !q.capacity.contains_key(res.as_str()) {
                    ctx.emit_at_key(
                        "GPU053",
                        path.clone(),
                        format!("no pool provides `{res}`, so every pod given this default stays Pending"),
                        format!("pools provide: {}", if q.provided.is_empty() { "nothing".into() } else { q.provided.join(", ") }),
                    );
                }
                if let Some(q) = tenant_gpu.get(res.as_str())
                    && n > *q
                {
                    ctx.emit(
                        "GPU054",
                        path,
                        format!("default {res} of {n} per container exceeds the tenant's quota of {q}; every pod using the default is rejected"),
                        format!("lower the default to at most {q}, or raise the quota"),
                    );
                }
            }
        }
    }
}

/// Whether Kueue admits the tenant's use of `resource` (its ClusterQueue covers it). Then the
/// cluster queues' nominal quotas are what must fit the pools (checked with them), and the
/// tenant's quota is meant to be at least what its queue admits, nominal plus borrowing (GPU112),
/// so with borrowing the tenants' quotas add up to more than the pools by design.
fn kueue_governs(ctx: &Ctx<'_>, t: &gpuctl_model::blueprint::Tenant, resource: &str) -> bool {
    if ctx.bp.spec.scheduling.queueing != gpuctl_model::blueprint::Queueing::Kueue {
        return false;
    }
    let Some(k) = &ctx.bp.spec.scheduling.kueue else {
        return false;
    };
    t.queue
        .as_deref()
        .and_then(|q| k.cluster_queues.iter().find(|c| c.name == q))
        .is_some_and(|c| c.resources.iter().any(|r| r.quota.contains_key(resource)))
}

/// An extended resource that is not a GPU resource but is a near miss of one (`n4idia.com/gpu`,
/// `nvidia.com/gpus`): the API server accepts any well-formed name, so such a quota or default
/// silently limits nothing, or makes every pod ask for a device that no node has (GPU056).
pub(crate) fn misspelt_gpu_resource(
    ctx: &mut Ctx<'_>,
    path: &str,
    resource: &str,
    provided: &[String],
) -> bool {
    if !is_extended_resource(resource) || is_gpu_resource(resource) {
        return false;
    }
    let candidates = [GPU, GPU_SHARED]
        .into_iter()
        .chain(provided.iter().map(String::as_str));
    // Edit distance, not similarity: `nvidia.com/hostdev` or `nvidia.com/rdma_shared_a` share a
    // long prefix with `nvidia.com/gpu` and are real resources of other device plugins.
    let Some(near) = candidates
        .filter(|c| strsim::levenshtein(resource, c) <= 2)
        .min_by_key(|c| strsim::levenshtein(resource, c))
    else {
        return false;
    };
    ctx.emit_at_key(
        "GPU056",
        path.to_string(),
        format!(
            "`{}` looks like a misspelt GPU resource; no device plugin advertises it",
            gpuctl_model::blueprint::yaml::shorten(resource)
        ),
        format!("did you mean `{near}`?"),
    );
    true
}
