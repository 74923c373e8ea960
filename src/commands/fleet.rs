//! `gpuctl fleet validate | render | explain` (and the dispatch of `plan` and `apply`): every cluster of a fleet file (docs/fleet.md), each through
//! the same stages as one blueprint.

use std::io::Write;
use std::path::Path;

use gpuctl_fleet::{self as fleet, LoadedFleet, gitops};
use gpuctl_model::input;
use gpuctl_model::located::FileReport;
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::validate;

use super::{CommandError, CommandResult, emit};
use crate::args::{FleetCommand, Format};
use crate::exit::ExitStatus;
use crate::output::tree::write_tree;
use crate::{output, settings};

/// Runs a `gpuctl fleet` subcommand.
pub fn run(command: FleetCommand, out: &mut dyn Write) -> CommandResult {
    match command {
        FleetCommand::Validate {
            fleet,
            output,
            strict,
            today,
        } => run_validate(&fleet, output, strict, today.as_deref(), out),
        FleetCommand::Render {
            fleet,
            output_dir,
            templates,
            today,
        } => run_render(&fleet, &output_dir, templates.as_deref(), today.as_deref()),
        FleetCommand::Plan {
            fleet,
            snapshot_dir,
            kubeconfig,
            offline,
            output,
            detailed_exitcode,
            prune_protected,
            parallelism,
            now,
            render,
            policy,
        } => {
            let today = settings::today(render.today.as_deref())?;
            let policies = super::policy::load(&policy)?;
            let loaded = checked(&fleet, today, "planning")?;
            let cmd = super::fleet_plan::FleetPlanCommand {
                snapshot_dir: snapshot_dir.as_deref(),
                kubeconfig,
                offline,
                format: output,
                detailed_exitcode,
                settings: super::plan::PlanSettings {
                    prune_protected,
                    force_migration: false,
                    parallelism: usize::from(parallelism),
                    unreachable_hint: "no cluster? plan from snapshots with --snapshot-dir DIR, or without cluster state with --offline",
                },
                now: now.as_deref(),
                templates: render.templates.as_deref(),
                today,
                policy: &policy,
                policies: policies.as_ref(),
            };
            super::fleet_plan::run(&cmd, &loaded, out)
        }
        FleetCommand::Snapshot {
            fleet,
            output_dir,
            kubeconfig,
            render,
        } => {
            let today = settings::today(render.today.as_deref())?;
            let loaded = checked(&fleet, today, "taking snapshots")?;
            super::fleet_snapshot::run(
                &loaded,
                &output_dir,
                kubeconfig.as_ref(),
                render.templates.as_deref(),
                today,
                out,
            )
        }
        FleetCommand::Explain {
            fleet,
            cluster,
            field,
        } => run_explain(&fleet, &cluster, &field, out),
        FleetCommand::Apply {
            fleet,
            wave,
            kubeconfig,
            prune_protected,
            parallelism,
            wait_timeout,
            crd_timeout,
            no_helm,
            lock_timeout,
            lock_duration,
            webhook_timeout,
            yes,
            render,
        } => {
            let today = settings::today(render.today.as_deref())?;
            let options = gpuctl_cluster::apply::ApplyOptions {
                parallelism: usize::from(parallelism),
                crd_timeout: settings::duration("crd-timeout", &crd_timeout)?,
                wait_timeout: settings::duration("wait-timeout", &wait_timeout)?,
                run_helm: !no_helm,
                lock_timeout: settings::duration("lock-timeout", &lock_timeout)?,
                lock_duration: settings::at_least(
                    "lock-duration",
                    &lock_duration,
                    std::time::Duration::from_secs(1),
                )?,
                ..gpuctl_cluster::apply::ApplyOptions::default()
            };
            let loaded = checked(&fleet, today, "applying")?;
            let cmd = super::fleet_apply::FleetApplyCommand {
                fleet_file: &fleet,
                wave: wave.as_deref(),
                kubeconfig,
                prune_protected,
                options,
                webhook_timeout: settings::duration("webhook-timeout", &webhook_timeout)?,
                yes,
                render: &render,
                today,
            };
            super::fleet_apply::run(&cmd, &loaded, out)
        }
    }
}

