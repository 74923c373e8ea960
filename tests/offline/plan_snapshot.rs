//! The README's main command: plan an example blueprint against the shipped snapshot
//! (`blueprints/snapshots/`, made by `tools/make-example-snapshot`). Golden output in `golden/plan/`.

use std::path::Path;

use crate::support::gpuctl::{Gpuctl, TODAY, gpuctl};

fn plan(format: &str) -> (Option<i32>, String) {
    let o = gpuctl(&[
        "plan",
        "blueprints/dgx-h100-training.yaml",
        "--snapshot",
        "blueprints/snapshots/dgx-h100-training.json",
        "--detailed-exitcode",
        "-o",
        format,
    ]);
    (o.status.code(), String::from_utf8(o.stdout).expect("utf-8"))
}

#[test]
fn plan_against_the_shipped_snapshot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (code, human) = plan("human");
    assert_eq!(
        code,
        Some(2),
        "changes exist, so --detailed-exitcode gives 2:\n{human}"
    );
    // The snapshot holds an older version of the blueprint: the plan must show each kind of change.
    for want in [
        "+ create",
        "~ update",
        "- delete",
        "NVIDIADriver/cluster-default",
        "Findings from the snapshot",
    ] {
        assert!(human.contains(want), "`{want}` missing from:\n{human}");
    }
    // A snapshot plan says what it was made from: no server was contacted.
    let first = human.lines().next().unwrap();
    let snap: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("blueprints/snapshots/dgx-h100-training.json")).unwrap(),
    )
    .unwrap();
    let (fingerprint, at) = (
        snap["fingerprint"].as_str().unwrap(),
        snap["captured_at"].as_str().unwrap(),
    );
    assert!(
        first.contains(&format!("from a snapshot of cluster {fingerprint}"))
            && first.contains(&format!("taken at {at}"))
            && first.contains("not contacted"),
        "{first}"
    );
    for never in ["against https://", "live cluster"] {
        assert!(!human.contains(never), "`{never}` in:\n{human}");
    }
    // Under blue-green, the default driver's version change leads the plan, with the commands.
    let rollout = human
        .find("!! Most disruptive change: driver 580.105.08 -> 580.173.02")
        .expect(&human);
    let first_action = human.find("  + create").unwrap();
    assert!(rollout < first_action, "{human}");
    for pool in ["h100-train", "h100-infer"] {
        let cmd = format!("gpuctl upgrade driver BLUEPRINT --pool {pool} --to 580.173.02");
        let at = human
            .find(&cmd)
            .unwrap_or_else(|| panic!("`{cmd}` missing:\n{human}"));
        assert!(at < first_action, "{human}");
    }
    let (_, markdown) = plan("markdown");
    let (_, json) = plan("json");
    let v: serde_json::Value = serde_json::from_str(&json).expect("plan json");
    assert_eq!(v["mode"], "snapshot");
    insta::with_settings!({
        snapshot_path => root.join("golden/plan"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("dgx-h100-training.snapshot-plan.human", human);
        insta::assert_snapshot!("dgx-h100-training.snapshot-plan.markdown", markdown);
    });
}

/// Issue 10 item 3: the saved plan holds the Helm values and manifests apply sends, credentials
/// included, so it is readable by its owner only, also when it replaces a wider file; the printed
/// JSON is the masked one and says so.
#[cfg(unix)]
#[test]
fn issue_10_the_saved_plan_is_owner_only_and_the_printed_one_masked() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan.json");
    std::fs::write(&out, "old").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = Gpuctl::new([
        "plan",
        "blueprints/dgx-h100-training.yaml",
        "--snapshot",
        "blueprints/snapshots/dgx-h100-training.json",
        "-o",
        "json",
        "--out",
    ])
    .arg(&out)
    .today(TODAY)
    .output();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "saved plan mode {mode:o}");
    assert!(stderr.contains("(mode 0600)"), "{stderr}");
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan json");
    assert_eq!(printed["redacted"], true);
    let saved = std::fs::read_to_string(&out).unwrap();
    gpuctl_core::plan::Plan::from_json(&saved).expect("the saved plan can be applied");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
}

