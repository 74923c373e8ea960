//! `gpuctl doctor` live at issue 16's scale: loads the generated Day-2 cluster of the doctor and
//! status benchmarks (`gpuctl_core::testgen::day2::Size::BENCH`: 1,000 GPU nodes, 20,000 pods, 5,000
//! events, plus the quota, PriorityClasses and Kueue queues of the shipped Day-2 example) into the
//! test API server of `GPUCTL_TEST_KUBECONFIG`, then times the release binary's
//! `gpuctl doctor blueprints/dgx-h100-training.yaml --kubeconfig ...` (`RUNS` times, default 5) and
//! prints the median wall time and the LIST requests it sent (`-o json`'s `read.list_requests`).
//!
//! Run against a harness of its own (the objects are not removed; a second run finds them and only
//! times doctor):
//!
//! ```sh
//! tools/kube-harness/run up --dir /tmp/h-bench
//! source <(tools/kube-harness/run env --dir /tmp/h-bench); export GPUCTL_TEST_KUBECONFIG
//! cargo bench --bench doctor_live
//! ```
//!
//! `tools/bench-day2-live` loads the cluster through this benchmark, then times doctor, status,
//! the snapshot path and `kubectl get` of the same kinds side by side, with the API server's own
//! request counts (docs/testing.md, "Benchmarks").
//!
//! Without `GPUCTL_TEST_KUBECONFIG` it prints "skipped: no test cluster" and exits 0; outside
//! `cargo bench` (e.g. `cargo test --all-targets`, which runs benchmarks once as tests) it does
//! nothing, so the normal test run never loads 26,000 objects.
//!
//! What plays the parts the harness lacks: there is no kubelet or scheduler, so pods are created
//! with `spec.nodeName` (or none, Pending) and their status (phase, conditions, container states)
//! is written through the status subresource as the kubelet and kube-scheduler write it; nodes'
//! capacity and conditions likewise. The pods' owners are real Jobs with `spec.managedBy` set to
//! this benchmark, so the Job controller leaves them alone (it would otherwise start, adopt or
//! delete pods) and the garbage collector keeps the pods (it deletes pods whose owner does not
//! exist); the device plugin's owner is a DaemonSet no controller runs.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use gpuctl_core::testgen::day2::{self, Size};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

/// Requests in flight while loading.
const CONCURRENCY: usize = 32;
const MARKER: &str = "gpuctl-doctor-live-bench";
const MANAGED_BY: &str = "gpuctl.dev/doctor-live-bench";

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("doctor_live: not run outside `cargo bench --bench doctor_live`");
        return;
    }
    let Some(kubeconfig) = std::env::var_os("GPUCTL_TEST_KUBECONFIG").filter(|p| !p.is_empty())
    else {
        println!("skipped: no test cluster (GPUCTL_TEST_KUBECONFIG is unset; see docs/testing.md)");
        return;
    };
    let kubeconfig = std::path::PathBuf::from(kubeconfig);
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    rt.block_on(load(&kubeconfig));

    let bp = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/blueprints/dgx-h100-training.yaml"
    );
    let mut times = Vec::new();
    let mut requests = BTreeSet::new();
    let mut findings = 0;
    for run in 1..=runs {
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_gpuctl"))
            .args(["doctor", bp, "-o", "json", "--kubeconfig"])
            .arg(&kubeconfig)
            .output()
            .expect("runs gpuctl");
        let t = start.elapsed();
        // Exit 1: the cluster has error findings (it is built to).
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "gpuctl doctor failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("doctor -o json");
        requests.insert(report["read"]["list_requests"].as_u64().unwrap_or(0));
        findings = report["findings"].as_array().map_or(0, Vec::len);
        eprintln!("doctor_live: run {run}: {:.2} s", t.as_secs_f64());
        times.push(t);
    }
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "doctor_live: gpuctl doctor (live, 1,000 GPU nodes, 20,000 pods, 5,000 events): median {:.2} s of {runs} runs (min {:.2} s, max {:.2} s), {} LIST requests, {findings} findings",
        median.as_secs_f64(),
        times[0].as_secs_f64(),
        times[times.len() - 1].as_secs_f64(),
        requests
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("/"),
    );
}

