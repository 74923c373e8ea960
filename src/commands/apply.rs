//! `gpuctl apply`: plan the blueprint against the cluster and apply it (asking first at a
//! terminal), or apply a saved plan once it is checked against the cluster.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use gpuctl_cluster::Kube;
use gpuctl_cluster::apply::{self, ApplyOptions};
use gpuctl_cluster::read;
use gpuctl_model::blueprint::{self, Loaded};
use gpuctl_model::input;
use gpuctl_model::located::{FileReport, Severity};
use gpuctl_pipeline::render::RenderedSet;
use gpuctl_plan::plan::{Plan, PlanOptions, is_saved_plan};

use super::pipeline::{render_loaded, resolve_chart};
use super::{CommandError, CommandResult, connect, interactive, runtime};
use crate::args::{ApplyOutput, ClusterArgs, RenderArgs};
use crate::exit::ExitStatus;
use crate::output::progress::{Progress, ProgressMode};
use crate::{output, settings};

/// What `gpuctl apply` was asked to do.
pub struct ApplyCommand<'a> {
    /// Blueprint or saved plan (`-`: either, from standard input).
    pub target: &'a Path,
    /// Connection.
    pub cluster: &'a ClusterArgs,
    /// Plan deletion of protected kinds too (when planning a blueprint).
    pub prune_protected: bool,
    /// Move pools to DRA despite pods holding device-plugin GPUs (when planning a blueprint).
    pub force_migration: bool,
    /// Apply options.
    pub options: ApplyOptions,
    /// Progress output.
    pub output: ApplyOutput,
    /// Rendering.
    pub render: &'a RenderArgs,
    /// Apply without asking on a terminal.
    pub yes: bool,
    /// Longest wait for an admission webhook that cannot be called yet.
    pub webhook_timeout: std::time::Duration,
}

/// What `gpuctl apply` was given.
#[expect(
    clippy::large_enum_variant,
    reason = "one value per run, moved once; boxing buys nothing"
)]
enum Target {
    /// A plan saved with `gpuctl plan --out`.
    Plan(Plan),
    /// A blueprint, loaded from the text already read.
    Blueprint(Result<Loaded, FileReport>),
}

/// Reads the target once (it may be standard input, which cannot be read twice) and tells a
/// saved plan from a blueprint by the plan file's header. Saved plans are accepted on standard
/// input as blueprints are: the stale check against the cluster protects an apply whatever the
/// plan came through.
fn read_target(path: &Path) -> Result<Target, CommandError> {
    let name = input::name(path);
    let bytes = input::read(path, &input::BLUEPRINT_OR_PLAN)?;
    if !is_saved_plan(&bytes) {
        return Ok(Target::Blueprint(blueprint::load_bytes(&name, bytes)));
    }
    let text = String::from_utf8_lossy(&bytes);
    Plan::from_json(&text)
        .map(Target::Plan)
        .map_err(|source| CommandError::SavedPlan { file: name, source })
}

/// Runs the command.
pub fn run(cmd: ApplyCommand<'_>) -> CommandResult {
    let (saved, set) = match read_target(cmd.target)? {
        Target::Plan(p) => (Some(p), None),
        Target::Blueprint(loaded) => {
            let today = settings::today(cmd.render.today.as_deref())?;
            let templates = cmd.render.templates.as_deref();
            let set = render_loaded(loaded, cmd.target, today, templates, "planning")?.set;
            (None, Some(set))
        }
    };
    let rt = runtime()?;
    apply_planned(&cmd, &rt, saved, set)?;
    Ok(ExitStatus::Success)
}

/// What applying a blueprint or a saved plan to one cluster did.
pub struct Applied {
    /// The connection it used.
    pub kube: Kube,
    /// What the apply did; `None` when the plan had no changes.
    pub report: Option<gpuctl_cluster::apply::ApplyReport>,
}

