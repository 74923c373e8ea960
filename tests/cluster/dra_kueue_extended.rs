//! One Kueue ClusterQueue resource charged by both GPU stacks (issue 39): on a cluster of its own
//! at Kubernetes v1.36.3 (`run up --kube 1.36 --with-scheduler --without-kueue`: the real
//! kube-apiserver, scheduler and kube-controller-manager with its job, resourceclaim and quota
//! controllers), with the real Kueue v0.19.2 installed by `gpuctl apply` from its real chart (the
//! chart Deployment's pod played by `support::releases::kueue_pod`, the harness's Kueue binary with
//! the ConfigMap helm installed).
//!
//! Two pools: one on the device plugin (its node advertises `nvidia.com/gpu: 8`) and one moved to
//! DRA (`gpuPlugin: dra`, `spec.dra.extendedResources`; its node advertises nothing and publishes a
//! ResourceSlice the way NVIDIA's DRA driver v25.12.0 does, played by `support::dra`, beside the
//! chart's `gpu.nvidia.com` class with `extendedResourceName: nvidia.com/gpu`). gpuctl's Kueue
//! Configuration maps `gpu.nvidia.com` to `nvidia.com/gpu` (`resources.deviceClassMappings`), and
//! its ClusterQueue gives each pool's flavor 2 `nvidia.com/gpu`.
//!
//! Asserted, with Kueue's and the scheduler's own decisions: two Jobs that only ask
//! `nvidia.com/gpu: 2`, one per pool, are both admitted and charged to the ClusterQueue's one
//! resource `nvidia.com/gpu` (the DRA one through Kueue's extended-resource path, the request
//! replaced by the mapped name); Kueue starts them and the real scheduler binds the DRA one's pod to
//! the DRA node through a claim it made (`status.extendedResourceClaimStatus`), allocated from that
//! node's slice, and the other's to the device-plugin node without one; the ClusterQueue reports
//! 2 + 2 reserved; a third Job beyond the quota waits with Kueue's `insufficient unused quota`;
//! `gpuctl doctor` reports neither the healthy DRA-served pod nor the DRA node's missing
//! `nvidia.com/gpu` allocatable, and the next plan is empty.

use std::process::Command;
use std::time::{Duration, Instant};

use gpuctl_test_skip::needs_test_cluster;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::{Value, json};

use crate::dra_harness::poll;
use crate::support;
use support::cluster::{GpuNode, TestCluster, create_admitted};
use support::dra::{self, DraNode};
use support::fresh::FreshCluster;
use support::releases::{Hooks, gpuctl, text};

fn blueprint(p: &str) -> String {
    let head = crate::dra_apply::head(p).replace("version: \"1.35.1\"", "version: \"1.36.3\"");
    format!(
        r#"{head}  nodePools:
    - name: {p}-dp
      selector: {{ gpuctl.dev/pool: {p}-dp }}
      nodes: 1
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
    - name: {p}-dra
      selector: {{ gpuctl.dev/pool: {p}-dra }}
      nodes: 1
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
      gpuPlugin: dra
  dra:
    driver: {{ deployment: standalone, version: v25.12.0 }}
    extendedResources: true
  scheduling:
    queueing: kueue
    kueue:
      version: v0.19.2
      install: helm
      chart: {{ path: kueue-0.19.2.tgz }}
      clusterQueues:
        - name: {p}-cq
          resources:
            - pool: {p}-dp
              quota: {{ nvidia.com/gpu: 2, cpu: "64", memory: 512Gi }}
            - pool: {p}-dra
              quota: {{ nvidia.com/gpu: 2, cpu: "64", memory: 512Gi }}
  tenants:
    - name: {p}-t
      namespaces: [{p}-ns]
      queue: {p}-cq
"#
    )
}

/// A Job in Kueue's `default` LocalQueue whose one pod only asks `nvidia.com/gpu: n`, pinned to
/// `pool` by its label, for the harness's scheduler.
fn job(name: &str, n: u32, pool: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"suspend": true, "template": {"spec": {
            "restartPolicy": "Never",
            "schedulerName": dra::SCHEDULER,
            "nodeSelector": {"gpuctl.dev/pool": pool},
            "containers": [{
                "name": "cuda",
                "image": "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04",
                "command": ["nvidia-smi", "-L"],
                "resources": {
                    "requests": {"nvidia.com/gpu": n.to_string()},
                    "limits": {"nvidia.com/gpu": n.to_string()},
                },
            }],
        }}},
    }))
    .unwrap()
}

fn api(
    tc: &TestCluster,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match ns {
        Some(ns) => Api::namespaced_with(tc.client.clone(), ns, &ar),
        None => Api::all_with(tc.client.clone(), &ar),
    }
}

