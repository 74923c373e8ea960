//! What a live plan reads, decided once from the rendered set: [`PlanReads::of`] is the one table
//! the cluster crate reads from (as Day-2 reads `gpuctl_day2::diagnostics::DIAGNOSTIC_KINDS`), and the three follow-ups
//! whose answer depends on what was read are pure functions of that read here too: which kinds to
//! list in bulk ([`PlanReads::bulk`]), which objects to dry-run ([`PlanReads::dry_run`]), which
//! releases' objects decide an uninstall ([`uninstall_reads`]) and which nodes' pods a move to DRA
//! needs ([`moving_nodes`]). The cluster crate only executes requests; no plan decision is its.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{hierarchy, nodes, objects, parent_of, uninstall};
use crate::live::LiveView;
use crate::live::release::OwnedRelease;
use gpuctl_model::applyset::ApplySetParent;
use gpuctl_model::blueprint::InstallMode;
use gpuctl_model::object::{ObjectRef, TypeRef};
use gpuctl_pipeline::render::{HelmRelease, NodePatch, RenderedObject, RenderedSet};

/// Cluster-scoped kinds with at least this many objects left to read are listed once instead of
/// read one by one (eight GETs cost more than one LIST of a kind gpuctl owns most objects of).
pub const LIST_THRESHOLD: usize = 8;

/// Everything a live plan of one rendered set reads.
#[derive(Debug)]
pub struct PlanReads<'a> {
    /// Every kind the set renders: discovered once, then one member LIST each.
    pub kinds: BTreeSet<TypeRef>,
    /// The set's ApplySet parent: the kinds it recorded earlier are listed for members too (they
    /// may hold members the blueprint dropped).
    pub parent: ApplySetParent,
    /// The LISTs that read every pool's nodes.
    pub nodes: PoolNodes<'a>,
    /// The namespace of the upgrade journals (the operator's).
    pub journals_namespace: &'a str,
    /// The operator's release, when gpuctl installs it with helm.
    pub operator_release: Option<&'a HelmRelease>,
    /// The other stacks' releases gpuctl installs with helm.
    pub releases: Vec<&'a HelmRelease>,
    /// Each rendered object, in the set's order.
    pub objects: Vec<ObjectRead<'a>>,
    namespaces_created: BTreeSet<&'a str>,
    set_id: String,
}

/// The nodes of a set of pools, each read once.
#[derive(Debug)]
pub struct PoolNodes<'a> {
    /// The label selectors to LIST nodes with ([`nodes::node_list_selectors`]: pools that select
    /// by the same label keys share one).
    pub lists: Vec<String>,
    patches: &'a [NodePatch],
}

impl<'a> PoolNodes<'a> {
    /// The node reads of `patches`' pools.
    pub fn of(patches: &'a [NodePatch]) -> Self {
        PoolNodes {
            lists: nodes::node_list_selectors(patches),
            patches,
        }
    }

    /// Whether a node one of the [`lists`](Self::lists) returned belongs to some pool: a selector
    /// shared by pools with several keys also matches the cross product of their values.
    pub fn keeps(&self, node: &Value) -> bool {
        self.patches
            .iter()
            .any(|p| nodes::selects(&p.selector, node))
    }
}

/// One rendered object to read.
#[derive(Debug)]
pub struct ObjectRead<'a> {
    /// The object.
    pub object: &'a RenderedObject,
    /// Its identity.
    pub id: ObjectRef,
    /// Its kind.
    pub type_ref: TypeRef,
    /// The object of the set that admission requires to exist first (a Volcano child queue's
    /// parent), when the set declares it: read when this one does not exist yet.
    pub parent: Option<&'a RenderedObject>,
}

/// The live state of an object's in-set parent, as far as a dry-run of the child cares.
#[derive(Debug, Clone, Copy)]
pub enum ParentState<'v> {
    /// The object exists, or has no parent in the set: nothing was read.
    NotAsked,
    /// The parent's kind is not served.
    NotServed,
    /// The parent as read (`None`: it does not exist).
    Read(Option<&'v Value>),
}

/// What to read in bulk for the objects that are not members of the set.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BulkReads {
    /// Cluster-scoped kinds listed in full ([`LIST_THRESHOLD`]).
    pub lists: Vec<TypeRef>,
    /// Whether the names of existing namespaces are read (an object in a namespace that does not
    /// exist cannot exist either); not when Namespaces are among `lists`.
    pub namespace_names: bool,
}

