//! Issue 10 regressions: blueprints from pull requests that used to validate and then escape the
//! output directory, crash, overflow, or fail only in render. Each test fails on the code before
//! the fix; the generated corpus (tests/hostile_corpus.rs) covers the same ground at random.

use crate::render_common;

use crate::support::gpuctl::Gpuctl;
use gpuctl_core::located::Severity;
use gpuctl_core::render::{RenderError, Templates};
use render_common::{opts, root};

fn dgx() -> String {
    std::fs::read_to_string(root().join("blueprints/dgx-h100-training.yaml")).unwrap()
}

fn errors(text: &str) -> Vec<(String, String, Option<gpuctl_core::blueprint::yaml::Pos>)> {
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let report = match gpuctl_core::blueprint::load_str("t.yaml", text) {
        Ok(loaded) => gpuctl_core::validate::check(&loaded, catalog, opts()),
        Err(report) => report,
    };
    report
        .findings
        .into_iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| (f.rule.to_string(), f.path, f.pos))
        .collect()
}

fn edited(from: &str, to: &str) -> String {
    let text = dgx();
    assert!(
        text.contains(from),
        "the example no longer contains {from:?}"
    );
    text.replacen(from, to, 1)
}

#[test]
fn operator_namespace_with_a_path_is_refused_with_its_position() {
    let e = errors(&edited(
        "namespace: gpu-operator",
        "namespace: \"/../../../../../../../../tmp/x/ESCAPED\"",
    ));
    let f = e
        .iter()
        .find(|(_, path, _)| path == "spec.gpuOperator.namespace")
        .unwrap_or_else(|| panic!("{e:#?}"));
    assert_eq!(f.0, "GPU010");
    assert_eq!(f.2.map(|p| p.line), Some(18));
}

#[test]
fn a_template_override_cannot_name_an_object_with_a_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("objects")).unwrap();
    std::fs::write(
        dir.path().join("objects/priorityclass.yaml.j2"),
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: ../../../../tmp/ESCAPED-{{ priorityClass.name }}\nvalue: {{ priorityClass.value }}\n",
    )
    .unwrap();
    let templates = Templates::from_dir(dir.path()).unwrap();
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let loaded = gpuctl_core::blueprint::load_str("t.yaml", &dgx()).unwrap();
    let v = gpuctl_core::validate::validate(loaded, catalog, opts()).unwrap();
    match gpuctl_core::render::render(&v, catalog, &templates) {
        Err(RenderError::TemplateOutput { template, message }) => {
            assert_eq!(template, "objects/priorityclass.yaml.j2");
            assert!(message.contains("not a valid Kubernetes name"), "{message}");
        }
        other => panic!("expected a template output error, got {other:?}"),
    }
}

#[test]
fn huge_counts_are_bounded_before_anything_is_built_from_them() {
    // 4294967295 GPUs on a MIG pool used to allocate a per-GPU layout of 137 GB.
    let text = edited(
        "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      partitioning:",
        "      gpu: { model: H100-SXM5-80GB, count: 4294967295 }\n      partitioning:",
    );
    let e = errors(&text);
    assert!(
        e.iter()
            .any(|(r, p, _)| r == "GPU018" && p == "spec.nodePools[1].gpu.count"),
        "{e:#?}"
    );
    // nodes x count x replicas of 2^32-1 used to wrap and claim "the pools have 63".
    let text = edited("nodes: 16", "nodes: 4294967295");
    let e = errors(&text);
    assert!(
        e.iter()
            .any(|(r, p, _)| r == "GPU018" && p == "spec.nodePools[0].nodes"),
        "{e:#?}"
    );
    assert!(
        !e.iter().any(|(r, _, _)| r == "GPU053" || r == "GPU055"),
        "no capacity claims from counts out of bounds: {e:#?}"
    );
}

#[test]
fn wrong_values_are_refused() {
    for (from, to, rule) in [
        ("pods: 50 }", "pods: -1 }", "GPU051"),
        (
            "borrowingLimit: { nvidia.com/gpu: 10 }",
            "borrowingLimit: { nvidia.com/gpu: -10 }",
            "GPU051",
        ),
        ("memory: 2Ti }", "memory: \"-1\" }", "GPU051"),
        ("fairSharingWeight: 50", "fairSharingWeight: -80", "GPU070"),
        (
            "fairSharingWeight: 50",
            "fairSharingWeight: \"x\"",
            "GPU070",
        ),
        ("version: v0.19.2", "version: latest", "GPU076"),
        ("version: v0.19.2", "version: .nan", "GPU076"),
        ("  name: train-prod\n", "  - x\n", "GPU003"),
        (
            "gpu: { model: H100-SXM5-80GB, count: 8 }",
            "gpu: [H100-SXM5-80GB, 8]",
            "GPU003",
        ),
        (
            "  name: train-prod\n",
            "  name: !!python/object x\n",
            "GPU001",
        ),
        ("nodes: 16", "nodes: !!bool 16", "GPU001"),
        ("apiVersion:", "%YAML 9.9\n---\napiVersion:", "GPU001"),
        (
            "labels: { gpu.example.com/tier: premium }",
            "labels: { 5: premium }",
            "GPU001",
        ),
        (
            "        - { key: nvidia.com/gpu, value: present, effect: NoSchedule }\n\n",
            "        - { key: nvidia.com/gpu, value: present, effect: NoSchedule }\n        - { key: nvidia.com/gpu, value: present, effect: NoSchedule }\n\n",
            "GPU011",
        ),
        (
            "defaults: { nvidia.com/gpu: 1 }\n      cuda: [\"12.8\", \"13.0\"]",
            "defaults: { n4idia.com/gpu: 1 }\n      cuda: [\"12.8\", \"13.0\"]",
            "GPU056",
        ),
        (
            "namespaces: [dev-test]",
            "namespaces: [gpu-operator]",
            "GPU011",
        ),
        (
            "      serviceMonitor: true\n\n  nodePools",
            "      serviceMonitor: true\n    values: { drivr: { enabled: false } }\n\n  nodePools",
            "GPU019",
        ),
    ] {
        let e = errors(&edited(from, to));
        assert!(
            e.iter().any(|(r, _, pos)| r == rule && pos.is_some()),
            "{to:?} should give {rule} with a position: {e:#?}"
        );
    }
}

