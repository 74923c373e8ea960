//! `gpuctl fleet plan`: `gpuctl plan` for every cluster of a fleet, live through each cluster's
//! kubeconfig context or from `DIR/<cluster>.json`, printed as one PR comment (docs/fleet.md).

use std::io::Write;
use std::path::{Path, PathBuf};

use gpuctl_fleet::{LoadedFleet, members};
use gpuctl_model::located::Severity;

use super::plan::{Against, PlanSettings, exit_status, plan_rendered};
use super::{CommandError, CommandResult, emit};
use crate::args::{ClusterArgs, PlanFormat, PolicyArgs};
use crate::exit::ExitStatus;
use crate::{output, settings};
use gpuctl_fleet::plan::{ClusterPlan, Outcome, Source};
use gpuctl_plan::plan::PlanFinding;
use gpuctl_policy::PolicySet;

/// What `gpuctl fleet plan` was asked to do.
pub struct FleetPlanCommand<'a> {
    /// `DIR/<cluster>.json` snapshots instead of live clusters.
    pub snapshot_dir: Option<&'a Path>,
    /// Kubeconfig holding the clusters' contexts.
    pub kubeconfig: Option<PathBuf>,
    /// No live state for any cluster (`--offline`).
    pub offline: bool,
    /// Format.
    pub format: PlanFormat,
    /// Terraform-style exit codes.
    pub detailed_exitcode: bool,
    /// Plan, and how.
    pub settings: PlanSettings,
    /// The time snapshot ages are measured from.
    pub now: Option<&'a str>,
    /// Templates replacing the embedded ones.
    pub templates: Option<&'a Path>,
    /// Date used for end-of-life checks.
    pub today: jiff::civil::Date,
    /// `--policy DIR` and its companions.
    pub policy: &'a PolicyArgs,
    /// The policies, loaded.
    pub policies: Option<&'a PolicySet>,
}

/// Runs the command: every cluster is planned, one failing cluster is an error row (exit 1),
/// never the end of the others.
pub fn run(cmd: &FleetPlanCommand<'_>, fleet: &LoadedFleet, out: &mut dyn Write) -> CommandResult {
    let today = cmd.today;
    let now = match cmd.now {
        None => jiff::Timestamp::now(),
        Some(t) => t.parse().map_err(|e| {
            CommandError::Usage(format!("--now `{t}` is not an RFC 3339 time: {e}"))
        })?,
    };
    let waves = members(&fleet.fleet);
    let wave_of = |name: &str| {
        waves
            .iter()
            .find(|(_, m)| m.iter().any(|c| c == name))
            .map_or_else(String::new, |(w, _)| w.clone())
    };
    let mut plans = Vec::new();
    for (i, cluster) in fleet.fleet.spec.clusters.iter().enumerate() {
        let blueprint = fleet.root.join(&cluster.blueprint);
        let (source, snapshot) = match cmd.snapshot_dir {
            _ if cmd.offline => (Source::Offline, None),
            Some(dir) => {
                let file = dir.join(format!("{}.json", cluster.name));
                (Source::Snapshot { at: None }, Some(file))
            }
            None => (
                Source::Live {
                    context: cluster.context.clone(),
                },
                None,
            ),
        };
        let mut entry = ClusterPlan {
            name: cluster.name.clone(),
            wave: wave_of(&cluster.name),
            source,
            outcome: Outcome::Error(String::new()),
        };
        entry.outcome = match plan_one(cmd, fleet, i, &blueprint, snapshot.as_deref(), today) {
            Ok(plan) => {
                if let Source::Snapshot { at } = &mut entry.source {
                    *at = plan.snapshot_captured_at.clone();
                }
                Outcome::Planned(Box::new(plan))
            }
            Err(e) => Outcome::Error(e),
        };
        plans.push(entry);
    }
    let policy = apply_policies(cmd, fleet, &mut plans)?;
    let fleet_name = fleet.fleet.metadata.name.clone();
    let text = match cmd.format {
        PlanFormat::Human => {
            output::fleet_plan::human(&fleet_name, &plans, &policy, now, settings::stdout_style())
        }
        PlanFormat::Json => output::fleet_plan::json(&fleet_name, &plans, &policy),
        PlanFormat::Markdown => output::fleet_plan::markdown(&fleet_name, &plans, &policy, now),
    };
    emit(out, &text);
    if policy.iter().any(|f| f.severity == Severity::Error) {
        return Ok(ExitStatus::Failure);
    }
    Ok(status(&plans, cmd.detailed_exitcode))
}

