//! Command-line types (clap only). They never leave the binary (the core and cluster crates do not
//! depend on clap): `settings.rs` and the commands resolve them into plain settings.

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
    Validate(ValidateArgs),
    /// Explain a finding id: a validation rule, a doctor, metric, import, plan or policy finding
    /// (or every id with --all, every blueprint field with --fields).
    Explain {
        /// Finding id, e.g. GPU050 (validation), GPU200 (doctor), GPU251 (metrics), GPU300 (import),
        /// GPU401 (plan), GPU500 (policy).
        #[arg(value_name = "RULE", required_unless_present_any = ["all", "fields"])]
        rule: Option<String>,
        /// Print every rule and finding id (the content of docs/rules.md).
        #[arg(long, conflicts_with = "fields")]
        all: bool,
        /// Print every blueprint field: type, default, accepted values, the rules that check it
        /// and an example (the content of docs/blueprint-reference.md).
        #[arg(long)]
        fields: bool,
    },
    /// Print the JSON Schema of the blueprint (for editors).
    Schema,
    /// List the facts catalog: GPUs, drivers, CUDA, architectures, operator releases.
    Profiles(ProfilesArgs),
    /// Show what applying a blueprint would change: live (server-side dry-run), from a snapshot, or offline.
    Plan(PlanArgs),
    /// Apply a blueprint (planning first) or a saved plan (refused when stale).
    Apply(ApplyArgs),
    /// Remove a blueprint's apply lock left by a killed run (asks first, like `terraform force-unlock`).
    Unlock(UnlockArgs),
    /// Capture the live objects a blueprint touches, for offline plans in CI (`--all`: what
    /// `gpuctl import` reads, for importing a cluster CI cannot reach).
    Snapshot(SnapshotArgs),
    /// Why is GPU work stuck or failing? Findings by runbook layer (scheduling, container start,
    /// runtime, nodes and hardware), each with its objects, evidence, cause and fix.
    Doctor(DoctorArgs),
    /// Write the blueprint of a running cluster (live, or from `gpuctl snapshot --all`).
    Import(ImportArgs),
    /// Capacity, quotas, queues and fragmentation of a blueprint's GPU pools, live or from a
    /// snapshot taken with `gpuctl snapshot BLUEPRINT --diagnostics`; `--svg FILE` draws them.
    Status(StatusArgs),
    /// GPU-hours allocated, used, idle, unknown and borrowed, and their cost, per tenant (or pool,
    /// GPU model, queue) and day, from Prometheus (the blueprint's `accounting`; docs/report.md).
    Report(ReportArgs),
    /// Render every object, Helm value and runbook a blueprint implies (validates first).
    Render(RenderCommandArgs),
    /// Many clusters from one fleet file: validate, render, plan and apply them in waves.
    Fleet {
        /// What to do.
        #[command(subcommand)]
        command: FleetCommand,
    },
    /// The organisation's Rego policies (`--policy DIR` of validate, plan and fleet plan;
    /// docs/policy.md): run their own unit tests.
    Policy {
        /// What to do.
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Blue-green driver upgrades of one pool: plan, runbook, execute, resume, status, rollback.
    Upgrade {
        /// What to do.
        #[command(subcommand)]
        command: UpgradeCommand,
    },
    /// Publish a plan where the change is reviewed: one sticky comment per pull request and key
    /// (edited on every push) and a check run that fails with the plan (GitHub), or one sticky
    /// merge-request note (GitLab); docs/ci.md.
    Ci {
        /// Where.
        #[command(subcommand)]
        command: CiCommand,
    },
    /// Print gpuctl's version (`kubectl gpuctl version` as a krew plugin).
    Version,
    /// Print a shell completion script.
    Completions {
        /// Shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The arguments of `gpuctl validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Blueprint files (`-`: standard input, once).
    #[arg(required = true, value_name = "BLUEPRINT")]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Human)]
    pub output: Format,
    /// Deprecated spelling of -o/--output (kept for one release).
    #[arg(long, value_enum, hide = true)]
    pub format: Option<Format>,
    /// Fail on warnings too.
    #[arg(long)]
    pub strict: bool,
    /// Date used for end-of-life checks (YYYY-MM-DD; default today, or GPUCTL_TODAY).
    #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
    pub today: Option<String>,
    /// The organisation's policies.
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// `--policy DIR` and its companions (validate, plan, fleet plan; docs/policy.md).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PolicyArgs {
    /// Evaluate the Rego policies in DIR (recursively; conftest's conventions: `deny`,
    /// `violation` and `warn` rules of package `main`); their results are findings GPU500
    /// (deny, violation) and GPU501 (warn). Repeatable.
    #[arg(long = "policy", value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// JSON and YAML files under DIR are the policies' `data` (conftest's --data: a file in
    /// `DIR/sub/` lands under `data.sub`). Repeatable.
    #[arg(long = "policy-data", value_name = "DIR", requires = "dirs")]
    pub data: Vec<PathBuf>,
    /// Packages to evaluate instead of `main` (conftest's --namespace; `*` and `?` are globs,
    /// `*` crosses dots). Repeatable.
    #[arg(long = "policy-namespace", value_name = "PACKAGE", requires = "dirs")]
    pub namespaces: Vec<String>,
    /// Evaluate every package (conftest's --all-namespaces).
    #[arg(
        long = "policy-all-namespaces",
        requires = "dirs",
        conflicts_with = "namespaces"
    )]
    pub all_namespaces: bool,
    /// Write the exact JSON input the policies read to FILE (with or without --policy), e.g. to
    /// run `conftest test -p DIR FILE` on it.
    #[arg(long, value_name = "FILE")]
    pub policy_input_out: Option<PathBuf>,
}

