//! `gpuctl fleet plan` output: one PR comment for every cluster (a summary table, the unchanged
//! clusters in one line, each changed cluster's own plan collapsed, within GitHub's comment
//! limit), the same for a terminal, and versioned JSON with each cluster's full plan.

use gpuctl_fleet::plan::{ClusterPlan, Outcome, Source, error_count as errors};
use gpuctl_model::located::Severity;
use gpuctl_plan::plan::{Plan, PlanFinding};
use serde_json::{Value, json};

use super::plan::{human as plan_human, markdown_within};
use crate::settings::Style;

/// GitHub refuses comments over 65,536 characters.
pub const GITHUB_COMMENT_LIMIT: usize = 65_536;
/// What the comment stays within (bytes, which are never fewer than characters), with room to spare.
pub const COMMENT_CAP: usize = 64_000;
/// The least a cluster's plan is given: below it a plan is cut rather than shown as a stub.
const MIN_CLUSTER_BUDGET: usize = 1_500;
/// Version of the JSON document.
pub const FLEET_PLAN_FORMAT_VERSION: u32 = 1;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// How old a snapshot taken at `at` is at `now`: `12 min`, `5 h`, `3 d`.
fn age(at: &str, now: jiff::Timestamp) -> Option<String> {
    let at: jiff::Timestamp = at.parse().ok()?;
    let secs = now.as_second() - at.as_second();
    Some(match secs {
        s if s < 0 => "taken after --now".into(),
        s if s < 3_600 => format!("{} min old", s / 60),
        s if s < 48 * 3_600 => format!("{} h old", s / 3_600),
        s => format!("{} d old", s / 86_400),
    })
}

fn source_text(source: &Source, now: jiff::Timestamp) -> String {
    match source {
        Source::Live { context: Some(c) } => format!("live (`{c}`)"),
        Source::Live { context: None } => "live".into(),
        Source::Offline => "offline (no cluster state: every object is a create)".into(),
        Source::Snapshot { at: None } => "snapshot (age not recorded)".into(),
        Source::Snapshot { at: Some(t) } => match age(t, now) {
            Some(a) => format!("snapshot, {a}"),
            None => "snapshot (age not recorded)".into(),
        },
    }
}

/// The columns of the summary table: create, update (updates, adoptions, node patches, Helm
/// installs and upgrades), delete (prunes, uninstalls), conflicts, findings.
fn counts(p: &Plan) -> [usize; 4] {
    let s = &p.summary;
    [
        s.create,
        s.update + s.adopt + s.nodes + s.helm,
        s.delete + s.uninstall,
        s.conflict,
    ]
}

fn findings_text(p: &Plan) -> String {
    let e = errors(p);
    let w = p
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .count();
    match (e, w) {
        (0, 0) => "none".into(),
        (0, w) => plural(w, "warning", "warnings"),
        (e, 0) => plural(e, "error", "errors"),
        (e, w) => format!(
            "{}, {}",
            plural(e, "error", "errors"),
            plural(w, "warning", "warnings")
        ),
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The parts every format shares: the headline, the unchanged clusters, the failed ones.
struct Parts<'a> {
    headline: String,
    unchanged: Vec<&'a str>,
    failed: Vec<(&'a str, &'a str)>,
}

fn parts<'a>(fleet: &str, plans: &'a [ClusterPlan]) -> Parts<'a> {
    let unchanged: Vec<&str> = plans
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Planned(_)) && c.changed().is_none())
        .map(|c| c.name.as_str())
        .collect();
    let failed: Vec<(&str, &str)> = plans
        .iter()
        .filter_map(|c| match &c.outcome {
            Outcome::Error(e) => Some((c.name.as_str(), e.as_str())),
            Outcome::Planned(_) => None,
        })
        .collect();
    let changed = plans.len() - unchanged.len() - failed.len();
    let headline = format!(
        "gpuctl fleet plan for `{fleet}`: {}, {} with changes, {} unchanged, {} not planned",
        plural(plans.len(), "cluster", "clusters"),
        changed,
        unchanged.len(),
        failed.len()
    );
    Parts {
        headline,
        unchanged,
        failed,
    }
}

/// The fleet's own policy findings (`--policy`, docs/policy.md), as Markdown list lines or
/// terminal lines: never cut, they come before the clusters' plans.
fn policy_lines(policy: &[PlanFinding], markdown: bool) -> String {
    let mut out = String::new();
    for f in policy {
        if markdown {
            out.push_str(&format!(
                "- **{}** `{}`: {}\n",
                f.severity,
                f.id,
                cell(&f.message)
            ));
        } else {
            out.push_str(&format!("{}[{}]: {}\n", f.severity, f.id, f.message));
        }
    }
    out
}

fn unchanged_line(names: &[&str]) -> String {
    format!(
        "{} unchanged: {}",
        plural(names.len(), "cluster", "clusters"),
        names.join(", ")
    )
}

