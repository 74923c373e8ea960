//! Plans: what applying a rendered set would change, object by object and field by field, decided
//! from a [`LiveView`] (read from a cluster with server-side dry-runs, from a snapshot file, or
//! empty when offline). A plan is a versioned JSON document that `apply` can execute later,
//! refusing it when the cluster moved since.
//!
//! Everything here is a pure function of (rendered set, live view): [`reads`] says what a live
//! plan reads, [`objects`] decides each object and the prunes, [`nodes`] the node labels and
//! taints, [`helm`] the operator release,
//! [`upgrades`] what `gpuctl upgrade` journals forbid; [`plan`] puts them together.

pub mod diff;
#[doc(hidden)]
pub mod fixture;
mod format;
pub mod helm;
pub mod hierarchy;
pub mod kueue;
pub mod nodes;
pub mod objects;
pub mod reads;
pub mod redact;
pub mod stale;
#[cfg(test)]
mod tests;
mod types;
pub mod uninstall;
pub mod upgrades;

use serde_json::Value;

use crate::live::{LiveView, Source};
use gpuctl_model::applyset::ApplySetParent;
use gpuctl_model::located::Severity;
use gpuctl_model::names::DRIVER_LABEL;
use gpuctl_pipeline::render::{NodePatch, Phase, RenderedSet};

pub use format::{SavedPlanError, is_saved_plan};
pub use helm::{helm_plan, plan_releases};
pub use kueue::{KueueConfigReading, kueue_config_findings};
pub use nodes::{node_driver, selector_string};
pub use types::*;
pub use uninstall::{HelmRun, UninstallStep, helm_runs};
pub use upgrades::journal_findings;

pub use gpuctl_model::names::FIELD_MANAGER;

/// The driver version changes of NVIDIADriver CRs whose pools upgrade blue-green; each such update
/// gets a reason pointing at the rollout.
fn driver_rollouts(actions: &mut [Action], patches: &[NodePatch]) -> Vec<DriverRollout> {
    let mut out = Vec::new();
    for a in actions.iter_mut() {
        if a.action != ActionKind::Update || a.kind != "NVIDIADriver" {
            continue;
        }
        let Some(change) = a.changes.iter().find(|c| c.path == "spec.version") else {
            continue;
        };
        let text = |v: &Option<Value>| match v {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "(none)".to_string(),
        };
        let pools: Vec<RolloutPool> = patches
            .iter()
            .filter(|p| p.blue_green && p.labels.get(DRIVER_LABEL) == Some(&a.name))
            .map(|p| RolloutPool {
                pool: p.pool.clone(),
                nodes: p.expected_nodes,
            })
            .collect();
        if pools.is_empty() {
            continue;
        }
        let rollout = DriverRollout {
            driver_cr: a.name.clone(),
            from: text(&change.before),
            to: text(&change.after),
            pools,
        };
        if a.reason.is_none() {
            a.reason = Some(format!(
                "driver {} -> {} on {} node(s) at once: the most disruptive change of this plan (see its top)",
                rollout.from,
                rollout.to,
                rollout.nodes()
            ));
        }
        out.push(rollout);
    }
    out
}

/// Options that shape a plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanOptions {
    /// Plan deletion of protected kinds too.
    pub prune_protected: bool,
    /// Move pools to DRA even while pods on their nodes hold device-plugin GPUs
    /// (`--force-migration`): the refusal becomes a warning.
    pub force_migration: bool,
}

/// The existing objects a plan takes over from no ApplySet (`adopt` actions and updates of
/// un-owned objects), as `Kind/ns/name`: `apply` refuses them without `--adopt`.
pub fn adoptions(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter(|a| a.adopt && matches!(a.action, ActionKind::Adopt | ActionKind::Update))
        .map(Action::id)
        .collect()
}

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The rendered set is empty: gpuctl never plans pruning everything.
    #[error("the rendered set is empty; refusing to plan a prune of every member of ApplySet {0}")]
    EmptySet(String),
}

