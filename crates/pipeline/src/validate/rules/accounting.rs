//! GPU-hours accounting (`spec.accounting`): names it refers to, prices, weights and the idle
//! threshold (GPU197), and figures the rendered metrics cannot give (GPU198).

use std::collections::BTreeSet;

use crate::validate::Ctx;
use gpuctl_model::blueprint::accounting::{Accounting, Weighting};
use gpuctl_model::blueprint::{NodePool, PartitionMode};
use gpuctl_model::quantity::parse_duration_ms;

const ROOT: &str = "spec.accounting";

pub(super) fn check(ctx: &mut Ctx<'_>) {
    let Some(acc) = ctx.bp.spec.accounting.as_ref() else {
        return;
    };
    currency(ctx, acc);
    prices(ctx, acc);
    weights(ctx, acc);
    idle(ctx, acc);
    cost_centres(ctx, acc);
    measurable(ctx, acc);
}

fn currency(ctx: &mut Ctx<'_>, acc: &Accounting) {
    let c = &acc.currency;
    if c.len() != 3 || !c.bytes().all(|b| b.is_ascii_uppercase()) {
        ctx.emit(
            "GPU197",
            format!("{ROOT}.currency"),
            format!("`{}` is not an ISO 4217 currency code", short(c)),
            "write three capital letters, e.g. `USD` or `EUR`",
        );
    }
}

fn prices(ctx: &mut Ctx<'_>, acc: &Accounting) {
    let pools: BTreeSet<&str> = ctx
        .bp
        .spec
        .node_pools
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let models: BTreeSet<&str> = ctx
        .bp
        .spec
        .node_pools
        .iter()
        .map(|p| p.gpu.model.as_str())
        .collect();
    let mut seen = BTreeSet::new();
    for (i, p) in acc.prices.iter().enumerate() {
        let path = format!("{ROOT}.prices[{i}]");
        let (key, known) = match (&p.pool, &p.model) {
            (Some(pool), None) => (format!("pool {pool}"), pools.contains(pool.as_str())),
            (None, Some(model)) => (format!("model {model}"), models.contains(model.as_str())),
            _ => {
                ctx.emit(
                    "GPU197",
                    path,
                    "a price names exactly one of `pool` and `model`",
                    "write `{pool: <pool>, perGpuHour: ..}` or `{model: <model>, perGpuHour: ..}`",
                );
                continue;
            }
        };
        if !known {
            ctx.emit(
                "GPU197",
                path.clone(),
                format!(
                    "the price of {} names no pool of the blueprint",
                    short(&key)
                ),
                format!(
                    "use a pool name or a pool's `gpu.model`: pools {}",
                    pools.iter().copied().collect::<Vec<_>>().join(", ")
                ),
            );
        }
        if !seen.insert(key.clone()) {
            ctx.emit(
                "GPU197",
                path.clone(),
                format!("{} has a second price", short(&key)),
                "keep one price per pool or model",
            );
        }
        if !p.per_gpu_hour.is_finite() || p.per_gpu_hour < 0.0 {
            ctx.emit(
                "GPU197",
                format!("{path}.perGpuHour"),
                format!("{} is not a price", p.per_gpu_hour),
                "write a finite number, 0 or more",
            );
        }
    }
}

/// MIG profiles the pools run (`layout` or `devices`).
fn mig_profiles(pools: &[NodePool]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for pool in pools
        .iter()
        .filter(|p| p.partitioning.mode == PartitionMode::Mig)
    {
        for layout in gpuctl_model::blueprint::resources::mig_layout_per_gpu(pool)
            .into_iter()
            .flatten()
        {
            out.extend(layout.into_keys());
        }
    }
    out
}

fn weights(ctx: &mut Ctx<'_>, acc: &Accounting) {
    let profiles = mig_profiles(&ctx.bp.spec.node_pools);
    for (profile, w) in &acc.weights {
        let path = format!("{ROOT}.weights.{profile}");
        if !profiles.contains(profile) {
            ctx.emit(
                "GPU197",
                path.clone(),
                format!("no pool runs the MIG profile `{}`", short(profile)),
                "weigh the profiles of the pools' MIG layouts",
            );
        }
        if !(w.is_finite() && *w > 0.0 && *w <= 1.0) {
            ctx.emit(
                "GPU197",
                path,
                format!("{w} is not a share of a GPU"),
                "write a number in (0, 1], e.g. 0.125 for one eighth",
            );
        }
    }
    if acc.weighting == Weighting::Table {
        for p in profiles.iter().filter(|p| !acc.weights.contains_key(*p)) {
            ctx.emit(
                "GPU197",
                format!("{ROOT}.weights"),
                format!("`weighting: table` gives the MIG profile `{p}` no weight"),
                format!("add `{p}: <share of a GPU>` to `weights`"),
            );
        }
    }
}

