//! How quotas and queues compose at admission (GPU112-GPU115, GPU117): what a tenant's
//! ClusterQueue can admit into one namespace against the namespace's ResourceQuota (both ways:
//! more than the quota allows, and a GPU quota the queue can never fill), quota keys that demand
//! container values nobody sets, borrowing and lending limits that can never take effect, and
//! fair-sharing weights without fair sharing. Each finding names both sides.

use std::collections::{BTreeMap, BTreeSet};

use super::quota::gpu_resource_of_key;
use crate::validate::Ctx;
use gpuctl_model::blueprint::{ClusterQueue, Kueue, Queueing};
use gpuctl_model::names::quota_name;
use gpuctl_model::quantity::parse_nonneg_milli;

pub(super) fn check(ctx: &mut Ctx<'_>) {
    container_values(ctx);
    if ctx.bp.spec.scheduling.queueing != Queueing::Kueue {
        return;
    }
    let Some(k) = ctx.bp.spec.scheduling.kueue.as_ref() else {
        return;
    };
    let cohorts = Cohorts::new(k);
    admitted_against_quota(ctx, k, &cohorts);
    dead_limits(ctx, k, &cohorts);
    fair_sharing(ctx, k);
}

/// Quota keys that make the API server require a container value (`requests.cpu`), against the
/// tenant's LimitRange defaults (GPU113).
fn container_values(ctx: &mut Ctx<'_>) {
    let required = &ctx
        .catalog
        .queueing()
        .composition
        .keys_requiring_container_values;
    for (ti, t) in ctx.bp.spec.tenants.iter().enumerate() {
        let mut missing: Vec<(&str, &str, &str)> = Vec::new();
        for key in t.quota.keys() {
            let Some(req) = required.get(key.as_str()) else {
                continue;
            };
            if t.defaults.contains_key(&req.resource) {
                continue;
            }
            missing.push((key.as_str(), req.field.as_str(), req.resource.as_str()));
        }
        for (key, field, resource) in missing {
            ctx.emit_at_key(
                "GPU113",
                gpuctl_model::blueprint::yaml::join(&format!("spec.tenants[{ti}].quota"), key),
                format!(
                    "tenant `{}`'s ResourceQuota `{}` tracks `{key}`, so the API server refuses every pod with a container that does not set {field}.{resource}, and the tenant's `defaults` (its LimitRange) set no `{resource}`: a job that asks only for GPUs has every pod refused (`must specify {field}.{resource} for: main`)",
                    t.name,
                    quota_name(&t.name),
                ),
                format!(
                    "add `{resource}` to the tenant's `defaults` (the per-container amount pods get when they set none), or remove `{key}` from its quota"
                ),
            );
        }
    }
}

/// The cohort trees of the blueprint's ClusterQueues: a queue borrows from, and lends to, the
/// other queues whose cohorts share its root.
struct Cohorts<'a> {
    root: BTreeMap<&'a str, &'a str>,
}

impl<'a> Cohorts<'a> {
    fn new(k: &'a Kueue) -> Self {
        let parent: BTreeMap<&str, &str> = k
            .cohorts
            .iter()
            .filter_map(|c| c.parent.as_deref().map(|p| (c.name.as_str(), p)))
            .collect();
        let mut root = BTreeMap::new();
        let names = k
            .cohorts
            .iter()
            .map(|c| c.name.as_str())
            .chain(k.cluster_queues.iter().filter_map(|q| q.cohort.as_deref()));
        for name in names {
            let mut cur = name;
            let mut seen = BTreeSet::from([name]);
            // A cycle (GPU073) makes every cohort in it inactive; its members share nothing.
            let mut cyclic = false;
            while let Some(p) = parent.get(cur) {
                if !seen.insert(p) {
                    cyclic = true;
                    break;
                }
                cur = p;
            }
            if !cyclic {
                root.insert(name, cur);
            }
        }
        Cohorts { root }
    }

