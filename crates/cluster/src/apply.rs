//! Apply: executes a plan in phases with gates (CRDs served, namespaces first, the ApplySet parent
//! before members), server-side apply with bounded concurrency and retries, per-key node labels and
//! taints, prune of members only, then bounded, named waits. A saved plan whose objects moved since
//! planning is refused. On failure it stops after the current phase and says how to finish.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde_json::{Value, json};

use gpuctl_model::applyset::{self, ApplySetParent};
use gpuctl_model::located::Severity;
use gpuctl_model::names::{self, UPGRADE_POOL_LABEL};
use gpuctl_model::object::{ObjectRef, TypeRef, group_kind};
use gpuctl_pipeline::render::{ChartSource, HelmRelease, Phase};
use gpuctl_plan::plan::{self, Action, ActionKind, FIELD_MANAGER, Plan};

mod uninstall;

use crate::client::{ClusterError, Kube};
use crate::lock::{LeaseGuard, LockError, LockRef, Policy};
use crate::report::Reporter;
use crate::wait::{self, Look, Retry, TimedOut, Wait};

/// Settings for an apply.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Take ownership of fields other managers own (`--force-conflicts`).
    pub force_conflicts: bool,
    /// Take over existing objects that belong to no ApplySet (`--adopt`).
    pub adopt: bool,
    /// Concurrent requests (`--parallelism`).
    pub parallelism: usize,
    /// Longest wait for a CRD to be served.
    pub crd_timeout: Duration,
    /// Longest wait for node state (MIG reconfiguration).
    pub wait_timeout: Duration,
    /// Poll interval of waits.
    pub poll: Duration,
    /// Run helm for the releases the blueprint has gpuctl install (`install: helm`) and for the
    /// uninstalls; without helm on PATH such an apply is refused up front. `false` (`--no-helm`):
    /// print each helm command instead.
    pub run_helm: bool,
    /// Uninstall a release of a dropped component even while objects of its kinds exist
    /// (`--force-uninstall`).
    pub force_uninstall: bool,
    /// How long to wait for another run's apply lock (`--lock-timeout`; zero: refuse at once).
    pub lock_timeout: Duration,
    /// How long the apply lock outlives a run that stopped renewing it (`--lock-duration`).
    pub lock_duration: Duration,
    /// Move pools to DRA even while pods on their nodes hold device-plugin GPUs
    /// (`--force-migration`).
    pub force_migration: bool,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            force_conflicts: false,
            adopt: false,
            parallelism: usize::from(crate::client::DEFAULT_PARALLELISM),
            crd_timeout: Duration::from_secs(120),
            wait_timeout: Duration::from_secs(600),
            poll: Duration::from_secs(2),
            run_helm: true,
            force_uninstall: false,
            lock_timeout: Duration::ZERO,
            lock_duration: Duration::from_secs(60),
            force_migration: false,
        }
    }
}

/// Why apply stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The saved plan no longer matches the cluster.
    #[error("the plan is stale; these objects changed after it was made (by another apply, or by hand):\n{}\nnothing was applied. Re-run `gpuctl plan` (or `gpuctl apply BLUEPRINT`) and review the new plan", .0.iter().map(|s| format!("  - {s}")).collect::<Vec<_>>().join("\n"))]
    Stale(Vec<String>),
    /// Another apply of the same blueprint holds its lock.
    #[error(
        "another apply of blueprint `{blueprint}` is running: {lease} is held by {holder}{waited}; nothing was applied. Wait for it (`--lock-timeout 5m` waits), or, if that run was killed, run `gpuctl unlock BLUEPRINT` (the lock also expires {duration_s}s after its last renewal)"
    )]
    Locked {
        /// Blueprint.
        blueprint: String,
        /// `Lease/ns/name`.
        lease: String,
        /// Who holds it.
        holder: String,
        /// `; waited Ns` when this run waited.
        waited: String,
        /// The lock's duration.
        duration_s: i64,
    },
    /// This run lost its lock mid-way (removed by `gpuctl unlock`, or not renewed in time).
    #[error(
        "lost the apply lock {lease} before phase {phase} (removed with `gpuctl unlock`, or not renewed within its duration); stopped there. What was applied stays applied: run `gpuctl plan` to see the rest, then apply again"
    )]
    LockLost {
        /// `Lease/ns/name`.
        lease: String,
        /// The phase that did not start.
        phase: String,
    },
    /// The plan was made against another cluster.
    #[error(
        "the plan was made against cluster {planned}, but this is cluster {actual}; use the right --context or re-plan"
    )]
    WrongCluster {
        /// Fingerprint in the plan.
        planned: String,
        /// Fingerprint of this cluster.
        actual: String,
    },
    /// Only live plans can be applied.
    #[error(
        "a {0} plan cannot be applied: plan against the live cluster (without --snapshot/--offline)"
    )]
    NotLive(String),
    /// The plan has conflicts and `--force-conflicts` was not given.
    #[error("{} object(s) have fields owned by other managers:\n{}\nresolve them, or re-run with --force-conflicts to take ownership", .0.len(), .0.iter().map(|s| format!("  - {s}")).collect::<Vec<_>>().join("\n"))]
    Conflicts(Vec<String>),
    /// The plan takes over existing objects and `--adopt` was not given.
    #[error("{} existing object(s) belong to no ApplySet and this apply would take them over:\n{}\nre-run with --adopt to add them to this blueprint's set (no field value changes unless the plan lists one), or remove them from the blueprint", .0.len(), .0.iter().map(|s| format!("  - {s}")).collect::<Vec<_>>().join("\n"))]
    Adoptions(Vec<String>),
    /// Some steps failed; what was applied stays applied.
    #[error("{} step(s) failed in phase {phase}:\n{}\n{} step(s) were applied before the stop. gpuctl apply is idempotent: fix the cause and re-run it to finish; nothing else was changed", .failures.len(), .failures.iter().map(|s| format!("  - {s}")).collect::<Vec<_>>().join("\n"), .applied)]
    Failed {
        /// Phase that failed.
        phase: String,
        /// What failed, with the server's words.
        failures: Vec<String>,
        /// Steps applied before the stop.
        applied: usize,
    },
    /// A wait ran out.
    #[error(
        "timed out after {seconds}s waiting for {what}; everything before it was applied. Check the operator's pods, then re-run gpuctl apply"
    )]
    WaitTimeout {
        /// What was awaited.
        what: String,
        /// The bound.
        seconds: u64,
    },
    /// A driver upgrade is moving one of the plan's pools, or moved it to a driver the plan
    /// would undo.
    #[error("{}", .0.join("\n"))]
    Upgrade(Vec<String>),
    /// A pool the plan moves from the device plugin to DRA has pods holding device-plugin GPUs on
    /// its nodes now (and `--force-migration` was not given); nothing was applied.
    #[error("nothing was applied: {}", .0.join("\n"))]
    Migration(Vec<String>),
    /// apply would run helm, and helm is not on PATH or does not run; nothing was applied.
    #[error("{0}")]
    HelmUnavailable(String),
    /// A helm run failed or outlived `--wait-timeout`: what was applied, and how to finish.
    #[error("{0}")]
    Helm(String),
    /// A release to uninstall still has objects of its kinds (and `--force-uninstall` was not
    /// given).
    #[error("{0}")]
    UninstallBlocked(String),
    /// The chart a saved plan pinned is not the one on disk.
    #[error("{0}; nothing more was applied")]
    Chart(String),
    /// The cluster failed outside a step.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

