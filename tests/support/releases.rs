//! Helm releases in cluster tests: a PATH whose `helm` is the harness's real helm (optionally
//! skipping chart hooks, which cannot complete here), the real chart archives in ../shared, helm's
//! stored revisions, and the stand-ins that play the pods of Kueue's and Volcano's chart
//! Deployments (no kubelet runs them here). Also the gpuctl binary run with that PATH. Used by
//! `kueue_release`, `volcano_release`, `releases_cluster`, `apply_helm` and `cli_cluster`.
#![allow(dead_code)]

use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// Exit code, stdout and stderr of a run, for assertion messages (one for every test binary).
pub use crate::support::gpuctl::text;
use crate::support::gpuctl::{Gpuctl, TODAY};

/// The shared folder of upstream files (`$GPUCTL_SHARED`, else `../shared`).
pub fn shared() -> PathBuf {
    std::env::var_os("GPUCTL_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

/// Copies the real chart archive `upstream/<project>/<version>/<file>` from ../shared into `dir`
/// (where a blueprint names it by `chart.path`) and returns the file name.
pub fn copy_archive(dir: &Path, project: &str, version: &str, file: &str) -> String {
    std::fs::copy(
        shared()
            .join("upstream")
            .join(project)
            .join(version)
            .join(file),
        dir.join(file),
    )
    .unwrap_or_else(|e| {
        panic!("the real chart archive {project}/{version}/{file} is in ../shared/upstream: {e}")
    });
    file.to_string()
}

/// The GPU Operator v26.7.0 chart archive, copied into `dir`.
pub fn gpu_operator_archive(dir: &Path) -> String {
    copy_archive(dir, "gpu-operator", "v26.7.0", "gpu-operator-v26.7.0.tgz")
}

/// The NVIDIA Network Operator v26.4.1 chart archive, copied into `dir`.
pub fn network_operator_archive(dir: &Path) -> String {
    copy_archive(
        dir,
        "network-operator",
        "v26.4.1",
        "network-operator-v26.4.1.tgz",
    )
}

/// Runs the gpuctl binary from the repository root with `PATH` = `path` (a [`helm_path`], so the
/// `helm` apply finds is the one the test chose) and the catalog's day fixed.
pub fn gpuctl(args: &[&str], path: &str) -> Output {
    Gpuctl::new(args).today(TODAY).env("PATH", path).output()
}

/// [`gpuctl`] with `-o json`: the run and its parsed stdout (`null` when it is not JSON).
pub fn plan_json(args: &[&str], path: &str) -> (Output, Value) {
    let o = gpuctl(args, path);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o, v)
}

/// Whether `helm` on the test PATH runs chart hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hooks {
    /// The real helm as it is.
    Run,
    /// The real helm with `--no-hooks` added to `install` and `upgrade`: the charts' pre-install
    /// and pre-upgrade hook Jobs (the Network Operator's `network-operator-keep-ncp` and
    /// `-upgrade-crd`, the GPU Operator's CRD upgrade) need a kubelet to complete, and helm waits
    /// for them until it times out. Everything else is the real helm's.
    Skip,
}

/// Writes `text` to `path` as an executable (mode 755), without this process ever holding a write
/// descriptor to `path`: the text goes to `<path>.src` and `install(1)` copies it into place. A
/// test thread forking while this process held one would pass it to its child until that child's
/// exec, and an exec of `path` in that moment fails with ETXTBSY ("Text file busy"), as a helm
/// stand-in once did in CI.
pub fn write_script(path: &Path, text: &str) {
    let mut src = path.as_os_str().to_owned();
    src.push(".src");
    std::fs::write(&src, text).unwrap();
    let status = std::process::Command::new("install")
        .args(["-m", "755"])
        .arg(&src)
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "install {}: {status}", path.display());
}