    /// Whether `a` and `b` (distinct queues) are in one cohort tree.
    fn share_tree(&self, a: &ClusterQueue, b: &ClusterQueue) -> bool {
        match (a.cohort.as_deref(), b.cohort.as_deref()) {
            (Some(x), Some(y)) => {
                matches!((self.root.get(x), self.root.get(y)), (Some(rx), Some(ry)) if rx == ry)
            }
            _ => false,
        }
    }
}

fn amount(map: &BTreeMap<String, gpuctl_model::blueprint::Quantity>, res: &str) -> Option<i128> {
    map.get(res).and_then(|q| parse_nonneg_milli(&q.0).ok())
}

/// What the other queues of `q`'s cohort tree can lend of `res` on `pool`, and which queues.
fn lendable<'a>(
    k: &'a Kueue,
    cohorts: &Cohorts<'_>,
    q: &ClusterQueue,
    pool: &str,
    res: &str,
) -> (i128, Vec<&'a str>) {
    let mut total = 0i128;
    let mut lenders = Vec::new();
    for other in &k.cluster_queues {
        if std::ptr::eq(other, q) || other.name == q.name || !cohorts.share_tree(q, other) {
            continue;
        }
        for r in other.resources.iter().filter(|r| r.pool == pool) {
            let Some(nominal) = amount(&r.quota, res) else {
                continue;
            };
            let lends = amount(&r.lending_limit, res).map_or(nominal, |l| l.min(nominal));
            if lends > 0 {
                total = total.saturating_add(lends);
                lenders.push(other.name.as_str());
            }
        }
    }
    (total, lenders)
}

/// Most of `res` that `q` can admit (nominal plus what it can borrow), summed over its flavors,
/// with the nominal and borrowed parts.
fn admissible(
    k: &Kueue,
    cohorts: &Cohorts<'_>,
    q: &ClusterQueue,
    res: &str,
) -> Option<(i128, i128)> {
    let mut nominal = 0i128;
    let mut borrowed = 0i128;
    let mut covered = false;
    for r in &q.resources {
        let Some(n) = amount(&r.quota, res) else {
            continue;
        };
        covered = true;
        nominal = nominal.saturating_add(n);
        if q.cohort.is_some() {
            let (others, _) = lendable(k, cohorts, q, &r.pool, res);
            let b = amount(&r.borrowing_limit, res).map_or(others, |l| l.min(others));
            borrowed = borrowed.saturating_add(b);
        }
    }
    covered.then_some((nominal, borrowed))
}

/// A quantity for a message: whole units as a number (binary suffix for memory sizes), else milli.
pub(super) fn show(milli: i128) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let n = milli / 1000;
    for (suffix, unit) in [("Ti", 1i128 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20)] {
        if n >= unit && n % unit == 0 {
            return format!("{}{suffix}", n / unit);
        }
    }
    n.to_string()
}

