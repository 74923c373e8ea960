//! Volcano queues: weight, guarantee <= deserved <= capability, hierarchy, leaf binding
//! (GPU080-GPU083), the declared release (GPU084), and Volcano's own Helm release (GPU118).

use std::collections::{BTreeMap, BTreeSet};

use crate::validate::Ctx;
use gpuctl_model::blueprint::{InstallMode, Queueing, VolcanoQueue};
use gpuctl_model::quantity::parse_nonneg_milli;

pub(super) fn check(ctx: &mut Ctx<'_>) {
    if ctx.bp.spec.scheduling.queueing != Queueing::Volcano {
        return;
    }
    let Some(v) = ctx.bp.spec.scheduling.volcano.as_ref() else {
        return;
    };
    let releases = &ctx.catalog.queueing().volcano;
    if let Err(p) = releases.renderable(&v.version) {
        ctx.emit(
            "GPU084",
            "spec.scheduling.volcano.version",
            p.message(releases),
            p.hint(releases),
        );
    } else {
        helm_release(ctx, v);
    }
    let limits = ctx.catalog.limits();
    let (wmin, wmax, max_depth) = (
        i64::from(limits.volcano.min_queue_weight),
        i64::from(limits.volcano.max_queue_weight),
        limits.volcano.max_queue_depth,
    );
    let by_name: ByName<'_> = v
        .queues
        .iter()
        .enumerate()
        .map(|(i, q)| (q.name.as_str(), (i, q)))
        .collect();
    for (i, q) in v.queues.iter().enumerate() {
        let base = format!("spec.scheduling.volcano.queues[{i}]");
        if let Some(w) = q.weight
            && !(wmin..=wmax).contains(&w)
        {
            ctx.emit(
                "GPU080",
                format!("{base}.weight"),
                format!("weight {w} is outside {wmin}..{wmax}"),
                format!("use a weight from {wmin} to {wmax}"),
            );
        }
        amounts_in_order(ctx, &base, q);
        // Volcano's webhook: every guaranteed resource needs a deserved amount at least as large.
        for (res, g) in &q.guarantee {
            if !q.deserved.contains_key(res) {
                ctx.emit_at_key(
                    "GPU081",
                    gpuctl_model::blueprint::yaml::join(&format!("{base}.guarantee"), res),
                    format!(
                        "queue `{}` guarantees `{res}` but deserves none of it: Volcano's webhook refuses the queue (`deserved[{res}] must be >= guarantee[{res}]={g}`)",
                        q.name
                    ),
                    format!("add `{res}: {g}` (or more) to the queue's `deserved`"),
                );
            }
        }
        capability_within_ancestors(ctx, &base, q, &by_name, v.queues.len());
        depth(ctx, &base, q, &by_name, max_depth);
    }
    sums(ctx, v);
    leaf_binding(ctx, v);
}

/// GPU118: with `install: helm` or `gitops`, a Volcano release whose chart gpuctl knows; `values`
/// only under the chart's own top-level sections, and only when gpuctl renders them.
fn helm_release(ctx: &mut Ctx<'_>, v: &gpuctl_model::blueprint::Volcano) {
    const BASE: &str = "spec.scheduling.volcano";
    let facts = &ctx.catalog.queueing().volcano_release;
    let chart = facts.chart_of(&v.version);
    if v.install != InstallMode::None && chart.is_none() {
        ctx.emit(
            "GPU118",
            format!("{BASE}.install"),
            format!(
                "gpuctl cannot install Volcano {}'s chart: it knows the chart of {}",
                v.version,
                facts.chart_releases()
            ),
            "use one of those releases, or `install: none` when Volcano is installed by someone else",
        );
    }
    if v.install == InstallMode::None && !v.values.is_empty() {
        ctx.emit(
            "GPU118",
            format!("{BASE}.values"),
            "`install: none` means gpuctl renders no Volcano chart values, so `values` is not used",
            "set `install: helm` (or `gitops`), or drop `values`",
        );
        return;
    }
    let Some(chart) = chart else {
        return;
    };
    for key in v.values.keys() {
        if !chart.values_sections.contains(key) {
            ctx.emit_at_key(
                "GPU118",
                gpuctl_model::blueprint::yaml::join(&format!("{BASE}.values"), key),
                format!(
                    "`{key}` is not a section of Volcano {}'s chart values ({})",
                    chart.release,
                    chart.values_sections.join(", ")
                ),
                "put the setting under its section, e.g. `custom: {scheduler_replicas: 2}` (`helm show values volcano-sh/volcano`)",
            );
        }
    }
}

