//! Kueue v1beta2: resource groups and limits, borrowing/lending, cohort tree, tenant reachability
//! (GPU070-GPU075, and GPU052/053/055 for queue quotas), and the declared release (GPU076).

use std::collections::{BTreeMap, BTreeSet};

use crate::validate::Ctx;
use gpuctl_model::blueprint::resources::{is_gpu_resource, pool_capacity};
use gpuctl_model::blueprint::{
    BorrowWithinCohort, ClusterQueue, FlavorQuota, Queueing, QuotaCheckStrategy,
    ReclaimWithinCohort,
};
use gpuctl_model::quantity::{parse_count, parse_nonneg_milli};

pub(super) fn check(ctx: &mut Ctx<'_>) {
    if ctx.bp.spec.scheduling.queueing != Queueing::Kueue {
        return;
    }
    let Some(kueue) = ctx.bp.spec.scheduling.kueue.as_ref() else {
        return;
    };
    release(ctx, kueue);
    weights(ctx, kueue);
    // pool -> resource -> (nominal total, path of last contributor)
    let mut nominal = Nominal::new();
    for (qi, q) in kueue.cluster_queues.iter().enumerate() {
        let base = format!("spec.scheduling.kueue.clusterQueues[{qi}]");
        resource_groups(ctx, &base, q);
        crd_rules(ctx, &base, q);
        for (ri, r) in q.resources.iter().enumerate() {
            let rbase = format!("{base}.resources[{ri}]");
            let nominal_milli = flavor_quota(ctx, &rbase, r, &mut nominal);
            flavor_limits(ctx, &rbase, q, r, &nominal_milli);
        }
    }
    nominal_within_pools(ctx, nominal);
    cohort_cycles(ctx);
    tenants(ctx);
}

/// Pool -> resource -> (nominal total, path of the last contributor).
type Nominal = BTreeMap<String, BTreeMap<String, (u64, String)>>;

/// GPU051-GPU053 for one flavor's nominal quota: quantities, whole GPUs, resources the pool
/// provides; its GPUs count towards `nominal`. The quota in milli-units.
fn flavor_quota<'r>(
    ctx: &mut Ctx<'_>,
    rbase: &str,
    r: &'r FlavorQuota,
    nominal: &mut Nominal,
) -> BTreeMap<&'r str, i128> {
    // A pool whose counts are out of bounds (GPU018) has no capacity to compare with.
    let pool = ctx
        .bp
        .spec
        .node_pools
        .iter()
        .find(|p| p.name == r.pool)
        .filter(|p| ctx.pool_in_bounds(p));
    let cap = pool.map(pool_capacity).unwrap_or_default();
    let mut nominal_milli: BTreeMap<&str, i128> = BTreeMap::new();
    for (res, amount) in &r.quota {
        let path = gpuctl_model::blueprint::yaml::join(&format!("{rbase}.quota"), res);
        match parse_nonneg_milli(&amount.0) {
            Err(e) => ctx.emit(
                "GPU051",
                path.clone(),
                e,
                "write a quantity such as `8`, `1500` or `12Ti`",
            ),
            Ok(m) => {
                nominal_milli.insert(res, m);
            }
        }
        if is_gpu_resource(res) {
            match parse_count(&amount.0) {
                Err(e) => ctx.emit(
                    "GPU052",
                    path.clone(),
                    format!("GPU amount {e}"),
                    "GPUs are whole devices",
                ),
                Ok(n) => {
                    if pool.is_some() && !cap.contains_key(res.as_str()) {
                        let offered: Vec<&str> = cap.keys().map(String::as_str).collect();
                        ctx.emit_at_key(
                            "GPU053",
                            path.clone(),
                            format!(
                                "pool `{}` does not provide `{res}`, so this quota admits nothing",
                                r.pool
                            ),
                            format!("pool `{}` provides: {}", r.pool, offered.join(", ")),
                        );
                    }
                    let e = nominal
                        .entry(r.pool.clone())
                        .or_default()
                        .entry(res.clone())
                        .or_insert((0, path.clone()));
                    e.0 = e.0.saturating_add(n);
                    e.1 = path;
                }
            }
        }
    }
    nominal_milli
}