/// `fleet validate`: the fleet file's findings, then each cluster's (messages name the
/// cluster, each finding in the file that set the value); exit codes as `gpuctl validate`.
fn run_validate(
    path: &Path,
    format: Format,
    strict: bool,
    today: Option<&str>,
    out: &mut dyn Write,
) -> CommandResult {
    let today = settings::today(today)?;
    let reports =
        fleet::check_path(path, Catalog::embedded(), validate::Options { today })?.reports();
    let text = match format {
        Format::Human => output::human(&reports, settings::stdout_style()),
        Format::Json => output::json(&reports),
        Format::Sarif => output::sarif(&reports),
    };
    emit(out, &text);
    let s = output::summary(&reports);
    Ok(if s.errors > 0 || (strict && s.warnings > 0) {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

/// `fleet explain`: the chain of one field of one cluster (docs/fleet.md). The fleet and the
/// cluster's blueprint need only load: findings elsewhere do not stop it.
fn run_explain(path: &Path, cluster: &str, field: &str, out: &mut dyn Write) -> CommandResult {
    let catalog = Catalog::embedded();
    let bytes = input::read(path, &input::BLUEPRINT)?;
    let fail = |reports: &[FileReport], what: String| {
        eprint!("{}", output::human(reports, settings::stderr_style()));
        CommandError::Failed(what)
    };
    let fleet = fleet::load(path, bytes, catalog)
        .map_err(|r| fail(&[r], format!("`{}` is not a fleet file", path.display())))?;
    let i = fleet.cluster_index(cluster).map_err(CommandError::Usage)?;
    let loaded = match fleet.load_cluster(i) {
        Some(Ok(l)) => l,
        Some(Err(broken)) => {
            return Err(fail(
                &[broken.report],
                format!("cluster `{cluster}`: fix the findings above, then explain its fields"),
            ));
        }
        None => {
            return Err(fail(
                &[fleet.report],
                format!(
                    "cluster `{cluster}`: its blueprint cannot be read (see the findings above)"
                ),
            ));
        }
    };
    let explained = gpuctl_model::blueprint::origin::explain(&loaded, field)
        .map_err(|e| CommandError::Usage(format!("cluster `{cluster}`: {e}")))?;
    emit(out, &format!("cluster: {cluster}\n{}", explained.text()));
    Ok(ExitStatus::Success)
}

/// The fleet at `path`, with no error finding in it or any of its clusters (printed to stderr
/// otherwise, with `next` in the hint).
fn checked(path: &Path, today: jiff::civil::Date, next: &str) -> Result<LoadedFleet, CommandError> {
    let catalog = Catalog::embedded();
    let bytes = input::read(path, &input::BLUEPRINT)?;
    let fail = |reports: &[FileReport]| {
        eprint!("{}", output::human(reports, settings::stderr_style()));
        CommandError::Failed(format!(
            "fix the findings above before {next} (`gpuctl fleet validate {}`)",
            path.display()
        ))
    };
    let loaded = fleet::load(path, bytes, catalog).map_err(|r| fail(&[r]))?;
    let reports = loaded.check(catalog, validate::Options { today }).reports();
    if reports.iter().any(super::has_errors) {
        let errors: Vec<FileReport> = reports
            .into_iter()
            .filter(|r| !r.findings.is_empty())
            .collect();
        return Err(fail(&errors));
    }
    Ok(loaded)
}

/// `fleet render -o DIR`: `DIR/<cluster>/` for every cluster, each written as `gpuctl render
/// --output-dir` writes one blueprint's tree (never outside it); nothing is written unless every
/// cluster validates.
fn run_render(
    path: &Path,
    dir: &Path,
    templates: Option<&Path>,
    today: Option<&str>,
) -> CommandResult {
    let today = settings::today(today)?;
    let fleet = checked(path, today, "rendering")?;
    let clusters = &fleet.fleet.spec.clusters;
    for (i, cluster) in clusters.iter().enumerate() {
        let Some(loaded) = fleet.load_cluster(i) else {
            return Err(CommandError::Failed(format!(
                "cluster `{}`: its blueprint cannot be read",
                cluster.name
            )));
        };
        let blueprint = fleet.root.join(&cluster.blueprint);
        let next = format!("rendering cluster `{}`", cluster.name);
        let mut rendered = super::pipeline::render_loaded(
            loaded.map_err(|b| b.report),
            &blueprint,
            today,
            templates,
            &next,
        )?;
        fleet::multikueue::add(
            &fleet.fleet,
            &cluster.name,
            fleet.manager_frameworks(),
            &mut rendered.set.objects,
        );
        if let Some(g) = &fleet.fleet.spec.gitops
            && g.engine == gitops::Engine::Flux
        {
            gitops::disable_substitution(&mut rendered.set);
        }
        // Names are DNS-1123 labels (GPU182): one plain directory each.
        let target = dir.join(&cluster.name);
        write_tree(&rendered.set, &target).map_err(|source| CommandError::Tree {
            dir: target.display().to_string(),
            source,
        })?;
    }
    eprintln!(
        "wrote {} cluster tree{} to {}",
        clusters.len(),
        if clusters.len() == 1 { "" } else { "s" },
        dir.display()
    );
    for stale in stale_trees(dir, clusters.iter().map(|c| c.name.as_str())) {
        eprintln!(
            "warning: {} is a gpuctl tree of no cluster of this fleet (a cluster removed from it?); it is left as it is, with any file of yours in it: delete it once nothing delivers from it",
            dir.join(stale).display()
        );
    }
    if let Some(g) = &fleet.fleet.spec.gitops {
        let n = write_gitops(dir, &fleet.fleet, g).map_err(|e| {
            CommandError::Failed(format!(
                "writing `{}`: {e}",
                dir.join(g.engine.dir()).display()
            ))
        })?;
        eprintln!(
            "wrote {n} {} file{} to {}",
            g.engine.dir(),
            if n == 1 { "" } else { "s" },
            dir.join(g.engine.dir()).display()
        );
    }
    let engine = fleet.fleet.spec.gitops.as_ref().map(|g| g.engine);
    for other in [gitops::Engine::Argocd, gitops::Engine::Flux] {
        let sub = dir.join(other.dir());
        if Some(other) != engine && holds_gitops_files(&sub) {
            eprintln!(
                "warning: {} holds gpuctl's {} files of an earlier render, and this fleet does not deliver with {}; they are left as they are: delete them once the engine no longer reads them",
                sub.display(),
                other.dir(),
                other.dir()
            );
        }
    }
    Ok(ExitStatus::Success)
}

/// Whether `sub` is a directory (not a link) with a YAML file `fleet render` wrote (its marker).
fn holds_gitops_files(sub: &Path) -> bool {
    if !std::fs::symlink_metadata(sub).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    std::fs::read_dir(sub)
        .is_ok_and(|entries| entries.filter_map(Result::ok).any(|e| rendered_by_us(&e)))
}

/// Whether a directory entry is a YAML file `fleet render` wrote: a plain file (a link is never
/// followed) that starts with gpuctl's marker line. Only the marker's bytes are read, so a large
/// file of the user's in the directory costs nothing.
fn rendered_by_us(e: &std::fs::DirEntry) -> bool {
    use std::io::Read;
    if !e.file_type().is_ok_and(|t| t.is_file())
        || !e.file_name().to_string_lossy().ends_with(".yaml")
    {
        return false;
    }
    let mut head = vec![0; gitops::MARKER.len()];
    std::fs::File::open(e.path())
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head == gitops::MARKER.as_bytes())
}

/// The directories of `dir` that hold a gpuctl tree (its render manifest) and are named after none
/// of `clusters`, sorted: trees of clusters since removed from the fleet. They are named, never
/// removed: a tree may hold the user's own files, and whether something still delivers from it (a
/// GitOps engine watching the path, a script) is not for gpuctl to know.
fn stale_trees<'a>(dir: &Path, clusters: impl Iterator<Item = &'a str>) -> Vec<String> {
    let clusters: std::collections::BTreeSet<&str> = clusters.collect();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut stale: Vec<String> = entries
        .filter_map(Result::ok)
        // `file_type` does not follow links: a link is never taken for a tree.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            std::fs::symlink_metadata(e.path().join(crate::output::tree::MANIFEST))
                .is_ok_and(|m| m.is_file())
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !clusters.contains(name.as_str()))
        .collect();
    stale.sort();
    stale
}