fn gpuctl_plan(args: &[&str]) -> String {
    let o = Gpuctl::new(["plan"])
        .args(args)
        .today(TODAY)
        .no_color()
        .output();
    assert!(
        matches!(o.status.code(), Some(0 | 2)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8")
}

/// With `upgrades.strategy: rolling` the operator's in-place upgrade is what the blueprint asks
/// for: the driver change is an ordinary update, no blue-green command is offered.
#[test]
fn rolling_blueprints_get_no_blue_green_rollout() {
    let dir = tempfile::tempdir().unwrap();
    let bp = dir.path().join("rolling.yaml");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("blueprints/dgx-h100-training.yaml"),
    )
    .unwrap();
    let start = text.find("  upgrades:\n").unwrap();
    let end = text[start..]
        .find("\n\n")
        .map_or(text.len(), |e| start + e + 1);
    let rolling = format!(
        "{}  upgrades:\n    strategy: rolling\n{}",
        &text[..start],
        &text[end..]
    );
    assert_ne!(rolling, text);
    std::fs::write(&bp, rolling).unwrap();
    let human = gpuctl_plan(&[
        bp.to_str().unwrap(),
        "--snapshot",
        "blueprints/snapshots/dgx-h100-training.json",
    ]);
    assert!(
        human.contains("~ update   NVIDIADriver/cluster-default"),
        "{human}"
    );
    assert!(!human.contains("Most disruptive"), "{human}");
    assert!(!human.contains("--pool h100-train --to"), "{human}");
}

/// What a CommonMark renderer (GitHub's is one) makes of a Markdown plan.
struct Rendered {
    /// Fenced code blocks: (info string, text).
    fences: Vec<(String, String)>,
    /// Tables, as rows of cell texts (header row first).
    tables: Vec<Vec<Vec<String>>>,
    /// Inline code spans.
    code: Vec<String>,
    /// Block quotes' text.
    quotes: Vec<String>,
}

fn commonmark(md: &str) -> Rendered {
    use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
    let mut r = Rendered {
        fences: vec![],
        tables: vec![],
        code: vec![],
        quotes: vec![],
    };
    let mut fence: Option<(String, String)> = None;
    let mut table: Option<Vec<Vec<String>>> = None;
    let mut cell: Option<String> = None;
    let mut quote_depth = 0;
    for ev in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match ev {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                fence = Some((info.to_string(), String::new()));
            }
            Event::End(TagEnd::CodeBlock) => r.fences.extend(fence.take()),
            Event::Start(Tag::Table(_)) => table = Some(vec![]),
            Event::End(TagEnd::Table) => r.tables.extend(table.take()),
            Event::Start(Tag::TableHead | Tag::TableRow) => {
                if let Some(t) = table.as_mut() {
                    t.push(vec![]);
                }
            }
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::End(TagEnd::TableCell) => {
                if let (Some(t), Some(c)) = (table.as_mut(), cell.take()) {
                    t.last_mut().unwrap().push(c);
                }
            }
            Event::Start(Tag::BlockQuote(_)) => {
                quote_depth += 1;
                r.quotes.push(String::new());
            }
            Event::End(TagEnd::BlockQuote(_)) => quote_depth -= 1,
            Event::Text(ref t) | Event::Code(ref t) => {
                if matches!(ev, Event::Code(_)) {
                    r.code.push(t.to_string());
                }
                if let Some((_, text)) = fence.as_mut() {
                    text.push_str(t);
                } else if let Some(c) = cell.as_mut() {
                    c.push_str(t);
                }
                if quote_depth > 0 {
                    r.quotes.last_mut().unwrap().push_str(t);
                }
            }
            _ => {}
        }
    }
    r
}