/// GPU071 and GPU072 for one flavor's borrowing and lending limits: in a cohort, on resources
/// with a nominal quota, lending at most that quota.
fn flavor_limits(
    ctx: &mut Ctx<'_>,
    rbase: &str,
    q: &ClusterQueue,
    r: &FlavorQuota,
    nominal_milli: &BTreeMap<&str, i128>,
) {
    for (field, limits) in [
        ("borrowingLimit", &r.borrowing_limit),
        ("lendingLimit", &r.lending_limit),
    ] {
        if limits.is_empty() {
            continue;
        }
        if q.cohort.is_none() {
            ctx.emit(
                "GPU071",
                format!("{rbase}.{field}"),
                format!(
                    "`{field}` needs the cluster queue `{}` to be in a cohort",
                    q.name
                ),
                "set `cohort` on the cluster queue, or remove the limit",
            );
        }
        for (res, amount) in limits {
            let path = gpuctl_model::blueprint::yaml::join(&format!("{rbase}.{field}"), res);
            let limit = match parse_nonneg_milli(&amount.0) {
                Ok(m) => m,
                Err(e) => {
                    ctx.emit("GPU051", path, e, "write a quantity");
                    continue;
                }
            };
            match nominal_milli.get(res.as_str()) {
                None => ctx.emit_at_key(
                    "GPU072",
                    path,
                    format!("`{field}` names `{res}`, which has no nominal quota on this flavor"),
                    format!("add `{res}` to `quota`, or remove it from `{field}`"),
                ),
                Some(n) if field == "lendingLimit" && limit > *n => ctx.emit(
                    "GPU072",
                    path,
                    format!(
                        "lending limit {amount} for `{res}` exceeds the nominal quota {}",
                        r.quota[res]
                    ),
                    "lend at most the nominal quota",
                ),
                _ => {}
            }
        }
    }
}

/// GPU055: the cluster queues' nominal quotas on each pool fit its capacity.
fn nominal_within_pools(ctx: &mut Ctx<'_>, nominal: Nominal) {
    for (pool_name, resources) in nominal {
        let Some(pool) = ctx.bp.spec.node_pools.iter().find(|p| p.name == pool_name) else {
            continue;
        };
        if !ctx.pool_in_bounds(pool) {
            continue;
        }
        let cap = pool_capacity(pool);
        for (res, (total, path)) in resources {
            if let Some(c) = cap.get(&res)
                && total > *c
            {
                ctx.emit(
                    "GPU055",
                    path,
                    format!("cluster queues' nominal quotas for `{res}` on pool `{pool_name}` add up to {total}, but the pool has {c}"),
                    "nominal quotas should add up to the pool's capacity; use borrowing for the rest",
                );
            }
        }
    }
}

/// gpuctl puts flavors that cover the same resources into one resource group, as Kueue requires;
/// a resource covered by flavors with different resource sets would land in two groups.
fn resource_groups(ctx: &mut Ctx<'_>, base: &str, q: &ClusterQueue) {
    let limits = ctx.catalog.limits();
    let (max_groups, max_flavors, max_resources) = (
        limits.kueue.max_resource_groups,
        limits.kueue.max_flavors_per_group,
        limits.kueue.max_covered_resources_per_group,
    );
    let mut groups: Vec<(BTreeSet<&str>, Vec<usize>)> = Vec::new();
    let mut seen_pools: BTreeMap<&str, usize> = BTreeMap::new();
    for (ri, r) in q.resources.iter().enumerate() {
        if let Some(first) = seen_pools.insert(&r.pool, ri) {
            ctx.emit(
                "GPU070",
                format!("{base}.resources[{ri}].pool"),
                format!(
                    "pool `{}` appears twice in cluster queue `{}` (first at resources[{first}])",
                    r.pool, q.name
                ),
                "merge the two entries",
            );
        }
        let keys: BTreeSet<&str> = r.quota.keys().map(String::as_str).collect();
        match groups.iter_mut().find(|(k, _)| *k == keys) {
            Some((_, members)) => members.push(ri),
            None => groups.push((keys, vec![ri])),
        }
    }
    for (a, (ka, ma)) in groups.iter().enumerate() {
        for (kb, mb) in groups.iter().skip(a + 1) {
            let shared: Vec<&str> = ka.intersection(kb).copied().collect();
            if !shared.is_empty() {
                ctx.emit(
                    "GPU070",
                    format!("{base}.resources[{}].quota", mb[0]),
                    format!(
                        "pools `{}` and `{}` cover different resources but share {}: Kueue needs each resource in exactly one resource group",
                        q.resources[ma[0]].pool,
                        q.resources[mb[0]].pool,
                        shared.join(", ")
                    ),
                    "give both pools the same resource names in this queue, or use two cluster queues",
                );
            }
        }
    }
    if groups.len() > max_groups {
        ctx.emit(
            "GPU070",
            format!("{base}.resources"),
            format!(
                "cluster queue `{}` needs {} resource groups; Kueue allows {max_groups}",
                q.name,
                groups.len()
            ),
            "split the queue",
        );
    }
    for (keys, members) in &groups {
        if members.len() > max_flavors {
            ctx.emit(
                "GPU070",
                format!("{base}.resources"),
                format!(
                    "a resource group of `{}` has {} flavors; Kueue allows {max_flavors}",
                    q.name,
                    members.len()
                ),
                "split the queue",
            );
        }
        if keys.len() > max_resources {
            ctx.emit(
                "GPU070",
                format!("{base}.resources[{}].quota", members[0]),
                format!(
                    "{} resources in one group; Kueue allows {max_resources}",
                    keys.len()
                ),
                "quota fewer resources",
            );
        }
    }
}

