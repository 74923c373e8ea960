//! The upgrade journal record: where a pool's driver upgrade is, node by node, with its events.
//! The cluster crate keeps it in a ConfigMap `gpuctl-upgrade-<pool>` (with a Lease of the same
//! name); snapshots carry it so CI plans see upgrades.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::lock::LeaseInfo;

/// Journal format version (refused when newer than this build knows).
pub const FORMAT: u32 = 1;
/// Key of the journal in the ConfigMap.
pub const DATA_KEY: &str = "journal.json";
/// Events kept in the journal (the oldest are dropped).
const MAX_EVENTS: usize = 200;

/// Where the whole upgrade is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalPhase {
    /// Batches are being moved.
    Running,
    /// A batch stopped (a node did not drain or validate); `--resume` retries it.
    Failed,
    /// Every node runs the target driver.
    Completed,
    /// Nodes are being moved back.
    RollingBack,
    /// Every node is back where it was.
    RolledBack,
}

impl JournalPhase {
    /// Nothing left to do.
    pub fn is_final(self) -> bool {
        matches!(self, JournalPhase::Completed | JournalPhase::RolledBack)
    }

    /// For messages: "in progress", "stopped", ...
    pub fn describe(self) -> &'static str {
        match self {
            JournalPhase::Running => "in progress",
            JournalPhase::Failed => "stopped on a failure",
            JournalPhase::Completed => "completed",
            JournalPhase::RollingBack => "being rolled back",
            JournalPhase::RolledBack => "rolled back",
        }
    }
}

/// Where one node is. The order is the forward order; rollback moves nodes to `RolledBack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeState {
    /// On the old driver, untouched (apart from colour and steering taint).
    Blue,
    /// Cordoned by the upgrade.
    Cordoned,
    /// GPU pods gone.
    Drained,
    /// Labelled for the green CR; the operator is swapping the driver.
    Moved,
    /// Runs the target driver and passed every check.
    Validated,
    /// Labels restored, uncordoned: finished.
    Done,
    /// Did not validate (or drain); the run stopped here.
    Failed,
    /// Back on the blue CR with its recorded labels.
    RolledBack,
    /// Karpenter pools: the node is gone, replaced by Karpenter once the NodePool's template named
    /// the other CR (drift); its replacement is recorded as a node of its own.
    Replaced,
}

impl NodeState {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            NodeState::Blue => "blue",
            NodeState::Cordoned => "cordoned",
            NodeState::Drained => "drained",
            NodeState::Moved => "moved",
            NodeState::Validated => "validated",
            NodeState::Done => "done",
            NodeState::Failed => "failed",
            NodeState::RolledBack => "rolled-back",
            NodeState::Replaced => "replaced",
        }
    }
}

/// What the journal knows about a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// Batch (1-based).
    pub batch: usize,
    /// State.
    pub state: NodeState,
    /// Cordoned before the upgrade: never uncordoned by it.
    pub initially_unschedulable: bool,
    /// Labels recorded before the upgrade (`None`: absent).
    pub recorded: BTreeMap<String, Option<String>>,
    /// MIG-capable (MIG config state must be `success` again).
    pub mig_capable: bool,
    /// Driver before the upgrade.
    pub driver_before: Option<String>,
    /// Last problem, for status and rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// How far a Karpenter pool's drift has got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftRecord {
    /// The pool's NodePool.
    pub node_pool: String,
    /// The CR its template names now (`gpuctl.dev/driver`): the blue CR until the upgrade moves
    /// it, the green one after; a rollback moves it back.
    pub template_cr: String,
}

/// One journal event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Step number.
    pub step: u64,
    /// When (RFC 3339, UTC).
    pub at: String,
    /// What happened.
    pub message: String,
}

/// The state of one pool's upgrade, as stored in the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    /// [`FORMAT`].
    pub format: u32,
    /// Blueprint name.
    pub blueprint: String,
    /// Blueprint file (as given when the upgrade started).
    pub file: String,
    /// Pool.
    pub pool: String,
    /// Namespace of this journal (the operator's).
    pub namespace: String,
    /// The pool's selector.
    pub selector: BTreeMap<String, String>,
    /// Driver before.
    pub from_version: String,
    /// Target driver.
    pub to_version: String,
    /// CR the nodes came from.
    pub blue_cr: String,
    /// CR the nodes go to.
    pub green_cr: String,
    /// The green CR's manifest.
    pub green_manifest: Value,
    /// The green CR existed before this upgrade started (then rollback keeps it).
    pub green_cr_existed: bool,
    /// Delete the blue CR at the end.
    pub remove_blue_cr: bool,
    /// Colour label key.
    pub color_label: String,
    /// Colour of old nodes.
    pub blue_color: String,
    /// Colour of upgraded nodes.
    pub green_color: String,
    /// Most pool nodes unavailable at once.
    pub max_unavailable: usize,
    /// Drain bound per batch (seconds).
    pub drain_timeout_s: u64,
    /// Wait for running jobs instead of evicting them.
    pub wait_for_jobs: bool,
    /// Blueprint edit to make at the end.
    pub blueprint_change: String,
    /// Batches, in order, by node name.
    pub batches: Vec<Vec<String>>,
    /// Nodes.
    pub nodes: BTreeMap<String, NodeRecord>,
    /// The green CR exists and the nodes carry their colour and steering taint.
    #[serde(default)]
    pub prepared: bool,
    /// DeviceTaintRules that take a node's GPUs out of service while it is moved (DRA pools), by
    /// node: applied before the node is cordoned, deleted once it has validated (and by a rollback,
    /// and at the end of a run in any case, so none is left behind).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub device_taint_rules: BTreeMap<String, Value>,
    /// Karpenter pools: the upgrade moves the NodePool's template and Karpenter's drift replaces
    /// the nodes (`None`: nodes are relabelled in batches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub karpenter: Option<DriftRecord>,
    /// Phase.
    pub phase: JournalPhase,
    /// Steps recorded so far (every write adds one).
    pub step: u64,
    /// The last events.
    pub events: Vec<Event>,
}

