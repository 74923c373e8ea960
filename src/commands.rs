//! The plan, apply and snapshot commands: glue from resolved settings to the pure stages and the
//! cluster layer. Errors are printed here with what to do; the return value is the exit status.

use std::io::Write;
use std::path::Path;

use crate::apply::{self, ApplyOptions, Progress, ProgressMode};
use crate::blueprint::Loaded;
use crate::cli::args::{ApplyOutput, ClusterArgs, PlanFormat, RenderArgs};
use crate::cli::settings;
use crate::cluster::{self, ConnectOptions, snapshot::Snapshot};
use crate::diag::FileReport;
use crate::exit::ExitStatus;
use crate::plan::{self, Live, Plan, PlanOptions};
use crate::render::{self, RenderedSet, Templates};

/// Loads, validates and renders a blueprint (standard input for `-`); prints findings and returns
/// the exit status on failure.
pub fn prepare(path: &Path, args: &RenderArgs) -> Result<RenderedSet, ExitStatus> {
    let today = settings::today(args.today.as_deref()).map_err(|e| {
        eprintln!("error: {e}");
        ExitStatus::Usage
    })?;
    prepare_loaded(crate::blueprint::load_file(path), path, today, args)
}

/// [`prepare`] of a blueprint already read; `path` is what the user named, for the hint.
fn prepare_loaded(
    loaded: Result<Loaded, FileReport>,
    path: &Path,
    today: jiff::civil::Date,
    args: &RenderArgs,
) -> Result<RenderedSet, ExitStatus> {
    let catalog = crate::profiles::Catalog::embedded();
    let loaded = loaded.map_err(|report| {
        eprint!(
            "{}",
            crate::output::human(&[report], settings::stderr_style())
        );
        ExitStatus::Failure
    })?;
    let validated = crate::validate::validate(loaded, catalog, crate::validate::Options { today })
        .map_err(|report| {
            eprint!(
                "{}",
                crate::output::human(&[report], settings::stderr_style())
            );
            eprintln!(
                "error: fix the findings above before planning (`gpuctl validate {}`)",
                path.display()
            );
            ExitStatus::Failure
        })?;
    let templates = Templates::load(args.templates.as_deref()).map_err(|e| {
        eprintln!("error: {e}");
        ExitStatus::Failure
    })?;
    render::render(&validated, catalog, &templates).map_err(|e| {
        eprintln!("error: {e}");
        ExitStatus::Failure
    })
}

/// One thread: plan and apply wait on the network, not on the CPU. Measured on the 4,160-object
/// benchmark apply, two worker threads spent ~1.0 CPU-s (much of it waking each other) where one
/// spends ~0.65, CPU the API server on the same machine needs more.
fn runtime() -> Result<tokio::runtime::Runtime, ExitStatus> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitStatus::Failure
        })
}

fn connect_options(c: &ClusterArgs) -> ConnectOptions {
    ConnectOptions {
        kubeconfig: c.kubeconfig.clone(),
        context: c.context.clone(),
    }
}

/// Settings of `gpuctl plan`.
pub struct PlanCommand<'a> {
    /// Blueprint.
    pub blueprint: &'a Path,
    /// Connection.
    pub cluster: &'a ClusterArgs,
    /// Snapshot file.
    pub snapshot: Option<&'a Path>,
    /// Offline.
    pub offline: bool,
    /// Save to.
    pub out: Option<&'a Path>,
    /// Format.
    pub format: PlanFormat,
    /// Terraform-style exit codes.
    pub detailed_exitcode: bool,
    /// Plan options.
    pub options: PlanOptions,
    /// Verbose human output.
    pub verbose: bool,
    /// Rendering.
    pub render: &'a RenderArgs,
}