/// For each tenant and resource: what its ClusterQueue can admit into one of its namespaces
/// against the namespace's ResourceQuota (GPU112).
fn admitted_against_quota(ctx: &mut Ctx<'_>, k: &Kueue, cohorts: &Cohorts<'_>) {
    let transformed: BTreeSet<&str> = k
        .config
        .resources
        .transformations
        .iter()
        .map(|t| t.input.as_str())
        .collect();
    for (ti, t) in ctx.bp.spec.tenants.iter().enumerate() {
        let Some(cq) = t
            .queue
            .as_deref()
            .and_then(|n| k.cluster_queues.iter().find(|q| q.name == n))
        else {
            continue;
        };
        for (key, limit) in &t.quota {
            if key.starts_with("limits.") {
                continue;
            }
            let res = key.strip_prefix("requests.").unwrap_or(key);
            // Kueue charges a transformed resource as its outputs: the two sides count different
            // things.
            if transformed.contains(res) {
                continue;
            }
            let Ok(limit) = parse_nonneg_milli(&limit.0) else {
                continue; // GPU051
            };
            let Some((nominal, borrowed)) = admissible(k, cohorts, cq, res) else {
                continue;
            };
            let total = nominal.saturating_add(borrowed);
            if total < limit {
                quota_above_queue(ctx, ti, key, limit, cq, (nominal, borrowed));
                continue;
            }
            if total == limit {
                continue;
            }
            let into = match t.namespaces.as_slice() {
                [one] => format!("namespace `{one}`"),
                _ => "any one of its namespaces".to_string(),
            };
            let parts = if borrowed > 0 {
                format!(
                    "{} nominal + {} borrowed from its cohort",
                    show(nominal),
                    show(borrowed)
                )
            } else {
                "its nominal quota".to_string()
            };
            let shared = ctx
                .bp
                .spec
                .tenants
                .iter()
                .filter(|o| o.queue.as_deref() == Some(cq.name.as_str()))
                .count()
                > 1;
            let mut hint = format!(
                "raise the tenant's `{key}` to {} or more, or make `{}` admit at most {} (lower its nominal quota or set a `borrowingLimit`)",
                show(total),
                cq.name,
                show(limit)
            );
            if shared {
                hint.push_str("; tenants sharing a cluster queue share its whole quota: give each its own cluster queue in the cohort");
            }
            hint.push_str(&format!(
                "; or leave `{res}` out of the quota and let Kueue govern it"
            ));
            ctx.emit(
                "GPU112",
                gpuctl_model::blueprint::yaml::join(&format!("spec.tenants[{ti}].quota"), key),
                format!(
                    "cluster queue `{}` can admit {} `{res}` into {into} ({parts}), but tenant `{}`'s ResourceQuota `{}` allows {} there: Kueue admits jobs whose pods the quota then refuses, and they run partly (`exceeded quota: {}, requested: requests.{res}=..., used: ..., limited: requests.{res}={}`)",
                    cq.name,
                    show(total),
                    t.name,
                    quota_name(&t.name),
                    show(limit),
                    quota_name(&t.name),
                    show(limit),
                ),
                hint,
            );
        }
    }
}

/// A tenant's GPU quota above everything its ClusterQueue can ever admit (GPU117): Kueue never
/// lets the tenant's pods use the difference, yet the quota reads as capacity. Other resources
/// (cpu, memory, pods) are left out: pods that bypass Kueue use them too, so a larger quota there
/// can be deliberate.
fn quota_above_queue(
    ctx: &mut Ctx<'_>,
    ti: usize,
    key: &str,
    limit: i128,
    cq: &ClusterQueue,
    (nominal, borrowed): (i128, i128),
) {
    let Some(res) = gpu_resource_of_key(key) else {
        return;
    };
    let t = &ctx.bp.spec.tenants[ti];
    let total = nominal.saturating_add(borrowed);
    let parts = match (borrowed, cq.cohort.as_deref()) {
        (0, None) => format!(
            "its nominal quota, {}; it has no cohort to borrow from",
            show(nominal)
        ),
        (0, Some(c)) => format!(
            "its nominal quota, {}; cohort `{c}` has none of it to lend (or its borrowing limit is 0)",
            show(nominal)
        ),
        (b, _) => format!(
            "{} nominal + {} its cohort can lend",
            show(nominal),
            show(b)
        ),
    };
    ctx.emit(
        "GPU117",
        gpuctl_model::blueprint::yaml::join(&format!("spec.tenants[{ti}].quota"), key),
        format!(
            "tenant `{}`'s quota allows {} `{res}` per namespace, but cluster queue `{}` can never admit more than {} ({parts}): the other {} are unreachable, and reviewers read them as capacity the tenant has",
            t.name,
            show(limit),
            cq.name,
            show(total),
            show(limit - total),
        ),
        format!(
            "lower the tenant's `{key}` to {}, or raise `{}`'s nominal quota (or what its cohort lends) to {}",
            show(total),
            cq.name,
            show(limit)
        ),
    );
}

