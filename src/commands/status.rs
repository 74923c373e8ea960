//! `gpuctl status BLUEPRINT`: capacity, quotas, queues and fragmentation of the blueprint's GPU
//! pools, read live (`--kubeconfig`, `--context`) or from a diagnostics snapshot (`--snapshot FILE`,
//! taken with `gpuctl snapshot --diagnostics`); printed as tables, JSON or Markdown, and drawn as
//! an SVG picture with `--svg FILE`.

use std::io::Write;
use std::path::Path;

use gpuctl_day2::snapshot::{Snapshot, SnapshotError};
use gpuctl_day2::status::{self, StatusInput};
use gpuctl_model::blueprint::{self, Blueprint};
use gpuctl_model::input;
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::validate;

use super::{CommandError, CommandResult, connect, emit, files, runtime};
use crate::args::{ClusterArgs, StatusFormat};
use crate::exit::ExitStatus;
use crate::output::status as print;
use crate::settings;

/// What `gpuctl status` was asked.
pub struct StatusCommand<'a> {
    /// Blueprint file (`-`: standard input).
    pub blueprint: &'a Path,
    /// Cluster connection (live).
    pub cluster: &'a ClusterArgs,
    /// A diagnostics snapshot instead of the cluster.
    pub snapshot: Option<&'a Path>,
    /// How to print.
    pub format: StatusFormat,
    /// Where to draw the picture.
    pub svg: Option<&'a Path>,
    /// Where the last hour's GPU use comes from (`--prometheus`).
    pub prometheus: Option<LastHourSource<'a>>,
}

/// `--prometheus URL` and its settings.
pub struct LastHourSource<'a> {
    /// Prometheus base URL.
    pub url: &'a str,
    /// Bearer token file.
    pub token_file: Option<&'a Path>,
    /// CA file.
    pub ca_file: Option<&'a Path>,
    /// End of the hour (RFC 3339), default now.
    pub until: Option<&'a str>,
}

/// Runs the command.
pub fn run(cmd: StatusCommand<'_>, out: &mut dyn Write) -> CommandResult {
    if let Some(svg) = cmd.svg {
        check_target(svg)?;
    }
    let bp = load(cmd.blueprint)?;
    // Refused before any read: a blueprint without accounting has no rules to judge idleness by.
    let table = match &cmd.prometheus {
        Some(_) => Some(
            gpuctl_pipeline::render::accounting::AccountingTable::new(&bp, Catalog::embedded())
                .ok_or_else(|| {
                    CommandError::Usage(format!(
                        "--prometheus: {} has no `spec.accounting`; the last hour's idle GPUs are computed with its rules (docs/report.md)",
                        input::name(cmd.blueprint)
                    ))
                })?,
        ),
        None => None,
    };
    let (input, source) = match cmd.snapshot {
        Some(path) => read_snapshot(path)?,
        None => read_live(cmd.cluster, &bp)?,
    };
    let mut report = status::compute(&bp, &input, &source);
    if let (Some(src), Some(table)) = (&cmd.prometheus, &table) {
        report.last_hour = Some(last_hour(src, &bp, table)?);
    }
    if let Some(path) = cmd.svg {
        write_new_file(path, print::svg::svg(&report).as_bytes())?;
        eprintln!("wrote the status picture to {}", path.display());
    }
    let text = match cmd.format {
        StatusFormat::Human => print::human(&report),
        StatusFormat::Json => print::json(&report),
        StatusFormat::Markdown => print::markdown(&report),
    };
    emit(out, &text);
    Ok(ExitStatus::Success)
}

/// Loads and validates the blueprint (validation bounds what status draws: pool sizes, GPU counts,
/// MIG layouts); findings that stop it are printed.
fn load(path: &Path) -> Result<Blueprint, CommandError> {
    let bytes = input::read(path, &input::BLUEPRINT)?;
    let loaded = blueprint::load_bytes(&input::name(path), bytes).map_err(|report| {
        eprint!(
            "{}",
            crate::output::human(&[report], settings::stderr_style())
        );
        CommandError::Reported
    })?;
    let today = settings::today(None)?;
    let validated = validate::validate(loaded, Catalog::embedded(), validate::Options { today })
        .map_err(|report| {
            eprint!(
                "{}",
                crate::output::human(&[report], settings::stderr_style())
            );
            CommandError::Failed(format!(
                "fix the findings above before showing the status (`gpuctl validate {}`)",
                path.display()
            ))
        })?;
    Ok(validated.blueprint().clone())
}