impl Journal {
    /// Nodes of batch `b` (1-based).
    pub fn batch(&self, b: usize) -> &[String] {
        self.batches.get(b - 1).map_or(&[], Vec::as_slice)
    }

    /// Nodes in `state`.
    pub fn in_state(&self, state: NodeState) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, r)| r.state == state)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Adds an event that happened `at` (bounded history). The caller reads the clock: the core
    /// never does, so journals are a function of their inputs and tests use fixed times.
    pub fn event(&mut self, at: jiff::Timestamp, message: impl Into<String>) {
        self.events.push(Event {
            step: self.step,
            at: at.round(jiff::Unit::Second).unwrap_or(at).to_string(),
            message: message.into(),
        });
        if self.events.len() > MAX_EVENTS {
            let drop = self.events.len() - MAX_EVENTS;
            self.events.drain(..drop);
        }
    }

    /// One line per batch: where the pool is now.
    pub fn where_it_is(&self) -> String {
        let count = |s: NodeState| self.nodes.values().filter(|r| r.state == s).count();
        let green = count(NodeState::Done) + count(NodeState::Validated);
        let blue = count(NodeState::Blue) + count(NodeState::RolledBack);
        let replaced = count(NodeState::Replaced);
        let moving =
            count(NodeState::Cordoned) + count(NodeState::Drained) + count(NodeState::Moved);
        let failed = self.in_state(NodeState::Failed);
        let mut s = format!(
            "pool `{}`: {green} node(s) on {} ({}), {blue} on {} ({}), {moving} in between",
            self.pool, self.to_version, self.green_cr, self.from_version, self.blue_cr
        );
        if replaced > 0 {
            s.push_str(&format!(", {replaced} replaced by Karpenter"));
        }
        if !failed.is_empty() {
            s.push_str(&format!(", failed: {}", failed.join(", ")));
        }
        s
    }
}

impl Journal {
    /// Reads the journal text kept under [`DATA_KEY`] (`None`: the key is missing), refusing a
    /// format newer than this build knows.
    pub fn parse(text: Option<&str>) -> Result<Journal, String> {
        let text = text.ok_or_else(|| format!("no `{DATA_KEY}` key"))?;
        let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let format = v["format"].as_u64().unwrap_or(0);
        if format > u64::from(FORMAT) {
            return Err(format!(
                "journal format {format} is newer than this gpuctl ({FORMAT}); use a newer gpuctl"
            ));
        }
        serde_json::from_value(v).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal() -> Journal {
        serde_json::from_value(serde_json::json!({
            "format": FORMAT, "blueprint": "lab", "file": "lab.yaml", "pool": "train",
            "namespace": "gpu-operator", "selector": {"pool": "train"},
            "fromVersion": "570.172.08", "toVersion": "580.95.05",
            "blueCr": "train-570", "greenCr": "train-580", "greenManifest": {},
            "greenCrExisted": false, "removeBlueCr": true, "colorLabel": "gpuctl.dev/color",
            "blueColor": "blue", "greenColor": "green", "maxUnavailable": 1,
            "drainTimeoutS": 600, "waitForJobs": true,
            "blueprintChange": "set pools[train].driver to 580.95.05",
            "batches": [], "nodes": {}, "phase": "running", "step": 3, "events": []
        }))
        .expect("a journal")
    }

    #[test]
    fn events_carry_the_time_they_are_given_to_the_second_and_the_newest_are_kept() {
        let mut j = journal();
        let at: jiff::Timestamp = "2026-12-01T10:00:00.700Z".parse().unwrap();
        j.event(at, "cordoned dgx-1");
        assert_eq!(
            j.events,
            vec![Event {
                step: 3,
                at: "2026-12-01T10:00:01Z".into(),
                message: "cordoned dgx-1".into(),
            }]
        );
        for i in 0..MAX_EVENTS + 5 {
            let at = at + jiff::SignedDuration::from_secs(i as i64);
            j.event(at, format!("event {i}"));
        }
        assert_eq!(j.events.len(), MAX_EVENTS);
        assert_eq!(j.events[0].message, "event 5");
        assert_eq!(
            j.events.last().unwrap().at,
            "2026-12-01T10:03:25Z",
            "204 seconds after 10:00:00.7, rounded"
        );
    }
}
