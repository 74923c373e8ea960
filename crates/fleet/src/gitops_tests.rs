//! GPU190–GPU192, each with a failing and a passing fleet file; the ApplicationSet and
//! Kustomizations for a fleet; Flux's substitution opt-out on objects holding `${`.

use super::super::{FleetReport, check_path, load};
use super::*;
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::validate::Options;

const BASE: &str = include_str!("../../../blueprints/mixed-lab-fixed.yaml");

const FLEET: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: Fleet
metadata: { name: f }
spec:
  clusters:
    - { name: a, blueprint: a.yaml, context: ctx-a, labels: { region: us } }
    - { name: b, blueprint: a.yaml, labels: { region: us } }
    - { name: c, blueprint: a.yaml, context: ctx-c, labels: { region: eu } }
  waves:
    - { name: canary, clusters: [a] }
    - { name: us, selector: { matchLabels: { region: us } }, maxParallel: 2 }
    - { name: rest, selector: {} }
";

const ARGO: &str = "  gitops: { engine: argocd, repoURL: \"https://git.example.com/fleet.git\", revision: main, path: rendered, argocd: { project: gpu, namespace: argocd } }\n";
const FLUX: &str = "  gitops: { engine: flux, path: rendered/, flux: { namespace: flux-system, sourceRef: { kind: GitRepository, name: fleet }, interval: 5m } }\n";

fn run(text: &str) -> (tempfile::TempDir, FleetReport) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.yaml"), BASE).unwrap();
    std::fs::write(d.path().join("fleet.yaml"), text).unwrap();
    let opts = Options {
        today: jiff::civil::date(2026, 12, 3),
    };
    let r = check_path(&d.path().join("fleet.yaml"), Catalog::embedded(), opts).unwrap();
    (d, r)
}

fn fleet(text: &str) -> Fleet {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.yaml"), BASE).unwrap();
    let l = load(
        &d.path().join("fleet.yaml"),
        text.as_bytes().to_vec(),
        Catalog::embedded(),
    )
    .unwrap();
    assert!(l.report.findings.is_empty(), "{:#?}", l.report.findings);
    l.fleet
}

/// (rule, edit from, to, path of the finding); both valid sections pass without the edit.
#[test]
fn every_gitops_rule_fails_its_case_and_passes_the_valid_sections() {
    for section in [ARGO, FLUX] {
        let (_d, r) = run(&format!("{FLEET}{section}"));
        assert!(r.fleet.findings.is_empty(), "{:#?}", r.fleet.findings);
    }
    for (rule, section, from, to, path) in cases() {
        let text = format!("{FLEET}{section}");
        assert!(text.contains(from), "{from}");
        let (_d, r) = run(&text.replacen(from, to, 1));
        let got: Vec<(&str, String)> = r
            .fleet
            .findings
            .iter()
            .map(|f| (f.rule, f.path.clone()))
            .collect();
        assert!(
            got.contains(&(rule, path.to_string())),
            "{rule} at {path} for {to:?}: {got:?}"
        );
        assert!(
            r.fleet
                .findings
                .iter()
                .all(|f| f.pos.is_some() && f.hint.is_some())
        );
    }
    // A cluster named `argocd` is fine for Flux; Argo CD's days are not Flux's business.
    let (_d, r) = run(&format!("{FLEET}{FLUX}").replacen("name: c,", "name: argocd,", 1));
    assert!(r.fleet.findings.is_empty(), "{:#?}", r.fleet.findings);
    assert!(is_go_duration("1h30m") && is_go_duration("1.5s") && is_go_duration("250ms"));
    assert!(
        !is_go_duration("")
            && !is_go_duration("10")
            && !is_go_duration("1d")
            && !is_go_duration("m")
    );
}

#[test]
fn the_applicationset_has_one_element_per_cluster_and_one_rolling_step_per_wave() {
    let f = fleet(&format!("{FLEET}{ARGO}"));
    let g = f.spec.gitops.clone().unwrap();
    let a = applicationset(&f, &g);
    let elements = &a["spec"]["generators"][0]["list"]["elements"];
    assert_eq!(
        elements,
        &json!([
            { "cluster": "a", "destination": "ctx-a", "path": "rendered/a", "wave": "canary" },
            { "cluster": "b", "destination": "b", "path": "rendered/b", "wave": "us" },
            { "cluster": "c", "destination": "ctx-c", "path": "rendered/c", "wave": "rest" },
        ])
    );
    let steps = &a["spec"]["strategy"]["rollingSync"]["steps"];
    assert_eq!(steps.as_array().unwrap().len(), 3);
    assert_eq!(steps[1]["matchExpressions"][0]["values"], json!(["us"]));
    assert_eq!(steps[1]["maxUpdate"], json!(2));
    assert!(steps[0].get("maxUpdate").is_none());
    let spec = &a["spec"]["template"]["spec"];
    assert!(spec["syncPolicy"].get("automated").is_none());
    assert_eq!(spec["source"]["targetRevision"], "main");
    assert_eq!(spec["project"], "gpu");
    let files = files(&f, &g);
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].0, "argocd/applicationset.yaml");
    assert_eq!(files, super::files(&f, &g), "deterministic");
}

