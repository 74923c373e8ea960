//! Issue 31: Flux's real kustomize-controller (v1.9.4, the one Flux v2.9.4 ships, built from its Go
//! module by `tools/kube-harness/run build`) applies a tree `gpuctl fleet render` wrote to a second
//! cluster, and `gpuctl plan` of that cluster's blueprint then shows no value change
//! (docs/fleet.md "GitOps").
//!
//! Two fresh harnesses: `flux` (Flux's home: the Kustomization and source CRDs from the modules of
//! kustomize-controller v1.9.4 and source-controller v1.9.4, installed server-side) and `edge` (the
//! target). A one-cluster fleet with `gitops.engine: flux` is rendered; the test plays
//! source-controller, as Flux's own controller tests do: it packs `rendered/edge` as a tar.gz
//! artifact, serves it over HTTP on 127.0.0.1 from a thread of its own, and writes the
//! GitRepository `gpu-fleet`'s `status.artifact` (url, revision, `sha256:` digest of the archive).
//! `edge`'s kubeconfig goes into the Secret `edge-kubeconfig` (key `value`); gpuctl's rendered
//! Kustomization `flux/edge.yaml` is created as written (its `sourceRef` already names
//! `gpu-fleet`). kustomize-controller runs out of cluster against `flux` (leader election, metrics
//! and health endpoints off, events not sent), and is killed at the end, also on a panic.
//!
//! Checked: the Kustomization becomes Ready with the served revision; `edge` holds gpuctl's five
//! objects, applied by field manager `kustomize-controller` with Flux's two ownership labels; `gpuctl
//! plan` of the cluster's blueprint against `edge` reports every object unchanged (exit 0 under
//! `--detailed-exitcode`). Then a value changed on `edge` by hand is a conflict with that change in
//! the plan (the check can fail), and once Flux reconciles again the plan is empty again. Last,
//! `gpuctl apply` of the blueprint on that cluster says "No changes" and writes nothing (every
//! object keeps its resourceVersion and `kustomize-controller` as its only field manager; no
//! ApplySet parent is created).

use crate::support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpuctl_test_skip::needs_test_cluster;
use serde_json::Value;
use sha2::{Digest, Sha256};
use support::cluster::{TestCluster, cluster_required};
use support::fleet::{BASE, FleetRepo};
use support::fresh::FreshCluster;
use support::gpuctl::in_dir as gpuctl;
use support::releases::text;

const FLEET: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: Fleet
metadata: { name: flux-demo }
spec:
  clusters:
    - { name: edge, blueprint: clusters/edge.yaml, context: ctx-edge }
  waves:
    - { name: all, selector: {} }
  gitops:
    engine: flux
    path: rendered
    flux:
      namespace: flux-system
      sourceRef: { kind: GitRepository, name: gpu-fleet }
      interval: 10m
";

const GIT_REPOSITORY: &str = "apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: { name: gpu-fleet, namespace: flux-system }
spec:
  url: https://git.example.invalid/gpu-fleet.git
  interval: 10m
  ref: { branch: main }
";

/// The revision the artifact claims (source-controller's `<branch>@sha1:<commit>` form).
const REVISION: &str = "main@sha1:0123456789abcdef0123456789abcdef01234567";

/// The objects gpuctl renders for `edge` (kind, namespace, name).
const OBJECTS: [(&str, &str, &str); 5] = [
    ("namespace", "", "gpu-operator"),
    ("namespace", "", "team-a"),
    ("nvidiadriver", "", "cluster-default"),
    ("resourcequota", "team-a", "team-a-quota"),
    ("configmap", "gpu-operator", "gpuctl-dcgm-metrics"),
];

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
            c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        drop(c.stdin.take());
        c.wait_with_output().unwrap()
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let o = self.run(args, stdin);
        assert!(o.status.success(), "kubectl {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a, None)).unwrap()
    }
}

