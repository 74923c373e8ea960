//! YAML source tree with positions: the part of loading that no serde YAML crate gives us.
//!
//! Why by hand: validation findings must point at `line:column` for any YAML path long after
//! deserialisation, duplicate keys must be an error (YAML 1.2 forbids them, most parsers keep the last
//! one silently), and hostile input (alias bombs, deep nesting) must be refused before it costs memory.
//! `saphyr-parser` gives a spanned event stream; this module folds it into a small tree and indexes
//! every path. Scalars are resolved with the YAML 1.2 core schema (so `no` stays a string).

use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::Value;

pub use crate::located::Pos;

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
/// Most nodes an input may expand to (aliases included); guards against alias bombs. A blueprint
/// with 10,000 tenants has about 150,000.
const MAX_NODES: usize = 1_000_000;
/// Most nodes aliases may add in all. Aliases share small snippets (tolerations, a quota); more than
/// this is an expansion attack, and every expanded node costs each later pass over the document.
const MAX_ALIAS_NODES: usize = 100_000;
/// Longest mapping key. Kubernetes' longest keys (label and annotation keys) are 317 characters.
const MAX_KEY_BYTES: usize = 1024;

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
///
/// Positions are kept in a tree shaped like the document (one small record per node), not in a map
/// from path strings: a path string per node grows with the depth and the key lengths above it,
/// which made a 260 KB file of long, deeply nested keys cost gigabytes. Lookups walk the tree.
#[derive(Debug, Clone)]
pub struct SourceTree {
    /// The document as a JSON value, ready for typed deserialisation.
    pub value: serde_json::Value,
    pub(super) positions: PosNode,
}

/// Where a node and its children are, and which file of an overlay chain set it (0: the file
/// named, 1: the one it `extends`, and so on; see `overlay`).
#[derive(Debug, Clone)]
pub(super) struct PosNode {
    pub(super) pos: Pos,
    pub(super) file: u32,
    pub(super) children: PosChildren,
}

#[derive(Debug, Clone)]
pub(super) enum PosChildren {
    Leaf,
    Seq(Vec<PosNode>),
    /// Entries in document order: key, the key's position, the value's positions.
    Map(Vec<(String, Pos, PosNode)>),
}

impl SourceTree {
    /// Parses one YAML document. Multi-document input, duplicate keys, non-string keys, tags other
    /// than the core schema's, deep nesting and alias expansion past the limits are refused.
    pub fn parse(text: &str) -> Result<SourceTree, SyntaxError> {
        check_directives(text)?;
        let root = Builder::default()
            .build(text)
            .map_err(|e| clamp_to_text(e, text))?;
        let (value, positions) = convert(root);
        Ok(SourceTree { value, positions })
    }

    /// The deepest node on `path` that exists, and whether all of `path` was found.
    fn walk(&self, path: &str) -> (&PosNode, Option<&Pos>, bool) {
        let mut node = &self.positions;
        let mut key_pos = None;
        for seg in split_path(path) {
            let next = match (&node.children, &seg) {
                (PosChildren::Seq(items), Segment::Index(i)) => items.get(*i).map(|n| (n, None)),
                (PosChildren::Map(entries), Segment::Key(k)) => entries
                    .iter()
                    .find(|(key, _, _)| key == k)
                    .map(|(_, kp, n)| (n, Some(kp))),
                _ => None,
            };
            match next {
                Some((n, kp)) => {
                    node = n;
                    key_pos = kp;
                }
                None => return (node, None, false),
            }
        }
        (node, key_pos, true)
    }

    /// Which file of an overlay chain set the value at `path` (or its nearest ancestor that
    /// exists): 0 for the file named, `n` for `Loaded::layers[n - 1]`.
    pub fn origin(&self, path: &str) -> usize {
        self.walk(path).0.file as usize
    }

