//! `gpuctl snapshot`: the live state a blueprint's plan reads, saved so CI can plan without
//! cluster credentials.

use std::path::Path;

use gpuctl_cluster::read;

use super::pipeline::render_file;
use super::plan::write_owner_only;
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
) -> CommandResult {
    let today = settings::today(render.today.as_deref())?;
    let set = render_file(blueprint, today, render.templates.as_deref(), "planning")?.set;
    let snap = runtime()?.block_on(async {
        let k = connect(cluster, None).await?;
        Ok::<_, CommandError>(read::snapshot(&k, &set).await?)
    })?;
    // A snapshot holds the live Helm release's values unmasked (plans diff them): owner-only,
    // like a saved plan.
    write_owner_only(file, snap.to_json().as_bytes()).map_err(|source| CommandError::Write {
        path: file.display().to_string(),
        source,
    })?;
    eprintln!(
        "wrote {} objects and {} nodes to {} (mode 0600: it holds the live Helm values unmasked)",
        snap.objects.len(),
        snap.nodes.len(),
        file.display()
    );
    Ok(ExitStatus::Success)
}
