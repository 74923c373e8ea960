//! Issue 31: MultiKueue for real. Three fresh harnesses, each with the real Kueue v0.19.2: the
//! manager `hub` (Kueue with only `batch/job`, the one framework every worker has) and the workers
//! `worker-a` (no GPU quota) and `worker-b` (8 GPUs). `fleet apply` (one wave) renders and applies
//! the workers' ServiceAccount, token Secret and RBAC, the manager's MultiKueueClusters, config,
//! AdmissionCheck and the ClusterQueue's strategy, then writes each worker's kubeconfig Secret on
//! the manager (never printed: the output shows `***`, `fleet plan` never names it). The test
//! checks, against the clusters: both MultiKueueClusters become Active; a Job submitted to the
//! manager's LocalQueue gets a Workload there whose `status.clusterName` is `worker-b`, and a copy
//! of the Job appears on worker-b (not on worker-a).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::fresh::FreshCluster;
use support::releases::text;

const CLUSTERS: [&str; 3] = ["hub", "worker-a", "worker-b"];

const BASE: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: base
spec:
  kubernetes:
    version: \"1.35.1\"
  gpuOperator:
    version: v26.7.0
    namespace: gpu-operator
    install: none
    driver:
      version: \"580.173.02\"
      kernelModuleType: open
  nodePools:
    - name: train
      role: training
      selector: { gpuctl.dev/pool: train }
      nodes: 1
      gpu: { model: H100-SXM5-80GB, count: 8 }
  scheduling:
    queueing: kueue
    kueue:
      version: v0.19.2
      install: none
      clusterQueues:
        - name: cq-team-a
          resources:
            - { pool: train, quota: { nvidia.com/gpu: 8, cpu: \"16\", memory: 64Gi } }
  tenants:
    - name: team-a
      namespaces: [team-a]
      queue: cq-team-a
";

const FLEET: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: Fleet
metadata: { name: mk }
spec:
  clusters:
    - { name: hub, blueprint: clusters/hub.yaml, context: ctx-hub }
    - { name: worker-a, blueprint: clusters/worker-a.yaml, context: ctx-worker-a }
    - { name: worker-b, blueprint: clusters/worker-b.yaml, context: ctx-worker-b }
  multiKueue:
    manager: hub
    workers: [worker-a, worker-b]
    clusterQueues: [cq-team-a]
";

fn gpuctl(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuctl"))
        .args(args)
        .current_dir(dir)
        .env("GPUCTL_TODAY", "2026-11-30")
        .env("NO_COLOR", "1")
        .output()
        .expect("gpuctl runs")
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn fleet_kubeconfig(harnesses: &[(&str, PathBuf)], out: &Path) {
    let mut merged = json!({"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
        "contexts": [], "current-context": "ctx-hub"});
    for (name, kc) in harnesses {
        let kc: Value = serde_saphyr::from_str(&std::fs::read_to_string(kc).unwrap()).unwrap();
        let mut cluster = kc["clusters"][0].clone();
        cluster["name"] = json!(name);
        let mut user = kc["users"][0].clone();
        user["name"] = json!(name);
        merged["clusters"].as_array_mut().unwrap().push(cluster);
        merged["users"].as_array_mut().unwrap().push(user);
        merged["contexts"].as_array_mut().unwrap().push(
            json!({"name": format!("ctx-{name}"), "context": {"cluster": name, "user": name}}),
        );
    }
    std::fs::write(out, serde_json::to_string_pretty(&merged).unwrap()).unwrap();
}

async fn client(kubeconfig: &Path) -> Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(cfg).unwrap()
}

fn kueue(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "kueue.x-k8s.io/v1beta2".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn condition(o: &DynamicObject, kind: &str) -> Option<(String, String, String)> {
    let conds = o.data.pointer("/status/conditions")?.as_array()?;
    let c = conds.iter().find(|c| c["type"] == kind)?;
    Some((
        c["status"].as_str()?.into(),
        c["reason"].as_str().unwrap_or("").into(),
        c["message"].as_str().unwrap_or("").into(),
    ))
}

/// Polls `f` every 250 ms until it is `Some`, at most `secs`; `what` names it in the panic. The
/// bounds are generous (120 s): CI runs four cluster tests at a time on two cores, and a wait
/// ends as soon as its state is reached (45 s failed once under that load).
async fn until<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(last) if Instant::now() > end => panic!("{what} within {secs}s; last: {last}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

fn job(name: &str) -> k8s_openapi::api::batch::v1::Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a",
            "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.invalid/train:1", "resources": {
                "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"}}}]}}}
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    gpuctl_no_test_cluster,
    ignore = "skipped: needs the test API server (docs/testing.md)"
)]
async fn multikueue_dispatches_a_job_to_the_worker_with_quota() {
    let Some(_shared) = TestCluster::connect("multikueue").await else {
        return;
    };
    let started = Instant::now();
    let fresh: Vec<FreshCluster> = std::thread::scope(|s| {
        let handles: Vec<_> = CLUSTERS
            .iter()
            .map(|c| {
                s.spawn(move || {
                    let mut flags = vec!["--without-volcano"];
                    if *c == "hub" {
                        flags.extend(["--kueue-frameworks", "batch/job"]);
                    }
                    FreshCluster::up_with(&format!("multikueue-{c}"), &flags)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!(
        "multikueue: three clusters up in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path();
    std::fs::create_dir(dir.join(".git")).unwrap();
    write(dir, "base.yaml", BASE);
    for c in CLUSTERS {
        let gpus = if c == "worker-a" { "0" } else { "8" };
        write(
            dir,
            &format!("clusters/{c}.yaml"),
            &format!(
                "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: ../base.yaml\nmetadata: {{ name: {c} }}\nspec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources:\n            - {{ pool: train, quota: {{ nvidia.com/gpu: {gpus} }} }}\n"
            ),
        );
    }
    write(dir, "fleet.yaml", FLEET);
    let harnesses: Vec<(&str, PathBuf)> = CLUSTERS
        .iter()
        .zip(&fresh)
        .map(|(c, f)| (*c, f.kubeconfig()))
        .collect();
    let kc = dir.join("kubeconfig.json");
    fleet_kubeconfig(&harnesses, &kc);
    let kcs = kc.display().to_string();
    let mut clients = Vec::new();
    for f in &fresh {
        clients.push(client(&f.kubeconfig()).await);
    }
    let (hub, worker_a, worker_b) = (&clients[0], &clients[1], &clients[2]);

    let o = gpuctl(
        &[
            "fleet",
            "apply",
            "fleet.yaml",
            "--kubeconfig",
            &kcs,
            "--yes",
        ],
        dir,
    );
    assert_eq!(o.status.code(), Some(0), "fleet apply: {}", text(&o));
    let shown = text(&o);
    assert!(
        shown.contains("kubeconfig of `worker-b`") && shown.contains("token ***"),
        "{shown}"
    );
    // The token never leaves gpuctl: read it from the worker and look for it in the output.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(worker_b.clone(), "kueue-system");
    let token = secrets
        .get("gpuctl-multikueue-token")
        .await
        .unwrap()
        .data
        .unwrap()["token"]
        .0
        .clone();
    let token = String::from_utf8(token).unwrap();
    assert!(
        !token.is_empty() && !shown.contains(&token),
        "token printed"
    );
    eprintln!(
        "multikueue: fleet apply done at {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // Both MultiKueueClusters connect.
    let mkc: Api<DynamicObject> = Api::all_with(
        hub.clone(),
        &kueue("MultiKueueCluster", "multikueueclusters"),
    );
    for w in ["worker-a", "worker-b"] {
        until(120, &format!("MultiKueueCluster {w} Active"), || async {
            let o = mkc.get(w).await.map_err(|e| e.to_string())?;
            match condition(&o, "Active") {
                Some((s, _, _)) if s == "True" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
    let ac: Api<DynamicObject> =
        Api::all_with(hub.clone(), &kueue("AdmissionCheck", "admissionchecks"));
    until(120, "AdmissionCheck Active", || async {
        let o = ac.get("multikueue").await.map_err(|e| e.to_string())?;
        match condition(&o, "Active") {
            Some((s, _, _)) if s == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    eprintln!(
        "multikueue: clusters Active at {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // The secret is no part of any plan.
    let o = gpuctl(
        &[
            "fleet",
            "plan",
            "fleet.yaml",
            "--kubeconfig",
            &kcs,
            "-o",
            "json",
        ],
        dir,
    );
    let plan = text(&o);
    assert!(!plan.contains(&token), "token in fleet plan");
    assert!(!plan.contains("certificate-authority-data"), "{plan}");

    // A Job on the manager goes to worker-b, the worker with quota.
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(hub.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("train-1"))
        .await
        .unwrap();
    let wl: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), "team-a", &kueue("Workload", "workloads"));
    let cluster = until(120, "the manager's Workload names its worker", || async {
        let list = wl
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|w| {
                w.data
                    .pointer("/status/clusterName")?
                    .as_str()
                    .map(String::from)
            })
            .collect();
        names.first().cloned().ok_or_else(|| {
            format!(
                "{:?}",
                list.items
                    .iter()
                    .map(|w| &w.data["status"])
                    .collect::<Vec<_>>()
            )
        })
    })
    .await;
    assert_eq!(cluster, "worker-b");
    let remote: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(worker_b.clone(), "team-a");
    until(120, "the Job's copy on worker-b", || async {
        remote
            .get_opt("train-1")
            .await
            .map_err(|e| e.to_string())?
            .map(|_| ())
            .ok_or_else(|| "absent".to_string())
    })
    .await;
    let other: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(worker_a.clone(), "team-a");
    until(120, "no copy left on worker-a", || async {
        match other.get_opt("train-1").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("present".to_string()),
        }
    })
    .await;
    eprintln!(
        "multikueue: done in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}