/// `gpuctl policy` subcommands.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Run the policies' own unit tests: every rule named `test_*` in any package must be true
    /// (conftest's `verify`; `todo_test_*` are skipped). Exit 0 when all pass, 1 otherwise.
    Test {
        /// Policy directories (recursively).
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// Data directories, as `--policy-data`.
        #[arg(long = "policy-data", value_name = "DIR")]
        data: Vec<PathBuf>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = PolicyTestFormat::Human)]
        output: PolicyTestFormat,
    },
}

/// `gpuctl ci` subcommands.
#[derive(Debug, Subcommand)]
pub enum CiCommand {
    /// GitHub Actions: the sticky pull-request comment and the check run (docs/ci.md).
    Github(CiGithubArgs),
    /// GitLab CI: the sticky merge-request note (docs/ci.md).
    Gitlab(CiGitlabArgs),
}

/// What `gpuctl ci github` and `gpuctl ci gitlab` share.
#[derive(Debug, clap::Args)]
pub struct CiCommonArgs {
    /// The plan as `gpuctl plan -o json` or `gpuctl fleet plan -o json` printed it; absent or
    /// empty when the plan command failed before printing one (then --log says why).
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// The exit code of the plan command: 0 and 2 pass, anything else fails the gate.
    #[arg(long, value_name = "CODE", allow_negative_numbers = true)]
    pub exit_code: i32,
    /// The plan command's standard error (validation findings, the reason it failed): its end
    /// goes into the comment, collapsed.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// `gpuctl validate -o sarif` of the blueprint: its findings become annotations at their
    /// file and line.
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// The blueprint or fleet file (relative to the repository root): plan findings without a
    /// line of their own are annotated at its first line.
    #[arg(long, value_name = "PATH")]
    pub blueprint: Option<String>,
    /// Which comment this is: one per pull request and key (e.g. the job and blueprint).
    #[arg(long, value_name = "KEY", default_value = "default")]
    pub key: String,
    /// Where the full plan artifact is (the comment points there when it is cut).
    #[arg(long, value_name = "URL")]
    pub artifact_url: Option<String>,
    /// The environment variable holding the API token (never printed, never posted).
    #[arg(long, value_name = "NAME")]
    pub token_env: Option<String>,
    /// Only edit a comment by this login (the token's user, e.g. `github-actions[bot]`).
    #[arg(long, value_name = "LOGIN")]
    pub comment_author: Option<String>,
    /// Write the comment to FILE and post nothing (no token needed).
    #[arg(long, value_name = "FILE")]
    pub dry_run: Option<PathBuf>,
    /// The time a fleet's snapshot ages are measured from (RFC 3339; default now, or GPUCTL_NOW).
    #[arg(long, value_name = "TIME", env = "GPUCTL_NOW")]
    pub now: Option<String>,
}

