//! Loading: text -> `SourceTree` -> typed `Blueprint`, with every structural problem as a finding.

use std::path::Path;

use super::model::{API_VERSION, Blueprint, KIND};
use super::overlay::Layer;
use super::yaml::{Pos, Segment, SourceTree, split_path};
use crate::located::{FileReport, Finding, Severity};
use crate::suggest;

/// Structural findings collected before giving up on a badly broken file.
const MAX_STRUCTURAL: usize = 100;
/// Each structural finding costs one more deserialisation pass over the document; the passes may
/// visit this many nodes in all, so a huge broken document costs a bounded time (a few passes)
/// while an ordinary one still gets every finding.
const STRUCTURAL_WORK: usize = 3_000_000;

/// A blueprint that parsed and deserialised, with its source kept for positions.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file as the user named it.
    pub file: String,
    /// The file's text.
    pub source: String,
    /// Positions of every path.
    pub tree: SourceTree,
    /// The typed blueprint.
    pub blueprint: Blueprint,
    /// The parents it `extends`, nearest first (empty for a blueprint without `extends`); the
    /// tree's positions of file `n` are in `layers[n - 1]` ([`SourceTree::origin`]).
    pub layers: Vec<Layer>,
}

impl Loaded {
    /// The file that set the value at `path`: its name, and its text (`None` for the file
    /// named, whose text is [`Loaded::source`]).
    pub fn origin(&self, path: &str) -> Option<&Layer> {
        match self.tree.origin(path) {
            0 => None,
            n => self.layers.get(n - 1),
        }
    }

    /// `report` (findings about this blueprint) split by the file that set each finding's value:
    /// the file named first, then each parent with findings, each with its own text for snippets.
    /// A parent's finding says which file extends it.
    pub fn split(&self, report: FileReport) -> Vec<FileReport> {
        let mut out: Vec<FileReport> = std::iter::once((&self.file, &self.source))
            .chain(self.layers.iter().map(|l| (&l.file, &l.source)))
            .map(|(file, source)| FileReport {
                file: file.clone(),
                source: source.clone(),
                findings: Vec::new(),
            })
            .collect();
        for mut f in report.findings {
            let n = self.tree.origin(&f.path).min(self.layers.len());
            if n > 0 {
                f.hint = Some(self.inherited_hint(f.hint.take()));
            }
            out[n].findings.push(f);
        }
        let mut out: Vec<FileReport> = out
            .into_iter()
            .enumerate()
            .filter(|(i, r)| *i == 0 || !r.findings.is_empty())
            .map(|(_, r)| r)
            .collect();
        if out[0].findings.is_empty() && out.len() > 1 {
            out.remove(0);
        }
        out
    }

    /// `report` with each finding about a value a parent set saying where it was set (its
    /// position is the parent's, so it is moved into the message): for callers that print one
    /// report per blueprint.
    pub fn annotate(&self, mut report: FileReport) -> FileReport {
        report.findings = annotate(&self.file, &self.tree, &self.layers, report.findings);
        report
    }

    fn inherited_hint(&self, hint: Option<String>) -> String {
        inherited_hint(&self.file, hint)
    }
}

/// [`Loaded::annotate`] of findings on `tree`.
fn annotate(
    file: &str,
    tree: &SourceTree,
    layers: &[Layer],
    mut findings: Vec<Finding>,
) -> Vec<Finding> {
    for f in &mut findings {
        let Some(layer) = tree
            .origin(&f.path)
            .checked_sub(1)
            .and_then(|n| layers.get(n))
        else {
            continue;
        };
        let at = f.pos.map(|p| format!(":{p}")).unwrap_or_default();
        f.message = format!("{} (set in {}{at})", f.message, layer.file);
        f.pos = None;
        f.hint = Some(inherited_hint(file, f.hint.take()));
    }
    findings
}

fn inherited_hint(file: &str, hint: Option<String>) -> String {
    let fix = format!(
        "this value is set in a parent `{file}` extends: fix it there, or override it in `{file}`"
    );
    match hint {
        Some(h) => format!("{h}; {fix}"),
        None => fix,
    }
}

