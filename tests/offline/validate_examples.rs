//! Golden tests: `gpuctl validate` findings for every blueprint in `blueprints/`, snapshotted in
//! `golden/` (human text and JSON). Review changes with `cargo insta review`.

use std::path::{Path, PathBuf};

use gpuctl::settings::Style;
use gpuctl_core::validate::Options;

fn blueprints() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("blueprints");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("blueprints/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 3,
        "expected the example blueprints, found {files:?}"
    );
    files
}

fn opts() -> Options {
    Options {
        today: jiff::civil::date(2026, 11, 30),
    }
}

#[test]
fn every_example_blueprint_matches_its_golden_findings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for path in blueprints() {
        let rel = path.strip_prefix(root).unwrap();
        let mut report = gpuctl::validate_file(rel, opts()).expect("readable example");
        report.file = rel.display().to_string();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        insta::with_settings!({
            snapshot_path => root.join("golden/validate"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(format!("{name}.human"), gpuctl::output::human(std::slice::from_ref(&report), Style::Plain));
            insta::assert_snapshot!(format!("{name}.json"), gpuctl::output::json(std::slice::from_ref(&report)));
        });
    }
}

#[test]
fn example_blueprints_meant_to_be_valid_have_no_errors() {
    for path in blueprints() {
        let name = path.file_name().unwrap().to_string_lossy();
        let report = gpuctl::validate_file(&path, opts()).expect("readable example");
        // mixed-lab.yaml reproduces a broken lab cluster on purpose.
        if name == "mixed-lab.yaml" {
            for want in [
                "GPU021", "GPU022", "GPU026", "GPU027", "GPU050", "GPU029", "GPU055",
            ] {
                assert!(
                    report.findings.iter().any(|f| f.rule == want),
                    "{name}: expected {want} in {:#?}",
                    report.findings
                );
            }
        } else {
            assert!(
                !gpuctl::has_errors(&report),
                "{name}: {:#?}",
                report.findings
            );
        }
    }
}

#[test]
fn no_unreferenced_golden_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stems: Vec<String> = blueprints()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    for entry in std::fs::read_dir(root.join("golden/validate")).expect("golden/validate") {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        let referenced = stems
            .iter()
            .any(|s| name == format!("{s}.human.snap") || name == format!("{s}.json.snap"));
        assert!(
            referenced,
            "golden/validate/{name} belongs to no blueprint: delete it"
        );
    }
}
