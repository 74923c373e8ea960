//! YAML text from a (mutated) JSON tree: block style with some flow collections, so positions and
//! line structure look like a hand-written blueprint and line-based mutations have lines to work on.

use serde_json::Value;

use super::Rng;

/// A string starting with this is written verbatim (flow YAML: anchors, aliases, tags).
pub const RAW: &str = "\u{0}RAW:";

/// One step of a path into a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// Mapping key.
    Key(String),
    /// Sequence index.
    Idx(usize),
}

/// `spec.tenants[0].name`, for descriptions.
pub fn show_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                if k.len() > 40 {
                    s.push_str(&format!("<key of {} chars>", k.chars().count()));
                } else {
                    s.push_str(k);
                }
            }
            Seg::Idx(i) => s.push_str(&format!("[{i}]")),
        }
    }
    if s.is_empty() { "<root>".into() } else { s }
}

/// Every path in `v` (the root included), depth first.
pub fn all_paths(v: &Value) -> Vec<Vec<Seg>> {
    fn walk(v: &Value, cur: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
        out.push(cur.clone());
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    cur.push(Seg::Key(k.clone()));
                    walk(c, cur, out);
                    cur.pop();
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    cur.push(Seg::Idx(i));
                    walk(c, cur, out);
                    cur.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// The node at `path`.
pub fn get<'a>(v: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| match seg {
        Seg::Key(k) => cur.get(k.as_str()),
        Seg::Idx(i) => cur.get(*i),
    })
}

/// The node at `path`, mutably.
pub fn get_mut<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, seg| match seg {
        Seg::Key(k) => cur.get_mut(k.as_str()),
        Seg::Idx(i) => cur.get_mut(*i),
    })
}

/// The tree as YAML. `rng` decides which small collections are written in flow style.
pub fn yaml(v: &Value, rng: &mut Rng) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => block_map(v, 0, rng, &mut out),
        Value::Array(a) if !a.is_empty() => block_seq(v, 0, rng, &mut out),
        _ => {
            out.push_str(&flow(v));
            out.push('\n');
        }
    }
    out
}

fn is_block(v: &Value) -> bool {
    match v {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

/// Small, shallow collections go flow style about a third of the time.
fn wants_flow(v: &Value, rng: &mut Rng) -> bool {
    let small = match v {
        Value::Object(m) => m.len() <= 4 && m.values().all(|c| !is_block(c)),
        Value::Array(a) => a.len() <= 8 && a.iter().all(|c| !is_block(c)),
        _ => true,
    };
    small && rng.chance(1, 3)
}

fn block_map(v: &Value, indent: usize, rng: &mut Rng, out: &mut String) {
    let Value::Object(m) = v else { return };
    let pad = " ".repeat(indent);
    for (k, c) in m {
        out.push_str(&pad);
        out.push_str(&key(k));
        out.push(':');
        if is_block(c) && !wants_flow(c, rng) {
            out.push('\n');
            match c {
                Value::Object(_) => block_map(c, indent + 2, rng, out),
                _ => block_seq(c, indent + 2, rng, out),
            }
        } else {
            out.push(' ');
            out.push_str(&flow(c));
            out.push('\n');
        }
    }
}

fn block_seq(v: &Value, indent: usize, rng: &mut Rng, out: &mut String) {
    let Value::Array(a) = v else { return };
    let pad = " ".repeat(indent);
    for c in a {
        if is_block(c) && !wants_flow(c, rng) {
            // Write the item two columns in, then put the dash where its first indent was.
            let mut item = String::new();
            match c {
                Value::Object(_) => block_map(c, indent + 2, rng, &mut item),
                _ => block_seq(c, indent + 2, rng, &mut item),
            }
            out.push_str(&pad);
            out.push_str("- ");
            out.push_str(&item[indent + 2..]);
        } else {
            out.push_str(&pad);
            out.push_str("- ");
            out.push_str(&flow(c));
            out.push('\n');
        }
    }
}

/// A value in flow style (JSON-like, with plain scalars where they stay strings).
pub fn flow(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => match s.strip_prefix(RAW) {
            Some(raw) => raw.to_string(),
            None => scalar(s),
        },
        Value::Array(a) => format!("[{}]", a.iter().map(flow).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, c)| format!("{}: {}", key(k), flow(c)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn key(k: &str) -> String {
    scalar(k)
}

/// Plain when the text reads back as the same string in both block and flow context, else
/// double-quoted with every non-printable character escaped.
pub fn scalar(s: &str) -> String {
    let plain_chars = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    let first_ok = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '/');
    let resolves_other = matches!(
        s,
        "null" | "Null" | "NULL" | "true" | "True" | "TRUE" | "false" | "False" | "FALSE" | "~"
    );
    if plain_chars && first_ok && !resolves_other {
        return s.to_string();
    }
    quoted(s)
}

/// A YAML double-quoted scalar; non-printable characters (YAML 1.2 `c-printable`) are escaped.
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' => out.push(c),
            c if u32::from(c) >= 0x1_0000 => out.push(c),
            c => out.push_str(&format!("\\u{:04x}", u32::from(c))),
        }
    }
    out.push('"');
    out
}
