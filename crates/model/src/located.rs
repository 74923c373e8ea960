//! Findings located in a blueprint file (validation and loading): the position, the severity
//! (shared with plan findings and pre-flight checks), the finding with what to do, a file's report.

use serde::{Deserialize, Serialize};

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

/// How bad a finding is: one scale for validation findings, plan findings and upgrade pre-flight
/// checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The blueprint cannot be applied (the plan, the upgrade cannot run) as written.
    Error,
    /// Applies, but likely not what was meant; `--strict` fails on it.
    Warning,
    /// A fact worth knowing (an upgrade's branch end of life, what will be restored).
    Info,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        })
    }
}

/// One thing wrong with a blueprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable rule id, e.g. `GPU050` (`gpuctl explain GPU050`).
    pub rule: &'static str,
    /// Error or warning.
    pub severity: Severity,
    /// YAML path of the offending value, e.g. `spec.tenants[0].quota`.
    pub path: String,
    /// Line and column in the file, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pos: Option<Pos>,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Finding {
    /// Sort key: position first, then rule, so output follows the file top to bottom.
    pub fn sort_key(&self) -> (Pos, &'static str, &str, &str) {
        (
            self.pos.unwrap_or_default(),
            self.rule,
            &self.path,
            &self.message,
        )
    }
}

/// Findings for one blueprint file.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// The file as the user named it.
    pub file: String,
    /// The findings, in file order.
    pub findings: Vec<Finding>,
    /// The file's text, for snippets in human output.
    #[serde(skip)]
    pub source: String,
}

impl FileReport {
    /// Number of findings with this severity.
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }
}

/// Longest finding message or hint kept whole. Messages quote values from the blueprint; a hostile
/// one quoting an 80 KiB name in each of thousands of findings would otherwise turn a 600 KiB file
/// into hundreds of MiB of findings (found by the hostile corpus).
pub const MAX_MESSAGE: usize = 1024;

/// `text` cut to [`MAX_MESSAGE`] bytes at a character boundary, saying how much was cut.
pub fn bounded(text: String) -> String {
    if text.len() <= MAX_MESSAGE {
        return text;
    }
    let mut cut = MAX_MESSAGE - 64;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} more bytes)", &text[..cut], text.len() - cut)
}

#[cfg(test)]
mod bounded_tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(bounded("short".into()), "short");
        let long = "é".repeat(2000);
        let b = bounded(long.clone());
        assert!(b.len() < MAX_MESSAGE + 32, "{}", b.len());
        let kept = b.split("… (").next().unwrap().len();
        assert_eq!(
            b,
            format!(
                "{}… ({} more bytes)",
                "é".repeat(kept / 2),
                long.len() - kept
            )
        );
        assert!(b.starts_with("éé"));
    }
}
