//! The blueprint's JSON Schema (what `gpuctl schema` prints), and the walks over it that the loader
//! and the field reference need: the field list, the schema of one path, a stand-in value.
//!
//! Everything here reads the schema `schemars` derives from the serde model, so the reference,
//! the loader's hints and the editor schema cannot disagree with what the loader accepts.

use serde_json::{Map, Value, json};

use super::model::Blueprint;
use super::yaml::{Segment, split_path};

/// The schema keyword (Kubernetes' structural-schema vocabulary, as CRDs and server-side apply use
/// it) that marks a list whose items are merged by key: `map` (keyed), `atomic` (replaced whole).
pub const LIST_TYPE: &str = "x-kubernetes-list-type";
/// The fields that identify an item of a `map` list (overlays merge items with equal keys).
pub const LIST_MAP_KEYS: &str = "x-kubernetes-list-map-keys";

/// The keys of the list at `path` (a path as the source tree writes it, any index for items), when
/// overlays merge it item by item; `None` for a list replaced whole.
pub fn list_map_keys(root: &Value, path: &str) -> Option<Vec<String>> {
    let (node, _) = at(root, path)?;
    (node.get(LIST_TYPE).and_then(Value::as_str) == Some("map")).then_some(())?;
    let keys = node.get(LIST_MAP_KEYS)?.as_array()?;
    Some(
        keys.iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}

/// The JSON Schema of the blueprint, derived from the serde model.
pub fn json() -> Value {
    serde_json::to_value(schemars::schema_for!(Blueprint)).unwrap_or(Value::Null)
}

/// One field of the blueprint, as the reference lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Path with `[]` for list items, e.g. `spec.nodePools[].gpu.model`.
    pub path: String,
    /// The field's name (last step of the path).
    pub name: String,
    /// The field's type in words.
    pub ty: String,
    /// Whether the field must be written.
    pub required: bool,
    /// The default gpuctl applies when it is left out.
    pub default: Option<Value>,
    /// Accepted values and what each means, for fields with a fixed set.
    pub allowed: Vec<(String, String)>,
    /// What the field is.
    pub description: String,
    /// Examples the model declares (`#[schemars(example = ...)]`).
    pub examples: Vec<Value>,
    /// Whether the field holds named fields of its own (listed after it).
    pub has_fields: bool,
    /// For a list overlays merge item by item (`x-kubernetes-list-type: map`), the fields that
    /// identify an item; empty for every other field.
    pub merge_keys: Vec<String>,
}

/// Every field of the blueprint, depth first in declaration order.
pub fn fields() -> Vec<Field> {
    let root = json();
    let mut out = Vec::new();
    walk_fields(&root, &root, "", &mut out);
    out
}

