//! Where one value of an effective blueprint comes from: what every file of its `extends` chain
//! does to one field, and which one wins (`gpuctl fleet explain`, docs/fleet.md).
//!
//! The field is followed through each file's own tree by the item keys of keyed lists (an index
//! of the effective blueprint names a different item in a parent whose list is ordered
//! differently), so the effective path is first turned into a keyed one.

use serde_json::Value;

use super::load::Loaded;
use super::overlay::PATCH;
use super::yaml::{Pos, PosChildren, PosNode, SourceTree, inline, join, shorten};

/// Most names a hint lists when a field is not found.
const MAX_LISTED: usize = 12;
/// Most characters of a value shown in a file's row.
const ROW_VALUE: usize = 40;

/// What one file of the chain does to the field.
#[derive(Debug, Clone, PartialEq)]
pub enum Mark {
    /// The file does not write the field.
    NotSet,
    /// The file sets the field to this value (`$patch` left out); `replace` when it replaces a
    /// mapping or item whole (`$patch: replace`).
    Sets {
        /// The value it writes.
        value: Value,
        /// Whether it replaces the parents' value whole.
        replace: bool,
    },
    /// The file writes `null` at the field or at a mapping above it.
    Removed,
    /// The file deletes an item on the field's path (`$patch: delete`).
    Deleted,
    /// The file replaces something above the field whole, without the field (a `$patch:
    /// replace`, a list replaced whole, a value that is not a mapping).
    Dropped,
}

/// What became of a file's mark in the effective blueprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to say (the file does not set the field, or removes it).
    None,
    /// Its value is the effective one.
    Wins,
    /// Its mapping or keyed list is merged into the effective one with the other files'.
    Merged,
    /// A nearer file (index into [`Explained::files`]) replaced or removed its value.
    OverriddenBy(usize),
}

/// One file of the chain, nearest first.
#[derive(Debug, Clone, PartialEq)]
pub struct FileMark {
    /// The file as the user named it (or as its child's `extends` reaches it).
    pub file: String,
    /// The line of the mark in that file (`None` when the file does not set the field).
    pub pos: Option<Pos>,
    /// What it does to the field.
    pub mark: Mark,
    /// What became of it.
    pub verdict: Verdict,
}

/// The chain of one field.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    /// The field as findings write it (list indices of the effective blueprint); the keyed form
    /// when the effective blueprint does not have it.
    pub path: String,
    /// The field with each keyed list's item named by its keys (`spec.nodePools[name=train]`).
    pub keyed: String,
    /// The effective value (`None`: a file removed it).
    pub value: Option<Value>,
    /// Every file of the chain, the one named first, then each parent.
    pub files: Vec<FileMark>,
}

/// Why a field cannot be explained: it is not written right, or no file of the chain has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoField {
    /// What is wrong.
    pub message: String,
    /// What to write instead.
    pub hint: Option<String>,
}

impl NoField {
    fn new(message: String, hint: Option<String>) -> NoField {
        NoField { message, hint }
    }
}

impl std::fmt::Display for NoField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.hint {
            Some(h) => write!(f, "{}\n({h})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// A step of a field's path as the user writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Written {
    Key(String),
    Index(usize),
    /// `[train]` or `[key=a,effect=b]`: an item by its keys (a name is optional for one key).
    Match(Vec<(Option<String>, String)>),
}

/// A step of a path every file of the chain can follow.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    /// An item of a list replaced whole (files set the list, not the item).
    Index(usize),
    /// An item of a keyed list, by its keys in the schema's order.
    Item(Vec<(String, String)>),
}

/// The chain of `field` (written as findings write paths; an item of a keyed list may be named
/// by its keys: `spec.nodePools[train]`, `spec.nodePools[name=train]`) in `loaded`.
pub fn explain(loaded: &Loaded, field: &str) -> Result<Explained, NoField> {
    let files: Vec<(&str, &str)> = std::iter::once((loaded.file.as_str(), loaded.source.as_str()))
        .chain(
            loaded
                .layers
                .iter()
                .map(|l| (l.file.as_str(), l.source.as_str())),
        )
        .collect();
    chain(&loaded.tree, &files, field)
}

