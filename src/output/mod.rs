//! Every printer of the binary: findings (human with miette snippets, JSON, SARIF 2.1.0), plans
//! (text, Markdown for PR comments), upgrades, the facts catalog, apply and upgrade progress, and
//! the GitOps tree `render -o` writes. The only place that knows about colours or terminal widths.

pub mod doctor;
pub mod fleet_plan;
mod human;
pub mod plan;
pub mod profiles;
pub mod progress;
pub mod report;
mod sarif;
pub mod status;
pub mod tree;
pub mod upgrade;

pub use human::human;
pub use sarif::sarif;

use serde::Serialize;

use gpuctl_model::located::{FileReport, Severity};

/// Version of the JSON findings format; bumped on incompatible changes.
pub const FINDINGS_FORMAT_VERSION: u32 = 1;

#[derive(Serialize)]
struct JsonFindings<'a> {
    format_version: u32,
    files: &'a [FileReport],
    summary: Summary,
}

/// Totals over several files.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Summary {
    /// Files checked.
    pub files: usize,
    /// Error findings.
    pub errors: usize,
    /// Warning findings.
    pub warnings: usize,
}

/// Totals over `reports`.
pub fn summary(reports: &[FileReport]) -> Summary {
    Summary {
        files: reports.len(),
        errors: reports.iter().map(|r| r.count(Severity::Error)).sum(),
        warnings: reports.iter().map(|r| r.count(Severity::Warning)).sum(),
    }
}

/// Findings as versioned JSON (pretty, with a trailing newline).
pub fn json(reports: &[FileReport]) -> String {
    let doc = JsonFindings {
        format_version: FINDINGS_FORMAT_VERSION,
        files: reports,
        summary: summary(reports),
    };
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