fn walk_fields(root: &Value, schema: &Value, path: &str, out: &mut Vec<Field>) {
    let schema = resolve(root, schema);
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, prop) in props {
        let field_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        let inner = non_null(root, prop);
        let description = prop
            .get("description")
            .or_else(|| inner.get("description"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let (item_path, item) = element(root, &inner, &field_path);
        let has_fields = resolve(root, &item).get("properties").is_some();
        out.push(Field {
            path: field_path.clone(),
            name: name.clone(),
            ty: type_name(root, prop),
            required: required.contains(&name.as_str()),
            default: prop.get("default").cloned(),
            allowed: allowed(root, &item),
            description,
            examples: prop
                .get("examples")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            has_fields,
            merge_keys: [prop, &inner]
                .iter()
                .find(|p| p.get(LIST_TYPE).and_then(Value::as_str) == Some("map"))
                .and_then(|p| p.get(LIST_MAP_KEYS))
                .and_then(Value::as_array)
                .map(|k| {
                    k.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        });
        if has_fields {
            walk_fields(root, &item, &item_path, out);
        }
    }
}

/// A list's items (`path[]`) or the value itself.
fn element(root: &Value, schema: &Value, path: &str) -> (String, Value) {
    let s = resolve(root, schema);
    if s.get("type").and_then(Value::as_str) == Some("array")
        && let Some(items) = s.get("items")
    {
        return (format!("{path}[]"), non_null(root, items));
    }
    (path.to_string(), s)
}

/// Follows a `$ref` into `$defs`.
fn resolve(root: &Value, schema: &Value) -> Value {
    let mut s = schema.clone();
    for _ in 0..16 {
        let Some(r) = s.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let name = r.rsplit('/').next().unwrap_or_default();
        match root.get("$defs").and_then(|d| d.get(name)) {
            Some(def) => s = def.clone(),
            None => break,
        }
    }
    s
}

/// The schema without its `null` alternative (an `Option` field), resolved.
fn non_null(root: &Value, schema: &Value) -> Value {
    let s = resolve(root, schema);
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        let rest: Vec<&Value> = any
            .iter()
            .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if rest.len() == 1 {
            return resolve(root, rest[0]);
        }
    }
    if let Some(types) = s.get("type").and_then(Value::as_array) {
        let rest: Vec<&Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .collect();
        if rest.len() == 1 {
            let mut s = s.clone();
            s["type"] = rest[0].clone();
            return s;
        }
    }
    s
}

/// Accepted values of an enum schema, with their descriptions.
fn allowed(root: &Value, schema: &Value) -> Vec<(String, String)> {
    let s = resolve(root, schema);
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    if let Some(one_of) = s.get("oneOf").and_then(Value::as_array) {
        return one_of
            .iter()
            .filter_map(|o| {
                let o = resolve(root, o);
                let value = o
                    .get("const")
                    .or_else(|| o.get("enum").and_then(|e| e.get(0)))?;
                let d = o.get("description").and_then(Value::as_str).unwrap_or("");
                Some((text(value), d.to_string()))
            })
            .collect();
    }
    s.get("enum")
        .and_then(Value::as_array)
        .map(|e| e.iter().map(|v| (text(v), String::new())).collect())
        .unwrap_or_default()
}

/// The type of a schema in words.
fn type_name(root: &Value, schema: &Value) -> String {
    let s = non_null(root, schema);
    if !allowed(root, &s).is_empty() {
        return "one of the listed values".into();
    }
    if s == Value::Bool(true) || s.as_object().is_some_and(Map::is_empty) {
        return "any YAML value".into();
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        let names: Vec<String> = any.iter().map(|a| type_name(root, a)).collect();
        return names.join(" or ");
    }
    match s.get("type").and_then(Value::as_str) {
        Some("string") => "string".into(),
        Some("boolean") => "`true` or `false`".into(),
        Some("number") => "number".into(),
        Some("integer") => match s.get("format").and_then(Value::as_str) {
            Some("uint32") => "whole number, 0 to 4294967295".into(),
            Some("uint64") => "whole number, 0 or more".into(),
            _ => "whole number".into(),
        },
        Some("array") => match s.get("items") {
            Some(items) => format!("list of {}", plural(&type_name(root, items))),
            None => "list".into(),
        },
        Some("object") if s.get("properties").is_some() => "mapping (fields below)".into(),
        Some("object") => match s.get("additionalProperties") {
            Some(v) if v.is_object() => format!("mapping: name → {}", type_name(root, v)),
            _ => "mapping".into(),
        },
        _ => "any YAML value".into(),
    }
}

fn plural(ty: &str) -> String {
    match ty {
        "string" => "strings".into(),
        "mapping (fields below)" => "mappings (fields below)".into(),
        t if t.starts_with("whole number") => t.replacen("whole number", "whole numbers", 1),
        t => format!("values ({t})"),
    }
}

/// The schema of the value at `path` (a loader path with indices, `spec.nodePools[2].gpu`), and
/// whether that value is a field its mapping requires.
pub fn at(root: &Value, path: &str) -> Option<(Value, bool)> {
    let mut schema = resolve(root, root);
    let mut required = false;
    for seg in split_path(path) {
        let s = non_null(root, &schema);
        let next = match seg {
            Segment::Index(_) => {
                required = false;
                s.get("items").cloned()
            }
            Segment::Key(k) => {
                if let Some(p) = s.get("properties").and_then(|p| p.get(&k)) {
                    required = s
                        .get("required")
                        .and_then(Value::as_array)
                        .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(&k)));
                    Some(p.clone())
                } else {
                    required = false;
                    s.get("additionalProperties")
                        .filter(|a| a.is_object())
                        .cloned()
                }
            }
        }?;
        schema = next;
    }
    // A property's own default and description sit beside its `$ref`: keep them.
    let mut out = non_null(root, &schema);
    if let Some(obj) = out.as_object_mut() {
        for key in ["default", "description", LIST_TYPE, LIST_MAP_KEYS] {
            if let Some(v) = schema.get(key) {
                obj.insert(key.to_string(), v.clone());
            }
        }
    }
    Some((out, required))
}