/// What an apply did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ApplyReport {
    /// Objects created or updated.
    pub applied: usize,
    /// Objects pruned.
    pub pruned: usize,
    /// Nodes patched.
    pub nodes: usize,
    /// Unchanged objects skipped.
    pub unchanged: usize,
    /// The GPU Operator's Helm step outcome.
    pub helm: String,
    /// The other stacks' Helm step outcomes (Kueue, the Network Operator), in the order run.
    pub releases: Vec<String>,
}

/// Refuses a plan whose objects moved since planning, that belongs to another cluster, or whose
/// pools a driver upgrade is moving (or moved) since. [`apply`] runs it under the apply lock.
pub async fn check_stale(k: &Kube, plan: &Plan, parallelism: usize) -> Result<(), ApplyError> {
    check_stale_except(k, plan, parallelism, None).await
}

/// [`check_stale`], not counting the namespace the lock step created for its Lease
/// (`lock_namespace`) as created by someone else.
async fn check_stale_except(
    k: &Kube,
    plan: &Plan,
    parallelism: usize,
    lock_namespace: Option<&str>,
) -> Result<(), ApplyError> {
    if plan.mode != plan::Mode::Live {
        return Err(ApplyError::NotLive(
            format!("{:?}", plan.mode).to_lowercase(),
        ));
    }
    let actual = k.fingerprint().await?;
    if let Some(planned) = &plan.cluster_fingerprint
        && *planned != actual
    {
        return Err(ApplyError::WrongCluster {
            planned: planned.clone(),
            actual,
        });
    }
    let mut now = crate::read::planned(k, plan, parallelism).await?;
    if let Some(ns) = lock_namespace {
        now.objects
            .remove(&ObjectRef::new("v1", "Namespace", None, ns));
    }
    let moved = plan::stale::changes_since(plan, &now);
    if !moved.is_empty() {
        return Err(ApplyError::Stale(moved));
    }
    now.journals = crate::read::journals(k, &plan.helm.namespace).await;
    let upgrades: Vec<String> = plan::upgrades::findings(
        &now,
        &plan.blueprint,
        &plan.helm.namespace,
        &plan.node_patches,
    )
    .into_iter()
    .filter(|(_, f)| f.severity == Severity::Error)
    .map(|(_, f)| f.message)
    .collect();
    if upgrades.is_empty() {
        Ok(())
    } else {
        Err(ApplyError::Upgrade(upgrades))
    }
}

/// The Lease that lets one apply of `plan`'s blueprint run at a time: beside its ApplySet parent.
pub fn apply_lock(plan: &Plan) -> LockRef {
    LockRef {
        namespace: plan.helm.namespace.clone(),
        name: names::apply_lock_name(&plan.blueprint),
        labels: [
            (applyset::MANAGED_BY.to_string(), "gpuctl".to_string()),
            (
                applyset::BLUEPRINT_LABEL.to_string(),
                plan.blueprint.clone(),
            ),
        ]
        .into(),
    }
}

/// Applies `plan` holding its blueprint's apply lock. Takes the lock (waiting up to
/// `opts.lock_timeout` for another apply), refuses while a driver upgrade of one of its pools
/// runs, then checks the plan against the cluster again under the lock (a second of two
/// concurrent applies sees the first one's writes here and stops instead of overwriting them),
/// applies it, and releases the lock. A run that loses the lock stops before its next phase.
pub async fn apply(
    k: &Kube,
    plan: &Plan,
    opts: &ApplyOptions,
    progress: &dyn Reporter,
) -> Result<ApplyReport, ApplyError> {
    refuse_conflicts(plan, opts)?;
    if plan.mode != plan::Mode::Live {
        return Err(ApplyError::NotLive(
            format!("{:?}", plan.mode).to_lowercase(),
        ));
    }
    // Before anything changes (the lock's namespace included): the helm this apply runs runs.
    let helm = helm_ready(plan, opts).await?;
    let lock = apply_lock(plan);
    let created = crate::lock::ensure_namespace(k, &lock.namespace).await?;
    let holder = crate::lock::this_run("apply", k.user.as_deref());
    let policy = Policy {
        duration: opts.lock_duration,
        poll: opts.poll,
        wait: opts.lock_timeout,
        outwait_silent: false,
    };
    let guard = crate::lock::acquire(k, &lock, &holder, &policy, progress)
        .await
        .map_err(|e| match e {
            LockError::Busy {
                lease,
                info,
                waited_s,
            } => ApplyError::Locked {
                blueprint: plan.blueprint.clone(),
                lease,
                holder: info.describe(),
                waited: if waited_s > 0 {
                    format!("; waited {waited_s}s")
                } else {
                    String::new()
                },
                duration_s: info.duration_s,
            },
            LockError::Cluster(e) => e.into(),
        })?;
    let result = async {
        refuse_running_upgrades(k, plan).await?;
        refuse_migrations(k, plan, opts).await?;
        let lock_ns = created.then_some(lock.namespace.as_str());
        check_stale_except(k, plan, opts.parallelism, lock_ns).await?;
        uninstall::refuse_blocked(k, plan, opts).await?;
        let ctx = HelmCtx {
            k,
            opts,
            progress,
            helm: helm.as_deref(),
            blueprint: &plan.blueprint,
        };
        run(&ctx, plan, &guard, &lock.id()).await
    }
    .await;
    guard.release().await;
    result
}

/// Under the lock, the pools the plan moves from the device plugin to DRA are checked again
/// against their nodes' pods now (a saved plan, or a pod that arrived after the plan): refused
/// while one holds device-plugin GPUs, unless `opts.force_migration`.
async fn refuse_migrations(k: &Kube, plan: &Plan, opts: &ApplyOptions) -> Result<(), ApplyError> {
    if plan.node_patches.iter().all(|p| p.dra_switch.is_none()) {
        return Ok(());
    }
    let view = crate::read::migration_view(k, &plan.node_patches).await?;
    let errors: Vec<String> =
        gpuctl_plan::plan::nodes::dra_migrations(&view, &plan.node_patches, opts.force_migration)
            .into_iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| f.message)
            .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApplyError::Migration(errors))
    }
}

