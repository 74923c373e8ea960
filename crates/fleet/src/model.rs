//! The fleet file, `kind: Fleet` (`gpuctl.dev/v1alpha1`, docs/fleet.md): the clusters (a blueprint,
//! a kubeconfig context, labels; never credentials), the rollout waves and, optionally, which
//! cluster dispatches to which over MultiKueue.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The kind of a fleet file.
pub const KIND: &str = "Fleet";

/// A fleet file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fleet {
    /// Always `gpuctl.dev/v1alpha1`.
    pub api_version: String,
    /// Always `Fleet`.
    pub kind: String,
    /// The fleet's name.
    pub metadata: FleetMetadata,
    /// Its clusters, waves and MultiKueue wiring.
    pub spec: FleetSpec,
}

/// Fleet metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetMetadata {
    /// DNS-1123 label.
    pub name: String,
}

/// What the fleet holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetSpec {
    /// The clusters, each a blueprint (usually an overlay of a shared base).
    pub clusters: Vec<Cluster>,
    /// Rollout waves, in apply order; every cluster is in exactly one.
    #[serde(default)]
    pub waves: Vec<Wave>,
    /// MultiKueue: one manager cluster dispatching to workers (optional).
    #[serde(default)]
    pub multi_kueue: Option<MultiKueue>,
    /// How a GitOps engine syncs the rendered trees (optional; docs/fleet.md "GitOps").
    #[serde(default)]
    pub gitops: Option<super::gitops_model::GitOps>,
}

/// One cluster of the fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    /// DNS-1123 label: names the cluster in waves, MultiKueue and its rendered directory.
    pub name: String,
    /// Its blueprint, relative to the fleet file (inside the fleet's directory).
    pub blueprint: String,
    /// The kubeconfig context `fleet plan` and `fleet apply` use (a name, never a credential).
    #[serde(default)]
    pub context: Option<String>,
    /// Labels wave selectors match.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// A rollout wave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Wave {
    /// Unique name (`fleet apply --wave NAME`).
    pub name: String,
    /// Clusters named explicitly.
    #[serde(default)]
    pub clusters: Vec<String>,
    /// Clusters whose labels match, among those no earlier wave took and no wave names
    /// (`{}`: every such cluster).
    #[serde(default)]
    pub selector: Option<Selector>,
    /// How long the wave's clusters run on the new revision before the next wave starts
    /// (`30m`, `24h`).
    #[serde(default)]
    pub bake: Option<String>,
    /// What must hold on every cluster of earlier waves before this one starts, besides their
    /// revision and bake time (which always must): none listed means both gates.
    #[serde(default)]
    pub gates: Vec<Gate>,
    /// Clusters of the wave applied at once (default 1).
    #[serde(default)]
    pub max_parallel: Option<u32>,
}

/// A label selector (equality only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selector {
    /// Labels a cluster must carry, all of them.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl Selector {
    /// Whether a cluster with `labels` matches.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// A condition on the clusters of earlier waves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Gate {
    /// They carry the fleet revision and their plans are empty.
    Converged,
    /// `gpuctl doctor` reports no error on them.
    Doctor,
}

/// MultiKueue wiring (Kueue v0.19: MultiKueueCluster, MultiKueueConfig, AdmissionCheck).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MultiKueue {
    /// The cluster jobs are submitted to.
    pub manager: String,
    /// The clusters it dispatches to, in preference order (the Incremental dispatcher's).
    pub workers: Vec<String>,
    /// How the manager picks workers.
    #[serde(default)]
    pub dispatcher: Option<Dispatcher>,
    /// The manager's ClusterQueues that dispatch (get the MultiKueue admission check).
    #[serde(default)]
    pub cluster_queues: Vec<String>,
}

/// Kueue's MultiKueue dispatchers (the blueprint's type: the fleet puts its choice into the
/// manager's Kueue configuration).
pub use gpuctl_model::blueprint::MultiKueueDispatcher as Dispatcher;
