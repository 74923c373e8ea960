//! `gpuctl report` output: a table for people, CSV for a spreadsheet, versioned JSON, and Markdown
//! for a ticket or a monthly mail (docs/report.md). GPU-hours and costs are printed with two
//! decimals; JSON keeps the full values. `--svg FILE` draws the figures as stacked bars.

use std::collections::BTreeMap;
use std::fmt::Write;

use gpuctl_accounting::Report;
use gpuctl_accounting::compute::{Figures, Row, day_string};

/// Version of the JSON document.
pub const JSON_VERSION: u32 = 1;

fn when(t: i64) -> String {
    let s = t.rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        day_string(t.div_euclid(86_400)),
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

fn cost(f: &Figures) -> String {
    if f.allocated > 0.0 && f.unpriced >= f.allocated {
        "-".to_owned()
    } else {
        format!("{:.2}", f.cost)
    }
}

fn cells(row: &Row) -> Vec<String> {
    let f = &row.figures;
    vec![
        row.day.clone(),
        row.key.clone(),
        row.cost_centre.clone().unwrap_or_default(),
        format!("{:.2}", f.allocated),
        format!("{:.2}", f.used),
        format!("{:.2}", f.idle),
        format!("{:.2}", f.unknown),
        format!("{:.2}", f.borrowed),
        format!("{:.2}", f.lent),
        cost(f),
    ]
}

fn header(r: &Report) -> Vec<String> {
    [
        "day",
        r.by.as_str(),
        "cost centre",
        "allocated",
        "used",
        "idle",
        "unknown",
        "borrowed",
        "lent",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("cost ({})", r.currency)])
    .collect()
}