/// The GitOps engine's files in `DIR/argocd/` or `DIR/flux/` (file names from DNS-1123 cluster
/// names, GPU182): each written to a fresh temporary file and renamed over its target, never
/// through a link; a file of an earlier render (it starts with the marker) no longer generated is
/// removed, every other file kept. Returns how many it wrote.
fn write_gitops(dir: &Path, fleet: &fleet::Fleet, g: &gitops::GitOps) -> std::io::Result<usize> {
    use std::io::{Error, ErrorKind};
    let sub = dir.join(g.engine.dir());
    match std::fs::symlink_metadata(&sub) {
        Ok(m) if !m.is_dir() => {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                "not a directory (or a link)",
            ));
        }
        Ok(_) => {}
        Err(_) => std::fs::create_dir_all(&sub)?,
    }
    let files = gitops::files(fleet, g);
    let names: Vec<String> = files
        .iter()
        .map(|(rel, _)| rel.rsplit('/').next().unwrap_or(rel).to_string())
        .collect();
    for e in std::fs::read_dir(&sub)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().to_string();
        if rendered_by_us(&e) && !names.contains(&name) {
            std::fs::remove_file(e.path())?;
        }
    }
    for (name, (_, text)) in names.iter().zip(&files) {
        let tmp = sub.join(format!(".{name}.gpuctl-new-{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, sub.join(name))?;
    }
    Ok(files.len())
}
