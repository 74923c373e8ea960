//! How `gpuctl apply` runs helm, with the real helm (v3.22.0, the harness's `GPUCTL_HELM`) in a
//! fresh harness of its own (the blueprint's cluster-scoped driver CRs would meet other tests'):
//!
//! - without helm on PATH, or with a helm that does not run, an apply of a blueprint with
//!   `install: helm` exits 1 naming the release and the ways out, and the cluster is unchanged
//!   (no namespace, no Lease, no node label); `--no-helm` applies the objects and prints the
//!   helm command;
//! - a helm that fails mid-apply stops before the phase that needs the release and says how to
//!   finish;
//! - a helm run longer than `--wait-timeout` is stopped (SIGTERM) and reported, exit 1, and the
//!   lock is released;
//! - a helm run longer than the apply lock's lease does not lose the lock: a second apply is
//!   refused with the lock message throughout, and the first one finishes and releases it.
//!
//! The slow and failing helms are small wrapper scripts put first on PATH for the gpuctl child:
//! they sleep (or fail) on `upgrade`, then run the real helm. The chart is a stand-in named
//! `gpu-operator` (one ConfigMap recording the values): installing the real GPU Operator chart is
//! tests/cluster/cli_cluster.rs's part; this test is about how helm is run.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use kube::api::{Api, ListParams};
use support::cluster::{GpuNode, TestCluster};
use support::fresh::FreshCluster;
use support::releases::{gpuctl, text, write_script};

const BLUEPRINT: &str = r#"apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: "@P@"
spec:
  kubernetes:
    version: "1.35.1"
  gpuOperator:
    version: v26.7.0
    namespace: "@P@-gpu-operator"
    install: helm
    chart: { path: gpu-operator }
    driver:
      version: "595.91.07"
      kernelModuleType: open
  nodePools:
    - name: "@P@-h100"
      role: training
      selector: { gpuctl.dev/pool: "@P@-h100" }
      nodes: 1
      gpu: { model: H100-SXM5-80GB, count: 8 }
"#;

/// A stand-in chart named `gpu-operator` at `dir/gpu-operator`: one ConfigMap.
fn stand_in_chart(dir: &Path) {
    let chart = dir.join("gpu-operator");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: gpu-operator\nversion: v26.7.0\ndescription: stand-in for the GPU Operator chart (tests/cluster/apply_helm.rs)\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/values.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-stand-in-values\n  namespace: {{ .Release.Namespace }}\ndata:\n  values.json: {{ toJson .Values | quote }}\n",
    )
    .unwrap();
}

/// A directory holding an executable `helm` with `body` (and its `helm.src`), and the PATH that puts it first
/// (`None`: a PATH with no helm at all).
fn helm_path(dir: &Path, name: &str, body: Option<&str>) -> String {
    let bin = dir.join(name);
    std::fs::create_dir_all(&bin).unwrap();
    if let Some(body) = body {
        write_script(&bin.join("helm"), &format!("#!/bin/sh\n{body}\n"));
    }
    // The system's directories for `sh` and `sleep`, which have no helm.
    format!("{}:/usr/bin:/bin", bin.display())
}

/// A helm that runs the real one, after sleeping `secs` on `upgrade` (and touching `mark` when it
/// starts to); SIGTERM ends the sleep and the script.
fn slow_helm(real: &str, mark: &Path, secs: u32) -> String {
    format!(
        "case \"$1\" in\n  upgrade)\n    touch '{}'\n    trap 'kill $pid 2>/dev/null; exit 143' TERM\n    sleep {secs} & pid=$!\n    wait $pid ;;\nesac\nexec '{real}' \"$@\"",
        mark.display()
    )
}

struct Setup {
    tc: TestCluster,
    bp: String,
    kc: String,
    prefix: String,
    helm: String,
    dir: tempfile::TempDir,
}

impl Setup {
    fn apply<'a>(&'a self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec![
            "apply",
            &self.bp,
            "--kubeconfig",
            &self.kc,
            "--yes",
            "--crd-timeout",
            "30s",
        ];
        a.extend(extra);
        a
    }

    fn ns(&self) -> String {
        format!("{}-gpu-operator", self.prefix)
    }

    async fn lease_holder(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.tc.client.clone(), &self.ns());
        let name = gpuctl_core::names::apply_lock_name(&self.prefix);
        leases
            .get_opt(&name)
            .await
            .unwrap()
            .and_then(|l| l.spec.and_then(|s| s.holder_identity))
    }
}

