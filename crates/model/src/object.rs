//! Object identity: which Kubernetes object a manifest, a live object, a plan action or a prune is
//! about. One type everywhere, so "the same object" means the same thing in plan, snapshot, apply
//! and prune (kube-core's `ObjectRef` and `GroupVersionKind` draw the same line).

use std::fmt;

use serde_json::Value;

/// Sets `value` at `path` (its keys, outermost first) of `tree`, making the objects on the way and
/// replacing a non-object in the way by one; an empty path sets nothing. The Helm values render
/// writes, the chart key trees of the facts catalog and the values import keeps are built with it.
pub fn set_in<'a>(
    tree: &mut serde_json::Map<String, Value>,
    path: impl IntoIterator<Item = &'a str>,
    value: Value,
) {
    let mut node = tree;
    let mut parts = path.into_iter().peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            node.insert(part.to_string(), value);
            return;
        }
        let entry = node
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(serde_json::Map::new());
        }
        node = entry.as_object_mut().expect("just made an object");
    }
}

/// [`set_in`] at a dotted path (`a.b.c`), for paths whose keys hold no dot.
pub fn set_path(tree: &mut serde_json::Map<String, Value>, path: &str, value: Value) {
    set_in(tree, path.split('.'), value);
}

/// The string values of a JSON object (labels, a node selector); other values and a non-object
/// give nothing.
pub fn string_map(v: &Value) -> std::collections::BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The API group of an `apiVersion` (`""` for the core group).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// An API type as discovery resolves it: `apiVersion` and `kind`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TypeRef {
    /// `apiVersion`, e.g. `kueue.x-k8s.io/v1beta2` or `v1`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
}

impl TypeRef {
    /// The type of `api_version` and `kind`.
    pub fn new(api_version: &str, kind: &str) -> TypeRef {
        TypeRef {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        }
    }

    /// API group (`""` for core).
    pub fn group(&self) -> &str {
        group_of(&self.api_version)
    }

    /// The GroupKind string of the ApplySet annotation: `Kind.group`, or `Kind` for core.
    pub fn group_kind(&self) -> String {
        group_kind(&self.api_version, &self.kind)
    }
}

/// The GroupKind string of the ApplySet annotation: `Kind.group`, or `Kind` for core.
pub fn group_kind(api_version: &str, kind: &str) -> String {
    match group_of(api_version) {
        "" => kind.to_string(),
        group => format!("{kind}.{group}"),
    }
}

/// One object: API group, kind, namespace and name. The version is not part of an object's
/// identity (one object is served at several versions). Ordered by kind, namespace, name, then
/// group, which is the order plans list prunes in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// API group (`""` for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace (`None`: cluster-scoped).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// The object `name` of `kind` (in `api_version`'s group), in `namespace`.
    pub fn new(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef {
            group: group_of(api_version).to_string(),
            kind: kind.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    /// The identity of a manifest or live object; `None` when it lacks a string `apiVersion`,
    /// `kind` or `metadata.name`. A namespace that is not a string counts as none.
    pub fn of(v: &Value) -> Option<ObjectRef> {
        Some(ObjectRef::new(
            v["apiVersion"].as_str()?,
            v["kind"].as_str()?,
            v["metadata"]["namespace"].as_str(),
            v["metadata"]["name"].as_str()?,
        ))
    }

    fn key(&self) -> (&str, Option<&str>, &str, &str) {
        (
            &self.kind,
            self.namespace.as_deref(),
            &self.name,
            &self.group,
        )
    }
}

impl PartialOrd for ObjectRef {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ObjectRef {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// `Kind/namespace/name` or `Kind/name`, for messages.
impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{ns}/{}", self.kind, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_path_makes_the_objects_on_the_way_and_replaces_what_is_in_the_way() {
        let mut tree = json!({"a": {"keep": 1}, "b": "scalar"});
        let m = tree.as_object_mut().unwrap();
        set_path(m, "a.b.c", json!(2));
        set_path(m, "b.x", json!(3));
        set_path(m, "top", json!(4));
        set_in(m, ["nvidia.com/gpu", "x.y"], json!(5));
        set_in(m, [], json!(6));
        assert_eq!(
            tree,
            json!({"a": {"keep": 1, "b": {"c": 2}}, "b": {"x": 3}, "top": 4, "nvidia.com/gpu": {"x.y": 5}})
        );
    }

    #[test]
    fn identity_ignores_the_version_and_keeps_the_group() {
        let a = ObjectRef::new("kueue.x-k8s.io/v1beta1", "ClusterQueue", None, "q");
        let b = ObjectRef::of(
            &json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}}),
        );
        assert_eq!(Some(a.clone()), b);
        let other_group = ObjectRef::new("example.com/v1", "ClusterQueue", None, "q");
        assert_ne!(a, other_group);
        assert_eq!(a.to_string(), "ClusterQueue/q");
        assert_eq!(
            ObjectRef::new("v1", "ConfigMap", Some("ns"), "c").to_string(),
            "ConfigMap/ns/c"
        );
    }

    #[test]
    fn objects_sort_by_kind_namespace_name() {
        let mut v = [
            ObjectRef::new("v1", "Namespace", None, "b"),
            ObjectRef::new("v1", "ConfigMap", Some("z"), "a"),
            ObjectRef::new("v1", "Namespace", None, "a"),
            ObjectRef::new("v1", "ConfigMap", None, "x"),
        ];
        v.sort();
        let shown: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["ConfigMap/x", "ConfigMap/z/a", "Namespace/a", "Namespace/b"]
        );
    }

    #[test]
    fn group_kinds_are_kind_dot_group() {
        assert_eq!(group_kind("v1", "Namespace"), "Namespace");
        assert_eq!(
            TypeRef::new("kueue.x-k8s.io/v1beta2", "ClusterQueue").group_kind(),
            "ClusterQueue.kueue.x-k8s.io"
        );
    }
}