/// A PATH whose first `helm` is `helm` (the harness's real one, `GPUCTL_HELM`), in `dir/bin`.
/// With [`Hooks::Skip`] it is a two-line wrapper that adds `--no-hooks`, and logs each command
/// line to `dir/helm.log` (what apply ran, in order).
pub fn helm_path(dir: &Path, helm: &str, hooks: Hooks) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let target = bin.join("helm");
    let _ = std::fs::remove_file(&target);
    match hooks {
        Hooks::Run => std::os::unix::fs::symlink(helm, &target).unwrap(),
        Hooks::Skip => {
            let log = dir.join("helm.log");
            write_script(
                &target,
                &format!(
                    "#!/bin/sh\n\
                     # Test-only (tests/support/releases.rs): the real helm, with chart hooks skipped on\n\
                     # install and upgrade (their Jobs need a kubelet).\n\
                     echo \"$*\" >> '{log}'\n\
                     case \"$1\" in install|upgrade) exec '{helm}' \"$@\" --no-hooks ;; esac\n\
                     exec '{helm}' \"$@\"\n",
                    log = log.display()
                ),
            );
        }
    }
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The helm command lines the [`Hooks::Skip`] wrapper ran, in order.
pub fn helm_log(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("helm.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Revisions of release `name` in `namespace`, in Helm's storage (its Secrets).
pub async fn revisions(client: &Client, namespace: &str, name: &str) -> usize {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    secrets
        .list(&ListParams::default().labels(&format!("owner=helm,name={name}")))
        .await
        .unwrap()
        .items
        .len()
}

// --- Kueue's chart Deployment, played by the harness's Kueue binary ------------------------------

pub const NS: &str = "kueue-system";
/// What the chart names things with release name `kueue` (its `kueue.fullname`).
pub const CONFIG_MAP: &str = "kueue-manager-config";
pub const CONFIG_KEY: &str = "controller_manager_config.yaml";
pub const WEBHOOK_SERVICE: &str = "kueue-webhook-service";
pub const VALIDATING: &str = "kueue-validating-webhook-configuration";
pub const WEBHOOK_SECRET: &str = "kueue-webhook-server-cert";

/// The Kueue process that plays the chart Deployment's pod; killed when dropped.
pub struct KueuePod(Child);

impl Drop for KueuePod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// This host's first non-loopback IPv4 address: EndpointSlices may not hold loopback addresses
/// (as tests/support/webhook_server.py explains).
pub fn host_ip() -> String {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    s.connect("192.0.2.1:9").expect("a default route");
    let ip = s.local_addr().unwrap().ip().to_string();
    assert!(!ip.starts_with("127."), "no non-loopback IPv4 address");
    ip
}

pub fn free_port(ip: &str) -> u16 {
    TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Plays the Deployment's pod: waits for the ConfigMap helm installs, starts Kueue with it, and
/// gives the webhook Service a ready endpoint once Kueue's certificates are in place.
pub async fn kueue_pod(
    client: Client,
    kueue: String,
    kubeconfig: PathBuf,
    dir: PathBuf,
) -> KueuePod {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    // Bounded: helm may install other releases first (the GPU and Network Operators').
    let deadline = Instant::now() + Duration::from_secs(240);
    let text = loop {
        if let Some(cm) = cms.get_opt(CONFIG_MAP).await.unwrap()
            && let Some(t) = cm.data.as_ref().and_then(|d| d.get(CONFIG_KEY))
        {
            break t.clone();
        }
        assert!(
            Instant::now() < deadline,
            "helm never created {NS}/{CONFIG_MAP}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let mut config: Value = serde_saphyr::from_str(&text).expect("the ConfigMap holds YAML");
    // Only what differs between a pod and this machine: where it listens, where certificates go.
    let ip = host_ip();
    let port = free_port(&ip);
    let health = free_port("127.0.0.1");
    config["webhook"]["host"] = json!(ip);
    config["webhook"]["port"] = json!(port);
    config["webhook"]["certDir"] = json!(dir.join("certs").display().to_string());
    // (the chart's Deployment mounts the Secret there; see the loop below)
    config["health"]["healthProbeBindAddress"] = json!(format!("127.0.0.1:{health}"));
    config["metrics"]["bindAddress"] = json!("0");
    // In a pod, leader election finds its namespace in the service account's files.
    config["leaderElection"]["resourceNamespace"] = json!(NS);
    let path = dir.join("kueue-config.yaml");
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    let start = || {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("kueue.log"))
            .unwrap();
        Command::new(&kueue)
            .arg(format!("--config={}", path.display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--feature-gates=VisibilityOnDemand=false")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the harness's Kueue binary starts")
    };
    let mut pod = KueuePod(start());
    // Ready once its readiness probe passes (certificates written, webhook server started) and
    // its certificate rotator put the CA into the chart's webhook configuration.
    let vwc: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let ready = format!("http://127.0.0.1:{health}/readyz");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let cert_dir = dir.join("certs");
    std::fs::create_dir_all(&cert_dir).unwrap();
    loop {
        // The kubelet's part: a container that exits is started again (restartPolicy Always), as
        // Kueue exits when it starts before the API server serves its CRDs.
        if matches!(pod.0.try_wait(), Ok(Some(_))) {
            pod.0 = start();
        }
        // The kubelet's part: the pod mounts the webhook Secret (which Kueue's rotator fills) at
        // its certificate directory; the rotator waits until the mounted files match.
        if let Some(secret) = secrets.get_opt(WEBHOOK_SECRET).await.unwrap() {
            for (key, value) in secret.data.unwrap_or_default() {
                let path = cert_dir.join(&key);
                if std::fs::read(&path).ok().as_deref() != Some(&value.0[..]) {
                    std::fs::write(&path, &value.0).unwrap();
                }
            }
        }
        let probe = Command::new("curl")
            .args(["-fsS", "--max-time", "2", &ready])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        let injected = vwc.get_opt(VALIDATING).await.unwrap().is_some_and(|w| {
            w.webhooks.unwrap_or_default().iter().all(|h| {
                h.client_config
                    .ca_bundle
                    .as_ref()
                    .is_some_and(|b| !b.0.is_empty())
            })
        });
        if probe && injected {
            break;
        }
        if Instant::now() >= deadline {
            let log = std::fs::read_to_string(dir.join("kueue.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            let tail: Vec<String> = tail
                .iter()
                .rev()
                .map(|l| l.chars().take(600).collect())
                .collect();
            panic!(
                "Kueue did not become ready (readyz {probe}, CA injected {injected}); its log ends:\n{}",
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let slices: Api<EndpointSlice> = Api::namespaced(client, NS);
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{WEBHOOK_SERVICE}-test"), "namespace": NS,
            "labels": {"kubernetes.io/service-name": WEBHOOK_SERVICE}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
        "ports": [{"name": "", "port": port, "protocol": "TCP"}]});
    slices
        .patch(
            &format!("{WEBHOOK_SERVICE}-test"),
            &PatchParams::apply("test"),
            &Patch::Apply(&slice),
        )
        .await
        .unwrap();
    pod
}

/// `gpuctl apply` (with `args`, `PATH` = `path`) while the stand-in plays the pod of Kueue's chart
/// Deployment ([`kueue_pod`], started once helm has created its ConfigMap, its files in `dir`);
/// the pod runs until the returned guard is dropped.
pub async fn apply_with_kueue_pod(
    fresh: &super::fresh::FreshCluster,
    client: &Client,
    dir: &Path,
    path: &str,
    args: &[&str],
) -> (Output, KueuePod) {
    let pod = tokio::spawn(kueue_pod(
        client.clone(),
        fresh.var("GPUCTL_KUEUE"),
        fresh.kubeconfig(),
        dir.to_path_buf(),
    ));
    let o = tokio::task::spawn_blocking({
        let path = path.to_string();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        move || gpuctl(&args.iter().map(String::as_str).collect::<Vec<_>>(), &path)
    })
    .await
    .unwrap();
    (o, pod.await.expect("the Kueue stand-in started"))
}

// --- Volcano's admission Deployment, played by the harness's webhook-manager ---------------------

pub const VOLCANO_NS: &str = "volcano-system";
/// What Volcano v1.15.1's chart names things with release name `volcano`.
pub const VOLCANO_DEPLOYMENT: &str = "volcano-admission";
pub const VOLCANO_SERVICE: &str = "volcano-admission-service";
pub const VOLCANO_SECRET: &str = "volcano-admission-secret";
pub const VOLCANO_CONFIG_MAP: &str = "volcano-admission-configmap";
pub const VOLCANO_QUEUES_VALIDATE: &str = "volcano-admission-service-queues-validate";
/// Where the Deployment mounts the Secret and the ConfigMap (its container args name files there).
const VOLCANO_MOUNT: &str = "/admission.local.config/";

/// The webhook-manager process that plays the admission Deployment's pod; killed when dropped.
pub struct VolcanoPod(Child);

impl Drop for VolcanoPod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Plays the chart's hook Job `volcano-admission-init` (skipped: `--no-hooks`), which makes the
/// webhook's certificate for `<service>.<namespace>.svc` and stores it as Secret
/// `volcano-admission-secret` (`tls.key`, `tls.crt`, `ca.crt`): made here with `openssl`.
async fn volcano_admission_secret(client: &Client, dir: &Path) {
    let run = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs");
        assert!(o.status.success(), "openssl {args:?}: {}", text(&o));
    };
    let host = format!("{VOLCANO_SERVICE}.{VOLCANO_NS}.svc");
    std::fs::write(dir.join("san.cnf"), format!("subjectAltName=DNS:{host}\n")).unwrap();
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=volcano-admission-test-ca",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "tls.key",
        "-out",
        "tls.csr",
        "-subj",
        &format!("/CN={host}"),
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "tls.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "tls.crt",
        "-days",
        "1",
        "-extfile",
        "san.cnf",
    ]);
    let data: serde_json::Map<String, Value> = ["tls.key", "tls.crt", "ca.crt"]
        .iter()
        .map(|k| {
            use base64::Engine;
            let bytes = std::fs::read(dir.join(k)).unwrap();
            (
                k.to_string(),
                json!(base64::engine::general_purpose::STANDARD.encode(bytes)),
            )
        })
        .collect();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), VOLCANO_NS);
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": VOLCANO_SECRET, "namespace": VOLCANO_NS}, "data": data});
    secrets
        .patch(
            VOLCANO_SECRET,
            &PatchParams::apply("test"),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap();
}

/// The kubelet's part: the Deployment's Secret and ConfigMap volumes as files under `root`
/// (`certificates/`, `configmap/`), where its container args point once the mount path is
/// replaced by `root`.
async fn volcano_volumes(client: &Client, root: &Path) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), VOLCANO_NS);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), VOLCANO_NS);
    let certs = root.join("certificates");
    let config = root.join("configmap");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::create_dir_all(&config).unwrap();
    let secret = secrets.get(VOLCANO_SECRET).await.unwrap();
    for (k, v) in secret.data.unwrap_or_default() {
        std::fs::write(certs.join(k), v.0).unwrap();
    }
    let cm = cms.get(VOLCANO_CONFIG_MAP).await.unwrap();
    for (k, v) in cm.data.unwrap_or_default() {
        std::fs::write(config.join(k), v).unwrap();
    }
}

