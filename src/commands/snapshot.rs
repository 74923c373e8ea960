//! `gpuctl snapshot`: the live state a blueprint's plan reads, saved so CI can plan without
//! cluster credentials.

use std::path::Path;

use gpuctl_cluster::read;

use super::files::write_owner_only;
use super::pipeline::render_file;
use super::{CommandError, CommandResult, connect, runtime};
use crate::args::{ClusterArgs, RenderArgs};
use crate::exit::ExitStatus;
use crate::settings;

/// Runs the command.
pub fn run(
    blueprint: &Path,
    cluster: &ClusterArgs,
    file: &Path,
    render: &RenderArgs,
    diagnostics: bool,
) -> CommandResult {
    let today = settings::today(render.today.as_deref())?;
    let set = render_file(blueprint, today, render.templates.as_deref(), "planning")?.set;
    let now = captured_now();
    let mut snap = runtime()?.block_on(async {
        let k = connect(cluster, None).await?;
        let mut snap = read::snapshot(&k, &set).await?;
        if diagnostics {
            let reading = gpuctl_cluster::diagnostics::read(
                &k,
                gpuctl_day2::diagnostics::DOCTOR_READS,
                &set.helm.namespace,
                Some(now.clone()),
            )
            .await?;
            snap.diagnostics = Some(reading.diagnostics);
        }
        Ok::<_, CommandError>(snap)
    })?;
    // Plans made from the snapshot say when it was taken (they never contact the cluster).
    snap.captured_at = Some(now);
    write_snapshot(
        &snap,
        file,
        if diagnostics {
            " with diagnostics for `gpuctl doctor --snapshot`"
        } else {
            ""
        },
    )
}

/// Writes `snap` owner-only (it holds the live Helm release's values unmasked: plans diff them,
/// like a saved plan) and says what it wrote.
fn write_snapshot(
    snap: &gpuctl_day2::snapshot::Snapshot,
    file: &Path,
    purpose: &str,
) -> CommandResult {
    write_owner_only(file, snap.to_json().as_bytes()).map_err(|source| CommandError::Write {
        path: file.display().to_string(),
        source,
    })?;
    eprintln!(
        "wrote {} objects and {} nodes to {}{purpose} (mode 0600: it holds the live Helm values unmasked)",
        snap.objects.len(),
        snap.nodes.len(),
        file.display()
    );
    Ok(ExitStatus::Success)
}

/// `gpuctl snapshot --all`: everything `gpuctl import` reads, and the diagnostics `gpuctl doctor`
/// and `gpuctl status` read, so one capture of a cluster CI cannot reach serves all three.
pub fn run_all(cluster: &ClusterArgs, file: &Path) -> CommandResult {
    let now = captured_now();
    let (view, ctx, diagnostics) = runtime()?.block_on(async {
        let k = connect(cluster, None).await?;
        let (view, ctx) = gpuctl_cluster::import::everything(&k).await?;
        // The operator's namespace is the one import found its release in (its pods are kept
        // whole there), else the blueprint's default.
        let operator_namespace = ctx
            .operator_namespace
            .clone()
            .unwrap_or_else(gpuctl_model::blueprint::default_operator_namespace);
        let reading = gpuctl_cluster::diagnostics::read(
            &k,
            gpuctl_day2::diagnostics::DOCTOR_READS,
            &operator_namespace,
            Some(now.clone()),
        )
        .await?;
        Ok::<_, CommandError>((view, ctx, reading.diagnostics))
    })?;
    let mut snap = gpuctl_day2::snapshot::Snapshot::capture_all(&view, &ctx);
    snap.diagnostics = Some(diagnostics);
    snap.captured_at = Some(now);
    write_snapshot(
        &snap,
        file,
        " for `gpuctl import --snapshot`, `gpuctl doctor --snapshot` and `gpuctl status --snapshot`",
    )
}

/// Now, in UTC to the second (`2026-11-30T11:12:20Z`).
pub(super) fn captured_now() -> String {
    let now = jiff::Timestamp::now();
    now.round(jiff::Unit::Second).unwrap_or(now).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn capture_time_is_utc_to_the_second() {
        let t = super::captured_now();
        assert!(t.ends_with('Z') && !t.contains('.'), "{t}");
        assert!(t.parse::<jiff::Timestamp>().is_ok(), "{t}");
    }
}