fn resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn api(client: &Client, r: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, r),
        None => Api::all_with(client.clone(), r),
    }
}

/// Creates `v` (and writes `status` through the status subresource when given); an object that
/// exists already is left as it is (`None`). Panics on any other failure.
async fn create(client: &Client, r: &ApiResource, v: Value) -> Option<String> {
    try_create(client, r, v)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn try_create(
    client: &Client,
    r: &ApiResource,
    mut v: Value,
) -> Result<Option<String>, String> {
    let status = v.as_object_mut().and_then(|m| m.remove("status"));
    if let Some(m) = v["metadata"].as_object_mut() {
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            m.remove(k);
        }
    }
    let name = v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ns = v["metadata"]["namespace"].as_str().map(str::to_string);
    let a = api(client, r, ns.as_deref());
    let obj: DynamicObject = serde_json::from_value(v).expect("an object");
    let uid = match a.create(&PostParams::default(), &obj).await {
        Ok(o) => o.metadata.uid,
        Err(kube::Error::Api(s)) if s.code == 409 => return Ok(None),
        Err(e) => return Err(format!("creating {} {name}: {e}", r.kind)),
    };
    if let Some(st) = status.filter(|s| !s.is_null()) {
        a.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": st})),
        )
        .await
        .map_err(|e| format!("writing the status of {} {name}: {e}", r.kind))?;
    }
    Ok(uid)
}

async fn create_all(client: &Client, r: &ApiResource, items: Vec<Value>) {
    let start = Instant::now();
    let n = items.len();
    futures::stream::iter(items)
        .map(|v| create(client, r, v))
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    eprintln!(
        "doctor_live: {n} {} in {:.1} s",
        r.kind,
        start.elapsed().as_secs_f64()
    );
}

