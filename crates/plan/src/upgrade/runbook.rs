//! The plan for people: a Markdown runbook a human can follow by hand (exact `kubectl` commands,
//! what to watch, expected durations, the rollback of each step), written by
//! `templates/runbooks/upgrade-driver.md.j2`, and an SVG timeline of the batches with
//! deterministic bytes (integer coordinates, fixed order, no timestamps).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::schedule::{PlanBatch, UpgradePlan};
use super::{
    DRIVER_OWNER_LABEL, DRIVER_VERSION_LABEL, FIELD_MANAGER, MIG_CONFIG_STATE_LABEL,
    PENDING_TAINT_KEY, UPGRADE_STATE_LABEL, VALIDATOR_SELECTOR, human_duration,
};
use gpuctl_pipeline::render::{
    DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL, RenderError, Templates,
};

/// Template of the runbook.
pub const TEMPLATE: &str = "runbooks/upgrade-driver.md.j2";

/// The timeline's file next to a runbook: `upgrade.md` -> `upgrade.timeline.svg`.
pub fn svg_path(runbook: &Path) -> PathBuf {
    let stem = runbook
        .file_stem()
        .map_or_else(|| "upgrade".into(), |s| s.to_string_lossy().to_string());
    runbook.with_file_name(format!("{stem}.timeline.svg"))
}

fn dur(s: u64) -> String {
    human_duration(Duration::from_secs(s))
}

