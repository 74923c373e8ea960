//! `gpuctl fleet apply`: the fleet's waves in order, each cluster with `gpuctl apply` (lock,
//! server-side apply, ApplySet prune) and then stamped with its revision; a wave starts only when
//! every cluster of the earlier waves carries its revision, has baked, plans empty and has no
//! doctor error. Every fact comes from the clusters, nothing is kept locally (docs/fleet.md
//! "Apply in waves").

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuctl_cluster::apply::ApplyOptions;
use gpuctl_fleet::LoadedFleet;
use gpuctl_fleet::model::Gate;
use gpuctl_fleet::rollout::{self, Block, Check, Observed, Stamp, Waves};
use gpuctl_model::applyset::ApplySetParent;
use gpuctl_model::blueprint::Blueprint;
use gpuctl_model::profiles::Catalog;

use super::pipeline::{Rendered, render_loaded};
use super::plan::{Against, PlanSettings, plan_rendered};
use super::{CommandError, CommandResult, connect, emit, runtime};
use crate::args::{ApplyOutput, ClusterArgs, RenderArgs};
use crate::exit::ExitStatus;

/// What `gpuctl fleet apply` was asked to do.
pub struct FleetApplyCommand<'a> {
    /// The fleet file, as the user named it (for hints).
    pub fleet_file: &'a Path,
    /// `--wave NAME`: that wave only.
    pub wave: Option<&'a str>,
    /// Kubeconfig holding the clusters' contexts.
    pub kubeconfig: Option<PathBuf>,
    /// Also prune protected kinds.
    pub prune_protected: bool,
    /// Options of each cluster's apply.
    pub options: ApplyOptions,
    /// Longest wait for an admission webhook that cannot be called yet.
    pub webhook_timeout: Duration,
    /// Apply without asking on a terminal.
    pub yes: bool,
    /// Templates and the date for end-of-life checks.
    pub render: &'a RenderArgs,
    /// The date, parsed.
    pub today: jiff::civil::Date,
}

/// One cluster as the fleet renders it now.
struct Member {
    index: usize,
    name: String,
    context: Option<String>,
    blueprint: PathBuf,
    want: String,
    parent: ApplySetParent,
}

/// Runs the command: exit 0 when the wave was applied (or nothing was left to apply), 1 when a
/// gate refused it or a cluster failed.
pub fn run(cmd: &FleetApplyCommand<'_>, fleet: &LoadedFleet, out: &mut dyn Write) -> CommandResult {
    let waves = Waves::of(&fleet.fleet);
    let fleet_file = cmd.fleet_file.display().to_string();
    let name = &fleet.fleet.metadata.name;
    // A wave that does not exist is a wrong command line, said before any cluster is read.
    let named = wave_named(cmd.wave, &waves, name)?;
    let members = members(cmd, fleet)?;
    let rt = runtime()?;
    let mut observed = observe(cmd, &members, &rt);
    let Some(target) = named.or_else(|| waves.next(&observed)) else {
        emit(
            out,
            &format!(
                "fleet {name}: every cluster carries its revision; nothing to apply (`gpuctl fleet plan {fleet_file}` shows drift).\n"
            ),
        );
        super::fleet_multikueue::credentials(cmd.kubeconfig.as_ref(), fleet, &rt, out)?;
        return Ok(ExitStatus::Success);
    };
    let (wave, clusters) = &waves.members[target];
    emit(
        out,
        &format!(
            "fleet {name}: wave `{wave}` ({} of {}): {}\n",
            target + 1,
            waves.members.len(),
            clusters.join(", ")
        ),
    );
    check_gates(cmd, fleet, &waves, target, &members, &mut observed);
    let blocks = rollout::blocks(
        &waves,
        target,
        &observed,
        jiff::Timestamp::now(),
        &fleet_file,
    );
    if !blocks.is_empty() {
        emit(out, &refusal(wave, &blocks));
        return Ok(ExitStatus::Failure);
    }
    if target > 0 {
        emit(
            out,
            &format!(
                "gates passed: every cluster of the earlier waves carries its revision, has baked{}\n",
                gate_words(&waves.gates(target))
            ),
        );
    }
    let todo = to_apply(clusters, &members, &observed);
    // `maxParallel` clusters at a time, in batches; one at a time while a person at a terminal
    // confirms each plan.
    let batch = if cmd.yes || !super::interactive() {
        waves.max_parallel(target)
    } else {
        1
    };
    for chunk in todo.chunks(batch) {
        apply_chunk(cmd, fleet, &rt, chunk, wave, out)?;
    }
    super::fleet_multikueue::credentials(cmd.kubeconfig.as_ref(), fleet, &rt, out)?;
    emit(out, &next_step(&waves, target, &fleet_file));
    Ok(ExitStatus::Success)
}

