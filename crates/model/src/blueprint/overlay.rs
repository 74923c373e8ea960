//! Overlays: a blueprint that `extends` a parent, resolved into one source tree before the typed
//! model reads it, every node keeping the file and line that set it (docs/fleet.md).
//!
//! Merging happens on the YAML tree, not on typed values, so the strict loader (unknown fields,
//! types, required fields) still runs on the effective blueprint, and every value keeps its
//! position: a finding names the file that set the value. Rules: maps merge key by key, scalars
//! replace, `null` removes a key, lists whose schema says `x-kubernetes-list-type: map` merge item
//! by item on their `x-kubernetes-list-map-keys` (an item `$patch: delete` removes one, `$patch:
//! replace` replaces one whole), every other list is replaced whole.
//!
//! Parents are hostile input in CI like the file named: each is a relative path that must stay
//! inside the root (the fleet's directory, or the named file's directory) once symlinks are
//! resolved, is read under the blueprint size limit, and the chain is at most
//! `fleet.max_extends_depth` parents long (profiles/limits.yaml) and never loops.

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use super::yaml::{Pos, PosChildren, PosNode, SourceTree};
use crate::located::{FileReport, Finding, Severity};

/// The field that names a parent.
pub const EXTENDS: &str = "extends";
/// The directive key of a keyed list's item (Kubernetes' strategic-merge-patch vocabulary).
pub const PATCH: &str = "$patch";

/// A parent of an overlay chain, for findings about what it set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The parent as a path from where the command runs (`fleet/base/training.yaml`).
    pub file: String,
    /// Its text.
    pub source: String,
}

/// Most parents a chain may have: `fleet.max_extends_depth` of profiles/limits.yaml, read from
/// the same embedded file the catalog reads (the catalog's module depends on this one).
pub fn max_depth() -> usize {
    static DEPTH: OnceLock<usize> = OnceLock::new();
    *DEPTH.get_or_init(|| {
        let text = include_str!("../../../../profiles/limits.yaml");
        SourceTree::parse(text)
            .ok()
            .and_then(|t| t.value["fleet"]["max_extends_depth"].as_u64())
            .map_or(0, |d| d as usize)
    })
}

/// One file of a chain while it is resolved.
struct Doc {
    name: String,
    path: PathBuf,
    source: String,
    tree: SourceTree,
}

/// Resolves the `extends` chain of `tree` (the text of `file`); `root` bounds where parents may
/// be (default: the directory of `file`). Without `extends` the tree comes back as it is. A
/// problem is a report on the file where it is (the one whose `extends` fails, or a broken
/// parent).
pub(super) fn resolve(
    file: &str,
    source: &str,
    tree: SourceTree,
    root: Option<&Path>,
) -> Result<(SourceTree, Vec<Layer>), FileReport> {
    if tree.value.get(EXTENDS).is_none() {
        return Ok((tree, Vec::new()));
    }
    let top = Doc {
        name: file.to_string(),
        path: PathBuf::from(file),
        source: source.to_string(),
        tree,
    };
    if file == crate::input::STDIN_NAME {
        return Err(at_extends(
            &top,
            "a blueprint read from standard input cannot `extends` a parent".into(),
            "name the file instead of `-`, so its parent can be found beside it",
        ));
    }
    let top_path = match top.path.canonicalize() {
        Ok(p) => p,
        Err(e) => {
            return Err(at_extends(
                &top,
                format!("cannot resolve `{file}`: {e}"),
                "",
            ));
        }
    };
    let root = match root.map_or_else(|| Ok(default_root(&top_path)), Path::canonicalize) {
        Ok(r) => r,
        Err(e) => {
            return Err(at_extends(
                &top,
                format!("cannot resolve the root: {e}"),
                "",
            ));
        }
    };
    let mut chain = vec![Doc {
        path: top_path,
        ..top
    }];
    while chain
        .last()
        .is_some_and(|d| d.tree.value.get(EXTENDS).is_some())
    {
        let next = parent_doc(&chain, &root)?;
        chain.push(next);
    }
    let layers = chain[1..]
        .iter()
        .map(|d| Layer {
            file: d.name.clone(),
            source: d.source.clone(),
        })
        .collect();
    let mut docs = chain.into_iter().rev();
    let Some(first) = docs.next() else {
        unreachable!("the chain holds the file named")
    };
    let mut effective = Node::from_tree(first.tree);
    let mut problems = Vec::new();
    for doc in docs {
        let over = Node::from_tree(doc.tree);
        let merged = merge(effective, over, "", &mut Ctx::new(&mut problems));
        effective = merged.unwrap_or_else(|| Node::leaf(Value::Null, Pos::default(), 0));
        if !problems.is_empty() {
            problems.sort_by(|a: &Finding, b| a.sort_key().cmp(&b.sort_key()));
            return Err(FileReport {
                file: doc.name,
                source: doc.source,
                findings: problems,
            });
        }
    }
    if let Kind::Map(entries) = &mut effective.kind {
        entries.retain(|(k, _, _)| k != EXTENDS);
    }
    Ok((effective.into_tree(), layers))
}