/// Borrowing limits with nothing to borrow and lending limits with nobody to lend to (GPU114).
fn dead_limits(ctx: &mut Ctx<'_>, k: &Kueue, cohorts: &Cohorts<'_>) {
    for (qi, q) in k.cluster_queues.iter().enumerate() {
        if q.cohort.is_none() {
            continue; // GPU071
        }
        for (ri, r) in q.resources.iter().enumerate() {
            let base = format!("spec.scheduling.kueue.clusterQueues[{qi}].resources[{ri}]");
            for res in r.borrowing_limit.keys() {
                if !r.quota.contains_key(res) || amount(&r.borrowing_limit, res) == Some(0) {
                    continue; // GPU072; a zero limit is a deliberate "never borrow"
                }
                let (others, _) = lendable(k, cohorts, q, &r.pool, res);
                if others == 0 {
                    ctx.emit(
                        "GPU114",
                        gpuctl_model::blueprint::yaml::join(&format!("{base}.borrowingLimit"), res),
                        format!(
                            "`{}` can never borrow `{res}` on pool `{}`: no other cluster queue of its cohort tree has quota for it there to lend, so Kueue keeps workloads above the nominal quota pending (`insufficient unused quota for {res} in flavor {}, ... more needed`)",
                            q.name, r.pool, r.pool
                        ),
                        format!(
                            "give another cluster queue of the cohort `{res}` quota on `{}`, or remove the borrowing limit",
                            r.pool
                        ),
                    );
                }
            }
            for res in r.lending_limit.keys() {
                if !r.quota.contains_key(res) {
                    continue; // GPU072
                }
                let borrowers: Vec<&str> = k
                    .cluster_queues
                    .iter()
                    .filter(|o| o.name != q.name && cohorts.share_tree(q, o))
                    .filter(|o| {
                        o.resources
                            .iter()
                            .any(|x| x.pool == r.pool && x.quota.contains_key(res))
                    })
                    .map(|o| o.name.as_str())
                    .collect();
                if borrowers.is_empty() {
                    ctx.emit(
                        "GPU114",
                        gpuctl_model::blueprint::yaml::join(&format!("{base}.lendingLimit"), res),
                        format!(
                            "the lending limit of `{}` for `{res}` on pool `{}` does nothing: no other cluster queue of its cohort tree covers `{res}` on that pool, so nobody can borrow it",
                            q.name, r.pool
                        ),
                        format!(
                            "remove the lending limit, or give the queues that should borrow it `{res}` quota on `{}`",
                            r.pool
                        ),
                    );
                }
            }
        }
    }
}

/// Fair-sharing weights while the blueprint's Kueue configuration has no fair sharing (GPU115).
fn fair_sharing(ctx: &mut Ctx<'_>, k: &Kueue) {
    if k.config.fair_sharing.is_some() {
        return;
    }
    let weighted: Vec<(String, String)> = k
        .cohorts
        .iter()
        .enumerate()
        .filter(|(_, c)| c.fair_sharing_weight.is_some())
        .map(|(i, c)| {
            (
                format!("spec.scheduling.kueue.cohorts[{i}].fairSharingWeight"),
                format!("cohort `{}`", c.name),
            )
        })
        .chain(
            k.cluster_queues
                .iter()
                .enumerate()
                .filter(|(_, q)| q.fair_sharing_weight.is_some())
                .map(|(i, q)| {
                    (
                        format!("spec.scheduling.kueue.clusterQueues[{i}].fairSharingWeight"),
                        format!("cluster queue `{}`", q.name),
                    )
                }),
        )
        .collect();
    for (path, what) in weighted {
        ctx.emit(
            "GPU115",
            path,
            format!(
                "the fair-sharing weight of {what} does nothing: the blueprint's Kueue configuration has no `fairSharing`, and Kueue uses weights only with fair sharing on"
            ),
            "add `config: {fairSharing: {}}` under `scheduling.kueue` (and run Kueue with it: gpuctl renders it with `install: helm|gitops`, a live plan compares it with `install: none`), or remove the weight",
        );
    }
}