/// `gpuctl plan`.
pub fn plan(cmd: PlanCommand<'_>) -> ExitStatus {
    let set = match prepare(cmd.blueprint, cmd.render) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let rt = match runtime() {
        Ok(r) => r,
        Err(s) => return s,
    };
    let result = rt.block_on(async {
        if cmd.offline {
            return plan::plan(&set, Live::Offline, cmd.options).await.map_err(|e| e.to_string());
        }
        if let Some(path) = cmd.snapshot {
            let snap = Snapshot::read(path).map_err(|e| e.to_string())?;
            return plan::plan(&set, Live::Snapshot(&snap), cmd.options).await.map_err(|e| e.to_string());
        }
        let k = cluster::connect(&connect_options(cmd.cluster)).await.map_err(|e| {
            format!("{e}\n(no cluster? plan offline with --offline, or against a snapshot with --snapshot FILE)")
        })?;
        plan::plan(&set, Live::Cluster(&k), cmd.options).await.map_err(|e| e.to_string())
    });
    let plan = match result {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitStatus::Failure;
        }
    };
    if let Some(out) = cmd.out {
        if let Err(e) = write_owner_only(out, plan.to_saved_json().as_bytes()) {
            eprintln!("error: cannot write the plan to `{}`: {e}", out.display());
            return ExitStatus::Failure;
        }
        eprintln!(
            "wrote the plan to {} (mode 0600): it holds the rendered Helm values and manifests unmasked, because apply sends them; keep it out of PR comments and public CI artifacts (the printed plan is masked)",
            out.display()
        );
    }
    let text = match cmd.format {
        PlanFormat::Human => {
            crate::output::plan::human(&plan, settings::stdout_style(), cmd.verbose)
        }
        PlanFormat::Json => plan.to_json(),
        PlanFormat::Markdown => crate::output::plan::markdown(&plan),
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    if plan.findings.iter().any(|f| f.severity == "error") {
        return ExitStatus::Failure;
    }
    if cmd.detailed_exitcode && plan.summary.has_changes() {
        ExitStatus::Changes
    } else {
        ExitStatus::Success
    }
}

/// Writes `bytes` to `path` readable by its owner only: a saved plan carries credentials. The
/// file is created 0600 under a temporary name next to `path` and renamed over it, so the
/// credentials are never readable by others, not even for an instant, and an existing file's
/// wider mode is not kept (`OpenOptions::mode` applies only when a file is created).
pub fn write_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("not a file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    let written = open.open(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Settings of `gpuctl apply`.
pub struct ApplyCommand<'a> {
    /// Blueprint or saved plan (`-`: either, from standard input).
    pub target: &'a Path,
    /// Connection.
    pub cluster: &'a ClusterArgs,
    /// Plan options (when planning a blueprint).
    pub plan_options: PlanOptions,
    /// Apply options.
    pub options: ApplyOptions,
    /// Progress output.
    pub output: ApplyOutput,
    /// Rendering.
    pub render: &'a RenderArgs,
    /// Apply without asking on a terminal.
    pub yes: bool,
}

/// What `gpuctl apply` was given.
#[expect(
    clippy::large_enum_variant,
    reason = "one value per run, moved once; boxing buys nothing"
)]
enum Target {
    /// A plan saved with `gpuctl plan --out` (or why it is not a usable one).
    Plan(Result<Plan, String>),
    /// A blueprint, loaded from the text already read.
    Blueprint(Result<Loaded, FileReport>),
}

/// Reads the target once (it may be standard input, which cannot be read twice) and tells a
/// saved plan from a blueprint. Saved plans are accepted on standard input as blueprints are: the
/// stale check against the cluster protects an apply whatever the plan came through.
fn read_target(path: &Path) -> Result<Target, ExitStatus> {
    let name = crate::input::name(path);
    let bytes = crate::input::read(path, &crate::input::BLUEPRINT_OR_PLAN).map_err(|e| {
        eprintln!("error: {e}");
        ExitStatus::Failure
    })?;
    let looks_like_plan = std::str::from_utf8(&bytes).is_ok_and(|text| {
        text.trim_start().starts_with('{')
            && text.contains("\"format_version\"")
            && text.contains("\"applyset\"")
    });
    if !looks_like_plan {
        return Ok(Target::Blueprint(crate::blueprint::load_bytes(
            &name, bytes,
        )));
    }
    let text = String::from_utf8(bytes).unwrap_or_default();
    Ok(Target::Plan(
        Plan::from_json(&text).map_err(|e| format!("saved plan `{name}`: {e}")),
    ))
}

