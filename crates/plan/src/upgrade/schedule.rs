//! The upgrade plan: pre-flight results, the policy, the batches and what each step does and is
//! expected to take. Built from [`Prepared`] (catalog side) and a [`Workloads`] (cluster side)
//! without any IO, so the same inputs always give the same plan, runbook and timeline.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::device_taints::{self, DeviceTaints};
use super::preflight::{BranchFacts, Check, Prepared};
use super::{
    BLUE, DRIVER_VERSION_LABEL, GREEN, MIG_CAPABLE_LABEL, PENDING_TAINT_EFFECT, PENDING_TAINT_KEY,
    PENDING_TAINT_VALUE, Timing, UPGRADE_DONE, UPGRADE_POOL_LABEL, UPGRADE_STATE_LABEL,
};
use crate::journal::Journal;
use crate::live::workloads::{LiveDriverCr, LiveNode, LivePod, PodRole, Workloads, selector_text};
use gpuctl_model::blueprint::provisioning::ProvisionerKind;
use gpuctl_model::blueprint::{Blueprint, IntOrString, NodePool, UpgradeStrategy};
use gpuctl_model::located::Severity;
use gpuctl_model::quantity::parse_duration_ms;
use gpuctl_pipeline::render::provisioning::drift_budgets;
use gpuctl_pipeline::render::{
    DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL, TENANT_LABEL, pool_driver_cr_name,
};

/// The upgrade policy in force, with where each number came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// Node label carrying the colour (`upgrades.blueGreen.colorLabel`).
    pub color_label: String,
    /// `upgrades.blueGreen.batch` as written.
    pub batch: String,
    /// Nodes per batch.
    pub batch_size: usize,
    /// Most pool nodes unavailable at once (cordoned or NotReady), whatever the reason.
    pub max_unavailable: usize,
    /// Where `max_unavailable` comes from.
    pub max_unavailable_from: String,
    /// `upgrades.blueGreen.drainTimeout` as written.
    pub drain_timeout: String,
    /// The same in seconds.
    pub drain_timeout_s: u64,
    /// `upgrades.blueGreen.waitForJobs`.
    pub wait_for_jobs: bool,
}

/// A node of the pool as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanNode {
    /// Name.
    pub name: String,
    /// Batch (1-based).
    pub batch: usize,
    /// Driver GPU Feature Discovery reports now.
    pub driver: Option<String>,
    /// Labels recorded to restore: `gpuctl.dev/driver`, the colour, MIG and device-plugin configs
    /// (`None`: absent, and removed again on rollback).
    pub recorded: BTreeMap<String, Option<String>>,
    /// MIG-capable (the MIG config state must be `success` again after the driver swap).
    pub mig_capable: bool,
    /// Cordoned before the upgrade (stays cordoned after it).
    pub unschedulable: bool,
    /// Ready now.
    pub ready: bool,
    /// The operator's upgrade state label now.
    pub upgrade_state: Option<String>,
}

/// A pod a drain affects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRef {
    /// `namespace/name`.
    pub pod: String,
    /// Node.
    pub node: String,
    /// GPU requests, `nvidia.com/gpu: 8`.
    pub gpus: String,
    /// Its controller, `Job/train-7`, or `bare pod`.
    pub owner: String,
    /// Queue and tenant, when known.
    pub queue: Option<String>,
    /// PDBs covering it.
    pub pdbs: Vec<String>,
    /// Termination grace period (seconds).
    pub grace_s: i64,
}

/// One batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanBatch {
    /// 1-based.
    pub index: usize,
    /// Nodes.
    pub nodes: Vec<String>,
    /// Pods evicted through the Eviction API.
    pub evict: Vec<PodRef>,
    /// Job pods waited for (`waitForJobs`).
    pub wait_for: Vec<PodRef>,
    /// GPU resources taken offline.
    pub gpus_offline: BTreeMap<String, u64>,
    /// GPU requests of the pods that leave.
    pub displaced: BTreeMap<String, u64>,
    /// Free GPU resources on the pool's other available nodes while the batch is out.
    pub spare: BTreeMap<String, u64>,
    /// Expected drain time (seconds; the drain timeout when jobs are waited for).
    pub drain_s: u64,
    /// Expected driver swap and validation time (seconds).
    pub upgrade_s: u64,
    /// Expected start, seconds from the start of the run.
    pub start_s: u64,
    /// Expected end.
    pub end_s: u64,
}

/// The plan of one pool's driver upgrade.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePlan {
    /// Blueprint name.
    pub blueprint: String,
    /// Blueprint file.
    pub file: String,
    /// Pool.
    pub pool: String,
    /// The pool's selector.
    pub selector: BTreeMap<String, String>,
    /// GPU Operator namespace (the journal and Lease live there).
    pub namespace: String,
    /// GPU model.
    pub gpu_model: String,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Driver the pool runs now.
    pub from_version: String,
    /// Target driver.
    pub to_version: String,
    /// CR that owns the pool's nodes now.
    pub blue_cr: String,
    /// CR the nodes move to.
    pub green_cr: String,
    /// The green CR exists already (from an earlier attempt).
    pub green_cr_exists: bool,
    /// The green CR's manifest (`None` when pre-flight failed).
    pub green_manifest: Option<Value>,
    /// Whether the blue CR is removed at the end (it served only this pool).
    pub remove_blue_cr: bool,
    /// Colour of the nodes now.
    pub blue_color: String,
    /// Colour of upgraded nodes.
    pub green_color: String,
    /// The policy.
    pub policy: Policy,
    /// Nodes in batch order.
    pub nodes: Vec<PlanNode>,
    /// Batches.
    pub batches: Vec<PlanBatch>,
    /// Pre-flight results (errors first).
    pub checks: Vec<Check>,
    /// Target branch facts.
    pub branch: Option<BranchFacts>,
    /// The blueprint edit to make once the upgrade is done.
    pub blueprint_change: String,
    /// Poll interval, validation timeout and per-node estimate (seconds).
    pub validate_timeout_s: u64,
    /// Planning estimate of one node's driver swap (seconds).
    pub node_upgrade_s: u64,
    /// Expected total (seconds).
    pub total_s: u64,
    /// DeviceTaintRules that take each node's GPUs out of service while it is moved (DRA pools).
    #[serde(skip_serializing_if = "is_default")]
    pub device_taints: DeviceTaints,
    /// Karpenter pools: the nodes are replaced through Karpenter's drift, not relabelled in batches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub karpenter: Option<DriftPlan>,
}