/// The CEL rules (`x-kubernetes-validations`) of Kueue's ClusterQueue CRD on the fields gpuctl
/// renders that no other rule covers (GPU111; tests/offline/render_schemas.rs maps every CEL rule of the
/// CRDs of the kinds gpuctl renders to the rule that checks it).
fn crd_rules(ctx: &mut Ctx<'_>, base: &str, q: &ClusterQueue) {
    let Some(p) = &q.preemption else {
        return;
    };
    if p.reclaim_within_cohort == Some(ReclaimWithinCohort::Never)
        && let Some(b) = p.borrow_within_cohort
        && b != BorrowWithinCohort::Never
    {
        ctx.emit(
            "GPU111",
            format!("{base}.preemption.borrowWithinCohort"),
            format!(
                "cluster queue `{}` may preempt while borrowing (`borrowWithinCohort: {b:?}`) but never reclaims (`reclaimWithinCohort: Never`): the ClusterQueue CRD refuses this (`reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never`)",
                q.name
            ),
            "set `borrowWithinCohort: Never`, or let the queue reclaim (`reclaimWithinCohort: LowerPriority` or `Any`)",
        );
    }
}

fn cohort_cycles(ctx: &mut Ctx<'_>) {
    let Some(k) = &ctx.bp.spec.scheduling.kueue else {
        return;
    };
    let parent: BTreeMap<&str, &str> = k
        .cohorts
        .iter()
        .filter_map(|c| c.parent.as_deref().map(|p| (c.name.as_str(), p)))
        .collect();
    let mut reported = BTreeSet::new();
    for (i, c) in k.cohorts.iter().enumerate() {
        let mut chain = vec![c.name.as_str()];
        let mut cur = c.name.as_str();
        while let Some(p) = parent.get(cur) {
            if *p == c.name {
                let mut members = chain.clone();
                members.sort_unstable();
                if reported.insert(members) {
                    chain.push(p);
                    ctx.emit(
                        "GPU073",
                        format!("spec.scheduling.kueue.cohorts[{i}].parent"),
                        format!("cohort parents form a cycle: {}", chain.join(" -> ")),
                        "remove one `parent` so the cohorts form a tree",
                    );
                }
                break;
            }
            if chain.contains(p) || chain.len() > k.cohorts.len() {
                break;
            }
            chain.push(p);
            cur = p;
        }
    }
}