/// The PR comment. The table is never cut; the clusters' plans share what is left of
/// [`COMMENT_CAP`] in fleet order, and the ones that do not fit are named in one line.
pub fn markdown(
    fleet: &str,
    plans: &[ClusterPlan],
    policy: &[PlanFinding],
    now: jiff::Timestamp,
) -> String {
    let p = parts(fleet, plans);
    let mut out = format!("## {}\n\n", p.headline);
    if !policy.is_empty() {
        out.push_str(&format!(
            "**Policy findings of the fleet**\n\n{}\n",
            policy_lines(policy, true)
        ));
    }
    let rows: Vec<&ClusterPlan> = plans
        .iter()
        .filter(|c| c.changed().is_some() || matches!(c.outcome, Outcome::Error(_)))
        .collect();
    if rows.is_empty() {
        out.push_str("No cluster has changes.\n\n");
    } else {
        out.push_str("| cluster | wave | source | create | update | delete | conflicts | findings |\n|---|---|---|---:|---:|---:|---:|---|\n");
        for c in &rows {
            let src = cell(&source_text(&c.source, now));
            let line = match &c.outcome {
                Outcome::Planned(plan) => {
                    let [cr, up, de, co] = counts(plan);
                    format!(
                        "| `{}` | {} | {src} | {cr} | {up} | {de} | {co} | {} |\n",
                        c.name,
                        cell(&c.wave),
                        findings_text(plan)
                    )
                }
                Outcome::Error(_) => format!(
                    "| `{}` | {} | {src} | - | - | - | - | not planned (below) |\n",
                    c.name,
                    cell(&c.wave)
                ),
            };
            out.push_str(&line);
        }
        out.push('\n');
    }
    if !p.unchanged.is_empty() {
        out.push_str(&format!("{}.\n\n", unchanged_line(&p.unchanged)));
    }
    if !p.failed.is_empty() {
        out.push_str("**Not planned**\n\n");
        for (name, e) in &p.failed {
            out.push_str(&format!("- `{name}`: {}\n", cell(e)));
        }
        out.push('\n');
    }
    let changed: Vec<(&ClusterPlan, &Plan)> = plans
        .iter()
        .filter_map(|c| c.changed().map(|p| (c, p)))
        .collect();
    let all: Vec<&str> = changed.iter().map(|(c, _)| c.name.as_str()).collect();
    let reserve = cut_note(&all).len() + 2;
    let mut cut = Vec::new();
    for (i, (c, plan)) in changed.iter().enumerate() {
        let left = COMMENT_CAP.saturating_sub(out.len() + reserve);
        let share = (left / (changed.len() - i)).max(MIN_CLUSTER_BUDGET);
        let block = details(c, plan, share);
        if out.len() + block.len() + reserve <= COMMENT_CAP {
            out.push_str(&block);
        } else {
            cut.push(c.name.as_str());
        }
    }
    if !cut.is_empty() {
        out.push_str(&cut_note(&cut));
    }
    out
}

fn cut_note(names: &[&str]) -> String {
    format!(
        "… plans of {} cut to stay within GitHub's comment limit: see the JSON artifact (`gpuctl fleet plan -o json`): {}\n",
        plural(names.len(), "cluster", "clusters"),
        names.join(", ")
    )
}

/// One changed cluster's own plan, collapsed, within about `budget` characters.
fn details(c: &ClusterPlan, plan: &Plan, budget: usize) -> String {
    let [cr, up, de, co] = counts(plan);
    let body = markdown_within(plan, budget.saturating_sub(200));
    format!(
        "<details><summary><code>{}</code> (wave {}): {cr} create, {up} update, {de} delete, {co} conflicts</summary>\n\n{body}\n</details>\n\n",
        c.name,
        cell(&c.wave)
    )
}

/// For a terminal: the headline, each changed cluster's plan as `gpuctl plan` prints it, the
/// unchanged clusters in one line, the clusters not planned.
pub fn human(
    fleet: &str,
    plans: &[ClusterPlan],
    policy: &[PlanFinding],
    now: jiff::Timestamp,
    style: Style,
) -> String {
    let p = parts(fleet, plans);
    let mut out = format!("{}\n", p.headline);
    if !policy.is_empty() {
        out.push_str(&format!(
            "\nPolicy findings of the fleet:\n{}",
            policy_lines(policy, false)
        ));
    }
    for c in plans {
        if let Some(plan) = c.changed() {
            out.push_str(&format!(
                "\n== {} (wave {}, {}) ==\n{}",
                c.name,
                c.wave,
                source_text(&c.source, now),
                plan_human(plan, style, false)
            ));
        }
    }
    if !p.unchanged.is_empty() {
        out.push_str(&format!("\n{}\n", unchanged_line(&p.unchanged)));
    }
    for (name, e) in &p.failed {
        out.push_str(&format!("\nerror: cluster `{name}` not planned: {e}\n"));
    }
    out
}

/// Versioned JSON: per cluster its wave, source and either its full plan (as `gpuctl plan -o
/// json`, masked) or its error.
pub fn json(fleet: &str, plans: &[ClusterPlan], policy: &[PlanFinding]) -> String {
    let clusters: Vec<Value> = plans
        .iter()
        .map(|c| {
            let (source, context, at) = match &c.source {
                Source::Live { context } => ("live", context.clone(), None),
                Source::Snapshot { at } => ("snapshot", None, at.clone()),
                Source::Offline => ("offline", None, None),
            };
            let mut v = json!({"name": c.name, "wave": c.wave, "source": source});
            if let Some(context) = context {
                v["context"] = json!(context);
            }
            if let Some(at) = at {
                v["snapshot_captured_at"] = json!(at);
            }
            match &c.outcome {
                Outcome::Planned(plan) => {
                    v["changed"] = json!(plan.summary.has_changes());
                    v["plan"] = serde_json::from_str(&plan.to_json()).unwrap_or(Value::Null);
                }
                Outcome::Error(e) => v["error"] = json!(e),
            }
            v
        })
        .collect();
    let doc = json!({
        "format_version": FLEET_PLAN_FORMAT_VERSION,
        "kind": "FleetPlan",
        "fleet": fleet,
        "clusters": clusters,
    });
    let mut doc = doc;
    if !policy.is_empty() {
        doc["policy_findings"] = json!(policy);
    }
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}