/// The index of the wave `--wave` names (`None` without it); a usage error listing the fleet's
/// waves when it has no such wave.
fn wave_named(
    wave: Option<&str>,
    waves: &Waves<'_>,
    fleet: &str,
) -> Result<Option<usize>, CommandError> {
    let Some(w) = wave else {
        return Ok(None);
    };
    let index = waves.index(w).ok_or_else(|| {
        CommandError::Usage(format!(
            "fleet `{fleet}` has no wave `{w}`; its waves: {}",
            waves
                .members
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    Ok(Some(index))
}

/// What each cluster carries: its stamp, read live (the gates are checked later, for the clusters
/// of the earlier waves only).
fn observe(
    cmd: &FleetApplyCommand<'_>,
    members: &[Member],
    rt: &tokio::runtime::Runtime,
) -> Vec<Observed> {
    members
        .iter()
        .map(|m| Observed {
            name: m.name.clone(),
            context: m.context.clone(),
            blueprint: shown(&m.blueprint),
            want: m.want.clone(),
            stamp: rt.block_on(read_stamp(cmd, m)),
            converged: Check::NotRun,
            doctor: Check::NotRun,
        })
        .collect()
}

/// The wave's clusters, each with the stamp it carries now.
fn to_apply<'m>(
    clusters: &[String],
    members: &'m [Member],
    observed: &[Observed],
) -> Vec<(&'m Member, Option<Stamp>)> {
    clusters
        .iter()
        .filter_map(|c| {
            let m = members.iter().find(|m| &m.name == c)?;
            let o = observed.iter().find(|o| &o.name == c);
            Some((m, o.and_then(|o| o.stamp.as_ref().ok().cloned().flatten())))
        })
        .collect()
}

/// Applies one batch of wave `wave`'s clusters and prints a line for each; the first failure
/// stops the wave (the others' are printed to stderr).
fn apply_chunk(
    cmd: &FleetApplyCommand<'_>,
    fleet: &LoadedFleet,
    rt: &tokio::runtime::Runtime,
    chunk: &[(&Member, Option<Stamp>)],
    wave: &str,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let results = apply_batch(cmd, fleet, rt, chunk);
    let mut failed = None;
    for ((m, _), result) in chunk.iter().zip(results) {
        match result {
            Ok(line) => emit(out, &format!("  {}{}: {line}\n", m.name, on(m))),
            Err(e) => {
                emit(
                    out,
                    &format!(
                        "  {}{}: failed; wave `{wave}` stops here, a re-run continues it\n",
                        m.name,
                        on(m)
                    ),
                );
                if failed.is_some() {
                    eprintln!("error: cluster `{}`: {e}", m.name);
                } else {
                    failed = Some(e);
                }
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

/// What comes after wave `target`: the next wave and when it may start, or that every wave is
/// applied.
fn next_step(waves: &Waves<'_>, target: usize, fleet_file: &str) -> String {
    let wave = &waves.members[target].0;
    match waves.members.get(target + 1) {
        Some((next, _)) => format!(
            "next: wave `{next}`, once wave `{wave}` has baked {} and its gates pass: `gpuctl fleet apply {fleet_file}`\n",
            rollout::human(waves.bake_seconds(target))
        ),
        None => "every wave is applied\n".to_string(),
    }
}

/// Every cluster rendered once: its revision and ApplySet parent (the sets are dropped, so
/// memory stays that of one cluster).
fn members(cmd: &FleetApplyCommand<'_>, fleet: &LoadedFleet) -> Result<Vec<Member>, CommandError> {
    let mut out = Vec::new();
    for (index, c) in fleet.fleet.spec.clusters.iter().enumerate() {
        let (_, rendered) = render(cmd, fleet, index)?;
        out.push(Member {
            index,
            name: c.name.clone(),
            context: c.context.clone(),
            blueprint: fleet.root.join(&c.blueprint),
            want: rollout::revision(&rendered.set),
            parent: gpuctl_plan::plan::parent_of(&rendered.set),
        });
    }
    Ok(out)
}

/// Cluster `i`'s blueprint and its rendering.
fn render(
    cmd: &FleetApplyCommand<'_>,
    fleet: &LoadedFleet,
    i: usize,
) -> Result<(Blueprint, Rendered), CommandError> {
    let c = &fleet.fleet.spec.clusters[i];
    let loaded = fleet.load_cluster(i).ok_or_else(|| {
        CommandError::Failed(format!(
            "cluster `{}`: its blueprint cannot be read",
            c.name
        ))
    })?;
    let loaded = loaded.map_err(|b| b.report);
    let bp = loaded.as_ref().ok().map(|l| l.blueprint.clone());
    let path = fleet.root.join(&c.blueprint);
    let next = format!("applying cluster `{}`", c.name);
    let mut rendered = render_loaded(
        loaded,
        &path,
        cmd.today,
        cmd.render.templates.as_deref(),
        &next,
    )?;
    gpuctl_fleet::multikueue::add(
        &fleet.fleet,
        &c.name,
        fleet.manager_frameworks(),
        &mut rendered.set.objects,
    );
    // A blueprint that did not load does not render either (its findings were printed).
    let bp = bp.ok_or(CommandError::Reported)?;
    Ok((bp, rendered))
}

fn connection(cmd: &FleetApplyCommand<'_>, m: &Member) -> Result<ClusterArgs, String> {
    match &m.context {
        Some(c) => Ok(ClusterArgs {
            kubeconfig: cmd.kubeconfig.clone(),
            context: Some(c.clone()),
        }),
        None => Err(
            "no `context` in the fleet file: fleet apply needs each cluster's kubeconfig context"
                .into(),
        ),
    }
}

async fn read_stamp(cmd: &FleetApplyCommand<'_>, m: &Member) -> Result<Option<Stamp>, String> {
    let args = connection(cmd, m)?;
    let k = connect(&args, None).await.map_err(|e| one_line(&e))?;
    gpuctl_cluster::fleet::read_stamp(&k, &m.parent)
        .await
        .map_err(|e| e.to_string())
}

/// Runs the gates wave `target` asks for on every cluster of the earlier waves.
fn check_gates(
    cmd: &FleetApplyCommand<'_>,
    fleet: &LoadedFleet,
    waves: &Waves<'_>,
    target: usize,
    members: &[Member],
    observed: &mut [Observed],
) {
    let gates = waves.gates(target);
    for (_, clusters) in waves.members.iter().take(target) {
        for c in clusters {
            let (Some(m), Some(o)) = (
                members.iter().find(|m| &m.name == c),
                observed.iter_mut().find(|o| &o.name == c),
            ) else {
                continue;
            };
            if gates.contains(&Gate::Converged) {
                o.converged = converged(cmd, fleet, m);
            }
            if gates.contains(&Gate::Doctor) {
                o.doctor = doctor(cmd, fleet, m);
            }
        }
    }
}

/// The cluster's `converged` gate: its plan, made as `gpuctl fleet plan` makes it, for
/// [`rollout::converged_check`] to judge.
fn converged(cmd: &FleetApplyCommand<'_>, fleet: &LoadedFleet, m: &Member) -> Check {
    let args = match connection(cmd, m) {
        Ok(a) => a,
        Err(e) => return Check::Failed(e),
    };
    let plan = render(cmd, fleet, m.index).and_then(|(_, rendered)| {
        let settings = PlanSettings {
            prune_protected: cmd.prune_protected,
            parallelism: cmd.options.parallelism,
            unreachable_hint: "check the cluster's context",
            // A rollout never forces a pool's move to DRA: `gpuctl apply --force-migration` on
            // that cluster is the deliberate step.
            force_migration: false,
        };
        plan_rendered(rendered, &m.blueprint, Against::Cluster(&args), &settings)
    });
    match plan {
        Err(e) => Check::Failed(format!("it cannot be planned: {}", one_line(&e))),
        Ok(p) => rollout::converged_check(&p.findings, &p.summary),
    }
}

/// The cluster's `doctor` gate: doctor's findings, read live as `gpuctl doctor` reads them, for
/// [`rollout::doctor_check`] to judge.
fn doctor(cmd: &FleetApplyCommand<'_>, fleet: &LoadedFleet, m: &Member) -> Check {
    let args = match connection(cmd, m) {
        Ok(a) => a,
        Err(e) => return Check::Failed(e),
    };
    let bp = match render(cmd, fleet, m.index) {
        Ok((bp, _)) => bp,
        Err(e) => return Check::Failed(one_line(&e)),
    };
    let reading = runtime().and_then(|rt| {
        rt.block_on(async {
            let k = connect(&args, None).await?;
            let now = jiff::Timestamp::now();
            let now = now.round(jiff::Unit::Second).unwrap_or(now).to_string();
            Ok(gpuctl_cluster::diagnostics::read(
                &k,
                gpuctl_day2::diagnostics::DOCTOR_READS,
                &bp.spec.gpu_operator.namespace,
                Some(now),
            )
            .await?)
        })
    });
    let reading = match reading {
        Ok(r) => r,
        Err(e) => return Check::Failed(format!("doctor cannot read it: {}", one_line(&e))),
    };
    let report = gpuctl_day2::doctor::diagnose(
        &bp,
        Catalog::embedded(),
        &reading.diagnostics,
        &shown(&m.blueprint),
    );
    rollout::doctor_check(
        report
            .findings
            .iter()
            .map(|f| (f.severity, f.id.as_str(), f.title.as_str())),
    )
}

/// [`apply_one`] for each cluster of `chunk`: at once, each on a thread and runtime of its own,
/// when there are several (their plans and progress lines interleave on stderr).
fn apply_batch(
    cmd: &FleetApplyCommand<'_>,
    fleet: &LoadedFleet,
    rt: &tokio::runtime::Runtime,
    chunk: &[(&Member, Option<Stamp>)],
) -> Vec<Result<String, CommandError>> {
    if let [(m, stamp)] = chunk {
        return vec![apply_one(cmd, fleet, rt, m, stamp.clone())];
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = chunk
            .iter()
            .map(|(m, stamp)| {
                s.spawn(move || {
                    let rt = runtime()?;
                    apply_one(cmd, fleet, &rt, m, stamp.clone())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CommandError::Failed("the cluster's apply panicked".into()))
                })
            })
            .collect()
    })
}

/// `gpuctl apply` of one cluster, then its stamp when its revision changed; what it did, one line.
fn apply_one(
    cmd: &FleetApplyCommand<'_>,
    fleet: &LoadedFleet,
    rt: &tokio::runtime::Runtime,
    m: &Member,
    stamp: Option<Stamp>,
) -> Result<String, CommandError> {
    let args = connection(cmd, m).map_err(CommandError::Failed)?;
    let (_, rendered) = render(cmd, fleet, m.index)?;
    eprintln!("== cluster {}{}", m.name, on(m));
    let apply = super::apply::ApplyCommand {
        target: &m.blueprint,
        cluster: &args,
        prune_protected: cmd.prune_protected,
        options: cmd.options.clone(),
        output: ApplyOutput::Human,
        render: cmd.render,
        yes: cmd.yes,
        webhook_timeout: cmd.webhook_timeout,
        force_migration: false,
    };
    let applied = super::apply::apply_planned(&apply, rt, None, Some(rendered.set))?;
    let did = match &applied.report {
        Some(r) => format!(
            "applied {}, pruned {}, {} node(s) patched, {} unchanged",
            r.applied, r.pruned, r.nodes, r.unchanged
        ),
        None => "no changes".to_string(),
    };
    if stamp
        .as_ref()
        .is_some_and(|s| s.revision == m.want && s.applied_at.is_some())
    {
        return Ok(format!(
            "{did}; already at revision {}",
            rollout::short(&m.want)
        ));
    }
    rt.block_on(gpuctl_cluster::fleet::write_stamp(
        &applied.kube,
        &m.parent,
        &m.want,
        jiff::Timestamp::now(),
    ))
    .map_err(|e| {
        CommandError::Failed(format!(
            "cluster `{}`: applied, but its revision stamp failed: {e}",
            m.name
        ))
    })?;
    Ok(format!(
        "{did}; stamped revision {}",
        rollout::short(&m.want)
    ))
}

/// The refusal: every block, with what to do.
fn refusal(wave: &str, blocks: &[Block]) -> String {
    let mut s = format!(
        "wave `{wave}` refused: {} gate(s) of earlier waves hold it; nothing was applied\n",
        blocks.len()
    );
    for b in blocks {
        s.push_str(&format!(
            "  {} (wave {}) {}: {}\n    next: {}\n",
            b.cluster, b.wave, b.gate, b.why, b.next
        ));
    }
    s
}

fn gate_words(gates: &[Gate]) -> String {
    let mut s = String::new();
    if gates.contains(&Gate::Converged) {
        s.push_str(", plans empty");
    }
    if gates.contains(&Gate::Doctor) {
        s.push_str(", has no doctor error");
    }
    s
}

fn on(m: &Member) -> String {
    m.context
        .as_deref()
        .map(|c| format!(" (context {c})"))
        .unwrap_or_default()
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

fn one_line(e: &CommandError) -> String {
    e.to_string().lines().collect::<Vec<_>>().join(" ")
}
