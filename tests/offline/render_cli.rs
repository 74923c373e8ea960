//! `gpuctl render` end to end, template overrides, user chart values, the written tree, and the
//! errors render gives instead of output.

use crate::render_common;

use crate::support::gpuctl::{Gpuctl, TODAY, gpuctl};
use gpuctl_core::render::{RenderError, Templates};
use render_common::{opts, root};

fn dgx() -> String {
    std::fs::read_to_string(root().join("blueprints/dgx-h100-training.yaml")).unwrap()
}

fn try_render(
    text: &str,
    templates: &Templates,
) -> Result<gpuctl_core::render::RenderedSet, RenderError> {
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let loaded = gpuctl_core::blueprint::load_str("t.yaml", text).unwrap();
    let v = gpuctl_core::validate::validate(loaded, catalog, opts())
        .unwrap_or_else(|r| panic!("{:#?}", r.findings));
    gpuctl_core::render::render(&v, catalog, templates)
}

#[test]
fn render_prints_the_objects_as_yaml() {
    let out = gpuctl(&["render", "blueprints/dgx-h100-training.yaml"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("---\napiVersion: v1\nkind: Namespace\n"),
        "{stdout}"
    );
    let set = render_common::render_file(&root().join("blueprints/dgx-h100-training.yaml"));
    assert_eq!(stdout, set.to_yaml());
}

#[test]
fn render_refuses_a_blueprint_with_errors_and_prints_its_findings() {
    let out = gpuctl(&["render", "blueprints/mixed-lab.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("GPU021") && stderr.contains("before rendering"),
        "{stderr}"
    );
}

#[test]
fn render_writes_a_tree_and_replaces_only_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let t = tree.to_str().unwrap();
    let out = gpuctl(&["render", "blueprints/inference-mig.yaml", "-o", t]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "kustomization.yaml",
        "helm/gpu-operator-values.yaml",
        "helm/release.yaml",
        "nodes/node-patches.yaml",
        "runbooks/troubleshooting.md",
        "40-queues/queue_serving-online.yaml",
    ] {
        assert!(tree.join(f).is_file(), "{f} missing");
    }
    let kustomization = std::fs::read_to_string(tree.join("kustomization.yaml")).unwrap();
    for line in kustomization.lines().filter_map(|l| l.strip_prefix("- ")) {
        assert!(tree.join(line).is_file(), "{line} listed but not written");
    }
    let manifest = std::fs::read_to_string(tree.join(".gpuctl-render-manifest")).unwrap();
    assert!(
        manifest.contains("\n40-queues/queue_serving-online.yaml\n"),
        "{manifest}"
    );
    // Files the user adds anywhere in the tree survive a re-render (issue 10).
    let mine = [
        ("README.md", "mine"),
        ("helm/my-extra-values.yaml", "extra: 1\n"),
        (
            "10-foundation/custom-networkpolicy.yaml",
            "kind: NetworkPolicy\n",
        ),
        ("runbooks/team/oncall.md", "# on call\n"),
    ];
    std::fs::create_dir(tree.join("runbooks/team")).unwrap();
    for (f, text) in mine {
        std::fs::write(tree.join(f), text).unwrap();
    }
    let out = gpuctl(&["render", "blueprints/inference-mig.yaml", "-o", t]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (f, text) in mine {
        assert_eq!(std::fs::read_to_string(tree.join(f)).unwrap(), text, "{f}");
    }
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("kept 4 files gpuctl did not write"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing is left beside the tree.
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["tree"]);
    // A non-empty directory that is not a gpuctl tree is refused.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("file"), "x").unwrap();
    let out = gpuctl(&[
        "render",
        "blueprints/inference-mig.yaml",
        "-o",
        other.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
}

#[test]
fn templates_dir_replaces_embedded_templates() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("objects")).unwrap();
    std::fs::write(
        dir.path().join("objects/resourcequota.yaml.j2"),
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: {{ name }}\n  namespace: {{ namespace }}\n  labels:\n    team: {{ tenant.name }}\nspec:\n  hard: {{ hard }}\n",
    )
    .unwrap();
    let templates = Templates::from_dir(dir.path()).unwrap();
    assert_eq!(templates.overridden(), ["objects/resourcequota.yaml.j2"]);
    let set = try_render(&dgx(), &templates).unwrap();
    let rq = set
        .objects
        .iter()
        .find(|o| o.kind == "ResourceQuota")
        .unwrap();
    assert_eq!(rq.manifest["metadata"]["labels"]["team"], "dev");
    // gpuctl's ownership labels are added whatever the template says.
    assert_eq!(
        rq.manifest["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "gpuctl"
    );

    let tree = dir.path().join("tree");
    let out = gpuctl(&[
        "render",
        "blueprints/dgx-h100-training.yaml",
        "--templates",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("team: dev"));
    drop(tree);
}

#[test]
fn misspelt_or_broken_template_overrides_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("objects")).unwrap();
    std::fs::write(dir.path().join("objects/resourcequotas.yaml.j2"), "x").unwrap();
    let err = Templates::from_dir(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("names no template")
            && err.contains("did you mean `objects/resourcequota.yaml.j2`"),
        "{err}"
    );

    std::fs::remove_file(dir.path().join("objects/resourcequotas.yaml.j2")).unwrap();
    std::fs::write(
        dir.path().join("objects/resourcequota.yaml.j2"),
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: {{ tenant.nosuch }}\n",
    )
    .unwrap();
    let templates = Templates::from_dir(dir.path()).unwrap();
    let err = try_render(&dgx(), &templates).unwrap_err();
    assert!(matches!(err, RenderError::Template { .. }), "{err}");
    assert!(
        err.to_string().contains("objects/resourcequota.yaml.j2"),
        "{err}"
    );
}

#[test]
fn user_chart_values_merge_last_and_reach_the_driver_crs() {
    let text = dgx().replacen(
        "    dcgmExporter:\n",
        "    values:\n      driver: { repository: registry.example.com/nvidia }\n      toolkit: { version: v1.20.0 }\n      mig: { strategy: mixed }\n    dcgmExporter:\n",
        1,
    );
    let set = try_render(&text, &Templates::embedded()).unwrap();
    assert_eq!(
        set.helm.values["driver"]["repository"],
        "registry.example.com/nvidia"
    );
    assert_eq!(set.helm.values["driver"]["version"], "580.173.02");
    assert_eq!(set.helm.values["toolkit"]["version"], "v1.20.0");
    let cr = set
        .objects
        .iter()
        .find(|o| o.kind == "NVIDIADriver")
        .unwrap();
    assert_eq!(
        cr.manifest["spec"]["repository"],
        "registry.example.com/nvidia"
    );
}

/// `nodePools[].operands` becomes the operator's per-node labels on exactly that pool's nodes,
/// each set field with its value; the other pool gets none of them.
#[test]
fn pool_operands_render_as_gpu_deploy_node_labels() {
    let text = dgx().replacen(
        "      labels: { gpu.example.com/tier: premium }\n",
        "      labels: { gpu.example.com/tier: premium }\n      operands: { devicePlugin: false, dcgmExporter: true, operatorValidator: false }\n",
        1,
    );
    let set = try_render(&text, &Templates::embedded()).unwrap();
    let labels = |pool: &str| {
        set.node_patches
            .iter()
            .find(|p| p.pool == pool)
            .unwrap_or_else(|| panic!("no patch for {pool}"))
            .labels
            .clone()
    };
    let train = labels("h100-train");
    let deploy: Vec<(&str, &str)> = train
        .iter()
        .filter(|(k, _)| k.starts_with("nvidia.com/gpu.deploy."))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        deploy,
        [
            ("nvidia.com/gpu.deploy.dcgm-exporter", "true"),
            ("nvidia.com/gpu.deploy.device-plugin", "false"),
            ("nvidia.com/gpu.deploy.operator-validator", "false"),
        ]
    );
    assert_eq!(train["gpu.example.com/tier"], "premium");
    assert!(
        !labels("h100-infer")
            .keys()
            .any(|k| k.starts_with("nvidia.com/gpu.deploy.")),
        "a pool without operands leaves the labels to the operator"
    );
    // Without the field the render is what it was: no such label anywhere.
    let plain = try_render(&dgx(), &Templates::embedded()).unwrap();
    assert!(plain.node_patches.iter().all(|p| {
        !p.labels
            .keys()
            .any(|k| k.starts_with("nvidia.com/gpu.deploy."))
    }));
}

#[test]
fn unknown_chart_value_paths_are_errors_naming_the_path() {
    let text = dgx().replacen(
        "    dcgmExporter:\n",
        "    values:\n      drivr: { version: x }\n      dcgmExporter: { serviceMonitor: { intervall: 10s } }\n    dcgmExporter:\n",
        1,
    );
    // Validate reports it first (GPU019, with positions), so render never sees such values.
    let msg = validation_errors(&text, "GPU019");
    assert!(
        msg.contains("`drivr`") && msg.contains("did you mean `driver`"),
        "{msg}"
    );
    assert!(
        msg.contains("`dcgmExporter.serviceMonitor.intervall`"),
        "{msg}"
    );
    assert!(msg.contains("v26.7.0"), "{msg}");
}

/// The error findings of `rule` as text, each with its line; panics when validation passes.
fn validation_errors(text: &str, rule: &str) -> String {
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let loaded = gpuctl_core::blueprint::load_str("t.yaml", text).unwrap();
    let report = gpuctl_core::validate::validate(loaded, catalog, opts()).unwrap_err();
    let found: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.rule == rule)
        .map(|f| {
            assert!(f.pos.is_some(), "{f:?} has no position");
            format!("{} {}", f.path, f.message)
        })
        .collect();
    assert!(!found.is_empty(), "{:#?}", report.findings);
    found.join("\n")
}