/// A driver upgrade that is running now (its pool's Lease is live) moves nodes and driver CRs
/// this apply would write: refuse, naming it.
async fn refuse_running_upgrades(k: &Kube, plan: &Plan) -> Result<(), ApplyError> {
    let pools: BTreeSet<&str> = plan.node_patches.iter().map(|p| p.pool.as_str()).collect();
    let running: Vec<String> = crate::lock::live(k, &plan.helm.namespace, UPGRADE_POOL_LABEL)
        .await?
        .into_iter()
        .filter(|(name, _)| pools.iter().any(|p| names::journal_name(p) == *name))
        .map(|(name, info)| {
            format!(
                "a driver upgrade holds Lease/{}/{name} ({}); nothing was applied. Apply again once it finishes (`gpuctl upgrade status` shows it)",
                plan.helm.namespace,
                info.describe()
            )
        })
        .collect();
    if running.is_empty() {
        Ok(())
    } else {
        Err(ApplyError::Upgrade(running))
    }
}

/// Executes a plan against the cluster, phase by phase, while `guard` holds the apply lock.
async fn run(
    ctx: &HelmCtx<'_>,
    plan: &Plan,
    guard: &LeaseGuard,
    lease: &str,
) -> Result<ApplyReport, ApplyError> {
    let (k, opts, progress) = (ctx.k, ctx.opts, ctx.progress);
    let held = |phase: &str| {
        if guard.is_lost() {
            Err(ApplyError::LockLost {
                lease: lease.to_string(),
                phase: phase.to_string(),
            })
        } else {
            Ok(())
        }
    };
    let mut report = ApplyReport {
        unchanged: plan.summary.unchanged,
        ..ApplyReport::default()
    };
    let parent = ApplySetParent::for_blueprint(&plan.blueprint, &plan.helm.namespace);
    let current = foundation(k, plan, &parent, opts, progress, &mut report).await?;

    // Nodes move to their pool's NVIDIADriver CR by the `gpuctl.dev/driver` label: set it before
    // the CRs exist, or the cluster-default CR installs its driver on a pool's nodes first and the
    // pool CR reinstalls its own right after. The full label set (MIG and device-plugin configs,
    // whose ConfigMaps the operator phase creates) follows after the operator phase.
    held("driver labels")?;
    driver_labels(k, plan, progress).await?;

    // Then phase by phase, each after the Helm releases whose CRDs, controllers and webhooks its
    // objects need (the GPU and Network Operators' before the operator phase, Kueue's before the
    // queues): never a queue object before the Kueue that admits it.
    for phase in [
        Phase::Operator,
        Phase::Network,
        Phase::Quotas,
        Phase::Queues,
        Phase::Monitoring,
    ] {
        let name = format!("{phase:?}").to_lowercase();
        if phase == Phase::Operator {
            held("operator release")?;
            report.helm = helm_step(
                ctx,
                &plan.helm,
                plan.helm_release.as_ref(),
                &name,
                report.applied,
            )
            .await?;
        }
        for step in plan
            .releases
            .iter()
            .filter(|r| r.release.stack.before() == phase)
        {
            held(&format!("{} release", step.release.stack.title()))?;
            let outcome = helm_step(
                ctx,
                &step.release,
                step.plan.as_ref(),
                &name,
                report.applied,
            )
            .await?;
            report.releases.push(outcome);
        }
        let steps = to_apply(plan, phase, None);
        wait_for_kinds(k, &steps, opts, progress).await?;
        held(&name)?;
        run_phase(k, &name, &steps, opts, progress, &mut report).await?;
    }

    // Nodes: labels per key (server-side apply owns only the keys gpuctl declares), taints merged.
    held("nodes")?;
    let changed_mig = nodes(k, plan, progress, &mut report).await?;
    held("prune")?;
    prune(k, plan, progress, &mut report).await?;
    // The set now holds only current kinds.
    write_parent(k, &parent, &current, plan).await?;
    // Releases of components the blueprint dropped: after their objects were pruned.
    for step in &plan.uninstalls {
        held("uninstall")?;
        let outcome = uninstall::uninstall(ctx, plan, step, report.applied).await?;
        report.releases.push(outcome);
    }

    // Waits: MIG Manager must report success on nodes whose MIG config changed.
    if !changed_mig.is_empty() {
        wait_for_node_label(
            k,
            &changed_mig,
            "nvidia.com/mig.config.state",
            "success",
            Some("failed"),
            opts,
            progress,
        )
        .await?;
    }
    progress.done(
        json!({"applied": report.applied, "pruned": report.pruned, "nodes": report.nodes, "unchanged": report.unchanged}),
        format!(
            "Apply complete: {} applied, {} pruned, {} node(s) patched, {} unchanged.",
            report.applied, report.pruned, report.nodes, report.unchanged
        ),
    );
    Ok(report)
}

/// Conflicts stop the apply unless `--force-conflicts` takes the fields over.
fn refuse_conflicts(plan: &Plan, opts: &ApplyOptions) -> Result<(), ApplyError> {
    let conflicts: Vec<String> = plan
        .actions
        .iter()
        .filter(|a| a.action == ActionKind::Conflict)
        .map(|a| format!("{}: {}", a.id(), a.reason.clone().unwrap_or_default()))
        .collect();
    if !conflicts.is_empty() && !opts.force_conflicts {
        return Err(ApplyError::Conflicts(conflicts));
    }
    let adoptions = gpuctl_plan::plan::adoptions(plan);
    if !adoptions.is_empty() && !opts.adopt {
        return Err(ApplyError::Adoptions(adoptions));
    }
    Ok(())
}

/// The writes of `phase` (`namespaces`: only Namespaces, or only the rest).
fn to_apply(plan: &Plan, phase: Phase, namespaces: Option<bool>) -> Vec<&Action> {
    plan.actions
        .iter()
        .filter(|a| {
            a.phase == Some(phase) && a.action != ActionKind::NoOp && a.action != ActionKind::Delete
        })
        .filter(|a| namespaces.is_none_or(|ns| (a.kind == "Namespace") == ns))
        .collect()
}

/// Phase 1: namespaces, then the ApplySet parent (recording every kind the set has now or had
/// before, so a crash before prune never hides members), then the rest of the foundation. Returns
/// the group-kinds the set has now.
async fn foundation(
    k: &Kube,
    plan: &Plan,
    parent: &ApplySetParent,
    opts: &ApplyOptions,
    progress: &dyn Reporter,
    report: &mut ApplyReport,
) -> Result<BTreeSet<String>, ApplyError> {
    let namespaces = to_apply(plan, Phase::Foundation, Some(true));
    run_phase(k, "namespaces", &namespaces, opts, progress, report).await?;
    let previous = crate::read::parent_group_kinds(k, parent).await?;
    let current: BTreeSet<String> = plan
        .actions
        .iter()
        .filter(|a| a.action != ActionKind::Delete)
        .map(|a| group_kind(&a.api_version, &a.kind))
        .collect();
    let union: BTreeSet<String> = current.iter().cloned().chain(previous).collect();
    write_parent(k, parent, &union, plan).await?;
    let rest = to_apply(plan, Phase::Foundation, Some(false));
    run_phase(k, "foundation", &rest, opts, progress, report).await?;
    Ok(current)
}

