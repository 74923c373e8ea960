//! Every command, one file each: each resolves its arguments into settings, runs the core and
//! cluster stages, prints with [`crate::output`], and returns a typed result. [`run`] parses the
//! command line, dispatches, and is the one place an error is printed and turned into an exit
//! status.

mod apply;
mod ci;
mod completions;
mod doctor;
mod explain;
mod files;
mod fleet;
mod fleet_apply;
mod fleet_multikueue;
mod fleet_plan;
mod fleet_snapshot;
mod import;
mod pipeline;
mod plan;
mod policy;
mod profiles;
mod render;
mod report;
mod schema;
mod snapshot;
mod status;
mod unlock;
mod upgrade;
mod validate;

use std::io::Write;

use clap::Parser;
use gpuctl_cluster::apply::ApplyError;
use gpuctl_cluster::upgrade::UpgradeError;
use gpuctl_cluster::{ClusterError, ConnectOptions, Kube};
use gpuctl_day2::snapshot::SnapshotError;
use gpuctl_model::input::InputError;
use gpuctl_pipeline::render::RenderError;
use gpuctl_plan::plan::{PlanError, SavedPlanError};

use crate::args::{
    ApplyArgs, Cli, ClusterArgs, Command, DoctorArgs, ImportArgs, PlanArgs, ProfilesArgs,
    RenderCommandArgs, SnapshotArgs, StatusArgs, ValidateArgs,
};
use crate::exit::ExitStatus;
use crate::output::tree::TreeError;
use crate::settings::FlagError;

pub use files::write_owner_only;
pub use pipeline::{has_errors, validate_file};

/// Why a command failed. [`run`] prints it once, after `error: `, and exits 64 for a wrong
/// command line, 1 otherwise.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// A flag's value is wrong (exit 64).
    #[error(transparent)]
    Flag(#[from] FlagError),
    /// The arguments do not fit together (exit 64).
    #[error("{0}")]
    Usage(String),
    /// The findings were printed already, with what to do (exit 1, nothing more printed).
    #[error("the findings above say what to fix")]
    Reported,
    /// An input file could not be read (`blueprint `x`: cannot read the file: ...`, as a snapshot's).
    #[error("{what} {0}", what = .0.limit.what)]
    Input(#[from] InputError),
    /// Templates failed to load or render.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Connecting to the cluster failed; the hint says what else the command can do.
    #[error("{source}{}", .hint.map(|h| format!("\n({h})")).unwrap_or_default())]
    Connect {
        /// Why.
        source: ClusterError,
        /// What else to do.
        hint: Option<&'static str>,
    },
    /// The cluster failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A plan could not be made.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A saved plan cannot be applied.
    #[error("saved plan `{file}`: {source}")]
    SavedPlan {
        /// The file as named.
        file: String,
        /// Why.
        source: SavedPlanError,
    },
    /// A snapshot file cannot be used.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A live plan or snapshot could not be made.
    #[error(transparent)]
    Live(#[from] gpuctl_cluster::read::LiveError),
    /// Apply stopped.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// A driver upgrade stopped or was refused.
    #[error(transparent)]
    Upgrade(#[from] UpgradeError),
    /// The GitOps tree could not be written.
    #[error("cannot write {dir}: {source}")]
    Tree {
        /// The directory.
        dir: String,
        /// Why.
        source: TreeError,
    },
    /// A file could not be written.
    #[error("cannot write `{path}`: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Anything else, said in full.
    #[error("{0}")]
    Failed(String),
}

impl CommandError {
    /// The exit status of this error.
    pub fn status(&self) -> ExitStatus {
        match self {
            CommandError::Flag(_) | CommandError::Usage(_) => ExitStatus::Usage,
            _ => ExitStatus::Failure,
        }
    }
}

/// What a command returns: its exit status, or why it failed.
pub type CommandResult = Result<ExitStatus, CommandError>;

/// Parses `args` and runs the command, writing to stdout/stderr. Never panics on user input.
pub fn run<I, T>(args: I) -> ExitStatus
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitStatus::Success
                }
                _ => ExitStatus::Usage,
            };
        }
    };
    let mut out = std::io::stdout().lock();
    let result = dispatch(cli.command, &mut out);
    let _ = out.flush();
    match result {
        Ok(status) => status,
        Err(CommandError::Reported) => ExitStatus::Failure,
        Err(e) => {
            eprintln!("error: {e}");
            e.status()
        }
    }
}