/// The arguments of `gpuctl ci github`.
#[derive(Debug, clap::Args)]
pub struct CiGithubArgs {
    /// Shared arguments.
    #[command(flatten)]
    pub common: CiCommonArgs,
    /// The REST API's base URL.
    #[arg(long, env = "GITHUB_API_URL", default_value = "https://api.github.com")]
    pub api_url: String,
    /// `owner/name`.
    #[arg(long, env = "GITHUB_REPOSITORY")]
    pub repository: Option<String>,
    /// The webhook payload of the run (its `pull_request.number` and `pull_request.head.sha`).
    #[arg(long, env = "GITHUB_EVENT_PATH", value_name = "FILE")]
    pub event: Option<PathBuf>,
    /// The pull request (instead of the event file).
    #[arg(long, requires = "sha")]
    pub pr: Option<u64>,
    /// The commit the check run is on (instead of the event file): the PR's head, not the merge commit.
    #[arg(long)]
    pub sha: Option<String>,
    /// The check run's name (required checks name it).
    #[arg(long, default_value = "gpuctl plan")]
    pub check_name: String,
    /// Post the comment only, no check run (a token without `checks: write`).
    #[arg(long)]
    pub no_check: bool,
}

/// The arguments of `gpuctl ci gitlab`.
#[derive(Debug, clap::Args)]
pub struct CiGitlabArgs {
    /// Shared arguments.
    #[command(flatten)]
    pub common: CiCommonArgs,
    /// The REST API's base URL (`https://gitlab.example.com/api/v4`).
    #[arg(long, env = "CI_API_V4_URL")]
    pub api_url: Option<String>,
    /// The project id (or `group/project`).
    #[arg(long, env = "CI_PROJECT_ID")]
    pub project: Option<String>,
    /// The merge request's iid.
    #[arg(long, env = "CI_MERGE_REQUEST_IID")]
    pub merge_request: Option<u64>,
    /// The commit the plan is for.
    #[arg(long, env = "CI_COMMIT_SHA")]
    pub sha: Option<String>,
}

/// `policy test` output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyTestFormat {
    /// One line per failing test, then a summary (`--verbose`-free, as conftest verify).
    Human,
    /// Every test with its outcome, versioned JSON.
    Json,
}

/// The arguments of `gpuctl profiles`.
#[derive(Debug, clap::Args)]
pub struct ProfilesArgs {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = ProfilesFormat::Human)]
    pub output: ProfilesFormat,
    /// Deprecated spelling of -o/--output (kept for one release).
    #[arg(long, value_enum, hide = true)]
    pub format: Option<ProfilesFormat>,
    /// List only the fact rows read more than DAYS days ago (or never dated), with their
    /// sources: where the next audit starts.
    #[arg(long, value_name = "DAYS")]
    pub stale_after: Option<u32>,
    /// Date the ages are counted to (YYYY-MM-DD; default today, or GPUCTL_TODAY).
    #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
    pub today: Option<String>,
}

