//! Human output: each finding with a source snippet (miette), then a summary line.

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource};

use crate::cli::settings::Style;
use crate::diag::{FileReport, Severity};

/// Width used for plain output, so snapshots and CI logs do not depend on the terminal.
const PLAIN_WIDTH: usize = 100;

/// Renders reports for a person.
pub fn human(reports: &[FileReport], style: Style) -> String {
    let theme = match style {
        Style::Rich => GraphicalTheme::unicode(),
        Style::Plain => GraphicalTheme::unicode_nocolor(),
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(PLAIN_WIDTH)
        .with_links(false)
        .with_context_lines(1);
    let mut out = String::new();
    for report in reports {
        let source = NamedSource::new(&report.file, report.source.clone());
        for f in &report.findings {
            let location = f
                .pos
                .map(|p| format!("{}:{}", report.file, p))
                .unwrap_or_else(|| report.file.clone());
            let title = if f.path.is_empty() {
                format!("{}: {}", location, f.message)
            } else {
                format!("{} at {}: {}", location, f.path, f.message)
            };
            let mut diag = MietteDiagnostic::new(title)
                .with_code(f.rule)
                .with_severity(match f.severity {
                    Severity::Error => miette::Severity::Error,
                    Severity::Warning => miette::Severity::Warning,
                });
            if let Some(h) = &f.hint {
                diag = diag.with_help(h.clone());
            }
            if let Some(p) = f.pos
                && let Some(offset) = byte_offset(&report.source, p.line, p.column)
            {
                let len = token_len(&report.source[offset..]);
                diag = diag.with_label(LabeledSpan::at(offset..offset + len, f.rule));
            }
            let report_obj = miette::Report::new(diag).with_source_code(source.clone());
            let mut rendered = String::new();
            if handler
                .render_report(&mut rendered, report_obj.as_ref())
                .is_err()
            {
                rendered = format!("{} {}: {}\n", f.rule, f.severity, f.message);
            }
            out.push_str(&rendered);
            out.push('\n');
        }
    }
    let s = super::summary(reports);
    let verdict = if s.errors > 0 { "invalid" } else { "valid" };
    out.push_str(&format!(
        "{} file{} checked: {} error{}, {} warning{} ({verdict})\n",
        s.files,
        plural(s.files),
        s.errors,
        plural(s.errors),
        s.warnings,
        plural(s.warnings)
    ));
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Byte offset of a 1-based line and (character) column.
fn byte_offset(text: &str, line: usize, column: usize) -> Option<usize> {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let line_text = text.get(start..)?.split('\n').next()?;
    let col = line_text
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(line_text.len(), |(i, _)| i);
    Some(start + col)
}

/// Length of the token at the start of `rest` (to the end of a scalar or key), at least 1.
fn token_len(rest: &str) -> usize {
    let line = rest.split('\n').next().unwrap_or("");
    let end = line.find([':', ',', '}', ']', '#']).unwrap_or(line.len());
    line[..end].trim_end().len().max(1).min(line.len().max(1))
}