/// Prunes the members the blueprint dropped, each only if it is still as planned
/// ([`delete_as_planned`]).
async fn prune(
    k: &Kube,
    plan: &Plan,
    progress: &dyn Reporter,
    report: &mut ApplyReport,
) -> Result<(), ApplyError> {
    let deletes: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| a.action == ActionKind::Delete)
        .collect();
    if deletes.is_empty() {
        return Ok(());
    }
    progress.phase("prune", deletes.len());
    let mut failures = Vec::new();
    // The plan lists children before their parents; a parent whose children were just deleted may
    // still be refused for a moment (Volcano's webhook counts children through an informer).
    for a in deletes {
        let Some(r) = k.resolve(&a.api_version, &a.kind).await? else {
            continue;
        };
        let res = wait::retry(wait::HIERARCHY, retry_in_hierarchy, || {
            delete_as_planned(k, &r, a)
        })
        .await;
        match res {
            Ok(()) => {
                report.pruned += 1;
                progress.step(&a.id(), "deleted");
            }
            Err(e) => {
                progress.failed(&a.id(), &e.to_string());
                failures.push(e.to_string());
            }
        }
    }
    if failures.is_empty() {
        return Ok(());
    }
    Err(ApplyError::Failed {
        phase: "prune".into(),
        failures,
        applied: report.applied,
    })
}

async fn write_parent(
    k: &Kube,
    parent: &ApplySetParent,
    kinds: &BTreeSet<String>,
    plan: &Plan,
) -> Result<(), ApplyError> {
    let namespaces: BTreeSet<&str> = plan
        .actions
        .iter()
        .filter(|a| a.action != ActionKind::Delete)
        .filter_map(|a| a.namespace.as_deref())
        .filter(|ns| *ns != parent.namespace)
        .collect();
    let manifest = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": parent.name,
            "namespace": parent.namespace,
            "labels": { applyset::ID: parent.id(), applyset::MANAGED_BY: "gpuctl", applyset::BLUEPRINT_LABEL: plan.blueprint },
            "annotations": {
                applyset::TOOLING: format!("gpuctl/v{}", env!("CARGO_PKG_VERSION")),
                applyset::CONTAINS_GROUP_KINDS: kinds.iter().cloned().collect::<Vec<_>>().join(","),
                applyset::ADDITIONAL_NAMESPACES: namespaces.into_iter().collect::<Vec<_>>().join(","),
            },
        },
    });
    let r = k
        .resolve("v1", "ConfigMap")
        .await?
        .expect("every cluster serves ConfigMaps");
    k.apply(&r, &manifest, false, true).await?;
    Ok(())
}

/// Whether a refused write of a child (or delete of a parent) is worth another try
/// ([`wait::HIERARCHY`]): a refusal by admission (400/422) is; conflicts, missing permissions,
/// unserved kinds and other errors (which the client already retried) are not.
fn retry_in_hierarchy(e: &ClusterError) -> bool {
    matches!(e, ClusterError::Invalid { .. })
}

async fn run_phase(
    k: &Kube,
    name: &str,
    steps: &[&Action],
    opts: &ApplyOptions,
    progress: &dyn Reporter,
    report: &mut ApplyReport,
) -> Result<(), ApplyError> {
    if steps.is_empty() {
        return Ok(());
    }
    progress.phase(name, steps.len());
    let mut failures = Vec::new();
    // Parents before children (a Volcano child queue is refused while its parent does not exist):
    // each wave in parallel, the next once it is written.
    for (wave, actions) in gpuctl_plan::plan::hierarchy::write_waves(steps)
        .into_iter()
        .enumerate()
    {
        let retries = if wave == 0 {
            Retry::ONCE
        } else {
            wait::HIERARCHY
        };
        let results: Vec<(String, &str, Result<(), ClusterError>)> = futures::stream::iter(actions)
            .map(|a| async move {
                let outcome = match a.action {
                    ActionKind::Create
                    | ActionKind::CreateAfterCrd
                    | ActionKind::CreateAfterParent => "created",
                    ActionKind::Adopt => "adopted",
                    _ if a.replace => "replaced",
                    _ => "updated",
                };
                // A field the server keeps immutable changes: the object goes first.
                if a.replace
                    && let Err(e) = delete_for_replace(k, a, opts).await
                {
                    return (a.id(), outcome, Err(e));
                }
                let res = wait::retry(retries, retry_in_hierarchy, || async move {
                    let r = k.resolve(&a.api_version, &a.kind).await?.ok_or_else(|| {
                        ClusterError::KindNotServed {
                            api_version: a.api_version.clone(),
                            kind: a.kind.clone(),
                        }
                    })?;
                    let manifest = a
                        .manifest
                        .as_ref()
                        .expect("create/update actions carry their manifest");
                    k.apply(&r, manifest, false, opts.force_conflicts)
                        .await
                        .map(|_| ())
                })
                .await;
                (a.id(), outcome, res)
            })
            .buffer_unordered(opts.parallelism.max(1))
            .collect()
            .await;
        for (id, outcome, res) in results {
            match res {
                Ok(()) => {
                    report.applied += 1;
                    progress.step(&id, outcome);
                }
                Err(e) => {
                    progress.failed(&id, &e.to_string());
                    failures.push(e.to_string());
                }
            }
        }
        // Children of a parent that failed would be refused too: stop here.
        if !failures.is_empty() {
            break;
        }
    }
    failures.sort();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(ApplyError::Failed {
            phase: name.to_string(),
            failures,
            applied: report.applied,
        })
    }
}