/// The Workload Kueue made for Job `job`, once `done` holds for it (60 s at most).
async fn workload(
    workloads: &Api<DynamicObject>,
    job: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Value::Null;
    while Instant::now() < deadline {
        for w in workloads.list(&ListParams::default()).await.unwrap() {
            let w = serde_json::to_value(&w).unwrap();
            let owned = w["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|o| o.iter().any(|r| r["kind"] == "Job" && r["name"] == job));
            if owned {
                if done(&w) {
                    return w;
                }
                last = w;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "Job {job}'s Workload never {what}; last seen: {}",
        last["status"]
    );
}

fn condition<'a>(w: &'a Value, kind: &str) -> Option<&'a Value> {
    w["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn quota_reserved(w: &Value) -> Option<bool> {
    condition(w, "QuotaReserved").map(|c| c["status"] == "True")
}

/// The node Job `job`'s pod is bound to, and the claim the scheduler made for its extended
/// resources (`status.extendedResourceClaimStatus.resourceClaimName`, the API of 1.36).
async fn job_pod(pods: &Api<DynamicObject>, job: &str) -> (String, String, Option<String>) {
    poll(
        60,
        &format!("the pod of Job {job} to be bound"),
        async || {
            let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
            let list = pods.list(&lp).await.ok()?;
            let p = list.items.first()?;
            let node = p.data["spec"]["nodeName"].as_str()?.to_string();
            let claim = p.data["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
                .as_str()
                .map(str::to_string);
            Some((p.metadata.name.clone().unwrap_or_default(), node, claim))
        },
    )
    .await
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_cluster_queue_resource_is_charged_by_device_plugin_and_dra_served_gpus() {
    let Some(_shared) = TestCluster::connect("dra_kueue_extended").await else {
        return;
    };
    let started = Instant::now();
    let fresh = FreshCluster::up_with(
        "dra-kq-ext",
        &["--kube", "1.36", "--with-scheduler", "--without-kueue"],
    );
    assert_eq!(fresh.var("GPUCTL_HARNESS_KUBE"), "v1.36.3");
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "dra-kq-ext")
        .await
        .expect("connects to the fresh cluster");
    let helm = fresh.var("GPUCTL_HELM");
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(&helm)
        .args(["package", &fresh.var("GPUCTL_KUEUE_CHART"), "-d"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "helm package: {}", text(&o));
    let path = support::releases::helm_path(dir.path(), &helm, Hooks::Run);
    let mut p = tc.name("kqx");
    p.truncate(24);
    let p = p.trim_end_matches('-').to_string();
    let pool = |s: &str| format!("{p}-{s}");
    let label = "gpuctl.dev/pool";

    // The chart's gpu.nvidia.com as its v1 template writes it (extendedResourceName kept by 1.36);
    // one node on the device plugin, one on DRA with its slice.
    let classes = dra::create_device_classes_v1(&tc).await.unwrap();
    assert!(
        classes
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some("gpu.nvidia.com")
                && c.spec.extended_resource_name.as_deref() == Some("nvidia.com/gpu")),
        "1.36 keeps the chart's extendedResourceName"
    );
    let dp = tc
        .create_ready_gpu_node(
            "dp",
            &GpuNode::h100(8)
                .driver("595.91.07", (13, 2))
                .label(label, &pool("dp")),
        )
        .await
        .unwrap();
    let (dra_node, _) = dra::create_dra_node(
        &tc,
        "dra",
        &GpuNode::h100(8)
            .driver("595.91.07", (13, 2))
            .label(label, &pool("dra")),
        |n| DraNode::h100(n, 8),
    )
    .await
    .unwrap();

    // gpuctl's Kueue Configuration maps the class that serves nvidia.com/gpu to that name.
    let bp = dir.path().join("kq-ext.yaml");
    std::fs::write(&bp, blueprint(&p)).unwrap();
    let (bps, kcs) = (bp.display().to_string(), kc.display().to_string());
    let out = dir.path().join("out");
    let o = gpuctl(&["render", &bps, "-o", &out.display().to_string()], &path);
    assert!(o.status.success(), "render: {}", text(&o));
    let values = std::fs::read_to_string(out.join("helm/kueue-values.yaml")).unwrap();
    let values: Value = serde_saphyr::from_str(&values).unwrap();
    let config: Value = serde_saphyr::from_str(
        values["managerConfig"]["controllerManagerConfigYaml"]
            .as_str()
            .unwrap_or_else(|| panic!("managerConfig in {values:#}")),
    )
    .unwrap();
    assert_eq!(
        config["resources"]["deviceClassMappings"],
        json!([{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}]),
        "{config:#}"
    );

    let args = [
        "apply",
        &bps,
        "--kubeconfig",
        &kcs,
        "--yes",
        "--crd-timeout",
        "60s",
        "--wait-timeout",
        "60s",
    ];
    let (o, _pod) =
        support::releases::apply_with_kueue_pod(&fresh, &tc.client, dir.path(), &path, &args).await;
    assert!(o.status.success(), "apply: {}", text(&o));

    let ns = format!("{p}-ns");
    let jobs = api(&tc, "batch", "v1", "Job", "jobs", Some(&ns));
    let workloads = api(
        &tc,
        "kueue.x-k8s.io",
        "v1beta2",
        "Workload",
        "workloads",
        Some(&ns),
    );
    let pods = api(&tc, "", "v1", "Pod", "pods", Some(&ns));

    // Both admitted, both charged to the ClusterQueue's nvidia.com/gpu, each in its pool's flavor.
    for (name, pl) in [("on-dp", "dp"), ("on-dra", "dra")] {
        create_admitted(&jobs, &job(name, 2, &pool(pl)))
            .await
            .unwrap();
        let w = workload(&workloads, name, "was admitted", |w| {
            quota_reserved(w) == Some(true)
        })
        .await;
        let a = &w["status"]["admission"]["podSetAssignments"][0];
        assert_eq!(a["resourceUsage"]["nvidia.com/gpu"], "2", "{name}: {a}");
        assert_eq!(
            a["flavors"]["nvidia.com/gpu"],
            json!(pool(pl)),
            "{name}: {a}"
        );
    }

    // Kueue started both; the scheduler serves the DRA one through a claim it made from the
    // chart's class, allocated from the DRA node's own slice, the other the old way.
    let (_, node, claim) = job_pod(&pods, "on-dra").await;
    assert_eq!(node, dra_node);
    let claim = claim.expect("a pod served by DRA has an extended-resource claim");
    let claims = api(
        &tc,
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        "resourceclaims",
        Some(&ns),
    );
    let c = claims.get(&claim).await.unwrap();
    assert_eq!(
        c.data["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"],
        json!("gpu.nvidia.com")
    );
    let results = c.data["status"]["allocation"]["devices"]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(results.len(), 2, "{:?}", c.data);
    assert!(
        results.iter().all(|r| r["pool"] == json!(dra_node)),
        "{results:?}"
    );
    let (_, node, claim) = job_pod(&pods, "on-dp").await;
    assert_eq!((node.as_str(), claim), (dp.as_str(), None));

    // The ClusterQueue: one resource, 2 + 2 reserved.
    let cqs = api(
        &tc,
        "kueue.x-k8s.io",
        "v1beta2",
        "ClusterQueue",
        "clusterqueues",
        None,
    );
    let cq = format!("{p}-cq");
    poll(
        60,
        "the ClusterQueue to report 2 + 2 reserved",
        async || {
            let q = cqs.get(&cq).await.ok()?;
            let reserved: Vec<(String, String)> = q.data["status"]["flavorsReservation"]
                .as_array()?
                .iter()
                .flat_map(|f| {
                    f["resources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|r| r["name"] == "nvidia.com/gpu")
                        .map(|r| {
                            (
                                f["name"].as_str().unwrap_or_default().to_string(),
                                r["total"].as_str().unwrap_or_default().to_string(),
                            )
                        })
                })
                .collect();
            (reserved == vec![(pool("dp"), "2".into()), (pool("dra"), "2".into())]).then_some(())
        },
    )
    .await;

    // Beyond the quota: Kueue keeps it waiting.
    create_admitted(&jobs, &job("beyond", 1, &pool("dra")))
        .await
        .unwrap();
    let w = workload(&workloads, "beyond", "reported its quota", |w| {
        quota_reserved(w) == Some(false)
    })
    .await;
    let message = condition(&w, "QuotaReserved").unwrap()["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("insufficient unused quota") && message.contains("nvidia.com/gpu"),
        "{message}"
    );

    // doctor: the DRA node advertising no nvidia.com/gpu is no fault, nor is its bound pod.
    let o = gpuctl(
        &["doctor", &bps, "--kubeconfig", &kcs, "--output", "json"],
        &path,
    );
    let report: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("doctor JSON ({e}): {}", text(&o)));
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    let about = |s: &str| {
        findings
            .iter()
            .filter(|f| f.to_string().contains(s))
            .map(|f| f["id"].to_string())
            .collect::<Vec<_>>()
    };
    assert!(
        about(&format!("node/{dra_node}")).is_empty(),
        "{findings:#?}"
    );
    assert!(about("on-dra").is_empty(), "{findings:#?}");
    assert!(
        findings
            .iter()
            .all(|f| f["id"] != "GPU241" && f["id"] != "GPU203"),
        "{findings:#?}"
    );
    // The one waiting Job is the finding: the queue has no room for nvidia.com/gpu.
    assert_eq!(
        findings.iter().map(|f| f["id"].clone()).collect::<Vec<_>>(),
        vec![json!("GPU206")],
        "{findings:#?}"
    );
    assert!(
        about("beyond").contains(&"\"GPU206\"".to_string()),
        "{findings:#?}"
    );

    // Converged: the next plan has nothing to do.
    let o = gpuctl(
        &["plan", &bps, "--kubeconfig", &kcs, "--detailed-exitcode"],
        &path,
    );
    assert_eq!(o.status.code(), Some(0), "plan after apply: {}", text(&o));
    eprintln!(
        "dra_kueue_extended: done in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}
