//! Object decisions: what happens to each rendered object (create, create after its CRD, update,
//! no-op, conflict) and which members of the ApplySet are pruned.

use std::collections::BTreeSet;

use serde_json::Value;

use super::diff::{self, Change};
use super::{Action, ActionKind, FIELD_MANAGER, PROTECTED_KINDS, PlanFinding, redact};
use crate::applyset;
use crate::live::{DryRun, LiveView};
use crate::object::ObjectRef;
use crate::render::{RenderedObject, RenderedSet};

/// Built-in API groups: their schemas are fixed by the Kubernetes version and gpuctl's manifests
/// for them are round-trip tested against k8s-openapi, so creates of these kinds are not dry-run
/// at plan time (custom resources are: the installed CRD version may differ from the one gpuctl
/// targets).
const BUILT_IN_GROUPS: &[&str] = &["", "scheduling.k8s.io"];

/// Names of the namespaces the set creates.
pub fn namespaces_created(set: &RenderedSet) -> BTreeSet<&str> {
    set.objects
        .iter()
        .filter(|o| o.kind == "Namespace")
        .map(|o| o.name.as_str())
        .collect()
}

/// Whether a live plan asks the server for a dry-run of `o`, given its live state `current`:
/// creates of custom resources (strict field validation catches a bad manifest at plan time
/// instead of half-way through apply), unless their namespace is created by this apply too; and
/// updates, except when the live object already carries every declared field and gpuctl drops
/// none (the apply would be a no-op) or the object belongs to another ApplySet (a conflict).
pub fn needs_dry_run(
    o: &RenderedObject,
    current: Option<&Value>,
    namespaces_created: &BTreeSet<&str>,
    set_id: &str,
) -> bool {
    match current {
        None => {
            o.namespace
                .as_deref()
                .is_none_or(|ns| !namespaces_created.contains(ns))
                && !BUILT_IN_GROUPS.contains(&o.group())
        }
        Some(current) => other_set(current, set_id).is_none() && !unchanged(o, current),
    }
}

/// Whether `o` is a child whose parent does not exist yet (`parent_live`: the parent's live state,
/// when `o` has a parent): it is created after its parent and never dry-run before, since
/// admission refuses it until the parent exists.
pub fn waits_for_parent(o: &RenderedObject, parent_live: Option<&Value>) -> bool {
    super::hierarchy::parent_ref(&o.api_version, &o.kind, &o.manifest).is_some()
        && parent_live.is_none()
}

/// Every rendered object's action, in apply order.
pub fn actions(set: &RenderedSet, live: &LiveView, set_id: &str) -> Vec<Action> {
    set.objects
        .iter()
        .map(|o| decide(o, live, set_id))
        .collect()
}

/// One object's action.
pub fn decide(o: &RenderedObject, live: &LiveView, set_id: &str) -> Action {
    if !live.serves(&o.type_ref()) {
        return action(
            ActionKind::CreateAfterCrd,
            o,
            None,
            vec![],
            Some(format!(
                "{} {} is not served yet; it is created once its CRD is installed",
                o.api_version, o.kind
            )),
        );
    }
    let id = o.object_ref();
    let dry_run = live.dry_run.get(&id);
    if live.get(&id).is_none()
        && let Some(parent) = super::hierarchy::parent_ref(&o.api_version, &o.kind, &o.manifest)
        && live.get(&parent).is_none()
    {
        let mut a = create(o, None);
        a.action = ActionKind::CreateAfterParent;
        a.reason = Some(format!(
            "{} {} is created after its parent {}, which does not exist yet",
            o.kind, o.name, parent.name
        ));
        return a;
    }
    match live.get(&id) {
        None => create(o, dry_run),
        Some(current) => update(o, current, dry_run, set_id),
    }
}

fn create(o: &RenderedObject, dry_run: Option<&DryRun>) -> Action {
    if let Some(DryRun::Conflict(message)) = dry_run {
        return action(ActionKind::Conflict, o, None, vec![], Some(message.clone()));
    }
    let desired = &o.manifest;
    let mut changes = flatten_create(diff::diff(&Value::Null, &strip_for_display(desired)));
    redact::redact_changes(&mut changes, &Value::Null, desired);
    action(ActionKind::Create, o, None, changes, None)
}

/// The ApplySet `current` belongs to when it is not `set_id`'s, described for a message.
fn other_set(current: &Value, set_id: &str) -> Option<String> {
    let labels = &current["metadata"]["labels"];
    let other = labels[applyset::PART_OF].as_str()?;
    (other != set_id).then(|| match labels[applyset::BLUEPRINT_LABEL].as_str() {
        Some(bp) => format!("blueprint `{bp}` (ApplySet {other})"),
        None => format!("ApplySet {other}"),
    })
}

