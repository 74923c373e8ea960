//! Loading: text -> `SourceTree` -> typed `Blueprint`, with every structural problem as a finding.

use std::path::Path;

use super::model::{API_VERSION, Blueprint, KIND};
use super::yaml::{Pos, Segment, SourceTree, split_path};
use crate::diag::{FileReport, Finding, Severity};
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
}

/// Reads and loads a blueprint file, or standard input for `-` (named `<stdin>`), under
/// [`crate::input::BLUEPRINT`]. An unreadable, oversized or special file is a single finding.
pub fn load_file(path: &Path) -> Result<Loaded, FileReport> {
    let file = crate::input::name(path);
    let bytes = crate::input::read(path, &crate::input::BLUEPRINT).map_err(|e| {
        single(
            &file,
            None,
            e.problem.to_string(),
            &e.problem.hint(&e.limit),
        )
    })?;
    load_bytes(&file, bytes)
}

/// Loads a blueprint already read (e.g. by `gpuctl apply`, which reads its target once to tell a
/// saved plan from a blueprint); `file` names it in findings. Refuses what [`load_file`] refuses.
pub fn load_bytes(file: &str, bytes: Vec<u8>) -> Result<Loaded, FileReport> {
    if let Some(report) = too_large(file, bytes.len()) {
        return Err(report);
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
            // Columns count characters, as the parser's do; the prefix is valid UTF-8.
            let column = std::str::from_utf8(valid).map_or(0, |t| {
                t.rsplit('\n').next().map_or(0, |l| l.chars().count())
            }) + 1;
            return Err(single(
                file,
                Some(Pos { line, column }),
                "the file is not UTF-8 text".into(),
                "a blueprint is a YAML text file; check that this is the right file",
            ));
        }
    };
    load_str(file, &text)
}

/// Loads a blueprint from text; `file` names it in findings.
pub fn load_str(file: &str, text: &str) -> Result<Loaded, FileReport> {
    // A UTF-8 byte order mark is not content; dropped here, positions and snippets agree.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let fail = |findings: Vec<Finding>| FileReport {
        file: file.to_string(),
        source: text.to_string(),
        findings,
    };
    // Text handed in directly (tests, callers of the library) meets the limit the readers use.
    if let Some(report) = too_large(file, text.len()) {
        return Err(report);
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

    let mut findings = header_findings(&tree);
    if !findings.is_empty() {
        return Err(fail(findings));
    }

    // serde stops at the first error; to report every structural problem at once, each offending
    // node is removed and deserialisation runs again. A required field removed this way shows up
    // as "missing" next time: that is where the loop stops, as later errors would be noise.
    let mut value = tree.value.clone();
    let mut removed: Vec<String> = Vec::new();
    let passes = (STRUCTURAL_WORK / node_count(&value).max(1)).clamp(2, MAX_STRUCTURAL);
    for _ in 0..passes {
        match serde_path_to_error::deserialize::<_, Blueprint>(super::strict::Strict(&value)) {
            Ok(blueprint) if findings.is_empty() => {
                return Ok(Loaded {
                    file: file.to_string(),
                    source: text.to_string(),
                    tree,
                    blueprint,
                });
            }
            Ok(_) => break,
            Err(err) => {
                let path = normalise_path(&err.path().to_string());
                let message = err.inner().to_string();
                let Some((f, remove)) = classify(&tree, &path, &message, &removed) else {
                    break;
                };
                findings.push(f);
                if !remove_path(&mut value, &remove) {
                    break;
                }
                removed.push(remove);
            }
        }
    }
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
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
    if !v.is_object() {
        return vec![finding(
            "GPU003",
            "",
            tree.pos(""),
            "the document is not a mapping".into(),
            Some(format!(
                "a blueprint starts with `apiVersion: {API_VERSION}` and `kind: {KIND}`"
            )),
        )];
    }
    let mut out = Vec::new();
    for (field, want) in [("apiVersion", API_VERSION), ("kind", KIND)] {
        match v.get(field) {
            Some(serde_json::Value::String(s)) if s == want => {}
            Some(other) => out.push(finding(
                "GPU005",
                field,
                tree.pos(field),
                format!("{field} is {other}, not `{want}`"),
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

/// serde_path_to_error prints `.` for the root and `?` for unknown segments.
fn normalise_path(path: &str) -> String {
    if path == "." {
        String::new()
    } else {
        path.to_string()
    }
}

/// Turns one serde error into a finding and the path to remove before trying again.
fn classify(
    tree: &SourceTree,
    path: &str,
    message: &str,
    removed: &[String],
) -> Option<(Finding, String)> {
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
            field_path,
        ));
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or(rest);
        let field_path = super::yaml::join(path, name);
        if removed.contains(&field_path) {
            return None;
        }
        let f = finding(
            "GPU004",
            &field_path,
            tree.pos(path),
            format!("required field `{name}` is missing"),
            Some(format!("add `{name}` here (see docs/blueprint.md)")),
        );
        // Nothing to remove: stop after reporting.
        return Some((f, String::new()));
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
        path.to_string(),
    ))
}

fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Removes the node at `path` from `value`; false when there is nothing to remove.
fn remove_path(value: &mut serde_json::Value, path: &str) -> bool {
    if path.is_empty() {
        return false;
    }
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
    match (last, cur) {
        (Segment::Key(k), serde_json::Value::Object(map)) => map.shift_remove(k.as_str()).is_some(),
        (Segment::Index(i), serde_json::Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
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
