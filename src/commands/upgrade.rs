//! `gpuctl upgrade driver | status | rollback`: pre-flight, the upgrade plan, its runbook, and the
//! run against the cluster, resumable from its journal.

use std::io::Write;
use std::path::{Path, PathBuf};

use gpuctl_cluster::Kube;
use gpuctl_cluster::read;
use gpuctl_cluster::upgrade::execute::{self, Cancel};
use gpuctl_cluster::upgrade::journal::{self, JournalStore};
use gpuctl_model::{blueprint, input};
use gpuctl_pipeline::render::Templates;
use gpuctl_plan::upgrade::Timing;
use gpuctl_plan::upgrade::preflight::{self, PrepareError};
use gpuctl_plan::upgrade::runbook;
use gpuctl_plan::upgrade::schedule::{self, UpgradePlan};
use serde_json::json;
use tokio::sync::watch;

use super::{CommandError, CommandResult, connect, emit, runtime};
use crate::args::{
    ApplyOutput, ClusterArgs, RenderArgs, UpgradeCommand, UpgradeFormat, UpgradeTimingArgs,
};
use crate::exit::ExitStatus;
use crate::output::progress::{Progress, ProgressMode};
use crate::{output, settings};

/// What an upgrade needs to reach the cluster.
const CONNECT_HINT: Option<&str> =
    Some("upgrades read the live cluster; check --kubeconfig and --context");

/// Which run of an upgrade to start.
enum Run {
    /// Continue the pool's journal.
    Resume,
    /// Undo the pool's upgrade.
    Rollback,
}

/// Runs one `gpuctl upgrade` subcommand.
pub fn run(cmd: UpgradeCommand, out: &mut dyn Write) -> CommandResult {
    match cmd {
        UpgradeCommand::Driver {
            resume: true,
            pool,
            namespace,
            timing,
            cluster,
            ..
        } => {
            let (t, progress) = run_settings(&timing)?;
            journal_run(Run::Resume, &cluster, namespace, pool, &t, &progress)
        }
        UpgradeCommand::Driver {
            blueprint,
            pool,
            to,
            runbook,
            execute,
            namespace: _,
            resume: false,
            format,
            timing,
            cluster,
            render,
        } => {
            let (t, progress) = run_settings(&timing)?;
            let (Some(blueprint), Some(pool), Some(to)) = (blueprint, pool, to) else {
                return Err(CommandError::Usage(
                    "BLUEPRINT, --pool and --to are required without --resume".into(),
                ));
            };
            // One vocabulary: -o/--output says how the plan and the progress are printed; the
            // old --format (the plan alone) still works for one release.
            let same = match timing.output {
                ApplyOutput::Human => UpgradeFormat::Human,
                ApplyOutput::Json => UpgradeFormat::Json,
            };
            let format = settings::deprecated("--format", "-o/--output", format, same);
            let driver = Driver {
                blueprint,
                pool,
                to,
                runbook,
                execute,
                format,
            };
            driver.run(&render, &cluster, &t, &progress, out)
        }
        UpgradeCommand::Status {
            pool,
            namespace,
            output,
            format,
            cluster,
        } => status(
            &cluster,
            namespace,
            pool,
            settings::deprecated("--format", "-o/--output", format, output),
            out,
        ),
        UpgradeCommand::Rollback {
            pool,
            namespace,
            timing,
            cluster,
        } => {
            let (t, progress) = run_settings(&timing)?;
            journal_run(Run::Rollback, &cluster, namespace, pool, &t, &progress)
        }
    }
}

/// An upgrade run's waits and estimates, and how its progress is shown.
fn run_settings(timing: &UpgradeTimingArgs) -> Result<(Timing, Progress), CommandError> {
    let t = settings::timing(timing)?;
    Ok((t, Progress::new(ProgressMode::for_output(timing.output))))
}

/// `gpuctl upgrade driver BLUEPRINT --pool P --to V`.
struct Driver {
    blueprint: PathBuf,
    pool: String,
    to: String,
    runbook: Option<PathBuf>,
    execute: bool,
    format: UpgradeFormat,
}