fn is_default(d: &DeviceTaints) -> bool {
    *d == DeviceTaints::default()
}

impl UpgradePlan {
    /// Number of error checks.
    pub fn errors(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.level == Severity::Error)
            .count()
    }

    /// The taint that steers new work to upgraded nodes, `key=value:effect`.
    pub fn pending_taint(&self) -> String {
        format!("{PENDING_TAINT_KEY}={PENDING_TAINT_VALUE}:{PENDING_TAINT_EFFECT}")
    }
}

/// `count` or `percent%` of `total`: percentages round down, and never below 1 unless zero is asked.
pub fn scale(v: &IntOrString, total: usize) -> Option<usize> {
    let n = match v {
        IntOrString::Int(i) => usize::try_from(*i).ok()?,
        IntOrString::String(s) => match s.strip_suffix('%') {
            Some(p) => {
                let p: usize = p.trim().parse().ok()?;
                if p == 0 { 0 } else { (total * p / 100).max(1) }
            }
            None => s.trim().parse().ok()?,
        },
    };
    Some(n.min(total))
}

/// The policy for a pool of `total` nodes.
pub fn policy(bp: &Blueprint, total: usize) -> Policy {
    let bg = bp.spec.upgrades.blue_green.clone().unwrap_or_else(|| {
        serde_json::from_value(serde_json::json!({})).expect("blue-green defaults")
    });
    let batch_size = scale(&bg.batch, total).unwrap_or(1).max(1);
    let mut max_unavailable = batch_size;
    let mut from = format!("upgrades.blueGreen.batch {} of {total} node(s)", bg.batch);
    if let Some(mu) = bp
        .spec
        .gpu_operator
        .driver
        .upgrade_policy
        .as_ref()
        .and_then(|p| p.max_unavailable.as_ref())
        && let Some(n) = scale(mu, total)
        && n < max_unavailable
    {
        max_unavailable = n;
        from = format!("gpuOperator.driver.upgradePolicy.maxUnavailable {mu} of {total} node(s)");
    }
    Policy {
        color_label: bg.color_label.clone(),
        batch: bg.batch.to_string(),
        batch_size: batch_size.min(max_unavailable.max(1)),
        max_unavailable,
        max_unavailable_from: from,
        drain_timeout: bg.drain_timeout.clone(),
        drain_timeout_s: parse_duration_ms(&bg.drain_timeout).unwrap_or(0) / 1000,
        wait_for_jobs: bg.wait_for_jobs,
    }
}

/// The green CR's name: what render names the pool's own CR once the blueprint declares `target`
/// (blue-green names carry the version), so after the upgrade and that blueprint edit `gpuctl
/// apply` writes the CR and the driver label the nodes already have. Never the blue CR's name:
/// pre-flight refuses a target the blueprint already declares, [`build`] refuses nodes already on
/// the target's CR, and the blue CR of a pool on its own CR is either versioned with another
/// version or `pool-<pool>` (named before versions were part of the name).
pub fn green_cr_name(pool: &str, target: &str) -> String {
    pool_driver_cr_name(pool, target, UpgradeStrategy::BlueGreen)
}

/// `pool-<pool>`: render's name for a pool's own CR before blue-green names carried the driver
/// version (and still its name with `strategy: rolling`, which ignores the version). Pools applied
/// then are on it; their upgrade moves them to the versioned name like any other.
fn legacy_cr_name(pool: &str) -> String {
    pool_driver_cr_name(pool, "", UpgradeStrategy::Rolling)
}

/// The queue and tenant of a pod, from Kueue's label or the tenant owning its namespace.
pub fn queue_of(pod: &LivePod, bp: &Blueprint) -> Option<String> {
    let tenant = bp
        .spec
        .tenants
        .iter()
        .find(|t| t.namespaces.contains(&pod.namespace))
        .or_else(|| {
            pod.labels
                .get(TENANT_LABEL)
                .and_then(|n| bp.spec.tenants.iter().find(|t| &t.name == n))
        });
    let lq = pod.labels.get(super::KUEUE_QUEUE_LABEL);
    match (lq, tenant) {
        (Some(lq), Some(t)) => Some(format!(
            "LocalQueue {}/{lq} -> {} (tenant {})",
            pod.namespace,
            t.queue.as_deref().unwrap_or("no queue"),
            t.name
        )),
        (Some(lq), None) => Some(format!("LocalQueue {}/{lq}", pod.namespace)),
        (None, Some(t)) => Some(match &t.queue {
            Some(q) => format!("{q} (tenant {})", t.name),
            None => format!("tenant {}", t.name),
        }),
        (None, None) => None,
    }
}