async fn setup() -> Option<(Setup, FreshCluster)> {
    TestCluster::connect("apply_helm").await?;
    let fresh = FreshCluster::up("apply-helm");
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "apply-helm")
        .await
        .expect("connects to the fresh cluster");
    let dir = tempfile::tempdir().unwrap();
    stand_in_chart(dir.path());
    let mut prefix = tc.prefix.clone();
    prefix.truncate(30);
    let prefix = prefix.trim_end_matches('-').to_string();
    let bp = dir.path().join("bp.yaml");
    std::fs::write(&bp, BLUEPRINT.replace("@P@", &prefix)).unwrap();
    tc.create_gpu_node(
        "h100-0",
        &GpuNode::h100(8)
            .driver("595.91.07", (13, 2))
            .label("gpuctl.dev/pool", &format!("{prefix}-h100")),
    )
    .await
    .unwrap();
    let s = Setup {
        bp: bp.to_str().unwrap().to_string(),
        kc: kc.to_str().unwrap().to_string(),
        helm: fresh.var("GPUCTL_HELM"),
        prefix,
        tc,
        dir,
    };
    Some((s, fresh))
}

/// Nothing of the blueprint is in the cluster: its namespace (where the lock's Lease would be),
/// and the pool node's driver label.
async fn assert_unchanged(s: &Setup, what: &str) {
    let namespaces: Api<Namespace> = Api::all(s.tc.client.clone());
    assert!(
        namespaces.get_opt(&s.ns()).await.unwrap().is_none(),
        "{what}: namespace {} was created",
        s.ns()
    );
    let nodes: Api<Node> = Api::all(s.tc.client.clone());
    for n in nodes.list(&ListParams::default()).await.unwrap() {
        let labels = n.metadata.labels.unwrap_or_default();
        assert!(
            !labels.contains_key("gpuctl.dev/driver"),
            "{what}: node {:?} was labelled",
            n.metadata.name
        );
    }
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_failing_or_slow_helm_fails_the_apply_and_a_long_one_keeps_the_lock() {
    let Some((s, _fresh)) = setup().await else {
        return;
    };
    let release = format!("HelmRelease/{}/gpu-operator", s.ns());

    // No helm on PATH: refused up front, exit 1, naming the release and the ways out.
    let none = helm_path(s.dir.path(), "none", None);
    let o = gpuctl(&s.apply(&[]), &none);
    assert_eq!(o.status.code(), Some(1), "no helm: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for want in [
        "nothing was applied",
        "helm is not on PATH",
        release.as_str(),
        "--no-helm",
        "install: none",
    ] {
        assert!(err.contains(want), "no helm: `{want}` missing:\n{err}");
    }
    assert!(!err.contains("Apply complete"), "{err}");
    assert_unchanged(&s, "no helm").await;

    // A helm that does not run (`helm version` fails): refused the same way.
    let broken = helm_path(
        s.dir.path(),
        "broken",
        Some("echo 'cannot execute' >&2; exit 126"),
    );
    let o = gpuctl(&s.apply(&[]), &broken);
    assert_eq!(o.status.code(), Some(1), "broken helm: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("version` failed: cannot execute"), "{err}");
    assert_unchanged(&s, "broken helm").await;

    // A helm that fails on the upgrade: stops before the operator phase, says how to finish.
    let failing = helm_path(
        s.dir.path(),
        "failing",
        Some(&format!(
            "case \"$1\" in upgrade) echo 'Error: chart refused' >&2; exit 1 ;; esac\nexec '{}' \"$@\"",
            s.helm
        )),
    );
    let o = gpuctl(&s.apply(&[]), &failing);
    assert_eq!(o.status.code(), Some(1), "failing helm: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for want in [
        "failed: Error: chart refused",
        "the operator phase (whose objects need this release) and every step after it were not run",
        "helm history gpu-operator -n",
        "helm upgrade --install gpu-operator",
        "--labels gpuctl.dev/blueprint=",
    ] {
        assert!(err.contains(want), "failing helm: `{want}` missing:\n{err}");
    }
    assert_eq!(s.lease_holder().await, None, "the lock was not released");

    // A helm run longer than --wait-timeout: stopped, reported, exit 1, lock released.
    let mark = s.dir.path().join("timeout-started");
    let stuck = helm_path(s.dir.path(), "stuck", Some(&slow_helm(&s.helm, &mark, 120)));
    let started = Instant::now();
    let o = gpuctl(&s.apply(&["--wait-timeout", "3s"]), &stuck);
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(1), "stuck helm: {}", text(&o));
    assert!(mark.exists(), "the stuck helm never ran");
    assert!(
        took < Duration::from_secs(60),
        "the stuck helm was not stopped: {took:?}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    for want in [
        "ran longer than --wait-timeout (3s) and was stopped",
        "helm status gpu-operator -n",
        "raise --wait-timeout",
    ] {
        assert!(err.contains(want), "stuck helm: `{want}` missing:\n{err}");
    }
    assert_eq!(s.lease_holder().await, None, "the lock was not released");

    // --no-helm: the objects are applied and the helm command printed; no release.
    let o = gpuctl(&s.apply(&["--no-helm"]), &none);
    assert_eq!(o.status.code(), Some(0), "--no-helm: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--no-helm: install the GPU Operator release yourself"),
        "{err}"
    );
    assert!(err.contains("Apply complete"), "{err}");

    lock_holds_through_a_long_helm(&s).await;
}

/// A helm run of 8s under a lease of 2s: a concurrent apply is refused with the lock message each
/// time it tries; the first finishes, installs the release (recorded as gpuctl's) and releases
/// the lock.
async fn lock_holds_through_a_long_helm(s: &Setup) {
    let mark = s.dir.path().join("slow-started");
    let slow = helm_path(s.dir.path(), "slow", Some(&slow_helm(&s.helm, &mark, 8)));
    let real = helm_path(
        s.dir.path(),
        "real",
        Some(&format!("exec '{}' \"$@\"", s.helm)),
    );
    let first_args: Vec<String> = s
        .apply(&["--lock-duration", "2s", "--wait-timeout", "60s"])
        .iter()
        .map(|a| a.to_string())
        .collect();
    let first = std::thread::spawn({
        let slow = slow.clone();
        move || {
            let args: Vec<&str> = first_args.iter().map(String::as_str).collect();
            gpuctl(&args, &slow)
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !mark.exists() {
        assert!(Instant::now() < deadline, "the slow helm never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let helm_started = Instant::now();
    // Tries over more than twice the lease (renewed every ~0.7s), while helm still sleeps.
    let mut refused = 0;
    while helm_started.elapsed() < Duration::from_secs(6) {
        let o = gpuctl(&s.apply(&["--lock-timeout", "0s"]), &real);
        assert_eq!(
            o.status.code(),
            Some(1),
            "a second apply during the first one's helm run ({:?} in): {}",
            helm_started.elapsed(),
            text(&o)
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "another apply of blueprint `{}` is running",
                s.prefix
            )),
            "{err}"
        );
        refused += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(refused >= 3, "only {refused} tries");
    let o = first.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "the first apply: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "helm release {}/gpu-operator installed: chart gpu-operator ",
            s.ns()
        )) && err.contains(", revision 1"),
        "{err}"
    );
    assert!(err.contains("Apply complete"), "{err}");
    assert_eq!(s.lease_holder().await, None, "the lock was not released");
    // The release records whose it is: how a later plan knows gpuctl may uninstall it.
    let secrets: Api<Secret> = Api::namespaced(s.tc.client.clone(), &s.ns());
    let stored = secrets
        .list(&ListParams::default().labels("owner=helm,name=gpu-operator"))
        .await
        .unwrap();
    let labels = stored.items[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("gpuctl.dev/blueprint").map(String::as_str),
        Some(s.prefix.as_str())
    );
    assert_eq!(
        labels.get("gpuctl.dev/stack").map(String::as_str),
        Some("gpu-operator")
    );
    // And now the cluster matches: no changes, no helm needed.
    let o = gpuctl(
        &["plan", &s.bp, "--kubeconfig", &s.kc, "--detailed-exitcode"],
        &real,
    );
    assert_eq!(o.status.code(), Some(0), "plan after apply: {}", text(&o));
}
