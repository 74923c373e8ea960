//! Driver upgrades as text: the upgrade plan (`gpuctl upgrade driver`) and where recorded upgrades
//! are (`gpuctl upgrade status`).

use std::fmt::Write as _;
use std::time::Duration;

use gpuctl_pipeline::render::DRIVER_LABEL;
use gpuctl_plan::journal::{Journal, JournalPhase, LeaseInfo, NodeState};
use gpuctl_plan::upgrade::schedule::{DriftPlan, PlanBatch, UpgradePlan, gpus_text};
use gpuctl_plan::upgrade::{UPGRADE_DONE, human_duration};

/// The plan as text for a terminal or a log, ending with what happens next: the command to run
/// it, or (`executing`) that it runs.
pub fn plan(plan: &UpgradePlan, executing: bool) -> String {
    let mut s = header(plan);
    s.push_str(&policy(plan));
    s.push('\n');
    s.push_str(&preflight(plan));
    s.push('\n');
    s.push_str("Steps:\n");
    if let Some(k) = &plan.karpenter {
        s.push_str(&drift_steps(plan, k));
    } else {
        s.push_str(&prepare_step(plan));
        for b in &plan.batches {
            s.push_str(&batch_step(plan, b));
        }
    }
    s.push_str(&finish_step(plan));
    s.push('\n');
    s.push_str(&next_steps(plan, executing));
    s
}

/// The title, the versions and CRs, and the nodes and batches.
fn header(plan: &UpgradePlan) -> String {
    let mut s = String::new();
    let p = &plan.policy;
    let _ = writeln!(
        s,
        "Driver upgrade plan: pool {} of blueprint {} ({})",
        plan.pool, plan.blueprint, plan.file
    );
    let _ = writeln!(
        s,
        "  {} (NVIDIADriver {}) -> {} (NVIDIADriver {}{})",
        plan.from_version,
        plan.blue_cr,
        plan.to_version,
        plan.green_cr,
        if plan.green_cr_exists {
            ", exists"
        } else {
            ", created by the upgrade"
        }
    );
    if let Some(k) = &plan.karpenter {
        let _ = writeln!(
            s,
            "  {} node(s) of {} x {}, replaced through Karpenter's drift of NodePool {}",
            plan.nodes.len(),
            plan.gpus_per_node,
            plan.gpu_model,
            k.node_pool
        );
        return s;
    }
    let _ = writeln!(
        s,
        "  {} node(s) of {} x {} in {} batch(es) of up to {}; at most {} node(s) unavailable ({})",
        plan.nodes.len(),
        plan.gpus_per_node,
        plan.gpu_model,
        plan.batches.len(),
        p.batch_size,
        p.max_unavailable,
        p.max_unavailable_from
    );
    s
}

/// How nodes are drained and new work steered, and the expected duration.
fn policy(plan: &UpgradePlan) -> String {
    let mut s = String::new();
    if plan.karpenter.is_some() {
        // Karpenter drains and paces; how long it takes is its budgets' and the nodes' launch time.
        return s;
    }
    let p = &plan.policy;
    let _ = writeln!(
        s,
        "  drain: GPU pods through the Eviction API (PodDisruptionBudgets honoured){}, up to {} per batch",
        if p.wait_for_jobs {
            "; running jobs are waited for, not evicted"
        } else {
            ""
        },
        p.drain_timeout
    );
    let _ = writeln!(
        s,
        "  steering: a batch is cordoned until it validates; nodes still on the old driver carry {} so new work prefers upgraded ones; colour {} {} -> {}",
        plan.pending_taint(),
        p.color_label,
        plan.blue_color,
        plan.green_color
    );
    let bounded = plan.batches.iter().any(|b| !b.wait_for.is_empty());
    let _ = writeln!(
        s,
        "  expected duration: {}~{}{}",
        if bounded { "up to " } else { "" },
        human_duration(Duration::from_secs(plan.total_s)),
        if bounded {
            " (batches that wait for jobs are counted at the drain timeout)"
        } else {
            ""
        }
    );
    s
}