fn tenants(ctx: &mut Ctx<'_>) {
    let Some(k) = &ctx.bp.spec.scheduling.kueue else {
        return;
    };
    for (ti, t) in ctx.bp.spec.tenants.iter().enumerate() {
        let Some(qname) = &t.queue else {
            ctx.emit(
                "GPU074",
                format!("spec.tenants[{ti}]"),
                format!("tenant `{}` has no queue, so its namespaces get no LocalQueue and Kueue admits none of its workloads", t.name),
                "set `queue` to one of the cluster queues",
            );
            continue;
        };
        let Some(cq) = k.cluster_queues.iter().find(|q| &q.name == qname) else {
            continue;
        };
        if k.config.quota_check() == QuotaCheckStrategy::IgnoreUndeclared {
            continue;
        }
        let covered: BTreeSet<&str> = cq
            .resources
            .iter()
            .flat_map(|r| r.quota.keys().map(String::as_str))
            .collect();
        let ignored = |res: &str| {
            k.config
                .resources
                .exclude_resource_prefixes
                .iter()
                .any(|p| !p.is_empty() && res.starts_with(p.as_str()))
        };
        let base = format!("spec.tenants[{ti}]");
        let mut implicit: Vec<&str> = Vec::new();
        let dra_quota = &ctx.catalog.dra().kubernetes.quota;
        for (res, key) in charged_resources(t, &k.config.resources, dra_quota) {
            if covered.contains(res) || ignored(res) {
                continue;
            }
            let Some((field, key)) = key else {
                implicit.push(res);
                continue;
            };
            let path = gpuctl_model::blueprint::yaml::join(&format!("{base}.{field}"), key);
            let message = if is_gpu_resource(res) {
                format!(
                    "tenant `{}` may request `{res}` but cluster queue `{}` has no quota for it; such workloads never admit",
                    t.name, cq.name
                )
            } else {
                format!(
                    "tenant `{}`'s pods request `{res}` (its `{field}` sets `{key}`) but cluster queue `{}` has no quota for it; Kueue keeps such workloads pending (`resource {res} unavailable in ClusterQueue`)",
                    t.name, cq.name
                )
            };
            let hint = if is_gpu_resource(res) {
                format!("add `{res}` to `{}` on a pool that provides it", cq.name)
            } else {
                uncovered_hint(&cq.name, &[res])
            };
            ctx.emit_at_key("GPU075", path, message, hint);
        }
        if !implicit.is_empty() {
            let list = implicit
                .iter()
                .map(|r| format!("`{r}`"))
                .collect::<Vec<_>>()
                .join(" and ");
            let has: Vec<&str> = covered.iter().copied().collect();
            ctx.emit(
                "GPU075",
                format!("{base}.queue"),
                format!(
                    "tenant `{}`'s pods request {list}, but cluster queue `{}` covers only {}: Kueue keeps every such workload pending (`resource {} unavailable in ClusterQueue`)",
                    t.name,
                    cq.name,
                    if has.is_empty() { "nothing".to_string() } else { has.join(", ") },
                    implicit[0]
                ),
                uncovered_hint(&cq.name, &implicit),
            );
        }
    }
}

fn uncovered_hint(queue: &str, resources: &[&str]) -> String {
    let list = resources
        .iter()
        .map(|r| format!("`{r}`"))
        .collect::<Vec<_>>()
        .join(" and ");
    format!(
        "add {list} to every `quota` of `{queue}`, or, if your Kueue is configured to ignore them, list them in `scheduling.kueue.config.resources.excludeResourcePrefixes` (or set `quotaCheckStrategy: IgnoreUndeclared` there)"
    )
}

/// The resources Kueue charges for a tenant's pods: what they request, with Kueue's resource
/// transformations applied (outputs added with the origin of their input; a `Replace` input no
/// longer charged).
pub(super) fn charged_resources<'a>(
    t: &'a gpuctl_model::blueprint::Tenant,
    resources: &'a gpuctl_model::blueprint::KueueResources,
    dra_quota: &gpuctl_model::profiles::dra::DraQuota,
) -> BTreeMap<&'a str, Option<(&'static str, &'a str)>> {
    let requested = requested_resources(t, dra_quota);
    let mut out = requested.clone();
    for (res, origin) in &requested {
        let Some(tr) = resources.transformations.iter().find(|x| x.input == *res) else {
            continue;
        };
        if tr.strategy == gpuctl_model::blueprint::TransformationStrategy::Replace {
            out.remove(res);
        }
        for o in tr.outputs.keys() {
            out.entry(o.as_str()).or_insert(*origin);
        }
    }
    out
}

