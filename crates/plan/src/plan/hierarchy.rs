//! Objects that live under a parent object which admission requires to exist: a Volcano child
//! Queue names its parent queue (`spec.parent`), Volcano's webhook refuses the child while the
//! parent does not exist, and refuses to delete a parent that still has children
//! (`profiles/queueing.yaml`, `volcano_hierarchy`). Plans create such children after their
//! parents ([`crate::plan::ActionKind::CreateAfterParent`], never dry-run against a parent that
//! does not exist yet); apply writes them in waves, parents first, and prunes children first.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Action;
use gpuctl_model::object::{ObjectRef, group_of};
use gpuctl_model::profiles::Catalog;

/// The parent object `manifest` (of `api_version` / `kind`) must be created after and deleted
/// before, if any.
pub fn parent_ref(api_version: &str, kind: &str, manifest: &Value) -> Option<ObjectRef> {
    let q = Catalog::embedded().queueing();
    if kind != "Queue" || group_of(api_version) != q.volcano.group {
        return None;
    }
    let parent = q.volcano_hierarchy.parent_of(manifest)?;
    Some(ObjectRef::new(api_version, kind, None, parent))
}

/// The parent of an action's object (creates and updates carry their manifest).
fn action_parent(a: &Action) -> Option<ObjectRef> {
    parent_ref(&a.api_version, &a.kind, a.manifest.as_ref()?)
}

/// `items` in waves: each item's parent (when it is among `items`) is in an earlier wave, items
/// without one are in the first. A cycle (refused by validation, GPU082) ends up in the last
/// wave rather than looping.
pub fn waves<T>(
    items: Vec<T>,
    id: impl Fn(&T) -> ObjectRef,
    parent: impl Fn(&T) -> Option<ObjectRef>,
) -> Vec<Vec<T>> {
    let ids: BTreeMap<ObjectRef, usize> =
        items.iter().enumerate().map(|(i, t)| (id(t), i)).collect();
    let parents: Vec<Option<usize>> = items
        .iter()
        .map(|t| parent(t).and_then(|p| ids.get(&p).copied()))
        .collect();
    let depth = |mut i: usize| {
        let mut d = 0;
        while let Some(p) = parents[i] {
            d += 1;
            if d > items.len() {
                break;
            }
            i = p;
        }
        d
    };
    let depths: Vec<usize> = (0..items.len()).map(depth).collect();
    let deepest = depths.iter().copied().max().unwrap_or(0);
    let mut out: Vec<Vec<T>> = (0..=deepest).map(|_| Vec::new()).collect();
    for (t, d) in items.into_iter().zip(depths) {
        out[d].push(t);
    }
    out.retain(|w| !w.is_empty());
    out
}

/// Writes of one apply phase in waves, parents before children.
pub fn write_waves<'a>(steps: &[&'a Action]) -> Vec<Vec<&'a Action>> {
    waves(steps.to_vec(), |a| a.object_ref(), |a| action_parent(a))
}

/// Prunes reordered so that every child is deleted before its parent (deepest first), keeping
/// the order otherwise. `live` gives each pruned member's live object (delete actions carry no
/// manifest).
pub fn children_first(
    deletes: Vec<Action>,
    live: impl Fn(&ObjectRef) -> Option<Value>,
) -> Vec<Action> {
    let parent =
        |a: &Action| live(&a.object_ref()).and_then(|v| parent_ref(&a.api_version, &a.kind, &v));
    let mut w = waves(deletes, |a| a.object_ref(), parent);
    w.reverse();
    w.into_iter().flatten().collect()
}
