//! YAML source tree with positions: the part of loading that no serde YAML crate gives us.
//!
//! Why by hand: validation findings must point at `line:column` for any YAML path long after
//! deserialisation, duplicate keys must be an error (YAML 1.2 forbids them, most parsers keep the last
//! one silently), and hostile input (alias bombs, deep nesting) must be refused before it costs memory.
//! `saphyr-parser` gives a spanned event stream; this module folds it into a small tree and indexes
//! every path. Scalars are resolved with the YAML 1.2 core schema (so `no` stays a string).

use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// A 1-based line and column in the blueprint file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

impl Pos {
    fn from_span(span: &Span) -> Pos {
        Pos {
            line: span.start.line(),
            column: span.start.col() + 1,
        }
    }
}

/// Deepest nesting accepted; real blueprints stay below 12.
const MAX_DEPTH: usize = 64;
/// Most nodes an input may expand to (aliases included); guards against alias bombs.
const MAX_NODES: usize = 1_000_000;

/// Why a document could not be read as YAML at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where the problem was found.
    pub pos: Pos,
    /// What is wrong, in words.
    pub message: String,
}

#[derive(Debug, Clone)]
enum Kind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Pos, Node)>),
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    pos: Pos,
}

/// A parsed YAML document: its JSON value and the position of every path in it.
#[derive(Debug, Clone)]
pub struct SourceTree {
    /// The document as a JSON value, ready for typed deserialisation.
    pub value: serde_json::Value,
    /// Position of the value at each path (`spec.nodePools[0].gpu.model`).
    values: BTreeMap<String, Pos>,
    /// Position of the key of each mapping entry, by the entry's path.
    keys: BTreeMap<String, Pos>,
}

impl SourceTree {
    /// Parses one YAML document. Multi-document input, duplicate keys, non-string keys, tags other
    /// than the core schema's, deep nesting and alias expansion past the limits are refused.
    pub fn parse(text: &str) -> Result<SourceTree, SyntaxError> {
        let root = Builder::default().build(text)?;
        let mut tree = SourceTree {
            value: serde_json::Value::Null,
            values: BTreeMap::new(),
            keys: BTreeMap::new(),
        };
        tree.value = tree.index(&root, String::new());
        Ok(tree)
    }

    fn index(&mut self, node: &Node, path: String) -> serde_json::Value {
        use serde_json::Value;
        self.values.insert(path.clone(), node.pos);
        match &node.kind {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Int(i) => Value::from(*i),
            Kind::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Kind::Str(s) => Value::String(s.clone()),
            Kind::Seq(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.index(item, format!("{path}[{i}]")))
                    .collect(),
            ),
            Kind::Map(entries) => {
                let mut map = serde_json::Map::new();
                for (key, key_pos, value) in entries {
                    let child = join(&path, key);
                    self.keys.insert(child.clone(), *key_pos);
                    let v = self.index(value, child);
                    map.insert(key.clone(), v);
                }
                Value::Object(map)
            }
        }
    }

    /// Position of the value at `path`, or of its nearest ancestor that exists.
    pub fn pos(&self, path: &str) -> Option<Pos> {
        let mut p = path;
        loop {
            if let Some(pos) = self.values.get(p) {
                return Some(*pos);
            }
            p = parent(p)?;
        }
    }

    /// Position of the key of the entry at `path` (falls back to its value's position).
    pub fn key_pos(&self, path: &str) -> Option<Pos> {
        self.keys.get(path).copied().or_else(|| self.pos(path))
    }
}

/// Joins a mapping key onto a path, quoting keys that would make the path ambiguous or hard to
/// read (`spec.hard."requests.nvidia.com/gpu"`). Blueprint diagnostics and plan diffs both write
/// paths with this.
pub fn join(path: &str, key: &str) -> String {
    let needs_quote = key.is_empty() || key.contains(['.', '[', ']', '"', '/', ' ']);
    let key = if needs_quote {
        format!("\"{}\"", key.replace('"', "\\\""))
    } else {
        key.to_string()
    };
    if path.is_empty() {
        key
    } else {
        format!("{path}.{key}")
    }
}

/// The parent path of `path` (`a.b[0]` -> `a.b` -> `a` -> ``), or `None` for the root.
fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let bytes = path.as_bytes();
    let mut in_quote = false;
    let mut cut = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'"' => in_quote = !in_quote,
            b'.' | b'[' if !in_quote => cut = i,
            _ => {}
        }
    }
    Some(&path[..cut])
}

#[derive(Default)]
struct Builder {
    anchors: BTreeMap<usize, Node>,
    nodes: usize,
}

enum Frame {
    Seq(Pos, usize, Vec<Node>),
    Map(Pos, usize, Vec<(String, Pos, Node)>, Option<(String, Pos)>),
}

