//! Kueue's own Configuration as the blueprint declares it (`scheduling.kueue.config`, GPU116):
//! settings Kueue's configuration validation accepts, the old places of the quota-check settings,
//! and a chart gpuctl can render `managerConfig` values for.

use std::collections::BTreeSet;

use crate::validate::Ctx;
use gpuctl_model::blueprint::{InstallMode, Queueing, ResourceTransformation};
use gpuctl_model::quantity::{parse_duration_ms, parse_nonneg_milli};

const BASE: &str = "spec.scheduling.kueue";

pub(super) fn check(ctx: &mut Ctx<'_>) {
    if ctx.bp.spec.scheduling.queueing != Queueing::Kueue {
        return;
    }
    let Some(k) = ctx.bp.spec.scheduling.kueue.as_ref() else {
        return;
    };
    let facts = &ctx.catalog.queueing().kueue_configuration;
    for (field, present) in [
        (
            "excludeResourcePrefixes",
            k.exclude_resource_prefixes.is_some(),
        ),
        ("quotaCheckStrategy", k.quota_check_strategy.is_some()),
    ] {
        if present {
            ctx.emit_at_key(
                "GPU116",
                format!("{BASE}.{field}"),
                format!(
                    "`scheduling.kueue.{field}` moved to `scheduling.kueue.config.resources.{field}`, its place in Kueue's own Configuration"
                ),
                format!("move it under `config: {{resources: {{{field}: ...}}}}`"),
            );
        }
    }
    let cfg = &k.config;
    if let Some(fs) = &cfg.fair_sharing
        && !fs.preemption_strategies.is_empty()
        && !facts
            .fair_sharing_strategy_sets
            .contains(&fs.preemption_strategies)
    {
        let accepted: Vec<String> = facts
            .fair_sharing_strategy_sets
            .iter()
            .map(|s| format!("[{}]", s.join(", ")))
            .collect();
        ctx.emit(
            "GPU116",
            format!("{BASE}.config.fairSharing.preemptionStrategies"),
            format!(
                "Kueue refuses fair-sharing preemption strategies [{}]",
                gpuctl_model::blueprint::yaml::shorten(&fs.preemption_strategies.join(", "))
            ),
            format!("use one of {}", accepted.join(", ")),
        );
    }
    let res = &cfg.resources;
    let releases = &ctx.catalog.queueing().kueue;
    for (i, p) in res.exclude_resource_prefixes.iter().enumerate() {
        if p.trim().is_empty() {
            ctx.emit(
                "GPU116",
                format!("{BASE}.config.resources.excludeResourcePrefixes[{i}]"),
                "an empty prefix would make Kueue ignore every resource",
                "remove it, or write the prefix of the resources to ignore (`example.com/`)",
            );
        }
    }
    transformations(ctx, &res.transformations);
    if let Some(integrations) = &cfg.integrations {
        frameworks(ctx, &k.version, &integrations.frameworks, &facts.frameworks);
    }
    if let Some(w) = &cfg.wait_for_pods_ready
        && let Err(e) = parse_duration_ms(&w.timeout)
    {
        ctx.emit(
            "GPU116",
            format!("{BASE}.config.waitForPodsReady.timeout"),
            format!("waitForPodsReady timeout: {e}"),
            "write a duration such as `5m` or `10m`",
        );
    }
    if k.install != InstallMode::None
        && releases.renderable(&k.version).is_ok()
        && facts.chart(&k.version).is_none()
    {
        ctx.emit(
            "GPU116",
            format!("{BASE}.install"),
            format!(
                "gpuctl cannot render the Kueue chart's `managerConfig` for {}: it knows the chart of {}",
                k.version,
                facts.chart_releases()
            ),
            "use one of those releases, or `install: none` when Kueue is installed by someone else",
        );
    }
}

/// GPU116 for resource transformations: each has an input, transformed once, and quantities.
fn transformations(ctx: &mut Ctx<'_>, transformations: &[ResourceTransformation]) {
    let mut inputs = BTreeSet::new();
    for (i, t) in transformations.iter().enumerate() {
        let tbase = format!("{BASE}.config.resources.transformations[{i}]");
        if t.input.trim().is_empty() {
            ctx.emit(
                "GPU116",
                format!("{tbase}.input"),
                "a resource transformation needs an `input` resource",
                "name the requested resource it transforms, e.g. `nvidia.com/mig-1g.10gb`",
            );
        } else if !inputs.insert(t.input.as_str()) {
            ctx.emit(
                "GPU116",
                format!("{tbase}.input"),
                format!(
                    "`{}` is transformed twice; Kueue refuses a duplicate transformation input",
                    gpuctl_model::blueprint::yaml::shorten(&t.input)
                ),
                "merge the two transformations",
            );
        }
        for (out, amount) in &t.outputs {
            if let Err(e) = parse_nonneg_milli(&amount.0) {
                ctx.emit(
                    "GPU116",
                    gpuctl_model::blueprint::yaml::join(&format!("{tbase}.outputs"), out),
                    format!("transformation output: {e}"),
                    "write a quantity per unit of the input, such as `1` or `500m`",
                );
            }
        }
    }
}

/// GPU116 for the integrated frameworks: each one Kueue `version` knows, listed once.
fn frameworks(ctx: &mut Ctx<'_>, version: &str, frameworks: &[String], known: &[String]) {
    let mut seen = BTreeSet::new();
    for (i, f) in frameworks.iter().enumerate() {
        let path = format!("{BASE}.config.integrations.frameworks[{i}]");
        if !known.iter().any(|k| k == f) {
            let hint = match gpuctl_model::suggest::closest(f, known.iter().map(String::as_str)) {
                Some(c) => format!("did you mean `{c}`?"),
                None => format!("Kueue {} integrates: {}", version, known.join(", ")),
            };
            ctx.emit(
                "GPU116",
                path,
                format!(
                    "Kueue does not know the framework `{}` and refuses to start with it",
                    gpuctl_model::blueprint::yaml::shorten(f)
                ),
                hint,
            );
        } else if !seen.insert(f.as_str()) {
            ctx.emit(
                "GPU116",
                path,
                format!("framework `{f}` is listed twice; Kueue refuses duplicates"),
                "list it once",
            );
        }
    }
}