/// The live object already carries every declared field exactly and gpuctl dropped nothing: a
/// server-side apply would be a no-op.
fn unchanged(o: &RenderedObject, current: &Value) -> bool {
    diff::project(current, &o.manifest) == o.manifest
        && diff::removed_fields(current, &o.manifest, FIELD_MANAGER).is_empty()
}

fn update(o: &RenderedObject, current: &Value, dry_run: Option<&DryRun>, set_id: &str) -> Action {
    let desired = &o.manifest;
    let rv = current["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    // A member of another ApplySet (another blueprint, or another tool's set) is not adopted
    // silently: applying would move it out of that set, whose next prune or plan would then fight
    // this one over it (KEP-3659 asks tools not to take over other sets' objects).
    if let Some(owner) = other_set(current, set_id) {
        return action(
            ActionKind::Conflict,
            o,
            rv,
            vec![],
            Some(format!(
                "already managed by {owner}; two blueprints must not declare the same object: remove it from one of them, or apply with --force-conflicts to move it to this blueprint"
            )),
        );
    }
    let mut removed = diff::removed_fields(current, desired, FIELD_MANAGER);
    redact::redact_changes(&mut removed, current, &Value::Null);
    let before = diff::project(current, desired);
    if before == *desired && removed.is_empty() {
        return action(ActionKind::NoOp, o, rv, vec![], None);
    }
    let after = match dry_run {
        Some(DryRun::Applied(v)) => diff::project(v, desired),
        Some(DryRun::Conflict(message)) => {
            let mut changes = diff::diff(&before, desired);
            redact::redact_changes(&mut changes, &before, desired);
            return action(ActionKind::Conflict, o, rv, changes, Some(message.clone()));
        }
        // Without a server to normalise the object, assume what the API server does for every
        // `omitempty` field: a false / zero / empty value gpuctl declares is not stored.
        None => diff::without_absent_zero_values(desired, current),
    };
    let mut changes = diff::diff(&before, &after);
    redact::redact_changes(&mut changes, &before, &after);
    changes.extend(removed);
    let kind = if changes.is_empty() {
        ActionKind::NoOp
    } else {
        ActionKind::Update
    };
    action(kind, o, rv, changes, None)
}

/// Members of the set the blueprint no longer declares: deletes, and a warning for each protected
/// kind kept (without `prune_protected`).
pub fn prunes(
    set: &RenderedSet,
    live: &LiveView,
    prune_protected: bool,
) -> (Vec<Action>, Vec<PlanFinding>) {
    let desired: BTreeSet<ObjectRef> = set.objects.iter().map(RenderedObject::object_ref).collect();
    let mut actions = Vec::new();
    let mut findings = Vec::new();
    for (id, obj) in live.members.iter().flatten() {
        if desired.contains(id) {
            continue;
        }
        if PROTECTED_KINDS.contains(&id.kind.as_str()) && !prune_protected {
            findings.push(PlanFinding::warning(format!(
                "{id} is no longer in the blueprint but is kept: {} objects are pruned only with --prune-protected",
                id.kind
            )));
            continue;
        }
        actions.push(Action {
            action: ActionKind::Delete,
            phase: None,
            api_version: obj["apiVersion"].as_str().unwrap_or_default().to_string(),
            kind: id.kind.clone(),
            namespace: id.namespace.clone(),
            name: id.name.clone(),
            resource_version: obj["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
            content_digest: None,
            changes: vec![],
            reason: Some("no longer declared by the blueprint".into()),
            manifest: None,
        });
    }
    // Children before their parents: admission refuses to delete a parent that has children.
    let actions = super::hierarchy::children_first(actions, |id| live.get(id).cloned());
    (actions, findings)
}

fn action(
    kind: ActionKind,
    o: &RenderedObject,
    rv: Option<String>,
    changes: Vec<Change>,
    reason: Option<String>,
) -> Action {
    Action {
        action: kind,
        phase: Some(o.phase),
        api_version: o.api_version.clone(),
        kind: o.kind.clone(),
        namespace: o.namespace.clone(),
        name: o.name.clone(),
        resource_version: rv,
        content_digest: None,
        changes,
        reason,
        manifest: Some(o.manifest.clone()),
    }
}

/// A new object shown without apiVersion/kind noise.
fn strip_for_display(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

/// A create is one change at the root; its fields are shown as additions.
pub(super) fn flatten_create(changes: Vec<Change>) -> Vec<Change> {
    match changes.into_iter().next() {
        Some(Change { after: Some(v), .. }) => {
            let mut out = Vec::new();
            leaves("", &v, &mut out);
            out
        }
        _ => vec![],
    }
}

fn leaves(path: &str, v: &Value, out: &mut Vec<Change>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(&diff::join(path, k), x, out);
            }
        }
        _ => out.push(Change {
            path: path.to_string(),
            before: None,
            after: Some(v.clone()),
        }),
    }
}