/// The arguments of `gpuctl plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Blueprint file (`-`: standard input).
    #[arg(value_name = "BLUEPRINT")]
    pub blueprint: PathBuf,
    /// Cluster connection.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Plan against a snapshot from `gpuctl snapshot` instead of a live cluster.
    #[arg(long, value_name = "FILE", conflicts_with = "offline")]
    pub snapshot: Option<PathBuf>,
    /// Plan without any live state (everything is a create).
    #[arg(long)]
    pub offline: bool,
    /// Save the plan (JSON) for `gpuctl apply PLAN`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = PlanFormat::Human)]
    pub output: PlanFormat,
    /// Deprecated spelling of -o/--output (kept for one release).
    #[arg(long, value_enum, hide = true)]
    pub format: Option<PlanFormat>,
    /// Exit 2 when there are changes, 0 when none, 1 on error.
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Also prune Namespaces, CRDs, PriorityClasses and Nodes the blueprint dropped.
    #[arg(long)]
    pub prune_protected: bool,
    /// Move pools to DRA (`gpuPlugin: dra`) even while pods on their nodes hold device-plugin
    /// GPUs (the plan's refusal becomes a warning; runbooks/dra-migration.md).
    #[arg(long)]
    pub force_migration: bool,
    /// Concurrent API requests.
    #[arg(long, default_value_t = gpuctl_cluster::DEFAULT_PARALLELISM, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallelism: u16,
    /// List unchanged objects and every field of new ones.
    #[arg(long, short)]
    pub verbose: bool,
    /// Rendering settings.
    #[command(flatten)]
    pub render: RenderArgs,
    /// The organisation's policies.
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// The arguments of `gpuctl apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// Blueprint file, or a plan saved with `gpuctl plan --out` (`-`: either, from standard input).
    #[arg(value_name = "BLUEPRINT|PLAN")]
    pub target: PathBuf,
    /// Cluster connection.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Take ownership of fields other managers own.
    #[arg(long)]
    pub force_conflicts: bool,
    /// Take over existing objects that belong to no ApplySet (the plan's `adopt` actions):
    /// they join this blueprint's set, no field value changes.
    #[arg(long)]
    pub adopt: bool,
    /// Also prune Namespaces, CRDs, PriorityClasses and Nodes the blueprint dropped.
    #[arg(long)]
    pub prune_protected: bool,
    /// Move pools to DRA (`gpuPlugin: dra`) even while pods on their nodes hold device-plugin
    /// GPUs (the plan's refusal becomes a warning; runbooks/dra-migration.md).
    #[arg(long)]
    pub force_migration: bool,
    /// Concurrent API requests.
    #[arg(long, default_value_t = gpuctl_cluster::DEFAULT_PARALLELISM, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallelism: u16,
    /// Longest wait for node state such as MIG reconfiguration (e.g. 10m).
    #[arg(long, default_value = "10m", value_name = "DURATION")]
    pub wait_timeout: String,
    /// Longest wait for a CRD to be served (e.g. 2m).
    #[arg(long, default_value = "2m", value_name = "DURATION")]
    pub crd_timeout: String,
    /// Run no helm: apply the objects and print the helm command of each release to install,
    /// upgrade or uninstall (without it, an apply that needs helm and finds none is refused).
    #[arg(long)]
    pub no_helm: bool,
    /// Uninstall the release of a component the blueprint dropped even while objects of its
    /// kinds (a NicClusterPolicy, ClusterQueues) exist.
    #[arg(long)]
    pub force_uninstall: bool,
    /// Wait this long for another apply of the same blueprint to finish (e.g. 5m; default:
    /// refuse at once, naming who holds the lock).
    #[arg(long, default_value = "0s", value_name = "DURATION")]
    pub lock_timeout: String,
    /// How long the apply lock outlives a run that stopped renewing it (killed, cut off).
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub lock_duration: String,
    /// Longest wait for an admission webhook that cannot be called yet (e.g. 2m).
    #[arg(long, default_value = "2m", value_name = "DURATION")]
    pub webhook_timeout: String,
    /// Do not ask for confirmation on a terminal (runs without a terminal never ask).
    #[arg(long, short = 'y', alias = "auto-approve")]
    pub yes: bool,
    /// Output format of the plan and the progress (`json`: NDJSON events).
    #[arg(short = 'o', long, value_enum, default_value_t = ApplyOutput::Human)]
    pub output: ApplyOutput,
    /// Rendering settings.
    #[command(flatten)]
    pub render: RenderArgs,
}

/// The arguments of `gpuctl unlock`.
#[derive(Debug, clap::Args)]
pub struct UnlockArgs {
    /// Blueprint file (or a plan saved from it) whose lock to remove.
    #[arg(value_name = "BLUEPRINT|PLAN")]
    pub blueprint: PathBuf,
    /// Cluster connection.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Remove the lock only while this run holds it (the holder id `gpuctl unlock` shows).
    #[arg(long, value_name = "ID")]
    pub holder: Option<String>,
    /// Do not ask (required without a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// The arguments of `gpuctl snapshot`.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// Blueprint file (`-`: standard input); not with --all.
    #[arg(
        value_name = "BLUEPRINT",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub blueprint: Option<PathBuf>,
    /// Capture every object `gpuctl import` reads (nodes, GPU operator, quotas, queues,
    /// monitoring) instead of one blueprint's, and the diagnostics `--diagnostics` captures.
    #[arg(long)]
    pub all: bool,
    /// Also capture what `gpuctl doctor` and `gpuctl status` read (pods, events, quotas,
    /// queues, operator status; secrets never, environment values masked). `--all` always does.
    #[arg(long)]
    pub diagnostics: bool,
    /// Cluster connection.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Where to write the snapshot.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Rendering settings.
    #[command(flatten)]
    pub render: RenderArgs,
}

/// The arguments of `gpuctl doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Blueprint file (`-`: standard input): the intended cluster.
    #[arg(value_name = "BLUEPRINT")]
    pub blueprint: PathBuf,
    /// Cluster connection.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Read a snapshot taken with `gpuctl snapshot BLUEPRINT --diagnostics` instead of the
    /// live cluster.
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, alias = "format", value_enum, default_value_t = DoctorFormat::Human)]
    pub output: DoctorFormat,
    /// Date used for end-of-life checks of the blueprint (YYYY-MM-DD; default today, or
    /// GPUCTL_TODAY).
    #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
    pub today: Option<String>,
    /// Also judge DCGM metrics from this Prometheus (runtime and hardware findings,
    /// docs/doctor-metrics.md).
    #[command(flatten)]
    pub metrics: PrometheusArgs,
}

