//! Volcano queues: weight, guarantee <= deserved <= capability, hierarchy, leaf binding
//! (GPU080-GPU083), and the declared release (GPU084).

use std::collections::{BTreeMap, BTreeSet};

use crate::blueprint::{Queueing, VolcanoQueue};
use crate::quantity::parse_nonneg_milli;
use crate::validate::Ctx;

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
    }
    let limits = ctx.catalog.limits();
    let (wmin, wmax, max_depth) = (
        i64::from(limits.volcano.min_queue_weight),
        i64::from(limits.volcano.max_queue_weight),
        limits.volcano.max_queue_depth,
    );
    let by_name: BTreeMap<&str, (usize, &VolcanoQueue)> = v
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
        let amounts = |m: &BTreeMap<String, crate::blueprint::Quantity>,
                       field: &str,
                       ctx: &mut Ctx<'_>|
         -> BTreeMap<String, i128> {
            let mut out = BTreeMap::new();
            for (k, a) in m {
                match parse_nonneg_milli(&a.0) {
                    Ok(x) => {
                        out.insert(k.clone(), x);
                    }
                    Err(e) => ctx.emit(
                        "GPU051",
                        crate::blueprint::yaml::join(&format!("{base}.{field}"), k),
                        e,
                        "write a quantity",
                    ),
                }
            }
            out
        };
        let guarantee = amounts(&q.guarantee, "guarantee", ctx);
        let deserved = amounts(&q.deserved, "deserved", ctx);
        let capability = amounts(&q.capability, "capability", ctx);
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
                        crate::blueprint::yaml::join(&format!("{base}.{lname}"), res),
                        format!(
                            "{lname} of `{res}` in queue `{}` exceeds its {uname}",
                            q.name
                        ),
                        "keep guarantee <= deserved <= capability for every resource",
                    );
                }
            }
        }
        // A child may not be capable of more than its parent.
        if let Some(parent) = q.parent.as_deref().and_then(|p| by_name.get(p)) {
            for (res, amount) in &q.capability {
                if let (Some(pa), Ok(c)) =
                    (parent.1.capability.get(res), parse_nonneg_milli(&amount.0))
                    && let Ok(p) = parse_nonneg_milli(&pa.0)
                    && c > p
                {
                    ctx.emit(
                        "GPU081",
                        crate::blueprint::yaml::join(&format!("{base}.capability"), res),
                        format!(
                            "capability of `{res}` ({amount}) exceeds parent queue `{}` ({pa})",
                            parent.1.name
                        ),
                        "lower the child's capability to at most its parent's",
                    );
                }
            }
        }
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
