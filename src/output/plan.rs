//! Plan output: human (Terraform-like, coloured on a terminal), and Markdown for a PR comment (size
//! capped, full diff collapsed). JSON is `Plan::to_json`.

use serde_json::Value;

use crate::settings::Style;
use gpuctl_model::blueprint::InstallMode;
use gpuctl_model::located::Severity;
use gpuctl_model::names::DEFAULT_DRIVER_CR;
use gpuctl_pipeline::render::HelmRelease;
use gpuctl_plan::plan::{
    Action, ActionKind, DriverRollout, HelmAction, HelmPlan, Mode, Plan, Summary, UninstallStep,
    diff::Change, redact,
};

/// GitHub rejects comments over 65,536 characters; stay well below with room for a header.
pub const MARKDOWN_CAP: usize = 60_000;

fn paint(style: Style, code: &str, text: &str) -> String {
    match style {
        Style::Rich => format!("\x1b[{code}m{text}\x1b[0m"),
        Style::Plain => text.to_string(),
    }
}

fn symbol(a: ActionKind) -> (&'static str, &'static str, &'static str) {
    match a {
        ActionKind::Create => ("+", "create", "32"),
        ActionKind::CreateAfterCrd => ("+", "create*", "32"),
        ActionKind::CreateAfterParent => ("+", "create^", "32"),
        ActionKind::Update => ("~", "update", "33"),
        ActionKind::Delete => ("-", "delete", "31"),
        ActionKind::Conflict => ("!", "conflict", "35"),
        ActionKind::NoOp => (" ", "no-op", "0"),
        ActionKind::Adopt => ("&", "adopt", "36"),
    }
}

fn show(v: &Option<Value>) -> String {
    match v {
        None => "(none)".into(),
        Some(Value::String(s)) => format!("{s:?}"),
        Some(v) => v.to_string(),
    }
}

fn change_line(c: &Change) -> String {
    // Plans mask their changes when they are made; masking again here covers plans read from a
    // file or built by hand (masking is idempotent).
    let mut masked = [c.clone()];
    redact::redact_change_values(&mut masked);
    let [c] = masked;
    match (&c.before, &c.after) {
        (None, Some(_)) => format!("+ {}: {}", c.path, show(&c.after)),
        (Some(_), None) => format!("- {}: {}", c.path, show(&c.before)),
        _ => format!("~ {}: {} -> {}", c.path, show(&c.before), show(&c.after)),
    }
}

/// The masked field changes as diff lines: `+ path: after`, `- path: before`, or both.
fn diff_lines(c: &Change) -> Vec<String> {
    let mut masked = [c.clone()];
    redact::redact_change_values(&mut masked);
    let [c] = masked;
    let mut out = Vec::new();
    if c.before.is_some() {
        out.push(format!("- {}: {}", c.path, show(&c.before)));
    }
    if c.after.is_some() {
        out.push(format!("+ {}: {}", c.path, show(&c.after)));
    }
    out
}

/// What the plan was made against. A snapshot plan says it is one, when it was taken and of which
/// cluster: nothing was read from a server.
fn header(plan: &Plan) -> String {
    let target = match plan.mode {
        Mode::Live => match (&plan.server, &plan.cluster_fingerprint) {
            (Some(s), Some(f)) => format!(" (live) against {s} (cluster {f})"),
            (Some(s), None) => format!(" (live) against {s}"),
            _ => " (live)".to_string(),
        },
        Mode::Snapshot => {
            let cluster = match (&plan.cluster_fingerprint, &plan.server) {
                (Some(f), Some(s)) => format!("cluster {f} ({s})"),
                (Some(f), None) => format!("cluster {f}"),
                (None, Some(s)) => format!("the cluster at {s}"),
                (None, None) => "an unidentified cluster".to_string(),
            };
            let when = plan.snapshot_captured_at.as_deref().map_or_else(
                || "at a time the snapshot does not record".to_string(),
                |t| format!("at {t}"),
            );
            format!(
                " from a snapshot of {cluster} taken {when}; the cluster itself was not contacted"
            )
        }
        Mode::Offline => " (offline: no cluster state, every object is new)".to_string(),
    };
    format!("gpuctl plan for blueprint `{}`{target}", plan.blueprint)
}

