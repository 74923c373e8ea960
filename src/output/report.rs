//! `gpuctl report` output: a table for people, CSV for a spreadsheet, versioned JSON, and Markdown
//! for a ticket or a monthly mail (docs/report.md). GPU-hours and costs are printed with two
//! decimals; JSON keeps the full values.

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
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("cost ({})", r.currency)])
    .collect()
}

fn title(r: &Report) -> String {
    format!(
        "GPU-hours of blueprint `{}` from {} to {}, step {}s, by {}",
        r.blueprint,
        when(r.start),
        when(r.end),
        r.step,
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
        "day,{},cost_centre,allocated_gpu_hours,used_gpu_hours,idle_gpu_hours,unknown_gpu_hours,borrowed_gpu_hours,cost,currency\n",
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