/// The queues by name, with their index.
type ByName<'a> = BTreeMap<&'a str, (usize, &'a VolcanoQueue)>;

/// A queue's amounts of `field` in milli-units; one that is not a quantity is GPU051.
fn amounts(
    ctx: &mut Ctx<'_>,
    base: &str,
    m: &BTreeMap<String, gpuctl_model::blueprint::Quantity>,
    field: &str,
) -> BTreeMap<String, i128> {
    let mut out = BTreeMap::new();
    for (k, a) in m {
        match parse_nonneg_milli(&a.0) {
            Ok(x) => {
                out.insert(k.clone(), x);
            }
            Err(e) => ctx.emit(
                "GPU051",
                gpuctl_model::blueprint::yaml::join(&format!("{base}.{field}"), k),
                e,
                "write a quantity",
            ),
        }
    }
    out
}

/// GPU081: guarantee <= deserved <= capability for every resource of the queue.
fn amounts_in_order(ctx: &mut Ctx<'_>, base: &str, q: &VolcanoQueue) {
    let guarantee = amounts(ctx, base, &q.guarantee, "guarantee");
    let deserved = amounts(ctx, base, &q.deserved, "deserved");
    let capability = amounts(ctx, base, &q.capability, "capability");
    for (lower, lname, upper, uname) in [
        (&guarantee, "guarantee", &deserved, "deserved"),
        (&deserved, "deserved", &capability, "capability"),
        (&guarantee, "guarantee", &capability, "capability"),
    ] {
        for (res, lo) in lower {
            if let Some(hi) = upper.get(res)
                && lo > hi
            {
                ctx.emit(
                    "GPU081",
                    gpuctl_model::blueprint::yaml::join(&format!("{base}.{lname}"), res),
                    format!(
                        "{lname} of `{res}` in queue `{}` exceeds its {uname}",
                        q.name
                    ),
                    "keep guarantee <= deserved <= capability for every resource",
                );
            }
        }
    }
}

/// GPU081: a queue may not be capable of more than the nearest ancestor that caps the resource.
fn capability_within_ancestors(
    ctx: &mut Ctx<'_>,
    base: &str,
    q: &VolcanoQueue,
    by_name: &ByName<'_>,
    queues: usize,
) {
    // A queue may not be capable of more than the nearest ancestor that caps the resource.
    for (res, amount) in &q.capability {
        let Ok(c) = parse_nonneg_milli(&amount.0) else {
            continue;
        };
        let mut cur = q;
        let mut hops = 0;
        while let Some((_, pq)) = cur
            .parent
            .as_deref()
            .filter(|p| *p != "root")
            .and_then(|p| by_name.get(p))
        {
            hops += 1;
            if hops > queues {
                break; // a cycle (GPU082)
            }
            let cap = pq
                .capability
                .get(res)
                .and_then(|a| parse_nonneg_milli(&a.0).ok())
                .filter(|x| *x > 0);
            if let Some(p) = cap {
                if c > p {
                    ctx.emit(
                        "GPU081",
                        gpuctl_model::blueprint::yaml::join(&format!("{base}.capability"), res),
                        format!(
                            "capability of `{res}` ({amount}) exceeds ancestor queue `{}` ({}): Volcano's webhook refuses the queue (`capability[{res}]=... exceeds its ancestor's capability`)",
                            pq.name, pq.capability[res]
                        ),
                        "lower the queue's capability to at most its ancestor's",
                    );
                }
                break;
            }
            cur = *pq;
        }
    }
}

/// GPU082: the queue's depth below the implicit root, with cycle detection.
fn depth(ctx: &mut Ctx<'_>, base: &str, q: &VolcanoQueue, by_name: &ByName<'_>, max_depth: usize) {
    // Depth below the implicit root, with cycle detection.
    let mut depth = 1;
    let mut seen = BTreeSet::from([q.name.as_str()]);
    let mut cur = q;
    while let Some(p) = cur.parent.as_deref().filter(|p| *p != "root") {
        let Some((_, pq)) = by_name.get(p) else { break };
        if !seen.insert(p) {
            ctx.emit(
                "GPU082",
                format!("{base}.parent"),
                format!("queue `{}` is its own ancestor", q.name),
                "make the parents form a tree under `root`",
            );
            break;
        }
        depth += 1;
        cur = pq;
    }
    if depth > max_depth {
        ctx.emit(
            "GPU082",
            format!("{base}.parent"),
            format!(
                "queue `{}` is {depth} levels below root; Volcano supports {max_depth}",
                q.name
            ),
            "flatten the hierarchy",
        );
    }
}

/// GPU083: tenants are bound to leaf queues.
fn leaf_binding(ctx: &mut Ctx<'_>, v: &gpuctl_model::blueprint::Volcano) {
    let parents: BTreeSet<&str> = v
        .queues
        .iter()
        .filter_map(|q| q.parent.as_deref())
        .collect();
    for (ti, t) in ctx.bp.spec.tenants.iter().enumerate() {
        if let Some(qn) = &t.queue
            && parents.contains(qn.as_str())
        {
            ctx.emit(
                "GPU083",
                format!("spec.tenants[{ti}].queue"),
                format!(
                    "queue `{qn}` has child queues; Volcano schedules jobs only in leaf queues"
                ),
                "bind the tenant to one of its leaf queues",
            );
        }
    }
}

/// Whether Volcano's resource arithmetic counts `res` (cpu, memory and scalar resources: extended
/// resources and hugepages; `pods` and other counts are not compared).
fn compared(res: &str) -> bool {
    matches!(res, "cpu" | "memory") || res.contains('/') || res.starts_with("hugepages-")
}

/// Children's deserved and guarantee, summed in the order Volcano's webhook sees them (the
/// blueprint's, which plan and apply keep), against their parent's, where a resource the parent
/// does not list counts as zero (GPU110).
fn sums(ctx: &mut Ctx<'_>, v: &gpuctl_model::blueprint::Volcano) {
    let by_name: BTreeMap<&str, &VolcanoQueue> =
        v.queues.iter().map(|q| (q.name.as_str(), q)).collect();
    let amounts =
        |m: &BTreeMap<String, gpuctl_model::blueprint::Quantity>| -> BTreeMap<String, i128> {
            m.iter()
                .filter(|(k, _)| compared(k))
                .filter_map(|(k, a)| parse_nonneg_milli(&a.0).ok().map(|x| (k.clone(), x)))
                .collect()
        };
    // (parent, field) -> running totals; reported (parent, field, resource).
    let mut totals: BTreeMap<(&str, &str), BTreeMap<String, i128>> = BTreeMap::new();
    let mut reported: BTreeSet<(&str, &str, String)> = BTreeSet::new();
    for (i, q) in v.queues.iter().enumerate() {
        let Some(parent) = q
            .parent
            .as_deref()
            .filter(|p| *p != "root")
            .and_then(|p| by_name.get(p))
        else {
            continue;
        };
        for (field, mine, theirs) in [
            ("deserved", &q.deserved, &parent.deserved),
            ("guarantee", &q.guarantee, &parent.guarantee),
        ] {
            let limit = amounts(theirs);
            let total = totals.entry((parent.name.as_str(), field)).or_default();
            for (res, x) in amounts(mine) {
                *total.entry(res).or_insert(0) += x;
            }
            for (res, sum) in total.iter() {
                let allowed = limit.get(res).copied().unwrap_or(0);
                if *sum <= allowed || !reported.insert((parent.name.as_str(), field, res.clone())) {
                    continue;
                }
                let path = if mine.contains_key(res) {
                    gpuctl_model::blueprint::yaml::join(
                        &format!("spec.scheduling.volcano.queues[{i}].{field}"),
                        res,
                    )
                } else {
                    format!("spec.scheduling.volcano.queues[{i}].parent")
                };
                let verb = if field == "deserved" {
                    "deserves"
                } else {
                    "guarantees"
                };
                let theirs_text = match theirs.get(res) {
                    Some(a) => format!("{verb} {a}"),
                    None => format!("lists no {field} `{res}`, which Volcano counts as 0"),
                };
                ctx.emit(
                    "GPU110",
                    path,
                    format!(
                        "the children of queue `{}` up to `{}` have {field} `{res}` of {} in total, but `{}` {theirs_text}: Volcano's webhook refuses `{}` (`parent queue {} validation failed: sum of children's {field} (...) exceeds parent's {field} limit (...)`)",
                        parent.name,
                        q.name,
                        super::composition::show(*sum),
                        parent.name,
                        q.name,
                        parent.name
                    ),
                    format!(
                        "give `{}` `{field}: {{{res}: {}}}` or more, or lower its children's {field}",
                        parent.name,
                        super::composition::show(*sum)
                    ),
                );
            }
        }
    }
}