/// Plays the pod of the chart's Deployment `volcano-admission`: once helm has created it, makes
/// the certificate Secret (the skipped hook Job's work), mounts the volumes, starts the harness's
/// webhook-manager (same v1.15.1) with the Deployment's own container args, changed only where a
/// pod and this machine differ (file paths under the mount, listen address and port, health
/// address, kubeconfig), waits until it is healthy and has put its CA into the chart's webhook
/// configurations (as it does in a cluster, `--ca-cert-file`), and gives the chart's Service a
/// ready endpoint (the endpoint controller's part).
pub async fn volcano_pod(
    client: Client,
    webhook_manager: String,
    kubeconfig: PathBuf,
    dir: PathBuf,
) -> VolcanoPod {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), VOLCANO_NS);
    let deadline = Instant::now() + Duration::from_secs(240);
    let args: Vec<String> = loop {
        if let Some(d) = deployments.get_opt(VOLCANO_DEPLOYMENT).await.unwrap() {
            break d.spec.unwrap().template.spec.unwrap().containers[0]
                .args
                .clone()
                .unwrap_or_default();
        }
        assert!(
            Instant::now() < deadline,
            "helm never created {VOLCANO_NS}/{VOLCANO_DEPLOYMENT}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let root = dir.join("volcano-admission");
    std::fs::create_dir_all(&root).unwrap();
    volcano_admission_secret(&client, &root).await;
    volcano_volumes(&client, &root).await;
    let ip = host_ip();
    let port = free_port(&ip);
    let health = free_port("127.0.0.1");
    let mut cmd_args: Vec<String> = args
        .iter()
        .filter(|a| a.starts_with('-'))
        .map(|a| a.replace(VOLCANO_MOUNT, &format!("{}/", root.display())))
        .collect();
    cmd_args.extend([
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--listen-address={ip}"),
        format!("--port={port}"),
        format!("--healthz-address=127.0.0.1:{health}"),
    ]);
    let start = || {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("volcano-admission.log"))
            .unwrap();
        Command::new(&webhook_manager)
            .args(&cmd_args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the harness's webhook-manager starts")
    };
    let mut pod = VolcanoPod(start());
    let vwc: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    // Served over TLS with the webhook's certificate (issued for the Service's name).
    let healthz = format!("https://127.0.0.1:{health}/healthz");
    loop {
        // restartPolicy Always
        if matches!(pod.0.try_wait(), Ok(Some(_))) {
            pod.0 = start();
        }
        let probe = Command::new("curl")
            .args(["-fsSk", "--max-time", "2", &healthz])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        let injected = vwc
            .get_opt(VOLCANO_QUEUES_VALIDATE)
            .await
            .unwrap()
            .is_some_and(|w| {
                w.webhooks.unwrap_or_default().iter().all(|h| {
                    h.client_config
                        .ca_bundle
                        .as_ref()
                        .is_some_and(|b| !b.0.is_empty())
                })
            });
        if probe && injected {
            break;
        }
        if Instant::now() >= deadline {
            let log =
                std::fs::read_to_string(dir.join("volcano-admission.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            panic!(
                "Volcano's webhook-manager did not become ready (healthz {probe}, CA injected {injected}); its log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let slices: Api<EndpointSlice> = Api::namespaced(client, VOLCANO_NS);
    let name = format!("{VOLCANO_SERVICE}-test");
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": VOLCANO_NS,
            "labels": {"kubernetes.io/service-name": VOLCANO_SERVICE}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
        "ports": [{"name": "", "port": port, "protocol": "TCP"}]});
    slices
        .patch(&name, &PatchParams::apply("test"), &Patch::Apply(&slice))
        .await
        .unwrap();
    pod
}