/// [`explain`] on data: the effective tree and each file of the chain (name, text), nearest
/// first.
pub fn chain(
    effective: &SourceTree,
    files: &[(&str, &str)],
    field: &str,
) -> Result<Explained, NoField> {
    let schema = super::schema::json();
    let written = parse(field)?;
    let resolved = resolve(&effective.value, written, &schema)?;
    let mut out = Vec::with_capacity(files.len());
    for (name, text) in files {
        let tree = SourceTree::parse(text)
            .map_err(|e| NoField::new(format!("`{name}` is not YAML: {}", e.message), None))?;
        let (mark, pos) = mark(&tree, &resolved.steps);
        out.push(FileMark {
            file: (*name).to_string(),
            pos,
            mark,
            verdict: Verdict::None,
        });
    }
    if resolved.value.is_none() && out.iter().all(|f| f.mark == Mark::NotSet) {
        let (message, hint) = resolved
            .missing
            .unwrap_or_else(|| (format!("no file sets `{field}`"), None));
        return Err(NoField::new(message, hint));
    }
    let merged = match &resolved.value {
        Some(Value::Object(_)) => true,
        Some(Value::Array(_)) => super::schema::list_map_keys(&schema, &resolved.path).is_some(),
        Some(_) => false,
        None => out.iter().any(|f| {
            matches!(
                &f.mark,
                Mark::Sets {
                    value: Value::Object(_),
                    ..
                }
            )
        }),
    };
    judge(&mut out, merged);
    let keyed = keyed(&resolved.steps);
    Ok(Explained {
        path: if resolved.value.is_some() {
            resolved.path
        } else {
            keyed.clone()
        },
        keyed,
        value: resolved.value,
        files: out,
    })
}

/// Sets each file's verdict, from the farthest parent to the file named, as the merge went.
fn judge(files: &mut [FileMark], merged: bool) {
    let mut holders: Vec<usize> = Vec::new();
    for i in (0..files.len()).rev() {
        let (sets, replace) = match &files[i].mark {
            Mark::NotSet => continue,
            Mark::Sets { replace, .. } => (true, *replace),
            Mark::Removed | Mark::Deleted | Mark::Dropped => (false, false),
        };
        // A scalar or a whole list replaces what the parents set; a mapping or keyed item
        // merges with it unless it says `$patch: replace`; a removal ends it.
        if !sets || !merged || replace {
            for h in holders.drain(..) {
                files[h].verdict = Verdict::OverriddenBy(i);
            }
        }
        if sets {
            holders.push(i);
        }
    }
    for h in holders {
        files[h].verdict = if merged {
            Verdict::Merged
        } else {
            Verdict::Wins
        };
    }
}

/// Parses a field: keys separated by `.` (quoted with `"` when they hold `.`, `[`, `/` or
/// spaces, as findings quote them), list items in brackets (`[0]`, `[train]`, `[name=train]`,
/// `[key=nvidia.com/gpu,effect=NoSchedule]`).
fn parse(field: &str) -> Result<Vec<Written>, NoField> {
    let bad = |what: &str| {
        NoField::new(
            format!("`{}`: {what}", shorten(field)),
            Some(
                "write the field as findings print it, e.g. `spec.nodePools[0].gpu.count` or `spec.nodePools[train].gpu.count`"
                    .into(),
            ),
        )
    };
    let mut out = Vec::new();
    let mut chars = field.chars();
    let mut key = String::new();
    let mut quoted = false;
    let mut in_quote = false;
    let push = |out: &mut Vec<Written>, key: &mut String, quoted: &mut bool| {
        if !key.is_empty() || *quoted {
            out.push(Written::Key(std::mem::take(key)));
        }
        *quoted = false;
    };
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                in_quote = !in_quote;
                quoted = true;
            }
            '\\' if in_quote => key.extend(chars.next()),
            '.' if !in_quote => push(&mut out, &mut key, &mut quoted),
            '[' if !in_quote => {
                push(&mut out, &mut key, &mut quoted);
                let mut inner = String::new();
                let mut closed = false;
                for d in chars.by_ref() {
                    if d == ']' {
                        closed = true;
                        break;
                    }
                    inner.push(d);
                }
                if !closed {
                    return Err(bad("a `[` is not closed"));
                }
                out.push(bracket(&inner).map_err(|w| bad(&w))?);
            }
            _ => key.push(c),
        }
    }
    if in_quote {
        return Err(bad("a `\"` is not closed"));
    }
    push(&mut out, &mut key, &mut quoted);
    if out.is_empty() {
        return Err(bad("no field named"));
    }
    Ok(out)
}