/// `[GPU401]` after a finding's severity (`gpuctl explain` takes the id); nothing for a plan
/// saved by a gpuctl before ids.
fn id_suffix(id: &str) -> String {
    if id.is_empty() {
        String::new()
    } else {
        format!("[{id}]")
    }
}

/// Where the findings come from.
fn findings_heading(plan: &Plan) -> &'static str {
    match plan.mode {
        Mode::Live => "Findings from the live cluster",
        Mode::Snapshot => "Findings from the snapshot",
        Mode::Offline => "Findings",
    }
}

/// The blue-green commands that roll `r` out pool by pool.
fn rollout_commands(r: &DriverRollout) -> Vec<String> {
    r.pools
        .iter()
        .map(|p| {
            format!(
                "gpuctl upgrade driver BLUEPRINT --pool {} --to {}",
                p.pool, r.to
            )
        })
        .collect()
}

/// The first lines of a plan with a driver rollout: what it does, and how to do it blue-green.
fn rollout_text(r: &DriverRollout) -> (String, String) {
    let title = format!(
        "Most disruptive change: driver {} -> {} on NVIDIADriver/{}",
        r.from, r.to, r.driver_cr
    );
    let keep = if r.driver_cr == DEFAULT_DRIVER_CR {
        format!(
            "keep `gpuOperator.driver.version: \"{}\"` in the blueprint",
            r.from
        )
    } else {
        format!("keep driver {} in the blueprint", r.from)
    };
    let body = format!(
        "Applying this plan makes the GPU Operator replace the driver on all {} nodes this CR serves, {}, at once and without draining them, although the blueprint upgrades drivers blue-green. Roll it out blue-green instead: {keep}, run the upgrade for each pool, and declare the new driver on each pool it moved (`nodePools[].driver.version: \"{}\"`):",
        r.nodes(),
        r.pool_list(),
        r.to
    );
    (title, body)
}

/// `text` wrapped at `width` columns, each line prefixed with `indent`.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > width {
            out.push_str(&format!("{indent}{line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{indent}{line}\n"));
    }
    out
}

/// The rollout block at the top of a human plan.
fn rollout_block(plan: &Plan, style: Style) -> String {
    let mut out = String::new();
    for r in &plan.driver_rollouts {
        let (title, body) = rollout_text(r);
        out.push_str(&format!("{} {title}\n", paint(style, "1;31", "!!")));
        out.push_str(&wrap(&body, "   ", 100));
        for c in rollout_commands(r) {
            out.push_str(&format!("     {c}\n"));
        }
        out.push('\n');
    }
    out
}

/// Where the release's values come from.
const HELM_VALUES_NOTE: &str = "(values: `gpuctl render --output-dir DIR`)";

/// Every Helm release step of a plan with its label: the GPU Operator's (`Operator release`,
/// as plans always called it), then the other stacks' (`Kueue release`).
fn release_steps(plan: &Plan) -> Vec<(String, &HelmRelease, Option<&HelmPlan>)> {
    std::iter::once((
        "Operator release".to_string(),
        &plan.helm,
        plan.helm_release.as_ref(),
    ))
    .chain(plan.releases.iter().map(|r| {
        (
            format!("{} release", r.release.stack.title()),
            &r.release,
            r.plan.as_ref(),
        )
    }))
    .collect()
}

/// `helm upgrade --install ...` for a release, without the values note.
fn helm_invocation(h: &HelmRelease) -> String {
    format!(
        "helm upgrade --install {} {} --version {} -n {}",
        h.release,
        h.chart_reference(),
        h.version,
        h.namespace
    )
}

/// `helm upgrade --install ... (values: ...)` for a release.
fn helm_command(h: &HelmRelease) -> String {
    format!("{} {HELM_VALUES_NOTE}", helm_invocation(h))
}

