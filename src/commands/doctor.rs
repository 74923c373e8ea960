//! `gpuctl doctor`: the blueprint (the intended cluster) side by side with the real one (live, or
//! a `gpuctl snapshot --diagnostics` file), answered as findings by runbook layer. Exit 0 when no
//! finding is an error, 1 otherwise, 64 for a wrong command line.

use std::io::Write;
use std::path::Path;

use gpuctl_day2::diagnostics::Diagnostics;
use gpuctl_day2::doctor;
use gpuctl_day2::snapshot::Snapshot;
use gpuctl_model::located::Severity;
use gpuctl_model::profiles::Catalog;
use gpuctl_model::{blueprint, input};
use gpuctl_pipeline::validate;

use super::{CommandError, CommandResult, connect, emit, runtime};
use crate::args::{ClusterArgs, DoctorFormat, PrometheusArgs};
use crate::exit::ExitStatus;
use crate::{output, settings};

/// What `gpuctl doctor` was asked to do.
pub struct DoctorCommand<'a> {
    /// Blueprint.
    pub blueprint: &'a Path,
    /// Connection.
    pub cluster: &'a ClusterArgs,
    /// `--snapshot`.
    pub snapshot: Option<&'a Path>,
    /// Output format.
    pub format: DoctorFormat,
    /// `--today`.
    pub today: Option<&'a str>,
    /// `--prometheus` and its options.
    pub metrics: &'a PrometheusArgs,
}