/// Deletes the object a `replace` update recreates (only if it is still as planned,
/// [`delete_as_planned`]) and waits, bounded by `--wait-timeout`, until it is gone: a finalizer
/// that keeps it (Kueue keeps a ResourceFlavor or ClusterQueue while workloads use it) ends the
/// wait naming the finalizers, and the next apply creates it.
async fn delete_for_replace(k: &Kube, a: &Action, opts: &ApplyOptions) -> Result<(), ClusterError> {
    let r =
        k.resolve(&a.api_version, &a.kind)
            .await?
            .ok_or_else(|| ClusterError::KindNotServed {
                api_version: a.api_version.clone(),
                kind: a.kind.clone(),
            })?;
    let ns = a.namespace.as_deref();
    delete_as_planned(k, &r, a).await?;
    let r = &r;
    let gone = Wait::new(opts.wait_timeout, opts.poll.min(Duration::from_millis(500)))
        .until(
            &mut (),
            |_, _| {
                Box::pin(async move {
                    Ok(match k.get(r, ns, &a.name).await? {
                        None => Look::Done(()),
                        Some(live) => Look::Pending(live),
                    })
                })
            },
            |_, _| {},
        )
        .await?;
    let Err(TimedOut(live)) = gone else {
        return Ok(());
    };
    let finalizers = live["metadata"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    Err(ClusterError::Conflict {
        object: a.id(),
        message: format!(
            "deleted to be created again with its changed immutable fields, but it is still there after {}s (finalizers: [{finalizers}]); whatever still uses it keeps it: once it is gone, re-run gpuctl apply to create it",
            opts.wait_timeout.as_secs()
        ),
    })
}

/// Deletes `a`'s object if it is still what the plan was made against. The guard is the
/// resourceVersion read just before the delete when the object's content (without status and
/// server bookkeeping, `plan::stale::content_digest`) is the planned one: a controller's status
/// write since the plan (Kueue writes a LocalQueue's status whenever a workload in it is queued,
/// admitted or finishes) moves the resourceVersion but not what the plan decided about, and must
/// not fail the delete; a write in between the read and the delete is read again. Anything else
/// (no digest in the plan, or content that changed) is guarded by the planned resourceVersion,
/// which the server refuses (409) once the object moved. A conflict under the resourceVersion just
/// read is read again ([`wait::CONFLICT`]).
async fn delete_as_planned(
    k: &Kube,
    r: &crate::client::Resolved,
    a: &Action,
) -> Result<(), ClusterError> {
    let ns = a.namespace.as_deref();
    // Each failure says whether it was guarded by the resourceVersion this try read.
    let read_again =
        |(e, fresh): &(ClusterError, bool)| *fresh && matches!(e, ClusterError::Conflict { .. });
    wait::retry(wait::CONFLICT, read_again, || async move {
        let fresh = match &a.content_digest {
            Some(planned) => match k.get(r, ns, &a.name).await.map_err(|e| (e, false))? {
                None => return Ok(()),
                Some(live) if plan::stale::content_digest(&live) == *planned => {
                    live["metadata"]["resourceVersion"]
                        .as_str()
                        .map(str::to_string)
                }
                Some(_) => None,
            },
            None => None,
        };
        let guard = fresh.as_deref().or(a.resource_version.as_deref());
        k.delete(r, ns, &a.name, guard)
            .await
            .map_err(|e| (e, fresh.is_some()))
    })
    .await
    .map_err(|(e, _)| e)
}

/// Gate: every kind a phase needs is served (CRDs installed and Established), within the bound.
async fn wait_for_kinds(
    k: &Kube,
    steps: &[&Action],
    opts: &ApplyOptions,
    progress: &dyn Reporter,
) -> Result<(), ApplyError> {
    let needed: BTreeSet<TypeRef> = steps
        .iter()
        .map(|a| TypeRef::new(&a.api_version, &a.kind))
        .collect();
    let kinds = &needed;
    let served = Wait::new(opts.crd_timeout, opts.poll)
        .until(
            &mut (),
            |_, round| {
                Box::pin(async move {
                    // A CRD Established since the last look is served in a fresh discovery only.
                    if !round.first() {
                        k.forget_kinds();
                    }
                    let mut missing = Vec::new();
                    for t in kinds {
                        if k.resolve(&t.api_version, &t.kind).await?.is_none() {
                            missing.push(format!("{} {}", t.api_version, t.kind));
                        }
                    }
                    Ok::<_, ClusterError>(if missing.is_empty() {
                        Look::Done(())
                    } else {
                        Look::Pending(missing)
                    })
                })
            },
            |missing, elapsed| {
                progress.waiting(
                    &format!("CRDs of {} to be served", missing.join(", ")),
                    elapsed.as_secs(),
                    opts.crd_timeout.as_secs(),
                );
            },
        )
        .await?;
    served.map_err(|TimedOut(missing)| ApplyError::WaitTimeout {
        what: format!(
            "the CRDs of {} ({})",
            missing.join(", "),
            providers(&needed)
        ),
        seconds: opts.crd_timeout.as_secs(),
    })
}

/// Who installs the CRDs of an API group, so a timeout says what to install. Group names are API
/// identities (not versions), so they live here rather than in profiles/.
fn providers(needed: &BTreeSet<TypeRef>) -> String {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for t in needed {
        names.insert(match t.group() {
            "nvidia.com" => "install the GPU Operator (gpuOperator.install: helm runs it)",
            "mellanox.com" => {
                "install the Network Operator (networkOperator.install: helm runs it)"
            }
            "nv-ipam.nvidia.com" => {
                "the Network Operator applies them once it reconciles the NicClusterPolicy's nvIpam: check that the operator runs"
            }
            "kueue.x-k8s.io" => "install Kueue (scheduling.kueue.install: helm runs it)",
            "scheduling.volcano.sh" => "install Volcano (scheduling.volcano.install: helm runs it)",
            "monitoring.coreos.com" => {
                "install the Prometheus Operator, or set monitoring.serviceMonitor: false and drop the alerts"
            }
            _ => "install the controller that provides them",
        });
    }
    names.into_iter().collect::<Vec<_>>().join("; ")
}

/// What a release step needs besides the release: the cluster, the options, where progress
/// goes, the helm to run (`None`: `--no-helm`, or no helm run needed) and the blueprint whose
/// releases these are (recorded on each release it installs).
pub(crate) struct HelmCtx<'a> {
    pub(crate) k: &'a Kube,
    pub(crate) opts: &'a ApplyOptions,
    pub(crate) progress: &'a dyn Reporter,
    pub(crate) helm: Option<&'a std::path::Path>,
    pub(crate) blueprint: &'a str,
}

/// Checks, before an apply changes anything, that the helm it runs runs: when the plan has helm
/// runs ([`plan::helm_runs`]: an `install: helm` release not up to date, an uninstall), `helm`
/// must be on PATH and `helm version` must succeed, or the apply is refused naming each release
/// and the ways out. Returns the helm to run (`None`: none is needed, or `--no-helm`). The binary
/// calls it before asking for confirmation too.
pub async fn helm_ready(
    plan: &Plan,
    opts: &ApplyOptions,
) -> Result<Option<std::path::PathBuf>, ApplyError> {
    let runs = plan::helm_runs(plan);
    if runs.is_empty() || !opts.run_helm {
        return Ok(None);
    }
    let why = match crate::helm::on_path() {
        None => "helm is not on PATH".to_string(),
        Some(helm) => match crate::helm::check(&helm).await {
            Ok(_) => return Ok(Some(helm)),
            Err(e) => e,
        },
    };
    let list: Vec<String> = runs
        .iter()
        .map(|r| format!("  - {} {}: {}", r.what, r.id, r.verb))
        .collect();
    Err(ApplyError::HelmUnavailable(format!(
        "nothing was applied: the blueprint has gpuctl run helm for {} release(s), and {why}:\n{}\nInstall helm 3 (https://helm.sh/docs/intro/install/) on PATH and apply again; or apply with --no-helm to apply the objects and run these helm commands yourself (apply prints each one); or set `install: gitops` or `install: none` for a release something else installs",
        runs.len(),
        list.join("\n")
    )))
}