impl Builder {
    fn build(mut self, text: &str) -> Result<Node, SyntaxError> {
        let mut parser = Parser::new_from_str(text);
        let mut stack: Vec<Frame> = Vec::new();
        let mut root: Option<Node> = None;
        let mut documents = 0;
        while let Some(event) = parser.next_event() {
            let (event, span) = event.map_err(|e| SyntaxError {
                pos: Pos {
                    line: e.marker().line(),
                    column: e.marker().col() + 1,
                },
                message: e.info().to_string(),
            })?;
            let pos = Pos::from_span(&span);
            let done = match event {
                Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => None,
                Event::DocumentStart(_) => {
                    documents += 1;
                    if documents > 1 {
                        return Err(SyntaxError {
                            pos,
                            message:
                                "a blueprint file holds exactly one YAML document; remove the \
                                      second `---` or split the file"
                                    .into(),
                        });
                    }
                    None
                }
                Event::Alias(id) => {
                    let node = self.anchors.get(&id).cloned().ok_or_else(|| SyntaxError {
                        pos,
                        message: "alias refers to an unknown anchor".into(),
                    })?;
                    self.count(&node, pos)?;
                    Some((node, 0))
                }
                Event::Scalar(text, style, anchor, tag) => {
                    self.nodes += 1;
                    if let Some(tag) = &tag
                        && !tag.is_yaml_core_schema()
                    {
                        return Err(SyntaxError {
                            pos,
                            message: format!(
                                "tag `{}{}` is not supported; remove it",
                                tag.handle, tag.suffix
                            ),
                        });
                    }
                    let kind = resolve_scalar(&text, style, tag.as_deref().map(|t| &*t.suffix));
                    Some((Node { kind, pos }, anchor))
                }
                Event::SequenceStart(anchor, _) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(too_deep(pos));
                    }
                    stack.push(Frame::Seq(pos, anchor, Vec::new()));
                    None
                }
                Event::MappingStart(anchor, _) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(too_deep(pos));
                    }
                    stack.push(Frame::Map(pos, anchor, Vec::new(), None));
                    None
                }
                Event::SequenceEnd => match stack.pop() {
                    Some(Frame::Seq(pos, anchor, items)) => Some((
                        Node {
                            kind: Kind::Seq(items),
                            pos,
                        },
                        anchor,
                    )),
                    _ => return Err(unbalanced(pos)),
                },
                Event::MappingEnd => match stack.pop() {
                    Some(Frame::Map(pos, anchor, entries, _)) => Some((
                        Node {
                            kind: Kind::Map(entries),
                            pos,
                        },
                        anchor,
                    )),
                    _ => return Err(unbalanced(pos)),
                },
            };
            let Some((node, anchor)) = done else { continue };
            if self.nodes > MAX_NODES {
                return Err(SyntaxError {
                    pos,
                    message: format!(
                        "document expands to more than {MAX_NODES} nodes (alias expansion?); \
                         write the values out"
                    ),
                });
            }
            if anchor > 0 {
                self.anchors.insert(anchor, node.clone());
            }
            match stack.last_mut() {
                None => root = Some(node),
                Some(Frame::Seq(_, _, items)) => items.push(node),
                Some(Frame::Map(_, _, entries, pending)) => match pending.take() {
                    None => {
                        let key = match node.kind {
                            Kind::Str(s) => s,
                            Kind::Int(i) => i.to_string(),
                            Kind::Bool(b) => b.to_string(),
                            Kind::Float(f) => f.to_string(),
                            Kind::Null => "null".to_string(),
                            Kind::Seq(_) | Kind::Map(_) => {
                                return Err(SyntaxError {
                                    pos: node.pos,
                                    message: "mapping keys must be plain strings".into(),
                                });
                            }
                        };
                        if let Some((_, first, _)) = entries.iter().find(|(k, _, _)| *k == key) {
                            return Err(SyntaxError {
                                pos: node.pos,
                                message: format!(
                                    "duplicate key `{key}` (first at line {}); keep one",
                                    first.line
                                ),
                            });
                        }
                        *pending = Some((key, node.pos));
                    }
                    Some((key, key_pos)) => entries.push((key, key_pos, node)),
                },
            }
        }
        Ok(root.unwrap_or(Node {
            kind: Kind::Null,
            pos: Pos { line: 1, column: 1 },
        }))
    }

    fn count(&mut self, node: &Node, pos: Pos) -> Result<(), SyntaxError> {
        // An alias re-inserts its whole subtree; count it so nested aliases cannot blow up.
        fn size(node: &Node) -> usize {
            match &node.kind {
                Kind::Seq(items) => 1 + items.iter().map(size).sum::<usize>(),
                Kind::Map(entries) => {
                    1 + entries.iter().map(|(_, _, v)| 1 + size(v)).sum::<usize>()
                }
                _ => 1,
            }
        }
        self.nodes = self.nodes.saturating_add(size(node));
        if self.nodes > MAX_NODES {
            return Err(SyntaxError {
                pos,
                message: format!(
                    "document expands to more than {MAX_NODES} nodes through aliases; write the \
                     values out"
                ),
            });
        }
        Ok(())
    }
}