    /// Marks every node as set by file `file` of an overlay chain.
    pub(super) fn set_file(&mut self, file: u32) {
        fn mark(node: &mut PosNode, file: u32) {
            node.file = file;
            match &mut node.children {
                PosChildren::Leaf => {}
                PosChildren::Seq(items) => items.iter_mut().for_each(|n| mark(n, file)),
                PosChildren::Map(entries) => entries.iter_mut().for_each(|(_, _, n)| mark(n, file)),
            }
        }
        mark(&mut self.positions, file);
    }

    /// Position of the value at `path`, or of its nearest ancestor that exists.
    pub fn pos(&self, path: &str) -> Option<Pos> {
        Some(self.walk(path).0.pos)
    }

    /// Every path of the document (the root, `""`, first, then in document order, as [`join`]
    /// writes paths: `spec.nodePools[0].gpu.model`) with the position of its value and the file
    /// of an overlay chain that set it (0: the file named; see [`SourceTree::origin`]). What
    /// `--policy` gives Rego policies as `input.blueprint.locations` (docs/policy.md).
    pub fn locations(&self) -> Vec<(String, Pos, usize)> {
        fn walk(node: &PosNode, path: String, out: &mut Vec<(String, Pos, usize)>) {
            out.push((path.clone(), node.pos, node.file as usize));
            match &node.children {
                PosChildren::Leaf => {}
                PosChildren::Seq(items) => {
                    for (i, n) in items.iter().enumerate() {
                        walk(n, format!("{path}[{i}]"), out);
                    }
                }
                PosChildren::Map(entries) => {
                    for (key, _, n) in entries {
                        walk(n, join(&path, key), out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.positions, String::new(), &mut out);
        out
    }

    /// Position of the key of the entry at `path` (falls back to its value's position).
    pub fn key_pos(&self, path: &str) -> Option<Pos> {
        match self.walk(path) {
            (_, Some(kp), true) => Some(*kp),
            (node, _, _) => Some(node.pos),
        }
    }
}

/// Splits the builder's tree into the JSON value and the position tree, moving strings (no copy).
fn convert(node: Node) -> (Value, PosNode) {
    let pos = node.pos;
    let leaf = |v: Value| {
        (
            v,
            PosNode {
                pos,
                file: 0,
                children: PosChildren::Leaf,
            },
        )
    };
    match node.kind {
        Kind::Null => leaf(Value::Null),
        Kind::Bool(b) => leaf(Value::Bool(b)),
        Kind::Int(i) => leaf(Value::from(i)),
        Kind::Float(f) => leaf(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        Kind::Str(s) => leaf(Value::String(s)),
        Kind::Seq(items) => {
            let mut values = Vec::with_capacity(items.len());
            let mut positions = Vec::with_capacity(items.len());
            for item in items {
                let (v, p) = convert(item);
                values.push(v);
                positions.push(p);
            }
            (
                Value::Array(values),
                PosNode {
                    pos,
                    file: 0,
                    children: PosChildren::Seq(positions),
                },
            )
        }
        Kind::Map(entries) => {
            let mut map = serde_json::Map::with_capacity(entries.len());
            let mut positions = Vec::with_capacity(entries.len());
            for (key, key_pos, value) in entries {
                let (v, p) = convert(value);
                map.insert(key.clone(), v);
                positions.push((key, key_pos, p));
            }
            (
                Value::Object(map),
                PosNode {
                    pos,
                    file: 0,
                    children: PosChildren::Map(positions),
                },
            )
        }
    }
}

/// A step of a path as [`join`] writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// Splits a path written by [`join`] (`a."b.c"[0].d`) into its steps.
pub fn split_path(path: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut chars = path.chars().peekable();
    let mut key = String::new();
    let mut in_quote = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => in_quote = !in_quote,
            '\\' if in_quote => {
                if let Some(n) = chars.next() {
                    key.push(n);
                }
            }
            '.' if !in_quote => {
                if !key.is_empty() {
                    out.push(Segment::Key(std::mem::take(&mut key)));
                }
            }
            '[' if !in_quote => {
                if !key.is_empty() {
                    out.push(Segment::Key(std::mem::take(&mut key)));
                }
                let mut digits = String::new();
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                    digits.push(d);
                }
                out.push(Segment::Index(digits.parse().unwrap_or(usize::MAX)));
            }
            _ => key.push(c),
        }
    }
    if !key.is_empty() {
        out.push(Segment::Key(key));
    }
    out
}

/// The parser reports errors at the end of the stream one line past the last one of a file without
/// a final newline; name the end of the last line instead, which exists.
fn clamp_to_text(mut e: SyntaxError, text: &str) -> SyntaxError {
    let mut lines: Vec<usize> = vec![0];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' | '\n' => {
                if c == '\r' && chars.peek() == Some(&'\n') {
                    chars.next();
                }
                lines.push(0);
            }
            _ => *lines.last_mut().unwrap_or(&mut 0) += 1,
        }
    }
    if e.pos.line > lines.len() {
        e.pos = Pos {
            line: lines.len(),
            column: lines.last().copied().unwrap_or(0) + 1,
        };
    }
    let len = lines
        .get(e.pos.line.saturating_sub(1))
        .copied()
        .unwrap_or(0);
    e.pos.column = e.pos.column.clamp(1, len + 1);
    e.pos.line = e.pos.line.max(1);
    e
}

