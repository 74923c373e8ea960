//! DRA claims admitted by the real Kueue v0.19.2 with gpuctl's rendered configuration (issue 29).
//!
//! A fresh harness without Kueue (`run up --without-kueue`); `gpuctl apply` installs Kueue's real
//! chart with gpuctl's values, whose Configuration maps each shape's DeviceClass to the resource
//! the device plugin gives the same devices (`resources.deviceClassMappings`: the `h100x2` shape
//! to `nvidia.com/gpu`), and the queue, the tenant's ResourceClaimTemplate and quota. The stand-in
//! of `support::releases::kueue_pod` plays the chart Deployment's pod (the harness's Kueue binary
//! with the ConfigMap helm installed), as in `kueue_release`; `support::dra` publishes one node's
//! ResourceSlice the way NVIDIA's DRA driver does (Kueue checks a template's selectors against
//! the published devices).
//!
//! Asserted, with Kueue's own decisions: a Job whose pod uses the tenant's template is admitted and
//! its Workload is charged 2 `nvidia.com/gpu` (the shape's count) to the pool's flavor; the next
//! one, beyond the ClusterQueue's quota of 2, waits with Kueue's `insufficient unused quota`; a Job
//! on a template of a class gpuctl did not map (NVIDIA's `gpu.nvidia.com`) is refused as unmapped;
//! `gpuctl doctor` names the refused one (GPU216) and the waiting one (GPU206); and after apply the
//! next plan is empty.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use gpuctl_test_skip::needs_test_cluster;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster, create_admitted};
use support::dra::{self, DraNode};
use support::fresh::FreshCluster;
use support::releases::{Hooks, gpuctl, text};

fn blueprint(p: &str) -> String {
    format!(
        r#"{head}  nodePools:
    - name: {p}-h100
      role: training
      selector: {{ gpuctl.dev/pool: {p}-h100 }}
      nodes: 1
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
  dra:
    shapes:
      - name: {p}-h100x2
        gpu: {{ model: H100-SXM5-80GB }}
        count: 2
  scheduling:
    queueing: kueue
    kueue:
      version: v0.19.2
      install: helm
      chart: {{ path: kueue-0.19.2.tgz }}
      clusterQueues:
        - name: {p}-cq
          resources:
            - pool: {p}-h100
              quota: {{ nvidia.com/gpu: 2, cpu: "64", memory: 512Gi }}
  tenants:
    - name: {p}-t
      namespaces: [{p}-ns]
      queue: {p}-cq
      claims: {{ {p}-h100x2: 4 }}
"#,
        head = crate::dra_apply::head(p)
    )
}

/// A Job in Kueue's `default` LocalQueue whose one pod uses the claim made from `template`.
fn job(name: &str, template: &str) -> DynamicObject {
    let pod = dra::claim_pod("unused", template, None, None);
    let mut spec = serde_json::to_value(pod.spec).unwrap();
    spec["restartPolicy"] = json!("Never");
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"suspend": true, "template": {"spec": spec}},
    }))
    .unwrap()
}