/// A ustar archive (what Go's archive/tar, and so Flux's untar, reads) of every file under
/// `root/prefix`, named `prefix/...`, with its directories; gzip-compressed.
fn tar_gz(root: &Path, prefix: &str) -> Vec<u8> {
    fn header(name: &str, size: usize, dir: bool) -> [u8; 512] {
        let mut h = [0u8; 512];
        assert!(name.len() < 100, "{name}: too long for a plain ustar name");
        h[..name.len()].copy_from_slice(name.as_bytes());
        let octal = |h: &mut [u8; 512], at: usize, width: usize, v: usize| {
            let s = format!("{v:0w$o}\0", w = width - 1);
            h[at..at + width].copy_from_slice(s.as_bytes());
        };
        octal(&mut h, 100, 8, if dir { 0o755 } else { 0o644 });
        octal(&mut h, 108, 8, 0);
        octal(&mut h, 116, 8, 0);
        octal(&mut h, 124, 12, size);
        octal(&mut h, 136, 12, 1_764_806_400); // 2025-12-04, fixed: the archive is deterministic
        h[156] = if dir { b'5' } else { b'0' };
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        h
    }
    fn walk(root: &Path, rel: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(&header(&format!("{rel}/"), 0, true));
        let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = format!("{rel}/{}", e.file_name().to_string_lossy());
            if e.file_type().unwrap().is_dir() {
                walk(root, &name, out);
            } else {
                let data = std::fs::read(e.path()).unwrap();
                out.extend_from_slice(&header(&name, data.len(), false));
                out.extend_from_slice(&data);
                out.resize(out.len().div_ceil(512) * 512, 0);
            }
        }
    }
    let mut tar = Vec::new();
    let mut parts = String::new();
    for p in prefix
        .split('/')
        .collect::<Vec<_>>()
        .split_last()
        .unwrap()
        .1
    {
        parts = if parts.is_empty() {
            p.to_string()
        } else {
            format!("{parts}/{p}")
        };
        tar.extend_from_slice(&header(&format!("{parts}/"), 0, true));
    }
    walk(root, prefix, &mut tar);
    tar.extend_from_slice(&[0u8; 1024]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

/// An HTTP server on 127.0.0.1 that answers every GET with one file (what source-controller's
/// artifact server does for an artifact's URL); stopped when dropped.
struct ArtifactServer {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ArtifactServer {
    fn start(body: Vec<u8>) -> ArtifactServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut conn) = conn else { continue };
                let _ = serve(&mut conn, &body);
            }
        });
        ArtifactServer {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

fn serve(conn: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        request.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&request);
    let status = if head.starts_with("GET ") {
        "200 OK"
    } else {
        "405 Method Not Allowed"
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: application/gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    conn.write_all(body)?;
    conn.flush()
}

impl Drop for ArtifactServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The controller process, killed and reaped when dropped (also when the test panics).
struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = log.len().saturating_sub(4000);
        let start = (start..log.len())
            .find(|i| log.is_char_boundary(*i))
            .unwrap_or(0);
        log[start..].to_string()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Kustomization's Ready condition (status, reason, message), if any.
fn ready(k: &Kubectl) -> Option<(String, String, String)> {
    let ks = k.json(&["-n", "flux-system", "get", "kustomization", "edge"]);
    let c = ks["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?
        .clone();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason"), s("message")))
}

/// Ask kustomize-controller to reconcile now (what `flux reconcile kustomization` does) and wait
/// until it has handled that request and is Ready.
fn reconcile(k: &Kubectl, ctl: &mut Controller, token: &str) {
    let annotation = format!("reconcile.fluxcd.io/requestedAt={token}");
    k.ok(
        &[
            "-n",
            "flux-system",
            "annotate",
            "--overwrite",
            "kustomization",
            "edge",
            &annotation,
        ],
        None,
    );
    wait_ready(k, ctl, Some(token));
}

/// Wait (180 s: CI runs four cluster tests at once on 2 cores) until the Kustomization is Ready
/// for the served revision (and has handled the reconcile request `token`, when given).
fn wait_ready(k: &Kubectl, ctl: &mut Controller, token: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let ks = k.json(&["-n", "flux-system", "get", "kustomization", "edge"]);
        let handled = token.is_none_or(|t| ks["status"]["lastHandledReconcileAt"] == t);
        let applied = ks["status"]["lastAppliedRevision"] == REVISION;
        let r = ready(k);
        if handled && applied && r.as_ref().is_some_and(|(s, _, _)| s == "True") {
            return;
        }
        if let Some(status) = ctl.child.try_wait().unwrap() {
            panic!(
                "kustomize-controller exited ({status}); its log ends:\n{}",
                ctl.log_tail()
            );
        }
        assert!(
            Instant::now() < deadline,
            "the Kustomization was not Ready for {REVISION} within 180 s (Ready: {r:?}); kustomize-controller's log ends:\n{}",
            ctl.log_tail()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `gpuctl plan` of the cluster's blueprint against `edge`, as JSON, and its exit code.
fn plan(dir: &Path, kubeconfig: &Path) -> (Option<i32>, Value, Output) {
    let o = gpuctl(
        &[
            "plan",
            "clusters/edge.yaml",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--detailed-exitcode",
            "-o",
            "json",
        ],
        dir,
    );
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code(), v, o)
}

fn summary(plan: &Value) -> Vec<(String, u64)> {
    plan["summary"]
        .as_object()
        .unwrap_or_else(|| panic!("no summary: {plan:#}"))
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[needs_test_cluster]
#[test]
fn flux_kustomize_controller_applies_a_rendered_tree_and_plan_shows_no_change() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(_shared) = rt.block_on(TestCluster::connect("flux_apply")) else {
        return;
    };
    let started = Instant::now();
    let flags = vec!["--without-kueue", "--without-volcano"];
    let mut up = FreshCluster::up_all(&[
        ("flux-home".to_string(), flags.clone()),
        ("flux-edge".to_string(), flags),
    ])
    .into_iter();
    let (flux, edge) = (up.next().unwrap(), up.next().unwrap());
    eprintln!(
        "flux_apply: two clusters up in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let controller = PathBuf::from(flux.var("GPUCTL_FLUX_KUSTOMIZE_CONTROLLER"));
    let crds = PathBuf::from(flux.var("GPUCTL_FLUX_CRDS"));
    if !controller.is_file() || !crds.join(".stamp").is_file() {
        let msg = format!(
            "Flux's kustomize-controller ({}) or its CRDs ({}) are not built: run `tools/kube-harness/run build`",
            controller.display(),
            crds.display()
        );
        assert!(!cluster_required(), "{msg}");
        eprintln!("skipped: {msg}");
        return;
    }
    let kubectl = flux.var("GPUCTL_KUBECTL");
    let home = Kubectl {
        bin: kubectl.clone(),
        kubeconfig: flux.kubeconfig(),
    };
    let target = Kubectl {
        bin: kubectl,
        kubeconfig: edge.kubeconfig(),
    };

    // Flux's CRDs from the modules, server-side (the Kustomization CRD is 40 KB).
    home.ok(
        &["apply", "--server-side", "-f", crds.to_str().unwrap()],
        None,
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let wait = [
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/kustomizations.kustomize.toolkit.fluxcd.io",
        "crd/gitrepositories.source.toolkit.fluxcd.io",
        "crd/ocirepositories.source.toolkit.fluxcd.io",
        "crd/buckets.source.toolkit.fluxcd.io",
    ];
    while !home.run(&wait, None).status.success() {
        assert!(
            Instant::now() < deadline,
            "Flux's CRDs did not become Established"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    home.ok(&["create", "namespace", "flux-system"], None);

    // The fleet, rendered with the Flux engine.
    let repo = FleetRepo::new()
        .git()
        .file("base.yaml", BASE)
        .cluster("edge", "")
        .file("fleet.yaml", FLEET)
        .build();
    let dir = repo.path();
    let o = gpuctl(&["fleet", "render", "fleet.yaml", "-o", "rendered"], dir);
    assert_eq!(o.status.code(), Some(0), "fleet render: {}", text(&o));

    // Play source-controller: the cluster's tree as a tar.gz artifact served on 127.0.0.1.
    let artifact = tar_gz(dir, "rendered/edge");
    let hex: String = Sha256::digest(&artifact)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let digest = format!("sha256:{hex}");
    let server = ArtifactServer::start(artifact);
    home.ok(&["apply", "--server-side", "-f", "-"], Some(GIT_REPOSITORY));
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let status = serde_json::json!({"status": {
        "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded",
            "message": format!("stored artifact for revision '{REVISION}'"),
            "lastTransitionTime": now, "observedGeneration": 1}],
        "artifact": {
            "path": "gitrepository/flux-system/gpu-fleet/0123456789abcdef.tar.gz",
            "url": format!("http://127.0.0.1:{}/gitrepository/flux-system/gpu-fleet/0123456789abcdef.tar.gz", server.port),
            "revision": REVISION,
            "digest": digest,
            "lastUpdateTime": now,
        },
    }});
    home.ok(
        &[
            "-n",
            "flux-system",
            "patch",
            "gitrepository",
            "gpu-fleet",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
        None,
    );

    // edge's kubeconfig in the Secret gpuctl's Kustomization names; the Kustomization as rendered.
    let kubeconfig = edge.kubeconfig();
    let value = format!("--from-file=value={}", kubeconfig.display());
    home.ok(
        &[
            "-n",
            "flux-system",
            "create",
            "secret",
            "generic",
            "edge-kubeconfig",
            &value,
        ],
        None,
    );
    let rendered = dir.join("rendered/flux/edge.yaml");
    home.ok(
        &["apply", "--server-side", "-f", rendered.to_str().unwrap()],
        None,
    );

    // kustomize-controller out of cluster against `flux`.
    let log = repo.path().join("kustomize-controller.log");
    let out = std::fs::File::create(&log).unwrap();
    let err = out.try_clone().unwrap();
    let child = Command::new(&controller)
        .args([
            "--watch-all-namespaces",
            "--enable-leader-election=false",
            "--metrics-addr=0",
            "--health-addr=0",
            "--events-addr=",
            "--log-level=info",
        ])
        .env("KUBECONFIG", flux.kubeconfig())
        .env("RUNTIME_NAMESPACE", "flux-system")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("kustomize-controller starts");
    let mut ctl = Controller { child, log };
    let applying = Instant::now();
    wait_ready(&home, &mut ctl, None);
    eprintln!(
        "flux_apply: Kustomization Ready after {:.1}s: {:?}",
        applying.elapsed().as_secs_f64(),
        ready(&home)
    );

    // edge holds gpuctl's objects, applied by kustomize-controller.
    for (kind, ns, name) in OBJECTS {
        let mut args = vec!["get", kind, name];
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        args.push("--show-managed-fields");
        let o = target.json(&args);
        let labels = &o["metadata"]["labels"];
        assert_eq!(labels["kustomize.toolkit.fluxcd.io/name"], "edge", "{o:#}");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "gpuctl", "{o:#}");
        let managers: Vec<&str> = o["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(managers.contains(&"kustomize-controller"), "{managers:?}");
        assert!(!managers.contains(&"gpuctl"), "{managers:?}");
    }
    let quota = target.json(&["-n", "team-a", "get", "resourcequota", "team-a-quota"]);
    assert_eq!(quota["spec"]["hard"]["requests.nvidia.com/gpu"], "8");

    // gpuctl plan of the cluster's blueprint: every object unchanged.
    let (code, p, o) = plan(dir, &kubeconfig);
    assert_eq!(code, Some(0), "plan after the Flux apply: {}", text(&o));
    assert_eq!(
        summary(&p),
        vec![("unchanged".to_string(), 5)],
        "{}",
        text(&o)
    );
    for a in p["actions"].as_array().unwrap() {
        assert_eq!(a["action"], "no-op", "{a:#}");
    }

    // A value changed on edge by hand shows in the plan (the check can fail) ...
    target.ok(
        &[
            "-n",
            "team-a",
            "patch",
            "resourcequota",
            "team-a-quota",
            "--type=merge",
            "-p",
            r#"{"spec":{"hard":{"requests.nvidia.com/gpu":"4"}}}"#,
        ],
        None,
    );
    let (code, p, o) = plan(dir, &kubeconfig);
    assert_eq!(code, Some(2), "plan after a change by hand: {}", text(&o));
    let changed: Vec<&Value> = p["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] != "no-op")
        .collect();
    assert_eq!(changed.len(), 1, "{}", text(&o));
    assert_eq!(changed[0]["name"], "team-a-quota", "{}", text(&o));
    let shown = changed[0].to_string();
    assert!(
        shown.contains("requests.nvidia.com/gpu") && shown.contains("\"4\""),
        "{shown}"
    );

    // ... and once Flux reconciles, the drift is gone and the plan is empty again.
    reconcile(&home, &mut ctl, "gpuctl-test-1");
    let quota = target.json(&["-n", "team-a", "get", "resourcequota", "team-a-quota"]);
    assert_eq!(quota["spec"]["hard"]["requests.nvidia.com/gpu"], "8");
    let (code, p, o) = plan(dir, &kubeconfig);
    assert_eq!(code, Some(0), "plan after Flux's reconcile: {}", text(&o));
    assert_eq!(summary(&p), vec![("unchanged".to_string(), 5)]);

    // gpuctl apply on the same cluster afterwards has nothing to do and writes nothing: no object
    // changes (each keeps its resourceVersion, but the ResourceQuota, whose status
    // kube-controller-manager keeps writing, and has no field manager `gpuctl`) and no ApplySet
    // parent is created.
    let versions = |k: &Kubectl| -> Vec<(String, String)> {
        OBJECTS
            .iter()
            .map(|(kind, ns, name)| {
                let mut args = vec!["get", *kind, *name, "--show-managed-fields"];
                if !ns.is_empty() {
                    args.extend(["-n", *ns]);
                }
                let o = k.json(&args);
                let managers: Vec<&str> = o["metadata"]["managedFields"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|m| m["manager"].as_str())
                    .filter(|m| *m != "kube-controller-manager")
                    .collect();
                let rv = match *kind {
                    "resourcequota" => String::new(),
                    _ => o["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                };
                (rv, managers.join(","))
            })
            .collect()
    };
    let before = versions(&target);
    for (_, managers) in &before {
        assert_eq!(managers, "kustomize-controller", "{before:?}");
    }
    let o = gpuctl(
        &[
            "apply",
            "clusters/edge.yaml",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
        dir,
    );
    assert_eq!(o.status.code(), Some(0), "gpuctl apply: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("No changes. The cluster matches the blueprint."),
        "{}",
        text(&o)
    );
    assert_eq!(versions(&target), before, "gpuctl apply changed an object");
    let parents = target.json(&["get", "configmaps", "-A", "-l", "applyset.kubernetes.io/id"]);
    assert_eq!(parents["items"], serde_json::json!([]), "{parents:#}");
    drop(ctl);
    drop(server);
    eprintln!(
        "flux_apply: done in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}