impl Driver {
    fn run(
        &self,
        render: &RenderArgs,
        cluster: &ClusterArgs,
        t: &Timing,
        progress: &Progress,
        out: &mut dyn Write,
    ) -> CommandResult {
        let today = settings::today(render.today.as_deref())?;
        let templates = Templates::load(render.templates.as_deref())?;
        // An unreadable blueprint is an input error, not a finding about its content.
        let bytes = input::read(&self.blueprint, &input::BLUEPRINT)?;
        let loaded = blueprint::load_bytes(&input::name(&self.blueprint), bytes)
            .map_err(|r| self.refused(PrepareError::Blueprint(r)))?;
        let prep = preflight::prepare_loaded(loaded, &self.pool, &self.to, today, &templates)
            .map_err(|e| self.refused(e))?;
        runtime()?.block_on(async {
            let k = connect(cluster, CONNECT_HINT).await?;
            let view = read::pool_workloads(&k, &prep.node_patch().selector).await?;
            let ns = &prep.blueprint().spec.gpu_operator.namespace;
            let existing = JournalStore::new(&k, ns, &self.pool).load().await?;
            let plan = schedule::build(
                &prep,
                &view.workloads.unwrap_or_default(),
                existing.as_ref(),
                t,
            );
            emit(out, &self.show(&plan));
            if let Some(path) = &self.runbook {
                write_runbook(&plan, &templates, path)?;
            }
            if plan.errors() > 0 {
                return Ok(ExitStatus::Failure);
            }
            if !self.execute {
                return Ok(ExitStatus::Success);
            }
            let (cancel, _guard) = ctrl_c();
            execute::start(&k, &plan, t, progress, cancel).await?;
            Ok(ExitStatus::Success)
        })
    }

    /// Pre-flight's refusal; findings of the blueprint are printed with their snippets.
    fn refused(&self, e: PrepareError) -> CommandError {
        match e {
            PrepareError::Blueprint(report) => {
                eprint!(
                    "{}",
                    output::human(std::slice::from_ref(&report), settings::stderr_style())
                );
                CommandError::Failed(format!(
                    "fix the findings above first (`gpuctl validate {}`)",
                    self.blueprint.display()
                ))
            }
            e => CommandError::Failed(e.to_string()),
        }
    }

    fn show(&self, plan: &UpgradePlan) -> String {
        match self.format {
            UpgradeFormat::Human => output::upgrade::plan(plan, self.execute),
            UpgradeFormat::Json => pretty(&plan),
        }
    }
}

/// `gpuctl upgrade driver --resume` and `gpuctl upgrade rollback`: a run from the pool's journal.
fn journal_run(
    which: Run,
    cluster: &ClusterArgs,
    namespace: Option<String>,
    pool: Option<String>,
    t: &Timing,
    progress: &Progress,
) -> CommandResult {
    runtime()?.block_on(async {
        let k = connect(cluster, CONNECT_HINT).await?;
        let (cancel, _guard) = ctrl_c();
        let (ns, pool) = (namespace.as_deref(), pool.as_deref());
        match which {
            Run::Resume => execute::resume(&k, ns, pool, t, progress, cancel).await?,
            Run::Rollback => execute::rollback(&k, ns, pool, t, progress, cancel).await?,
        };
        Ok(ExitStatus::Success)
    })
}

/// `gpuctl upgrade status`.
fn status(
    cluster: &ClusterArgs,
    namespace: Option<String>,
    pool: Option<String>,
    format: UpgradeFormat,
    out: &mut dyn Write,
) -> CommandResult {
    runtime()?.block_on(async {
        let k: Kube = connect(cluster, CONNECT_HINT).await?;
        let journals = journal::list(&k, namespace.as_deref(), pool.as_deref()).await?;
        let mut leases = Vec::new();
        for j in &journals {
            leases.push(journal::lease_info(&k, &j.namespace, &j.pool).await?);
        }
        let text = match format {
            UpgradeFormat::Human => output::upgrade::status(&journals, &leases),
            UpgradeFormat::Json => {
                let items: Vec<_> = journals
                    .iter()
                    .zip(&leases)
                    .map(|(j, l)| json!({"journal": j, "lease": l}))
                    .collect();
                pretty(&items)
            }
        };
        emit(out, &text);
        Ok(ExitStatus::Success)
    })
}

fn pretty<T: serde::Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// Ctrl-C turns the returned [`Cancel`] on; the run then releases its lease and says how to go on.
fn ctrl_c() -> (Cancel, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(false);
    let guard = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = tx.send(true);
        }
    });
    (Cancel::on(rx), guard)
}

/// Writes the runbook and its timeline next to it.
pub fn write_runbook(
    plan: &UpgradePlan,
    templates: &Templates,
    path: &Path,
) -> Result<(), CommandError> {
    let svg_path = runbook::svg_path(path);
    let svg_name = svg_path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let md = runbook::markdown(plan, templates, &svg_name)?;
    let write = |p: &Path, text: &str| {
        std::fs::write(p, text).map_err(|source| CommandError::Write {
            path: p.display().to_string(),
            source,
        })
    };
    write(path, &md)?;
    write(&svg_path, &runbook::timeline_svg(plan))?;
    eprintln!(
        "wrote the runbook to {} and its timeline to {}",
        path.display(),
        svg_path.display()
    );
    Ok(())
}
