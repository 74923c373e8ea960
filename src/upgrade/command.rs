//! `gpuctl upgrade driver | status | rollback`: glue from the command line to pre-flight, the
//! planner, the runbook and the executor. Errors are printed here with what to do next; the
//! return value is the exit status.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;

use super::execute::{self, Cancel};
use super::journal::{self, Journal, JournalPhase, JournalStore, NodeState};
use super::plan::{self, UpgradePlan};
use super::preflight::{self, PrepareError};
use super::{Timing, UpgradeError, live, runbook};
use crate::apply::{Progress, ProgressMode};
use crate::cli::args::{
    ApplyOutput, ClusterArgs, UpgradeCommand, UpgradeFormat, UpgradeTimingArgs,
};
use crate::cli::settings::{self, Style};
use crate::cluster::{self, ConnectOptions, Kube};
use crate::exit::ExitStatus;
use crate::render::Templates;

/// Runs one `gpuctl upgrade` subcommand.
pub fn run(cmd: UpgradeCommand) -> ExitStatus {
    match cmd {
        UpgradeCommand::Driver {
            blueprint,
            pool,
            to,
            runbook,
            execute,
            resume,
            namespace,
            format,
            timing,
            cluster,
            render,
        } => {
            let Some(t) = timing_of(&timing) else {
                return ExitStatus::Usage;
            };
            let progress = progress_of(timing.output);
            if resume {
                return with_cluster(&cluster, |k| async move {
                    let (cancel, _guard) = ctrl_c();
                    finish(
                        execute::resume(
                            &k,
                            namespace.as_deref(),
                            pool.as_deref(),
                            &t,
                            &progress,
                            cancel,
                        )
                        .await,
                    )
                });
            }
            let (Some(blueprint), Some(pool), Some(to)) = (blueprint, pool, to) else {
                eprintln!("error: BLUEPRINT, --pool and --to are required without --resume");
                return ExitStatus::Usage;
            };
            let today = match settings::today(render.today.as_deref()) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitStatus::Usage;
                }
            };
            let templates = match Templates::load(render.templates.as_deref()) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitStatus::Failure;
                }
            };
            let prep = match preflight::prepare(&blueprint, &pool, &to, today, &templates) {
                Ok(p) => p,
                Err(PrepareError::Blueprint(report)) => {
                    eprint!(
                        "{}",
                        crate::output::human(
                            std::slice::from_ref(&report),
                            settings::stderr_style()
                        )
                    );
                    eprintln!(
                        "error: fix the findings above first (`gpuctl validate {}`)",
                        blueprint.display()
                    );
                    return ExitStatus::Failure;
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitStatus::Failure;
                }
            };
            with_cluster(&cluster, |k| async move {
                let view = match live::read(&k, &prep.node_patch().selector).await {
                    Ok(v) => v,
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitStatus::Failure;
                    }
                };
                let ns = &prep.blueprint().spec.gpu_operator.namespace;
                let existing = match JournalStore::new(&k, ns, &pool).load().await {
                    Ok(j) => j,
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitStatus::Failure;
                    }
                };
                let plan = plan::build(&prep, &view, existing.as_ref(), &t);
                let text = match format {
                    UpgradeFormat::Human => plan::human_for(&plan, execute),
                    UpgradeFormat::Json => {
                        let mut s = serde_json::to_string_pretty(&plan).unwrap_or_default();
                        s.push('\n');
                        s
                    }
                };
                let _ = std::io::stdout().lock().write_all(text.as_bytes());
                if let Some(path) = &runbook
                    && let Err(e) = write_runbook(&plan, &templates, path)
                {
                    eprintln!("error: {e}");
                    return ExitStatus::Failure;
                }
                if plan.errors() > 0 {
                    return ExitStatus::Failure;
                }
                if !execute {
                    return ExitStatus::Success;
                }
                let (cancel, _guard) = ctrl_c();
                finish(execute::start(&k, &plan, &t, &progress, cancel).await)
            })
        }
        UpgradeCommand::Status {
            pool,
            namespace,
            format,
            cluster,
        } => with_cluster(&cluster, |k| async move {
            let journals = match journal::list(&k, namespace.as_deref(), pool.as_deref()).await {
                Ok(j) => j,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitStatus::Failure;
                }
            };
            let mut leases = Vec::new();
            for j in &journals {
                match journal::lease_info(&k, &j.namespace, &j.pool).await {
                    Ok(l) => leases.push(l),
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitStatus::Failure;
                    }
                }
            }
            let text = match format {
                UpgradeFormat::Human => status_human(&journals, &leases),
                UpgradeFormat::Json => {
                    let items: Vec<_> = journals
                        .iter()
                        .zip(&leases)
                        .map(|(j, l)| json!({"journal": j, "lease": l}))
                        .collect();
                    let mut s = serde_json::to_string_pretty(&items).unwrap_or_default();
                    s.push('\n');
                    s
                }
            };
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            ExitStatus::Success
        }),
        UpgradeCommand::Rollback {
            pool,
            namespace,
            timing,
            cluster,
        } => {
            let Some(t) = timing_of(&timing) else {
                return ExitStatus::Usage;
            };
            let progress = progress_of(timing.output);
            with_cluster(&cluster, |k| async move {
                let (cancel, _guard) = ctrl_c();
                finish(
                    execute::rollback(
                        &k,
                        namespace.as_deref(),
                        pool.as_deref(),
                        &t,
                        &progress,
                        cancel,
                    )
                    .await,
                )
            })
        }
    }
}