/// The pre-flight results, each with its hint.
fn preflight(plan: &UpgradePlan) -> String {
    let mut s = String::from("Pre-flight:\n");
    if plan.checks.is_empty() {
        let _ = writeln!(s, "  ok        nothing to report");
    }
    for c in &plan.checks {
        let rule = c
            .rule
            .as_deref()
            .map(|r| format!("{r} "))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  {:<9} {rule}{} [{}]",
            c.level.to_string(),
            c.message,
            c.source
        );
        if let Some(h) = &c.hint {
            let _ = writeln!(s, "            -> {h}");
        }
    }
    s
}

/// Step 0: the green CR, the colour and the steering taint.
fn prepare_step(plan: &UpgradePlan) -> String {
    format!(
        "  0. prepare: {} NVIDIADriver {} ({}, selects {DRIVER_LABEL}={}); label the pool's nodes {}={}; taint them {}\n",
        green_cr_verb(plan),
        plan.green_cr,
        plan.to_version,
        plan.green_cr,
        plan.policy.color_label,
        plan.blue_color,
        plan.pending_taint()
    )
}

/// What step 0 does to the green CR.
fn green_cr_verb(plan: &UpgradePlan) -> &'static str {
    if plan.green_cr_exists {
        "update"
    } else {
        "create"
    }
}

/// A Karpenter pool's steps: the green CR, the NodePool's template, Karpenter's drift.
fn drift_steps(plan: &UpgradePlan, k: &DriftPlan) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  0. prepare: {} NVIDIADriver {} ({}, selects {DRIVER_LABEL}={})",
        green_cr_verb(plan),
        plan.green_cr,
        plan.to_version,
        plan.green_cr
    );
    let _ = writeln!(
        s,
        "  1. NodePool {}: template label {DRIVER_LABEL}={} (no node is relabelled)",
        k.node_pool, plan.green_cr
    );
    let _ = writeln!(
        s,
        "  2. Karpenter replaces the {} node(s) made from the old template (drift), {}; each new node is validated: state {UPGRADE_DONE}, driver {}, MIG config success, validator Ready (up to {})",
        plan.nodes.len(),
        if k.budgets.is_empty() {
            "with no budget bounding how many at once".to_string()
        } else {
            format!("at most {} at a time", k.budgets.join(" and "))
        },
        plan.to_version,
        human_duration(Duration::from_secs(plan.validate_timeout_s))
    );
    s
}

/// One batch's step: its nodes and timing, the drain, the move and the validation.
fn batch_step(plan: &UpgradePlan, b: &PlanBatch) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {}. batch {}/{}: {} ({} ~{}, from +{}{})",
        b.index,
        b.index,
        plan.batches.len(),
        b.nodes.join(", "),
        if b.wait_for.is_empty() {
            "expected"
        } else {
            "up to"
        },
        human_duration(Duration::from_secs(b.end_s - b.start_s)),
        human_duration(Duration::from_secs(b.start_s)),
        if b.wait_for.is_empty() {
            ""
        } else {
            "; waits for running jobs"
        }
    );
    let _ = writeln!(
        s,
        "       cordon; GPU offline: {}",
        gpus_text(&b.gpus_offline)
    );
    s.push_str(&drain(b));
    let _ = writeln!(
        s,
        "       move to {} ({DRIVER_LABEL}={}, {}={}); validate: state {UPGRADE_DONE}, driver {}, MIG config success, validator Ready (up to {})",
        plan.green_cr,
        plan.green_cr,
        plan.policy.color_label,
        plan.green_color,
        plan.to_version,
        human_duration(Duration::from_secs(plan.validate_timeout_s))
    );
    let _ = writeln!(
        s,
        "       restore recorded labels; uncordon; remove the steering taint"
    );
    s
}

/// A batch's drain: the job pods waited for, the pods evicted, and the GPUs they take along.
fn drain(b: &PlanBatch) -> String {
    let mut s = String::new();
    for w in &b.wait_for {
        let _ = writeln!(
            s,
            "       wait for job pod {} on {} ({}; {})",
            w.pod,
            w.node,
            w.gpus,
            w.queue.as_deref().unwrap_or("no queue")
        );
    }
    for e in &b.evict {
        let _ = writeln!(
            s,
            "       evict {} on {} ({}; {}; {}{})",
            e.pod,
            e.node,
            e.gpus,
            e.owner,
            e.queue.as_deref().unwrap_or("no queue"),
            if e.pdbs.is_empty() {
                String::new()
            } else {
                format!("; PDB {}", e.pdbs.join(", "))
            }
        );
    }
    if b.wait_for.is_empty() && b.evict.is_empty() {
        let _ = writeln!(s, "       no GPU pods to drain");
    } else {
        let _ = writeln!(
            s,
            "       displaced: {}; free elsewhere in the pool: {}",
            gpus_text(&b.displaced),
            gpus_text(&b.spare)
        );
    }
    s
}

