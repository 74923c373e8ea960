//! `gpuctl plan`: what applying the blueprint would change, against the cluster, a snapshot, or
//! nothing (offline); printed for people, CI or a PR comment, and saved for `apply`.

use std::io::Write;
use std::path::Path;

use gpuctl_cluster::read::{self, Reads};
use gpuctl_day2::snapshot::Snapshot;
use gpuctl_model::blueprint::InstallMode;
use gpuctl_model::input;
use gpuctl_model::located::Severity;
use gpuctl_pipeline::render::RenderedSet;
use gpuctl_plan::live::LiveView;
use gpuctl_plan::plan::{self, Plan, PlanOptions, parent_of};

use super::files::write_owner_only;
use super::pipeline::{Rendered, render_file, resolve_chart};
use super::{CommandError, CommandResult, connect, emit, runtime};
use crate::args::{ApplyOutput, ClusterArgs, PlanFormat, PolicyArgs, RenderArgs};
use crate::exit::ExitStatus;
use crate::output::progress::{Progress, ProgressMode};
use crate::{output, settings};

/// What `gpuctl plan` was asked to do.
pub struct PlanCommand<'a> {
    /// Blueprint.
    pub blueprint: &'a Path,
    /// Connection.
    pub cluster: &'a ClusterArgs,
    /// Snapshot file.
    pub snapshot: Option<&'a Path>,
    /// Plan without live state.
    pub offline: bool,
    /// `--out`: save the plan for `apply`.
    pub save: Option<&'a Path>,
    /// Format.
    pub format: PlanFormat,
    /// Terraform-style exit codes.
    pub detailed_exitcode: bool,
    /// Plan deletion of protected kinds too.
    pub prune_protected: bool,
    /// `--force-migration`.
    pub force_migration: bool,
    /// Concurrent requests.
    pub parallelism: usize,
    /// Verbose human output.
    pub verbose: bool,
    /// Rendering.
    pub render: &'a RenderArgs,
    /// The organisation's policies.
    pub policy: &'a PolicyArgs,
}

/// Runs the command.
pub fn run(cmd: PlanCommand<'_>, out: &mut dyn Write) -> CommandResult {
    if input::is_stdin(cmd.blueprint) && cmd.snapshot.is_some_and(input::is_stdin) {
        return Err(CommandError::Usage(
            "the blueprint and --snapshot cannot both be `-` (standard input); give the snapshot as a file".into(),
        ));
    }
    let with_policy = !cmd.policy.dirs.is_empty() || cmd.policy.policy_input_out.is_some();
    if with_policy && input::is_stdin(cmd.blueprint) {
        return Err(CommandError::Usage(
            "--policy and --policy-input-out read the blueprint as a file: name it instead of `-`"
                .into(),
        ));
    }
    let today = settings::today(cmd.render.today.as_deref())?;
    // Loaded before anything is planned: a policy that cannot load fails the run at once.
    let policies = super::policy::load(cmd.policy)?;
    let rendered = render_file(
        cmd.blueprint,
        today,
        cmd.render.templates.as_deref(),
        "planning",
    )?;
    let against = if cmd.offline {
        Against::Offline
    } else if let Some(path) = cmd.snapshot {
        Against::Snapshot(path)
    } else {
        Against::Cluster(cmd.cluster)
    };
    let settings = PlanSettings {
        prune_protected: cmd.prune_protected,
        force_migration: cmd.force_migration,
        parallelism: cmd.parallelism,
        unreachable_hint: PLAN_UNREACHABLE_HINT,
    };
    let warnings = rendered.warnings.clone();
    let mut plan = plan_rendered(rendered, cmd.blueprint, against, &settings)?;
    if with_policy {
        apply_policies(
            &mut plan,
            cmd.blueprint,
            warnings,
            policies.as_ref(),
            cmd.policy,
        )?;
    }
    if let Some(path) = cmd.save {
        save(&plan, path)?;
    }
    let text = match cmd.format {
        PlanFormat::Human => output::plan::human(&plan, settings::stdout_style(), cmd.verbose),
        PlanFormat::Json => plan.to_json(),
        PlanFormat::Markdown => output::plan::markdown(&plan),
    };
    emit(out, &text);
    let status = exit_status(&plan, cmd.detailed_exitcode);
    std::mem::forget(plan);
    Ok(status)
}

/// Evaluates the policies over the blueprint, its validation warnings and the plan (masked, as
/// printed), and adds their results to the plan's findings: every output prints them, an error
/// among them fails the plan, and a saved plan carries them (apply refuses it).
fn apply_policies(
    plan: &mut Plan,
    blueprint: &Path,
    warnings: Option<gpuctl_model::located::FileReport>,
    set: Option<&gpuctl_policy::PolicySet>,
    args: &PolicyArgs,
) -> Result<(), CommandError> {
    let loaded = gpuctl_model::blueprint::load_file(blueprint).map_err(|_| {
        CommandError::Failed(format!(
            "{}: the blueprint changed while it was planned; plan again",
            blueprint.display()
        ))
    })?;
    let input = gpuctl_policy::input::document(
        "plan",
        vec![
            ("blueprint", gpuctl_policy::input::blueprint(&loaded)),
            (
                "findings",
                gpuctl_policy::input::findings(warnings.as_slice()),
            ),
            ("plan", plan_document(plan)),
        ],
    );
    if let Some(report) = super::policy::evaluate(args, set, &input)? {
        plan.findings
            .extend(report.results().map(gpuctl_policy::finding::plan));
    }
    Ok(())
}