/// The root of a single blueprint's `extends` chain: the repository it is in (the nearest
/// directory above it holding `.git`), so one cluster of a fleet plans on its own as `gpuctl fleet`
/// plans it; outside a repository, the file's own directory. A pull request can make gpuctl read
/// only files of its own checkout.
fn default_root(top: &Path) -> PathBuf {
    let dir = parent(top);
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map_or(dir.clone(), Path::to_path_buf)
}

fn parent(path: &Path) -> PathBuf {
    path.parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The parent the last file of `chain` extends, read, parsed and checked.
fn parent_doc(chain: &[Doc], root: &Path) -> Result<Doc, FileReport> {
    let Some(child) = chain.last() else {
        unreachable!("the chain holds the file named")
    };
    let Some(rel) = child.tree.value.get(EXTENDS).and_then(Value::as_str) else {
        return Err(at_extends(
            child,
            "`extends` must be a path (text)".into(),
            "write the parent's path relative to this file, e.g. `extends: ../base/training.yaml`",
        ));
    };
    if chain.len() > max_depth() {
        let names: Vec<&str> = chain.iter().map(|d| d.name.as_str()).collect();
        return Err(at_extends(
            child,
            format!(
                "`extends` goes deeper than {} parents: {} -> {rel}",
                max_depth(),
                names.join(" -> ")
            ),
            "flatten the chain: merge two of its layers into one (profiles/limits.yaml `fleet.max_extends_depth`)",
        ));
    }
    if rel.is_empty() || Path::new(rel).is_absolute() {
        return Err(at_extends(
            child,
            format!("`extends: {rel}` is not a relative path"),
            "write the parent's path relative to this file, inside the fleet's directory",
        ));
    }
    let joined = parent(&child.path).join(rel);
    let name = clean(&parent(Path::new(&child.name)).join(rel));
    let path = joined.canonicalize().map_err(|e| {
        at_extends(
            child,
            format!("cannot read the parent `{rel}` ({}): {e}", name.display()),
            "check the path: it is relative to the file that writes `extends`",
        )
    })?;
    if !path.starts_with(root) {
        let via = if clean(&joined).starts_with(root) {
            " through a symbolic link"
        } else {
            ""
        };
        return Err(at_extends(
            child,
            format!(
                "`extends: {rel}` resolves{via} to `{}`, outside the root `{}`",
                path.display(),
                root.display()
            ),
            "keep every parent inside the fleet's directory (for a single blueprint, its repository, or its own directory outside one); `gpuctl fleet validate` uses the fleet file's directory as the root",
        ));
    }
    if let Some(i) = chain.iter().position(|d| d.path == path) {
        let names: Vec<&str> = chain[i..].iter().map(|d| d.name.as_str()).collect();
        return Err(at_extends(
            child,
            format!(
                "`extends` loops: {} -> {}",
                names.join(" -> "),
                chain[i].name
            ),
            "remove the `extends` that closes the loop: a chain ends at a base that extends nothing",
        ));
    }
    let bytes = crate::input::read(&path, &crate::input::BLUEPRINT)
        .map_err(|e| at_extends(child, e.to_string(), &e.problem.hint(&e.limit)))?;
    let source = String::from_utf8(bytes).map_err(|_| {
        at_extends(
            child,
            format!("the parent `{}` is not UTF-8 text", name.display()),
            "a parent is a blueprint: a YAML text file",
        )
    })?;
    let source = source
        .strip_prefix('\u{feff}')
        .map(str::to_string)
        .unwrap_or(source);
    let name = name.display().to_string();
    let mut tree = parse_parent(&name, &source)?;
    tree.set_file(chain.len() as u32);
    Ok(Doc {
        name,
        path,
        source,
        tree,
    })
}

/// A parent's text as a tree: YAML, a mapping, and a `ClusterBlueprint` when it says what it is.
fn parse_parent(name: &str, source: &str) -> Result<SourceTree, FileReport> {
    let report = |rule, pos, message: String, hint: &str| FileReport {
        file: name.to_string(),
        source: source.to_string(),
        findings: vec![finding(rule, "", pos, message, hint)],
    };
    let tree = SourceTree::parse(source).map_err(|e| {
        report(
            "GPU001",
            Some(e.pos),
            format!("invalid YAML: {}", e.message),
            "fix the YAML syntax at this position",
        )
    })?;
    if !tree.value.is_object() {
        return Err(report(
            "GPU003",
            tree.pos(""),
            "the document is not a mapping".into(),
            "a parent is a ClusterBlueprint",
        ));
    }
    for (field, want) in [
        ("apiVersion", super::model::API_VERSION),
        ("kind", super::model::KIND),
    ] {
        if let Some(v) = tree.value.get(field)
            && v.as_str() != Some(want)
        {
            return Err(report(
                "GPU005",
                tree.pos(field),
                format!("a parent's {field} must be `{want}`, not `{v}`"),
                "`extends` names a ClusterBlueprint (a base or another overlay)",
            ));
        }
    }
    Ok(tree)
}

/// `path` without `.` and with `..` folded where it can be (no file system access).
fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A report of one problem at the `extends` of `doc`.
fn at_extends(doc: &Doc, message: String, hint: &str) -> FileReport {
    FileReport {
        file: doc.name.clone(),
        source: doc.source.clone(),
        findings: vec![finding(
            "GPU180",
            EXTENDS,
            doc.tree.pos(EXTENDS),
            message,
            hint,
        )],
    }
}

fn finding(
    rule: &'static str,
    path: &str,
    pos: Option<Pos>,
    message: String,
    hint: &str,
) -> Finding {
    crate::finding::debug_check(crate::finding::Family::Validation, rule, Severity::Error);
    Finding {
        rule,
        severity: Severity::Error,
        path: path.to_string(),
        pos,
        message: crate::located::bounded(message),
        hint: (!hint.is_empty()).then(|| hint.to_string()),
    }
}

/// A document node with its position and file, values and positions together so a merge moves
/// both.
#[derive(Debug)]
struct Node {
    pos: Pos,
    file: u32,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Leaf(Value),
    Seq(Vec<Node>),
    Map(Vec<(String, Pos, Node)>),
}

impl Node {
    fn leaf(v: Value, pos: Pos, file: u32) -> Node {
        Node {
            pos,
            file,
            kind: Kind::Leaf(v),
        }
    }

    fn from_tree(tree: SourceTree) -> Node {
        Node::join(tree.value, tree.positions)
    }

    fn join(value: Value, p: PosNode) -> Node {
        let kind = match (value, p.children) {
            (Value::Array(items), PosChildren::Seq(ps)) => Kind::Seq(
                items
                    .into_iter()
                    .zip(ps)
                    .map(|(v, p)| Node::join(v, p))
                    .collect(),
            ),
            (Value::Object(map), PosChildren::Map(ps)) => Kind::Map(
                map.into_iter()
                    .zip(ps)
                    .map(|((k, v), (_, kp, p))| (k, kp, Node::join(v, p)))
                    .collect(),
            ),
            (v, _) => Kind::Leaf(v),
        };
        Node {
            pos: p.pos,
            file: p.file,
            kind,
        }
    }

    fn into_tree(self) -> SourceTree {
        let (value, positions) = self.split();
        SourceTree { value, positions }
    }

    fn split(self) -> (Value, PosNode) {
        let (value, children) = match self.kind {
            Kind::Leaf(v) => (v, PosChildren::Leaf),
            Kind::Seq(items) => {
                let (vs, ps): (Vec<_>, Vec<_>) = items.into_iter().map(Node::split).unzip();
                (Value::Array(vs), PosChildren::Seq(ps))
            }
            Kind::Map(entries) => {
                let mut map = serde_json::Map::with_capacity(entries.len());
                let mut ps = Vec::with_capacity(entries.len());
                for (k, kp, n) in entries {
                    let (v, p) = n.split();
                    map.insert(k.clone(), v);
                    ps.push((k, kp, p));
                }
                (Value::Object(map), PosChildren::Map(ps))
            }
        };
        (
            value,
            PosNode {
                pos: self.pos,
                file: self.file,
                children,
            },
        )
    }

    fn is_null(&self) -> bool {
        matches!(self.kind, Kind::Leaf(Value::Null))
    }

    /// The value of field `key` of a mapping node.
    fn field(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Map(entries) => entries.iter().find(|(k, _, _)| k == key).map(|e| &e.2),
            _ => None,
        }
    }

    /// The text of a scalar (for keys and directives).
    fn scalar(&self) -> Option<String> {
        match &self.kind {
            Kind::Leaf(Value::String(s)) => Some(s.clone()),
            Kind::Leaf(v) if !v.is_null() => Some(v.to_string()),
            _ => None,
        }
    }

    /// The `$patch` directive of a mapping node.
    fn directive(&self) -> Option<String> {
        self.field(PATCH).and_then(Node::scalar)
    }

    fn drop_directive(&mut self) {
        if let Kind::Map(entries) = &mut self.kind {
            entries.retain(|(k, _, _)| k != PATCH);
        }
    }
}