/// Reads and loads a blueprint file, or standard input for `-` (named `<stdin>`), under
/// [`crate::input::BLUEPRINT`]. An unreadable, oversized or special file is a single finding.
pub fn load_file(path: &Path) -> Result<Loaded, FileReport> {
    load_file_in(path, None).map_err(|b| b.report)
}

/// [`load_file`] with the directory its `extends` chain must stay in (`None`: the file's own
/// directory), keeping what loaded of a broken document.
pub fn load_file_in(path: &Path, root: Option<&Path>) -> Result<Loaded, Broken> {
    let file = crate::input::name(path);
    let bytes = crate::input::read(path, &crate::input::BLUEPRINT)
        .map_err(|e| {
            single(
                &file,
                None,
                e.problem.to_string(),
                &e.problem.hint(&e.limit),
            )
        })
        .map_err(|report| Broken {
            report,
            partial: None,
        })?;
    load_bytes_in(&file, bytes, root)
}

/// Loads a blueprint already read (e.g. by `gpuctl apply`, which reads its target once to tell a
/// saved plan from a blueprint); `file` names it in findings. Refuses what [`load_file`] refuses.
pub fn load_bytes(file: &str, bytes: Vec<u8>) -> Result<Loaded, FileReport> {
    load_bytes_partial(file, bytes).map_err(|b| b.report)
}

/// [`load_bytes`], keeping what loaded of a broken document.
pub fn load_bytes_partial(file: &str, bytes: Vec<u8>) -> Result<Loaded, Broken> {
    load_bytes_in(file, bytes, None)
}

/// [`load_bytes_partial`] with the root of its `extends` chain ([`load_file_in`]).
pub fn load_bytes_in(file: &str, bytes: Vec<u8>, root: Option<&Path>) -> Result<Loaded, Broken> {
    let whole = |report| Broken {
        report,
        partial: None,
    };
    if let Some(report) = too_large(file, bytes.len()) {
        return Err(whole(report));
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            // Line breaks as YAML counts them (`\r\n`, `\r` or `\n`); columns count characters, as
            // the parser's do; the prefix is valid UTF-8.
            let text = std::str::from_utf8(valid)
                .unwrap_or_default()
                .replace("\r\n", "\n")
                .replace('\r', "\n");
            let line = text.matches('\n').count() + 1;
            let column = text.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            return Err(whole(single(
                file,
                Some(Pos { line, column }),
                "the file is not UTF-8 text".into(),
                "a blueprint is a YAML text file; check that this is the right file",
            )));
        }
    };
    load_str_in(file, &text, root)
}

/// Loads a blueprint from text; `file` names it in findings.
pub fn load_str(file: &str, text: &str) -> Result<Loaded, FileReport> {
    load_str_partial(file, text).map_err(|b| b.report)
}

/// A blueprint with structural problems: every one of them, and what could still be loaded.
#[derive(Debug, Clone)]
pub struct Broken {
    /// The structural findings (syntax, header, unknown fields, types, values, missing fields).
    pub report: FileReport,
    /// The document with each problem worked around, when it could be: semantic rules still run on
    /// it, so one run reports everything.
    pub partial: Option<Box<Partial>>,
}

/// A broken blueprint with its broken parts removed (optional fields, which then take their
/// defaults) or stood in for (required fields and list items get a neutral value).
#[derive(Debug, Clone)]
pub struct Partial {
    /// The blueprint as loaded after the repairs; positions are the file's.
    pub loaded: Loaded,
    /// The paths removed or stood in for: findings at or under them are about the repair, not
    /// about what the file says.
    pub repaired: Vec<String>,
}