fn dispatch(command: Command, out: &mut dyn Write) -> CommandResult {
    match command {
        Command::Validate(a) => run_validate(a, out),
        Command::Explain { rule, all, fields } => explain::run(rule.as_deref(), all, fields, out),
        Command::Schema => schema::run(out),
        Command::Profiles(a) => run_profiles(a, out),
        Command::Plan(a) => run_plan(a, out),
        Command::Apply(a) => run_apply(a),
        Command::Unlock(a) => unlock::run(&a.blueprint, &a.cluster, a.holder.as_deref(), a.yes),
        Command::Snapshot(a) => run_snapshot(a),
        Command::Doctor(a) => run_doctor(a, out),
        Command::Import(a) => run_import(a, out),
        Command::Status(a) => run_status(a, out),
        Command::Report(a) => report::run(&a, out),
        Command::Render(a) => run_render(a, out),
        Command::Fleet { command } => fleet::run(command, out),
        Command::Policy {
            command: crate::args::PolicyCommand::Test { dirs, data, output },
        } => policy::run_test(&dirs, &data, output, out),
        Command::Upgrade { command } => upgrade::run(command, out),
        Command::Ci { command } => ci::run(command),
        Command::Version => {
            emit(out, concat!("gpuctl ", env!("CARGO_PKG_VERSION"), "\n"));
            Ok(ExitStatus::Success)
        }
        Command::Completions { shell } => completions::run(shell, out),
    }
}

fn run_validate(a: ValidateArgs, out: &mut dyn Write) -> CommandResult {
    let format = crate::settings::deprecated("--format", "-o/--output", a.format, a.output);
    validate::run(
        &a.files,
        format,
        a.strict,
        a.today.as_deref(),
        &a.policy,
        out,
    )
}

/// The catalog, or with `--stale-after` only its rows read too long ago.
fn run_profiles(a: ProfilesArgs, out: &mut dyn Write) -> CommandResult {
    let format = crate::settings::deprecated("--format", "-o/--output", a.format, a.output);
    match a.stale_after {
        None => profiles::run(format, out),
        Some(days) => {
            let today = crate::settings::today(a.today.as_deref())?;
            profiles::stale(format, days, today, out)
        }
    }
}

fn run_plan(a: PlanArgs, out: &mut dyn Write) -> CommandResult {
    plan::run(
        plan::PlanCommand {
            blueprint: &a.blueprint,
            cluster: &a.cluster,
            snapshot: a.snapshot.as_deref(),
            offline: a.offline,
            save: a.out.as_deref(),
            format: crate::settings::deprecated("--format", "-o/--output", a.format, a.output),
            detailed_exitcode: a.detailed_exitcode,
            prune_protected: a.prune_protected,
            force_migration: a.force_migration,
            parallelism: usize::from(a.parallelism),
            verbose: a.verbose,
            render: &a.render,
            policy: &a.policy,
        },
        out,
    )
}

/// Apply, with its durations parsed into the cluster crate's options.
fn run_apply(a: ApplyArgs) -> CommandResult {
    apply::run(apply::ApplyCommand {
        target: &a.target,
        cluster: &a.cluster,
        prune_protected: a.prune_protected,
        force_migration: a.force_migration,
        options: gpuctl_cluster::apply::ApplyOptions {
            force_conflicts: a.force_conflicts,
            adopt: a.adopt,
            parallelism: usize::from(a.parallelism),
            crd_timeout: crate::settings::duration("crd-timeout", &a.crd_timeout)?,
            wait_timeout: crate::settings::duration("wait-timeout", &a.wait_timeout)?,
            run_helm: !a.no_helm,
            force_uninstall: a.force_uninstall,
            force_migration: a.force_migration,
            lock_timeout: crate::settings::duration("lock-timeout", &a.lock_timeout)?,
            lock_duration: crate::settings::at_least(
                "lock-duration",
                &a.lock_duration,
                std::time::Duration::from_secs(1),
            )?,
            ..gpuctl_cluster::apply::ApplyOptions::default()
        },
        webhook_timeout: crate::settings::duration("webhook-timeout", &a.webhook_timeout)?,
        output: a.output,
        render: &a.render,
        yes: a.yes,
    })
}

