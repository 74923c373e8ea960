//! Object decisions: what happens to each rendered object (create, create after its CRD, update,
//! no-op, conflict) and which members of the ApplySet are pruned.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::Value;

use super::diff::{self, Change};
use super::{Action, ActionKind, FIELD_MANAGER, PROTECTED_KINDS, PlanFinding, redact};
use crate::live::{DryRun, LiveView};
use gpuctl_model::applyset;
use gpuctl_model::object::ObjectRef;
use gpuctl_pipeline::render::{RenderedObject, RenderedSet};

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
        Some(current) => {
            other_set(current, set_id).is_none()
                && !unchanged(o, &desired_manifest(o, Some(current)), current)
                // The server refuses the update (a field it keeps immutable changes): replaced.
                && replaced(o, current).is_none()
        }
    }
}

/// The changes of an update decided without a server: the declared fields against the live ones,
/// assuming what the API server does for `omitempty` fields, plus the fields gpuctl drops.
fn offline_changes(o: &RenderedObject, current: &Value) -> Vec<Change> {
    let desired = without_membership(&desired_manifest(o, Some(current)));
    let before = diff::project(current, &desired);
    let after = diff::without_absent_zero_values(&desired, current);
    let mut changes = diff::value_changes(&before, &after);
    changes.extend(diff::removed_fields(current, &desired, FIELD_MANAGER));
    changes
}

