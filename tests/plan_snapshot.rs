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
    let o = Command::new(env!("CARGO_BIN_EXE_gpuctl"))
        .args([
            "plan",
            "blueprints/dgx-h100-training.yaml",
            "--snapshot",
            "blueprints/snapshots/dgx-h100-training.json",
            "--format",
            "json",
            "--out",
        ])
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("GPUCTL_TODAY", "2026-11-30")
        .output()
        .expect("gpuctl runs");
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