/// Runs the command.
pub fn run(cmd: DoctorCommand<'_>, out: &mut dyn Write) -> CommandResult {
    if input::is_stdin(cmd.blueprint) && cmd.snapshot.is_some_and(input::is_stdin) {
        return Err(CommandError::Usage(
            "the blueprint and --snapshot cannot both be `-` (standard input); give the snapshot as a file".into(),
        ));
    }
    let today = settings::today(cmd.today)?;
    let catalog = Catalog::embedded();
    let bytes = input::read(cmd.blueprint, &input::BLUEPRINT)?;
    let file = input::name(cmd.blueprint);
    let loaded = blueprint::load_bytes(&file, bytes).map_err(|report| {
        eprint!("{}", output::human(&[report], settings::stderr_style()));
        CommandError::Reported
    })?;
    // An invalid blueprint is still the intended cluster: doctor compares with it as written,
    // and says so (the driver/CUDA mismatch validation finds is one doctor confirms live).
    let report = validate::check(&loaded, catalog, validate::Options { today });
    let errors = report.count(Severity::Error);
    if errors > 0 {
        eprintln!(
            "note: the blueprint has {errors} validation error{} (`gpuctl validate {}`); doctor compares the cluster with it as written",
            if errors == 1 { "" } else { "s" },
            cmd.blueprint.display()
        );
    }
    let bp = loaded.blueprint;
    let (d, list_requests) = diagnostics(&cmd, &bp.spec.gpu_operator.namespace)?;
    let shown = cmd.blueprint.display().to_string();
    let mut r = doctor::diagnose(&bp, catalog, &d, &shown);
    r.read = list_requests.map(|list_requests| doctor::ReadCost { list_requests });
    if let Some(url) = &cmd.metrics.prometheus {
        // With `accounting`, its idle window is the default: doctor's idle finding and the
        // accounting alert then judge the same span (docs/report.md).
        let idle = cmd.metrics.idle_window.as_deref().or(bp
            .spec
            .accounting
            .as_ref()
            .map(|a| a.idle.for_.as_str()));
        // ... and its idle check is the accounting alert's condition (GPU260 on pods).
        let accounting = gpuctl_pipeline::render::accounting::AccountingTable::new(&bp, catalog)
            .map(|t| gpuctl_day2::metrics::AccountingIdle::of(&t));
        let run = metric_findings(
            cmd.metrics,
            url,
            bp.spec.monitoring.alerts.temperature_c,
            idle,
            accounting,
        )?;
        r.extend(run.findings.iter().map(|f| f.to_doctor()));
    }
    let text = match cmd.format {
        DoctorFormat::Human => output::doctor::human(&r, settings::stdout_style()),
        DoctorFormat::Json => output::doctor::json(&r),
        DoctorFormat::Markdown => output::doctor::markdown(&r),
    };
    emit(out, &text);
    Ok(if r.has_errors() {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

/// The reading: from the snapshot, or live (with the LIST requests it took).
fn diagnostics(
    cmd: &DoctorCommand<'_>,
    operator_namespace: &str,
) -> Result<(Diagnostics, Option<u64>), CommandError> {
    if let Some(path) = cmd.snapshot {
        let snap = Snapshot::read(path)?;
        return snap.diagnostics.map(|d| (d, None)).ok_or_else(|| {
            CommandError::Failed(format!(
                "snapshot `{}` has no diagnostics (it was captured without them); capture one with `gpuctl snapshot {} --diagnostics --out FILE`",
                input::name(path),
                cmd.blueprint.display()
            ))
        });
    }
    let now = jiff::Timestamp::now();
    let now = now.round(jiff::Unit::Second).unwrap_or(now).to_string();
    runtime()?.block_on(async {
        let k = connect(
            cmd.cluster,
            Some("or run it on a snapshot: `gpuctl snapshot BLUEPRINT --diagnostics --out FILE` where the cluster is reachable, then `gpuctl doctor BLUEPRINT --snapshot FILE`"),
        )
        .await?;
        let reading = gpuctl_cluster::diagnostics::read(
            &k,
            gpuctl_day2::diagnostics::DOCTOR_READS,
            operator_namespace,
            Some(now),
        )
        .await?;
        Ok::<_, CommandError>((reading.diagnostics, Some(reading.list_requests)))
    })
}

/// Token files are small; a larger one is a wrong path.
const MAX_TOKEN_BYTES: u64 = 64 * 1024;

/// Doctor's metric findings from `--prometheus` (docs/doctor-metrics.md).
fn metric_findings(
    args: &PrometheusArgs,
    url: &str,
    temperature_c: Option<u32>,
    idle_window: Option<&str>,
    accounting: Option<gpuctl_day2::metrics::AccountingIdle>,
) -> Result<gpuctl_cluster::prometheus::MetricRun, CommandError> {
    use gpuctl_cluster::prometheus as prom;
    let facts = Catalog::embedded().dcgm();
    let settings = gpuctl_day2::metrics::MetricSettings::new(facts, temperature_c, idle_window)
        .map_err(|e| CommandError::Usage(e.to_string()))?
        .with_accounting(accounting);
    let cfg = prometheus_config(
        url,
        args.prometheus_token_file.as_deref(),
        args.prometheus_ca_file.as_deref(),
    )?;
    runtime()?
        .block_on(prom::metric_findings(&cfg, facts, &settings, None))
        .map_err(|e| CommandError::Failed(e.to_string()))
}

/// The Prometheus connection of `--prometheus`, its CA file and its bearer token (the file, or
/// GPUCTL_PROMETHEUS_TOKEN): doctor's and report's.
pub(super) fn prometheus_config(
    url: &str,
    token_file: Option<&Path>,
    ca_file: Option<&Path>,
) -> Result<gpuctl_cluster::prometheus::PrometheusConfig, CommandError> {
    use gpuctl_cluster::prometheus::{PrometheusConfig, Token};
    let mut cfg = PrometheusConfig::new(url);
    cfg.ca_file = ca_file.map(Path::to_path_buf);
    cfg.token = match token_file {
        Some(path) => {
            use std::io::Read;
            let mut text = String::new();
            std::fs::File::open(path)
                .and_then(|f| f.take(MAX_TOKEN_BYTES).read_to_string(&mut text))
                .map_err(|e| {
                    CommandError::Failed(format!(
                        "cannot read the Prometheus token file `{}`: {e}",
                        path.display()
                    ))
                })?;
            Some(Token::new(&text))
        }
        None => std::env::var("GPUCTL_PROMETHEUS_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty())
            .map(|t| Token::new(&t)),
    };
    Ok(cfg)
}
