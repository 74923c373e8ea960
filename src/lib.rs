//! gpuctl: declarative Day-0/1/2 lifecycle tool for GPU Kubernetes clusters.
//!
//! Data flow: blueprint --load--> [`blueprint::Loaded`] --validate (profiles)-->
//! [`validate::ValidatedBlueprint`] --render--> objects --plan/apply--> cluster. Everything up to the
//! plan is pure; only the cluster layer talks to an API server.

pub mod apply;
pub mod applyset;
pub mod blueprint;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod diag;
pub mod exit;
pub mod input;
pub mod output;
pub mod plan;
pub mod profiles;
pub mod quantity;
pub mod render;
pub mod suggest;
#[doc(hidden)]
pub mod testgen;
pub mod upgrade;
pub mod validate;
pub mod version;

use std::io::Write;

use clap::{CommandFactory, Parser};

use cli::args::{Cli, Command, Format, ProfilesFormat};
use cli::settings;
use diag::{FileReport, Severity};
use exit::ExitStatus;

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
    let status = match cli.command {
        Command::Validate {
            files,
            format,
            strict,
            today,
        } => {
            if files.iter().filter(|f| input::is_stdin(f)).count() > 1 {
                eprintln!(
                    "error: `-` (standard input) can be given once; name the other blueprints as files"
                );
                return ExitStatus::Usage;
            }
            let today = match settings::today(today.as_deref()) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitStatus::Usage;
                }
            };
            let reports: Vec<FileReport> = files
                .iter()
                .map(|f| validate_file(f, validate::Options { today }))
                .collect();
            let text = match format {
                Format::Human => output::human(&reports, settings::stdout_style()),
                Format::Json => output::json(&reports),
                Format::Sarif => output::sarif(&reports),
            };
            let _ = out.write_all(text.as_bytes());
            let s = output::summary(&reports);
            if s.errors > 0 || (strict && s.warnings > 0) {
                ExitStatus::Failure
            } else {
                ExitStatus::Success
            }
        }
        Command::Explain { rule, all } => {
            if all {
                let _ = out.write_all(validate::registry::markdown().as_bytes());
                ExitStatus::Success
            } else {
                let id = rule.unwrap_or_default();
                match validate::registry::rule(&id) {
                    Some(r) => {
                        let _ = out.write_all(validate::registry::explain(r).as_bytes());
                        ExitStatus::Success
                    }
                    None => {
                        let ids = validate::registry::RULES.iter().map(|r| r.id);
                        eprintln!(
                            "error: no rule `{id}`; {}rules are GPU001..GPU095 (`gpuctl explain --all` lists them)",
                            suggest::did_you_mean(&id, ids)
                        );
                        ExitStatus::Usage
                    }
                }
            }
        }
        Command::Schema => {
            let schema = schemars::schema_for!(blueprint::Blueprint);
            let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
            s.push('\n');
            let _ = out.write_all(s.as_bytes());
            ExitStatus::Success
        }
        Command::Profiles { format } => {
            let catalog = profiles::Catalog::embedded();
            let text = match format {
                ProfilesFormat::Human => profiles::render_human(catalog),
                ProfilesFormat::Json => profiles::render_json(catalog),
            };
            let _ = out.write_all(text.as_bytes());
            ExitStatus::Success
        }
        Command::Plan {
            blueprint,
            cluster,
            snapshot,
            offline,
            out,
            format,
            detailed_exitcode,
            prune_protected,
            parallelism,
            verbose,
            render,
        } => {
            if input::is_stdin(&blueprint) && snapshot.as_deref().is_some_and(input::is_stdin) {
                eprintln!(
                    "error: the blueprint and --snapshot cannot both be `-` (standard input); give the snapshot as a file"
                );
                return ExitStatus::Usage;
            }
            commands::plan(commands::PlanCommand {
                blueprint: &blueprint,
                cluster: &cluster,
                snapshot: snapshot.as_deref(),
                offline,
                out: out.as_deref(),
                format,
                detailed_exitcode,
                options: plan::PlanOptions {
                    prune_protected,
                    parallelism: usize::from(parallelism),
                },
                verbose,
                render: &render,
            })
        }
        Command::Apply {
            target,
            cluster,
            force_conflicts,
            prune_protected,
            parallelism,
            wait_timeout,
            crd_timeout,
            no_helm,
            yes,
            output,
            render,
        } => {
            let (wait_timeout, crd_timeout) = match (
                settings::duration("wait-timeout", &wait_timeout),
                settings::duration("crd-timeout", &crd_timeout),
            ) {
                (Ok(w), Ok(c)) => (w, c),
                (Err(e), _) | (_, Err(e)) => {
                    eprintln!("error: {e}");
                    return ExitStatus::Usage;
                }
            };
            commands::apply(commands::ApplyCommand {
                target: &target,
                cluster: &cluster,
                plan_options: plan::PlanOptions {
                    prune_protected,
                    parallelism: usize::from(parallelism),
                },
                options: apply::ApplyOptions {
                    force_conflicts,
                    parallelism: usize::from(parallelism),
                    crd_timeout,
                    wait_timeout,
                    run_helm: !no_helm,
                    ..apply::ApplyOptions::default()
                },
                output,
                render: &render,
                yes,
            })
        }
        Command::Snapshot {
            blueprint,
            cluster,
            out,
            render,
        } => commands::snapshot(&blueprint, &cluster, &out, &render),
        Command::Render {
            blueprint,
            output,
            templates,
            today,
        } => match settings::today(today.as_deref()) {
            Ok(today) => render::command::run(
                render::command::RenderCommand {
                    blueprint: &blueprint,
                    out_dir: output.as_deref(),
                    templates: templates.as_deref(),
                    today,
                    style: cli::settings::Style::Plain,
                },
                &mut out,
            ),
            Err(e) => {
                eprintln!("error: {e}");
                ExitStatus::Usage
            }
        },
        Command::Upgrade { command } => upgrade::command::run(command),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "gpuctl", &mut out);
            ExitStatus::Success
        }
    };
    let _ = out.flush();
    status
}

/// Loads and validates one file (standard input for `-`) into a report of every finding.
pub fn validate_file(path: &std::path::Path, opts: validate::Options) -> FileReport {
    match blueprint::load_file(path) {
        Ok(loaded) => validate::check(&loaded, profiles::Catalog::embedded(), opts),
        Err(report) => report,
    }
}

/// True when a report has error findings.
pub fn has_errors(report: &FileReport) -> bool {
    report.count(Severity::Error) > 0
}