/// Evaluates the policies once over the whole fleet: the fleet file, its findings, and every
/// cluster with its effective blueprint and its plan (or why it has none). A result whose object
/// names a `cluster` of the fleet joins that cluster's plan findings; the others are the fleet's.
fn apply_policies(
    cmd: &FleetPlanCommand<'_>,
    fleet: &LoadedFleet,
    plans: &mut [ClusterPlan],
) -> Result<Vec<PlanFinding>, CommandError> {
    if cmd.policies.is_none() && cmd.policy.policy_input_out.is_none() {
        return Ok(Vec::new());
    }
    let clusters: Vec<serde_json::Value> = plans
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut v = serde_json::json!({ "name": c.name, "wave": c.wave });
            if let Some(Ok(loaded)) = fleet.load_cluster(i) {
                v["blueprint"] = gpuctl_policy::input::blueprint(&loaded);
            }
            match &c.outcome {
                Outcome::Planned(plan) => v["plan"] = super::plan::plan_document(plan),
                Outcome::Error(e) => v["error"] = serde_json::json!(e),
            }
            v
        })
        .collect();
    let input = gpuctl_policy::input::document(
        "fleet plan",
        vec![
            (
                "fleet",
                gpuctl_policy::input::yaml_file(&fleet.file, &fleet.report.source),
            ),
            (
                "findings",
                gpuctl_policy::input::findings(std::slice::from_ref(&fleet.report)),
            ),
            ("clusters", serde_json::Value::Array(clusters)),
        ],
    );
    let Some(report) = super::policy::evaluate(cmd.policy, cmd.policies, &input)? else {
        return Ok(Vec::new());
    };
    let mut fleet_level = Vec::new();
    for r in report.results() {
        let named = r
            .metadata
            .get("cluster")
            .and_then(serde_json::Value::as_str);
        let target = plans.iter_mut().find(|c| Some(c.name.as_str()) == named);
        match target.map(|c| &mut c.outcome) {
            Some(Outcome::Planned(plan)) => plan.findings.push(gpuctl_policy::finding::plan(r)),
            _ => fleet_level.push(gpuctl_policy::finding::plan(r)),
        }
    }
    Ok(fleet_level)
}

/// One cluster's plan, or why there is none (one line, no secret: errors name files and
/// contexts only).
fn plan_one(
    cmd: &FleetPlanCommand<'_>,
    fleet: &LoadedFleet,
    i: usize,
    blueprint: &Path,
    snapshot: Option<&Path>,
    today: jiff::civil::Date,
) -> Result<gpuctl_plan::plan::Plan, String> {
    let cluster = &fleet.fleet.spec.clusters[i];
    let connection;
    let against = match snapshot {
        _ if cmd.offline => Against::Offline,
        Some(file) if !file.is_file() => {
            return Err(format!(
                "no snapshot `{}` (a snapshot of cluster `{}`{} belongs there); or plan live, without --snapshot-dir",
                file.display(),
                cluster.name,
                cluster
                    .context
                    .as_deref()
                    .map(|c| format!(", context `{c}`"))
                    .unwrap_or_default()
            ));
        }
        Some(file) => Against::Snapshot(file),
        None => {
            let Some(context) = &cluster.context else {
                return Err(
                    "no `context` in the fleet file: a live plan needs each cluster's kubeconfig context".into(),
                );
            };
            connection = ClusterArgs {
                kubeconfig: cmd.kubeconfig.clone(),
                context: Some(context.clone()),
            };
            Against::Cluster(&connection)
        }
    };
    let loaded = fleet
        .load_cluster(i)
        .ok_or_else(|| "its blueprint cannot be read".to_string())?;
    let next = format!("planning cluster `{}`", cluster.name);
    let mut rendered = super::pipeline::render_loaded(
        loaded.map_err(|b| b.report),
        blueprint,
        today,
        cmd.templates,
        &next,
    )
    .map_err(|e| e.to_string())?;
    gpuctl_fleet::multikueue::add(
        &fleet.fleet,
        &cluster.name,
        fleet.manager_frameworks(),
        &mut rendered.set.objects,
    );
    plan_rendered(rendered, blueprint, against, &cmd.settings).map_err(|e| one_line(&e))
}

fn one_line(e: &CommandError) -> String {
    e.to_string().lines().collect::<Vec<_>>().join(" ")
}

/// As `gpuctl plan`: 1 when any cluster failed or has an error finding; with
/// `--detailed-exitcode`, 2 when any has changes; else 0.
fn status(plans: &[ClusterPlan], detailed_exitcode: bool) -> ExitStatus {
    let mut changes = false;
    for p in plans {
        match &p.outcome {
            Outcome::Error(_) => return ExitStatus::Failure,
            Outcome::Planned(plan) => {
                if plan.findings.iter().any(|f| f.severity == Severity::Error) {
                    return ExitStatus::Failure;
                }
                changes |= exit_status(plan, true) == ExitStatus::Changes;
            }
        }
    }
    if changes && detailed_exitcode {
        ExitStatus::Changes
    } else {
        ExitStatus::Success
    }
}