fn api(
    tc: &TestCluster,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    ns: &str,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(tc.client.clone(), ns, &ar)
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

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_claims_are_admitted_by_the_real_kueue_with_gpuctls_device_class_mappings() {
    let Some(_shared) = TestCluster::connect("dra_kueue").await else {
        return;
    };
    let fresh = FreshCluster::up_with("dra-kueue", &["--without-kueue"]);
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "dra-kueue")
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
    let mut p = tc.prefix.clone();
    p.truncate(24);
    let p = p.trim_end_matches('-').to_string();
    let bp = dir.path().join("dra-kueue.yaml");
    std::fs::write(&bp, blueprint(&p)).unwrap();
    let (bps, kcs) = (bp.display().to_string(), kc.display().to_string());
    let pool = format!("{p}-h100");
    dra::create_dra_node(
        &tc,
        "h100-0",
        &GpuNode::h100(8)
            .driver("595.91.07", (13, 2))
            .label("gpuctl.dev/pool", &pool),
        |n| DraNode::h100(n, 8),
    )
    .await
    .unwrap();

    // gpuctl renders the mapping into Kueue's chart values.
    let o = gpuctl(
        &[
            "render",
            &bps,
            "-o",
            &dir.path().join("out").display().to_string(),
        ],
        &path,
    );
    assert!(o.status.success(), "render: {}", text(&o));
    let values = std::fs::read_to_string(dir.path().join("out/helm/kueue-values.yaml")).unwrap();
    let class = format!("{p}-h100x2.shapes.gpuctl.dev");
    assert!(
        values.contains("deviceClassMappings") && values.contains(&class),
        "{values}"
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
    let jobs = api(&tc, "batch", "v1", "Job", "jobs", &ns);
    let workloads = api(
        &tc,
        "kueue.x-k8s.io",
        "v1beta2",
        "Workload",
        "workloads",
        &ns,
    );
    let template = format!("{p}-h100x2");

    // Within quota: admitted, charged the shape's count to nvidia.com/gpu in the pool's flavor.
    create_admitted(&jobs, &job("first", &template))
        .await
        .unwrap();
    let w = workload(&workloads, "first", "was admitted", |w| {
        quota_reserved(w) == Some(true)
    })
    .await;
    let assignment = &w["status"]["admission"]["podSetAssignments"][0];
    assert_eq!(
        assignment["resourceUsage"]["nvidia.com/gpu"], "2",
        "{assignment}"
    );
    assert_eq!(
        assignment["flavors"]["nvidia.com/gpu"],
        json!(pool),
        "{assignment}"
    );

    // Beyond the ClusterQueue's quota of 2: Kueue keeps it waiting.
    create_admitted(&jobs, &job("second", &template))
        .await
        .unwrap();
    let w = workload(&workloads, "second", "reported its quota", |w| {
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
    tokio::time::sleep(Duration::from_secs(3)).await;
    let w = workload(&workloads, "second", "stayed waiting", |_| true).await;
    assert_eq!(quota_reserved(&w), Some(false), "{}", w["status"]);

    // A template of a class gpuctl did not map: Kueue refuses it as unmapped, whatever the quota.
    let rcts = api(
        &tc,
        "resource.k8s.io",
        "v1",
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        &ns,
    );
    let raw: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "raw-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}},
    }))
    .unwrap();
    rcts.create(&Default::default(), &raw).await.unwrap();
    create_admitted(&jobs, &job("unmapped", "raw-gpu"))
        .await
        .unwrap();
    let w = workload(&workloads, "unmapped", "was refused as unmapped", |w| {
        w["status"]
            .to_string()
            .contains("is not mapped in DRA configuration")
    })
    .await;
    assert_ne!(quota_reserved(&w), Some(true), "{}", w["status"]);

    // `gpuctl doctor` names it (GPU216, with the fix for an unmapped class) and the waiting one as
    // a queue without room (GPU206); the admitted one is no finding.
    let o = gpuctl(
        &["doctor", &bps, "--kubeconfig", &kcs, "--output", "json"],
        &path,
    );
    let report: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("doctor JSON ({e}): {}", text(&o)));
    let with = |id: &str| -> Vec<String> {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["id"] == id)
            .map(|f| f["subjects"][0].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let refused = with("GPU216");
    assert_eq!(refused.len(), 1, "{report:#}");
    assert!(refused[0].contains("unmapped"), "{refused:?}");
    let full = with("GPU206");
    assert!(full.iter().any(|s| s.contains("second")), "{report:#}");
    assert!(!format!("{report}").contains("job-first"), "{report:#}");

    // Converged: the next plan has nothing to do.
    let o = gpuctl(
        &["plan", &bps, "--kubeconfig", &kcs, "--detailed-exitcode"],
        &path,
    );
    assert_eq!(o.status.code(), Some(0), "plan after apply: {}", text(&o));
}