#[test]
fn flux_gets_one_kustomization_per_cluster_with_a_secret_name_and_no_post_build() {
    let f = fleet(&format!("{FLEET}{FLUX}"));
    let g = f.spec.gitops.clone().unwrap();
    let ks = kustomizations(&f, &g);
    assert_eq!(ks.len(), 3);
    let (name, k) = &ks[1];
    assert_eq!(name, "b");
    assert_eq!(k["spec"]["path"], "./rendered/b");
    assert_eq!(k["spec"]["prune"], true);
    assert_eq!(k["spec"]["interval"], "5m");
    assert_eq!(
        k["spec"]["kubeConfig"]["secretRef"],
        json!({ "name": "b-kubeconfig" })
    );
    assert_eq!(k["metadata"]["labels"][WAVE_LABEL], "us");
    assert!(k["spec"].get("postBuild").is_none());
    let paths: Vec<String> = files(&f, &g).into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["flux/a.yaml", "flux/b.yaml", "flux/c.yaml"]);
    // Without waves every cluster is in `all`; path `""` is the repository root.
    let mut f2 = f.clone();
    f2.spec.waves.clear();
    let mut g2 = g.clone();
    g2.path = String::new();
    let ks = kustomizations(&f2, &g2);
    assert_eq!(ks[0].1["spec"]["path"], "./a");
    assert_eq!(ks[0].1["metadata"]["labels"][WAVE_LABEL], "all");
}

#[test]
fn objects_holding_a_substitution_are_annotated_and_no_other() {
    let v = gpuctl_pipeline::validate::validate(
        gpuctl_model::blueprint::load_str("a.yaml", BASE).unwrap(),
        Catalog::embedded(),
        Options {
            today: jiff::civil::date(2026, 12, 3),
        },
    )
    .unwrap();
    let mut set = gpuctl_pipeline::render::render(
        &v,
        Catalog::embedded(),
        &gpuctl_pipeline::render::Templates::embedded(),
    )
    .unwrap();
    // What render emits today holds no `${`: nothing is annotated.
    let before = set.clone();
    assert_eq!(disable_substitution(&mut set), 0);
    assert_eq!(set, before);
    set.objects[0].manifest["data"] = json!({ "script": "echo ${HOME}" });
    let n = set.objects.len();
    set.objects[n - 1].manifest["metadata"]["annotations"] = json!({ "x": "y" });
    set.objects[n - 1].manifest["metadata"]["labels"] = json!({ "${k}": "v" });
    assert_eq!(disable_substitution(&mut set), 2);
    for o in [&set.objects[0], &set.objects[n - 1]] {
        assert_eq!(
            o.manifest["metadata"]["annotations"][SUBSTITUTE_ANNOTATION],
            "disabled"
        );
    }
    assert_eq!(
        set.objects[n - 1].manifest["metadata"]["annotations"]["x"],
        "y"
    );
    assert!(set.objects[1..n - 1].iter().all(|o| {
        o.manifest["metadata"]
            .get("annotations")
            .is_none_or(|a| a.get(SUBSTITUTE_ANNOTATION).is_none())
    }));
}

/// (rule, section, edit from, to, path of the finding).
fn cases() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
)> {
    vec![
        (
            "GPU190",
            ARGO,
            "https://git",
            "https://bot:ghp_x@git",
            "spec.gitops.repoURL",
        ),
        (
            "GPU190",
            ARGO,
            "repoURL: \"https://git.example.com/fleet.git\", ",
            "",
            "spec.gitops.engine",
        ),
        (
            "GPU190",
            ARGO,
            "revision: main",
            "revision: \" \"",
            "spec.gitops.revision",
        ),
        (
            "GPU190",
            ARGO,
            "revision: main",
            "revision: \"{{.x}}\"",
            "spec.gitops.revision",
        ),
        (
            "GPU190",
            ARGO,
            "path: rendered",
            "path: ../rendered",
            "spec.gitops.path",
        ),
        (
            "GPU190",
            FLUX,
            "path: rendered/",
            "path: /rendered",
            "spec.gitops.path",
        ),
        (
            "GPU190",
            FLUX,
            "path: rendered/",
            "path: \"rendered/{{.cluster}}\"",
            "spec.gitops.path",
        ),
        (
            "GPU191",
            ARGO,
            "argocd: {",
            "flux: { interval: 5m }, argocd: {",
            "spec.gitops.flux",
        ),
        (
            "GPU191",
            ARGO,
            "project: gpu",
            "project: GPU_team",
            "spec.gitops.argocd.project",
        ),
        (
            "GPU191",
            ARGO,
            "name: canary",
            "name: Canary_1",
            "spec.waves[0].name",
        ),
        (
            "GPU191",
            FLUX,
            "interval: 5m",
            "interval: 1d",
            "spec.gitops.flux.interval",
        ),
        (
            "GPU191",
            FLUX,
            "kind: GitRepository",
            "kind: HelmRepository",
            "spec.gitops.flux.sourceRef.kind",
        ),
        (
            "GPU191",
            FLUX,
            "sourceRef: { kind: GitRepository, name: fleet }, ",
            "",
            "spec.gitops",
        ),
        (
            "GPU191",
            FLUX,
            "namespace: flux-system",
            "namespace: flux.system",
            "spec.gitops.flux.namespace",
        ),
        (
            "GPU192",
            FLUX,
            "name: c,",
            "name: flux,",
            "spec.clusters[2].name",
        ),
    ]
}