#[test]
fn a_release_without_a_key_tree_is_a_clear_error() {
    let text = std::fs::read_to_string(root().join("blueprints/mixed-lab-fixed.yaml"))
        .unwrap()
        .replacen("version: v26.7.0", "version: v26.3.3", 1)
        .replacen("\"580.173.02\"", "\"580.159.04\"", 1);
    let msg = validation_errors(&text, "GPU019");
    assert!(
        msg.contains("v26.3.3") && msg.contains("v25.10.1, v26.7.0"),
        "{msg}"
    );
}

#[test]
fn pools_with_different_mig_strategies_are_refused() {
    let text = dgx();
    // One MIG pool alone is fine whatever its strategy; add a second, `single` one.
    let text = text.replacen(
        "  priorityClasses:",
        "    - name: mig-single\n      selector: { gpuctl.dev/pool: mig-single }\n      nodes: 1\n      gpu: { model: H100-SXM5-80GB, count: 8 }\n      partitioning:\n        mode: mig\n        mig: { strategy: single, layout: { \"1g.10gb\": 7 } }\n\n  priorityClasses:",
        1,
    );
    // Validation stops it first (GPU035); render keeps its own guard for blueprints that reach it
    // another way, but a validated blueprint never does.
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let loaded = gpuctl_core::blueprint::load_str("t.yaml", &text).unwrap();
    let report = gpuctl_core::validate::validate(loaded, catalog, opts()).unwrap_err();
    let f = report
        .findings
        .iter()
        .find(|f| f.rule == "GPU035")
        .unwrap_or_else(|| panic!("{:#?}", report.findings));
    assert!(
        f.message.contains("mig-single") && f.message.contains("h100-infer"),
        "{}",
        f.message
    );
}