fn bracket(inner: &str) -> Result<Written, String> {
    let inner = inner.trim();
    if inner.is_empty() {
        return Err("`[]` names no item".into());
    }
    if inner.bytes().all(|b| b.is_ascii_digit()) {
        return inner
            .parse()
            .map(Written::Index)
            .map_err(|_| format!("`[{inner}]` is not an index"));
    }
    let pairs = inner
        .split(',')
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (Some(k.trim().to_string()), v.trim().to_string()),
            None => (None, p.trim().to_string()),
        })
        .collect();
    Ok(Written::Match(pairs))
}

/// A field followed through the effective tree.
struct Resolved {
    steps: Vec<Step>,
    /// The path with effective indices (as far as the effective tree has it).
    path: String,
    value: Option<Value>,
    /// Where the effective tree ends, said as an error, and a hint.
    missing: Option<(String, Option<String>)>,
}

/// Follows `written` through the effective tree, turning indices of keyed lists into keys.
fn resolve(effective: &Value, written: Vec<Written>, schema: &Value) -> Result<Resolved, NoField> {
    let mut cur = Some(effective);
    let mut path = String::new();
    let mut steps = Vec::new();
    let mut missing = None;
    for w in written {
        let list_keys = || super::schema::list_map_keys(schema, &path);
        match w {
            Written::Key(k) => {
                let next = cur.and_then(|v| v.as_object()).and_then(|m| m.get(&k));
                if let (Some(v), None) = (cur, next) {
                    missing.get_or_insert_with(|| no_key(v, &path, &k));
                }
                cur = next;
                path = join(&path, &k);
                steps.push(Step::Key(k));
            }
            Written::Index(i) => {
                let list = cur.and_then(Value::as_array);
                let item = list.and_then(|a| a.get(i));
                match (list_keys(), item) {
                    (Some(keys), Some(item)) => {
                        let Some(kv) = key_values(item, &keys) else {
                            return Err(NoField::new(
                                format!("item `{path}[{i}]` lacks its keys ({})", keys.join(", ")),
                                None,
                            ));
                        };
                        steps.push(Step::Item(kv));
                    }
                    (Some(keys), None) => {
                        let n = list.map_or(0, Vec::len);
                        return Err(NoField::new(
                            format!(
                                "`{path}` has no item [{i}] in the effective blueprint ({n} item{})",
                                if n == 1 { "" } else { "s" }
                            ),
                            Some(format!(
                                "an item a file deleted has no index: name it by its keys, `{path}[{}]`",
                                keys.iter()
                                    .map(|k| format!("{k}=..."))
                                    .collect::<Vec<_>>()
                                    .join(",")
                            )),
                        ));
                    }
                    (None, _) => {
                        if let (Some(v), None) = (cur, item) {
                            missing.get_or_insert_with(|| no_index(v, &path, i));
                        }
                        steps.push(Step::Index(i));
                    }
                }
                cur = item;
                path = format!("{path}[{i}]");
            }
            Written::Match(pairs) => {
                let Some(keys) = list_keys() else {
                    return Err(NoField::new(
                        format!("`{path}` is not a keyed list: its items have no keys"),
                        Some(format!("name the item by its index, e.g. `{path}[0]`")),
                    ));
                };
                let kv = match_keys(&pairs, &keys, &path)?;
                let list = cur.and_then(Value::as_array);
                let at = list.and_then(|a| {
                    a.iter()
                        .position(|it| key_values(it, &keys).as_ref() == Some(&kv))
                });
                let shown = item_name(&kv);
                if let (Some(v), None) = (cur, at) {
                    missing.get_or_insert_with(|| no_item(v, &path, &shown, &keys));
                }
                cur = at.and_then(|i| list.and_then(|a| a.get(i)));
                path = match at {
                    Some(i) => format!("{path}[{i}]"),
                    None => format!("{path}[{shown}]"),
                };
                steps.push(Step::Item(kv));
            }
        }
    }
    Ok(Resolved {
        steps,
        path,
        value: cur.cloned(),
        missing,
    })
}

