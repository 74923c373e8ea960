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
}

/// Runs the command.
pub fn run(cmd: StatusCommand<'_>, out: &mut dyn Write) -> CommandResult {
    if let Some(svg) = cmd.svg {
        check_target(svg)?;
    }
    let bp = load(cmd.blueprint)?;
    let (input, source) = match cmd.snapshot {
        Some(path) => read_snapshot(path)?,
        None => read_live(cmd.cluster, &bp)?,
    };
    let report = status::compute(&bp, &input, &source);
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
