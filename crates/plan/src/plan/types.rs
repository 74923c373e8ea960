//! The plan's types: what a plan says (actions per object, node changes, Helm steps, uninstalls,
//! findings, the summary), serialised as the versioned plan file `apply` executes. The decisions
//! that fill them are the planning engine around it (`plan::plan` and the modules beside this one).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::diff::Change;
use super::uninstall::UninstallStep;
use crate::live::Source;
use gpuctl_model::finding::{self, Family};
use gpuctl_model::located::Severity;
use gpuctl_model::object::ObjectRef;
use gpuctl_pipeline::render::{NodePatch, Phase};

/// Version of the plan JSON format (docs/plan-apply.md). 2: printed plans are masked and say so
/// (`redacted`, and `apply` refuses them); an older gpuctl, which knows only version 1, must
/// refuse them too rather than apply `(sensitive)` as a password. 3: `releases`, the other
/// stacks' Helm releases (Kueue, the Network Operator); a gpuctl that knows only version 2 would
/// apply their objects without installing them, so it must refuse these plans. 4: `uninstalls`,
/// releases of components the blueprint dropped; a gpuctl that knows only version 3 would apply
/// such a plan without uninstalling them and say it was complete.
pub const PLAN_FORMAT_VERSION: u32 = 4;

/// Kinds never pruned without `--prune-protected`: losing one loses everything inside or above it.
pub const PROTECTED_KINDS: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "PriorityClass",
    "Node",
];

/// Where the live state came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A live API server, with server-side dry-run.
    Live,
    /// A snapshot file.
    Snapshot,
    /// No live state: everything is a create.
    Offline,
}

/// What happens to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActionKind {
    /// Created.
    Create,
    /// Created once its CRD is installed (the kind is not served yet).
    CreateAfterCrd,
    /// Created once its parent exists (a Volcano child queue whose parent queue this apply
    /// creates first); not dry-run at plan time, as admission would refuse it until then.
    CreateAfterParent,
    /// Fields change.
    Update,
    /// Pruned: a member of the set the blueprint no longer declares.
    Delete,
    /// A field gpuctl would set is owned by another manager.
    Conflict,
    /// Nothing to do.
    NoOp,
    /// An existing object no ApplySet owns, already as the blueprint declares it: it joins the
    /// set and gpuctl becomes a field manager of the fields it declares, no value changes
    /// (`apply --adopt`).
    Adopt,
}

/// One object's action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// What happens.
    pub action: ActionKind,
    /// Apply phase (absent for prunes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// resourceVersion of the live object when planned (absent: it did not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// `sha256:` of the live object when planned, without `status` and the metadata the server
    /// keeps moving (`stale::content_digest`): a controller's status write (Kueue's on a
    /// LocalQueue, the quota controller's on a ResourceQuota) changes the resourceVersion but
    /// not what the plan was made against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_digest: Option<String>,
    /// Field changes (update, delete: what goes away), credentials masked (`redact`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// Why (conflicts name the other manager and fields; protected prunes say so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The manifest to apply (create, update, conflict); masked only in a printed plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Value>,
    /// The live object belongs to no ApplySet: applying takes it over (`adopt` actions, and
    /// updates of such objects), which `apply` does only with `--adopt`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopt: bool,
    /// An update that changes a field the API server keeps immutable (`spec.clusterQueue` of a
    /// LocalQueue): apply deletes the object (guarded by its resourceVersion), waits until it is
    /// gone, and creates it again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replace: bool,
}

impl Action {
    /// The object it is about.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(
            &self.api_version,
            &self.kind,
            self.namespace.as_deref(),
            &self.name,
        )
    }

    /// `Kind/ns/name`.
    pub fn id(&self) -> String {
        self.object_ref().to_string()
    }
}