fn timing_of(a: &UpgradeTimingArgs) -> Option<Timing> {
    let parse = |flag: &str, v: &str| settings::duration(flag, v);
    match (
        parse("poll-interval", &a.poll_interval),
        parse("validate-timeout", &a.validate_timeout),
        parse("lease-duration", &a.lease_duration),
        parse("node-upgrade-estimate", &a.node_upgrade_estimate),
    ) {
        (Ok(poll), Ok(validate_timeout), Ok(lease_duration), Ok(node_upgrade_estimate)) => {
            if lease_duration < Duration::from_secs(1) {
                eprintln!("error: --lease-duration must be at least 1s");
                return None;
            }
            Some(Timing {
                poll: poll.max(Duration::from_millis(10)),
                validate_timeout,
                lease_duration,
                node_upgrade_estimate,
            })
        }
        (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => {
            eprintln!("error: {e}");
            None
        }
    }
}

fn progress_of(output: ApplyOutput) -> Progress {
    Progress::new(match output {
        ApplyOutput::Json => ProgressMode::Json,
        ApplyOutput::Human => match settings::stderr_style() {
            Style::Rich => ProgressMode::Bars,
            Style::Plain => ProgressMode::Lines,
        },
    })
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

fn finish(r: Result<Journal, UpgradeError>) -> ExitStatus {
    match r {
        Ok(_) => ExitStatus::Success,
        Err(e) => {
            eprintln!("error: {e}");
            ExitStatus::Failure
        }
    }
}

fn with_cluster<F, Fut>(c: &ClusterArgs, f: F) -> ExitStatus
where
    F: FnOnce(Kube) -> Fut,
    Fut: std::future::Future<Output = ExitStatus>,
{
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitStatus::Failure;
        }
    };
    rt.block_on(async {
        let k = match cluster::connect(&ConnectOptions {
            kubeconfig: c.kubeconfig.clone(),
            context: c.context.clone(),
        })
        .await
        {
            Ok(k) => k,
            Err(e) => {
                eprintln!(
                    "error: {e}\n(upgrades read the live cluster; check --kubeconfig and --context)"
                );
                return ExitStatus::Failure;
            }
        };
        f(k).await
    })
}