/// The hour ending at `--until` (or now, to the minute), per pool, as `gpuctl report --by pool`
/// computes it.
fn last_hour(
    src: &LastHourSource<'_>,
    bp: &Blueprint,
    table: &gpuctl_pipeline::render::accounting::AccountingTable,
) -> Result<status::LastHour, CommandError> {
    const HOUR: i64 = 3600;
    const STEP: i64 = 60;
    let until = match src.until {
        Some(t) => t
            .trim()
            .parse::<jiff::Timestamp>()
            .map_err(|e| CommandError::Usage(format!("--until `{t}`: {e} (RFC 3339)")))?
            .as_second(),
        None => jiff::Timestamp::now().as_second(),
    };
    let until = until - until.rem_euclid(STEP);
    let window = gpuctl_accounting::Window::new(until - HOUR, until, STEP)
        .map_err(|e| CommandError::Usage(format!("--until: {e}")))?;
    let cfg = super::doctor::prometheus_config(src.url, src.token_file, src.ca_file)?;
    let run = runtime()?
        .block_on(gpuctl_cluster::accounting::report(
            &cfg,
            table,
            window,
            gpuctl_accounting::By::Pool,
        ))
        .map_err(|e| CommandError::Failed(e.to_string()))?;
    let rows: Vec<(String, f64, f64, f64, f64)> = run
        .report
        .totals
        .iter()
        .map(|r| {
            let f = &r.figures;
            (r.key.clone(), f.allocated, f.used, f.idle, f.unknown)
        })
        .collect();
    let at = |t: i64| {
        jiff::Timestamp::from_second(t)
            .map(|t| t.to_string())
            .unwrap_or_default()
    };
    Ok(status::LastHour::of(bp, at(until - HOUR), at(until), &rows))
}

fn read_snapshot(path: &Path) -> Result<(StatusInput, String), CommandError> {
    let snap = Snapshot::read(path)?;
    let diag = snap.diagnostics.as_ref().ok_or_else(|| {
        CommandError::Snapshot(SnapshotError::Lacks {
            path: input::name(path),
            what: "holds no Day-2 diagnostics; capture them with `gpuctl snapshot BLUEPRINT --diagnostics --out FILE`".into(),
        })
    })?;
    let source = format!(
        "snapshot {}{}",
        input::name(path),
        snap.captured_at
            .as_deref()
            .map(|t| format!(" (captured {t})"))
            .unwrap_or_default()
    );
    Ok((StatusInput::from_diagnostics(diag), source))
}

fn read_live(cluster: &ClusterArgs, bp: &Blueprint) -> Result<(StatusInput, String), CommandError> {
    let now = jiff::Timestamp::now();
    let now = now.round(jiff::Unit::Second).unwrap_or(now).to_string();
    runtime()?.block_on(async {
        let k = connect(
            cluster,
            Some("or run it on a snapshot: `gpuctl snapshot BLUEPRINT --diagnostics --out FILE` where the cluster is reachable, then `gpuctl status BLUEPRINT --snapshot FILE`"),
        )
        .await?;
        let reading =
            gpuctl_cluster::diagnostics::read(
            &k,
            gpuctl_day2::diagnostics::STATUS_READS,
            &bp.spec.gpu_operator.namespace,
            Some(now),
        )
                .await?;
        let source = format!("cluster {}", k.server);
        Ok::<_, CommandError>((StatusInput::from_diagnostics(&reading.diagnostics), source))
    })
}

/// Refuses, before any work, a picture path that is a directory or whose directory does not exist.
pub(super) fn check_target(path: &Path) -> Result<(), CommandError> {
    let fail = |why: &str| {
        Err(CommandError::Usage(format!(
            "--svg `{}`: {why}",
            path.display()
        )))
    };
    if path.as_os_str().is_empty() || path.file_name().is_none() {
        return fail("name a file");
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return fail("is a directory; name a file in it");
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if parent.is_some_and(|p| !p.is_dir()) {
        return fail("its directory does not exist");
    }
    Ok(())
}

/// Writes the picture whole ([`files::write_atomically`]) after [`check_target`]: a directory at
/// `path` is refused, a symlink replaced rather than followed.
pub fn write_new_file(path: &Path, bytes: &[u8]) -> Result<(), CommandError> {
    check_target(path)?;
    files::write_atomically(path, bytes, files::Readers::Default).map_err(|source| {
        CommandError::Write {
            path: path.display().to_string(),
            source,
        }
    })
}