/// `1h`, `15m`, `30s`.
fn step(s: i64) -> String {
    if s % 3600 == 0 {
        format!("{}h", s / 3600)
    } else if s % 60 == 0 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

fn title(r: &Report) -> String {
    format!(
        "GPU-hours of blueprint `{}` from {} to {}, step {}, by {}",
        r.blueprint,
        when(r.start),
        when(r.end),
        step(r.step),
        r.by.as_str()
    )
}

/// What the report could not see, in sentences.
fn blind_lines(r: &Report) -> Vec<String> {
    let unknown: f64 = r.totals.iter().map(|t| t.figures.unknown).sum();
    let allocated: f64 = r.totals.iter().map(|t| t.figures.allocated).sum();
    let mut out = vec![format!(
        "unknown: {unknown:.2} of {allocated:.2} allocated GPU-hours had no engine-activity data (a scrape gap or no dcgm-exporter); they are counted neither used nor idle"
    )];
    if r.blind.no_kube_state_metrics_hours > 0.0 {
        out.push(format!(
            "no kube-state-metrics data for {:.2} h of the window: allocation in those hours is unknown and not counted",
            r.blind.no_kube_state_metrics_hours
        ));
    }
    for (pool, h) in &r.blind.no_node_labels_hours {
        if *h > 0.0 {
            out.push(format!(
                "pool {pool}: none of its nodes in kube_node_labels for {h:.2} h of the window (kube-state-metrics needs --metric-labels-allowlist for the pool's selector labels): its allocation in those hours is not counted"
            ));
        }
    }
    for (pool, h) in &r.blind.no_exporter_hours {
        if *h > 0.0 {
            out.push(format!(
                "pool {pool}: no dcgm-exporter data for {h:.2} h of the window"
            ));
        }
    }
    out
}

/// Aligned columns.
pub fn human(r: &Report) -> String {
    let mut rows = vec![header(r)];
    rows.extend(r.rows.iter().map(cells));
    rows.extend(r.totals.iter().map(cells));
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|c| c[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = format!("{}\n\n", title(r));
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i >= 3 {
                    format!("{c:>w$}", w = widths[i])
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out.push('\n');
    for l in blind_lines(r) {
        let _ = writeln!(out, "{l}");
    }
    out
}

fn csv_field(s: &str) -> String {
    // A leading =, +, - or @ would be a formula in a spreadsheet.
    let s = if s.starts_with(['=', '+', '-', '@']) && s.parse::<f64>().is_err() {
        format!("'{s}")
    } else {
        s.to_owned()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// One line per day and key, then the totals (day `total`).
pub fn csv(r: &Report) -> String {
    let mut out = format!(
        "day,{},cost_centre,allocated_gpu_hours,used_gpu_hours,idle_gpu_hours,unknown_gpu_hours,borrowed_gpu_hours,lent_gpu_hours,cost,currency\n",
        r.by.as_str()
    );
    for row in r.rows.iter().chain(&r.totals) {
        let c = cells(row);
        let mut line: Vec<String> = c.iter().map(|x| csv_field(x.as_str())).collect();
        line.push(csv_field(&r.currency));
        let _ = writeln!(out, "{}", line.join(","));
    }
    out
}

/// The versioned document.
pub fn json(r: &Report) -> String {
    let doc = serde_json::json!({
        "version": JSON_VERSION,
        "start": when(r.start),
        "end": when(r.end),
        "report": r,
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("a report serialises");
    s.push('\n');
    s
}

fn md(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// A Markdown table.
pub fn markdown(r: &Report) -> String {
    let h = header(r);
    let mut out = format!("### {}\n\n| {} |\n|", md(&title(r)), h.join(" | "));
    for i in 0..h.len() {
        out.push_str(if i >= 3 { "---:|" } else { "---|" });
    }
    out.push('\n');
    for row in r.rows.iter().chain(&r.totals) {
        let c: Vec<String> = cells(row).iter().map(|x| md(x.as_str())).collect();
        let _ = writeln!(out, "| {} |", c.join(" | "));
    }
    out.push('\n');
    for l in blind_lines(r) {
        let _ = writeln!(out, "- {}", md(&l));
    }
    out
}

/// Keys drawn in the per-key bars; the rest are summed in one line.
pub const SVG_MAX_KEYS: usize = 40;

const SVG_WIDTH: i64 = 1100;
const SVG_MARGIN: i64 = 16;
const USED: &str = "#4e79a7";
const IDLE: &str = "#f28e2b";
const UNKNOWN: &str = "#bab0ac";

fn esc(s: &str) -> String {
    s.chars()
        .take(48)
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c if c.is_control() => " ".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

/// Used, idle and unknown of one figure, stacked from `x` over `len` pixels for `scale`.
fn stack(out: &mut String, f: &Figures, scale: f64, at: (i64, i64), vertical: bool, size: i64) {
    let mut pos = 0;
    for (v, colour, what) in [
        (f.used, USED, "used"),
        (f.idle, IDLE, "idle"),
        (f.unknown, UNKNOWN, "unknown"),
    ] {
        let len = (v * scale).round() as i64;
        if len <= 0 {
            continue;
        }
        let (x, y, w, h) = if vertical {
            (at.0, at.1 - pos - len, size, len)
        } else {
            (at.0 + pos, at.1, len, size)
        };
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"{colour}\"><title>{what}: {v:.2} GPU-hours</title></rect>"
        );
        pos += len;
    }
}

/// Per day: one column of all keys' used, idle and unknown GPU-hours.
fn svg_days(out: &mut String, r: &Report, top: i64) -> i64 {
    let mut days: BTreeMap<&str, Figures> = BTreeMap::new();
    for row in &r.rows {
        let d = days.entry(row.day.as_str()).or_default();
        d.used += row.figures.used;
        d.idle += row.figures.idle;
        d.unknown += row.figures.unknown;
        d.allocated += row.figures.allocated;
    }
    let height = 240;
    let max = days.values().map(|f| f.allocated).fold(0.0, f64::max);
    let scale = if max > 0.0 { height as f64 / max } else { 0.0 };
    let n = days.len().max(1) as i64;
    let col = ((SVG_WIDTH - 2 * SVG_MARGIN) / n).clamp(2, 40);
    let base = top + height;
    let _ = writeln!(
        out,
        "<text x=\"{SVG_MARGIN}\" y=\"{}\" font-size=\"13\">GPU-hours per day (max {max:.2})</text>",
        top - 6
    );
    for (i, (day, f)) in days.iter().enumerate() {
        let x = SVG_MARGIN + i as i64 * col;
        let _ = writeln!(out, "<g><title>{}</title>", esc(day));
        stack(out, f, scale, (x, base), true, (col - 1).max(1));
        out.push_str("</g>\n");
    }
    base + 20
}

/// Per key: one horizontal bar of its totals.
fn svg_keys(out: &mut String, r: &Report, top: i64) -> i64 {
    let max = r
        .totals
        .iter()
        .map(|t| t.figures.allocated)
        .fold(0.0, f64::max);
    let width = SVG_WIDTH - 2 * SVG_MARGIN - 220;
    let scale = if max > 0.0 { width as f64 / max } else { 0.0 };
    let mut y = top;
    for t in r.totals.iter().take(SVG_MAX_KEYS) {
        let f = &t.figures;
        let _ = writeln!(
            out,
            "<text x=\"{SVG_MARGIN}\" y=\"{}\" font-size=\"12\">{}</text>",
            y + 12,
            esc(&t.key)
        );
        stack(out, f, scale, (SVG_MARGIN + 220, y), false, 14);
        y += 20;
    }
    if r.totals.len() > SVG_MAX_KEYS {
        let _ = writeln!(
            out,
            "<text x=\"{SVG_MARGIN}\" y=\"{}\" font-size=\"12\">and {} more (see -o csv)</text>",
            y + 12,
            r.totals.len() - SVG_MAX_KEYS
        );
        y += 20;
    }
    y
}

/// `--svg`: GPU-hours per day as stacked columns (used, idle, unknown) and per tenant (pool,
/// model, queue) as stacked bars, with a legend. Deterministic bytes; names escaped and
/// shortened; at most [`SVG_MAX_KEYS`] bars.
pub fn svg(r: &Report) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<text x=\"{SVG_MARGIN}\" y=\"22\" font-size=\"15\">{}</text>",
        esc(&title(r))
    );
    let mut x = SVG_MARGIN;
    for (colour, what) in [
        (USED, "used"),
        (IDLE, "idle"),
        (UNKNOWN, "unknown (no activity data)"),
    ] {
        let _ = writeln!(
            body,
            "<rect x=\"{x}\" y=\"34\" width=\"12\" height=\"12\" fill=\"{colour}\"/><text x=\"{}\" y=\"45\" font-size=\"12\">{what}</text>",
            x + 16
        );
        x += 200;
    }
    let y = svg_days(&mut body, r, 80);
    let y = svg_keys(&mut body, r, y + 10);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{SVG_WIDTH}\" height=\"{}\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{body}</svg>\n",
        y + SVG_MARGIN
    )
}