/// The arguments of `gpuctl import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Cluster connection.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Import from a snapshot taken with `gpuctl snapshot --all` instead of a live cluster.
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Write the blueprint to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The blueprint's name (default: the name gpuctl's objects in the cluster record, else
    /// `imported`).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Date used for end-of-life checks of the imported blueprint (YYYY-MM-DD; default today,
    /// or GPUCTL_TODAY).
    #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
    pub today: Option<String>,
}

/// The arguments of `gpuctl status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Blueprint file (`-`: standard input).
    #[arg(value_name = "BLUEPRINT")]
    pub blueprint: PathBuf,
    /// Cluster connection.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Read a snapshot taken with `gpuctl snapshot BLUEPRINT --diagnostics` instead of a live cluster.
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = StatusFormat::Human)]
    pub output: StatusFormat,
    /// Also draw the status as an SVG picture into FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Also show the last hour's GPUs allocated, used and idle per pool, from this Prometheus, as
    /// `gpuctl report --by pool` computes them (the blueprint needs `spec.accounting`).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// File holding a bearer token for Prometheus (or set GPUCTL_PROMETHEUS_TOKEN).
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_token_file: Option<PathBuf>,
    /// PEM file of CA certificates trusted for Prometheus, besides the system's.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_ca_file: Option<PathBuf>,
    /// The end of that hour (RFC 3339; default now).
    #[arg(long, value_name = "TIME", requires = "prometheus")]
    pub until: Option<String>,
}

/// The arguments of `gpuctl report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Blueprint file (`-`: standard input); it must have `spec.accounting`.
    #[arg(value_name = "BLUEPRINT")]
    pub blueprint: PathBuf,
    /// Prometheus base URL (http or https).
    #[arg(long, value_name = "URL", env = "GPUCTL_PROMETHEUS_URL")]
    pub prometheus: String,
    /// File holding a bearer token for Prometheus (or set GPUCTL_PROMETHEUS_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub prometheus_token_file: Option<PathBuf>,
    /// PEM file of CA certificates trusted for Prometheus, besides the system's.
    #[arg(long, value_name = "FILE")]
    pub prometheus_ca_file: Option<PathBuf>,
    /// Start: a duration before --until (`30d`, `12h`), a date (`2026-11-01`, UTC midnight) or
    /// an RFC 3339 time.
    #[arg(long, value_name = "WHEN", default_value = "30d")]
    pub since: String,
    /// End (exclusive): a date or an RFC 3339 time (default: now).
    #[arg(long, value_name = "WHEN")]
    pub until: Option<String>,
    /// Resolution: each point stands for this much time (`1h`; must divide a day).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub step: String,
    /// What rows are per (besides the day).
    #[arg(long, value_enum, default_value_t = ReportBy::Tenant)]
    pub by: ReportBy,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = ReportFormat::Human)]
    pub output: ReportFormat,
    /// Total time one query may take.
    #[arg(long, value_name = "DURATION", default_value = "2m")]
    pub timeout: String,
    /// Also draw the figures as stacked bars (used, idle, unknown) into FILE, an SVG picture.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// What `gpuctl report` rows are per.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportBy {
    /// Tenant (with its cost centre).
    Tenant,
    /// Node pool.
    Pool,
    /// GPU model.
    Model,
    /// Kueue ClusterQueue or Volcano queue.
    Queue,
}

/// `report` output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// A table.
    Human,
    /// One line per day and key, with a header.
    Csv,
    /// The versioned report document (docs/report.md).
    Json,
    /// A Markdown table.
    Markdown,
}

/// The arguments of `gpuctl render`.
#[derive(Debug, clap::Args)]
pub struct RenderCommandArgs {
    /// Blueprint file (`-`: standard input).
    #[arg(value_name = "BLUEPRINT")]
    pub blueprint: PathBuf,
    /// Write a kustomize-ready tree to DIR instead of printing YAML.
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Deprecated spelling of --output-dir (kept for one release; -o/--output will select
    /// the output format, as on every other command).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        hide = true,
        conflicts_with = "output_dir"
    )]
    pub output: Option<PathBuf>,
    /// Directory whose templates replace the embedded ones (same relative paths).
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
    /// Date used for end-of-life checks (YYYY-MM-DD; default today, or GPUCTL_TODAY).
    #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
    pub today: Option<String>,
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

/// Where the cluster is.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// Settings shared by commands that render.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// Directory whose templates replace the embedded ones.
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
    /// Date used for end-of-life checks (YYYY-MM-DD; default today, or GPUCTL_TODAY).
    #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
    pub today: Option<String>,
}