/// The item's key values (as the merge compares them), in the schema's order.
fn key_values(item: &Value, keys: &[String]) -> Option<Vec<(String, String)>> {
    keys.iter()
        .map(|k| {
            let text = match item.get(k)? {
                Value::String(s) => s.clone(),
                Value::Null => return None,
                v => v.to_string(),
            };
            Some((k.clone(), text))
        })
        .collect()
}

/// `[train]` or `[name=train]` against the list's keys, in the keys' order.
fn match_keys(
    pairs: &[(Option<String>, String)],
    keys: &[String],
    path: &str,
) -> Result<Vec<(String, String)>, NoField> {
    let form = || {
        Some(format!(
            "items of `{path}` are keyed by {}: write `{path}[{}]`",
            keys.join(", "),
            keys.iter()
                .map(|k| format!("{k}=..."))
                .collect::<Vec<_>>()
                .join(",")
        ))
    };
    if let [(None, v)] = pairs
        && let [k] = keys
    {
        return Ok(vec![(k.clone(), v.clone())]);
    }
    if let Some(n) = pairs
        .iter()
        .find_map(|(n, _)| n.as_ref().filter(|n| !keys.contains(n)))
    {
        let guess = crate::suggest::closest(n, keys.iter().map(String::as_str))
            .map_or_else(String::new, |c| format!("; did you mean `{c}`?"));
        return Err(NoField::new(
            format!("`{n}` is not a key of `{path}`'s items{guess}"),
            form(),
        ));
    }
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let v = pairs.iter().find(|(n, _)| n.as_deref() == Some(k.as_str()));
        match v {
            Some((_, v)) => out.push((k.clone(), v.clone())),
            None => {
                return Err(NoField::new(
                    format!("the item of `{path}` does not say its `{k}`"),
                    form(),
                ));
            }
        }
    }
    Ok(out)
}

