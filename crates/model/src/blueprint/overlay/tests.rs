//! Table tests per merge rule, deletions, provenance, and hostile chains (loops, depth, escapes,
//! symbolic links, size).

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::blueprint::{Broken, Loaded, load_file_in};
use crate::located::FileReport;

/// The base every overlay test extends (shared with `tests/offline/fleet.rs`, whose validation
/// test of an overlay checks that findings point at this file's lines).
const BASE: &str = include_str!("../../../../../tests/fixtures/overlay/base.yaml");

const HEAD: &str = "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\n";

/// A directory with files `(relative path, text)`.
fn dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    for (p, text) in files {
        let path = d.path().join(p);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    d
}

fn load(d: &Path, file: &str, root: Option<&Path>) -> Result<Loaded, Broken> {
    load_file_in(&d.join(file), root)
}

fn overlay(spec: &str) -> String {
    format!("{HEAD}extends: base.yaml\nmetadata: {{ name: us }}\n{spec}")
}

/// The effective document of `base.yaml` + an overlay with `spec`.
fn effective(spec: &str) -> serde_json::Value {
    let d = dir(&[("base.yaml", BASE), ("us.yaml", &overlay(spec))]);
    let loaded = load(d.path(), "us.yaml", None)
        .unwrap_or_else(|b| panic!("loads: {:#?}", b.report.findings));
    loaded.tree.value
}

fn failure(d: &Path, file: &str, root: Option<&Path>) -> FileReport {
    match load(d, file, root) {
        Ok(_) => panic!("{file} loaded"),
        Err(b) => b.report,
    }
}

#[test]
fn maps_merge_deeply_and_scalars_replace() {
    let v = effective("spec:\n  gpuOperator:\n    driver: { version: \"580.173.02\" }\n");
    assert_eq!(v["spec"]["gpuOperator"]["driver"]["version"], "580.173.02");
    // Untouched siblings stay.
    assert_eq!(v["spec"]["gpuOperator"]["version"], "v26.7.0");
    assert_eq!(v["spec"]["gpuOperator"]["dcgmExporter"]["interval"], "30s");
    assert_eq!(v["metadata"]["name"], "us");
    assert!(v.get("extends").is_none(), "extends is resolved away");
}

#[test]
fn null_removes_a_key_and_a_null_for_a_missing_key_adds_nothing() {
    let v = effective(
        "spec:\n  gpuOperator:\n    dcgmExporter: null\n    images: null\n  nodePools:\n    - { name: train, labels: { zone: null } }\n",
    );
    assert!(v["spec"]["gpuOperator"].get("dcgmExporter").is_none());
    assert!(v["spec"]["gpuOperator"].get("images").is_none());
    assert_eq!(
        v["spec"]["nodePools"][0]["labels"],
        json!({"tier": "premium"})
    );
}

#[test]
fn keyed_lists_merge_item_by_item_and_add_new_items_at_the_end() {
    let v = effective(
        "spec:\n  nodePools:\n    - { name: train, nodes: 16 }\n    - { name: dev, role: development, selector: { p: dev }, nodes: 1, gpu: { model: L4, count: 4 } }\n  tenants:\n    - { name: team-b, quota: { nvidia.com/gpu: 6 } }\n",
    );
    let pools = v["spec"]["nodePools"].as_array().expect("pools");
    let names: Vec<&str> = pools.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["train", "infer", "dev"]);
    assert_eq!(pools[0]["nodes"], 16);
    assert_eq!(
        pools[0]["gpu"]["model"], "H100-SXM5-80GB",
        "merged, not replaced"
    );
    assert_eq!(v["spec"]["tenants"][1]["quota"]["nvidia.com/gpu"], 6);
    assert_eq!(v["spec"]["tenants"][1]["namespaces"], json!(["team-b"]));
}