/// Where the innermost `[` or `{` still open was opened, for a syntax error inside it: the parser
/// names the place it gave up, often the end of the file, far from the bracket left unclosed.
fn open_bracket(stack: &[Frame], text: &str) -> String {
    stack
        .iter()
        .rev()
        .find_map(|frame| {
            let pos = match frame {
                Frame::Seq(pos, _, _) => *pos,
                Frame::Map(m) => m.pos,
            };
            let line = text.lines().nth(pos.line.checked_sub(1)?)?;
            let c = line.chars().nth(pos.column.checked_sub(1)?)?;
            let close = match c {
                '[' => ']',
                '{' => '}',
                _ => return None,
            };
            Some(format!(
                " (inside the `{c}` opened at line {}, column {}: is its `{close}` missing?)",
                pos.line, pos.column
            ))
        })
        .unwrap_or_default()
}

/// `%YAML` and `%TAG` directives. saphyr accepts any `%YAML 1.x` and user tag handles; a blueprint
/// is YAML 1.2 with the core schema only, so anything else is refused before parsing. Directives
/// stand at the start of a line before the document's `---`; a `%` cannot start a plain scalar, so
/// a line starting with `%` before any content is a directive.
fn check_directives(text: &str) -> Result<(), SyntaxError> {
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start_matches('\u{feff}');
        if t.starts_with("---") || !(t.is_empty() || t.starts_with('#') || t.starts_with('%')) {
            return Ok(());
        }
        let pos = Pos {
            line: i + 1,
            column: 1,
        };
        let mut words = t.split_whitespace();
        match words.next() {
            Some("%YAML") => match words.next() {
                Some("1.2") => {}
                v => {
                    return Err(SyntaxError {
                        pos,
                        message: format!(
                            "`%YAML {}` is not supported: a blueprint is YAML 1.2; remove the directive or write `%YAML 1.2`",
                            v.unwrap_or("")
                        ),
                    });
                }
            },
            Some(d) if d.starts_with('%') => {
                return Err(SyntaxError {
                    pos,
                    message: format!(
                        "directive `{d}` is not supported (a blueprint uses only the YAML 1.2 core schema); remove it"
                    ),
                });
            }
            _ => {}
        }
    }
    Ok(())
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

#[derive(Default)]
struct Builder {
    anchors: BTreeMap<usize, Node>,
    nodes: usize,
    alias_nodes: usize,
}

/// A mapping being built: its entries, the first position of each key (duplicate detection in
/// O(log n), not a scan per key), and a key waiting for its value.
struct MapFrame {
    pos: Pos,
    anchor: usize,
    entries: Vec<(String, Pos, Node)>,
    seen: BTreeMap<String, Pos>,
    pending: Option<(String, Pos)>,
}

enum Frame {
    Seq(Pos, usize, Vec<Node>),
    Map(MapFrame),
}