/// Plan output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// Terraform-like text; colour on a terminal unless NO_COLOR is set.
    Human,
    /// The versioned plan document (docs/plan-apply.md).
    Json,
    /// A PR comment: summary table, collapsed full diff, size-capped.
    Markdown,
}

/// Where doctor reads DCGM metrics.
#[derive(Debug, Clone, clap::Args)]
pub struct PrometheusArgs {
    /// Prometheus base URL (http or https).
    #[arg(long, value_name = "URL", env = "GPUCTL_PROMETHEUS_URL")]
    pub prometheus: Option<String>,
    /// File holding a bearer token for Prometheus (or set GPUCTL_PROMETHEUS_TOKEN).
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_token_file: Option<PathBuf>,
    /// PEM file of CA certificates trusted for Prometheus, besides the system's.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_ca_file: Option<PathBuf>,
    /// How long a GPU held by a pod must be idle to be reported (default 1h).
    #[arg(long, value_name = "DURATION", requires = "prometheus")]
    pub idle_window: Option<String>,
}

/// `status` output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFormat {
    /// Tables.
    Human,
    /// The versioned status document (docs/status.md).
    Json,
    /// Tables in Markdown, for an incident ticket.
    Markdown,
}

/// `doctor` output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DoctorFormat {
    /// Findings by layer; colour on a terminal unless NO_COLOR is set.
    Human,
    /// The versioned report (docs/doctor.md).
    Json,
    /// For an incident ticket.
    Markdown,
}

/// Apply progress output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApplyOutput {
    /// Progress bars on a terminal, plain lines otherwise.
    Human,
    /// NDJSON events on stdout.
    Json,
}