#[test]
fn columns_agree_after_a_byte_order_mark_and_multibyte_text() {
    let text = format!(
        "\u{feff}{}",
        edited(
            "value: present, effect: NoSchedule",
            "value: \"ééé\", effect: NoSchedule, efect: x"
        )
    );
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let report = match gpuctl_core::blueprint::load_str("t.yaml", &text) {
        Ok(loaded) => gpuctl_core::validate::check(&loaded, catalog, opts()),
        Err(report) => report,
    };
    let f = report
        .findings
        .iter()
        .find(|f| f.rule == "GPU002")
        .unwrap_or_else(|| panic!("{:#?}", report.findings));
    let pos = f.pos.unwrap();
    assert_eq!((pos.line, pos.column), (58, 68), "the BOM is not a column");
    let human = gpuctl::output::human(&[report], gpuctl::settings::Style::Plain);
    assert!(human.contains("[t.yaml:58:68]"), "{human}");
}

#[test]
fn names_validate_accepts_render_accepts() {
    // A 63-character tenant gives a 69-character ResourceQuota name: a valid DNS-1123 subdomain
    // (the API server limits the whole name to 253, not each dot-separated part to 63).
    let tenant = "d".repeat(63);
    let text = edited("    - name: dev\n", &format!("    - name: {tenant}\n"));
    assert!(errors(&text).is_empty(), "{:#?}", errors(&text));
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let v = gpuctl_core::validate::validate(
        gpuctl_core::blueprint::load_str("t.yaml", &text).unwrap(),
        catalog,
        opts(),
    )
    .unwrap();
    let set = gpuctl_core::render::render(&v, catalog, &Templates::embedded()).unwrap();
    assert!(
        set.objects
            .iter()
            .any(|o| o.kind == "ResourceQuota" && o.name == format!("{tenant}-quota"))
    );
}

/// Issue 31: `extends` chains from a pull request, through the real binary (`validate`, `render`
/// and `plan --offline`): loops, depth 5, `../` out of the root, a symbolic link out of it, a huge
/// parent. Each is exit 1 with a finding that names the file and line of the `extends` and what
/// to do, never a panic, and nothing outside the root is read.
#[test]
fn hostile_extends_chains_are_refused_with_the_file_and_line() {
    let head = "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nmetadata: { name: x }\n";
    let ext = |to: &str| format!("{head}extends: {to}\n");
    let base = std::fs::read_to_string(root().join("blueprints/mixed-lab-fixed.yaml")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.yaml"), &base).unwrap();
    let d = tempfile::tempdir().unwrap();
    let w = |p: &str, text: &str| {
        let path = d.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    w("loop/a.yaml", &ext("b.yaml"));
    w("loop/b.yaml", &ext("a.yaml"));
    for i in 0..5 {
        w(
            &format!("deep/l{i}.yaml"),
            &ext(&format!("l{}.yaml", i + 1)),
        );
    }
    w("deep/l5.yaml", &base);
    w("escape/a.yaml", &ext("../escape-target.yaml"));
    w("escape-target.yaml", &base);
    w("link/a.yaml", &ext("base.yaml"));
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        d.path().join("link/base.yaml"),
    )
    .unwrap();
    w("huge/a.yaml", &ext("big.yaml"));
    std::fs::File::create(d.path().join("huge/big.yaml"))
        .unwrap()
        .set_len(gpuctl_core::input::BLUEPRINT.bytes + 1)
        .unwrap();
    let cases = [
        ("loop/a.yaml", "b.yaml:4", "loops"),
        ("deep/l0.yaml", "l4.yaml:4", "deeper than 4"),
        ("escape/a.yaml", "a.yaml:4", "outside the root"),
        #[cfg(unix)]
        ("link/a.yaml", "a.yaml:4", "through a symbolic"),
        ("huge/a.yaml", "a.yaml:4", "big.yaml"),
    ];
    for (file, at, says) in cases {
        for cmd in [&["validate"][..], &["render"], &["plan", "--offline"]] {
            let out = Gpuctl::new(cmd)
                .arg(d.path().join(file))
                .no_color()
                .output();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(1), "{cmd:?} {file}: {text}");
            assert!(
                text.contains("GPU180") && text.contains(says),
                "{cmd:?} {file}: {text}"
            );
            assert!(text.contains(at), "{cmd:?} {file}: names {at}: {text}");
            assert!(
                text.contains("help:"),
                "{cmd:?} {file}: says what to do: {text}"
            );
            assert!(!text.contains("panicked"), "{text}");
        }
    }
}
