//! Human output: each finding with a source snippet (miette), then a summary line.

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, MietteError,
    MietteSpanContents, SourceCode, SourceSpan, SpanContents,
};

use crate::settings::Style;
use gpuctl_model::located::{FileReport, Severity};

/// Width used for plain output, so snapshots and CI logs do not depend on the terminal.
const PLAIN_WIDTH: usize = 100;
/// Lines longer than this get no snippet (the finding keeps its line:column): nobody reads such a
/// line in a terminal, and miette pads labels with a format width that must fit in a `u16`.
const MAX_SNIPPET_LINE: usize = 1000;

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
        let source = IndexedSource::new(&report.file, &report.source);
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
                    Severity::Info => miette::Severity::Advice,
                });
            if let Some(h) = &f.hint {
                diag = diag.with_help(h.clone());
            }
            if let Some(p) = f.pos
                && let Some(offset) = source.snippet_offset(p.line, p.column)
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

/// The report's source with its line starts indexed once, so each finding's snippet costs the
/// lines it shows, not a scan from the top of the file (10,000 findings took 86 s that way), and
/// columns counted in characters like the parser's (miette's own counts bytes, so the snippet
/// header disagreed with the title on lines with multi-byte characters).
#[derive(Clone)]
struct IndexedSource {
    name: String,
    text: std::sync::Arc<str>,
    line_starts: std::sync::Arc<Vec<usize>>,
}

impl IndexedSource {
    fn new(name: &str, text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        IndexedSource {
            name: name.to_string(),
            text: text.into(),
            line_starts: std::sync::Arc::new(line_starts),
        }
    }

    /// Bytes of 0-based line `line`, newline excluded.
    fn line_range(&self, line: usize) -> Option<(usize, usize)> {
        let start = *self.line_starts.get(line)?;
        let end = self
            .line_starts
            .get(line + 1)
            .map_or(self.text.len(), |next| next - 1);
        Some((start, end.max(start)))
    }

    fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// Byte offset of a 1-based line and (character) column, when that line and its neighbours
    /// are short enough to show.
    fn snippet_offset(&self, line: usize, column: usize) -> Option<usize> {
        let l = line.checked_sub(1)?;
        for near in l.saturating_sub(1)..=l + 1 {
            if let Some((a, b)) = self.line_range(near)
                && b - a > MAX_SNIPPET_LINE
            {
                return None;
            }
        }
        let (start, end) = self.line_range(l)?;
        let line_text = &self.text[start..end];
        let col = line_text
            .char_indices()
            .nth(column.saturating_sub(1))
            .map_or(line_text.len(), |(i, _)| i);
        Some(start + col)
    }
}

impl SourceCode for IndexedSource {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let len = self.text.len();
        let from = span.offset();
        let to = from.saturating_add(span.len());
        if from > len || to > len {
            return Err(MietteError::OutOfBounds);
        }
        let first = self.line_of(from);
        let last = self.line_of(to.saturating_sub(1).max(from));
        if context_lines_before == 0 && context_lines_after == 0 {
            let line_start = self.line_starts[first];
            let column = self.text[line_start..from].chars().count();
            return Ok(Box::new(MietteSpanContents::new_named(
                self.name.clone(),
                &self.text.as_bytes()[from..to],
                *span,
                first,
                column,
                last - first + 1,
            )));
        }
        let top = first.saturating_sub(context_lines_before);
        let bottom = (last + context_lines_after).min(self.line_starts.len() - 1);
        let start = self.line_starts[top];
        let end = self.line_starts.get(bottom + 1).copied().unwrap_or(len);
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            &self.text.as_bytes()[start..end],
            SourceSpan::new(start.into(), end - start),
            top,
            0,
            bottom - top + 1,
        )))
    }
}

/// Length of the token at the start of `rest` (to the end of a scalar or key), at least 1.
fn token_len(rest: &str) -> usize {
    let line = rest.split('\n').next().unwrap_or("");
    let end = line.find([':', ',', '}', ']', '#']).unwrap_or(line.len());
    line[..end].trim_end().len().max(1).min(line.len().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuctl_model::blueprint::yaml::Pos;
    use gpuctl_model::located::Finding;

    fn report(source: &str, line: usize, column: usize) -> FileReport {
        FileReport {
            file: "bp.yaml".into(),
            source: source.into(),
            findings: vec![Finding {
                rule: "GPU003",
                severity: Severity::Error,
                path: "a".into(),
                pos: Some(Pos { line, column }),
                message: "bad".into(),
                hint: None,
            }],
        }
    }

    #[test]
    fn columns_past_u16_do_not_panic() {
        // Issue 10: miette panicked ("Formatting argument out of range") above column 65,535.
        let source = format!("a: {}x\n", " ".repeat(70_000));
        let out = human(&[report(&source, 1, 70_004)], Style::Plain);
        assert!(out.contains("bp.yaml:1:70004"), "{out}");
        assert!(out.contains("1 error"), "{out}");
    }

    #[test]
    fn snippet_column_counts_characters_like_the_title() {
        // Issue 10: with multi-byte characters before the finding the title said 1:9 and the
        // snippet header 1:13.
        let source = "x: 1\nname: \"ééé\" bad\n";
        let out = human(&[report(source, 2, 13)], Style::Plain);
        assert!(out.contains("× bp.yaml:2:13 at a: bad"), "{out}");
        assert!(out.contains("[bp.yaml:2:13]"), "{out}");
        assert!(out.contains("bad"), "{out}");
    }

    #[test]
    fn snippets_show_the_right_lines_deep_in_a_file() {
        let mut source = String::new();
        for i in 1..=5000 {
            source.push_str(&format!("k{i}: v{i}\n"));
        }
        let out = human(&[report(&source, 4321, 8)], Style::Plain);
        assert!(out.contains("4321 │ k4321: v4321"), "{out}");
        assert!(out.contains("4320 │ k4320"), "{out}");
        assert!(out.contains("4322 │ k4322"), "{out}");
    }
}