fn totals(plan: &Plan) -> String {
    let s = &plan.summary;
    let release: String = release_steps(plan)
        .into_iter()
        .filter_map(|(label, _, hp)| {
            let word = match hp?.action {
                HelmAction::Install => "install",
                HelmAction::Upgrade => "upgrade",
                HelmAction::NoOp => "unchanged",
            };
            Some(format!(" {label}: {word}."))
        })
        .chain(
            plan.uninstalls
                .iter()
                .map(|u| format!(" {} release: uninstall.", u.stack.title())),
        )
        .collect();
    // Adoptions are named only when there are some, so plans of gpuctl-made clusters read as before.
    let adopt = if s.adopt > 0 {
        format!(" {} to adopt,", s.adopt)
    } else {
        String::new()
    };
    format!(
        "Plan:{adopt} {} to create, {} to update, {} to delete, {} conflict(s), {} node(s) to patch, {} unchanged.{release}",
        s.create, s.update, s.delete, s.conflict, s.nodes, s.unchanged
    )
}

/// Human plan. `verbose` also lists unchanged objects and every field of creates.
pub fn human(plan: &Plan, style: Style, verbose: bool) -> String {
    let mut out = format!("{}\n\n", header(plan));
    out.push_str(&rollout_block(plan, style));
    for a in &plan.actions {
        if a.action == ActionKind::NoOp && !verbose {
            continue;
        }
        out.push_str(&action_block(a, style, verbose));
    }
    if !plan.nodes.is_empty() {
        out.push_str("\nNodes:\n");
        for n in &plan.nodes {
            out.push_str(&format!(
                "  {} Node/{} (pool {})\n",
                paint(style, "33", "~ patch  "),
                n.node,
                n.pool
            ));
            for c in &n.labels {
                out.push_str(&format!("      {}\n", change_line(c)));
            }
            for t in &n.taints {
                out.push_str(&format!("      + taint {t}\n"));
            }
        }
    }
    if !plan.findings.is_empty() {
        out.push_str(&format!("\n{}:\n", findings_heading(plan)));
        for f in &plan.findings {
            let tag = if f.severity == Severity::Error {
                paint(style, "31", "error")
            } else {
                paint(style, "33", "warning")
            };
            out.push_str(&format!("  {tag}{}: {}\n", id_suffix(&f.id), f.message));
        }
    }
    for (label, h, hp) in release_steps(plan) {
        out.push_str(&helm_block(&label, h, hp, style, verbose));
    }
    for u in &plan.uninstalls {
        out.push_str(&uninstall_block(u, style));
    }
    out.push_str(&format!("\n{}\n", totals(plan)));
    if plan.summary.create > 0
        && plan
            .actions
            .iter()
            .any(|a| a.action == ActionKind::CreateAfterCrd)
    {
        out.push_str("(create*: the kind's CRD is not installed yet; apply waits for it.)\n");
    }
    if plan
        .actions
        .iter()
        .any(|a| a.action == ActionKind::CreateAfterParent)
    {
        out.push_str(
            "(create^: created after its parent, which this apply creates first; admission refuses it before.)\n",
        );
    }
    out
}

/// A Helm release: what `helm upgrade --install` would change, when the live release is known;
/// the command alone otherwise.
fn helm_block(
    label: &str,
    h: &HelmRelease,
    hp: Option<&HelmPlan>,
    style: Style,
    verbose: bool,
) -> String {
    if h.install != InstallMode::Helm {
        return String::new();
    }
    let command = helm_command(h);
    let source = format!("      # chart from {}\n", h.source);
    let Some(hp) = hp else {
        return format!("\n{label}: {command}\n{source}");
    };
    let id = format!("HelmRelease/{}/{}", h.namespace, h.release);
    let (sym, word, colour) = match hp.action {
        HelmAction::Install => ("+", "install", "32"),
        HelmAction::Upgrade => ("~", "upgrade", "33"),
        HelmAction::NoOp => (" ", "no-op", "0"),
    };
    let mut out = format!(
        "\n{label}:\n  {} {id}\n",
        paint(style, colour, &format!("{sym} {word:<8}"))
    );
    match (hp.revision, &hp.status) {
        (Some(rev), Some(status)) => {
            let chart = match &hp.chart_version_before {
                Some(before) => format!("chart {} {before} -> {}", h.chart, h.version),
                None => format!("chart {} {}", h.chart, h.version),
            };
            let values = match hp.changes.len() {
                0 => "values unchanged".to_string(),
                n => format!("{n} value(s) change"),
            };
            out.push_str(&format!(
                "      # revision {rev} ({status}), {chart}, {values}\n"
            ));
        }
        _ => out.push_str(&format!("      # {command}\n")),
    }
    out.push_str(&source);
    if hp.action != HelmAction::Install || verbose {
        for c in &hp.changes {
            out.push_str(&format!("      {}\n", change_line(c)));
        }
    }
    out
}