impl Partial {
    /// Whether a finding at `path` is about a repaired part.
    pub fn covers(&self, path: &str) -> bool {
        self.repaired.iter().any(|r| {
            path == r
                || path
                    .strip_prefix(r.as_str())
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    }
}

/// [`load_str`], keeping what loaded of a broken document.
pub fn load_str_partial(file: &str, text: &str) -> Result<Loaded, Broken> {
    load_str_in(file, text, None)
}

/// [`load_str_partial`] with the root of its `extends` chain ([`load_file_in`]); `file` is the
/// path the parents are found from.
fn load_str_in(file: &str, text: &str, root: Option<&Path>) -> Result<Loaded, Broken> {
    // A UTF-8 byte order mark is not content; dropped here, positions and snippets agree.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let fail = |findings: Vec<Finding>| Broken {
        report: FileReport {
            file: file.to_string(),
            source: text.to_string(),
            findings,
        },
        partial: None,
    };
    // Text handed in directly (tests, callers of the library) meets the limit the readers use.
    if let Some(report) = too_large(file, text.len()) {
        return Err(Broken {
            report,
            partial: None,
        });
    }
    let tree = SourceTree::parse(text).map_err(|e| {
        fail(vec![finding(
            "GPU001",
            "",
            Some(e.pos),
            format!("invalid YAML: {}", e.message),
            Some("fix the YAML syntax at this position".into()),
        )])
    })?;
    if !tree.value.is_object() {
        return Err(fail(vec![finding(
            "GPU003",
            "",
            tree.pos(""),
            "the document is not a mapping".into(),
            Some(format!(
                "a blueprint starts with `apiVersion: {API_VERSION}` and `kind: {KIND}`"
            )),
        )]));
    }
    let (tree, layers) =
        super::overlay::resolve(file, text, tree, root).map_err(|report| Broken {
            report,
            partial: None,
        })?;
    typed(file, text, tree, layers)
}

/// The typed blueprint of a (resolved) tree, every structural problem a finding.
fn typed(file: &str, text: &str, tree: SourceTree, layers: Vec<Layer>) -> Result<Loaded, Broken> {
    let fail = |findings: Vec<Finding>| Broken {
        report: FileReport {
            file: file.to_string(),
            source: text.to_string(),
            findings,
        },
        partial: None,
    };

    let mut findings = header_findings(&tree);
    let mut value = tree.value.clone();
    // The header was checked above; the rest of the document is checked as if it were right.
    value["apiVersion"] = API_VERSION.into();
    value["kind"] = KIND.into();

    // serde stops at the first error; to report every structural problem at once, each one is
    // worked around and deserialisation runs again: an optional field with a wrong value or an
    // unknown field is removed, a missing or unusable required field or list item gets a stand-in
    // value from the schema (so items keep their indices, and positions stay the file's).
    let schema = super::schema::json();
    let mut repaired: Vec<String> = Vec::new();
    let passes = (STRUCTURAL_WORK / node_count(&value).max(1)).clamp(2, MAX_STRUCTURAL);
    for _ in 0..passes {
        match serde_path_to_error::deserialize::<_, Blueprint>(super::strict::Strict(&value)) {
            Ok(blueprint) => {
                let loaded = Loaded {
                    file: file.to_string(),
                    source: text.to_string(),
                    tree,
                    blueprint,
                    layers,
                };
                if findings.is_empty() {
                    return Ok(loaded);
                }
                findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
                let report = loaded.annotate(FileReport {
                    file: file.to_string(),
                    source: text.to_string(),
                    findings,
                });
                return Err(Broken {
                    report,
                    partial: Some(Box::new(Partial { loaded, repaired })),
                });
            }
            Err(err) => {
                let path = error_path(err.path());
                let message = err.inner().to_string();
                let Some((f, fix)) = classify(&tree, &schema, &path, &message) else {
                    break;
                };
                findings.push(f);
                let target = fix.path().to_string();
                // The same node failing twice means its stand-in did not help: stop here.
                if repaired.contains(&target) || !fix.apply(&mut value) {
                    break;
                }
                repaired.push(target);
            }
        }
    }
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let findings = annotate(file, &tree, &layers, findings);
    Err(fail(findings))
}

/// A report of one whole-file problem (GPU001).
fn single(file: &str, pos: Option<Pos>, message: String, hint: &str) -> FileReport {
    FileReport {
        file: file.to_string(),
        source: String::new(),
        findings: vec![finding("GPU001", "", pos, message, Some(hint.into()))],
    }
}

/// The blueprint size limit of `crate::input`, for text that did not come through its reader.
fn too_large(file: &str, len: usize) -> Option<FileReport> {
    let limit = crate::input::BLUEPRINT;
    (len as u64 > limit.bytes).then(|| {
        let problem = crate::input::Problem::TooLarge {
            what: limit.what,
            size: len.to_string(),
            limit: limit.bytes,
        };
        single(file, None, problem.to_string(), limit.hint)
    })
}

/// Nodes in a value (a deserialisation pass visits each once).
fn node_count(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Array(items) => 1 + items.iter().map(node_count).sum::<usize>(),
        serde_json::Value::Object(map) => 1 + map.values().map(node_count).sum::<usize>(),
        _ => 1,
    }
}

