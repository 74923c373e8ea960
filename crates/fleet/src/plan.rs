//! `fleet plan`'s result: each cluster's own plan (the per-cluster [`Plan`], unchanged), or why
//! it has none, with its wave and where it was planned.

use gpuctl_model::located::Severity;
use gpuctl_plan::plan::Plan;

/// Where a cluster's plan was made.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Its kubeconfig context.
    Live {
        /// The context, as the fleet file names it.
        context: Option<String>,
    },
    /// A snapshot file, `DIR/<cluster>.json`.
    Snapshot {
        /// When the snapshot was taken, when it says.
        at: Option<String>,
    },
    /// No cluster state (`fleet plan --offline`, a new fleet's first pull request, before any
    /// cluster has a snapshot): every object is a create, as `gpuctl plan --offline`.
    Offline,
}

/// A cluster's plan, or why it has none.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Planned.
    Planned(Box<Plan>),
    /// Not planned: why (one line, no secret).
    Error(String),
}

/// One cluster of a fleet plan.
#[derive(Debug, Clone)]
pub struct ClusterPlan {
    /// Cluster name.
    pub name: String,
    /// Its wave (`all` in a fleet without waves).
    pub wave: String,
    /// Where its plan was made.
    pub source: Source,
    /// The plan.
    pub outcome: Outcome,
}

impl ClusterPlan {
    /// The plan, when it changes something or has an error finding (a cluster the PR comment
    /// shows); `None` for an unchanged cluster or one not planned.
    pub fn changed(&self) -> Option<&Plan> {
        match &self.outcome {
            Outcome::Planned(p) if p.summary.has_changes() || error_count(p) > 0 => Some(p),
            _ => None,
        }
    }
}

/// How many error findings `p` has.
pub fn error_count(p: &Plan) -> usize {
    p.findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count()
}
