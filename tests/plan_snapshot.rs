//! The README's main command: plan an example blueprint against the shipped snapshot
//! (`blueprints/snapshots/`, made by `tools/make-example-snapshot`). Golden output in `golden/plan/`.

use std::path::Path;
use std::process::Command;

fn plan(format: &str) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_gpuctl"))
        .args([
            "plan",
            "blueprints/dgx-h100-training.yaml",
            "--snapshot",
            "blueprints/snapshots/dgx-h100-training.json",
            "--detailed-exitcode",
            "--format",
            format,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("GPUCTL_TODAY", "2026-11-30")
        .env("NO_COLOR", "1")
        .output()
        .expect("gpuctl runs");
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
        "Findings from the live cluster",
    ] {
        assert!(human.contains(want), "`{want}` missing from:\n{human}");
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
