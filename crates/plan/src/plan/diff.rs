//! Field-level diffs restricted to what gpuctl manages: the live object is projected onto the shape
//! of the desired manifest, so server defaults and other managers' fields never show as changes;
//! fields gpuctl managed before (from `managedFields`) but no longer declares show as removals.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One changed field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Dotted path, e.g. `spec.hard."requests.nvidia.com/gpu"`.
    pub path: String,
    /// Value before (absent when added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// Value after (absent when removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

/// Metadata fields the server owns; never part of a diff.
const SERVER_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// `target` reduced to the keys present in `shape` (recursively; lists element-wise when lengths
/// match, otherwise whole).
pub fn project(target: &Value, shape: &Value) -> Value {
    match (target, shape) {
        (Value::Object(t), Value::Object(s)) => {
            let mut out = serde_json::Map::new();
            for (k, sv) in s {
                if let Some(tv) = t.get(k) {
                    out.insert(k.clone(), project(tv, sv));
                }
            }
            Value::Object(out)
        }
        (Value::Array(t), Value::Array(s)) if t.len() == s.len() => {
            Value::Array(t.iter().zip(s).map(|(a, b)| project(a, b)).collect())
        }
        _ => target.clone(),
    }
}

/// Leaf-level differences between `before` and `after`.
pub fn diff(before: &Value, after: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("", Some(before), Some(after), &mut out);
    out
}

fn walk(path: &str, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<Change>) {
    match (before, after) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => {
            let keys: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for k in keys {
                if path.is_empty() && k == "status" {
                    continue;
                }
                if path == "metadata" && SERVER_METADATA.contains(&k.as_str()) {
                    continue;
                }
                walk(&join(path, k), b.get(k), a.get(k), out);
            }
        }
        (Some(Value::Array(b)), Some(Value::Array(a))) if b.len() == a.len() => {
            for (i, (x, y)) in b.iter().zip(a).enumerate() {
                walk(&format!("{path}[{i}]"), Some(x), Some(y), out);
            }
        }
        (b, a) if b == a => {}
        (b, a) => out.push(Change {
            path: path.to_string(),
            before: b.cloned(),
            after: a.cloned(),
        }),
    }
}

/// Paths in diffs are written like blueprint paths.
pub use gpuctl_model::blueprint::yaml::join;

/// Object-key paths gpuctl owns in `live` according to its `managedFields` entry (operation Apply,
/// manager `manager`). List entries (`k:`, `v:`, `i:`) end a path: the list is owned as a whole.
pub fn managed_paths(live: &Value, manager: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(entries) = live["metadata"]["managedFields"].as_array() else {
        return out;
    };
    for e in entries {
        if e["manager"] == manager && e["operation"] == "Apply" {
            collect(&e["fieldsV1"], "", &mut out);
        }
    }
    out
}

fn collect(fields: &Value, path: &str, out: &mut BTreeSet<String>) {
    let Some(map) = fields.as_object() else {
        return;
    };
    let mut leaf = true;
    for (k, v) in map {
        if let Some(name) = k.strip_prefix("f:") {
            leaf = false;
            collect(v, &join(path, name), out);
        }
    }
    if leaf && !path.is_empty() {
        out.insert(path.to_string());
    }
}

/// True when `path` (or an ancestor) exists as a key path in `shape`.
pub fn has_path(shape: &Value, path: &str) -> bool {
    let mut cur = shape;
    for seg in split(path) {
        match cur.get(seg.as_str()) {
            Some(v) => cur = v,
            None => return false,
        }
        if !cur.is_object() {
            return true;
        }
    }
    true
}

/// Value at a dotted path (quoted segments allowed).
pub fn get_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for seg in split(path) {
        cur = cur.get(seg.as_str())?;
    }
    Some(cur)
}

