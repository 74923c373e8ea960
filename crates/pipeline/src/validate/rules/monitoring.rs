//! Monitoring and upgrade settings: dcgm interval, alerts without an exporter, alert thresholds a
//! GPU cannot report or always exceeds, upgrade policy (GPU090, GPU091, GPU092, GPU095).

use crate::validate::Ctx;
use gpuctl_model::blueprint::IntOrString;
use gpuctl_model::quantity::parse_duration_ms;

pub(super) fn check(ctx: &mut Ctx<'_>) {
    let dcgm = &ctx.bp.spec.gpu_operator.dcgm_exporter;
    let min = ctx.catalog.limits().dcgm_exporter.min_collect_interval_ms;
    match parse_duration_ms(&dcgm.interval) {
        Err(e) => ctx.emit(
            "GPU090",
            "spec.gpuOperator.dcgmExporter.interval",
            e,
            "write e.g. `30s`",
        ),
        Ok(ms) if ms < min => ctx.emit(
            "GPU090",
            "spec.gpuOperator.dcgmExporter.interval",
            format!(
                "collection interval {} is below the minimum of {min}ms",
                dcgm.interval
            ),
            "use `30s` for dashboards, `1s` at the shortest for debugging",
        ),
        _ => {}
    }
    let m = &ctx.bp.spec.monitoring;
    let wants = m.service_monitor
        || m.alerts.xid
        || m.alerts.ecc_errors
        || m.alerts.temperature_c.is_some()
        || dcgm.service_monitor;
    if wants && !dcgm.enabled {
        ctx.emit(
            "GPU091",
            "spec.monitoring",
            "monitoring is configured but dcgm-exporter is disabled: these alerts can never fire",
            "enable `gpuOperator.dcgmExporter`, or drop the monitoring section",
        );
    }
    if let Some(t) = m.alerts.temperature_c {
        temperature_bound(ctx, f64::from(t));
    }
    if let Some(policy) = &ctx.bp.spec.gpu_operator.driver.upgrade_policy
        && let Some(mu) = &policy.max_unavailable
        && let Err(e) = count_or_percent(mu, true)
    {
        ctx.emit(
            "GPU095",
            "spec.gpuOperator.driver.upgradePolicy.maxUnavailable",
            e,
            "write a count such as `1` or a percentage such as `25%`",
        );
    }
    if let Some(bg) = &ctx.bp.spec.upgrades.blue_green {
        if let Err(e) = count_or_percent(&bg.batch, false) {
            ctx.emit(
                "GPU095",
                "spec.upgrades.blueGreen.batch",
                e,
                "write a count such as `2` or a percentage such as `25%`",
            );
        }
        if let Err(e) = parse_duration_ms(&bg.drain_timeout) {
            ctx.emit(
                "GPU095",
                "spec.upgrades.blueGreen.drainTimeout",
                e,
                "write e.g. `30m`",
            );
        }
    }
}

/// GPU092: the temperature alert's threshold within what a GPU reports (profiles/dcgm.yaml
/// `alert_bounds`): above the bound a GPU has shut itself down first, so the alert never fires; at or
/// below the lower one every GPU is hotter than the threshold, so it fires on all of them.
fn temperature_bound(ctx: &mut Ctx<'_>, t: f64) {
    let facts = ctx.catalog.dcgm();
    let b = facts.alert_bounds.temperature_c;
    let default = facts.thresholds.temperature_c;
    let field = "spec.monitoring.alerts.temperatureC";
    if t > b.max {
        ctx.emit(
            "GPU092",
            field,
            format!(
                "{t} C is above {} C, a temperature no GPU reports: each shuts itself down at its own GPU Shutdown Temp first, so this alert can never fire",
                b.max
            ),
            format!(
                "use a threshold below the GPUs' slowdown temperature (`nvidia-smi -q -d TEMPERATURE` on a node shows it); gpuctl's default is {default} C"
            ),
        );
    } else if t <= b.min {
        ctx.emit(
            "GPU092",
            field,
            format!(
                "{t} C is at or below {} C: a GPU is never cooler than the air that cools it ({} C is the bottom of ASHRAE's recommended inlet range), so the alert fires on every GPU",
                b.min, b.min
            ),
            format!(
                "use a threshold the GPUs only pass when they overheat, such as gpuctl's default {default} C; to drop the alert, remove `temperatureC`"
            ),
        );
    }
}

/// A positive count or a percentage in (0, 100] (`allow_zero` admits 0 / `0%`).
pub(crate) fn count_or_percent(v: &IntOrString, allow_zero: bool) -> Result<(), String> {
    let low = if allow_zero { 0 } else { 1 };
    match v {
        IntOrString::Int(i) if *i >= low => Ok(()),
        IntOrString::Int(i) => Err(format!("{i} is below {low}")),
        IntOrString::String(s) => match s.strip_suffix('%').map(str::parse::<u32>) {
            Some(Ok(p)) if i64::from(p) >= low && p <= 100 => Ok(()),
            Some(Ok(p)) => Err(format!("{p}% is outside {low}%..100%")),
            _ => match s.parse::<i64>() {
                Ok(i) if i >= low => Ok(()),
                _ => Err(format!("`{s}` is neither a count nor a percentage")),
            },
        },
    }
}