/// A release of a component the blueprint dropped: `helm uninstall`, why gpuctl takes it for its
/// own, and what keeps it from running.
fn uninstall_block(u: &UninstallStep, style: Style) -> String {
    let mut out = format!(
        "\n{} release:\n  {} {}\n      # revision {} ({}), chart {} {}; runs `{}`\n      # {}\n",
        u.stack.title(),
        paint(style, "31", &format!("- {:<8}", "uninstall")),
        u.id(),
        u.revision,
        u.status,
        u.chart,
        u.chart_version,
        u.command(),
        u.reason
    );
    if !u.blockers.is_empty() {
        out.push_str(&format!(
            "      # refused while these exist (apply --force-uninstall goes ahead): {}\n",
            u.blockers.join(", ")
        ));
    }
    out
}

fn action_block(a: &Action, style: Style, verbose: bool) -> String {
    let (sym, word, colour) = if a.replace {
        ("-/+", "replace", "31")
    } else {
        symbol(a.action)
    };
    let mut out = format!(
        "  {} {}\n",
        paint(style, colour, &format!("{sym} {word:<8}")),
        a.id()
    );
    if let Some(r) = &a.reason {
        out.push_str(&format!("      # {r}\n"));
    }
    let show_fields = match a.action {
        ActionKind::Create | ActionKind::CreateAfterCrd | ActionKind::CreateAfterParent => verbose,
        _ => true,
    };
    if show_fields {
        for c in &a.changes {
            out.push_str(&format!("      {}\n", change_line(c)));
        }
    }
    out
}

/// Markdown for a PR comment: what the plan was made against, a driver rollout first, the totals,
/// each changed object once (a table), the operator release, findings, then the field changes in a
/// collapsed ```diff block whose lines start with `-`/`+` (so GitHub colours them) under one `@@`
/// header per object. Capped to fit a comment.
pub fn markdown(plan: &Plan) -> String {
    markdown_within(plan, MARKDOWN_CAP)
}

/// [`markdown`] within about `cap` characters: the table takes at most half, the collapsed diff
/// the rest (`fleet plan` gives each cluster a share of one comment).
pub fn markdown_within(plan: &Plan, cap: usize) -> String {
    let mut out = format!("### {}\n\n", header(plan));
    push_rollout_cautions(&mut out, plan);
    push_counts(&mut out, &plan.summary);
    let changed: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| a.action != ActionKind::NoOp)
        .collect();
    let steps = release_steps(plan);
    let release_rows = changed_releases(&steps);
    if changed.is_empty()
        && plan.nodes.is_empty()
        && release_rows.is_empty()
        && plan.uninstalls.is_empty()
    {
        out.push_str("No changes. The cluster matches the blueprint.\n");
    } else {
        out.push_str("| action | object | changes |\n|---|---|---|\n");
        let rows = change_rows(plan, &changed, &release_rows);
        push_rows_within(&mut out, &rows, cap / 2);
    }
    push_helm_invocations(&mut out, &steps);
    if !plan.findings.is_empty() {
        out.push_str(&format!("\n**{}**\n\n", findings_heading(plan)));
        for f in &plan.findings {
            let id = if f.id.is_empty() {
                String::new()
            } else {
                format!(" `{}`", f.id)
            };
            out.push_str(&format!("- {}{id}: {}\n", f.severity, f.message));
        }
    }
    let diff = field_diff(plan, &changed, &release_rows);
    if !diff.is_empty() {
        push_collapsed_diff(&mut out, diff, cap);
    }
    out.push_str(&format!("\n{}\n", totals(plan)));
    out
}