fn split(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in path.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Fields whose values (or whose maps' values) are Kubernetes quantities in the objects gpuctl
/// renders: ResourceQuota `hard`, LimitRange `default`/`defaultRequest`/`max`/`min`, container
/// `requests`/`limits`, Kueue's `nominalQuota`/`borrowingLimit`/`lendingLimit` and fair-sharing
/// `weight`, Volcano's `capability`/`deserved`/`guarantee` (and its integer `weight`). API field
/// names, not facts that change with versions.
pub const QUANTITY_FIELDS: &[&str] = &[
    "hard",
    "default",
    "defaultRequest",
    "max",
    "min",
    "requests",
    "limits",
    "nominalQuota",
    "borrowingLimit",
    "lendingLimit",
    "weight",
    "capability",
    "deserved",
    "guarantee",
];

/// Whether a change only rewrites a quantity (`"1000"` and `1k`, `1Gi` and `1024Mi`, `8` and
/// `"8"`): equal as Kubernetes quantities. Every plan compares with this, live ones too: the API
/// server stores built-in objects' quantities in canonical form, but Kueue's webhooks keep the
/// form an update sends (`"1000"`) while a create stores `1k`, so a dry-run answer can differ
/// from the live object in spelling alone; applying it would change nothing. Only fields that
/// hold quantities count ([`QUANTITY_FIELDS`] on the path): a version `"1.10"` elsewhere is text,
/// not the quantity 1.1.
pub fn same_quantity(c: &Change) -> bool {
    let in_quantity_field = split(&c.path).iter().any(|part| {
        let name = part.split('[').next().unwrap_or(part);
        QUANTITY_FIELDS.contains(&name)
    });
    in_quantity_field
        && match (&c.before, &c.after) {
            (Some(a), Some(b)) => gpuctl_model::quantity::same_value(a, b),
            _ => false,
        }
}

/// The changes from `before` to `after` that change a value: [`diff`] without the quantities
/// written another way ([`same_quantity`]).
pub fn value_changes(before: &Value, after: &Value) -> Vec<Change> {
    let mut changes = diff(before, after);
    changes.retain(|c| !same_quantity(c));
    changes
}

/// Whether `before` and `after` hold the same values ([`value_changes`] is empty).
pub fn same_values(before: &Value, after: &Value) -> bool {
    before == after || value_changes(before, after).is_empty()
}

/// `desired` without the false / zero / empty values that `live` does not have: the API server
/// omits such `omitempty` fields when it stores an object, so they are not changes.
pub fn without_absent_zero_values(desired: &Value, live: &Value) -> Value {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => {
            let mut out = serde_json::Map::new();
            for (k, v) in d {
                match l.get(k) {
                    None if is_zero(v) => {}
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                    Some(lv) => {
                        out.insert(k.clone(), without_absent_zero_values(v, lv));
                    }
                }
            }
            Value::Object(out)
        }
        _ => desired.clone(),
    }
}

/// A false, zero, empty or null value: what the API server leaves out of an `omitempty` field.
pub(super) fn is_zero(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Null => true,
    }
}

/// Fields gpuctl managed in `live` that `desired` no longer declares: SSA removes them.
pub fn removed_fields(live: &Value, desired: &Value, manager: &str) -> Vec<Change> {
    managed_paths(live, manager)
        .into_iter()
        .filter(|p| !p.starts_with("metadata.managedFields") && !has_path(desired, p))
        // Keep the shallowest removed path only.
        .fold(Vec::<String>::new(), |mut acc, p| {
            if !acc.iter().any(|a| p.starts_with(&format!("{a}."))) {
                acc.push(p);
            }
            acc
        })
        .into_iter()
        .map(|p| Change {
            before: get_path(live, &p).cloned(),
            after: None,
            path: p,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_foreign_fields_are_not_changes() {
        let desired = json!({"spec": {"hard": {"pods": "50"}}, "metadata": {"name": "q", "labels": {"a": "b"}}});
        let live = json!({"spec": {"hard": {"pods": "50", "other": "1"}, "scopes": []},
                          "metadata": {"name": "q", "labels": {"a": "b", "x": "y"}, "resourceVersion": "7"},
                          "status": {"used": {}}});
        assert!(diff(&project(&live, &desired), &project(&desired, &desired)).is_empty());
    }

    #[test]
    fn changed_added_and_quoted_paths() {
        let desired = json!({"spec": {"hard": {"requests.nvidia.com/gpu": "32", "pods": "50"}}});
        let live = json!({"spec": {"hard": {"requests.nvidia.com/gpu": "16"}}});
        let d = diff(&project(&live, &desired), &desired);
        assert_eq!(d.len(), 2);
        assert_eq!(d[1].path, "spec.hard.\"requests.nvidia.com/gpu\"");
        assert_eq!(d[1].before, Some(json!("16")));
        assert_eq!(d[0].path, "spec.hard.pods");
        assert_eq!(d[0].before, None);
    }

    #[test]
    fn managed_fields_give_removals() {
        let live = json!({
            "metadata": {"managedFields": [
                {"manager": "gpuctl", "operation": "Apply", "fieldsV1": {"f:spec": {"f:hard": {"f:pods": {}, "f:requests.nvidia.com/gpu": {}}}}},
                {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:hard": {"f:secrets": {}}}}}
            ]},
            "spec": {"hard": {"pods": "50", "requests.nvidia.com/gpu": "8", "secrets": "3"}}
        });
        let desired = json!({"spec": {"hard": {"pods": "50"}}});
        let r = removed_fields(&live, &desired, "gpuctl");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].path, "spec.hard.\"requests.nvidia.com/gpu\"");
        assert_eq!(r[0].before, Some(json!("8")));
    }

    #[test]
    fn absent_zero_values_are_not_changes_offline() {
        let desired = json!({"value": 10, "globalDefault": false, "spec": {"x": [], "y": true}});
        let live = json!({"value": 10, "spec": {"y": false}});
        let after = without_absent_zero_values(&desired, &live);
        assert_eq!(after, json!({"value": 10, "spec": {"y": true}}));
        assert_eq!(diff(&project(&live, &after), &after).len(), 1);
    }
}