/// `gpuctl fleet` subcommands.
#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Every finding of a fleet: its own rules and every cluster's effective blueprint.
    Validate {
        /// Fleet file (`kind: Fleet`).
        #[arg(value_name = "FLEET")]
        fleet: PathBuf,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Format::Human)]
        output: Format,
        /// Fail on warnings too.
        #[arg(long)]
        strict: bool,
        /// Date used for end-of-life checks (YYYY-MM-DD; default today, or GPUCTL_TODAY).
        #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
        today: Option<String>,
    },
    /// One tree per cluster, `DIR/<cluster>/`, each exactly what `gpuctl render --output-dir`
    /// writes for that cluster's effective blueprint.
    Render {
        /// Fleet file (`kind: Fleet`).
        #[arg(value_name = "FLEET")]
        fleet: PathBuf,
        /// The directory that receives one directory per cluster.
        #[arg(short = 'o', long = "output-dir", value_name = "DIR")]
        output_dir: PathBuf,
        /// Directory whose templates replace the embedded ones (same relative paths).
        #[arg(long, value_name = "DIR")]
        templates: Option<PathBuf>,
        /// Date used for end-of-life checks (YYYY-MM-DD; default today, or GPUCTL_TODAY).
        #[arg(long, value_name = "DATE", env = "GPUCTL_TODAY")]
        today: Option<String>,
    },
    /// One plan per cluster (live through its `context`, or from `DIR/<cluster>.json`), as one
    /// pull-request comment: a summary table, the unchanged clusters in one line, each changed
    /// cluster's plan collapsed. Exit codes as `gpuctl plan`.
    Plan {
        /// Fleet file (`kind: Fleet`).
        #[arg(value_name = "FLEET")]
        fleet: PathBuf,
        /// Plan each cluster against `DIR/<cluster>.json` (from `gpuctl snapshot`) instead of live.
        #[arg(long, value_name = "DIR")]
        snapshot_dir: Option<PathBuf>,
        /// Kubeconfig file holding the clusters' contexts (default: KUBECONFIG, then ~/.kube/config).
        #[arg(long, value_name = "FILE", conflicts_with = "snapshot_dir")]
        kubeconfig: Option<PathBuf>,
        /// Plan every cluster without live state, as `gpuctl plan --offline` (every object is a
        /// create): a new fleet's first pull request, before any cluster has a snapshot.
        #[arg(long, conflicts_with_all = ["snapshot_dir", "kubeconfig"])]
        offline: bool,
        /// Output format (`markdown`: the PR comment, within GitHub's 65,536 characters).
        #[arg(short = 'o', long, value_enum, default_value_t = PlanFormat::Human)]
        output: PlanFormat,
        /// Exit 2 when any cluster has changes, 0 when none, 1 on error.
        #[arg(long)]
        detailed_exitcode: bool,
        /// Also prune Namespaces, CRDs, PriorityClasses and Nodes the blueprints dropped.
        #[arg(long)]
        prune_protected: bool,
        /// Concurrent API requests per cluster.
        #[arg(long, default_value_t = gpuctl_cluster::DEFAULT_PARALLELISM, value_parser = clap::value_parser!(u16).range(1..=256))]
        parallelism: u16,
        /// The time snapshot ages are measured from (RFC 3339; default now, or GPUCTL_NOW).
        #[arg(long, value_name = "TIME", env = "GPUCTL_NOW")]
        now: Option<String>,
        /// Rendering settings.
        #[command(flatten)]
        render: RenderArgs,
        /// The organisation's policies (one input for the whole fleet: every cluster).
        #[command(flatten)]
        policy: PolicyArgs,
    },
    /// One snapshot per cluster, `DIR/<cluster>.json`, through each cluster's `context`: what
    /// `fleet plan --snapshot-dir DIR` reads (MultiKueue objects included), for CI without
    /// cluster credentials. Exit 0 when every cluster was captured, 1 when any failed (the others
    /// are still written).
    Snapshot {
        /// Fleet file (`kind: Fleet`).
        #[arg(value_name = "FLEET")]
        fleet: PathBuf,
        /// The directory that receives `<cluster>.json` per cluster (created if missing).
        #[arg(short = 'o', long = "output-dir", value_name = "DIR")]
        output_dir: PathBuf,
        /// Kubeconfig file holding the clusters' contexts (default: KUBECONFIG, then ~/.kube/config).
        #[arg(long, value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
        /// Rendering settings.
        #[command(flatten)]
        render: RenderArgs,
    },
    /// Where one field of a cluster's effective blueprint comes from: its value, then every file
    /// of the cluster's `extends` chain, nearest first, with the line that sets the field there
    /// and which one wins. Exit 0, 1 when the fleet or the cluster's blueprint cannot be read, 64
    /// for an unknown cluster or field.
    Explain {
        /// Fleet file (`kind: Fleet`).
        #[arg(value_name = "FLEET")]
        fleet: PathBuf,
        /// The cluster, by its name in the fleet file.
        #[arg(value_name = "CLUSTER")]
        cluster: String,
        /// The field as findings print it (`spec.nodePools[0].gpu.count`); an item of a keyed
        /// list may be named by its keys (`spec.nodePools[train].gpu.count`,
        /// `spec.nodePools[0].taints[key=nvidia.com/gpu,effect=NoSchedule]`).
        #[arg(value_name = "FIELD")]
        field: String,
    },
    /// Roll the fleet out wave by wave: the first wave whose clusters do not all carry their
    /// revision (or `--wave NAME`), each cluster with `gpuctl apply` and then stamped; refused
    /// while a cluster of an earlier wave lacks its revision, is baking, plans changes or has a
    /// doctor error. Exit 0 applied (or nothing left), 1 refused or failed.
    Apply {
        /// Fleet file (`kind: Fleet`).
        #[arg(value_name = "FLEET")]
        fleet: PathBuf,
        /// Apply this wave (its earlier waves' gates still apply).
        #[arg(long, value_name = "NAME")]
        wave: Option<String>,
        /// Kubeconfig file holding the clusters' contexts (default: KUBECONFIG, then ~/.kube/config).
        #[arg(long, value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
        /// Also prune Namespaces, CRDs, PriorityClasses and Nodes the blueprints dropped.
        #[arg(long)]
        prune_protected: bool,
        /// Concurrent API requests per cluster.
        #[arg(long, default_value_t = gpuctl_cluster::DEFAULT_PARALLELISM, value_parser = clap::value_parser!(u16).range(1..=256))]
        parallelism: u16,
        /// Longest wait for node state such as MIG reconfiguration (e.g. 10m).
        #[arg(long, default_value = "10m", value_name = "DURATION")]
        wait_timeout: String,
        /// Longest wait for a CRD to be served (e.g. 2m).
        #[arg(long, default_value = "2m", value_name = "DURATION")]
        crd_timeout: String,
        /// Run no helm: apply the objects and print the helm command of each release.
        #[arg(long)]
        no_helm: bool,
        /// Wait this long for another apply of a cluster's blueprint to finish (e.g. 5m; default:
        /// refuse at once, naming who holds the lock).
        #[arg(long, default_value = "0s", value_name = "DURATION")]
        lock_timeout: String,
        /// How long a cluster's apply lock outlives a run that stopped renewing it (killed, cut off).
        #[arg(long, default_value = "60s", value_name = "DURATION")]
        lock_duration: String,
        /// Longest wait for an admission webhook that cannot be called yet (e.g. 2m).
        #[arg(long, default_value = "2m", value_name = "DURATION")]
        webhook_timeout: String,
        /// Do not ask for confirmation on a terminal (runs without a terminal never ask).
        #[arg(long, short = 'y', alias = "auto-approve")]
        yes: bool,
        /// Rendering settings.
        #[command(flatten)]
        render: RenderArgs,
    },
}