/// A plan as policies see it: the document `gpuctl plan -o json` prints (masked).
pub fn plan_document(plan: &Plan) -> serde_json::Value {
    serde_json::from_str(&plan.to_json()).unwrap_or(serde_json::Value::Null)
}

/// What a plan is made against.
#[derive(Clone, Copy)]
pub enum Against<'a> {
    /// No live state: everything is a create.
    Offline,
    /// A snapshot file from `gpuctl snapshot`.
    Snapshot(&'a Path),
    /// The cluster these arguments connect to.
    Cluster(&'a ClusterArgs),
}

/// How a plan is made, beyond its blueprint and live state.
pub struct PlanSettings {
    /// Plan deletion of protected kinds too.
    pub prune_protected: bool,
    /// Move pools to DRA despite pods holding device-plugin GPUs.
    pub force_migration: bool,
    /// Concurrent requests.
    pub parallelism: usize,
    /// What to do instead when the cluster cannot be reached.
    pub unreachable_hint: &'static str,
}

/// `gpuctl plan`'s advice when the cluster cannot be reached.
pub const PLAN_UNREACHABLE_HINT: &str =
    "no cluster? plan offline with --offline, or against a snapshot with --snapshot FILE";

/// The plan of one rendered blueprint against `against`: the machinery of `gpuctl plan`, which
/// `gpuctl fleet plan` runs once per cluster.
pub fn plan_rendered(
    rendered: Rendered,
    blueprint: &Path,
    against: Against<'_>,
    settings: &PlanSettings,
) -> Result<Plan, CommandError> {
    let kueue = rendered.kueue;
    let elsewhere = kueue
        .as_ref()
        .filter(|(install, _, _)| *install == InstallMode::None)
        .map(|(_, config, mappings)| (config.clone(), mappings.clone()));
    let mut set = rendered.set;
    resolve_chart(&mut set, blueprint)?;
    plan::refuse_empty(&set)?;
    let (live, kueue_config) = live_view(against, settings, &set, elsewhere.is_some())?;
    let mut plan = plan::plan(
        &set,
        &live,
        PlanOptions {
            prune_protected: settings.prune_protected,
            force_migration: settings.force_migration,
        },
    )?;
    if let Some((config, mappings)) = &elsewhere {
        plan.findings.extend(plan::kueue_config_findings(
            config,
            mappings,
            kueue_config.as_ref(),
        ));
    }
    // The process ends soon after: freeing every live object and manifest one allocation at a
    // time was a tenth of a 64-pool plan's time, for memory the exit returns anyway.
    std::mem::forget((live, set));
    Ok(plan)
}

/// The live state to plan against: empty offline, a snapshot's, or read from the cluster; and,
/// from a cluster when `kueue` asks for it, the running Kueue's configuration.
fn live_view(
    against: Against<'_>,
    settings: &PlanSettings,
    set: &RenderedSet,
    kueue: bool,
) -> Result<(LiveView, Option<read::KueueConfigReading>), CommandError> {
    let cluster = match against {
        Against::Offline => return Ok((LiveView::offline(), None)),
        Against::Snapshot(path) => {
            let snap = Snapshot::read(path)?;
            return Ok((snap.live_view(&parent_of(set).id()), None));
        }
        Against::Cluster(cluster) => cluster,
    };
    runtime()?.block_on(async {
        let k = connect(cluster, Some(settings.unreachable_hint)).await?;
        // A dry-run that meets an admission webhook still starting waits for it, said on stderr.
        let waits = Progress::new(ProgressMode::for_output(ApplyOutput::Human));
        k.webhooks.configure(
            gpuctl_cluster::webhook::DEFAULT_TIMEOUT,
            gpuctl_cluster::webhook::DEFAULT_POLL,
            std::sync::Arc::new(waits),
        );
        let reads = Reads {
            dry_run: true,
            parallelism: settings.parallelism,
        };
        // The running Kueue's configuration is read beside the set, not after it.
        let (view, config) = tokio::join!(read::rendered_set(&k, set, reads), async {
            match kueue {
                true => Some(read::kueue_config(&k).await),
                false => None,
            }
        });
        let view = view?;
        Ok((view, config))
    })
}

/// Error findings fail the plan; with `--detailed-exitcode`, changes exit 2.
pub fn exit_status(plan: &Plan, detailed_exitcode: bool) -> ExitStatus {
    if plan.findings.iter().any(|f| f.severity == Severity::Error) {
        ExitStatus::Failure
    } else if detailed_exitcode && plan.summary.has_changes() {
        ExitStatus::Changes
    } else {
        ExitStatus::Success
    }
}

fn save(plan: &Plan, path: &Path) -> Result<(), CommandError> {
    write_owner_only(path, plan.to_saved_json().as_bytes()).map_err(|e| {
        CommandError::Failed(format!(
            "cannot write the plan to `{}`: {e}",
            path.display()
        ))
    })?;
    eprintln!(
        "wrote the plan to {} (mode 0600): it holds the rendered Helm values and manifests unmasked, because apply sends them; keep it out of PR comments and public CI artifacts (the printed plan is masked)",
        path.display()
    );
    Ok(())
}
