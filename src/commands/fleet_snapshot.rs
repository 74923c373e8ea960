//! `gpuctl fleet snapshot FLEET -o DIR`: `gpuctl snapshot` for every cluster of a fleet, through
//! each cluster's kubeconfig context, into `DIR/<cluster>.json`: the files `fleet plan
//! --snapshot-dir DIR` reads. Each cluster's snapshot reads what its effective output touches,
//! MultiKueue objects included (a `gpuctl snapshot` of the cluster's blueprint alone would miss
//! them, and a plan from it would create what already exists).

use std::io::Write;
use std::path::{Path, PathBuf};

use gpuctl_fleet::LoadedFleet;

use super::files::write_owner_only;
use super::{CommandError, CommandResult, connect, emit, runtime};
use crate::args::ClusterArgs;
use crate::exit::ExitStatus;

/// Runs the command: one failing cluster is named and the others are still captured (exit 1).
pub fn run(
    fleet: &LoadedFleet,
    dir: &Path,
    kubeconfig: Option<&PathBuf>,
    templates: Option<&Path>,
    today: jiff::civil::Date,
    out: &mut dyn Write,
) -> CommandResult {
    prepare(dir)?;
    let rt = runtime()?;
    let mut failed = 0usize;
    let clusters = &fleet.fleet.spec.clusters;
    for (i, cluster) in clusters.iter().enumerate() {
        let file = dir.join(format!("{}.json", cluster.name));
        match one(fleet, i, kubeconfig, templates, today, &rt, &file) {
            Ok((objects, nodes)) => emit(
                out,
                &format!(
                    "{}: {objects} objects and {nodes} nodes to {} (context {})\n",
                    cluster.name,
                    file.display(),
                    cluster.context.as_deref().unwrap_or("(none)")
                ),
            ),
            Err(e) => {
                failed += 1;
                emit(out, &format!("{}: not captured: {e}\n", cluster.name));
            }
        }
    }
    emit(
        out,
        &format!(
            "{} of {} cluster(s) captured in {} (mode 0600: snapshots hold live Helm values unmasked); plan with `gpuctl fleet plan FLEET --snapshot-dir {}`\n",
            clusters.len() - failed,
            clusters.len(),
            dir.display(),
            dir.display()
        ),
    );
    Ok(if failed == 0 {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// `DIR` exists as a directory (created if missing); a link or a file there is refused, so no
/// snapshot is written through a link somewhere else.
fn prepare(dir: &Path) -> Result<(), CommandError> {
    let refuse = |why: &str| CommandError::Failed(format!("{}: {why}", dir.display()));
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(refuse(
            "not a directory (or a link): give a directory for the snapshots",
        )),
        Err(_) => std::fs::create_dir_all(dir).map_err(|source| CommandError::Write {
            path: dir.display().to_string(),
            source,
        }),
    }
}

/// One cluster: its effective output (as `fleet plan` renders it), read live, written owner-only.
/// Returns the object and node counts; errors are one line that names files and contexts only.
fn one(
    fleet: &LoadedFleet,
    i: usize,
    kubeconfig: Option<&PathBuf>,
    templates: Option<&Path>,
    today: jiff::civil::Date,
    rt: &tokio::runtime::Runtime,
    file: &Path,
) -> Result<(usize, usize), String> {
    let cluster = &fleet.fleet.spec.clusters[i];
    let Some(context) = &cluster.context else {
        return Err(
            "no `context` in the fleet file: a snapshot needs each cluster's kubeconfig context"
                .into(),
        );
    };
    let loaded = fleet
        .load_cluster(i)
        .ok_or_else(|| "its blueprint cannot be read".to_string())?;
    let blueprint = fleet.root.join(&cluster.blueprint);
    let next = format!("taking the snapshot of cluster `{}`", cluster.name);
    let mut rendered = super::pipeline::render_loaded(
        loaded.map_err(|b| b.report),
        &blueprint,
        today,
        templates,
        &next,
    )
    .map_err(|e| one_line(&e))?;
    gpuctl_fleet::multikueue::add(
        &fleet.fleet,
        &cluster.name,
        fleet.manager_frameworks(),
        &mut rendered.set.objects,
    );
    let args = ClusterArgs {
        kubeconfig: kubeconfig.cloned(),
        context: Some(context.clone()),
    };
    let mut snap = rt
        .block_on(async {
            let k = connect(&args, None).await?;
            Ok::<_, CommandError>(gpuctl_cluster::read::snapshot(&k, &rendered.set).await?)
        })
        .map_err(|e| one_line(&e))?;
    snap.captured_at = Some(super::snapshot::captured_now());
    write_owner_only(file, snap.to_json().as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    Ok((snap.objects.len(), snap.nodes.len()))
}

fn one_line(e: &CommandError) -> String {
    e.to_string().lines().collect::<Vec<_>>().join(" ")
}