fn idle(ctx: &mut Ctx<'_>, acc: &Accounting) {
    let pct = acc.idle.activity_below_percent;
    if !(pct.is_finite() && pct > 0.0 && pct <= 100.0) {
        ctx.emit(
            "GPU197",
            format!("{ROOT}.idle.activityBelowPercent"),
            format!("{pct} is not a percentage in (0, 100]"),
            "write e.g. 5 (engine active less than 5% of the time)",
        );
    }
    match parse_duration_ms(&acc.idle.for_) {
        Ok(ms) if ms > 7 * 24 * 3_600_000 => ctx.emit(
            "GPU197",
            format!("{ROOT}.idle.for"),
            format!("`{}` is longer than a week", short(&acc.idle.for_)),
            "write at most `168h`: doctor's idle finding uses the same window and reads at most a week",
        ),
        Ok(ms) if ms >= 60_000 => {}
        Ok(_) => ctx.emit(
            "GPU197",
            format!("{ROOT}.idle.for"),
            format!("`{}` is shorter than a minute", short(&acc.idle.for_)),
            "write at least `1m`; `30m` is the default",
        ),
        Err(e) => ctx.emit("GPU197", format!("{ROOT}.idle.for"), e, "write e.g. `30m`"),
    }
}

fn cost_centres(ctx: &mut Ctx<'_>, acc: &Accounting) {
    let tenants: BTreeSet<&str> = ctx
        .bp
        .spec
        .tenants
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    for (tenant, centre) in &acc.cost_centres {
        let path = format!("{ROOT}.costCentres.{tenant}");
        if !tenants.contains(tenant.as_str()) {
            ctx.emit(
                "GPU197",
                path.clone(),
                format!("`{}` is not a tenant of the blueprint", short(tenant)),
                "use a name of `tenants`",
            );
        }
        if centre.trim().is_empty() || centre.len() > 128 || centre.chars().any(char::is_control) {
            ctx.emit(
                "GPU197",
                path,
                "a cost centre is printed in reports and CSV: one line of 1 to 128 characters",
                "write the cost centre's code, e.g. `CC-4711`",
            );
        }
    }
}

/// GPU198: used and idle GPU-hours need engine activity from dcgm-exporter, sampled often enough
/// for the idle window.
fn measurable(ctx: &mut Ctx<'_>, acc: &Accounting) {
    let dcgm = &ctx.bp.spec.gpu_operator.dcgm_exporter;
    if !dcgm.enabled {
        ctx.emit(
            "GPU198",
            "spec.gpuOperator.dcgmExporter.enabled",
            "accounting needs engine activity, but dcgm-exporter is disabled: used and idle GPU-hours cannot be measured on any pool",
            "enable dcgm-exporter, or drop `accounting`",
        );
        return;
    }
    let off: Vec<(usize, String)> = ctx
        .bp
        .spec
        .node_pools
        .iter()
        .enumerate()
        .filter(|(_, p)| p.operands.dcgm_exporter == Some(false))
        .map(|(i, p)| (i, p.name.clone()))
        .collect();
    for (i, name) in off {
        ctx.emit(
            "GPU198",
            format!("spec.nodePools[{i}].operands.dcgmExporter"),
            format!(
                "pool {name} runs no dcgm-exporter: its used and idle GPU-hours cannot be measured"
            ),
            "run dcgm-exporter on the pool (drop `dcgmExporter: false`), or remove `accounting`",
        );
    }
    if let (Ok(window), Ok(interval)) = (
        parse_duration_ms(&acc.idle.for_),
        parse_duration_ms(&dcgm.interval),
    ) && window < interval.saturating_mul(2)
    {
        ctx.emit(
            "GPU198",
            format!("{ROOT}.idle.for"),
            format!(
                "an idle window of {} spans fewer than two dcgm-exporter collections ({} each)",
                short(&acc.idle.for_),
                short(&dcgm.interval)
            ),
            "lengthen `idle.for` to at least two collection intervals",
        );
    }
}

/// A value as a message quotes it: at most 64 characters.
fn short(s: &str) -> String {
    s.chars().take(64).collect()
}
