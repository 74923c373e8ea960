//! `gpuctl doctor` output: human (grouped by runbook layer, coloured on a terminal unless
//! NO_COLOR), Markdown for an incident ticket, and the versioned JSON report
//! (`docs/doctor.md`).

use std::fmt::Write;

use gpuctl_day2::doctor::{Finding, Layer, Report};
use gpuctl_model::located::Severity;

use crate::settings::Style;

/// Subjects shown per finding in human and Markdown output (JSON has them all).
const SHOWN_SUBJECTS: usize = 6;

fn paint(style: Style, code: &str, text: &str) -> String {
    match style {
        Style::Rich => format!("\x1b[{code}m{text}\x1b[0m"),
        Style::Plain => text.to_string(),
    }
}

fn severity_code(s: Severity) -> &'static str {
    match s {
        Severity::Error => "1;31",
        Severity::Warning => "33",
        Severity::Info => "36",
    }
}

fn subjects(f: &Finding) -> String {
    let mut s = f
        .subjects
        .iter()
        .take(SHOWN_SUBJECTS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if f.subjects.len() > SHOWN_SUBJECTS {
        let _ = write!(s, " and {} more", f.subjects.len() - SHOWN_SUBJECTS);
    }
    s
}

fn layers(r: &Report) -> impl Iterator<Item = (Layer, Vec<&Finding>)> + '_ {
    Layer::ALL.into_iter().filter_map(|l| {
        let fs: Vec<&Finding> = r.findings.iter().filter(|f| f.layer == l).collect();
        (!fs.is_empty()).then_some((l, fs))
    })
}

fn summary_line(r: &Report) -> String {
    let s = r.summary;
    if r.findings.is_empty() {
        return "no findings: nothing is stuck or failing that gpuctl can see".into();
    }
    format!(
        "{} error{}, {} warning{}, {} info",
        s.errors,
        if s.errors == 1 { "" } else { "s" },
        s.warnings,
        if s.warnings == 1 { "" } else { "s" },
        s.infos
    )
}

/// For people: findings by layer, each with subjects, evidence, cause and fix.
pub fn human(r: &Report, style: Style) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}{}",
        paint(style, "1", "gpuctl doctor:"),
        r.blueprint,
        match (&r.read_at, r.read) {
            (Some(t), Some(c)) => format!(
                " (cluster read at {t} with {} LIST request{})",
                c.list_requests,
                if c.list_requests == 1 { "" } else { "s" }
            ),
            (Some(t), None) => format!(" (cluster read at {t})"),
            (None, _) => String::new(),
        }
    );
    for (layer, fs) in layers(r) {
        let _ = writeln!(out);
        let _ = writeln!(out, "{}", paint(style, "1;4", layer.title()));
        for f in fs {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "  {} {}",
                paint(
                    style,
                    severity_code(f.severity),
                    &format!("{}[{}]", f.severity, f.id)
                ),
                paint(style, "1", &f.title)
            );
            let _ = writeln!(out, "    objects:  {}", subjects(f));
            for e in &f.evidence {
                let _ = writeln!(
                    out,
                    "    evidence: {}{}: {}",
                    e.source,
                    e.time
                        .as_ref()
                        .map(|t| format!(" at {t}"))
                        .unwrap_or_default(),
                    e.text
                );
            }
            let _ = writeln!(out, "    cause:    {}", f.cause);
            let _ = writeln!(out, "    {} {}", paint(style, "32", "fix:     "), f.fix);
        }
    }
    if !r.unread.is_empty() {
        let _ = writeln!(out);
        let kinds: Vec<String> = r
            .unread
            .iter()
            .map(|u| format!("{} ({})", u.kind, serde_plain(&u.why)))
            .collect();
        let _ = writeln!(out, "not read: {}", kinds.join(", "));
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", summary_line(r));
    out
}

fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Markdown cell or inline text: no raw newlines or pipes.
fn md(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

/// For an incident ticket: a summary table, then each finding under its layer.
pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## gpuctl doctor: `{}`", r.blueprint);
    let _ = writeln!(out);
    if let Some(t) = &r.read_at {
        let _ = writeln!(out, "Cluster read at {t}. {}.", summary_line(r));
    } else {
        let _ = writeln!(out, "{}.", summary_line(r));
    }
    if r.findings.is_empty() {
        return out;
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "| severity | id | layer | finding |");
    let _ = writeln!(out, "|---|---|---|---|");
    for f in &r.findings {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            f.severity,
            f.id,
            f.layer.title(),
            md(&f.title)
        );
    }
    for (layer, fs) in layers(r) {
        let _ = writeln!(out);
        let _ = writeln!(out, "### {}", layer.title());
        for f in fs {
            let _ = writeln!(out);
            let _ = writeln!(out, "#### {} `{}`: {}", f.severity, f.id, md(&f.title));
            let _ = writeln!(out);
            let _ = writeln!(out, "- **Objects:** {}", md(&subjects(f)));
            for e in &f.evidence {
                let _ = writeln!(
                    out,
                    "- **Evidence** ({}{}): {}",
                    md(&e.source),
                    e.time
                        .as_ref()
                        .map(|t| format!(", {t}"))
                        .unwrap_or_default(),
                    md(&e.text)
                );
            }
            let _ = writeln!(out, "- **Cause:** {}", md(&f.cause));
            let _ = writeln!(out, "- **Fix:** {}", md(&f.fix));
        }
    }
    if !r.unread.is_empty() {
        let _ = writeln!(out);
        let kinds: Vec<String> = r
            .unread
            .iter()
            .map(|u| format!("{} ({})", u.kind, serde_plain(&u.why)))
            .collect();
        let _ = writeln!(out, "Not read: {}.", kinds.join(", "));
    }
    out
}

/// The versioned JSON report (pretty, trailing newline).
pub fn json(r: &Report) -> String {
    let mut s =
        serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