/// A driver rollout first, as a caution with the commands that roll it out.
fn push_rollout_cautions(out: &mut String, plan: &Plan) {
    for r in &plan.driver_rollouts {
        let (title, body) = rollout_text(r);
        out.push_str(&format!(
            "> [!CAUTION]\n> **{title}**\n>\n> {body}\n>\n> ```sh\n"
        ));
        for c in rollout_commands(r) {
            out.push_str(&format!("> {c}\n"));
        }
        out.push_str("> ```\n\n");
    }
}

/// The counts per action, one table row (an `adopt` column only when something is adopted).
fn push_counts(out: &mut String, s: &Summary) {
    if s.adopt > 0 {
        out.push_str(&format!(
            "| adopt | create | update | delete | conflict | nodes | unchanged |\n|---:|---:|---:|---:|---:|---:|---:|\n| {} | {} | {} | {} | {} | {} | {} |\n\n",
            s.adopt, s.create, s.update, s.delete, s.conflict, s.nodes, s.unchanged
        ));
    } else {
        out.push_str(&format!(
            "| create | update | delete | conflict | nodes | unchanged |\n|---:|---:|---:|---:|---:|---:|\n| {} | {} | {} | {} | {} | {} |\n\n",
            s.create, s.update, s.delete, s.conflict, s.nodes, s.unchanged
        ));
    }
}

/// The release steps that install or upgrade, with that word.
fn changed_releases<'a>(
    steps: &[(String, &'a HelmRelease, Option<&'a HelmPlan>)],
) -> Vec<(&'static str, &'a HelmRelease, &'a HelmPlan)> {
    steps
        .iter()
        .filter_map(|(_, h, hp)| {
            let hp = (*hp)?;
            let word = match hp.action {
                HelmAction::NoOp => return None,
                HelmAction::Install => "install",
                HelmAction::Upgrade => "upgrade",
            };
            Some((word, *h, hp))
        })
        .collect()
}

/// `1 field`, `3 fields`, or nothing for none.
fn field_count(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => "1 field".to_string(),
        n => format!("{n} fields"),
    }
}

/// One table row a change: releases, uninstalls, objects, then nodes.
fn change_rows(
    plan: &Plan,
    changed: &[&Action],
    release_rows: &[(&str, &HelmRelease, &HelmPlan)],
) -> Vec<String> {
    release_rows
        .iter()
        .map(|(word, h, hp)| {
            format!(
                "| {word} | `HelmRelease/{}/{}` (chart {}) | {} |\n",
                h.namespace,
                h.release,
                h.version,
                field_count(hp.changes.len())
            )
        })
        .chain(plan.uninstalls.iter().map(|u| {
            format!(
                "| uninstall | `{}` (chart {}) | {} |\n",
                u.id(),
                u.chart_version,
                u.reason.replace('|', "\\|")
            )
        }))
        .chain(changed.iter().map(|a| object_row(a)))
        .chain(plan.nodes.iter().map(|n| {
            let taints = match n.taints.len() {
                0 => String::new(),
                t => format!(", {t} taint(s)"),
            };
            format!(
                "| patch | `Node/{}` (pool {}) | {}{taints} |\n",
                n.node,
                n.pool,
                field_count(n.labels.len())
            )
        }))
        .collect()
}