/// Label and taint changes on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeAction {
    /// Pool.
    pub pool: String,
    /// Node name.
    pub node: String,
    /// resourceVersion when planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Label changes (`labels."key"`).
    pub labels: Vec<Change>,
    /// Taints added (`key=value:Effect`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<String>,
}

/// Something the plan noticed about the live cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFinding {
    /// Stable id, registered in the plan family (`gpuctl explain GPU401`,
    /// `gpuctl_model::finding::plan`). Empty in a plan saved by a gpuctl before ids (issue 38).
    #[serde(default)]
    pub id: String,
    /// Error (apply refuses the plan) or warning.
    pub severity: Severity,
    /// What.
    pub message: String,
}

impl PlanFinding {
    /// An error finding of the registered id `id`.
    pub fn error(id: &'static str, message: String) -> PlanFinding {
        PlanFinding::new(id, Severity::Error, message)
    }

    /// A warning finding of the registered id `id`.
    pub fn warning(id: &'static str, message: String) -> PlanFinding {
        PlanFinding::new(id, Severity::Warning, message)
    }

    /// A result of the organisation's policies (gpuctl-policy, `--policy DIR`), with its id of
    /// the policy family: a plan's findings carry them so every plan output prints them.
    pub fn policy(id: &'static str, severity: Severity, message: String) -> PlanFinding {
        finding::debug_check(Family::Policy, id, severity);
        PlanFinding {
            id: id.to_string(),
            severity,
            message,
        }
    }

    fn new(id: &'static str, severity: Severity, message: String) -> PlanFinding {
        finding::debug_check(Family::Plan, id, severity);
        PlanFinding {
            id: id.to_string(),
            severity,
            message,
        }
    }
}

/// Counts per action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Creates (including after-CRD).
    pub create: usize,
    /// Updates.
    pub update: usize,
    /// Deletes.
    pub delete: usize,
    /// Conflicts.
    pub conflict: usize,
    /// Unchanged.
    pub unchanged: usize,
    /// Nodes with label or taint changes.
    pub nodes: usize,
    /// Helm releases that would be installed or upgraded (the GPU Operator's and the others').
    #[serde(default)]
    pub helm: usize,
    /// Existing objects adopted without a field change.
    #[serde(default)]
    pub adopt: usize,
    /// Helm releases of components the blueprint dropped, to uninstall.
    #[serde(default)]
    pub uninstall: usize,
}

impl Summary {
    /// Whether applying would change anything.
    pub fn has_changes(&self) -> bool {
        self.create
            + self.update
            + self.delete
            + self.conflict
            + self.nodes
            + self.helm
            + self.adopt
            + self.uninstall
            > 0
    }
}

/// What `helm upgrade --install` would do to the operator's release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HelmAction {
    /// No release yet.
    Install,
    /// Another chart version, other values, or a release not in `deployed` state.
    Upgrade,
    /// Same chart version and values, deployed: apply skips helm.
    NoOp,
}

/// One of the other stacks' Helm releases in a plan (Kueue's, the Network Operator's; `install:
/// helm` only): what apply runs, just before the phase whose objects need it
/// ([`gpuctl_pipeline::render::Stack::before`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseStep {
    /// The release as rendered: chart, version, namespace, values, chart source.
    pub release: gpuctl_pipeline::render::HelmRelease,
    /// What the step would change, from the live release (live and snapshot modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<HelmPlan>,
}

/// A Helm release's part of a plan (`install: helm` only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelmPlan {
    /// What happens.
    pub action: HelmAction,
    /// Live revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// Live Helm status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Live chart version, when it differs from the blueprint's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_version_before: Option<String>,
    /// Value changes (every value for an install), credentials masked (`redact`).
    pub changes: Vec<Change>,
}