/// What a merge reports problems into, and the schema it reads list keys from.
struct Ctx<'a> {
    schema: Value,
    problems: &'a mut Vec<Finding>,
}

impl<'a> Ctx<'a> {
    fn new(problems: &'a mut Vec<Finding>) -> Ctx<'a> {
        Ctx {
            schema: super::schema::json(),
            problems,
        }
    }
}

/// `over` laid on `base` at `path`; `None` when `over` removes the value (`null`).
fn merge(base: Node, over: Node, path: &str, ctx: &mut Ctx) -> Option<Node> {
    if over.is_null() {
        return None;
    }
    match (base.kind, over.kind) {
        (Kind::Map(b), Kind::Map(o)) => {
            let over = Node {
                kind: Kind::Map(o),
                ..over
            };
            if over.directive().as_deref() == Some("replace") {
                let mut over = over;
                over.drop_directive();
                return Some(over);
            }
            let Kind::Map(o) = over.kind else {
                unreachable!("rebuilt as a map above")
            };
            Some(Node {
                pos: over.pos,
                file: over.file,
                kind: Kind::Map(merge_maps(b, o, path, ctx)),
            })
        }
        (Kind::Seq(b), Kind::Seq(o)) => {
            let keys = super::schema::list_map_keys(&ctx.schema, path);
            let items = match keys {
                Some(keys) => merge_keyed(b, o, &keys, path, ctx),
                None => o,
            };
            Some(Node {
                pos: over.pos,
                file: over.file,
                kind: Kind::Seq(items),
            })
        }
        (_, kind) => Some(Node { kind, ..over }),
    }
}

fn merge_maps(
    base: Vec<(String, Pos, Node)>,
    over: Vec<(String, Pos, Node)>,
    path: &str,
    ctx: &mut Ctx,
) -> Vec<(String, Pos, Node)> {
    let mut over: Vec<Option<(String, Pos, Node)>> = over.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(base.len() + over.len());
    for (key, key_pos, b) in base {
        let found = over
            .iter_mut()
            .find(|e| e.as_ref().is_some_and(|(k, _, _)| *k == key))
            .and_then(Option::take);
        match found {
            None => out.push((key, key_pos, b)),
            Some((k, kp, o)) => {
                let child = super::yaml::join(path, &k);
                if let Some(m) = merge(b, o, &child, ctx) {
                    out.push((k, kp, m));
                }
            }
        }
    }
    // New keys: a `null` for a key no parent has removes nothing and adds nothing.
    out.extend(over.into_iter().flatten().filter(|(_, _, o)| !o.is_null()));
    out
}

/// Items of a keyed list merged on `keys`: a base item with an overlay item of equal keys is
/// merged with it (or removed by `$patch: delete`, replaced by `$patch: replace`); other overlay
/// items are added at the end, in their order.
fn merge_keyed(
    base: Vec<Node>,
    over: Vec<Node>,
    keys: &[String],
    path: &str,
    ctx: &mut Ctx,
) -> Vec<Node> {
    let key_of = |n: &Node| -> Option<Vec<String>> {
        keys.iter()
            .map(|k| n.field(k).and_then(Node::scalar))
            .collect()
    };
    let mut out: Vec<Option<Node>> = base.into_iter().map(Some).collect();
    let mut added = Vec::new();
    for mut item in over {
        let directive = item.directive();
        let key = key_of(&item);
        let at = key.as_ref().and_then(|key| {
            out.iter()
                .position(|b| b.as_ref().is_some_and(|b| key_of(b).as_ref() == Some(key)))
        });
        let shown = key.as_ref().map_or_else(String::new, |k| {
            keys.iter()
                .zip(k)
                .map(|(f, v)| format!("{f}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        });
        match (directive.as_deref(), at) {
            (Some("delete"), Some(i)) => out[i] = None,
            (Some("delete"), None) => bad_patch(
                ctx,
                &item,
                path,
                format!("`$patch: delete` removes `{shown}` from `{path}`, but no parent has it"),
                "check the item's keys against the parent's, or remove this item",
            ),
            (Some("replace"), found) => {
                item.drop_directive();
                place(&mut out, &mut added, found, item);
            }
            (Some(other), _) => bad_patch(
                ctx,
                &item,
                path,
                format!("`$patch: {other}` is not a directive gpuctl knows"),
                "use `$patch: delete` to remove the item, `$patch: replace` to replace it whole, or leave it out to merge",
            ),
            (None, Some(i)) => {
                let b = out[i].take();
                let child = format!("{path}[{i}]");
                out[i] = b.and_then(|b| merge(b, item, &child, ctx));
            }
            (None, None) => added.push(item),
        }
    }
    out.into_iter().flatten().chain(added).collect()
}

fn place(out: &mut [Option<Node>], added: &mut Vec<Node>, at: Option<usize>, item: Node) {
    match at {
        Some(i) => out[i] = Some(item),
        None => added.push(item),
    }
}

fn bad_patch(ctx: &mut Ctx, item: &Node, path: &str, message: String, hint: &str) {
    let pos = item.field(PATCH).map_or(item.pos, |n| n.pos);
    ctx.problems
        .push(finding("GPU181", path, Some(pos), message, hint));
}

#[cfg(test)]
mod tests;
