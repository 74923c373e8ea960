//! Command-line types (clap only). They never reach domain code: `settings.rs` resolves them.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Declarative Day-0/1/2 lifecycle for GPU Kubernetes clusters.
#[derive(Debug, Parser)]
#[command(name = "gpuctl", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// gpuctl commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check blueprints against the facts catalog and report every finding.
    Validate {
        /// Blueprint files.
        #[arg(required = true, value_name = "BLUEPRINT")]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Fail on warnings too.
        #[arg(long)]
        strict: bool,
        /// Date used for end-of-life checks (YYYY-MM-DD; default today, or GPUCTL_TODAY).
        #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
        today: Option<String>,
    },
    /// Explain a validation rule (or every rule with --all).
    Explain {
        /// Rule id, e.g. GPU050.
        #[arg(value_name = "RULE", required_unless_present = "all")]
        rule: Option<String>,
        /// Print every rule (the content of docs/rules.md).
        #[arg(long)]
        all: bool,
    },
    /// Print the JSON Schema of the blueprint (for editors).
    Schema,
    /// List the facts catalog: GPUs, drivers, CUDA, architectures, operator releases.
    Profiles {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ProfilesFormat::Human)]
        format: ProfilesFormat,
    },
    /// Render every object, Helm value and runbook a blueprint implies (validates first).
    Render {
        /// Blueprint file.
        #[arg(value_name = "BLUEPRINT")]
        blueprint: PathBuf,
        /// Write a kustomize-ready tree to DIR instead of printing YAML.
        #[arg(short = 'o', long = "output", value_name = "DIR")]
        output: Option<PathBuf>,
        /// Directory whose templates replace the embedded ones (same relative paths).
        #[arg(long, value_name = "DIR")]
        templates: Option<PathBuf>,
        /// Date used for end-of-life checks (YYYY-MM-DD; default today, or GPUCTL_TODAY).
        #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
        today: Option<String>,
    },
    /// Print a shell completion script.
    Completions {
        /// Shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Findings output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Findings with source snippets; colour on a terminal unless NO_COLOR is set.
    Human,
    /// Versioned JSON.
    Json,
    /// SARIF 2.1.0 for code-scanning annotations.
    Sarif,
}

/// `profiles` output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProfilesFormat {
    /// Tables.
    Human,
    /// The catalog as JSON.
    Json,
}