fn too_deep(pos: Pos) -> SyntaxError {
    SyntaxError {
        pos,
        message: format!("nesting deeper than {MAX_DEPTH} levels; a blueprint is never this deep"),
    }
}

fn unbalanced(pos: Pos) -> SyntaxError {
    SyntaxError {
        pos,
        message: "unbalanced collection in the YAML event stream".into(),
    }
}

/// YAML 1.2 core schema resolution for a scalar.
fn resolve_scalar(text: &str, style: ScalarStyle, tag: Option<&str>) -> Kind {
    match tag {
        Some("str") => return Kind::Str(text.to_string()),
        Some("null") => return Kind::Null,
        _ => {}
    }
    if style != ScalarStyle::Plain {
        return Kind::Str(text.to_string());
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        "true" | "True" | "TRUE" => return Kind::Bool(true),
        "false" | "False" | "FALSE" => return Kind::Bool(false),
        _ => {}
    }
    if let Some(i) = parse_int(text) {
        return Kind::Int(i);
    }
    if is_float(text)
        && let Ok(f) = text.parse::<f64>()
        && f.is_finite()
    {
        return Kind::Float(f);
    }
    Kind::Str(text.to_string())
}

fn parse_int(text: &str) -> Option<i64> {
    if let Some(hex) = text.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    if let Some(oct) = text.strip_prefix("0o") {
        return i64::from_str_radix(oct, 8).ok();
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn is_float(text: &str) -> bool {
    // Core schema: [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
    let t = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((a, b)) => {
            (!a.is_empty() || !b.is_empty())
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|c| c.is_ascii_digit()),
    };
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit())
    });
    mantissa_ok && exp_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_indexed_by_path() {
        let t = SourceTree::parse("a:\n  b: [1, x]\n  c:\n    - d: true\n").unwrap();
        assert_eq!(
            t.pos("a.b[1]"),
            Some(Pos {
                line: 2,
                column: 10
            })
        );
        assert_eq!(t.key_pos("a.c"), Some(Pos { line: 3, column: 3 }));
        assert_eq!(
            t.pos("a.c[0].d"),
            Some(Pos {
                line: 4,
                column: 10
            })
        );
        // Missing paths fall back to the nearest ancestor.
        assert_eq!(t.pos("a.c[0].zzz"), t.pos("a.c[0]"));
        assert_eq!(t.value["a"]["c"][0]["d"], serde_json::Value::Bool(true));
    }

    #[test]
    fn core_schema_keeps_yaml11_booleans_as_strings() {
        let t = SourceTree::parse("a: no\nb: yes\nc: 0x10\nd: 1.5\ne: '12'\nf: ~\n").unwrap();
        assert_eq!(t.value["a"], "no");
        assert_eq!(t.value["b"], "yes");
        assert_eq!(t.value["c"], 16);
        assert_eq!(t.value["d"], 1.5);
        assert_eq!(t.value["e"], "12");
        assert!(t.value["f"].is_null());
    }

    #[test]
    fn duplicate_keys_are_refused_with_both_lines() {
        let e = SourceTree::parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(e.pos.line, 3);
        assert!(e.message.contains("first at line 1"), "{}", e.message);
    }

    #[test]
    fn alias_bombs_and_deep_nesting_are_refused() {
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let e = SourceTree::parse(&bomb).unwrap_err();
        assert!(e.message.contains("aliases"), "{}", e.message);

        let deep = "[".repeat(10_000);
        let e = SourceTree::parse(&deep).unwrap_err();
        assert!(e.message.contains("nesting") || !e.message.is_empty());
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = SourceTree::parse("a: [1, 2\nb: c\n").unwrap_err();
        assert!(e.pos.line >= 1);
        assert!(!e.message.is_empty());
    }

    #[test]
    fn second_document_is_refused() {
        let e = SourceTree::parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(e.message.contains("one YAML document"));
    }

    #[test]
    fn parent_paths_respect_quoted_keys() {
        assert_eq!(parent("a.\"x.y\".b"), Some("a.\"x.y\""));
        assert_eq!(parent("a.\"x.y\""), Some("a"));
        assert_eq!(parent("a[0]"), Some("a"));
        assert_eq!(parent("a"), Some(""));
        assert_eq!(
            join("labels", "gpu.example.com/tier"),
            "labels.\"gpu.example.com/tier\""
        );
    }
}