impl MapFrame {
    /// Adds `node` to the mapping: as the pending key (a string, not too long, not seen before)
    /// or as the value of the pending key.
    fn add(&mut self, node: Node) -> Result<(), SyntaxError> {
        let Some((key, key_pos)) = self.pending.take() else {
            let key = match node.kind {
                Kind::Str(s) => s,
                other => {
                    let shown = match other {
                        Kind::Int(i) => format!("`{i}` is a number"),
                        Kind::Float(f) => format!("`{f}` is a number"),
                        Kind::Bool(b) => format!("`{b}` is a boolean"),
                        Kind::Null => "an empty (null) key".to_string(),
                        _ => "a sequence or mapping".to_string(),
                    };
                    return Err(SyntaxError {
                        pos: node.pos,
                        message: format!(
                            "mapping keys must be strings, and {shown}; quote the key if you mean the text"
                        ),
                    });
                }
            };
            if key.len() > MAX_KEY_BYTES {
                return Err(SyntaxError {
                    pos: node.pos,
                    message: format!(
                        "a mapping key of {} bytes; keys are at most {MAX_KEY_BYTES} bytes; shorten it",
                        key.len()
                    ),
                });
            }
            if let Some(first) = self.seen.get(&key) {
                return Err(SyntaxError {
                    pos: node.pos,
                    message: format!(
                        "duplicate key `{}` (first at line {}); keep one",
                        shorten(&key),
                        first.line
                    ),
                });
            }
            self.seen.insert(key.clone(), node.pos);
            self.pending = Some((key, node.pos));
            return Ok(());
        };
        self.entries.push((key, key_pos, node));
        Ok(())
    }
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
                message: format!("{}{}", e.info(), open_bracket(&stack, text)),
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
                    let tag = core_tag(
                        tag.as_deref(),
                        &["str", "int", "float", "bool", "null"],
                        pos,
                    )?;
                    let kind = resolve_scalar(&text, style, tag, pos)?;
                    Some((Node { kind, pos }, anchor))
                }
                Event::SequenceStart(anchor, tag) => {
                    core_tag(tag.as_deref(), &["seq"], pos)?;
                    if stack.len() >= MAX_DEPTH {
                        return Err(too_deep(pos));
                    }
                    stack.push(Frame::Seq(pos, anchor, Vec::new()));
                    None
                }
                Event::MappingStart(anchor, tag) => {
                    core_tag(tag.as_deref(), &["map"], pos)?;
                    if stack.len() >= MAX_DEPTH {
                        return Err(too_deep(pos));
                    }
                    stack.push(Frame::Map(MapFrame {
                        pos,
                        anchor,
                        entries: Vec::new(),
                        seen: BTreeMap::new(),
                        pending: None,
                    }));
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
                    Some(Frame::Map(m)) => Some((
                        Node {
                            kind: Kind::Map(m.entries),
                            pos: m.pos,
                        },
                        m.anchor,
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
                Some(Frame::Map(m)) => m.add(node)?,
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
        let added = size(node);
        self.nodes = self.nodes.saturating_add(added);
        self.alias_nodes = self.alias_nodes.saturating_add(added);
        if self.nodes > MAX_NODES || self.alias_nodes > MAX_ALIAS_NODES {
            return Err(SyntaxError {
                pos,
                message: format!(
                    "aliases expand the document past {MAX_ALIAS_NODES} nodes (or {MAX_NODES} in \
                     all); write the values out"
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

/// The suffix of a YAML 1.2 core schema tag allowed on this node (`!!str` on a scalar, `!!map` on a
/// mapping), or an error: other tags (`!!python/object`, `!custom`, `!!binary`) carry meaning a
/// blueprint cannot have, and silently dropping them would read the value differently than the
/// writer intended.
fn core_tag<'t>(
    tag: Option<&'t saphyr_parser::Tag>,
    allowed: &[&str],
    pos: Pos,
) -> Result<Option<&'t str>, SyntaxError> {
    let Some(tag) = tag else { return Ok(None) };
    if tag.is_yaml_core_schema() && allowed.contains(&tag.suffix.as_str()) {
        return Ok(Some(tag.suffix.as_str()));
    }
    let shown = if tag.is_yaml_core_schema() {
        format!("!!{}", tag.suffix)
    } else {
        tag.to_string()
    };
    Err(SyntaxError {
        pos,
        message: format!(
            "tag `{}` is not supported here; a blueprint uses untagged YAML 1.2 core values (allowed here: {}); remove the tag",
            shorten(&shown),
            allowed
                .iter()
                .map(|a| format!("`!!{a}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// YAML 1.2 core schema resolution for a scalar; an explicit core tag must fit the text
/// (`!!bool 16` is an error, not the string "16").
fn resolve_scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&str>,
    pos: Pos,
) -> Result<Kind, SyntaxError> {
    let tag = match tag {
        None if style != ScalarStyle::Plain => return Ok(Kind::Str(text.to_string())),
        None => return Ok(resolve_plain(text)),
        Some("str") => return Ok(Kind::Str(text.to_string())),
        Some(t) => t,
    };
    let kind = resolve_plain(text);
    let fits = matches!(
        (tag, &kind),
        ("null", Kind::Null)
            | ("bool", Kind::Bool(_))
            | ("int", Kind::Int(_))
            | ("float", Kind::Float(_))
    );
    match (tag, kind) {
        (_, kind) if fits => Ok(kind),
        ("float", Kind::Int(i)) => Ok(Kind::Float(i as f64)),
        _ => Err(SyntaxError {
            pos,
            message: format!(
                "`{}` is not a valid `!!{tag}` value; remove the tag or fix the value",
                shorten(text)
            ),
        }),
    }
}

/// Core schema resolution of an untagged plain scalar.
fn resolve_plain(text: &str) -> Kind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        "true" | "True" | "TRUE" => return Kind::Bool(true),
        "false" | "False" | "FALSE" => return Kind::Bool(false),
        _ => {}
    }
    if let Some(i) = parse_int(text) {
        return Kind::Int(i);
    }
    // An integer too large for 64 bits keeps its digits (quantities accept it; a count field then
    // reports the text as written, not a rounded float).
    if text
        .strip_prefix(['-', '+'])
        .unwrap_or(text)
        .bytes()
        .all(|b| b.is_ascii_digit())
    {
        return Kind::Str(text.to_string());
    }
    if is_float(text)
        && let Ok(f) = text.parse::<f64>()
        && f.is_finite()
    {
        return Kind::Float(f);
    }
    Kind::Str(text.to_string())
}

/// A value as YAML flow text: `v26.7.0`, `"1.34.2"`, `{ gpu: 8 }`, `[a, b]`.
pub fn inline(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./%".contains(c))
                && !s.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
                && !matches!(s.as_str(), "true" | "false" | "null" | "yes" | "no");
            if plain {
                s.clone()
            } else {
                serde_json::to_string(s).unwrap_or_default()
            }
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(inline).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(m) => {
            let entries: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", inline(&Value::String(k.clone())), inline(v)))
                .collect();
            if entries.is_empty() {
                "{}".to_string()
            } else {
                format!("{{ {} }}", entries.join(", "))
            }
        }
        other => other.to_string(),
    }
}

/// At most 80 characters of `text` for a message, so a hostile value cannot flood the output.
pub fn shorten(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        None => text.to_string(),
        Some((i, _)) => format!("{}... ({} bytes)", &text[..i], text.len()),
    }
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
    fn locations_list_every_path_in_document_order() {
        let t = SourceTree::parse("a:\n  b: [1, x]\n  \"c.d\": true\n").unwrap();
        let paths: Vec<(String, usize)> = t
            .locations()
            .into_iter()
            .map(|(p, pos, file)| (p, pos.line * 100 + pos.column + file))
            .collect();
        let want = [
            ("", 101),
            ("a", 203),
            ("a.b", 206),
            ("a.b[0]", 207),
            ("a.b[1]", 210),
            ("a.\"c.d\"", 310),
        ];
        assert_eq!(paths, want.map(|(p, n)| (p.to_string(), n)).to_vec());
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
    fn paths_respect_quoted_keys() {
        let key = |k: &str| Segment::Key(k.to_string());
        assert_eq!(
            split_path("a.\"x.y\".b"),
            vec![key("a"), key("x.y"), key("b")]
        );
        assert_eq!(split_path("a[0]"), vec![key("a"), Segment::Index(0)]);
        assert_eq!(split_path(""), vec![]);
        assert_eq!(
            join("labels", "gpu.example.com/tier"),
            "labels.\"gpu.example.com/tier\""
        );
    }

    #[test]
    fn only_core_tags_that_fit_their_value() {
        for bad in [
            "a: !!python/object x\n",
            "a: !custom x\n",
            "a: !!bool 16\n",
            "a: !!int abc\n",
            "a: !!binary aGk=\n",
            "a: !!python/object {b: 1}\n",
            "a: !!map [1]\n",
            "!foo\nb: 1\n",
        ] {
            let e = SourceTree::parse(bad).unwrap_err();
            assert!(
                e.message.contains("tag") || e.message.contains("!!"),
                "{bad}: {}",
                e.message
            );
        }
        let t =
            SourceTree::parse("a: !!str 16\nb: !!int 16\nc: !!float 1\nd: !!map {x: 1}\n").unwrap();
        assert_eq!(t.value["a"], "16");
        assert_eq!(t.value["b"], 16);
        assert_eq!(t.value["c"], 1.0);
        assert_eq!(t.value["d"]["x"], 1);
    }

    #[test]
    fn only_yaml_1_2_directives() {
        let e = SourceTree::parse("%YAML 9.9\n---\na: 1\n").unwrap_err();
        assert!(e.message.contains("%YAML 9.9"), "{}", e.message);
        let e = SourceTree::parse("%TAG !e! tag:example.com,2000:\n---\na: 1\n").unwrap_err();
        assert!(e.message.contains("%TAG"), "{}", e.message);
        assert!(SourceTree::parse("# c\n%YAML 1.2\n---\na: 1\n").is_ok());
        // `%` inside content is text, not a directive.
        assert!(SourceTree::parse("a: |\n  %YAML 9.9\n").is_ok());
    }

    #[test]
    fn keys_are_short_strings() {
        for bad in [
            "1: x\n",
            "true: x\n",
            "? \n: x\n",
            "? [a]\n: x\n",
            "1.5: x\n",
        ] {
            let e = SourceTree::parse(bad).unwrap_err();
            assert!(
                e.message.contains("keys must be strings"),
                "{bad}: {}",
                e.message
            );
        }
        assert!(SourceTree::parse("\"1\": x\n").is_ok());
        let long = format!("? {}\n: x\n", "k".repeat(2000));
        let e = SourceTree::parse(&long).unwrap_err();
        assert!(e.message.contains("at most 1024 bytes"), "{}", e.message);
    }

    #[test]
    fn many_keys_and_deep_long_keys_keep_their_positions() {
        // 20,000 keys in one mapping: duplicate detection must not scan every earlier key.
        let mut many = String::new();
        for i in 0..20_000 {
            many.push_str(&format!("k{i}: {i}\n"));
        }
        let t = SourceTree::parse(&many).unwrap();
        assert_eq!(t.pos("k19999").map(|p| p.line), Some(20_000));
        // Long keys nested deep (the memory this used to cost is asserted by the corpus test's
        // counting allocator, tests/hostile_corpus.rs, not here).
        let key = "x".repeat(1000);
        let mut deep = String::new();
        for d in 0..60 {
            deep.push_str(&format!("{}{key}{d}:\n", " ".repeat(d)));
        }
        deep.push_str(&format!("{}leaf: 1\n", " ".repeat(60)));
        let t = SourceTree::parse(&deep).unwrap();
        let mut path = String::new();
        for d in 0..60 {
            path = join(&path, &format!("{key}{d}"));
        }
        assert_eq!(t.pos(&join(&path, "leaf")).map(|p| p.line), Some(61));
    }
}