/// `gpuctl apply`.
pub fn apply(cmd: ApplyCommand<'_>) -> ExitStatus {
    let (saved, set) = match read_target(cmd.target) {
        Err(status) => return status,
        Ok(Target::Plan(Err(e))) => {
            eprintln!("error: {e}");
            return ExitStatus::Failure;
        }
        Ok(Target::Plan(Ok(p))) => (Some(p), None),
        Ok(Target::Blueprint(loaded)) => {
            let today = match settings::today(cmd.render.today.as_deref()) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitStatus::Usage;
                }
            };
            match prepare_loaded(loaded, cmd.target, today, cmd.render) {
                Ok(s) => (None, Some(s)),
                Err(status) => return status,
            }
        }
    };
    let rt = match runtime() {
        Ok(r) => r,
        Err(s) => return s,
    };
    let mode = match cmd.output {
        ApplyOutput::Json => ProgressMode::Json,
        ApplyOutput::Human if settings::stderr_style() == settings::Style::Rich => {
            ProgressMode::Bars
        }
        ApplyOutput::Human => ProgressMode::Lines,
    };
    let progress = Progress::new(mode);
    let from_blueprint = set.is_some();
    let planned: Result<(cluster::Kube, Plan), String> = rt.block_on(async {
        let k = cluster::connect(&connect_options(cmd.cluster))
            .await
            .map_err(|e| e.to_string())?;
        let plan = match (saved, &set) {
            (Some(p), _) => {
                apply::check_stale(&k, &p, cmd.options.parallelism)
                    .await
                    .map_err(|e| e.to_string())?;
                p
            }
            (None, Some(set)) => plan::plan(set, Live::Cluster(&k), cmd.plan_options)
                .await
                .map_err(|e| e.to_string())?,
            (None, None) => unreachable!("a blueprint was rendered above"),
        };
        Ok((k, plan))
    });
    let (k, plan) = match planned {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitStatus::Failure;
        }
    };
    let errors: Vec<&str> = plan
        .findings
        .iter()
        .filter(|f| f.severity == "error")
        .map(|f| f.message.as_str())
        .collect();
    if !errors.is_empty() {
        eprintln!(
            "error: nothing was applied; the plan has {} error finding(s):\n{}",
            errors.len(),
            errors
                .iter()
                .map(|m| format!("  - {m}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        return ExitStatus::Failure;
    }
    if !plan.summary.has_changes() {
        eprintln!("No changes. The cluster matches the blueprint.");
        return ExitStatus::Success;
    }
    // A blueprint is planned and applied in one go: show what is about to happen (saved plans
    // were reviewed when they were made). A person at a terminal confirms it; pipelines, which
    // have no terminal, proceed as `kubectl apply` does, and log the plan.
    if from_blueprint && cmd.output == ApplyOutput::Human {
        eprint!(
            "{}",
            crate::output::plan::human(&plan, settings::stderr_style(), false)
        );
        if !cmd.yes && interactive() && !confirm(&plan, &k) {
            eprintln!("Apply cancelled; nothing was changed.");
            return ExitStatus::Failure;
        }
    }
    let result = rt.block_on(apply::apply(&k, &plan, &cmd.options, &progress));
    match result {
        Ok(_) => ExitStatus::Success,
        Err(e) => {
            eprintln!("error: {e}");
            ExitStatus::Failure
        }
    }
}

/// Both ends a person would use are terminals.
fn interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks on the terminal; only `yes` goes ahead (as Terraform asks).
fn confirm(plan: &Plan, k: &cluster::Kube) -> bool {
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

/// `gpuctl snapshot`.
pub fn snapshot(
    blueprint: &Path,
    cluster_args: &ClusterArgs,
    out: &Path,
    render_args: &RenderArgs,
) -> ExitStatus {
    let set = match prepare(blueprint, render_args) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let rt = match runtime() {
        Ok(r) => r,
        Err(s) => return s,
    };
    let result = rt.block_on(async {
        let k = cluster::connect(&connect_options(cluster_args))
            .await
            .map_err(|e| e.to_string())?;
        crate::plan::capture(&k, &set)
            .await
            .map_err(|e| e.to_string())
    });
    match result {
        // A snapshot holds the live Helm release's values unmasked (plans diff them): owner-only,
        // like a saved plan.
        Ok(snap) => match write_owner_only(out, snap.to_json().as_bytes()) {
            Ok(()) => {
                eprintln!(
                    "wrote {} objects and {} nodes to {} (mode 0600: it holds the live Helm values unmasked)",
                    snap.objects.len(),
                    snap.nodes.len(),
                    out.display()
                );
                ExitStatus::Success
            }
            Err(e) => {
                eprintln!("error: cannot write `{}`: {e}", out.display());
                ExitStatus::Failure
            }
        },
        Err(e) => {
            eprintln!("error: {e}");
            ExitStatus::Failure
        }
    }
}
