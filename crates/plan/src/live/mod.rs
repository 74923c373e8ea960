//! The live view: what gpuctl knows about a cluster, read once. The cluster crate fills it from an
//! API server; `Snapshot::live_view` (the day-2 crate's `snapshot`, a layer above) fills it from
//! a snapshot file; [`LiveView::offline`] is an empty cluster. Plans ([`crate::plan::plan`]),
//! snapshots (`Snapshot::capture`, day-2) and upgrade planning ([`crate::upgrade::schedule`]) are pure functions of it, so each source gives
//! the same decisions for the same state and the decisions are unit-tested without a cluster.

pub mod release;
pub mod workloads;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::journal::Journal;
use gpuctl_model::object::{ObjectRef, TypeRef};
use release::LiveRelease;
use workloads::Workloads;

/// Where a live view came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An API server, read now.
    Cluster {
        /// Server URL.
        server: String,
        /// Cluster fingerprint.
        fingerprint: String,
    },
    /// A snapshot file.
    Snapshot {
        /// Server URL at capture time.
        server: Option<String>,
        /// Cluster fingerprint at capture time.
        fingerprint: Option<String>,
        /// When it was captured (RFC 3339, UTC), when the snapshot recorded it.
        captured_at: Option<String>,
    },
    /// Nothing: an empty cluster that serves every kind.
    Offline,
}

impl Source {
    /// The server URL and cluster fingerprint, when the source has them.
    pub fn server_and_fingerprint(&self) -> (Option<String>, Option<String>) {
        match self {
            Source::Cluster {
                server,
                fingerprint,
            } => (Some(server.clone()), Some(fingerprint.clone())),
            Source::Snapshot {
                server,
                fingerprint,
                ..
            } => (server.clone(), fingerprint.clone()),
            Source::Offline => (None, None),
        }
    }
}

/// Something read from the cluster that may not have been read (offline, or a snapshot older than
/// the field), or that could not be read (a plan says so instead of failing).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Reading<T> {
    /// Not read.
    #[default]
    NotRead,
    /// Read.
    Read(T),
    /// Could not be read: why.
    Failed(String),
}

/// What a server-side dry-run apply of a rendered object answered (live views only).
#[derive(Debug, Clone, PartialEq)]
pub enum DryRun {
    /// The object as the server would store it.
    Applied(Value),
    /// A field gpuctl sets is owned by another manager: the server's message.
    Conflict(String),
}

/// Live state, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveView {
    /// Where it came from.
    pub source: Source,
    /// Kinds the cluster serves (`None`: unknown, every kind counts as served).
    pub served: Option<BTreeSet<TypeRef>>,
    /// Live objects among those read (absent: the object does not exist).
    pub objects: BTreeMap<ObjectRef, Value>,
    /// The current members of the blueprint's ApplySet (`None`: not read).
    pub members: Option<BTreeMap<ObjectRef, Value>>,
    /// Nodes of the blueprint's pools (`None`: not read).
    pub nodes: Option<Vec<Value>>,
    /// `gpuctl upgrade` journals in the operator's namespace.
    pub journals: Reading<Vec<Journal>>,
    /// The GPU Operator's Helm release (`Read(None)`: Helm stores none).
    pub helm_release: Reading<Option<LiveRelease>>,
    /// The other stacks' Helm releases (Kueue's, the Network Operator's) by (namespace, release
    /// name); a release not in the map was not read.
    pub releases: BTreeMap<(String, String), Reading<Option<LiveRelease>>>,
    /// The Helm releases gpuctl installed for this blueprint (recorded on the releases), with the
    /// objects that keep an uninstall from running for those whose stack the blueprint dropped.
    pub owned_releases: Reading<Vec<release::OwnedRelease>>,
    /// Server-side dry-run answers for rendered objects that needed one.
    pub dry_run: BTreeMap<ObjectRef, DryRun>,
    /// One pool's workloads (nodes, GPU pods, PDBs, driver CRs), for upgrades.
    pub workloads: Option<Workloads>,
    /// The pods on the nodes a plan moves from the device plugin to DRA, by node name (`None`:
    /// not read, e.g. from a snapshot).
    pub migrating_pods: Option<BTreeMap<String, Vec<workloads::LivePod>>>,
}

impl LiveView {
    /// An empty cluster that serves every kind: every rendered object is a create.
    pub fn offline() -> LiveView {
        LiveView::empty(Source::Offline)
    }

    /// Nothing read yet from `source`.
    pub fn empty(source: Source) -> LiveView {
        LiveView {
            source,
            served: None,
            objects: BTreeMap::new(),
            members: None,
            nodes: None,
            journals: Reading::NotRead,
            helm_release: Reading::NotRead,
            releases: BTreeMap::new(),
            owned_releases: Reading::NotRead,
            dry_run: BTreeMap::new(),
            workloads: None,
            migrating_pods: None,
        }
    }

    /// What was read of the release `r` renders: the GPU Operator's is [`LiveView::helm_release`],
    /// the others are in [`LiveView::releases`].
    pub fn release(
        &self,
        r: &gpuctl_pipeline::render::HelmRelease,
    ) -> &Reading<Option<LiveRelease>> {
        static NOT_READ: Reading<Option<LiveRelease>> = Reading::NotRead;
        if r.stack == gpuctl_pipeline::render::Stack::GpuOperator {
            return &self.helm_release;
        }
        self.releases
            .get(&(r.namespace.clone(), r.release.clone()))
            .unwrap_or(&NOT_READ)
    }

    /// Whether the cluster serves `t` (always, when unknown).
    pub fn serves(&self, t: &TypeRef) -> bool {
        self.served.as_ref().is_none_or(|s| s.contains(t))
    }

    /// The live object `id`, looked up among the members first.
    pub fn get(&self, id: &ObjectRef) -> Option<&Value> {
        self.members
            .as_ref()
            .and_then(|m| m.get(id))
            .or_else(|| self.objects.get(id))
    }

    /// The nodes an equality `selector` matches (`None`: nodes were not read).
    pub fn nodes_matching(&self, selector: &BTreeMap<String, String>) -> Option<Vec<&Value>> {
        let nodes = self.nodes.as_ref()?;
        Some(nodes.iter().filter(|n| selects(selector, n)).collect())
    }
}

/// Whether `node`'s labels match an equality `selector` (a pool's).
pub fn selects(selector: &BTreeMap<String, String>, node: &Value) -> bool {
    selector
        .iter()
        .all(|(k, v)| node["metadata"]["labels"][k] == *v)
}