/// Writes the runbook and its timeline next to it.
pub fn write_runbook(plan: &UpgradePlan, templates: &Templates, path: &Path) -> Result<(), String> {
    let svg_path = runbook::svg_path(path);
    let svg_name = svg_path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let md = runbook::markdown(plan, templates, &svg_name).map_err(|e| e.to_string())?;
    std::fs::write(path, md).map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
    std::fs::write(&svg_path, runbook::timeline_svg(plan))
        .map_err(|e| format!("cannot write `{}`: {e}", svg_path.display()))?;
    eprintln!(
        "wrote the runbook to {} and its timeline to {}",
        path.display(),
        svg_path.display()
    );
    Ok(())
}

fn batch_state(j: &Journal, nodes: &[String]) -> &'static str {
    let states: Vec<NodeState> = nodes
        .iter()
        .filter_map(|n| j.nodes.get(n).map(|r| r.state))
        .collect();
    if states.iter().all(|s| *s == NodeState::Done) {
        "done"
    } else if states.iter().all(|s| *s == NodeState::RolledBack) {
        "rolled back"
    } else if states.contains(&NodeState::Failed) {
        "failed"
    } else if states.iter().all(|s| *s == NodeState::Blue) {
        "pending"
    } else {
        "in progress"
    }
}

/// `gpuctl upgrade status` as text.
pub fn status_human(journals: &[Journal], leases: &[Option<journal::LeaseInfo>]) -> String {
    let mut s = String::new();
    if journals.is_empty() {
        s.push_str("No driver upgrade is recorded in this cluster.\n");
        return s;
    }
    for (j, l) in journals.iter().zip(leases) {
        let _ = writeln!(
            s,
            "pool {} (blueprint {}, journal {}/{}): {}, step {}",
            j.pool,
            j.blueprint,
            j.namespace,
            journal::object_name(&j.pool),
            j.phase.describe(),
            j.step
        );
        let _ = writeln!(
            s,
            "  {} ({}) -> {} ({}); colour {} {} -> {}; at most {} node(s) unavailable",
            j.from_version,
            j.blue_cr,
            j.to_version,
            j.green_cr,
            j.color_label,
            j.blue_color,
            j.green_color,
            j.max_unavailable
        );
        let lease = match l {
            Some(l) if l.live() => format!(
                "held by {} (renewed {}s ago, lasts {}s): a run is active",
                l.holder, l.age_s, l.duration_s
            ),
            Some(l) if !l.holder.is_empty() => format!(
                "last held by {} (expired; the next run takes over)",
                l.holder
            ),
            _ => "free".into(),
        };
        let _ = writeln!(s, "  lease: {lease}");
        let _ = writeln!(s, "  {}", j.where_it_is());
        for (i, nodes) in j.batches.iter().enumerate() {
            let _ = writeln!(
                s,
                "  batch {}: {:<11} {}",
                i + 1,
                batch_state(j, nodes),
                nodes
                    .iter()
                    .map(|n| {
                        let r = j.nodes.get(n);
                        let st = r.map_or("?", |r| r.state.name());
                        match r.and_then(|r| r.message.as_deref()) {
                            Some(m) => format!("{n} ({st}: {m})"),
                            None => format!("{n} ({st})"),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let recent: Vec<_> = j.events.iter().rev().take(5).collect();
        if !recent.is_empty() {
            let _ = writeln!(s, "  last events:");
            for e in recent.iter().rev() {
                let _ = writeln!(s, "    [{}] {} {}", e.step, e.at, e.message);
            }
        }
        let next = match j.phase {
            JournalPhase::Running | JournalPhase::Failed => format!(
                "next: `gpuctl upgrade driver --resume --pool {0}` continues; `gpuctl upgrade rollback --pool {0}` undoes",
                j.pool
            ),
            JournalPhase::RollingBack => format!(
                "next: `gpuctl upgrade rollback --pool {}` finishes the rollback",
                j.pool
            ),
            JournalPhase::Completed => format!("done; {}", j.blueprint_change),
            JournalPhase::RolledBack => "done; the pool is back where it was".into(),
        };
        let _ = writeln!(s, "  {next}");
    }
    s
}