/// A snapshot of every file under `dir` (relative path -> content; directories and symlinks by
/// kind), not following symlinks.
fn snapshot(dir: &std::path::Path) -> std::collections::BTreeMap<String, String> {
    fn walk(
        root: &std::path::Path,
        rel: &std::path::Path,
        out: &mut std::collections::BTreeMap<String, String>,
    ) {
        for e in std::fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            let ft = e.file_type().unwrap();
            let value = if ft.is_dir() {
                walk(root, &r, out);
                "<dir>".to_string()
            } else if ft.is_symlink() {
                format!("-> {}", std::fs::read_link(e.path()).unwrap().display())
            } else {
                std::fs::read_to_string(e.path()).unwrap()
            };
            out.insert(r.display().to_string(), value);
        }
    }
    let mut out = Default::default();
    walk(dir, std::path::Path::new(""), &mut out);
    out
}

#[test]
fn issue_10_a_template_override_naming_a_file_outside_the_tree_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let templates = dir.path().join("templates");
    std::fs::create_dir_all(templates.join("objects")).unwrap();
    let tree = dir.path().join("tree");
    for name in ["../../../ESCAPED", "sub/ESCAPED"] {
        std::fs::write(
            templates.join("objects/resourcequota.yaml.j2"),
            format!(
                "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: \"{name}\"\n  namespace: {{{{ namespace }}}}\nspec:\n  hard: {{{{ hard }}}}\n"
            ),
        )
        .unwrap();
        let before = snapshot(dir.path());
        let out = gpuctl(&[
            "render",
            "blueprints/dgx-h100-training.yaml",
            "--templates",
            templates.to_str().unwrap(),
            "-o",
            tree.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        // Render refuses the name as the API server would; the tree writer's own path check
        // (render::tree unit tests) stands behind it.
        assert!(
            stderr.contains("is not a valid Kubernetes name")
                || (stderr.contains("refusing to write")
                    && stderr.contains("name is not a plain file name")),
            "{stderr}"
        );
        assert_eq!(snapshot(dir.path()), before, "{name}");
        assert!(!root().join("ESCAPED").exists());
    }
}

#[test]
fn issue_10_a_failed_rerender_leaves_the_old_tree_and_the_next_one_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let t = tree.to_str().unwrap();
    let render = || gpuctl(&["render", "blueprints/inference-mig.yaml", "-o", t]);
    assert_eq!(render().status.code(), Some(0));
    // A directory where render writes a file (a failure root's permissions cannot cause): the new
    // tree is already half written when the collision is found.
    std::fs::remove_file(tree.join("helm/release.yaml")).unwrap();
    std::fs::create_dir(tree.join("helm/release.yaml")).unwrap();
    std::fs::write(tree.join("helm/release.yaml/notes"), "x").unwrap();
    std::fs::write(tree.join("helm/my-extra-values.yaml"), "extra: 1\n").unwrap();
    let before = snapshot(dir.path());
    let out = render();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`helm/release.yaml` was not written by"),
        "{stderr}"
    );
    assert_eq!(snapshot(dir.path()), before);

    // A run killed while writing its new tree leaves a temporary directory: it does not stop the
    // next run, which removes it.
    std::fs::remove_dir_all(tree.join("helm/release.yaml")).unwrap();
    let leftover = dir.path().join(".tree.gpuctl-new-999999");
    std::fs::create_dir_all(leftover.join("10-foundation")).unwrap();
    std::fs::write(leftover.join("10-foundation/half.yaml"), "apiVers").unwrap();
    let out = render();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("left by an interrupted render"), "{stderr}");
    assert!(!leftover.exists());
    assert!(tree.join("helm/release.yaml").is_file());
    assert_eq!(
        std::fs::read_to_string(tree.join("helm/my-extra-values.yaml")).unwrap(),
        "extra: 1\n"
    );
}

