//! The journal a new upgrade starts with, made from its plan.

use serde_json::Value;

use super::schedule::UpgradePlan;
use crate::journal::{DriftRecord, FORMAT, Journal, JournalPhase, NodeRecord, NodeState};

impl Journal {
    /// A fresh journal for `plan` (which must have no errors and a green manifest).
    pub fn from_plan(plan: &UpgradePlan) -> Journal {
        let nodes = plan
            .nodes
            .iter()
            .map(|n| {
                (
                    n.name.clone(),
                    NodeRecord {
                        batch: n.batch,
                        state: NodeState::Blue,
                        initially_unschedulable: n.unschedulable,
                        recorded: n.recorded.clone(),
                        mig_capable: n.mig_capable,
                        driver_before: n.driver.clone(),
                        message: None,
                    },
                )
            })
            .collect();
        Journal {
            format: FORMAT,
            blueprint: plan.blueprint.clone(),
            file: plan.file.clone(),
            pool: plan.pool.clone(),
            namespace: plan.namespace.clone(),
            selector: plan.selector.clone(),
            from_version: plan.from_version.clone(),
            to_version: plan.to_version.clone(),
            blue_cr: plan.blue_cr.clone(),
            green_cr: plan.green_cr.clone(),
            green_manifest: plan.green_manifest.clone().unwrap_or(Value::Null),
            green_cr_existed: false,
            remove_blue_cr: plan.remove_blue_cr,
            color_label: plan.policy.color_label.clone(),
            blue_color: plan.blue_color.clone(),
            green_color: plan.green_color.clone(),
            max_unavailable: plan.policy.max_unavailable,
            drain_timeout_s: plan.policy.drain_timeout_s,
            wait_for_jobs: plan.policy.wait_for_jobs,
            blueprint_change: plan.blueprint_change.clone(),
            batches: plan.batches.iter().map(|b| b.nodes.clone()).collect(),
            nodes,
            prepared: false,
            device_taint_rules: plan.device_taints.rules.clone(),
            karpenter: plan.karpenter.as_ref().map(|d| DriftRecord {
                node_pool: d.node_pool.clone(),
                template_cr: plan.blue_cr.clone(),
            }),
            phase: JournalPhase::Running,
            step: 0,
            events: Vec::new(),
        }
    }
}