/// Whether `path` is `field` or a field under it (`spec.nodeLabels."a/b"` under `spec.nodeLabels`).
fn under(path: &str, field: &str) -> bool {
    path.strip_prefix(field)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

/// The immutable fields (`profiles/limits.yaml`, `immutable_fields`) an update of `current` to
/// `o` changes: the API server refuses such an update, so the object is replaced (deleted, then
/// created). `None`: an ordinary update.
pub fn replaced(o: &RenderedObject, current: &Value) -> Option<Vec<String>> {
    let facts = &gpuctl_model::profiles::Catalog::embedded()
        .limits()
        .immutable_fields;
    let paths = facts.paths_of(o.group(), &o.kind, current);
    if paths.is_empty() {
        return None;
    }
    let changes = offline_changes(o, current);
    let mut fields: Vec<String> = paths
        .iter()
        .filter(|p| changes.iter().any(|c| under(&c.path, p)))
        .map(|p| p.to_string())
        .collect();
    fields.dedup();
    (!fields.is_empty()).then_some(fields)
}

/// Labels gpuctl puts on what it creates only to say who made it; an object it adopts keeps
/// its own (adoption never changes a field's value), so they are declared only where the live
/// object already has them as gpuctl writes them, or gpuctl already manages them.
const INFORMATIONAL_LABELS: &[&str] = &[applyset::MANAGED_BY, applyset::BLUEPRINT_LABEL];

/// The manifest gpuctl applies for `o` given its live state: the rendered one, without the
/// informational labels an existing object does not carry and gpuctl does not manage (an adopted
/// object). Plans, their dry-runs and apply all use it.
pub fn desired_manifest(o: &RenderedObject, current: Option<&Value>) -> Value {
    let mut desired = o.manifest.clone();
    let Some(current) = current else {
        return desired;
    };
    // A false / zero / empty value the live object does not store (the API server omits such
    // `omitempty` fields) and gpuctl does not manage is left undeclared: declaring it changes
    // nothing, and another manager that applied it owns it (an adopted object's `globalDefault:
    // false`), so declaring it would be a conflict over a value both agree on.
    let owned: Vec<&Value> = current["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["manager"] == FIELD_MANAGER)
        .map(|m| &m["fieldsV1"])
        .collect();
    strip_unowned_absent_zeros(&mut desired, current, &owned);
    for key in INFORMATIONAL_LABELS {
        let live = &current["metadata"]["labels"][*key];
        if *live == desired["metadata"]["labels"][*key] || manages_label(current, key) {
            continue;
        }
        if let Some(labels) = desired["metadata"]["labels"].as_object_mut() {
            labels.remove(*key);
        }
    }
    desired
}

fn strip_unowned_absent_zeros(desired: &mut Value, live: &Value, owned: &[&Value]) {
    let Some(d) = desired.as_object_mut() else {
        return;
    };
    let Some(l) = live.as_object() else {
        return;
    };
    // Cheapest tests first: this runs twice for every object of a plan.
    d.retain(|k, v| {
        l.contains_key(k)
            || !super::diff::is_zero(v)
            || owned.iter().any(|o| o.get(format!("f:{k}")).is_some())
    });
    for (k, v) in d.iter_mut() {
        if !v.is_object() {
            continue;
        }
        if let Some(lv) = l.get(k) {
            let f = format!("f:{k}");
            let inner: Vec<&Value> = owned.iter().filter_map(|o| o.get(&f)).collect();
            strip_unowned_absent_zeros(v, lv, &inner);
        }
    }
}

/// Whether gpuctl's field manager owns label `key` of `current`.
fn manages_label(current: &Value, key: &str) -> bool {
    current["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["manager"] == FIELD_MANAGER)
        .any(|m| m["fieldsV1"]["f:metadata"]["f:labels"][format!("f:{key}")].is_object())
}

/// An object no ApplySet owns and gpuctl never wrote: taking it over is an adoption. One that
/// gpuctl's field manager wrote outside the set (a driver upgrade's green NVIDIADriver CR) is
/// gpuctl's already, and joins the set as an ordinary update.
fn adoptable(current: &Value) -> bool {
    !current["metadata"]["labels"][applyset::PART_OF].is_string()
        && !current["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| {
                m["manager"] == FIELD_MANAGER
                    || m["manager"] == gpuctl_model::names::UPGRADE_FIELD_MANAGER
            })
}

/// `v` without the ApplySet membership label.
fn without_membership(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(labels) = v["metadata"]["labels"].as_object_mut() {
        labels.remove(applyset::PART_OF);
        if labels.is_empty()
            && let Some(meta) = v["metadata"].as_object_mut()
        {
            meta.remove("labels");
        }
    }
    v
}

/// Whether `o` is a child whose parent does not exist yet (`parent_live`: the parent's live state,
/// when `o` has a parent): it is created after its parent and never dry-run before, since
/// admission refuses it until the parent exists.
pub fn waits_for_parent(o: &RenderedObject, parent_live: Option<&Value>) -> bool {
    super::hierarchy::parent_ref(&o.api_version, &o.kind, &o.manifest).is_some()
        && parent_live.is_none()
}

/// Objects below which a plan decides them on one thread (starting threads costs more).
const PARALLEL_MIN: usize = 512;

/// Every rendered object's action, in apply order, with the digest of the live object it was
/// decided against (apply's stale check). Decided on up to eight threads for large sets, each a
/// contiguous chunk, so the order and the bytes are the same as on one.
pub fn actions(set: &RenderedSet, live: &LiveView, set_id: &str) -> Vec<Action> {
    let decide_all = |chunk: &[RenderedObject]| -> Vec<Action> {
        chunk
            .iter()
            .map(|o| {
                let mut a = decide(o, live, set_id);
                if a.resource_version.is_some() {
                    a.content_digest = live.get(&a.object_ref()).map(super::stale::content_digest);
                }
                a
            })
            .collect()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if threads < 2 || set.objects.len() < PARALLEL_MIN {
        return decide_all(&set.objects);
    }
    let size = set.objects.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = set
            .objects
            .chunks(size)
            .map(|chunk| scope.spawn(move || decide_all(chunk)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
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

/// The live object already carries every declared field with the declared value (quantities
/// compared by value: `1k` live is the `"1000"` declared) and gpuctl dropped nothing: a
/// server-side apply would change nothing. A built-in kind's false, zero or empty value the live
/// object does not have counts as carried: the API server never stores those `omitempty` fields
/// (a PriorityClass's `globalDefault: false`), so asking it again on every plan learns nothing;
/// a custom resource stores what it is sent, so there the difference is asked about.
fn unchanged(o: &RenderedObject, desired: &Value, current: &Value) -> bool {
    // Not in any set yet: the membership label alone is an adoption, decided without a dry-run
    // (server-side apply of values equal to the live ones never conflicts). Borrowed otherwise:
    // a plan asks this of every object, and a copy of each costs a 4,000-object plan
    // measurably.
    let shape = if !adoptable(current) {
        Cow::Borrowed(desired)
    } else {
        Cow::Owned(without_membership(desired))
    };
    let shape = if BUILT_IN_GROUPS.contains(&o.group()) {
        Cow::Owned(diff::without_absent_zero_values(&shape, current))
    } else {
        shape
    };
    diff::same_values(&diff::project(current, &shape), &shape)
        && diff::removed_fields(current, desired, FIELD_MANAGER).is_empty()
}

fn update(o: &RenderedObject, current: &Value, dry_run: Option<&DryRun>, set_id: &str) -> Action {
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
    let manifest = desired_manifest(o, Some(current));
    // An object in no ApplySet is adopted: the membership label is what joining changes, so it
    // is not a field change; every other difference is an ordinary update.
    let adopt = adoptable(current);
    let adopted;
    let desired = if adopt {
        adopted = without_membership(&manifest);
        &adopted
    } else {
        &manifest
    };
    // Every path ends here once, so the manifest moves into its action instead of a copy.
    let with = |mut a: Action, manifest: Value| {
        a.manifest = Some(manifest);
        a.adopt = adopt && matches!(a.action, ActionKind::Adopt | ActionKind::Update);
        a
    };
    let unchanged_kind = if adopt {
        ActionKind::Adopt
    } else {
        ActionKind::NoOp
    };
    let mut removed = diff::removed_fields(current, desired, FIELD_MANAGER);
    redact::redact_changes(&mut removed, current, &Value::Null);
    let before = diff::project(current, desired);
    if diff::same_values(&before, desired) && removed.is_empty() {
        return with(
            bare(unchanged_kind, o, rv, vec![], adopt_reason(adopt)),
            manifest,
        );
    }
    let after = match dry_run {
        Some(DryRun::Applied(v)) => diff::project(v, desired),
        Some(DryRun::Conflict(message)) => {
            let mut changes = diff::value_changes(&before, desired);
            redact::redact_changes(&mut changes, &before, desired);
            return with(
                bare(ActionKind::Conflict, o, rv, changes, Some(message.clone())),
                manifest,
            );
        }
        // Without a server to normalise the object, assume what the API server does for every
        // `omitempty` field: a false / zero / empty value gpuctl declares is not stored.
        None => diff::without_absent_zero_values(desired, current),
    };
    // Quantities by value, with or without a dry-run: Kueue's webhook answers an update with the
    // spelling it was sent (`"1000"` against the live `1k`), a change the server would not make.
    let mut changes = diff::value_changes(&before, &after);
    redact::redact_changes(&mut changes, &before, &after);
    changes.extend(removed);
    if changes.is_empty() {
        return with(
            bare(unchanged_kind, o, rv, vec![], adopt_reason(adopt)),
            manifest,
        );
    }
    if let Some(fields) = replaced(o, current) {
        let mut a = with(bare(ActionKind::Update, o, rv, changes, None), manifest);
        a.replace = true;
        a.reason = Some(format!(
            "{} cannot change on an existing {} (the API server refuses it: field is immutable): apply deletes it and creates it again",
            fields.join(", "),
            o.kind
        ));
        return a;
    }
    let reason = adopt.then(|| {
        "exists outside any ApplySet: apply --adopt takes it over and changes these fields"
            .to_string()
    });
    with(bare(ActionKind::Update, o, rv, changes, reason), manifest)
}

fn adopt_reason(adopt: bool) -> Option<String> {
    adopt.then(|| {
        "exists outside any ApplySet with the declared fields: apply --adopt adds it to this blueprint's set, no value changes".to_string()
    })
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
            findings.push(PlanFinding::warning("GPU430", format!(
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
            adopt: false,
            replace: false,
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
        manifest: Some(o.manifest.clone()),
        ..bare(kind, o, rv, changes, reason)
    }
}

/// An action without its manifest (an update's is the one [`desired_manifest`] made).
fn bare(
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
        manifest: None,
        adopt: false,
        replace: false,
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
