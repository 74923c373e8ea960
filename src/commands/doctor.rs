//! `gpuctl doctor`: the blueprint (the intended cluster) side by side with the real one (live, or
//! a `gpuctl snapshot --diagnostics` file), answered as findings by runbook layer. Exit 0 when no
//! finding is an error, 1 otherwise, 64 for a wrong command line.

use std::io::Write;
use std::path::Path;

use gpuctl_core::diag::Severity;
use gpuctl_core::diagnostics::Diagnostics;
use gpuctl_core::profiles::Catalog;
use gpuctl_core::snapshot::Snapshot;
use gpuctl_core::{blueprint, doctor, input, validate};

use super::{CommandError, CommandResult, connect, emit, runtime};
use crate::args::{ClusterArgs, DoctorFormat};
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
    let d = diagnostics(&cmd, &bp.spec.gpu_operator.namespace)?;
    let shown = cmd.blueprint.display().to_string();
    let r = doctor::diagnose(&bp, catalog, &d, &shown);
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

/// The reading: from the snapshot, or live.
fn diagnostics(
    cmd: &DoctorCommand<'_>,
    operator_namespace: &str,
) -> Result<Diagnostics, CommandError> {
    if let Some(path) = cmd.snapshot {
        let snap = Snapshot::read(path)?;
        return snap.diagnostics.ok_or_else(|| {
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
        let reading = gpuctl_cluster::diagnostics::read(&k, operator_namespace, Some(now)).await?;
        Ok::<_, CommandError>(reading.diagnostics)
    })
}