fn finding(
    rule: &'static str,
    path: &str,
    pos: Option<Pos>,
    message: String,
    hint: Option<String>,
) -> Finding {
    crate::finding::debug_check(crate::finding::Family::Validation, rule, Severity::Error);
    Finding {
        rule,
        severity: Severity::Error,
        path: path.to_string(),
        pos,
        message,
        hint,
    }
}

fn header_findings(tree: &SourceTree) -> Vec<Finding> {
    let v = &tree.value;
    let mut out = Vec::new();
    for (field, want) in [("apiVersion", API_VERSION), ("kind", KIND)] {
        match v.get(field) {
            Some(serde_json::Value::String(s)) if s == want => {}
            Some(other) => out.push(finding(
                "GPU005",
                field,
                tree.pos(field),
                // The value the file has is the wrong one: say what it must be first.
                format!(
                    "{field} must be `{want}`, not `{}`",
                    other
                        .as_str()
                        .map_or_else(|| other.to_string(), str::to_string)
                ),
                Some(format!("set `{field}: {want}`")),
            )),
            None => out.push(finding(
                "GPU005",
                field,
                tree.pos(""),
                format!("{field} is missing"),
                Some(format!("add `{field}: {want}` at the top of the file")),
            )),
        }
    }
    out
}

/// A serde_path_to_error path written as the source tree's paths are (`join`), so keys with dots
/// (`nvidia.com/gpu`) stay one step.
fn error_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment as S;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            S::Seq { index } => out.push_str(&format!("[{index}]")),
            S::Map { key } => out = super::yaml::join(&out, key),
            S::Enum { .. } | S::Unknown => {}
        }
    }
    out
}

/// How the loader works around one structural problem before the next pass.
enum Fix {
    /// Remove the node at the path (an unknown field, an optional field's unusable value).
    Remove(String),
    /// Put this value at the path (a required field's or a list item's stand-in).
    Set(String, serde_json::Value),
}

impl Fix {
    fn path(&self) -> &str {
        match self {
            Fix::Remove(p) | Fix::Set(p, _) => p,
        }
    }

    /// Applies the fix; false when the path is not in the document.
    fn apply(self, value: &mut serde_json::Value) -> bool {
        match self {
            Fix::Remove(path) => edit_path(value, &path, None),
            Fix::Set(path, v) => edit_path(value, &path, Some(v)),
        }
    }
}

/// The fix for a wrong value at `path`: removed when the field is optional or a mapping entry,
/// stood in for when it is required or a list item (removing an item would shift the indices, and
/// positions, of the ones after it).
fn fix_for(schema: &serde_json::Value, path: &str) -> Option<Fix> {
    let (node, required) = super::schema::at(schema, path)?;
    let last_is_index = matches!(split_path(path).last(), Some(Segment::Index(_)));
    Some(if required || last_is_index {
        Fix::Set(path.to_string(), super::schema::stand_in(schema, &node))
    } else {
        Fix::Remove(path.to_string())
    })
}