/// The `--labels` gpuctl gives a release it installs: the blueprint and the stack, which is how
/// a later plan knows the release is gpuctl's to uninstall when the blueprint drops the stack.
fn release_labels(blueprint: &str, h: &HelmRelease) -> String {
    format!(
        "{}={blueprint},{}={}",
        applyset::BLUEPRINT_LABEL,
        names::STACK_LABEL,
        plan::uninstall::stack_label(h.stack)
    )
}

/// One Helm release: `helm upgrade --install` from its chart source with the rendered values,
/// unless the plan found it unchanged or gpuctl does not install it. A chart archive pinned by the
/// plan must still have the pinned digest. helm runs as a child process the runtime awaits (the
/// lock's Lease keeps renewing), bounded by `--wait-timeout`. helm failing stops the apply before
/// `phase`, whose objects need the release (they would wait for CRDs or webhooks that never
/// arrive); what was applied before stays, and the error says how to finish.
async fn helm_step(
    ctx: &HelmCtx<'_>,
    h: &HelmRelease,
    planned: Option<&plan::HelmPlan>,
    phase: &str,
    applied: usize,
) -> Result<String, ApplyError> {
    let what = format!("{} release", h.stack.title());
    if h.install != gpuctl_model::blueprint::InstallMode::Helm {
        return Ok(format!("{what}: skipped (install: {})", h.install));
    }
    // Like helmfile's diff-before-sync: an unchanged release gets no new revision.
    if let Some(hp) = planned
        && hp.action == plan::HelmAction::NoOp
    {
        let msg = format!(
            "helm release {}/{} is up to date (revision {}, chart {}); helm not run",
            h.namespace,
            h.release,
            hp.revision.unwrap_or_default(),
            h.version
        );
        ctx.progress.note(&msg);
        return Ok(msg);
    }
    let (chart, repo) = chart_argument(h)?;
    let labels = release_labels(ctx.blueprint, h);
    let command = format!(
        "helm upgrade --install {} {chart}{} --version {} --namespace {} --create-namespace --labels {labels} --values <rendered values>{}",
        h.release,
        repo.as_deref()
            .map(|r| format!(" --repo {r}"))
            .unwrap_or_default(),
        h.version,
        h.namespace,
        ctx.k
            .context
            .as_deref()
            .map(|c| format!(" --kube-context {c}"))
            .unwrap_or_default()
    );
    let Some(helm) = ctx.helm else {
        let msg = format!(
            "--no-helm: install the {what} yourself with `{command}` (write the values with `gpuctl render --output-dir DIR`)"
        );
        ctx.progress.note(&msg);
        return Ok(msg);
    };
    let failed = |why: String| ApplyError::Failed {
        phase: what.clone(),
        failures: vec![why],
        applied,
    };
    // The values may hold credentials: a private directory, removed when this returns.
    let dir = private_dir().map_err(|e| failed(format!("cannot write the values file: {e}")))?;
    let path = dir.path.join("values.yaml");
    // JSON is YAML, and helm reads values files as YAML: no second serialiser to trust.
    let values = serde_json::to_string_pretty(&h.values).unwrap_or_default();
    write_private(&path, &values)
        .map_err(|e| failed(format!("cannot write the values file: {e}")))?;
    let mut args: Vec<std::ffi::OsString> =
        ["upgrade", "--install", h.release.as_str(), chart.as_str()]
            .into_iter()
            .map(Into::into)
            .collect();
    if let Some(r) = &repo {
        args.extend(["--repo".into(), r.into()]);
    }
    args.extend(
        [
            "--version",
            h.version.as_str(),
            "--namespace",
            h.namespace.as_str(),
            "--create-namespace",
            "--labels",
            labels.as_str(),
            "--values",
        ]
        .into_iter()
        .map(Into::into),
    );
    args.push(path.into_os_string());
    args.extend(crate::helm::cluster_args(ctx.k));
    ctx.progress.note(&format!(
        "running helm upgrade --install for the {what} {}/{} (chart {}, at most {}s)",
        h.namespace,
        h.release,
        h.version,
        ctx.opts.wait_timeout.as_secs()
    ));
    let outcome = crate::helm::run(helm, &args, ctx.opts.wait_timeout).await;
    let failure = HelmFailure {
        what: &what,
        namespace: &h.namespace,
        release: &h.release,
        verb: "upgrade --install",
        phase,
        command: &command,
        applied,
        wait_timeout: ctx.opts.wait_timeout,
    };
    match outcome {
        crate::helm::Outcome::Done(stdout) => {
            let msg = installed(h, &stdout);
            ctx.progress.note(&msg);
            Ok(msg)
        }
        other => Err(failure.error(other)),
    }
}

/// A helm run that did not succeed, and where the apply stands.
pub(crate) struct HelmFailure<'a> {
    pub(crate) what: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) release: &'a str,
    /// `upgrade --install`, `uninstall`.
    pub(crate) verb: &'a str,
    /// The phase that did not run (its objects need the release), or `uninstall`.
    pub(crate) phase: &'a str,
    /// The helm command to run by hand.
    pub(crate) command: &'a str,
    pub(crate) applied: usize,
    pub(crate) wait_timeout: Duration,
}

impl HelmFailure<'_> {
    /// The error for `outcome`: what happened, what was applied and what was not, how to look at
    /// the release, and how to finish.
    pub(crate) fn error(&self, outcome: crate::helm::Outcome) -> ApplyError {
        let (ns, r) = (self.namespace, self.release);
        let what_happened = match outcome {
            crate::helm::Outcome::TimedOut(err) => format!(
                "`helm {}` of the {} {ns}/{r} ran longer than --wait-timeout ({}s) and was stopped (SIGTERM, on which helm records the release as `failed`; killed {}s later if still running){}",
                self.verb,
                self.what,
                self.wait_timeout.as_secs(),
                crate::helm::STOP_GRACE.as_secs(),
                if err.is_empty() {
                    String::new()
                } else {
                    format!("; it printed: {err}")
                }
            ),
            crate::helm::Outcome::NotStarted(e) => {
                format!(
                    "helm could not be started for the {} {ns}/{r}: {e}",
                    self.what
                )
            }
            crate::helm::Outcome::Failed(err) | crate::helm::Outcome::Done(err) => {
                format!(
                    "`helm {}` of the {} {ns}/{r} failed: {err}",
                    self.verb, self.what
                )
            }
        };
        let stopped = if self.phase == "uninstall" {
            "everything else of the plan was applied".to_string()
        } else {
            format!(
                "the {} phase (whose objects need this release) and every step after it were not run",
                self.phase
            )
        };
        ApplyError::Helm(format!(
            "{what_happened}\n{} object(s) were applied before it; {stopped}.\nThe release is as helm left it: `helm status {r} -n {ns}`, `helm history {r} -n {ns}` (one left `pending-install`, `pending-upgrade` or `pending-uninstall` must be rolled back with `helm rollback {r} -n {ns}`, or uninstalled, before helm can change it again).\nTo finish: fix the cause and run `gpuctl apply` again (it runs helm again{}, then applies the rest); or run `{}` yourself, then `gpuctl apply`",
            self.applied,
            if self.verb == "uninstall" {
                ""
            } else {
                "; raise --wait-timeout if the chart needs longer"
            },
            self.command
        ))
    }
}