/// The resources a tenant's pods request, each with the field and key that makes them request it
/// (`None`: every pod requests it, `cpu` and `memory`). Quota keys name resources with or without
/// `requests.` / `limits.` (a ResourceQuota on them makes pods declare them); LimitRange defaults
/// are added to every container. Object counts (`pods`, `count/...`), PVC storage and the DRA device
/// keys (`<class>.deviceclass.resource.k8s.io/devices`: the API server charges them from
/// ResourceClaims, and Kueue never reads a core ResourceQuota) are not pod requests.
pub(super) fn requested_resources<'a>(
    t: &'a gpuctl_model::blueprint::Tenant,
    dra_quota: &gpuctl_model::profiles::dra::DraQuota,
) -> BTreeMap<&'a str, Option<(&'static str, &'a str)>> {
    let mut out: BTreeMap<&str, Option<(&'static str, &str)>> =
        BTreeMap::from([("cpu", None), ("memory", None)]);
    let pod_resource = |r: &str| {
        matches!(r, "cpu" | "memory" | "ephemeral-storage")
            || r.starts_with("hugepages-")
            || (r.contains('/') && !r.starts_with("count/") && dra_quota.class_of_key(r).is_none())
    };
    let keyed = t
        .quota
        .keys()
        .map(|k| ("quota", k.as_str()))
        .chain(t.defaults.keys().map(|k| ("defaults", k.as_str())));
    for (field, key) in keyed {
        let res = key
            .strip_prefix("requests.")
            .or_else(|| key.strip_prefix("limits."))
            .unwrap_or(key);
        if !pod_resource(res) {
            continue;
        }
        let slot = out.entry(res).or_insert(None);
        if slot.is_none() {
            *slot = Some((field, key));
        }
    }
    out
}

/// Fair-sharing weights are non-negative quantities (Kueue's `FairSharing.weight` is a
/// `resource.Quantity`; the webhook refuses negatives), rendered as written, so `"x"` or `-80`
/// would reach the API server (GPU070).
fn weights(ctx: &mut Ctx<'_>, kueue: &gpuctl_model::blueprint::Kueue) {
    let cohorts = kueue.cohorts.iter().enumerate().map(|(i, c)| {
        (
            format!("spec.scheduling.kueue.cohorts[{i}].fairSharingWeight"),
            c.fair_sharing_weight.as_ref(),
        )
    });
    let queues = kueue.cluster_queues.iter().enumerate().map(|(i, q)| {
        (
            format!("spec.scheduling.kueue.clusterQueues[{i}].fairSharingWeight"),
            q.fair_sharing_weight.as_ref(),
        )
    });
    let found: Vec<(String, String)> = cohorts
        .chain(queues)
        .filter_map(|(path, w)| {
            let w = w?;
            parse_nonneg_milli(&w.0).err().map(|e| (path, e))
        })
        .collect();
    for (path, e) in found {
        ctx.emit(
            "GPU070",
            path,
            format!("fair-sharing weight: {e}"),
            "write a non-negative number such as `1` or `0.5`",
        );
    }
}

/// The declared Kueue release is one gpuctl knows and serves the API version gpuctl writes; the
/// quota-check settings are ones that release accepts (GPU076).
fn release(ctx: &mut Ctx<'_>, kueue: &gpuctl_model::blueprint::Kueue) {
    let releases = &ctx.catalog.queueing().kueue;
    let path = "spec.scheduling.kueue.version";
    if let Err(p) = releases.renderable(&kueue.version) {
        ctx.emit("GPU076", path, p.message(releases), p.hint(releases));
        return;
    }
    let resources = &kueue.config.resources;
    if resources.quota_check_strategy != Some(QuotaCheckStrategy::IgnoreUndeclared) {
        return;
    }
    if !resources.exclude_resource_prefixes.is_empty() {
        ctx.emit(
            "GPU076",
            "spec.scheduling.kueue.config.resources.excludeResourcePrefixes",
            "Kueue refuses `excludeResourcePrefixes` together with `quotaCheckStrategy: IgnoreUndeclared`",
            "keep one: with `IgnoreUndeclared` Kueue already ignores every resource a cluster queue does not cover",
        );
    }
    if let Some(since) = releases.ignore_undeclared_since.as_deref()
        && !gpuctl_model::profiles::QueueSystem::at_least(&kueue.version, since)
    {
        ctx.emit(
            "GPU076",
            "spec.scheduling.kueue.config.resources.quotaCheckStrategy",
            format!(
                "Kueue {} has no quota check strategy `IgnoreUndeclared` (it arrived in {since})",
                kueue.version
            ),
            format!("remove `quotaCheckStrategy`, or upgrade Kueue to {since} or later"),
        );
    }
}