/// A value the schema accepts, to stand in for a missing or unusable one so the rest of the
/// document still loads: the default when there is one, else the first accepted value, an empty
/// string, zero, an empty list, or a mapping of stand-ins for its required fields.
pub fn stand_in(root: &Value, schema: &Value) -> Value {
    stand_in_depth(root, schema, 0)
}

fn stand_in_depth(root: &Value, schema: &Value, depth: usize) -> Value {
    let s = non_null(root, schema);
    if depth > 32 {
        return Value::Null;
    }
    if let Some(d) = s.get("default") {
        return d.clone();
    }
    if let Some((first, _)) = allowed(root, &s).into_iter().next() {
        return Value::String(first);
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array)
        && let Some(first) = any.first()
    {
        return stand_in_depth(root, first, depth + 1);
    }
    match s.get("type").and_then(Value::as_str) {
        Some("string") => json!(""),
        Some("boolean") => json!(false),
        Some("integer" | "number") => json!(0),
        Some("array") => json!([]),
        Some("object") => {
            let mut m = Map::new();
            if let (Some(props), Some(req)) = (
                s.get("properties").and_then(Value::as_object),
                s.get("required").and_then(Value::as_array),
            ) {
                for r in req.iter().filter_map(Value::as_str) {
                    if let Some(p) = props.get(r) {
                        m.insert(r.to_string(), stand_in_depth(root, p, depth + 1));
                    }
                }
            }
            Value::Object(m)
        }
        _ => Value::Null,
    }
}

/// A loader path with its list indices written `[]`: `spec.nodePools[2].gpu` ->
/// `spec.nodePools[].gpu`, the form the field reference uses.
pub fn field_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    let mut in_quote = false;
    for c in path.chars() {
        match c {
            '"' => {
                in_quote = !in_quote;
                out.push(c);
            }
            '[' if !in_quote => {
                in_index = true;
                out.push('[');
            }
            ']' if !in_quote && in_index => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_cover_the_model_with_types_defaults_and_values() {
        let f = fields();
        let get = |p: &str| {
            f.iter()
                .find(|x| x.path == p)
                .unwrap_or_else(|| panic!("{p}"))
        };
        assert!(get("spec.kubernetes.version").required);
        assert_eq!(get("spec.kubernetes.version").ty, "string");
        let ns = get("spec.gpuOperator.namespace");
        assert!(!ns.required);
        assert_eq!(ns.default, Some(json!("gpu-operator")));
        let mode = get("spec.nodePools[].partitioning.mode");
        let values: Vec<&str> = mode.allowed.iter().map(|(v, _)| v.as_str()).collect();
        assert_eq!(values, ["none", "mig", "time-slicing", "mps"]);
        assert!(
            get("spec.nodePools[].gpu.count")
                .ty
                .starts_with("whole number")
        );
        assert!(
            get("spec.tenants[].quota")
                .ty
                .starts_with("mapping: name →")
        );
        assert!(get("spec.nodePools").ty.starts_with("list of mappings"));
        assert!(get("spec.nodePools").has_fields);
    }

    #[test]
    fn at_finds_the_schema_of_a_loader_path() {
        let root = json();
        let (s, required) = at(&root, "spec.nodePools[3].nodes").expect("path");
        assert!(required);
        assert_eq!(s["type"], "integer");
        let (_, required) = at(&root, "spec.nodePools[0].role").expect("path");
        assert!(!required);
        assert!(at(&root, "spec.nodePools[0].nope").is_none());
        let (s, _) = at(&root, "spec.tenants[0].quota.\"nvidia.com/gpu\"").expect("map value");
        assert!(s.get("anyOf").is_some(), "{s}");
    }

    #[test]
    fn stand_ins_fill_required_fields() {
        let root = json();
        let (gpu, _) = at(&root, "spec.nodePools[0].gpu").expect("gpu");
        assert_eq!(stand_in(&root, &gpu), json!({"model": "", "count": 0}));
        let (role, _) = at(&root, "spec.nodePools[0].role").expect("role");
        assert_eq!(stand_in(&root, &role), json!("general"));
    }

    #[test]
    fn field_paths_drop_indices() {
        assert_eq!(field_path("spec.nodePools[12].gpu"), "spec.nodePools[].gpu");
        assert_eq!(
            field_path("spec.tenants[0].quota.\"a[1]\""),
            "spec.tenants[].quota.\"a[1]\""
        );
    }
}