fn item_name(kv: &[(String, String)]) -> String {
    kv.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The keyed form of a path.
fn keyed(steps: &[Step]) -> String {
    let mut path = String::new();
    for s in steps {
        match s {
            Step::Key(k) => path = join(&path, k),
            Step::Index(i) => path = format!("{path}[{i}]"),
            Step::Item(kv) => path = format!("{path}[{}]", item_name(kv)),
        }
    }
    path
}

/// The error for a key the effective mapping `v` at `path` lacks, naming the closest key.
fn no_key(v: &Value, path: &str, key: &str) -> (String, Option<String>) {
    let shown = if path.is_empty() {
        "the blueprint"
    } else {
        path
    };
    let message = format!("`{}` has no field `{}`", shown, shorten(key));
    let Some(m) = v.as_object() else {
        return (
            format!(
                "`{shown}` is not a mapping: it has no field `{}`",
                shorten(key)
            ),
            Some(format!("`{shown}` is the value itself")),
        );
    };
    let hint = match crate::suggest::closest(key, m.keys().map(String::as_str)) {
        Some(c) => format!("did you mean `{}`?", join(path, c)),
        None => listed("its fields", m.keys().map(String::as_str)),
    };
    (message, Some(hint))
}

fn no_index(v: &Value, path: &str, i: usize) -> (String, Option<String>) {
    match v.as_array() {
        Some(a) => (
            format!(
                "`{path}` has no item [{i}] ({} item{})",
                a.len(),
                if a.len() == 1 { "" } else { "s" }
            ),
            a.len()
                .checked_sub(1)
                .map(|last| format!("the last item is `{path}[{last}]`")),
        ),
        None => (format!("`{path}` is not a list"), None),
    }
}

fn no_item(v: &Value, path: &str, shown: &str, keys: &[String]) -> (String, Option<String>) {
    let names: Vec<String> = v
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|it| key_values(it, keys))
                .map(|kv| item_name(&kv))
                .collect()
        })
        .unwrap_or_default();
    let hint = match crate::suggest::closest(shown, names.iter().map(String::as_str)) {
        Some(c) => format!("did you mean `{path}[{c}]`?"),
        None => listed("its items", names.iter().map(String::as_str)),
    };
    (
        format!("`{path}` has no item `{}`", shorten(shown)),
        Some(hint),
    )
}

fn listed<'a>(what: &str, names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    let more = names.len().saturating_sub(MAX_LISTED);
    let mut shown = names
        .iter()
        .take(MAX_LISTED)
        .map(|n| format!("`{}`", shorten(n)))
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        shown.push_str(&format!(" and {more} more"));
    }
    if names.is_empty() {
        format!("{what}: none")
    } else {
        format!("{what}: {shown}")
    }
}

/// What one file's own tree does to the field at `steps`, and where.
fn mark(tree: &SourceTree, steps: &[Step]) -> (Mark, Option<Pos>) {
    let mut v = &tree.value;
    let mut p = &tree.positions;
    // The line shown: a key's for a mapping entry, the item's for a list item.
    let mut at = p.pos;
    // Below a `$patch: replace` or inside a list replaced whole, this file sets everything: what
    // it lacks there, the parents' values lose.
    let mut whole = false;
    for (n, step) in steps.iter().enumerate() {
        if n > 0 && v.is_null() {
            return (Mark::Removed, Some(at));
        }
        whole |= n > 0 && v.get(PATCH).and_then(Value::as_str) == Some("replace");
        let next = match (step, v, &p.children) {
            (Step::Key(k), Value::Object(m), PosChildren::Map(entries)) => {
                match (m.get(k), entries.iter().find(|e| e.0 == *k)) {
                    (Some(nv), Some((_, kp, np))) => Ok((nv, np, *kp)),
                    _ if whole => Err(Mark::Dropped),
                    _ => return (Mark::NotSet, None),
                }
            }
            // A list replaced whole: without the item, what the parents had here is gone.
            (Step::Index(i), Value::Array(a), PosChildren::Seq(ps)) => a
                .get(*i)
                .zip(ps.get(*i))
                .map(|(nv, np)| (nv, np, np.pos))
                .ok_or(Mark::Dropped),
            (Step::Item(kv), Value::Array(a), PosChildren::Seq(ps)) => {
                let keys: Vec<String> = kv.iter().map(|(k, _)| k.clone()).collect();
                let Some(i) = a
                    .iter()
                    .position(|it| key_values(it, &keys).as_ref() == Some(kv))
                else {
                    return if whole {
                        (Mark::Dropped, Some(at))
                    } else {
                        (Mark::NotSet, None)
                    };
                };
                if a[i].get(PATCH).and_then(Value::as_str) == Some("delete") {
                    return (Mark::Deleted, Some(patch_pos(&ps[i])));
                }
                Ok((&a[i], &ps[i], ps[i].pos))
            }
            // A scalar where the path goes on: the field does not exist below it.
            _ => return (Mark::NotSet, None),
        };
        let (nv, np, pos) = match next {
            Ok(n) => n,
            Err(m) => return (m, Some(at)),
        };
        whole |= matches!(step, Step::Index(_));
        v = nv;
        p = np;
        at = pos;
    }
    if v.is_null() {
        return (Mark::Removed, Some(at));
    }
    let replace = whole || v.get(PATCH).and_then(Value::as_str) == Some("replace");
    let mut value = v.clone();
    if let Value::Object(m) = &mut value {
        m.remove(PATCH);
    }
    (Mark::Sets { value, replace }, Some(at))
}