/// One blueprint's objects, or with `--all` everything import reads.
fn run_snapshot(a: SnapshotArgs) -> CommandResult {
    match (a.blueprint, a.all) {
        (_, true) => snapshot::run_all(&a.cluster, &a.out),
        (Some(blueprint), false) => {
            snapshot::run(&blueprint, &a.cluster, &a.out, &a.render, a.diagnostics)
        }
        (None, false) => Err(CommandError::Usage(
            "name a blueprint, or capture everything import reads with --all".into(),
        )),
    }
}

fn run_doctor(a: DoctorArgs, out: &mut dyn Write) -> CommandResult {
    doctor::run(
        doctor::DoctorCommand {
            blueprint: &a.blueprint,
            cluster: &a.cluster,
            snapshot: a.snapshot.as_deref(),
            format: a.output,
            today: a.today.as_deref(),
            metrics: &a.metrics,
        },
        out,
    )
}

fn run_import(a: ImportArgs, out: &mut dyn Write) -> CommandResult {
    import::run(
        &a.cluster,
        a.snapshot.as_deref(),
        a.out.as_deref(),
        a.name,
        a.today.as_deref(),
        out,
    )
}

fn run_status(a: StatusArgs, out: &mut dyn Write) -> CommandResult {
    status::run(
        status::StatusCommand {
            blueprint: &a.blueprint,
            cluster: &a.cluster,
            snapshot: a.snapshot.as_deref(),
            format: a.output,
            svg: a.svg.as_deref(),
            prometheus: a.prometheus.as_deref().map(|url| status::LastHourSource {
                url,
                token_file: a.prometheus_token_file.as_deref(),
                ca_file: a.prometheus_ca_file.as_deref(),
                until: a.until.as_deref(),
            }),
        },
        out,
    )
}

/// Render, `--output-dir` or its deprecated spelling `-o/--output`.
fn run_render(a: RenderCommandArgs, out: &mut dyn Write) -> CommandResult {
    let output_dir = crate::settings::deprecated(
        "-o/--output DIR",
        "--output-dir DIR",
        a.output.map(Some),
        a.output_dir,
    );
    render::run(
        &a.blueprint,
        output_dir.as_deref(),
        a.templates.as_deref(),
        a.today.as_deref(),
        out,
    )
}

/// The one async runtime of every cluster command. One thread: plan and apply wait on the network,
/// not on the CPU. Measured on the 4,160-object benchmark apply, two worker threads spent ~1.0
/// CPU-s (much of it waking each other) where one spends ~0.65, CPU the API server on the same
/// machine needs more. An upgrade's Lease renewal is a task on the same thread: every step of an
/// upgrade awaits the API server, so the renewal runs between them.
fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::Failed(format!("cannot start the async runtime: {e}")))
}

/// Connects as `--kubeconfig` / `--context` say; `hint` says what else the command can do.
async fn connect(c: &ClusterArgs, hint: Option<&'static str>) -> Result<Kube, CommandError> {
    gpuctl_cluster::connect(&ConnectOptions {
        kubeconfig: c.kubeconfig.clone(),
        context: c.context.clone(),
    })
    .await
    .map_err(|source| CommandError::Connect { source, hint })
}

/// Both ends a person would use are terminals (so asking for confirmation makes sense).
fn interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Writes command output; a closed pipe is not an error worth a message.
fn emit(out: &mut dyn Write, text: &str) {
    let _ = out.write_all(text.as_bytes());
}