/// The table row of one changed object.
fn object_row(a: &Action) -> String {
    let note = match (&a.reason, a.action) {
        (_, ActionKind::Create) => String::new(),
        (_, ActionKind::CreateAfterCrd) => "after its CRD is installed".to_string(),
        (_, ActionKind::CreateAfterParent) => "after its parent".to_string(),
        (_, ActionKind::Adopt) => "joins the set, no field change".to_string(),
        (_, ActionKind::Update) if a.adopt => {
            format!("adopted; {}", field_count(a.changes.len()))
        }
        (Some(r), ActionKind::Conflict | ActionKind::Delete) => r.replace('|', "\\|"),
        (_, ActionKind::Update) if a.replace => {
            format!("delete and create: {}", field_count(a.changes.len()))
        }
        _ => field_count(a.changes.len()),
    };
    let word = if a.replace {
        "replace"
    } else {
        symbol(a.action).1
    };
    format!("| {word} | `{}` | {note} |\n", a.id())
}

/// As many `rows` as keep `out` within `limit` characters, then a row counting the rest.
fn push_rows_within(out: &mut String, rows: &[String], limit: usize) {
    let mut shown = 0;
    for row in rows {
        if out.len() + row.len() > limit {
            break;
        }
        out.push_str(row);
        shown += 1;
    }
    if shown < rows.len() {
        out.push_str(&format!(
            "| ... | {} more (see the JSON plan) | |\n",
            rows.len() - shown
        ));
    }
}

/// Offline (or without a readable release) there is no release diff: say what runs.
fn push_helm_invocations(out: &mut String, steps: &[(String, &HelmRelease, Option<&HelmPlan>)]) {
    for (label, h, hp) in steps {
        if h.install == InstallMode::Helm && hp.is_none() {
            out.push_str(&format!(
                "\n**{label}:** `{}` {HELM_VALUES_NOTE}\n",
                helm_invocation(h)
            ));
        }
    }
}

/// The field changes as diff lines under one `@@` header per release, object (creates left out:
/// every field is new) and node.
fn field_diff(
    plan: &Plan,
    changed: &[&Action],
    release_rows: &[(&str, &HelmRelease, &HelmPlan)],
) -> String {
    let mut diff = String::new();
    for (_, h, hp) in release_rows
        .iter()
        .filter(|(_, _, hp)| !hp.changes.is_empty())
    {
        diff.push_str(&format!(
            "@@ HelmRelease/{}/{} values @@\n",
            h.namespace, h.release
        ));
        for c in &hp.changes {
            for l in diff_lines(c) {
                diff.push_str(&format!("{l}\n"));
            }
        }
    }
    for a in changed.iter().filter(|a| {
        !a.changes.is_empty()
            && !matches!(
                a.action,
                ActionKind::Create | ActionKind::CreateAfterCrd | ActionKind::CreateAfterParent
            )
    }) {
        diff.push_str(&format!("@@ {} @@\n", a.id()));
        for c in &a.changes {
            for l in diff_lines(c) {
                diff.push_str(&format!("{l}\n"));
            }
        }
    }
    for n in &plan.nodes {
        diff.push_str(&format!("@@ Node/{} @@\n", n.node));
        for c in &n.labels {
            for l in diff_lines(c) {
                diff.push_str(&format!("{l}\n"));
            }
        }
        for t in &n.taints {
            diff.push_str(&format!("+ taint {t}\n"));
        }
    }
    diff
}

