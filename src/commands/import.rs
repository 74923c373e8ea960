//! `gpuctl import`: the blueprint of a running cluster, read live or from `gpuctl snapshot --all`,
//! written to standard output or `--out FILE`; what gpuctl cannot express is a comment in the
//! blueprint and a warning on stderr.

use std::io::Write;
use std::path::Path;

use gpuctl_day2::import::{ImportOptions, import};
use gpuctl_day2::snapshot::{Snapshot, SnapshotError};
use gpuctl_model::profiles::Catalog;

use super::{CommandError, CommandResult, connect, emit, runtime};
use crate::args::ClusterArgs;
use crate::exit::ExitStatus;
use crate::settings;

/// Runs the command.
pub fn run(
    cluster: &ClusterArgs,
    snapshot: Option<&Path>,
    file: Option<&Path>,
    name: Option<String>,
    today: Option<&str>,
    out: &mut dyn Write,
) -> CommandResult {
    let today = settings::today(today)?;
    let max = Catalog::embedded()
        .limits()
        .kubernetes_names
        .dns1123_label_max_length;
    if let Some(n) = &name
        && !gpuctl_model::names::is_dns_label(n, max)
    {
        return Err(CommandError::Usage(format!(
            "--name `{n}` is not a DNS-1123 label (lower-case letters, digits and `-`, at most {max} characters); it names the blueprint's ApplySet"
        )));
    }
    let (live, ctx) = match snapshot {
        Some(path) => {
            let snap = Snapshot::read(path)?;
            snap.into_import_view().ok_or_else(|| {
                CommandError::Snapshot(SnapshotError::Lacks {
                    path: gpuctl_model::input::name(path),
                    what: "was captured for one blueprint and lacks most of what import reads; capture one with `gpuctl snapshot --all --out FILE`".into(),
                })
            })?
        }
        None => runtime()?.block_on(async {
            let k = connect(
                cluster,
                Some("import can also read a snapshot: `gpuctl snapshot --all --out FILE` where the cluster is reachable, then `gpuctl import --snapshot FILE`"),
            )
            .await?;
            Ok::<_, CommandError>(gpuctl_cluster::import::everything(&k).await?)
        })?,
    };
    let imported = import(
        &live,
        &ctx,
        Catalog::embedded(),
        &ImportOptions { name, today },
    );
    for w in &imported.warnings {
        eprintln!("warning[{}]: {w}", w.id);
    }
    match file {
        Some(path) => {
            std::fs::write(path, imported.yaml.as_bytes()).map_err(|source| {
                CommandError::Write {
                    path: path.display().to_string(),
                    source,
                }
            })?;
            let c = imported.plan_counts;
            eprintln!(
                "wrote {}{}: a plan of it adopts {} object(s), leaves {} unchanged, creates {} and changes {}",
                path.display(),
                if imported.valid {
                    ""
                } else {
                    " (it does not validate yet: see its comments)"
                },
                c.adopt,
                c.unchanged,
                c.create,
                c.change
            );
        }
        None => emit(out, &imported.yaml),
    }
    Ok(ExitStatus::Success)
}