#[test]
fn issue_10_rendering_into_the_working_directory_is_refused_with_what_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let bp = root().join("blueprints/inference-mig.yaml");
    let out = Gpuctl::new(["render", bp.to_str().unwrap(), "-o", tree.to_str().unwrap()])
        .today(TODAY)
        .output();
    assert_eq!(out.status.code(), Some(0));
    let out = Gpuctl::new(["render", bp.to_str().unwrap(), "-o", "."])
        .current_dir(&tree)
        .today(TODAY)
        .output();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("current directory") && stderr.contains("-o tree"),
        "{stderr}"
    );
}

/// `scheduling.volcano.install: helm` renders Volcano's release (chart `volcano` of Volcano's Helm
/// repository at the chart version of the declared release, in `volcano-system`, the blueprint's
/// values) and its values document; `install: none` renders none, and a Kueue blueprint marks
/// Volcano undeclared (a release gpuctl installed for it is uninstalled).
#[test]
fn volcano_install_helm_renders_its_release_and_values() {
    let text = std::fs::read_to_string(root().join("blueprints/inference-mig.yaml")).unwrap();
    assert!(text.contains("    volcano:\n      version: v1.15.1\n"));
    let helm = text.replace(
        "    volcano:\n      version: v1.15.1\n",
        "    volcano:\n      version: v1.15.1\n      install: helm\n      values: { custom: { scheduler_replicas: 2 } }\n",
    );
    let set = try_render(&helm, &Templates::embedded()).unwrap();
    let r: Vec<_> = set
        .releases
        .iter()
        .filter(|r| r.stack == gpuctl_core::render::Stack::Volcano)
        .collect();
    assert_eq!(r.len(), 1, "{:?}", set.releases);
    let r = r[0];
    assert_eq!(
        (
            r.release.as_str(),
            r.chart.as_str(),
            r.version.as_str(),
            r.namespace.as_str()
        ),
        ("volcano", "volcano", "1.15.1", "volcano-system")
    );
    assert_eq!(
        r.values,
        serde_json::json!({"custom": {"scheduler_replicas": 2}})
    );
    let doc = &set.documents[gpuctl_core::render::volcano::VOLCANO_VALUES];
    assert!(
        doc.contains("helm upgrade --install volcano volcano --repo https://volcano-sh.github.io/helm-charts --version 1.15.1 --namespace volcano-system")
            && doc.ends_with("custom:\n  scheduler_replicas: 2\n"),
        "{doc}"
    );
    assert!(
        !set.undeclared
            .contains(&gpuctl_core::render::Stack::Volcano)
    );
    let none = try_render(&text, &Templates::embedded()).unwrap();
    assert!(
        none.releases
            .iter()
            .all(|r| r.stack != gpuctl_core::render::Stack::Volcano)
    );
    assert!(
        !none
            .documents
            .contains_key(gpuctl_core::render::volcano::VOLCANO_VALUES)
    );
    let kueue = render_common::render_file(&root().join("blueprints/dgx-h100-training.yaml"));
    assert!(
        kueue
            .undeclared
            .contains(&gpuctl_core::render::Stack::Volcano)
    );
}