#[test]
fn taints_merge_by_key_and_effect() {
    let v = effective(
        "spec:\n  nodePools:\n    - name: train\n      taints:\n        - { key: dedicated, value: research, effect: NoSchedule }\n        - { key: dedicated, value: x, effect: NoExecute }\n        - { key: nvidia.com/gpu, effect: NoSchedule, $patch: delete }\n",
    );
    assert_eq!(
        v["spec"]["nodePools"][0]["taints"],
        json!([
            {"key": "dedicated", "value": "research", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "x", "effect": "NoExecute"},
        ])
    );
}

#[test]
fn patch_delete_removes_one_item_and_patch_replace_replaces_one_whole() {
    let v = effective(
        "spec:\n  nodePools:\n    - { name: infer, $patch: delete }\n  tenants:\n    - { name: team-a, namespaces: [a], $patch: replace }\n",
    );
    let names: Vec<&str> = v["spec"]["nodePools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["train"]);
    assert_eq!(
        v["spec"]["tenants"][0],
        json!({"name": "team-a", "namespaces": ["a"]})
    );
}

#[test]
fn other_lists_are_replaced_whole() {
    let v = effective("spec:\n  tenants:\n    - { name: team-a, namespaces: [only] }\n");
    assert_eq!(v["spec"]["tenants"][0]["namespaces"], json!(["only"]));
    assert_eq!(v["spec"]["tenants"][0]["quota"]["nvidia.com/gpu"], 8);
}

#[test]
fn a_deletion_that_matches_nothing_is_an_error_in_the_overlay() {
    let d = dir(&[
        ("base.yaml", BASE),
        (
            "us.yaml",
            &overlay("spec:\n  nodePools:\n    - { name: infrence, $patch: delete }\n"),
        ),
    ]);
    let r = failure(d.path(), "us.yaml", None);
    assert!(r.file.ends_with("us.yaml"), "{}", r.file);
    let f = &r.findings[0];
    assert_eq!(f.rule, "GPU181");
    assert_eq!(f.pos.map(|p| p.line), Some(7), "{f:?}");
    assert!(f.message.contains("name: infrence"), "{}", f.message);
    let d = dir(&[
        ("base.yaml", BASE),
        (
            "us.yaml",
            &overlay("spec:\n  nodePools:\n    - { name: infer, $patch: merge }\n"),
        ),
    ]);
    assert_eq!(
        failure(d.path(), "us.yaml", None).findings[0].rule,
        "GPU181"
    );
}

#[test]
fn unknown_fields_are_checked_on_the_effective_blueprint_with_the_file_that_set_them() {
    let bad_base = BASE.replace("      nodes: 2\n", "      nodes: 2\n      gpus: 8\n");
    let d = dir(&[
        ("base.yaml", bad_base.as_str()),
        (
            "us.yaml",
            &overlay("spec:\n  tenants:\n    - { name: team-a, qouta: {} }\n"),
        ),
    ]);
    let r = failure(d.path(), "us.yaml", None);
    let rules: Vec<(&str, Option<usize>, bool)> = r
        .findings
        .iter()
        .map(|f| (f.rule, f.pos.map(|p| p.line), f.message.contains("set in")))
        .collect();
    // The overlay's typo at its line; the base's at no position of the overlay, named in the message.
    assert!(rules.contains(&("GPU002", Some(7), false)), "{rules:?}");
    assert!(rules.contains(&("GPU002", None, true)), "{rules:?}");
    // A null deletes the base's typo before the strict check runs.
    let d = dir(&[
        ("base.yaml", bad_base.as_str()),
        (
            "us.yaml",
            &overlay("spec:\n  nodePools:\n    - { name: infer, gpus: null }\n"),
        ),
    ]);
    assert!(load(d.path(), "us.yaml", None).is_ok());
}

#[test]
fn a_three_level_chain_resolves_and_keeps_each_file() {
    let d = dir(&[
        ("base/base.yaml", BASE),
        (
            "regions/us.yaml",
            &format!(
                "{HEAD}extends: ../base/base.yaml\nspec:\n  nodePools:\n    - {{ name: train, nodes: 8 }}\n"
            ),
        ),
        (
            "clusters/us-canary.yaml",
            &format!(
                "{HEAD}extends: ../regions/us.yaml\nmetadata: {{ name: us-canary }}\nspec:\n  nodePools:\n    - {{ name: infer, nodes: 1 }}\n"
            ),
        ),
    ]);
    let loaded = load(d.path(), "clusters/us-canary.yaml", Some(d.path())).expect("loads");
    let files: Vec<&str> = loaded.layers.iter().map(|l| l.file.as_str()).collect();
    assert!(files[0].ends_with("regions/us.yaml"), "{files:?}");
    assert!(files[1].ends_with("base/base.yaml"), "{files:?}");
    assert!(!files[1].contains(".."), "names are cleaned: {files:?}");
    let bp = &loaded.blueprint;
    assert_eq!(bp.metadata.name, "us-canary");
    assert_eq!(bp.spec.node_pools[0].nodes, 8);
    assert_eq!(bp.spec.node_pools[1].nodes, 1);
    assert_eq!(loaded.tree.origin("spec.nodePools[0].nodes"), 1);
    assert_eq!(loaded.tree.origin("spec.nodePools[1].nodes"), 0);
    assert_eq!(loaded.tree.origin("spec.nodePools[0].gpu.model"), 2);
    // Without the fleet's root, the file's own directory is the root: `../` leaves it.
    let r = failure(d.path(), "clusters/us-canary.yaml", None);
    assert_eq!(r.findings[0].rule, "GPU180");
    assert!(
        r.findings[0].message.contains("outside the root"),
        "{:?}",
        r.findings
    );
}

#[test]
fn hostile_chains_are_refused_with_the_file_and_line_of_the_extends() {
    let ext = |to: &str| format!("{HEAD}metadata: {{ name: x }}\nextends: {to}\n");
    // A loop.
    let d = dir(&[("a.yaml", &ext("b.yaml")), ("b.yaml", &ext("a.yaml"))]);
    let r = failure(d.path(), "a.yaml", None);
    assert!(r.file.ends_with("b.yaml"), "{}", r.file);
    assert_eq!(r.findings[0].rule, "GPU180");
    assert_eq!(r.findings[0].pos.map(|p| p.line), Some(4));
    assert!(
        r.findings[0].message.contains("loops"),
        "{:?}",
        r.findings[0]
    );
    // Itself.
    let d = dir(&[("a.yaml", &ext("./a.yaml"))]);
    assert!(
        failure(d.path(), "a.yaml", None).findings[0]
            .message
            .contains("loops")
    );
    // Depth: 4 parents load, 5 do not.
    let max = super::max_depth();
    assert_eq!(max, 4);
    let mut files: Vec<(String, String)> = (0..max)
        .map(|i| (format!("l{i}.yaml"), ext(&format!("l{}.yaml", i + 1))))
        .collect();
    files.push((format!("l{max}.yaml"), BASE.to_string()));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let d = dir(&refs);
    assert!(load(d.path(), "l0.yaml", None).is_ok());
    std::fs::write(d.path().join(format!("l{max}.yaml")), ext("deepest.yaml")).unwrap();
    std::fs::write(d.path().join("deepest.yaml"), BASE).unwrap();
    let r = failure(d.path(), "l0.yaml", None);
    assert!(
        r.findings[0].message.contains("deeper than 4"),
        "{:?}",
        r.findings
    );
    assert!(r.file.ends_with(&format!("l{max}.yaml")));
    // `../` out of the root, an absolute path, a missing parent, a directory, a non-text parent.
    let d = dir(&[
        ("fleet/a.yaml", &ext("../outside.yaml")),
        ("outside.yaml", BASE),
    ]);
    let root = d.path().join("fleet");
    assert!(
        failure(d.path(), "fleet/a.yaml", Some(&root)).findings[0]
            .message
            .contains("outside the root")
    );
    for to in [
        "/etc/hostname",
        "missing.yaml",
        "sub",
        "bin.yaml",
        "'[1, 2]'",
        "\"\"",
    ] {
        let d = dir(&[
            ("a.yaml", &ext(to)),
            ("sub/x", ""),
            ("bin.yaml", "\u{0}\u{1}"),
        ]);
        std::fs::write(d.path().join("bin.yaml"), [0xff, 0xfe, 0x00]).unwrap();
        let r = failure(d.path(), "a.yaml", None);
        assert_eq!(r.findings[0].rule, "GPU180", "{to}: {:?}", r.findings);
        assert!(r.findings[0].hint.is_some(), "{to}");
    }
    // A parent that is another kind of file.
    let d = dir(&[
        ("a.yaml", &ext("fleet.yaml")),
        (
            "fleet.yaml",
            "apiVersion: gpuctl.dev/v1alpha1\nkind: Fleet\n",
        ),
    ]);
    let r = failure(d.path(), "a.yaml", None);
    assert_eq!(
        (r.findings[0].rule, r.file.ends_with("fleet.yaml")),
        ("GPU005", true)
    );
    // A parent with broken YAML reports in the parent.
    let d = dir(&[("a.yaml", &ext("b.yaml")), ("b.yaml", "spec: [\n")]);
    let r = failure(d.path(), "a.yaml", None);
    assert_eq!(
        (r.findings[0].rule, r.file.ends_with("b.yaml")),
        ("GPU001", true)
    );
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_out_of_the_root_is_refused_and_one_inside_is_followed() {
    let outside = dir(&[("secret.yaml", BASE)]);
    let d = dir(&[
        ("a.yaml", &format!("{HEAD}extends: link.yaml\n")),
        ("real.yaml", BASE),
    ]);
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        d.path().join("link.yaml"),
    )
    .unwrap();
    let r = failure(d.path(), "a.yaml", None);
    assert!(
        r.findings[0].message.contains("through a symbolic link"),
        "{:?}",
        r.findings
    );
    std::fs::remove_file(d.path().join("link.yaml")).unwrap();
    std::os::unix::fs::symlink(d.path().join("real.yaml"), d.path().join("link.yaml")).unwrap();
    assert!(load(d.path(), "a.yaml", None).is_ok());
}

#[test]
fn a_parent_over_the_size_limit_is_refused_unread() {
    let d = dir(&[("a.yaml", &format!("{HEAD}extends: big.yaml\n"))]);
    let f = std::fs::File::create(d.path().join("big.yaml")).unwrap();
    f.set_len(crate::input::BLUEPRINT.bytes + 1).unwrap();
    let r = failure(d.path(), "a.yaml", None);
    assert_eq!(r.findings[0].rule, "GPU180");
    assert!(
        r.findings[0].message.contains("big.yaml"),
        "{:?}",
        r.findings
    );
}

#[test]
fn standard_input_cannot_extend() {
    let r = crate::blueprint::load_str("<stdin>", &format!("{HEAD}extends: base.yaml\n"))
        .expect_err("refused");
    assert_eq!(r.findings[0].rule, "GPU180");
}

#[test]
fn the_depth_bound_is_the_catalogs() {
    assert_eq!(
        super::max_depth(),
        crate::profiles::Catalog::embedded()
            .limits()
            .fleet
            .max_extends_depth
    );
}

#[test]
fn the_schema_marks_keyed_lists() {
    let schema = crate::blueprint::schema::json();
    let keys = |p: &str| crate::blueprint::schema::list_map_keys(&schema, p);
    assert_eq!(keys("spec.nodePools"), Some(vec!["name".to_string()]));
    assert_eq!(
        keys("spec.nodePools[0].taints"),
        Some(vec!["key".to_string(), "effect".to_string()])
    );
    assert_eq!(
        keys("spec.scheduling.kueue.clusterQueues[3].resources"),
        Some(vec!["pool".to_string()])
    );
    assert_eq!(keys("spec.tenants[0].namespaces"), None);
    let _ = PathBuf::new();
}