/// A whole plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Format version.
    pub format_version: u32,
    /// gpuctl version that made it.
    pub gpuctl_version: String,
    /// Blueprint name.
    pub blueprint: String,
    /// Live, snapshot or offline.
    pub mode: Mode,
    /// Cluster fingerprint (live and snapshot modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_fingerprint: Option<String>,
    /// Server URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// When the snapshot a snapshot-mode plan read was captured (RFC 3339), if it recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_captured_at: Option<String>,
    /// Driver version changes of NVIDIADriver CRs the blueprint upgrades blue-green: the operator
    /// would replace the driver on every node such a CR serves at once, the most disruptive thing
    /// a plan can do; `gpuctl upgrade driver` is the way to roll it out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_rollouts: Vec<DriverRollout>,
    /// ApplySet id.
    pub applyset: String,
    /// Object actions, in apply order (prunes last).
    pub actions: Vec<Action>,
    /// Node label/taint actions.
    pub nodes: Vec<NodeAction>,
    /// Live-state findings (node counts, GPU models, drivers).
    pub findings: Vec<PlanFinding>,
    /// The operator's Helm release step.
    pub helm: gpuctl_pipeline::render::HelmRelease,
    /// What that step would change, from the live release (live and snapshot modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_release: Option<HelmPlan>,
    /// The other stacks' Helm release steps (Kueue, the Network Operator), in install order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<ReleaseStep>,
    /// Releases gpuctl installed for this blueprint whose component it dropped: apply uninstalls
    /// them last, after the prune ([`uninstall`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uninstalls: Vec<UninstallStep>,
    /// Node patches as rendered (apply re-reads nodes).
    pub node_patches: Vec<NodePatch>,
    /// Totals.
    pub summary: Summary,
    /// Credentials in `helm.values` and manifests are masked: the plan can be shown, not applied.
    #[serde(default)]
    pub redacted: bool,
}

/// A driver version change of one NVIDIADriver CR under `upgrades.strategy: blue-green`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverRollout {
    /// The CR's name (`cluster-default`).
    pub driver_cr: String,
    /// Driver version the live CR has.
    pub from: String,
    /// Driver version the blueprint declares.
    pub to: String,
    /// The pools whose nodes the CR serves, with their declared node counts.
    pub pools: Vec<RolloutPool>,
}

/// One pool a driver rollout reaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutPool {
    /// Pool name.
    pub pool: String,
    /// Nodes the blueprint declares for it.
    pub nodes: u32,
}

impl DriverRollout {
    /// `pool `a` (16 nodes), pool `b` (4 nodes)`.
    pub fn pool_list(&self) -> String {
        self.pools
            .iter()
            .map(|p| format!("pool `{}` ({} nodes)", p.pool, p.nodes))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Nodes across its pools.
    pub fn nodes(&self) -> u64 {
        self.pools.iter().map(|p| u64::from(p.nodes)).sum()
    }
}

impl Mode {
    /// The mode of a live view's source.
    pub fn of(source: &Source) -> Mode {
        match source {
            Source::Cluster { .. } => Mode::Live,
            Source::Snapshot { .. } => Mode::Snapshot,
            Source::Offline => Mode::Offline,
        }
    }
}

impl Summary {
    /// Totals of `actions`, `nodes` changed nodes and the Helm steps.
    pub fn of<'a>(
        actions: &[Action],
        nodes: usize,
        helm: impl IntoIterator<Item = &'a HelmPlan>,
    ) -> Summary {
        let mut summary = Summary {
            nodes,
            helm: helm
                .into_iter()
                .filter(|h| h.action != HelmAction::NoOp)
                .count(),
            ..Summary::default()
        };
        for a in actions {
            match a.action {
                ActionKind::Create | ActionKind::CreateAfterCrd | ActionKind::CreateAfterParent => {
                    summary.create += 1
                }
                ActionKind::Update => summary.update += 1,
                ActionKind::Delete => summary.delete += 1,
                ActionKind::Conflict => summary.conflict += 1,
                ActionKind::NoOp => summary.unchanged += 1,
                ActionKind::Adopt => summary.adopt += 1,
            }
        }
        summary
    }
}