/// The Markdown plan renders as meant on GitHub: the field changes are a ```diff fence whose
/// change lines start with `-`/`+` (GitHub colours only those), the summary and the objects are
/// real tables, every object is listed once, and the offline plan names the operator release.
#[test]
fn markdown_plan_renders_as_commonmark_tables_and_a_diff_fence() {
    let md = gpuctl_plan(&[
        "blueprints/dgx-h100-training.yaml",
        "--snapshot",
        "blueprints/snapshots/dgx-h100-training.json",
        "-o",
        "markdown",
    ]);
    let r = commonmark(&md);
    let diffs: Vec<&String> = r
        .fences
        .iter()
        .filter(|(info, _)| info == "diff")
        .map(|(_, t)| t)
        .collect();
    assert_eq!(diffs.len(), 1, "{md}");
    let diff = diffs[0];
    for line in diff.lines() {
        assert!(
            line.starts_with("+ ") || line.starts_with("- ") || line.starts_with("@@ "),
            "a diff line GitHub would not colour or mark: {line:?}"
        );
    }
    assert!(
        diff.lines().any(|l| l == "- spec.version: \"580.105.08\""),
        "{diff}"
    );
    assert!(
        diff.lines().any(|l| l == "+ spec.version: \"580.173.02\""),
        "{diff}"
    );

    assert_eq!(r.tables.len(), 2, "{md}");
    assert_eq!(
        r.tables[0][0],
        [
            "create",
            "update",
            "delete",
            "conflict",
            "nodes",
            "unchanged"
        ]
    );
    // The snapshot holds an older version of the example (tools/make-example-snapshot): the
    // dev-test tenant's Namespace, quota, LimitRange and LocalQueue, the Network Operator's
    // namespace and NicClusterPolicy are creates; the driver, team-b's quota (fewer pods) and
    // cq-dev's namespace selector updates; the dropped legacy tenant's LocalQueue and quota deletes.
    assert_eq!(r.tables[0][1], ["6", "3", "2", "0", "0", "33"]);
    let objects = &r.tables[1];
    assert_eq!(objects[0], ["action", "object", "changes"]);
    // Each changed object is one row, and the object list appears once in the whole comment.
    for id in [
        "Namespace/dev-test",
        "LocalQueue/legacy-ml/default",
        "NVIDIADriver/cluster-default",
    ] {
        let rows = objects.iter().filter(|row| row[1] == id).count();
        assert_eq!(rows, 1, "{id}: {objects:?}");
    }
    assert_eq!(md.matches("Namespace/dev-test").count(), 1, "{md}");
    assert_eq!(
        md.matches("LocalQueue/legacy-ml/default").count(),
        1,
        "{md}"
    );

    // The blue-green rollout is a block quote ahead of the tables, with its commands in a fence.
    let caution = md.find("Most disruptive change").unwrap();
    assert!(caution < md.find("| create |").unwrap(), "{md}");
    assert!(
        r.quotes
            .iter()
            .any(|q| q.contains("Most disruptive change")),
        "{md}"
    );
    let commands = r.fences.iter().find(|(info, _)| info == "sh").expect(&md);
    assert!(
        commands
            .1
            .contains("gpuctl upgrade driver BLUEPRINT --pool h100-train --to 580.173.02"),
        "{md}"
    );

    // Offline: no release to diff, but the release step is named, as the human plan does.
    let offline = gpuctl_plan(&[
        "blueprints/dgx-h100-training.yaml",
        "--offline",
        "-o",
        "markdown",
    ]);
    let human = gpuctl_plan(&["blueprints/dgx-h100-training.yaml", "--offline"]);
    let release =
        "helm upgrade --install gpu-operator nvidia/gpu-operator --version v26.7.0 -n gpu-operator";
    assert!(
        human.contains(&format!("Operator release: {release}")),
        "{human}"
    );
    let r = commonmark(&offline);
    assert!(r.code.iter().any(|c| c == release), "{offline}");
    assert_eq!(r.tables.len(), 2, "{offline}");
    assert!(!offline.contains("live cluster"), "{offline}");
}