/// `gpuctl upgrade` subcommands.
#[derive(Debug, Subcommand)]
pub enum UpgradeCommand {
    /// Plan a pool's driver upgrade (the default), write its runbook, or run it with --execute.
    Driver {
        /// Blueprint file, `-` for standard input (not with --resume: the journal in the cluster has everything).
        #[arg(
            value_name = "BLUEPRINT",
            required_unless_present = "resume",
            conflicts_with = "resume"
        )]
        blueprint: Option<PathBuf>,
        /// Pool to upgrade (with --resume: optional when only one upgrade is unfinished).
        #[arg(long, value_name = "POOL", required_unless_present = "resume")]
        pool: Option<String>,
        /// Target driver version, e.g. 595.91.07.
        #[arg(
            long,
            value_name = "VERSION",
            required_unless_present = "resume",
            conflicts_with = "resume"
        )]
        to: Option<String>,
        /// Also write a Markdown runbook to FILE (and its SVG timeline next to it).
        #[arg(long, value_name = "FILE", conflicts_with = "resume")]
        runbook: Option<PathBuf>,
        /// Run the upgrade (without it, nothing is changed).
        #[arg(long, conflicts_with = "resume")]
        execute: bool,
        /// Continue an interrupted or stopped upgrade from its journal in the cluster.
        #[arg(long)]
        resume: bool,
        /// Namespace of the journal (with --resume; default: every namespace is searched).
        #[arg(long, value_name = "NS", requires = "resume")]
        namespace: Option<String>,
        /// Deprecated: how the upgrade plan is printed; use -o/--output (kept for one release).
        #[arg(long, value_enum, hide = true)]
        format: Option<UpgradeFormat>,
        /// Waits and progress.
        #[command(flatten)]
        timing: UpgradeTimingArgs,
        /// Cluster connection.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Rendering settings.
        #[command(flatten)]
        render: RenderArgs,
    },
    /// Show upgrades recorded in the cluster (journal and lease), from any machine.
    Status {
        /// Only this pool.
        #[arg(long, value_name = "POOL")]
        pool: Option<String>,
        /// Only this namespace (default: every namespace).
        #[arg(long, value_name = "NS")]
        namespace: Option<String>,
        /// How the recorded upgrades are printed: `human` text, or `json` (each pool's journal
        /// and lease as data).
        #[arg(short = 'o', long, value_enum, default_value_t = UpgradeFormat::Human)]
        output: UpgradeFormat,
        /// Deprecated spelling of -o/--output (kept for one release).
        #[arg(long, value_enum, hide = true)]
        format: Option<UpgradeFormat>,
        /// Cluster connection.
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Move every node of an upgrade back to its old driver CR, restoring the recorded labels.
    Rollback {
        /// Pool (optional when only one upgrade is unfinished).
        #[arg(long, value_name = "POOL")]
        pool: Option<String>,
        /// Namespace of the journal (default: every namespace is searched).
        #[arg(long, value_name = "NS")]
        namespace: Option<String>,
        /// Waits and progress.
        #[command(flatten)]
        timing: UpgradeTimingArgs,
        /// Cluster connection.
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// Waits, estimates and progress of an upgrade run.
#[derive(Debug, Clone, clap::Args)]
pub struct UpgradeTimingArgs {
    /// Longest wait for a moved node to validate on its new driver (e.g. 30m).
    #[arg(long, default_value = "30m", value_name = "DURATION")]
    pub validate_timeout: String,
    /// Poll interval of every wait.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub poll_interval: String,
    /// Lease duration: how soon after a crash another run may take over.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub lease_duration: String,
    /// Planning estimate of one node's driver swap (plan, runbook and timeline).
    #[arg(long, default_value = "10m", value_name = "DURATION")]
    pub node_upgrade_estimate: String,
    /// Output format: `human` text, or `json` (the plan as data, then NDJSON progress
    /// events when it runs).
    #[arg(short = 'o', long, value_enum, default_value_t = ApplyOutput::Human)]
    pub output: ApplyOutput,
}

/// `upgrade` output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UpgradeFormat {
    /// Text for people.
    Human,
    /// JSON for scripts.
    Json,
}
