//! `gpuctl report BLUEPRINT --prometheus URL`: GPU-hours allocated, used, idle, unknown and
//! borrowed, and their cost, per day and per tenant (pool, GPU model, queue), from the series the
//! blueprint's accounting rules are built on (docs/report.md). Exit 0 with a report, 1 when
//! Prometheus fails, 64 for a wrong command line or a blueprint without `accounting`.

use std::io::Write;

use gpuctl_accounting::{By, Window};
use gpuctl_model::profiles::Catalog;
use gpuctl_model::{blueprint, input};
use gpuctl_pipeline::render::accounting::AccountingTable;

use super::{CommandError, CommandResult, emit, runtime};
use crate::args::{ReportArgs, ReportBy, ReportFormat};
use crate::exit::ExitStatus;
use crate::{output, settings};

/// Runs the command.
pub fn run(a: &ReportArgs, out: &mut dyn Write) -> CommandResult {
    if let Some(svg) = &a.svg {
        super::status::check_target(svg)?;
    }
    let step = duration_s("--step", &a.step)?;
    let timeout = duration_s("--timeout", &a.timeout)?;
    let now = jiff::Timestamp::now().as_second();
    let until = match &a.until {
        Some(w) => instant("--until", w)?,
        None => now,
    };
    let since = match duration_s("--since", &a.since) {
        Ok(d) => until - d,
        Err(_) => instant("--since", &a.since)?,
    };
    let window = Window::new(since, until, step)
        .map_err(|e| CommandError::Usage(format!("--since/--until/--step: {e}")))?;
    let catalog = Catalog::embedded();
    let bytes = input::read(&a.blueprint, &input::BLUEPRINT)?;
    let file = input::name(&a.blueprint);
    let loaded = blueprint::load_bytes(&file, bytes).map_err(|report| {
        eprint!("{}", output::human(&[report], settings::stderr_style()));
        CommandError::Reported
    })?;
    // An accounting section that does not validate would charge names the blueprint does not
    // have or weigh slices by guess: refused with its findings. Other findings (a driver past its
    // end of life) do not change past GPU-hours and are left to `gpuctl validate`.
    let today = settings::today(None)?;
    let mut checked = gpuctl_pipeline::validate::check(
        &loaded,
        catalog,
        gpuctl_pipeline::validate::Options { today },
    );
    checked.findings.retain(|f| {
        f.severity == gpuctl_model::located::Severity::Error
            && gpuctl_model::finding::rule(f.rule).is_some_and(|r| r.area == "accounting")
    });
    if !checked.findings.is_empty() {
        eprint!("{}", output::human(&[checked], settings::stderr_style()));
        return Err(CommandError::Reported);
    }
    let table = AccountingTable::new(&loaded.blueprint, catalog).ok_or_else(|| {
        CommandError::Usage(format!(
            "{file} has no `spec.accounting`: add it (prices, weighting, idle threshold; docs/report.md) to report GPU-hours"
        ))
    })?;
    let mut cfg = super::doctor::prometheus_config(
        &a.prometheus,
        a.prometheus_token_file.as_deref(),
        a.prometheus_ca_file.as_deref(),
    )?;
    cfg.timeout = std::time::Duration::from_secs(timeout.max(1) as u64);
    let by = match a.by {
        ReportBy::Tenant => By::Tenant,
        ReportBy::Pool => By::Pool,
        ReportBy::Model => By::Model,
        ReportBy::Queue => By::Queue,
    };
    let run = runtime()?
        .block_on(gpuctl_cluster::accounting::report(&cfg, &table, window, by))
        .map_err(|e| CommandError::Failed(e.to_string()))?;
    if let Some(path) = &a.svg {
        super::status::write_new_file(path, output::report::svg(&run.report).as_bytes())?;
        eprintln!("wrote the report picture to {}", path.display());
    }
    let text = match a.output {
        ReportFormat::Human => output::report::human(&run.report),
        ReportFormat::Csv => output::report::csv(&run.report),
        ReportFormat::Json => output::report::json(&run.report),
        ReportFormat::Markdown => output::report::markdown(&run.report),
    };
    emit(out, &text);
    Ok(ExitStatus::Success)
}

/// `30d`, `12h`, `15m`, `30s`, `2w` in seconds.
fn duration_s(flag: &str, text: &str) -> Result<i64, CommandError> {
    let bad = || {
        CommandError::Usage(format!(
            "{flag} `{text}` is not a duration (examples: 30d, 12h, 15m)"
        ))
    };
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = t.split_at(split);
    let n: i64 = n.parse().map_err(|_| bad())?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).filter(|s| *s > 0).ok_or_else(bad)
}

/// A date (UTC midnight) or an RFC 3339 time, in unix seconds.
fn instant(flag: &str, text: &str) -> Result<i64, CommandError> {
    let t = text.trim();
    if let Ok(ts) = t.parse::<jiff::Timestamp>() {
        return Ok(ts.as_second());
    }
    t.parse::<jiff::civil::Date>()
        .ok()
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .map(|z| z.timestamp().as_second())
        .ok_or_else(|| {
            CommandError::Usage(format!(
                "{flag} `{text}` is neither a duration (30d), a date (2026-11-01) nor an RFC 3339 time"
            ))
        })
}