fn label_args(m: &BTreeMap<String, Option<String>>, keys: &[&str]) -> String {
    keys.iter()
        .filter_map(|k| m.get(*k).map(|v| (*k, v)))
        .map(|(k, v)| match v {
            Some(v) => format!("{k}={v}"),
            None => format!("{k}-"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn batch_ctx(plan: &UpgradePlan, b: &PlanBatch) -> Value {
    let color = &plan.policy.color_label;
    let restore: Vec<Value> = plan
        .nodes
        .iter()
        .filter(|n| n.batch == b.index)
        .map(|n| {
            json!({
                "node": n.name,
                "configs": label_args(&n.recorded, &[MIG_CONFIG_LABEL, DEVICE_PLUGIN_CONFIG_LABEL]),
                "back": label_args(&n.recorded, &[DRIVER_LABEL, color.as_str()]),
                "cordoned": n.unschedulable,
            })
        })
        .collect();
    let mig = plan
        .nodes
        .iter()
        .any(|n| n.batch == b.index && n.mig_capable);
    let rules: Vec<&Value> = b
        .nodes
        .iter()
        .filter_map(|n| plan.device_taints.rules.get(n))
        .collect();
    let rules_yaml = rules
        .iter()
        .map(|r| serde_saphyr::to_string(r).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("---\n");
    let rule_names = rules
        .iter()
        .filter_map(|r| r["metadata"]["name"].as_str())
        .collect::<Vec<_>>()
        .join(" ");
    json!({
        "index": b.index,
        "nodes": b.nodes,
        "nodeList": b.nodes.join(" "),
        "evict": b.evict,
        "waitFor": b.wait_for,
        "gpusOffline": b.gpus_offline,
        "displaced": b.displaced,
        "spare": b.spare,
        "drain": if b.drain_s == 0 { "seconds".to_string() } else { dur(b.drain_s) },
        "bounded": !b.wait_for.is_empty(),
        "upgrade": dur(b.upgrade_s),
        "start": dur(b.start_s),
        "end": dur(b.end_s),
        "duration": dur(b.end_s - b.start_s),
        "restore": restore,
        "mig": mig,
        "taintRulesYaml": rules_yaml,
        "taintRuleNames": rule_names,
        "uncordon": plan.nodes.iter().filter(|n| n.batch == b.index && !n.unschedulable).map(|n| n.name.clone()).collect::<Vec<_>>().join(" "),
    })
}

/// The runbook's Markdown; `svg` is the timeline's file name (referenced, written by the caller).
pub fn markdown(
    plan: &UpgradePlan,
    templates: &Templates,
    svg: &str,
) -> Result<String, RenderError> {
    let green_yaml = plan
        .green_manifest
        .as_ref()
        .map(|m| serde_saphyr::to_string(m).unwrap_or_default());
    let ctx = json!({
        "plan": plan,
        "svg": svg,
        "selector": crate::live::workloads::selector_text(&plan.selector),
        "allNodes": plan.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>().join(" "),
        "batches": plan.batches.iter().map(|b| batch_ctx(plan, b)).collect::<Vec<_>>(),
        "greenYaml": green_yaml,
        "taint": plan.pending_taint(),
        "taintKey": PENDING_TAINT_KEY,
        "fieldManager": FIELD_MANAGER,
        "total": dur(plan.total_s),
        "bounded": plan.batches.iter().any(|b| !b.wait_for.is_empty()),
        "validateTimeout": dur(plan.validate_timeout_s),
        "nodeUpgrade": dur(plan.node_upgrade_s),
        "errors": plan.errors(),
        "labels": {
            "driver": DRIVER_LABEL,
            "color": plan.policy.color_label,
            "state": UPGRADE_STATE_LABEL,
            "version": DRIVER_VERSION_LABEL,
            "owner": DRIVER_OWNER_LABEL,
            "migConfig": MIG_CONFIG_LABEL,
            "migState": MIG_CONFIG_STATE_LABEL,
            "devicePlugin": DEVICE_PLUGIN_CONFIG_LABEL,
        },
        "validator": VALIDATOR_SELECTOR,
        "deviceTaintKey": gpuctl_model::names::MAINTENANCE_TAINT_KEY,
        "deviceTaintsUsed": plan.device_taints.used(),
        "deviceTaintsFallback": plan.device_taints.fallback,
    });
    templates.render(TEMPLATE, ctx)
}

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The timeline's geometry: the time axis starts at `LEFT` and is `WIDTH` wide, one row of `ROW`
/// per batch below `TOP`.
const LEFT: u64 = 170;
const WIDTH: u64 = 640;
const ROW: u64 = 34;
const TOP: u64 = 56;

/// The batches on a time axis: one row per batch, drain and driver swap as bars, at their expected
/// start; the drain bar is hatched when it stands for the drain timeout (jobs are waited for).
pub fn timeline_svg(plan: &UpgradePlan) -> String {
    let total = plan.total_s.max(1);
    let x = |s: u64| LEFT + s * WIDTH / total;
    let rows = plan.batches.len() as u64;
    let mut s = String::new();
    timeline_header(&mut s, plan, TOP + rows * ROW + 64);
    // Time grid: five ticks.
    for i in 0..=4u64 {
        let t = total * i / 4;
        let gx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{gx}" y1="{TOP}" x2="{gx}" y2="{}" stroke="#dddddd"/>"##,
            TOP + rows * ROW
        );
        let _ = writeln!(
            s,
            r##"<text x="{gx}" y="{}" text-anchor="middle" fill="#555555">+{}</text>"##,
            TOP + rows * ROW + 16,
            esc(&dur(t))
        );
    }
    for (i, b) in plan.batches.iter().enumerate() {
        timeline_batch(&mut s, b, TOP + i as u64 * ROW, &x);
    }
    timeline_legend(&mut s, TOP + rows * ROW + 36);
    s.push_str("</svg>\n");
    s
}

/// The picture's opening: its size, title, the hatch pattern, the heading and the summary line.
fn timeline_header(s: &mut String, plan: &UpgradePlan, height: u64) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" viewBox="0 0 {w} {height}" font-family="sans-serif" font-size="12">"#,
        w = LEFT + WIDTH + 30
    );
    let _ = writeln!(
        s,
        r#"<title>Driver upgrade of pool {} from {} to {}: {} batch(es), about {}</title>"#,
        esc(&plan.pool),
        esc(&plan.from_version),
        esc(&plan.to_version),
        plan.batches.len(),
        esc(&dur(plan.total_s))
    );
    let _ = writeln!(
        s,
        r##"<defs><pattern id="bound" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f3d9a4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c98a1b" stroke-width="2"/></pattern></defs>"##
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">Pool {}: driver {} → {} ({} → {})</text>"#,
        esc(&plan.pool),
        esc(&plan.from_version),
        esc(&plan.to_version),
        esc(&plan.blue_cr),
        esc(&plan.green_cr)
    );
    let bounded = plan.batches.iter().any(|b| !b.wait_for.is_empty());
    let _ = writeln!(
        s,
        r##"<text x="10" y="40" fill="#555555">{} node(s), batches of up to {}, at most {} unavailable; {} {}</text>"##,
        plan.nodes.len(),
        plan.policy.batch_size,
        plan.policy.max_unavailable,
        if bounded { "up to about" } else { "about" },
        esc(&dur(plan.total_s))
    );
}

/// One batch's row at height `y`: its label, the drain bar (hatched when it is the drain bound),
/// the driver swap bar.
fn timeline_batch(s: &mut String, b: &PlanBatch, y: u64, x: &dyn Fn(u64) -> u64) {
    let first = b.nodes.first().map(String::as_str).unwrap_or("");
    let label = if b.nodes.len() > 1 {
        format!("batch {} ({} nodes)", b.index, b.nodes.len())
    } else {
        format!("batch {} ({first})", b.index)
    };
    let _ = writeln!(s, r#"<text x="10" y="{}">{}</text>"#, y + 21, esc(&label));
    let drain_end = b.start_s + b.drain_s;
    if b.drain_s > 0 {
        let fill = if b.wait_for.is_empty() {
            "#f3d9a4"
        } else {
            "url(#bound)"
        };
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="{}" height="20" fill="{fill}"><title>batch {}: drain {}</title></rect>"#,
            x(b.start_s),
            y + 7,
            (x(drain_end) - x(b.start_s)).max(1),
            b.index,
            esc(&dur(b.drain_s))
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="20" fill="#4f8fd6"><title>batch {}: driver swap and validation {}</title></rect>"##,
        x(drain_end),
        y + 7,
        (x(b.end_s) - x(drain_end)).max(1),
        b.index,
        esc(&dur(b.upgrade_s))
    );
}

/// The legend at height `ly`: what the three bars mean.
fn timeline_legend(s: &mut String, ly: u64) {
    let _ = writeln!(
        s,
        r##"<rect x="10" y="{}" width="14" height="12" fill="#f3d9a4"/><text x="30" y="{}">drain (eviction)</text>"##,
        ly,
        ly + 10
    );
    let _ = writeln!(
        s,
        r##"<rect x="150" y="{}" width="14" height="12" fill="url(#bound)"/><text x="170" y="{}">drain bound (waiting for jobs)</text>"##,
        ly,
        ly + 10
    );
    let _ = writeln!(
        s,
        r##"<rect x="370" y="{}" width="14" height="12" fill="#4f8fd6"/><text x="390" y="{}">driver swap and validation (estimate)</text>"##,
        ly,
        ly + 10
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_sits_next_to_the_runbook() {
        assert_eq!(
            svg_path(Path::new("out/upgrade-h100.md")),
            PathBuf::from("out/upgrade-h100.timeline.svg")
        );
    }
}