/// Loads the generated cluster once (a ConfigMap `default/gpuctl-doctor-live-bench` marks it done).
async fn load(kubeconfig: &std::path::Path) {
    let kc = Kubeconfig::read_from(kubeconfig).expect("reads the kubeconfig");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("loads the kubeconfig");
    let client = Client::try_from(config).expect("a client");
    let cm = resource("v1", "ConfigMap", "configmaps");
    if api(&client, &cm, Some("default"))
        .get_opt(MARKER)
        .await
        .expect("reaches the test API server")
        .is_some()
    {
        eprintln!("doctor_live: the cluster is loaded already ({MARKER})");
        return;
    }
    let start = Instant::now();
    let d = serde_json::to_value(day2::diagnostics(Size::BENCH)).expect("serialises");
    let list = |k: &str| d[k].as_array().cloned().unwrap_or_default();
    let (pods, events) = (list("pods"), list("events"));

    let mut namespaces = BTreeSet::new();
    for o in pods
        .iter()
        .chain(&events)
        .chain(&list("resource_quotas"))
        .chain(&list("local_queues"))
        .chain(&list("workloads"))
    {
        if let Some(ns) = o["metadata"]["namespace"].as_str() {
            namespaces.insert(ns.to_string());
        }
    }
    let ns_items = namespaces
        .iter()
        .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
        .collect();
    create_all(
        &client,
        &resource("v1", "Namespace", "namespaces"),
        ns_items,
    )
    .await;
    create_all(
        &client,
        &resource("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses"),
        list("priority_classes"),
    )
    .await;
    create_all(&client, &resource("v1", "Node", "nodes"), list("nodes")).await;

    // The pods' owners, created first so the garbage collector finds them.
    let mut owners: BTreeMap<(String, String, String), Value> = BTreeMap::new();
    for p in &pods {
        let ns = p["metadata"]["namespace"].as_str().unwrap_or_default();
        for o in p["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let (kind, name) = (
                o["kind"].as_str().unwrap_or_default(),
                o["name"].as_str().unwrap_or_default(),
            );
            let labels = p["metadata"]["labels"].clone();
            let template = json!({"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                    "restartPolicy": if kind == "Job" { "Never" } else { "Always" }}});
            let owner = match kind {
                "Job" => json!({"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"namespace": ns, "name": name},
                    "spec": {"managedBy": MANAGED_BY, "template": template}}),
                "DaemonSet" => json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
                    "metadata": {"namespace": ns, "name": name},
                    "spec": {"selector": {"matchLabels": labels}, "template": template}}),
                other => panic!("no owner of kind {other} is made here"),
            };
            owners
                .entry((kind.into(), ns.into(), name.into()))
                .or_insert(owner);
        }
    }
    let job = resource("batch/v1", "Job", "jobs");
    let ds = resource("apps/v1", "DaemonSet", "daemonsets");
    let uids: BTreeMap<(String, String, String), String> = futures::stream::iter(owners)
        .map(|(key, v)| {
            let r = if key.0 == "Job" { &job } else { &ds };
            let client = &client;
            async move {
                let uid = match create(client, r, v).await {
                    Some(uid) => uid,
                    None => api(client, r, Some(&key.1))
                        .get(&key.2)
                        .await
                        .expect("the owner")
                        .metadata
                        .uid
                        .unwrap_or_default(),
                };
                Ok::<_, ()>((key, uid))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await
        .unwrap_or_default();
    eprintln!("doctor_live: {} pod owners (Jobs, DaemonSets)", uids.len());
    let pods = pods
        .into_iter()
        .map(|mut p| {
            let ns = p["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            for o in p["metadata"]["ownerReferences"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                let key = (
                    o["kind"].as_str().unwrap_or_default().to_string(),
                    ns.clone(),
                    o["name"].as_str().unwrap_or_default().to_string(),
                );
                o["uid"] = json!(uids[&key]);
            }
            p
        })
        .collect();
    create_all(&client, &resource("v1", "Pod", "pods"), pods).await;
    create_all(&client, &resource("v1", "Event", "events"), events).await;
    // Quotas after the pods (quota admission would refuse pods past them); the controller fills
    // `status.used` itself.
    create_all(
        &client,
        &resource("v1", "ResourceQuota", "resourcequotas"),
        list("resource_quotas")
            .into_iter()
            .map(|mut q| {
                q.as_object_mut().map(|m| m.remove("status"));
                q
            })
            .collect(),
    )
    .await;
    // Kueue's objects as the example has them; Kueue writes their status itself.
    let kueue = |kind: &str, plural: &str, key: &str| {
        let items: Vec<Value> = list(key)
            .into_iter()
            .map(|mut v| {
                v.as_object_mut().map(|m| m.remove("status"));
                v
            })
            .collect();
        let api_version = items
            .first()
            .and_then(|v| v["apiVersion"].as_str())
            .unwrap_or("kueue.x-k8s.io/v1beta2")
            .to_string();
        (resource(&api_version, kind, plural), items)
    };
    // Not fatal: the figure is about nodes, pods and events; a refused queue object is reported.
    for (r, items) in [
        kueue("Cohort", "cohorts", "cohorts"),
        kueue("ClusterQueue", "clusterqueues", "cluster_queues"),
        kueue("LocalQueue", "localqueues", "local_queues"),
        kueue("Workload", "workloads", "workloads"),
    ] {
        for mut v in items {
            // The Workload's Job is not made here (the garbage collector would delete it).
            v["metadata"]
                .as_object_mut()
                .map(|m| m.remove("ownerReferences"));
            if let Err(e) = try_create(&client, &r, v).await {
                eprintln!("doctor_live: not loaded: {e}");
            }
        }
    }
    let marker = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "default", "name": MARKER},
        "data": {"loaded-in-seconds": format!("{:.1}", start.elapsed().as_secs_f64())}});
    create(&client, &cm, marker).await;
    eprintln!(
        "doctor_live: loaded in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    // Let the quota controller and Kueue settle before timing.
    tokio::time::sleep(Duration::from_secs(5)).await;
}