/// The position of an item's `$patch` key (the item's own when it has none).
fn patch_pos(item: &PosNode) -> Pos {
    match &item.children {
        PosChildren::Map(entries) => entries
            .iter()
            .find(|e| e.0 == PATCH)
            .map_or(item.pos, |e| e.1),
        _ => item.pos,
    }
}

/// A value on one line, at most 80 characters of it.
fn one_line(v: &Value) -> String {
    shorten(&inline(v))
}

/// A value in a file's row: at most [`ROW_VALUE`] characters, so a mapping keeps the verdicts
/// in sight.
fn in_row(v: &Value) -> String {
    let text = inline(v);
    match text.char_indices().nth(ROW_VALUE) {
        None => text,
        Some((i, _)) => format!("{}...", &text[..i]),
    }
}

impl Explained {
    /// The chain as text: the field, its effective value, then one line per file, nearest
    /// first (`file:line  value  verdict`).
    pub fn text(&self) -> String {
        let mut out = String::new();
        if self.keyed == self.path {
            out.push_str(&format!("field: {}\n", self.path));
        } else {
            out.push_str(&format!("field: {} ({})\n", self.path, self.keyed));
        }
        match &self.value {
            Some(v) => out.push_str(&format!("value: {}\n", one_line(v))),
            None => out.push_str("value: none (removed from the effective blueprint)\n"),
        }
        out.push_str("chain, nearest first:\n");
        let place = |f: &FileMark| match f.pos {
            Some(p) => format!("{}:{}", f.file, p.line),
            None => f.file.clone(),
        };
        let rows: Vec<(String, String, String)> = self
            .files
            .iter()
            .map(|f| {
                let value = match &f.mark {
                    Mark::Sets { value, .. } => in_row(value),
                    Mark::Removed => "null".into(),
                    _ => "-".into(),
                };
                (place(f), value, self.verdict_text(f, &place))
            })
            .collect();
        let w0 = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
        let w1 = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
        for (a, b, c) in rows {
            out.push_str(&format!("  {a:<w0$}  {b:<w1$}  {c}\n"));
        }
        out
    }

    fn verdict_text(&self, f: &FileMark, place: &dyn Fn(&FileMark) -> String) -> String {
        let by = |i: usize| {
            self.files.get(i).map_or_else(String::new, |o| {
                let how = match o.mark {
                    Mark::Removed => "removed by",
                    Mark::Deleted => "deleted by",
                    Mark::Dropped => "dropped by",
                    _ => "overridden by",
                };
                format!("{how} {}", place(o))
            })
        };
        match (&f.mark, f.verdict) {
            (Mark::NotSet, _) => "not set".into(),
            (Mark::Removed, _) => "removed here (null)".into(),
            (Mark::Deleted, _) => "deleted here ($patch: delete)".into(),
            (Mark::Dropped, _) => "replaced whole here, without it".into(),
            (Mark::Sets { .. }, Verdict::Wins) => "set here, wins".into(),
            (Mark::Sets { .. }, Verdict::Merged) => "set here, merged".into(),
            (Mark::Sets { .. }, Verdict::OverriddenBy(i)) => by(i),
            (Mark::Sets { .. }, Verdict::None) => "set here".into(),
        }
    }
}

#[cfg(test)]
mod tests;
