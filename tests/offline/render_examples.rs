//! Golden tests: the render of every example blueprint that validates, snapshotted in
//! `golden/render/` (objects as YAML, Helm values, node patches, runbook). Review changes with
//! `cargo insta review`; a snapshot no blueprint produces is an error.

use crate::render_common;

use render_common::{blueprints, render_file, root, valid_blueprints};

fn stem(p: &std::path::Path) -> String {
    p.file_stem().unwrap().to_string_lossy().to_string()
}

const SUFFIXES: [&str; 4] = ["yaml", "values", "nodes", "runbook"];

#[test]
fn every_valid_example_matches_its_golden_render() {
    for path in valid_blueprints() {
        let set = render_file(&path);
        let name = stem(&path);
        let runbook = set
            .documents
            .get(gpuctl_core::render::TROUBLESHOOTING_RUNBOOK)
            .cloned()
            .unwrap_or_default();
        insta::with_settings!({
            snapshot_path => root().join("golden/render"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(format!("{name}.yaml"), set.to_yaml());
            insta::assert_snapshot!(format!("{name}.values"), set.helm_values_yaml());
            insta::assert_snapshot!(format!("{name}.nodes"), set.node_patches_yaml());
            insta::assert_snapshot!(format!("{name}.runbook"), runbook);
        });
    }
}

#[test]
fn no_unreferenced_golden_files() {
    let stems: Vec<String> = valid_blueprints().iter().map(|p| stem(p)).collect();
    for entry in std::fs::read_dir(root().join("golden/render")).expect("golden/render") {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        let referenced = stems
            .iter()
            .any(|s| SUFFIXES.iter().any(|x| name == format!("{s}.{x}.snap")));
        assert!(
            referenced,
            "golden/render/{name} belongs to no valid blueprint: delete it"
        );
    }
}

#[test]
fn render_refuses_the_broken_example_blueprint() {
    let broken = blueprints()
        .into_iter()
        .find(|p| p.ends_with("mixed-lab.yaml"))
        .expect("blueprints/mixed-lab.yaml");
    let text = std::fs::read_to_string(&broken).unwrap();
    let loaded = gpuctl_core::blueprint::load_str("mixed-lab.yaml", &text).unwrap();
    let report = gpuctl_core::validate::validate(
        loaded,
        gpuctl_core::profiles::Catalog::embedded(),
        render_common::opts(),
    )
    .expect_err("mixed-lab.yaml has errors on purpose");
    assert!(gpuctl::has_errors(&report));
}

#[test]
fn rendering_is_deterministic() {
    for path in valid_blueprints() {
        let a = render_file(&path);
        let b = render_file(&path);
        assert_eq!(a.to_yaml(), b.to_yaml(), "{}", path.display());
        assert_eq!(a, b, "{}", path.display());
    }
}

/// Large sets are parsed on several threads; the result must not depend on it.
#[test]
fn large_renders_are_deterministic() {
    let text = gpuctl_core::testgen::blueprint(16, 150, 2);
    let a = render_common::render_text("gen.yaml", &text);
    let b = render_common::render_text("gen.yaml", &text);
    assert!(a.objects.len() > 1000, "{}", a.objects.len());
    assert_eq!(a, b);
    assert!(
        a.objects
            .windows(2)
            .all(|w| w[0].sort_key() < w[1].sort_key())
    );
}

/// Every string of a rendered value, manifest or document.
fn strings<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match v {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The air-gapped example: the chart comes from the archive beside the blueprint, every image
/// repository the values and NVIDIADriver CRs name is the mirror's, and nothing rendered (values,
/// objects, runbooks) names a public registry or NVIDIA's Helm repository.
#[test]
fn the_air_gapped_example_names_no_public_registry() {
    const PUBLIC: [&str; 7] = [
        "nvcr.io",
        "registry.k8s.io",
        "docker.io",
        "ghcr.io",
        "quay.io",
        "helm.ngc.nvidia.com",
        "gcr.io",
    ];
    const MIRROR: &str = "registry.internal.example:5000/nvidia-mirror/";
    let set = render_file(&root().join("blueprints/air-gapped.yaml"));
    assert_eq!(
        set.helm.source,
        gpuctl_core::render::ChartSource::Path {
            path: "charts/gpu-operator-v26.7.0.tgz".into(),
            resolved: None,
            digest: None,
        }
    );
    let mut all = Vec::new();
    strings(&set.helm.values, &mut all);
    for o in &set.objects {
        strings(&o.manifest, &mut all);
    }
    all.extend(set.documents.values().map(String::as_str));
    for s in &all {
        for public in PUBLIC {
            assert!(!s.contains(public), "`{public}` in rendered output: {s}");
        }
    }
    // Every image repository of the chart (22 in v26.7.0 with node-feature-discovery's), mirrored.
    let release = gpuctl_core::profiles::chart::chart_release("v26.7.0").unwrap();
    let mut mirrored = 0;
    for (path, default) in release.image_repositories() {
        let pointer = format!("/{}", path.replace('.', "/"));
        let v = set.helm.values.pointer(&pointer).and_then(|v| v.as_str());
        if default.is_empty() {
            continue;
        }
        assert!(v.is_some_and(|v| v.starts_with(MIRROR)), "{path}: {v:?}");
        mirrored += 1;
    }
    assert!(mirrored >= 20, "{mirrored} repositories mirrored");
    let driver = set
        .objects
        .iter()
        .find(|o| o.kind == "NVIDIADriver")
        .expect("a driver CR");
    assert_eq!(
        driver.manifest["spec"]["repository"],
        format!("{MIRROR}nvidia")
    );
    assert_eq!(
        driver.manifest["spec"]["imagePullSecrets"],
        serde_json::json!(["internal-mirror-pull"])
    );
    assert_eq!(
        set.helm.values["node-feature-discovery"]["imagePullSecrets"],
        serde_json::json!([{"name": "internal-mirror-pull"}])
    );
}
