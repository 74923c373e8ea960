//! Issue 31: what `gpuctl fleet render` writes for a GitOps engine, against the real parts that
//! can run here (docs/fleet.md "GitOps"): the Argo CD v3.5.1 ApplicationSet and Application CRDs and
//! the Flux v2.9.4 Kustomization CRD, installed server-side into a fresh harness of this test's own
//! (CRDs are cluster-wide, so the shared harness is left alone; this test needs only the harness
//! binaries, not the shared cluster), accept gpuctl's ApplicationSet and
//! Kustomizations in a server-side dry run with strict field validation (and refuse them when a
//! required field is dropped, so the check can fail); and `kubectl kustomize DIR/<cluster>` (the
//! kustomize inside the harness's kubectl, what Argo CD's repo-server does with a directory holding
//! `kustomization.yaml`) yields exactly gpuctl's objects for each cluster.
//!
//! Not run here: Argo CD's controllers (3.x does not build from Go modules; docs/fleet.md).
//! Flux's kustomize-controller applies a rendered tree in `flux_apply.rs`.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use gpuctl_test_skip::needs_test_cluster;
use serde_json::Value;
use support::fresh::FreshCluster;
use support::gpuctl::{Gpuctl, TODAY};

const UPSTREAM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/upstream-gitops");

fn shared_gitops() -> PathBuf {
    std::env::var_os("GPUCTL_SHARED")
        .map(|s| PathBuf::from(s).join("upstream-gitops"))
        .unwrap_or_else(|| PathBuf::from(UPSTREAM))
}

struct Kubectl {
    bin: String,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut c = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        if let Some(text) = stdin {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        drop(c.stdin.take());
        c.wait_with_output().unwrap()
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let o = self.run(args, stdin);
        assert!(
            o.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    }
}

fn render(fleet: &str, dir: &Path) {
    let o = Gpuctl::new(["fleet", "render", fleet, "-o"])
        .arg(dir)
        .today(TODAY)
        .output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The documents of a multi-document YAML stream.
fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter_map(|d| serde_saphyr::from_str::<Value>(d).ok())
        .filter(|v| v.is_object())
        .collect()
}

/// Objects by (apiVersion, kind, namespace, name); panics on a duplicate.
fn by_id(docs: Vec<Value>) -> BTreeMap<(String, String, String, String), Value> {
    let mut out = BTreeMap::new();
    for d in docs {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let id = (
            s(&d["apiVersion"]),
            s(&d["kind"]),
            s(&d["metadata"]["namespace"]),
            s(&d["metadata"]["name"]),
        );
        assert!(out.insert(id.clone(), d).is_none(), "{id:?} twice");
    }
    out
}

#[needs_test_cluster]
#[test]
fn gitops_objects_pass_the_real_crds_and_kustomize_builds_exactly_the_rendered_objects() {
    let fresh = FreshCluster::up_with("gitops", &["--without-kueue", "--without-volcano"]);
    let k = Kubectl {
        bin: fresh.var("GPUCTL_KUBECTL"),
        kubeconfig: fresh.kubeconfig(),
    };
    let up = shared_gitops();
    let crds = [
        up.join("argo-cd/v3.5.1/crds/application-crd.yaml"),
        up.join("argo-cd/v3.5.1/crds/applicationset-crd.yaml"),
        up.join("flux/v2.9.4/crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml"),
    ];
    for crd in &crds {
        k.ok(
            &["apply", "--server-side", "-f", crd.to_str().unwrap()],
            None,
        );
    }
    // `kubectl wait` fails until the API server has set the first condition: retry.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let wait = [
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/applications.argoproj.io",
        "crd/applicationsets.argoproj.io",
        "crd/kustomizations.kustomize.toolkit.fluxcd.io",
    ];
    while !k.run(&wait, None).status.success() {
        assert!(
            std::time::Instant::now() < deadline,
            "the Argo CD and Flux CRDs did not become Established"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    for ns in ["argocd", "flux-system"] {
        k.ok(&["create", "namespace", ns], None);
    }
    let d = tempfile::tempdir().unwrap();
    let (argo, flux) = (d.path().join("argo"), d.path().join("flux"));
    render("blueprints/fleet/fleet-argocd.yaml", &argo);
    render("blueprints/fleet/fleet-flux.yaml", &flux);

    // Accepted by the real schemas, strict field validation: no unknown or misplaced field.
    let dry = |file: &Path| -> Value {
        let args = [
            "create",
            "--dry-run=server",
            "--validate=strict",
            "-o",
            "json",
            "-f",
        ];
        let file = file.to_str().unwrap();
        serde_json::from_str(&k.ok(&[&args[..], &[file]].concat(), None)).unwrap()
    };
    let appset = argo.join("argocd/applicationset.yaml");
    let out = dry(&appset);
    assert_eq!(out["kind"], "ApplicationSet");
    assert_eq!(out["spec"]["strategy"]["type"], "RollingSync");
    let mut kustomizations = 0;
    for e in std::fs::read_dir(flux.join("flux")).unwrap() {
        let p = e.unwrap().path();
        let out = dry(&p);
        assert_eq!(out["kind"], "Kustomization");
        assert_eq!(out["spec"]["prune"], true);
        kustomizations += 1;
    }
    assert_eq!(kustomizations, 4);
    // And refused without a required field or with a misplaced one: the check can fail.
    let text = std::fs::read_to_string(flux.join("flux/hub.yaml")).unwrap();
    let o = k.run(
        &["create", "--dry-run=server", "-f", "-"],
        Some(&text.replace("  prune: true\n", "")),
    );
    assert!(
        !o.status.success(),
        "a Kustomization without prune was accepted"
    );
    let text = std::fs::read_to_string(&appset).unwrap();
    let o = k.run(
        &["create", "--dry-run=server", "--validate=strict", "-f", "-"],
        Some(&text.replace("rollingSync:", "rollingSyncs:")),
    );
    assert!(!o.status.success(), "a misspelt rollingSync was accepted");

    // kustomize builds exactly the objects gpuctl rendered for each cluster.
    for cluster in ["hub", "us-canary", "us-east", "eu-onprem"] {
        let dir = argo.join(cluster);
        let built = by_id(documents(
            &k.ok(&["kustomize", dir.to_str().unwrap()], None),
        ));
        let kz: Value = serde_saphyr::from_str(
            &std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap(),
        )
        .unwrap();
        let ours = by_id(
            kz["resources"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| {
                    documents(&std::fs::read_to_string(dir.join(r.as_str().unwrap())).unwrap())
                })
                .collect(),
        );
        assert!(!ours.is_empty());
        assert_eq!(
            built.keys().collect::<Vec<_>>(),
            ours.keys().collect::<Vec<_>>(),
            "{cluster}: the same objects"
        );
        for (id, v) in &ours {
            assert_eq!(&built[id], v, "{cluster}: {id:?}");
        }
        eprintln!(
            "{cluster}: kustomize built the {} rendered objects",
            ours.len()
        );
    }
}
