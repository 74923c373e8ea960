//! The imported blueprint as YAML text: an ordered tree with comments attached to paths, written
//! the same way every time (same tree, same bytes).

use std::collections::BTreeMap;

use serde_json::Value;

/// A YAML node whose maps keep the order they were built in.
#[derive(Debug, Clone, PartialEq)]
pub enum Y {
    /// A string, number, boolean or null.
    Scalar(Value),
    /// A mapping, in insertion order.
    Map(Vec<(String, Y)>),
    /// A sequence.
    List(Vec<Y>),
}

impl Y {
    /// A string scalar.
    pub fn s(text: impl Into<String>) -> Y {
        Y::Scalar(Value::String(text.into()))
    }

    /// A scalar from any JSON value; objects and arrays become maps (sorted keys) and lists.
    pub fn from_json(v: &Value) -> Y {
        match v {
            Value::Object(m) => Y::Map(
                m.iter()
                    .map(|(k, v)| (k.clone(), Y::from_json(v)))
                    .collect(),
            ),
            Value::Array(a) => Y::List(a.iter().map(Y::from_json).collect()),
            v => Y::Scalar(v.clone()),
        }
    }

    /// The entry `key` of a map.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Y> {
        match self {
            Y::Map(m) => m.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Sets `key` of a map (replacing it in place, or appending).
    pub fn set(&mut self, key: &str, value: Y) {
        if let Y::Map(m) = self {
            match m.iter_mut().find(|(k, _)| k == key) {
                Some((_, v)) => *v = value,
                None => m.push((key.to_string(), value)),
            }
        }
    }

    fn is_flat(&self) -> bool {
        match self {
            Y::Map(m) => m.iter().all(|(_, v)| matches!(v, Y::Scalar(_))),
            Y::List(l) => l.iter().all(|v| matches!(v, Y::Scalar(_))),
            Y::Scalar(_) => true,
        }
    }
}

/// Comments by path (`spec.nodePools[0].selector`), written above the entry at that path.
pub type Comments = BTreeMap<String, Vec<String>>;

/// The document: a header comment, then the tree.
pub fn document(header: &[String], tree: &Y, comments: &Comments) -> String {
    let mut out = String::new();
    for line in header {
        comment_line(&mut out, 0, line);
    }
    if let Y::Map(m) = tree {
        map_entries(&mut out, 0, "", m, comments);
    }
    out
}

fn comment_line(out: &mut String, indent: usize, text: &str) {
    for line in text.lines() {
        out.push_str(&" ".repeat(indent));
        if line.is_empty() {
            out.push_str("#\n");
        } else {
            out.push_str("# ");
            out.push_str(line);
            out.push('\n');
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A flow collection is used for short flat maps and lists without comments inside.
fn flow(v: &Y, path: &str, comments: &Comments) -> Option<String> {
    if !v.is_flat() {
        return None;
    }
    let inner_comment = comments
        .range(format!("{path}.")..)
        .next()
        .is_some_and(|(k, _)| k.starts_with(&format!("{path}.")))
        || comments
            .range(format!("{path}[")..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&format!("{path}[")));
    if inner_comment {
        return None;
    }
    let text = match v {
        Y::Map(m) if m.is_empty() => "{}".to_string(),
        Y::List(l) if l.is_empty() => "[]".to_string(),
        Y::Map(m) => format!(
            "{{ {} }}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", key(k), scalar(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Y::List(l) => format!("[{}]", l.iter().map(scalar).collect::<Vec<_>>().join(", ")),
        Y::Scalar(_) => return Some(scalar(v)),
    };
    (text.len() <= 90).then_some(text)
}

fn map_entries(
    out: &mut String,
    indent: usize,
    path: &str,
    m: &[(String, Y)],
    comments: &Comments,
) {
    for (i, (k, v)) in m.iter().enumerate() {
        let p = join(path, k);
        // The first entry of a list item shares the `- ` line, unless a comment comes first.
        let mut on_dash = i == 0 && out.ends_with("- ");
        if let Some(c) = comments.get(&p) {
            if on_dash {
                out.push('\n');
                on_dash = false;
            }
            for line in c {
                comment_line(out, indent, line);
            }
        }
        let pad = if on_dash {
            String::new()
        } else {
            " ".repeat(indent)
        };
        entry(out, indent, &pad, &p, &format!("{}:", key(k)), v, comments);
    }
}

fn entry(
    out: &mut String,
    indent: usize,
    pad: &str,
    path: &str,
    head: &str,
    v: &Y,
    comments: &Comments,
) {
    out.push_str(pad);
    out.push_str(head);
    if let Some(text) = flow(v, path, comments) {
        out.push(' ');
        out.push_str(&text);
        out.push('\n');
        return;
    }
    out.push('\n');
    match v {
        Y::Map(m) => map_entries(out, indent + 2, path, m, comments),
        Y::List(l) => list_items(out, indent + 2, path, l, comments),
        Y::Scalar(_) => {}
    }
}

fn list_items(out: &mut String, indent: usize, path: &str, l: &[Y], comments: &Comments) {
    for (i, item) in l.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if let Some(c) = comments.get(&p) {
            for line in c {
                comment_line(out, indent, line);
            }
        }
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Y::Map(m) if !m.is_empty() && flow(item, &p, comments).is_none() => {
                map_entries(out, indent + 2, &p, m, comments);
            }
            _ => {
                let text = flow(item, &p, comments).unwrap_or_else(|| "{}".into());
                out.push_str(&text);
                out.push('\n');
            }
        }
    }
}

/// Words YAML 1.1 readers take for booleans or null.
const AMBIGUOUS: &[&str] = &[
    "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~",
];

fn plain(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !AMBIGUOUS.contains(&s.to_ascii_lowercase().as_str())
}

fn key(k: &str) -> String {
    if plain(k) {
        k.to_string()
    } else {
        serde_json::to_string(k).unwrap_or_default()
    }
}

fn scalar(v: &Y) -> String {
    match v {
        Y::Scalar(Value::String(s)) if plain(s) => s.clone(),
        Y::Scalar(v) => serde_json::to_string(v).unwrap_or_default(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_comments_flow_maps_and_quotes_what_yaml_would_misread() {
        let tree = Y::Map(vec![
            ("apiVersion".into(), Y::s("gpuctl.dev/v1alpha1")),
            (
                "spec".into(),
                Y::Map(vec![
                    (
                        "pools".into(),
                        Y::List(vec![Y::Map(vec![
                            ("name".into(), Y::s("a")),
                            (
                                "gpu".into(),
                                Y::from_json(&json!({"count": 8, "model": "H100"})),
                            ),
                            (
                                "os".into(),
                                Y::from_json(&json!({"version": "22.04", "id": "yes"})),
                            ),
                        ])]),
                    ),
                    ("empty".into(), Y::Map(vec![])),
                ]),
            ),
        ]);
        let mut c = Comments::new();
        c.insert("spec.pools[0].gpu".into(), vec!["from the node".into()]);
        let text = document(&["head".into()], &tree, &c);
        assert_eq!(
            text,
            "# head\napiVersion: gpuctl.dev/v1alpha1\nspec:\n  pools:\n    - name: a\n      # from the node\n      gpu: { count: 8, model: H100 }\n      os: { version: \"22.04\", id: \"yes\" }\n  empty: {}\n"
        );
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back["spec"]["pools"][0]["os"]["version"], "22.04");
        assert_eq!(back["spec"]["pools"][0]["os"]["id"], "yes");
    }
}
