//! Validation of a blueprint built from overlays: each finding names the file (and line) that set
//! the value at fault. The overlay merge itself is tested in the model crate
//! (`blueprint/overlay/tests.rs`), from the same base file.

use std::path::Path;

use gpuctl_model::blueprint::{Broken, Loaded, load_file_in};
use gpuctl_model::profiles::Catalog;

use super::{Options, check_split};

const BASE: &str = include_str!("../../../../tests/fixtures/overlay/base.yaml");

/// A directory with files `(relative path, text)`.
fn dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    for (p, text) in files {
        std::fs::write(d.path().join(p), text).expect("write");
    }
    d
}

fn load(d: &Path, file: &str) -> Result<Loaded, Broken> {
    load_file_in(&d.join(file), None)
}

fn overlay(spec: &str) -> String {
    format!(
        "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: base.yaml\nmetadata: {{ name: us }}\n{spec}"
    )
}

#[test]
fn findings_point_at_the_file_that_set_the_value() {
    let opts = Options {
        today: jiff::civil::date(2026, 12, 3),
    };
    // The base's namespace is shared by two tenants only once the overlay adds the second one:
    // the duplicate is the overlay's; an unknown GPU model in the base is the base's.
    let base = BASE.replace("model: A100-SXM4-80GB", "model: A100-SXM9");
    let d = dir(&[
        ("base.yaml", base.as_str()),
        (
            "us.yaml",
            &overlay("spec:\n  tenants:\n    - { name: team-c, namespaces: [team-b] }\n"),
        ),
    ]);
    let loaded = load(d.path(), "us.yaml").expect("loads");
    assert_eq!(loaded.layers.len(), 1);
    let reports = check_split(&loaded, Catalog::embedded(), opts);
    let by_rule = |rule: &str| {
        reports
            .iter()
            .find(|r| r.findings.iter().any(|f| f.rule == rule))
            .map(|r| {
                let f = r.findings.iter().find(|f| f.rule == rule).unwrap();
                (
                    Path::new(&r.file)
                        .file_name()
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .to_string(),
                    f.pos.map(|p| p.line),
                    f.hint.clone().unwrap_or_default(),
                )
            })
    };
    let (file, line, _) = by_rule("GPU011").expect("duplicate namespace");
    assert_eq!((file.as_str(), line), ("us.yaml", Some(7)));
    let unknown_gpu = reports
        .iter()
        .flat_map(|r| r.findings.iter().map(move |f| (r, f)))
        .find(|(_, f)| f.path.contains("gpu.model"))
        .expect("unknown model");
    assert!(
        unknown_gpu.0.file.ends_with("base.yaml"),
        "{}",
        unknown_gpu.0.file
    );
    assert_eq!(unknown_gpu.1.pos.map(|p| p.line), Some(27));
    assert!(unknown_gpu.1.hint.as_deref().unwrap().contains("us.yaml"));
    // `check` (one report) names the base's file and line in the message instead.
    let one = super::check(&loaded, Catalog::embedded(), opts);
    let f = one
        .findings
        .iter()
        .find(|f| f.path.contains("gpu.model"))
        .unwrap();
    assert!(
        f.pos.is_none() && f.message.contains("base.yaml:27:"),
        "{f:?}"
    );
}