/// The last step: the blue CR deleted or kept, then the blueprint edit.
fn finish_step(plan: &UpgradePlan) -> String {
    format!(
        "  {}. finish: {}then {}\n",
        if plan.karpenter.is_some() {
            3
        } else {
            plan.batches.len() + 1
        },
        if plan.remove_blue_cr {
            format!(
                "delete NVIDIADriver {} (no node left on it); ",
                plan.blue_cr
            )
        } else {
            format!(
                "keep NVIDIADriver {} (it serves other nodes); ",
                plan.blue_cr
            )
        },
        plan.blueprint_change
    )
}

/// What happens next: fix the errors, the run that follows, or the command that runs it.
fn next_steps(plan: &UpgradePlan, executing: bool) -> String {
    if plan.errors() > 0 {
        format!(
            "{} error(s): fix them and plan again; nothing was changed.\n",
            plan.errors()
        )
    } else if executing {
        format!(
            "Executing; progress follows. Ctrl-C stops cleanly; `gpuctl upgrade driver --resume --pool {}` continues.\n",
            plan.pool
        )
    } else {
        format!(
            "Nothing was changed. Run it with: gpuctl upgrade driver {} --pool {} --to {} --execute\n",
            gpuctl_model::input::as_argument(&plan.file),
            plan.pool,
            plan.to_version
        )
    }
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
pub fn status(journals: &[Journal], leases: &[Option<LeaseInfo>]) -> String {
    if journals.is_empty() {
        return "No driver upgrade is recorded in this cluster.\n".into();
    }
    journals
        .iter()
        .zip(leases)
        .map(|(j, l)| journal_status(j, l.as_ref()))
        .collect()
}

/// One pool's upgrade: what moves where, who holds the lease, the batches, the last events and
/// what to do next.
fn journal_status(j: &Journal, lease: Option<&LeaseInfo>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "pool {} (blueprint {}, journal {}/{}): {}, step {}",
        j.pool,
        j.blueprint,
        j.namespace,
        gpuctl_model::names::journal_name(&j.pool),
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
    let _ = writeln!(s, "  lease: {}", lease_text(lease));
    let _ = writeln!(s, "  {}", j.where_it_is());
    if let Some(k) = &j.karpenter {
        let _ = writeln!(
            s,
            "  NodePool {}: its template names {}; Karpenter's drift replaces the nodes",
            k.node_pool, k.template_cr
        );
        for (n, r) in &j.nodes {
            let _ = writeln!(s, "    {n}: {}", r.state.name());
        }
    }
    for (i, nodes) in j
        .batches
        .iter()
        .enumerate()
        .filter(|_| j.karpenter.is_none())
    {
        let _ = writeln!(
            s,
            "  batch {}: {:<11} {}",
            i + 1,
            batch_state(j, nodes),
            nodes_text(j, nodes)
        );
    }
    let recent: Vec<_> = j.events.iter().rev().take(5).collect();
    if !recent.is_empty() {
        let _ = writeln!(s, "  last events:");
        for e in recent.iter().rev() {
            let _ = writeln!(s, "    [{}] {} {}", e.step, e.at, e.message);
        }
    }
    let _ = writeln!(s, "  {}", next_step(j));
    s
}

fn lease_text(lease: Option<&LeaseInfo>) -> String {
    match lease {
        Some(l) if l.live() => format!(
            "held by {} (renewed {}s ago, lasts {}s): a run is active",
            l.holder, l.age_s, l.duration_s
        ),
        Some(l) if !l.holder.is_empty() => format!(
            "last held by {} (expired; the next run takes over)",
            l.holder
        ),
        _ => "free".into(),
    }
}

/// `node (state)` or `node (state: message)`, for each node of a batch.
fn nodes_text(j: &Journal, nodes: &[String]) -> String {
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
}

fn next_step(j: &Journal) -> String {
    match j.phase {
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
    }
}