pub fn gpus_text(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn add(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// Builds the plan. `journal` is the pool's journal when one exists in the cluster.
pub fn build(
    prep: &Prepared,
    live: &Workloads,
    journal: Option<&Journal>,
    timing: &Timing,
) -> UpgradePlan {
    let bp = prep.blueprint();
    let pool = pool_of(prep);
    let policy = policy(bp, live.nodes.len().max(1));
    let mut checks = prep.checks.clone();
    check_journal(journal, &mut checks);

    // Nodes and the CR that owns them now.
    check_node_count(prep, live, &mut checks);
    let blue_cr = current_cr(prep, live, &mut checks);
    check_current_cr(prep, live, &blue_cr, &mut checks);
    let to_version = prep.target.to_string();
    let green_cr = green_cr_name(&pool.name, &to_version);
    check_not_on_green(prep, &blue_cr, &green_cr, &mut checks);
    let crs = driver_crs(prep, live, &blue_cr, &green_cr, &mut checks);
    check_node_drivers(live, &blue_cr, &mut checks);
    check_node_owners(live, &mut checks);
    let karpenter = drift_plan(prep, live, &blue_cr, &green_cr, &mut checks);

    let (blue_color, green_color) = colours(live, &policy, &mut checks);
    check_policy(&policy, &mut checks);
    let node_upgrade_s = timing.node_upgrade_estimate.as_secs();
    let (nodes, batches) = schedule(bp, live, &policy, node_upgrade_s, &mut checks);
    check_node_conditions(live, &mut checks);
    check_restore(&nodes, &mut checks);
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    // A Karpenter pool's nodes are replaced, never moved: no GPU is taken out of service.
    let device_taints = if karpenter.is_some() {
        DeviceTaints::default()
    } else {
        device_taints::decide(
            bp,
            gpuctl_model::profiles::Catalog::embedded(),
            pool,
            &names,
            live.device_taint_rule_api.as_deref(),
        )
    };
    if let Some(why) = &device_taints.fallback {
        checks.push(cluster(
            Severity::Info,
            format!("no DeviceTaintRule during the upgrade: {why}"),
        ));
    } else if device_taints.used() {
        checks.push(cluster(
            Severity::Info,
            format!(
                "each node's GPUs are taken out of service with a DeviceTaintRule ({}=upgrade-<node>:NoSchedule) before it is cordoned, and the rule is deleted once the node has validated",
                gpuctl_model::names::MAINTENANCE_TAINT_KEY
            ),
        ));
    }
    checks.sort_by_key(|c| c.level);
    let total_s = batches.last().map_or(0, |b| b.end_s);

    UpgradePlan {
        blueprint: bp.metadata.name.clone(),
        file: prep.validated.file().to_string(),
        pool: pool.name.clone(),
        selector: prep.node_patch().selector.clone(),
        namespace: bp.spec.gpu_operator.namespace.clone(),
        gpu_model: pool.gpu.model.clone(),
        gpus_per_node: pool.gpu.count,
        from_version: crs.from_version,
        to_version,
        blue_cr,
        green_cr: green_cr.clone(),
        green_cr_exists: crs.green_cr_exists,
        green_manifest: prep
            .green_manifest
            .clone()
            .map(|m| green_manifest(m, &green_cr, &pool.name)),
        remove_blue_cr: crs.remove_blue_cr,
        blue_color,
        green_color,
        policy,
        nodes,
        batches,
        checks,
        branch: prep.branch.clone(),
        blueprint_change: prep.blueprint_change.clone(),
        validate_timeout_s: timing.validate_timeout.as_secs(),
        node_upgrade_s,
        total_s,
        device_taints,
        karpenter,
    }
}

/// A Karpenter pool's upgrade: Karpenter's drift replaces the nodes once the NodePool's template
/// names the green CR (docs/upgrades.md, Karpenter pools).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftPlan {
    /// The pool's NodePool (named after the pool).
    pub node_pool: String,
    /// Its apiVersion.
    pub api_version: String,
    /// `nodes` of the NodePool's always-active budgets for `Drifted` (Karpenter takes the most
    /// restrictive); empty: nothing bounds how many nodes it replaces at once.
    pub budgets: Vec<String>,
    /// Pods whose `karpenter.sh/do-not-disrupt` keeps Karpenter from replacing their node while
    /// they run, `namespace/name on node`.
    pub do_not_disrupt: Vec<String>,
    /// The taint Karpenter puts on a node it takes away.
    pub disrupted_taint: String,
    /// The annotation on a NodeClaim with the hash of the template it was made from.
    pub hash_annotation: String,
    /// The label naming a node's NodePool.
    pub nodepool_label: String,
}

/// The drift plan of a Karpenter pool (`None` for every other pool: its nodes are relabelled in
/// batches), with what pre-flight says about it: how Karpenter paces it, a budget of 0 that would
/// never let it finish, pods that hold their nodes.
fn drift_plan(
    prep: &Prepared,
    live: &Workloads,
    blue_cr: &str,
    green_cr: &str,
    checks: &mut Vec<Check>,
) -> Option<DriftPlan> {
    let pool = pool_of(prep);
    if pool.provisioner.kind != ProvisionerKind::Karpenter {
        return None;
    }
    let catalog = gpuctl_model::profiles::Catalog::embedded();
    let k = &catalog.provisioning().karpenter;
    let budgets = drift_budgets(prep.blueprint(), pool, catalog);
    let p = &pool.name;
    let pace = if budgets.is_empty() {
        "with nothing bounding how many at once".to_string()
    } else {
        format!(
            "at most {} at a time (the NodePool's budgets for `{}`)",
            budgets.join(" and "),
            k.drifted_reason
        )
    };
    checks.push(
        Check::new(
            Severity::Info,
            "blueprint",
            format!(
                "pool `{p}` is provisioned by Karpenter, so its nodes are replaced, not relabelled: the upgrade applies NVIDIADriver `{green_cr}` and sets NodePool `{p}`'s template label `{DRIVER_LABEL}` to it; Karpenter sees every NodeClaim made from the old template as drifted and replaces it, {pace}: the replacement is launched and initialised first, then the old node is tainted `{}` and drained with evictions. Each replacement must validate on the new driver; `{blue_cr}` is deleted once no node uses it",
                k.disrupted_taint
            ),
        ),
    );
    if budgets.iter().any(|b| b == "0" || b == "0%") {
        checks.push(
            Check::new(
                Severity::Error,
                "blueprint",
                format!(
                    "NodePool `{p}` has a budget of 0 nodes for `{}`: Karpenter would never replace a node and the upgrade could not finish",
                    k.drifted_reason
                ),
            )
            .hint(format!(
                "give `spec.nodePools[{p}].provisioner.disruption.budgets` a budget for `{}` above 0 (or a `schedule` for the window the upgrade runs in), apply, and plan again",
                k.drifted_reason
            )),
        );
    } else if budgets.is_empty() {
        checks.push(
            Check::new(
                Severity::Warning,
                "blueprint",
                format!(
                    "no always-active budget of NodePool `{p}` covers `{}`: Karpenter may replace all of the pool's nodes at once",
                    k.drifted_reason
                ),
            )
            .hint(format!(
                "add `{{nodes: \"1\", reasons: [{}]}}` (or a percentage) to `spec.nodePools[{p}].provisioner.disruption.budgets` and apply before upgrading",
                k.drifted_reason
            )),
        );
    }
    let do_not_disrupt: Vec<String> = live
        .pods
        .iter()
        .filter(|pod| pod.do_not_disrupt && !pod.terminating)
        .map(|pod| format!("{} on {}", pod.id(), pod.node))
        .collect();
    if !do_not_disrupt.is_empty() {
        checks.push(
            cluster(
                Severity::Warning,
                format!(
                    "{} pod(s) carry `{}: \"true\"`, so Karpenter does not replace their node(s) while they run: {}",
                    do_not_disrupt.len(),
                    k.do_not_disrupt,
                    do_not_disrupt.join(", ")
                ),
            )
            .hint(
                "let them finish (the upgrade waits, and stops with their names if nothing moves for its drain and validation timeouts) or remove the annotation; `--resume` continues",
            ),
        );
    }
    Some(DriftPlan {
        node_pool: p.clone(),
        api_version: k.nodepool_api.clone(),
        budgets,
        do_not_disrupt,
        disrupted_taint: k.disrupted_taint.clone(),
        hash_annotation: k.nodepool_hash_annotation.clone(),
        nodepool_label: k.nodepool_label.clone(),
    })
}

/// The pool being upgraded.
fn pool_of(prep: &Prepared) -> &NodePool {
    &prep.blueprint().spec.node_pools[prep.pool_index]
}

/// A pre-flight result about the cluster's state.
fn cluster(level: Severity, msg: String) -> Check {
    Check::new(level, "cluster", msg)
}

/// Refuses to plan over an upgrade of the pool that is not finished.
fn check_journal(journal: Option<&Journal>, checks: &mut Vec<Check>) {
    if let Some(j) = journal
        && !j.phase.is_final()
    {
        checks.push(
            cluster(
                Severity::Error,
                format!(
                    "an upgrade of pool `{}` to {} is {} (journal {}/{})",
                    j.pool,
                    j.to_version,
                    j.phase.describe(),
                    j.namespace,
                    gpuctl_model::names::journal_name(&j.pool)
                ),
            )
            .hint(format!(
                "continue it with `gpuctl upgrade driver --resume --pool {0}`, or undo it with `gpuctl upgrade rollback --pool {0}`",
                j.pool
            )),
        );
    }
}

/// Compares the pool's node count with the blueprint's: none is an error, another number a warning.
fn check_node_count(prep: &Prepared, live: &Workloads, checks: &mut Vec<Check>) {
    let pool = pool_of(prep);
    let total = live.nodes.len();
    if total == 0 {
        checks.push(
            cluster(
                Severity::Error,
                format!(
                    "no node matches the selector of pool `{}` ({})",
                    pool.name,
                    selector_text(&prep.node_patch().selector)
                ),
            )
            .hint("check the pool's selector and the context (`--context`)"),
        );
    } else if total != pool.nodes as usize {
        checks.push(cluster(
            Severity::Warning,
            format!(
                "pool `{}` has {total} node(s), the blueprint expects {}",
                pool.name, pool.nodes
            ),
        ));
    }
}

/// The CR the pool's nodes name in `gpuctl.dev/driver` now (the blue CR): the declared one when
/// there is no node, the most common one (and an error) when they disagree, `(none)` unlabelled.
fn current_cr(prep: &Prepared, live: &Workloads, checks: &mut Vec<Check>) -> String {
    let mut by_cr: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for n in &live.nodes {
        let cr = n.label(DRIVER_LABEL).unwrap_or("(none)").to_string();
        by_cr.entry(cr).or_default().push(&n.name);
    }
    match by_cr.len() {
        0 => prep.declared_cr(),
        1 => by_cr.keys().next().cloned().unwrap_or_default(),
        _ => {
            checks.push(
                cluster(
                    Severity::Error,
                    format!(
                        "the nodes of pool `{}` carry different `{DRIVER_LABEL}` values: {}",
                        pool_of(prep).name,
                        by_cr
                            .iter()
                            .map(|(cr, ns)| format!("{cr} ({} node(s))", ns.len()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .hint("a move is half done: `gpuctl upgrade status` shows any upgrade in progress; otherwise `gpuctl apply` the blueprint to put every node back on one CR"),
            );
            by_cr
                .iter()
                .max_by_key(|(_, ns)| ns.len())
                .map(|(cr, _)| cr.clone())
                .unwrap_or_default()
        }
    }
}

/// Checks the blue CR against the blueprint: the nodes must name one, and a CR other than the
/// one render declares is worth a warning.
fn check_current_cr(prep: &Prepared, live: &Workloads, blue_cr: &str, checks: &mut Vec<Check>) {
    let pool = pool_of(prep);
    if blue_cr == "(none)" {
        checks.push(
            cluster(
                Severity::Error,
                format!(
                    "the nodes of pool `{}` carry no `{DRIVER_LABEL}` label",
                    pool.name
                ),
            )
            .hint("`gpuctl apply` the blueprint first, so each pool's nodes name their NVIDIADriver CR"),
        );
    } else if blue_cr != prep.declared_cr() && !live.nodes.is_empty() {
        let why = if pool.driver.is_some() && blue_cr == legacy_cr_name(&pool.name) {
            " (the name before blue-green driver CRs carried their version; the upgrade moves the pool to the versioned name)"
        } else {
            ""
        };
        checks.push(cluster(
            Severity::Warning,
            format!(
                "the pool's nodes are on NVIDIADriver `{blue_cr}`, the blueprint renders `{}`{why}",
                prep.declared_cr()
            ),
        ));
    }
}

/// Refuses to move nodes that are on the target's CR already.
fn check_not_on_green(prep: &Prepared, blue_cr: &str, green_cr: &str, checks: &mut Vec<Check>) {
    if blue_cr == green_cr {
        checks.push(
            cluster(
                Severity::Error,
                format!(
                    "the nodes of pool `{}` are on NVIDIADriver `{green_cr}` already, the CR of driver {}",
                    pool_of(prep).name,
                    prep.target
                ),
            )
            .hint(format!(
                "an earlier upgrade moved them there: make the blueprint say so ({}) and `gpuctl plan` again instead of upgrading",
                prep.blueprint_change
            )),
        );
    }
}

/// What the cluster's NVIDIADriver CRs say about the move.
struct CrFacts {
    /// Driver the pool runs now: the blue CR's version, else the declared one.
    from_version: String,
    /// The green CR exists already.
    green_cr_exists: bool,
    /// The blue CR is removed at the end.
    remove_blue_cr: bool,
}

/// Reads the blue and green CRs: the API must be served and the blue CR exist; a green CR that
/// exists already must be an earlier attempt of this pool's upgrade.
fn driver_crs(
    prep: &Prepared,
    live: &Workloads,
    blue_cr: &str,
    green_cr: &str,
    checks: &mut Vec<Check>,
) -> CrFacts {
    let mut facts = CrFacts {
        from_version: prep.declared.to_string(),
        green_cr_exists: false,
        remove_blue_cr: false,
    };
    let Some(crs) = &live.driver_crs else {
        checks.push(
            cluster(
                Severity::Error,
                "the cluster does not serve nvidia.com/v1alpha1 NVIDIADriver".to_string(),
            )
            .hint("install GPU Operator v24.9 or newer with `driver.nvidiaDriverCRD.enabled=true`"),
        );
        return facts;
    };
    match live.driver_cr(blue_cr) {
        Some(b) => {
            facts.from_version = b.version.clone();
            facts.remove_blue_cr = removes_blue_cr(prep, b, blue_cr);
        }
        None if blue_cr != "(none)" && !live.nodes.is_empty() => checks.push(
            cluster(
                Severity::Error,
                format!("the pool's nodes name NVIDIADriver `{blue_cr}`, which does not exist"),
            )
            .hint("`gpuctl apply` the blueprint first"),
        ),
        None => {}
    }
    if let Some(g) = crs.iter().find(|c| c.name == green_cr) {
        facts.green_cr_exists = true;
        check_existing_green(prep, g, checks);
    }
    facts
}

/// Whether the blue CR `b` is removed at the end: only when it is this pool's own CR (no other
/// pool, not the default), as other pools may share a CR. The pool's own CR is the one render
/// names for it, or `pool-<pool>`, its name before blue-green names carried the version (still
/// render's name with `strategy: rolling`).
fn removes_blue_cr(prep: &Prepared, b: &LiveDriverCr, blue_cr: &str) -> bool {
    let pool = pool_of(prep);
    let own = pool.driver.is_some() && blue_cr == prep.declared_cr()
        || blue_cr == legacy_cr_name(&pool.name);
    !b.default && b.node_selector.get(DRIVER_LABEL).map(String::as_str) == Some(blue_cr) && own
        || b.labels.get(UPGRADE_POOL_LABEL) == Some(&pool.name)
}

/// Checks a green CR that exists already: an earlier attempt of this upgrade, else in the way.
fn check_existing_green(prep: &Prepared, g: &LiveDriverCr, checks: &mut Vec<Check>) {
    let pool = &pool_of(prep).name;
    let green_cr = &g.name;
    let to_version = prep.target.to_string();
    if g.labels.get(UPGRADE_POOL_LABEL) != Some(pool) {
        checks.push(
            cluster(
                Severity::Error,
                format!("NVIDIADriver `{green_cr}` exists already and was not created by an upgrade of pool `{pool}`"),
            )
            .hint(format!("if no node uses it, delete it (`kubectl delete nvidiadriver {green_cr}`) and plan again")),
        );
    } else if g.version != to_version {
        checks.push(cluster(
            Severity::Warning,
            format!("NVIDIADriver `{green_cr}` from an earlier attempt carries {}; it is updated to {to_version}", g.version),
        ));
    }
}

/// Warns about nodes that do not run the blue CR's version.
fn check_node_drivers(live: &Workloads, blue_cr: &str, checks: &mut Vec<Check>) {
    let Some(v) = live.driver_cr(blue_cr).map(|c| c.version.clone()) else {
        return;
    };
    let off: Vec<&str> = live
        .nodes
        .iter()
        .filter(|n| n.label(DRIVER_VERSION_LABEL).is_some_and(|d| d != v))
        .map(|n| n.name.as_str())
        .collect();
    if !off.is_empty() {
        checks.push(cluster(
            Severity::Warning,
            format!(
                "{} node(s) do not run {v}, the version of NVIDIADriver `{blue_cr}`: {}",
                off.len(),
                off.join(", ")
            ),
        ).hint("the operator has not finished an earlier change there; rollback returns them to the blue CR, whatever they ran"));
    }
}

/// Checks each node is left to exactly one CR and not in the middle of an operator upgrade.
fn check_node_owners(live: &Workloads, checks: &mut Vec<Check>) {
    for n in &live.nodes {
        if let Err(crs) = live.owner_of(&n.labels) {
            checks.push(
                cluster(
                    Severity::Error,
                    format!(
                        "node {} is selected by several NVIDIADriver CRs ({}): the operator leaves it alone",
                        n.name,
                        crs.join(", ")
                    ),
                )
                .hint("make the CRs' nodeSelectors disjoint (gpuctl's own CRs select only `gpuctl.dev/driver`)"),
            );
        }
        if let Some(s) = n.label(UPGRADE_STATE_LABEL)
            && s != UPGRADE_DONE
            && !s.is_empty()
        {
            checks.push(
                cluster(
                    Severity::Warning,
                    format!(
                        "the operator's driver upgrade is in state `{s}` on node {}",
                        n.name
                    ),
                )
                .hint("let the operator finish (or fix the node) before moving it"),
            );
        }
    }
}

/// The nodes' colour now (the most common one) and the colour they move to.
fn colours(live: &Workloads, policy: &Policy, checks: &mut Vec<Check>) -> (String, String) {
    let colors: BTreeMap<&str, usize> = live.nodes.iter().fold(BTreeMap::new(), |mut m, n| {
        if let Some(c) = n.label(&policy.color_label) {
            *m.entry(c).or_default() += 1;
        }
        m
    });
    let blue_color = colors
        .iter()
        .max_by_key(|(_, n)| **n)
        .map_or(BLUE.to_string(), |(c, _)| (*c).to_string());
    let green_color = if blue_color == GREEN { BLUE } else { GREEN }.to_string();
    if colors.len() > 1 {
        checks.push(cluster(
            Severity::Warning,
            format!(
                "the pool's nodes carry several colours ({}): all become `{green_color}`",
                colors
                    .iter()
                    .map(|(c, n)| format!("{c}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    (blue_color, green_color)
}

/// Refuses a policy that lets no node go.
fn check_policy(policy: &Policy, checks: &mut Vec<Check>) {
    if policy.max_unavailable == 0 {
        checks.push(
            cluster(
                Severity::Error,
                format!(
                    "no node may be unavailable ({}): nothing can be drained",
                    policy.max_unavailable_from
                ),
            )
            .hint("allow at least one node (`upgradePolicy.maxUnavailable`)"),
        );
    }
}

/// The nodes in batches: unavailable nodes first (they cost no extra availability), then the
/// emptiest nodes, so the first batch is the cheapest canary; names break ties.
fn batch_groups<'a>(live: &'a Workloads, policy: &Policy) -> Vec<Vec<&'a LiveNode>> {
    let gpu_pods = |n: &LiveNode| {
        live.pods
            .iter()
            .filter(|p| p.node == n.name && p.uses_gpus() && !p.finished())
            .count()
    };
    let mut order: Vec<&LiveNode> = live.nodes.iter().collect();
    order.sort_by_key(|n| (n.available(), gpu_pods(n), n.name.clone()));
    let size = policy.batch_size.max(1);
    order.chunks(size).map(<[&LiveNode]>::to_vec).collect()
}

/// The planned nodes and the batches, one after the other from the start of the run, with the
/// checks each batch raises.
fn schedule(
    bp: &Blueprint,
    live: &Workloads,
    policy: &Policy,
    node_upgrade_s: u64,
    checks: &mut Vec<Check>,
) -> (Vec<PlanNode>, Vec<PlanBatch>) {
    let mut nodes = Vec::new();
    let mut batches = Vec::new();
    let mut clock = 0u64;
    for (bi, group) in batch_groups(live, policy).iter().enumerate() {
        let index = bi + 1;
        check_unavailable(index, group, live, policy, checks);
        nodes.extend(group.iter().map(|n| plan_node(n, index, policy)));
        let drain = drain_pods(group, bp, live, policy);
        let spare = spare(group, live);
        check_displaced(index, &drain.displaced, &spare, checks);
        check_budgets(index, &drain, live, policy, checks);
        let drain_s = drain.expected_s(policy);
        let start_s = clock;
        let end_s = start_s + drain_s + node_upgrade_s;
        clock = end_s;
        batches.push(PlanBatch {
            index,
            nodes: group.iter().map(|n| n.name.clone()).collect(),
            evict: drain.evict,
            wait_for: drain.wait_for,
            gpus_offline: gpus_of(group),
            displaced: drain.displaced,
            spare,
            drain_s,
            upgrade_s: node_upgrade_s,
            start_s,
            end_s,
        });
    }
    (nodes, batches)
}

/// Refuses a batch that would leave more pool nodes unavailable than the policy allows.
fn check_unavailable(
    index: usize,
    group: &[&LiveNode],
    live: &Workloads,
    policy: &Policy,
    checks: &mut Vec<Check>,
) {
    let in_batch = |name: &str| group.iter().any(|n| n.name == name);
    let others_unavailable: Vec<&str> = live
        .nodes
        .iter()
        .filter(|n| !n.available() && !in_batch(&n.name))
        .map(|n| n.name.as_str())
        .collect();
    if others_unavailable.len() + group.len() > policy.max_unavailable && policy.max_unavailable > 0
    {
        checks.push(
            cluster(
                Severity::Error,
                format!(
                    "batch {index} would leave {} node(s) unavailable ({} already are: {}), more than the {} allowed",
                    others_unavailable.len() + group.len(),
                    others_unavailable.len(),
                    others_unavailable.join(", "),
                    policy.max_unavailable
                ),
            )
            .hint("bring those nodes back (uncordon, repair) or raise the batch size"),
        );
    }
}

/// A node as planned in batch `index`, with the labels recorded to restore.
fn plan_node(n: &LiveNode, index: usize, policy: &Policy) -> PlanNode {
    let recorded: BTreeMap<String, Option<String>> = [
        DRIVER_LABEL.to_string(),
        policy.color_label.clone(),
        MIG_CONFIG_LABEL.to_string(),
        DEVICE_PLUGIN_CONFIG_LABEL.to_string(),
    ]
    .into_iter()
    .map(|k| {
        let v = n.label(&k).map(str::to_string);
        (k, v)
    })
    .collect();
    PlanNode {
        name: n.name.clone(),
        batch: index,
        driver: n.label(DRIVER_VERSION_LABEL).map(str::to_string),
        recorded,
        mig_capable: n.label(MIG_CAPABLE_LABEL) == Some("true"),
        unschedulable: n.unschedulable,
        ready: n.ready,
        upgrade_state: n.label(UPGRADE_STATE_LABEL).map(str::to_string),
    }
}

/// The GPU pods a batch's drain moves.
struct Drain {
    /// Pods evicted through the Eviction API.
    evict: Vec<PodRef>,
    /// Job pods waited for (`waitForJobs`).
    wait_for: Vec<PodRef>,
    /// GPU requests of the pods that leave.
    displaced: BTreeMap<String, u64>,
}

impl Drain {
    /// Expected drain time (seconds): the drain timeout when jobs are waited for, else the
    /// longest grace period of the evicted pods.
    fn expected_s(&self, policy: &Policy) -> u64 {
        if !self.wait_for.is_empty() {
            policy.drain_timeout_s
        } else {
            self.evict
                .iter()
                .map(|p| u64::try_from(p.grace_s).unwrap_or(0))
                .max()
                .unwrap_or(0)
        }
    }
}

/// The running GPU pods on a batch's nodes, sorted into evicted and waited for by their role.
fn drain_pods(group: &[&LiveNode], bp: &Blueprint, live: &Workloads, policy: &Policy) -> Drain {
    let mut drain = Drain {
        evict: Vec::new(),
        wait_for: Vec::new(),
        displaced: BTreeMap::new(),
    };
    for n in group {
        for p in live.pods.iter().filter(|p| p.node == n.name) {
            if !p.uses_gpus() || p.finished() {
                continue;
            }
            let r = pod_ref(p, bp, live);
            match p.role {
                PodRole::Job if policy.wait_for_jobs => {
                    add(&mut drain.displaced, &p.gpus);
                    drain.wait_for.push(r);
                }
                PodRole::Job | PodRole::Service => {
                    add(&mut drain.displaced, &p.gpus);
                    drain.evict.push(r);
                }
                PodRole::DaemonSet | PodRole::Mirror | PodRole::Skipped => {}
            }
        }
    }
    drain
}

/// A pod as the plan shows it: GPUs, owner, queue and the PodDisruptionBudgets covering it.
fn pod_ref(p: &LivePod, bp: &Blueprint, live: &Workloads) -> PodRef {
    PodRef {
        pod: p.id(),
        node: p.node.clone(),
        gpus: gpus_text(&p.gpus),
        owner: p.owner.clone().unwrap_or_else(|| "bare pod".into()),
        queue: queue_of(p, bp),
        pdbs: live
            .pdbs
            .iter()
            .filter(|d| d.covers(p))
            .map(|d| {
                format!(
                    "{} ({}, {} disruption(s) allowed now)",
                    d.id(),
                    d.rule,
                    d.disruptions_allowed
                )
            })
            .collect(),
        grace_s: p.grace_seconds,
    }
}

/// GPU resources of `nodes` together.
fn gpus_of(nodes: &[&LiveNode]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for n in nodes {
        add(&mut m, &n.gpus);
    }
    m
}

/// Spare: allocatable minus running requests on the pool's other available nodes.
fn spare(group: &[&LiveNode], live: &Workloads) -> BTreeMap<String, u64> {
    let mut spare = BTreeMap::new();
    for n in live
        .nodes
        .iter()
        .filter(|n| n.available() && !group.iter().any(|g| g.name == n.name))
    {
        let mut free = n.gpus.clone();
        for p in live
            .pods
            .iter()
            .filter(|p| p.node == n.name && !p.finished())
        {
            for (k, v) in &p.gpus {
                if let Some(f) = free.get_mut(k) {
                    *f = f.saturating_sub(*v);
                }
            }
        }
        add(&mut spare, &free);
    }
    spare
}

/// Warns when a batch displaces more GPUs of a resource than the rest of the pool has free.
fn check_displaced(
    index: usize,
    displaced: &BTreeMap<String, u64>,
    spare: &BTreeMap<String, u64>,
    checks: &mut Vec<Check>,
) {
    for (res, need) in displaced {
        let have = spare.get(res).copied().unwrap_or(0);
        if *need > have {
            checks.push(cluster(
                Severity::Warning,
                format!(
                    "batch {index} displaces {need} {res} of running work, but only {have} are free on the pool's other nodes: the rest waits (Pending or queued) until the batch is back"
                ),
            ).hint("run the upgrade when the pool is quieter, or accept the wait"));
        }
    }
}

/// Warns about each PodDisruptionBudget that allows no disruption now and covers a drained pod.
fn check_budgets(
    index: usize,
    drain: &Drain,
    live: &Workloads,
    policy: &Policy,
    checks: &mut Vec<Check>,
) {
    for r in drain.evict.iter().chain(&drain.wait_for) {
        for pdb in live.pdbs.iter().filter(|d| {
            d.disruptions_allowed == 0 && r.pod.starts_with(&format!("{}/", d.namespace))
        }) {
            let covered = live.pods.iter().any(|p| p.id() == r.pod && pdb.covers(p));
            if covered {
                checks.push(cluster(
                    Severity::Warning,
                    format!(
                        "PodDisruptionBudget {} ({}) allows no disruption now, and covers {} on {} (batch {index})",
                        pdb.id(), pdb.rule, r.pod, r.node
                    ),
                ).hint(format!(
                    "the drain waits until it allows one (up to drainTimeout {}); scale the workload up or relax the budget first",
                    policy.drain_timeout
                )));
            }
        }
    }
}

/// Notes nodes cordoned already (they stay so) and warns about nodes that are not Ready.
fn check_node_conditions(live: &Workloads, checks: &mut Vec<Check>) {
    let cordoned: Vec<&str> = live
        .nodes
        .iter()
        .filter(|n| n.unschedulable)
        .map(|n| n.name.as_str())
        .collect();
    if !cordoned.is_empty() {
        checks.push(cluster(
            Severity::Info,
            format!(
                "{} node(s) are cordoned already and stay cordoned afterwards: {}",
                cordoned.len(),
                cordoned.join(", ")
            ),
        ));
    }
    let not_ready: Vec<&str> = live
        .nodes
        .iter()
        .filter(|n| !n.ready)
        .map(|n| n.name.as_str())
        .collect();
    if !not_ready.is_empty() {
        checks.push(
            cluster(
                Severity::Warning,
                format!(
                    "{} node(s) are not Ready: {} (they go first; a node that does not come back stops the rollout)",
                    not_ready.len(),
                    not_ready.join(", ")
                ),
            )
            .hint("repair them first if you can"),
        );
    }
}

/// Notes the MIG and device-plugin configs recorded to restore after the driver swap.
fn check_restore(nodes: &[PlanNode], checks: &mut Vec<Check>) {
    let restore: BTreeMap<String, usize> = nodes.iter().fold(BTreeMap::new(), |mut m, n| {
        for (k, v) in &n.recorded {
            if (k == MIG_CONFIG_LABEL || k == DEVICE_PLUGIN_CONFIG_LABEL)
                && let Some(v) = v
            {
                *m.entry(format!("{k}={v}")).or_default() += 1;
            }
        }
        m
    });
    if !restore.is_empty() {
        checks.push(cluster(
            Severity::Info,
            format!(
                "recorded to restore after the driver swap: {}",
                restore
                    .iter()
                    .map(|(l, n)| format!("{l} ({n} node(s))"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
}

/// Render's CR for the target, named `name` and selecting it, labelled as this upgrade's.
fn green_manifest(mut m: Value, name: &str, pool: &str) -> Value {
    m["metadata"]["name"] = Value::String(name.to_string());
    if let Some(labels) = m["metadata"]["labels"].as_object_mut() {
        labels.insert(UPGRADE_POOL_LABEL.into(), Value::String(pool.to_string()));
    } else {
        m["metadata"]["labels"] = serde_json::json!({ UPGRADE_POOL_LABEL: pool });
    }
    m["spec"]["nodeSelector"] = serde_json::json!({ DRIVER_LABEL: name });
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_down_but_never_to_zero() {
        let pct = |s: &str| IntOrString::String(s.into());
        assert_eq!(scale(&pct("25%"), 8), Some(2));
        assert_eq!(scale(&pct("25%"), 16), Some(4));
        assert_eq!(scale(&pct("25%"), 3), Some(1));
        assert_eq!(scale(&pct("0%"), 8), Some(0));
        assert_eq!(scale(&IntOrString::Int(20), 8), Some(8));
        assert_eq!(scale(&pct("3"), 8), Some(3));
        assert_eq!(scale(&pct("x"), 8), None);
    }

    #[test]
    fn green_never_takes_the_blue_name() {
        // Green is render's name for the pool on the target: from the default CR, from a legacy
        // `pool-<pool>` and from the versioned CR of the declared driver alike.
        assert_eq!(green_cr_name("a", "595.91.07"), "pool-a-595-91-07");
        assert_eq!(
            green_cr_name("a", "595.91.07"),
            pool_driver_cr_name("a", "595.91.07", UpgradeStrategy::BlueGreen)
        );
        for blue in ["cluster-default", "pool-a", "pool-a-580-173-02"] {
            for target in ["595.91.07", "610.57.04"] {
                assert_ne!(green_cr_name("a", target), blue, "{blue} -> {target}");
            }
        }
        assert_eq!(legacy_cr_name("a"), "pool-a");
        assert_ne!(
            green_cr_name("a", "595.91.07"),
            green_cr_name("a", "610.57.04")
        );
    }
}