/// Turns one serde error into a finding and the fix to apply before trying again.
fn classify(
    tree: &SourceTree,
    schema: &serde_json::Value,
    path: &str,
    message: &str,
) -> Option<(Finding, Fix)> {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (name, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let candidates = backticked(expected);
        // The path may or may not already end in the unknown key, depending on where serde failed.
        let field_path = if path.ends_with(name) && !name.is_empty() {
            path.to_string()
        } else {
            super::yaml::join(path, name)
        };
        let hint = match suggest::closest(name, candidates.iter().map(String::as_str)) {
            Some(c) => format!("did you mean `{c}`?"),
            None if candidates.is_empty() => "remove it: this mapping takes no fields".into(),
            None => format!("remove it; valid fields here: {}", candidates.join(", ")),
        };
        return Some((
            finding(
                "GPU002",
                &field_path,
                tree.key_pos(&field_path),
                format!("unknown field `{name}`"),
                Some(hint),
            ),
            Fix::Remove(field_path),
        ));
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or(rest);
        let field_path = super::yaml::join(path, name);
        let (node, _) = super::schema::at(schema, &field_path)?;
        let f = finding(
            "GPU004",
            &field_path,
            tree.pos(path),
            format!("required field `{name}` is missing"),
            Some(missing_hint(name, &field_path, &node)),
        );
        let stand_in = super::schema::stand_in(schema, &node);
        return Some((f, Fix::Set(field_path, stand_in)));
    }
    let (what, hint) = if let Some(rest) = message.strip_prefix("unknown variant `") {
        let (name, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let candidates = backticked(expected);
        let hint = match suggest::closest(name, candidates.iter().map(String::as_str)) {
            Some(c) => format!("did you mean `{c}`?"),
            None => format!("use one of: {}", candidates.join(", ")),
        };
        (format!("`{name}` is not an accepted value"), hint)
    } else {
        (
            readable_type_error(message),
            "write a value of the expected type".into(),
        )
    };
    Some((
        finding("GPU003", path, tree.pos(path), what, Some(hint)),
        fix_for(schema, path)?,
    ))
}

/// What to write for a missing field, and where every field is described.
fn missing_hint(name: &str, field_path: &str, node: &serde_json::Value) -> String {
    let what = node
        .get("description")
        .and_then(serde_json::Value::as_str)
        .map(|d| {
            let d = d.trim_end_matches('.');
            // "Names the blueprint" reads on as "names the blueprint"; "DNS-1123 label" stays.
            let mut chars = d.chars();
            match (chars.next(), chars.next()) {
                (Some(first), Some(second)) if second.is_lowercase() => {
                    format!(" ({}{})", first.to_lowercase(), &d[first.len_utf8()..])
                }
                _ => format!(" ({d})"),
            }
        })
        .unwrap_or_default();
    format!(
        "add `{name}`{what} to this mapping; `{}` in docs/blueprint-reference.md (`gpuctl explain --fields`) says what it takes",
        super::schema::field_path(field_path)
    )
}

fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Removes the node at `path` (`with` None) or sets it, creating the last key when missing;
/// false when the path is not in `value`.
fn edit_path(value: &mut serde_json::Value, path: &str, with: Option<serde_json::Value>) -> bool {
    let segments = split_path(path);
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut cur = value;
    for seg in parents {
        let next = match seg {
            Segment::Key(k) => cur.get_mut(k.as_str()),
            Segment::Index(i) => cur.get_mut(*i),
        };
        match next {
            Some(n) => cur = n,
            None => return false,
        }
    }
    match (last, cur, with) {
        (Segment::Key(k), serde_json::Value::Object(map), None) => {
            map.shift_remove(k.as_str()).is_some()
        }
        (Segment::Key(k), serde_json::Value::Object(map), Some(v)) => {
            map.insert(k.clone(), v);
            true
        }
        (Segment::Index(i), serde_json::Value::Array(items), None) if *i < items.len() => {
            items.remove(*i);
            true
        }
        (Segment::Index(i), serde_json::Value::Array(items), Some(v)) if *i < items.len() => {
            items[*i] = v;
            true
        }
        _ => false,
    }
}

/// serde's type errors name Rust types (`struct Metadata`, `u32`); say what the YAML should be.
fn readable_type_error(message: &str) -> String {
    let mut m = message.replace(", expected", "; expected");
    if let Some(i) = m.find("expected struct ") {
        m.replace_range(i.., "expected a mapping");
    }
    for (rust, yaml) in [
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole, non-negative number"),
        ("expected i64", "expected a whole number"),
        ("expected a boolean", "expected `true` or `false`"),
    ] {
        m = m.replace(rust, yaml);
    }
    m
}
