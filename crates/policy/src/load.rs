//! Reading a policy directory (`--policy DIR`) and its data (`--policy-data DIR`): bounded, since
//! the directory comes from a pull request: every file, the files in all and the depth are capped,
//! symbolic links to directories are not followed, and a file that is not a regular file is refused.

use std::path::{Path, PathBuf};

use crate::PolicyError;

/// Largest `.rego` or data file read (regorus' own limit for one policy file is 1 MiB too).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Most bytes read from all files of the directories together.
pub const MAX_TOTAL_BYTES: u64 = 16 * 1024 * 1024;
/// Most files read.
pub const MAX_FILES: usize = 2000;
/// Deepest directory nesting followed.
pub const MAX_DEPTH: usize = 16;
/// Deepest nesting of `[` and `{` in a policy: regorus 0.14.1's parser takes time exponential in
/// it (measured with a debug build: 16 levels of `[[...]]` or `{"a": {...}}` took 4 s, 18 levels
/// 18 s, 500 levels did not finish), so a policy from a pull request could stall the gate. 12 levels
/// parse in a fraction of a second; a deeper literal (a test's input) is built from smaller ones.
pub const MAX_NESTING: usize = 12;

/// One file read: its path as given (directory joined with the relative path), the path relative to
/// its directory, and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as the user can open it (`policies/quota.rego`).
    pub path: String,
    /// Its directories below the directory named (`["sub"]` for `DIR/sub/x.json`).
    pub dirs: Vec<String>,
    /// The text.
    pub text: String,
}

/// Every file under `dir` whose name ends with one of `exts`, sorted by path, bounded.
pub fn read_dir(
    dir: &Path,
    exts: &[&str],
    budget: &mut Budget,
) -> Result<Vec<SourceFile>, PolicyError> {
    let meta = std::fs::metadata(dir).map_err(|e| PolicyError::Read {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    if !meta.is_dir() {
        return Err(PolicyError::Read {
            path: dir.display().to_string(),
            message: "not a directory (name the directory that holds the .rego files)".into(),
        });
    }
    let mut out = Vec::new();
    walk(dir, &[], exts, budget, &mut out)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// What is left to read.
#[derive(Debug, Clone)]
pub struct Budget {
    files: usize,
    bytes: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            files: MAX_FILES,
            bytes: MAX_TOTAL_BYTES,
        }
    }
}

fn walk(
    dir: &Path,
    dirs: &[String],
    exts: &[&str],
    budget: &mut Budget,
    out: &mut Vec<SourceFile>,
) -> Result<(), PolicyError> {
    let read_error = |p: &Path, e: std::io::Error| PolicyError::Read {
        path: p.display().to_string(),
        message: e.to_string(),
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| read_error(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let link = std::fs::symlink_metadata(&path).map_err(|e| read_error(&path, e))?;
        if link.is_dir() {
            if name.starts_with('.') {
                continue;
            }
            if dirs.len() + 1 > MAX_DEPTH {
                return Err(PolicyError::Read {
                    path: path.display().to_string(),
                    message: format!("nested deeper than {MAX_DEPTH} directories"),
                });
            }
            let mut below = dirs.to_vec();
            below.push(name);
            walk(&path, &below, exts, budget, out)?;
            continue;
        }
        if !exts.iter().any(|x| name.ends_with(&format!(".{x}"))) {
            continue;
        }
        out.push(read_file(&path, dirs, budget)?);
    }
    Ok(())
}

fn read_file(path: &Path, dirs: &[String], budget: &mut Budget) -> Result<SourceFile, PolicyError> {
    let refuse = |message: String| PolicyError::Read {
        path: path.display().to_string(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| refuse(e.to_string()))?;
    if !meta.is_file() {
        return Err(refuse("not a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(refuse(format!(
            "{} bytes, over the limit of {MAX_FILE_BYTES} for one policy or data file",
            meta.len()
        )));
    }
    if budget.files == 0 {
        return Err(refuse(format!(
            "more than {MAX_FILES} policy and data files"
        )));
    }
    if meta.len() > budget.bytes {
        return Err(refuse(format!(
            "the policy and data files are over {MAX_TOTAL_BYTES} bytes together"
        )));
    }
    budget.files -= 1;
    budget.bytes -= meta.len();
    let bytes = std::fs::read(path).map_err(|e| refuse(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(refuse("grew past the size limit while being read".into()));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        refuse(format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    Ok(SourceFile {
        path: path.display().to_string(),
        dirs: dirs.to_vec(),
        text,
    })
}

/// Where `text` (Rego) first nests `[` and `{` deeper than [`MAX_NESTING`]: the line, outside
/// strings and comments.
pub fn too_deep(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut line = 1;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' | '\n' => {
                            if c == '\n' {
                                line += 1;
                            }
                            break;
                        }
                        _ => {}
                    }
                }
            }
            '`' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                    }
                    if c == '`' {
                        break;
                    }
                }
            }
            '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(line);
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// A data file's document, parsed as JSON (`.json`) or YAML (`.yaml`, `.yml`), placed under its
/// directories (`DIR/sub/limits.json` is `data.sub`), as conftest's `--data` does.
pub fn data_document(file: &SourceFile) -> Result<serde_json::Value, PolicyError> {
    let parsed: serde_json::Value = if file.path.ends_with(".json") {
        serde_json::from_str(file.text.trim_start_matches('\u{feff}')).map_err(|e| {
            PolicyError::Data {
                file: file.path.clone(),
                message: format!("line {}: {e}", e.line()),
            }
        })?
    } else {
        serde_saphyr::from_str(&file.text).map_err(|e| PolicyError::Data {
            file: file.path.clone(),
            message: e.to_string(),
        })?
    };
    if !parsed.is_object() {
        return Err(PolicyError::Data {
            file: file.path.clone(),
            message: "the document is not an object (data files are merged into `data` by key)"
                .into(),
        });
    }
    Ok(file.dirs.iter().rev().fold(
        parsed,
        |inner, dir| serde_json::json!({ dir.as_str(): inner }),
    ))
}