/// `diff` in a collapsed ```diff block, cut at a line to keep `out` within about `cap`.
fn push_collapsed_diff(out: &mut String, diff: String, cap: usize) {
    let room = cap.saturating_sub(out.len() + 200);
    let mut body = diff;
    if body.len() > room {
        let mut end = room.min(body.len());
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        let cut = body[..end].rfind('\n').map_or(0, |i| i + 1);
        body.truncate(cut);
        body.push_str(
            "@@ truncated: the full plan is in the JSON artifact, `gpuctl plan -o json` @@\n",
        );
    }
    out.push_str(&format!(
        "\n<details><summary>Field changes</summary>\n\n```diff\n{body}```\n\n</details>\n"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuctl_pipeline::render::{HelmRelease, Phase};
    use gpuctl_plan::plan::{Mode, NodeAction, PlanFinding, Summary};
    use serde_json::json;

    fn sample(updates: usize) -> Plan {
        let mut actions = vec![Action {
            action: ActionKind::Conflict,
            phase: Some(Phase::Quotas),
            api_version: "v1".into(),
            kind: "ResourceQuota".into(),
            namespace: Some("team-a".into()),
            name: "team-a-quota".into(),
            resource_version: Some("7".into()),
            content_digest: None,
            changes: vec![],
            reason: Some("conflict with \"kubectl-edit\": .spec.hard.pods".into()),
            manifest: None,
            adopt: false,
            replace: false,
        }];
        for i in 0..updates {
            actions.push(Action {
                action: ActionKind::Update,
                phase: Some(Phase::Queues),
                api_version: "kueue.x-k8s.io/v1beta2".into(),
                kind: "ClusterQueue".into(),
                namespace: None,
                name: format!("cq-{i}"),
                resource_version: Some("1".into()),
                content_digest: None,
                changes: vec![Change {
                    path: "spec.x".into(),
                    before: Some(json!("1")),
                    after: Some(json!("2")),
                }],
                reason: None,
                manifest: None,
                adopt: false,
                replace: false,
            });
        }
        Plan {
            releases: vec![],
            uninstalls: vec![],
            format_version: 1,
            gpuctl_version: "0".into(),
            blueprint: "bp".into(),
            mode: Mode::Live,
            cluster_fingerprint: Some("abc".into()),
            server: Some("https://k".into()),
            snapshot_captured_at: None,
            driver_rollouts: vec![],
            applyset: "applyset-x-v1".into(),
            actions,
            nodes: vec![NodeAction {
                pool: "p".into(),
                node: "n1".into(),
                resource_version: None,
                labels: vec![Change {
                    path: "labels.\"nvidia.com/mig.config\"".into(),
                    before: None,
                    after: Some(json!("all-3g")),
                }],
                taints: vec!["nvidia.com/gpu=present:NoSchedule".into()],
            }],
            findings: vec![PlanFinding {
                id: "GPU400".into(),
                severity: Severity::Warning,
                message: "pool `p` expects 2 nodes but 1 match".into(),
            }],
            helm: HelmRelease {
                stack: Default::default(),
                release: "gpu-operator".into(),
                chart: "nvidia/gpu-operator".into(),
                version: "v26.7.0".into(),
                namespace: "gpu-operator".into(),
                install: InstallMode::Helm,
                values: json!({}),
                source: Default::default(),
            },
            helm_release: None,
            node_patches: vec![],
            redacted: false,
            summary: Summary {
                update: updates,
                conflict: 1,
                nodes: 1,
                ..Summary::default()
            },
        }
    }

    #[test]
    fn human_names_conflicts_changes_nodes_and_findings() {
        let text = human(&sample(1), Style::Plain, false);
        assert!(
            text.contains("! conflict ResourceQuota/team-a/team-a-quota"),
            "{text}"
        );
        assert!(text.contains("kubectl-edit"));
        assert!(text.contains("~ spec.x: \"1\" -> \"2\""), "{text}");
        assert!(
            text.contains("+ labels.\"nvidia.com/mig.config\": \"all-3g\""),
            "{text}"
        );
        assert!(text.contains("+ taint nvidia.com/gpu=present:NoSchedule"));
        assert!(text.contains("warning[GPU400]: pool `p` expects 2 nodes"));
        assert!(text.contains(
            "Plan: 0 to create, 1 to update, 0 to delete, 1 conflict(s), 1 node(s) to patch"
        ));
        assert!(!text.contains('\x1b'), "plain output has no escape codes");
        assert!(human(&sample(1), Style::Rich, false).contains("\x1b[35m"));
    }

    #[test]
    fn markdown_is_capped_and_collapses_the_diff() {
        let md = markdown(&sample(5));
        assert!(md.contains("<details><summary>Field changes</summary>"));
        assert!(md.contains("| 0 | 5 | 0 | 1 | 1 | 0 |"), "{md}");
        let big = markdown(&sample(20_000));
        assert!(big.len() <= MARKDOWN_CAP + 2_000, "{}", big.len());
        assert!(big.contains("truncated"));
    }
}