impl<'a> PlanReads<'a> {
    /// The reads of `set`.
    pub fn of(set: &'a RenderedSet) -> Self {
        let parent = parent_of(set);
        let set_id = parent.id();
        let objects = set
            .objects
            .iter()
            .map(|o| ObjectRead {
                object: o,
                id: o.object_ref(),
                type_ref: o.type_ref(),
                parent: in_set_parent(set, o),
            })
            .collect();
        PlanReads {
            kinds: set.objects.iter().map(RenderedObject::type_ref).collect(),
            parent,
            nodes: PoolNodes::of(&set.node_patches),
            journals_namespace: &set.helm.namespace,
            operator_release: Some(&set.helm).filter(|r| r.install == InstallMode::Helm),
            releases: set
                .releases
                .iter()
                .filter(|r| r.install == InstallMode::Helm)
                .collect(),
            objects,
            namespaces_created: objects::namespaces_created(set),
            set_id,
        }
    }

    /// The bulk reads for the objects `members` does not hold.
    pub fn bulk(&self, members: &BTreeMap<ObjectRef, Value>) -> BulkReads {
        let unread: Vec<&ObjectRead> = self
            .objects
            .iter()
            .filter(|o| !members.contains_key(&o.id))
            .collect();
        let mut per_kind: BTreeMap<&TypeRef, usize> = BTreeMap::new();
        for o in unread.iter().filter(|o| o.object.namespace.is_none()) {
            *per_kind.entry(&o.type_ref).or_default() += 1;
        }
        let lists: Vec<TypeRef> = per_kind
            .into_iter()
            .filter(|(_, count)| *count >= LIST_THRESHOLD)
            .map(|(t, _)| t.clone())
            .collect();
        let lists_namespaces = lists.iter().any(is_namespace);
        BulkReads {
            namespace_names: !lists_namespaces
                && unread.iter().any(|o| o.object.namespace.is_some()),
            lists,
        }
    }

    /// The manifest to dry-run for `read` (`None`: no dry-run), given its live state and, when it
    /// does not exist and has a parent in the set, its parent's: creates of custom resources and
    /// real updates are dry-run ([`objects::needs_dry_run`]); a child whose parent this apply
    /// creates first is not (admission refuses it until then; the plan marks it
    /// create-after-parent).
    pub fn dry_run(
        &self,
        read: &ObjectRead,
        current: Option<&Value>,
        parent: ParentState,
    ) -> Option<Value> {
        let parent_missing = match parent {
            ParentState::NotAsked => false,
            ParentState::NotServed => true,
            ParentState::Read(live) => objects::waits_for_parent(read.object, live),
        };
        (!parent_missing
            && objects::needs_dry_run(read.object, current, &self.namespaces_created, &self.set_id))
        .then(|| objects::desired_manifest(read.object, current))
    }
}

/// A release gpuctl installed for the blueprint and the blueprint dropped: the objects of its
/// stack's API groups are read, and those that keep its uninstall from running are kept.
#[derive(Debug, PartialEq, Eq)]
pub struct UninstallRead {
    /// The release's index in the owned releases.
    pub index: usize,
    /// The API groups whose objects are read.
    pub groups: Vec<String>,
}

/// The uninstall reads of `set` given the releases gpuctl installed for its blueprint.
pub fn uninstall_reads(set: &RenderedSet, owned: &[OwnedRelease]) -> Vec<UninstallRead> {
    let dropped = uninstall::candidates(set, owned);
    owned
        .iter()
        .enumerate()
        .filter(|(_, r)| dropped.iter().any(|d| std::ptr::eq(*d, *r)))
        .map(|(index, r)| UninstallRead {
            index,
            groups: uninstall::api_groups(r.stack)
                .iter()
                .map(|g| g.to_string())
                .collect(),
        })
        .collect()
}

/// The objects of an [`UninstallRead`]'s groups (`Kind/ns/name`) that block its uninstall.
pub fn uninstall_blockers(owned: &OwnedRelease, objects: Vec<String>) -> Vec<String> {
    uninstall::blocking(owned.stack, objects)
}

/// The nodes whose pods a move to DRA needs read: each node of a pool declared `gpuPlugin: dra`
/// that does not carry the device-plugin switch's value yet (plan refuses the move while one of
/// its pods holds device-plugin GPUs). No pool moving: none.
pub fn moving_nodes(patches: &[NodePatch], view: &LiveView) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for p in patches {
        let Some(key) = &p.dra_switch else {
            continue;
        };
        let want = p.labels.get(key).map(String::as_str);
        for n in view.nodes_matching(&p.selector).unwrap_or_default() {
            if n["metadata"]["labels"][key.as_str()].as_str() != want {
                out.insert(
                    n["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
        }
    }
    out
}

fn is_namespace(t: &TypeRef) -> bool {
    t.api_version == "v1" && t.kind == "Namespace"
}

/// The rendered object `o` is a child of, if the set declares it.
fn in_set_parent<'a>(set: &'a RenderedSet, o: &RenderedObject) -> Option<&'a RenderedObject> {
    let parent = hierarchy::parent_ref(&o.api_version, &o.kind, &o.manifest)?;
    set.objects.iter().find(|x| x.object_ref() == parent)
}

#[cfg(test)]
mod tests;