/// The apply of `gpuctl apply` once its target is read: plans the rendered `set` against the
/// cluster (or takes the `saved` plan), refuses error findings, shows the plan and asks at a
/// terminal, then applies it under the blueprint's lock. `gpuctl fleet apply` runs it once per
/// cluster of a wave.
pub fn apply_planned(
    cmd: &ApplyCommand<'_>,
    rt: &tokio::runtime::Runtime,
    saved: Option<Plan>,
    set: Option<RenderedSet>,
) -> Result<Applied, CommandError> {
    let set = match set {
        Some(mut set) => {
            resolve_chart(&mut set, cmd.target)?;
            Some(set)
        }
        None => None,
    };
    let progress = Arc::new(Progress::new(ProgressMode::for_output(cmd.output)));
    let (k, plan) = rt.block_on(plan_or_load(cmd, saved, set.as_ref(), progress.clone()))?;
    refuse_errors(&plan)?;
    if !plan.summary.has_changes() {
        eprintln!("No changes. The cluster matches the blueprint.");
        return Ok(Applied {
            kube: k,
            report: None,
        });
    }
    // A helm the apply needs and cannot run refuses it before the plan is shown for
    // confirmation (apply checks again under its lock).
    rt.block_on(apply::helm_ready(&plan, &cmd.options))?;
    // A blueprint is planned and applied in one go: show what is about to happen (saved plans
    // were reviewed when they were made). A person at a terminal confirms it; pipelines, which
    // have no terminal, proceed as `kubectl apply` does, and log the plan.
    if set.is_some() && cmd.output == ApplyOutput::Human {
        eprint!(
            "{}",
            output::plan::human(&plan, settings::stderr_style(), false)
        );
        if !cmd.yes && interactive() && !confirm(&plan, &k) {
            eprintln!("Apply cancelled; nothing was changed.");
            return Err(CommandError::Reported);
        }
    }
    // Under the blueprint's apply lock, the plan is checked against the cluster again (a saved
    // plan, or the one just shown: another apply may have written since), then applied.
    let report = rt.block_on(apply::apply(&k, &plan, &cmd.options, progress.as_ref()))?;
    Ok(Applied {
        kube: k,
        report: Some(report),
    })
}

/// Connects (webhook waits report to `progress`), then takes the saved plan or plans the
/// rendered set.
async fn plan_or_load(
    cmd: &ApplyCommand<'_>,
    saved: Option<Plan>,
    set: Option<&RenderedSet>,
    progress: Arc<Progress>,
) -> Result<(Kube, Plan), CommandError> {
    let k = connect(cmd.cluster, None).await?;
    k.webhooks
        .configure(cmd.webhook_timeout, cmd.options.poll, progress);
    let plan = match (saved, set) {
        (Some(p), _) => p,
        (None, Some(set)) => {
            let opts = PlanOptions {
                prune_protected: cmd.prune_protected,
                force_migration: cmd.force_migration,
            };
            read::plan(&k, set, opts, cmd.options.parallelism).await?
        }
        (None, None) => {
            return Err(CommandError::Failed(
                "nothing to apply: neither a saved plan nor a blueprint".into(),
            ));
        }
    };
    Ok((k, plan))
}

/// Nothing is applied while the plan has error findings.
fn refuse_errors(plan: &Plan) -> Result<(), CommandError> {
    let errors: Vec<&str> = plan
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.message.as_str())
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    Err(CommandError::Failed(format!(
        "nothing was applied; the plan has {} error finding(s):\n{}",
        errors.len(),
        errors
            .iter()
            .map(|m| format!("  - {m}"))
            .collect::<Vec<_>>()
            .join("\n")
    )))
}

/// Asks on the terminal; only `yes` goes ahead (as Terraform asks).
fn confirm(plan: &Plan, k: &Kube) -> bool {
    let context = k
        .context
        .as_deref()
        .map(|c| format!(" (context {c})"))
        .unwrap_or_default();
    eprint!(
        "\nApply these changes to {}{context}? Only 'yes' is accepted: ",
        plan.server.as_deref().unwrap_or(&k.server)
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).is_ok() && answer.trim() == "yes"
}