/// What `helm upgrade --install` did, from its output: `helm release NS/NAME installed: chart
/// CHART VERSION from SOURCE, revision N` (`upgraded` from revision 2 on; helm prints
/// `REVISION: N`, and revision 1 is an install). Without a revision in the output, it says
/// `installed or upgraded` and leaves the revision out rather than guess.
fn installed(h: &HelmRelease, helm_stdout: &str) -> String {
    let revision = helm_stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("REVISION:"))
        .and_then(|r| r.trim().parse::<u64>().ok());
    let (verb, tail) = match revision {
        Some(1) => ("installed", ", revision 1".to_string()),
        Some(n) => ("upgraded", format!(", revision {n}")),
        None => ("installed or upgraded", String::new()),
    };
    format!(
        "helm release {}/{} {verb}: chart {} {} from {}{tail}",
        h.namespace,
        h.release,
        h.chart_name(),
        h.version,
        h.source
    )
}

/// `(chart, --repo)` for helm from a release's chart source; a pinned archive is checked first.
fn chart_argument(h: &HelmRelease) -> Result<(String, Option<String>), ApplyError> {
    match &h.source {
        ChartSource::Repository { url } => Ok((h.chart_name().to_string(), Some(url.clone()))),
        ChartSource::Oci { reference } => Ok((reference.clone(), None)),
        ChartSource::Path {
            path,
            resolved,
            digest,
        } => {
            let Some(resolved) = resolved else {
                return Err(ApplyError::Chart(format!(
                    "the plan does not say where the chart `{path}` is; plan again"
                )));
            };
            if let Some(want) = digest {
                let bytes = gpuctl_model::input::read(
                    std::path::Path::new(resolved),
                    &gpuctl_model::input::CHART,
                )
                .map_err(|e| ApplyError::Chart(e.to_string()))?;
                let have = gpuctl_model::input::sha256(&bytes);
                if &have != want {
                    return Err(ApplyError::Chart(format!(
                        "the chart archive `{resolved}` is {have}, but the plan was made with {want}; plan again with the archive you mean to install"
                    )));
                }
            }
            Ok((resolved.clone(), None))
        }
    }
}