/// The ApplySet parent of a rendered set.
pub fn parent_of(set: &RenderedSet) -> ApplySetParent {
    ApplySetParent::for_blueprint(&set.blueprint, &set.helm.namespace)
}

/// Refuses an empty rendered set before anything is read: pruning every member of a set is never
/// what a blueprint means.
pub fn refuse_empty(set: &RenderedSet) -> Result<(), PlanError> {
    if set.objects.is_empty() {
        return Err(PlanError::EmptySet(parent_of(set).id()));
    }
    Ok(())
}

/// The plan of `set` against `live`: every object's action in apply order, then the prunes; node
/// label and taint changes; the operator release step; and what the live state says about the
/// blueprint (findings).
pub fn plan(set: &RenderedSet, live: &LiveView, opts: PlanOptions) -> Result<Plan, PlanError> {
    refuse_empty(set)?;
    let set_id = parent_of(set).id();
    let mut actions = objects::actions(set, live, &set_id);
    let (prunes, mut findings) = objects::prunes(set, live, opts.prune_protected);
    actions.extend(prunes);
    // The prunes' digests (the objects' come with their actions).
    for a in &mut actions {
        if a.resource_version.is_some() && a.content_digest.is_none() {
            a.content_digest = live.get(&a.object_ref()).map(stale::content_digest);
        }
    }
    let mut node_plan = nodes::plan_nodes(live, &set.node_patches);
    node_plan.findings.extend(nodes::dra_migrations(
        live,
        &set.node_patches,
        opts.force_migration,
    ));
    let upgrades = upgrades::findings(live, &set.blueprint, &set.helm.namespace, &set.node_patches);
    let (helm_release, helm_findings) = helm::plan_helm(live, &set.helm);
    let (releases, release_findings) = helm::plan_releases(live, &set.releases);
    let (uninstalls, uninstall_findings) = uninstall::plan_uninstalls(set, live);

    // A pool an upgrade journal already explains gets that finding, not the driver CR move's.
    let explained: std::collections::BTreeSet<&str> =
        upgrades.iter().filter_map(|(p, _)| p.as_deref()).collect();
    findings.extend(
        node_plan
            .cr_moves
            .into_iter()
            .filter(|(pool, _)| !explained.contains(pool.as_str()))
            .flat_map(|(_, f)| f),
    );
    findings.extend(upgrades.into_iter().map(|(_, f)| f));
    findings.extend(helm_findings);
    findings.extend(release_findings);
    findings.extend(uninstall_findings);
    findings.extend(node_plan.findings);

    let driver_rollouts = driver_rollouts(&mut actions, &set.node_patches);
    let release_plans = std::iter::once(helm_release.as_ref())
        .chain(releases.iter().map(|r| r.plan.as_ref()))
        .flatten();
    let mut summary = Summary::of(&actions, node_plan.actions.len(), release_plans);
    summary.uninstall = uninstalls.len();
    let (server, cluster_fingerprint) = live.source.server_and_fingerprint();
    // Only a real timestamp is shown: a snapshot file is input, and this goes to a terminal.
    let snapshot_captured_at = match &live.source {
        Source::Snapshot {
            captured_at: Some(t),
            ..
        } => t
            .parse::<jiff::Timestamp>()
            .ok()
            .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string()),
        _ => None,
    };
    Ok(Plan {
        format_version: PLAN_FORMAT_VERSION,
        gpuctl_version: env!("CARGO_PKG_VERSION").to_string(),
        blueprint: set.blueprint.clone(),
        mode: Mode::of(&live.source),
        cluster_fingerprint,
        server,
        snapshot_captured_at,
        driver_rollouts,
        applyset: set_id,
        actions,
        nodes: node_plan.actions,
        findings,
        helm: set.helm.clone(),
        helm_release,
        releases,
        uninstalls,
        node_patches: set.node_patches.clone(),
        summary,
        redacted: false,
    })
}