/// A directory only this user can read, removed on drop.
struct PrivateDir {
    path: std::path::PathBuf,
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn private_dir() -> std::io::Result<PrivateDir> {
    use std::os::unix::fs::DirBuilderExt;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let path = std::env::temp_dir().join(format!("gpuctl-helm-{}-{nanos:08x}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&path)?;
    Ok(PrivateDir { path })
}

fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// Applies node labels and taints; returns nodes whose `nvidia.com/mig.config` changed.
async fn nodes(
    k: &Kube,
    plan: &Plan,
    progress: &dyn Reporter,
    report: &mut ApplyReport,
) -> Result<Vec<String>, ApplyError> {
    if plan.nodes.is_empty() {
        return Ok(vec![]);
    }
    progress.phase("nodes", plan.nodes.len());
    let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(k.client());
    let by_pool: BTreeMap<&str, &gpuctl_pipeline::render::NodePatch> = plan
        .node_patches
        .iter()
        .map(|p| (p.pool.as_str(), p))
        .collect();
    let mut changed_mig = Vec::new();
    let mut failures = Vec::new();
    for n in &plan.nodes {
        let Some(patch) = by_pool.get(n.pool.as_str()) else {
            continue;
        };
        // Labels: every label gpuctl declares for this pool, as one apply (keys it owned earlier
        // and no longer declares are released by server-side apply).
        let labels = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.node, "labels": patch.labels}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            // gpuctl is the declared owner of these keys (e.g. nvidia.com/mig.config, which the
            // operator only defaults when absent).
            force: true,
            ..PatchParams::default()
        };
        let lp = Patch::Apply(&labels);
        if let Err(e) = crate::client::retry(|| api.patch(&n.node, &params, &lp)).await {
            let e = crate::client::classify(&format!("Node/{}", n.node), e);
            progress.failed(&format!("Node/{}", n.node), &e.to_string());
            failures.push(e.to_string());
            continue;
        }
        if n.labels
            .iter()
            .any(|c| c.path == "labels.\"nvidia.com/mig.config\"")
        {
            changed_mig.push(n.node.clone());
        }
        if !n.taints.is_empty()
            && let Err(e) = merge_taints(&api, &n.node, patch).await
        {
            progress.failed(&format!("Node/{}", n.node), &e.to_string());
            failures.push(e.to_string());
            continue;
        }
        report.nodes += 1;
        progress.step(&format!("Node/{}", n.node), "patched");
    }
    if failures.is_empty() {
        Ok(changed_mig)
    } else {
        Err(ApplyError::Failed {
            phase: "nodes".into(),
            failures,
            applied: report.applied,
        })
    }
}

/// Sets only `gpuctl.dev/driver` on nodes whose value changes (a merge patch; the later
/// server-side apply of every gpuctl label takes ownership of it).
async fn driver_labels(k: &Kube, plan: &Plan, progress: &dyn Reporter) -> Result<(), ApplyError> {
    let path = gpuctl_plan::plan::diff::join("labels", gpuctl_pipeline::render::DRIVER_LABEL);
    let moves: Vec<(&str, &Value)> = plan
        .nodes
        .iter()
        .filter_map(|n| {
            n.labels
                .iter()
                .find(|c| c.path == path)
                .and_then(|c| c.after.as_ref())
                .map(|v| (n.node.as_str(), v))
        })
        .collect();
    if moves.is_empty() {
        return Ok(());
    }
    progress.phase("driver labels", moves.len());
    let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(k.client());
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    for (node, value) in moves {
        let body = json!({"metadata": {"labels": {gpuctl_pipeline::render::DRIVER_LABEL: value}}});
        let patch = Patch::Merge(&body);
        crate::client::retry(|| api.patch(node, &params, &patch))
            .await
            .map_err(|e| crate::client::classify(&format!("Node/{node}"), e))?;
        progress.step(&format!("Node/{node}"), "labelled");
    }
    Ok(())
}

/// Adds or updates gpuctl's taints by key and effect, keeping every other taint; optimistic
/// concurrency through resourceVersion (a node changed meanwhile is re-read, up to 5 times).
async fn merge_taints(
    api: &Api<k8s_openapi::api::core::v1::Node>,
    node: &str,
    patch: &gpuctl_pipeline::render::NodePatch,
) -> Result<(), ClusterError> {
    let id = &format!("Node/{node}");
    // Each failure says whether it was a conflict of the write (the node moved since it was read).
    let written = wait::retry(wait::CONFLICT, |(_, moved): &(ClusterError, bool)| *moved, || async move {
        let current = crate::client::retry(|| api.get(node))
            .await
            .map_err(|e| (crate::client::classify(id, e), false))?;
        let mut taints: Vec<Value> = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
            .collect();
        for t in &patch.taints {
            taints.retain(|x| !(x["key"] == t.key.as_str() && x["effect"] == t.effect.as_str()));
            let mut v = json!({"key": t.key, "effect": t.effect});
            if let Some(val) = &t.value {
                v["value"] = json!(val);
            }
            taints.push(v);
        }
        let body = json!({"metadata": {"resourceVersion": current.metadata.resource_version}, "spec": {"taints": taints}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let patch = Patch::Merge(&body);
        match crate::client::retry(|| api.patch(node, &params, &patch)).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let moved = matches!(&e, kube::Error::Api(s) if s.code == 409);
                Err((crate::client::classify(id, e), moved))
            }
        }
    })
    .await;
    match written {
        Ok(()) => Ok(()),
        Err((_, true)) => Err(ClusterError::Conflict {
            object: id.clone(),
            message: "the node kept changing while its taints were updated; re-run gpuctl apply"
                .into(),
        }),
        Err((e, false)) => Err(e),
    }
}

/// Waits until every named node has `key=want`; `fail` ends the wait early with an error.
pub async fn wait_for_node_label(
    k: &Kube,
    nodes: &[String],
    key: &str,
    want: &str,
    fail: Option<&str>,
    opts: &ApplyOptions,
    progress: &dyn Reporter,
) -> Result<(), ApplyError> {
    let api = &Api::<k8s_openapi::api::core::v1::Node>::all(k.client());
    let labelled = Wait::new(opts.wait_timeout, opts.poll)
        .until(
            &mut (),
            |_, _| {
                Box::pin(async move {
                    let mut pending = Vec::new();
                    for n in nodes {
                        let node = crate::client::retry(|| api.get(n))
                            .await
                            .map_err(|e| crate::client::classify(&format!("Node/{n}"), e))?;
                        let value = node
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(key))
                            .cloned();
                        match value.as_deref() {
                            Some(v) if v == want => {}
                            Some(v) if Some(v) == fail => {
                                return Err(ApplyError::Failed {
                                    phase: "waits".into(),
                                    failures: vec![format!(
                                        "Node/{n}: {key}={v}; see the nvidia-mig-manager pod logs on that node"
                                    )],
                                    applied: 0,
                                });
                            }
                            _ => pending.push(n.clone()),
                        }
                    }
                    Ok(if pending.is_empty() {
                        Look::Done(())
                    } else {
                        Look::Pending(format!("{key}={want} on {}", pending.join(", ")))
                    })
                })
            },
            |what, elapsed| {
                progress.waiting(what, elapsed.as_secs(), opts.wait_timeout.as_secs());
            },
        )
        .await?;
    labelled.map_err(|TimedOut(what)| ApplyError::WaitTimeout {
        what,
        seconds: opts.wait_timeout.as_secs(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_chart_archive_must_be_the_one_installed() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("gpu-operator.tgz");
        std::fs::write(&archive, b"the reviewed chart").unwrap();
        let release = |source: ChartSource| HelmRelease {
            stack: gpuctl_pipeline::render::Stack::GpuOperator,
            release: "gpu-operator".into(),
            chart: gpuctl_pipeline::render::CHART.into(),
            version: "v26.7.0".into(),
            namespace: "gpu-operator".into(),
            install: gpuctl_model::blueprint::InstallMode::Helm,
            values: json!({}),
            source,
        };
        let source = |digest: &str| {
            release(ChartSource::Path {
                path: "gpu-operator.tgz".into(),
                resolved: Some(archive.display().to_string()),
                digest: Some(digest.into()),
            })
        };
        let pinned = gpuctl_model::input::sha256(b"the reviewed chart");
        let (chart, repo) = chart_argument(&source(&pinned)).unwrap();
        assert_eq!((chart.as_str(), repo), (archive.to_str().unwrap(), None));
        std::fs::write(&archive, b"a chart swapped after review").unwrap();
        match chart_argument(&source(&pinned)) {
            Err(ApplyError::Chart(m)) => assert!(m.contains("plan again"), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        let (chart, repo) = chart_argument(&release(ChartSource::Oci {
            reference: "oci://r.example/charts/gpu-operator".into(),
        }))
        .unwrap();
        assert_eq!(
            (chart.as_str(), repo),
            ("oci://r.example/charts/gpu-operator", None)
        );
        let (chart, repo) = chart_argument(&release(ChartSource::default())).unwrap();
        assert_eq!(
            (chart.as_str(), repo.as_deref()),
            (
                "gpu-operator",
                Some(gpuctl_pipeline::render::CHART_REPOSITORY)
            )
        );
        // Another chart from another repository is named by its own chart name.
        let mut kueue = release(ChartSource::Repository {
            url: "https://charts.internal.example.com/kueue".into(),
        });
        kueue.chart = "kueue".into();
        let (chart, repo) = chart_argument(&kueue).unwrap();
        assert_eq!(
            (chart.as_str(), repo.as_deref()),
            ("kueue", Some("https://charts.internal.example.com/kueue"))
        );
    }

    /// Apply's report of a helm run names namespace, release, chart, version, source and the
    /// revision helm printed: revision 1 is an install, later ones upgrades.
    #[test]
    fn the_report_says_what_helm_installed() {
        let release = HelmRelease {
            stack: gpuctl_pipeline::render::Stack::Kueue,
            release: "kueue".into(),
            chart: "kueue".into(),
            version: "0.19.2".into(),
            namespace: "kueue-system".into(),
            install: gpuctl_model::blueprint::InstallMode::Helm,
            values: json!({}),
            source: ChartSource::Oci {
                reference: "oci://registry.k8s.io/kueue/charts/kueue".into(),
            },
        };
        let head = "helm release kueue-system/kueue";
        let chart = "chart kueue 0.19.2 from oci://registry.k8s.io/kueue/charts/kueue";
        for (stdout, want) in [
            (
                "Release \"kueue\" does not exist. Installing it now.\nNAME: kueue\nNAMESPACE: kueue-system\nSTATUS: deployed\nREVISION: 1\n",
                format!("{head} installed: {chart}, revision 1"),
            ),
            (
                "Release \"kueue\" has been upgraded. Happy Helming!\nREVISION: 12\nTEST SUITE: None\n",
                format!("{head} upgraded: {chart}, revision 12"),
            ),
            ("", format!("{head} installed or upgraded: {chart}")),
            (
                "REVISION: many\n",
                format!("{head} installed or upgraded: {chart}"),
            ),
        ] {
            assert_eq!(installed(&release, stdout), want, "{stdout:?}");
        }
    }
}
