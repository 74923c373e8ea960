//! Cluster tests against the real kube-apiserver of `tools/kube-harness/run up` (issue 4): server-side
//! apply with gpuctl's field manager and strict field validation on built-in kinds and on the upstream
//! Kueue and Volcano CRDs, the CRDs' own schema checks, GPU Nodes from the test helper, and ResourceQuota
//! admission for `nvidia.com/gpu`.
//!
//! Run: `tools/kube-harness/run up && eval "$(tools/kube-harness/run env)" && cargo test --test cluster cluster_harness::`.

use crate::support::cluster;

use std::time::{Duration, Instant};

use cluster::{FIELD_MANAGER, GpuNode, TestCluster, api_error};
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

fn cluster_queue(name: &str, extra_spec: Value) -> Value {
    let mut spec = json!({
        "namespaceSelector": {},
        "resourceGroups": [{
            "coveredResources": ["cpu", "nvidia.com/gpu"],
            "flavors": [{
                "name": "h100-80gb",
                "resources": [
                    {"name": "cpu", "nominalQuota": "256"},
                    {"name": "nvidia.com/gpu", "nominalQuota": "16"},
                ],
            }],
        }],
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn gpu_pod(name: &str, gpus: u32) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "cuda",
                "image": "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04",
                "command": ["nvidia-smi"],
                "resources": {
                    "requests": {"nvidia.com/gpu": gpus.to_string()},
                    "limits": {"nvidia.com/gpu": gpus.to_string()},
                },
            }],
        },
    }))
    .expect("valid pod")
}

fn applied_by(meta: &kube::api::ObjectMeta, manager: &str) -> bool {
    meta.managed_fields
        .iter()
        .flatten()
        .any(|m| m.manager.as_deref() == Some(manager) && m.operation.as_deref() == Some("Apply"))
}

#[needs_test_cluster]
#[tokio::test]
async fn server_is_kubernetes_1_35() {
    let Some(tc) = TestCluster::connect("server_is_kubernetes_1_35").await else {
        return;
    };
    let info = tc.client.apiserver_version().await.expect("GET /version");
    assert_eq!(info.major, "1");
    assert_eq!(info.minor, "35");
    assert!(
        info.git_version.starts_with("v1.35."),
        "unexpected server version {}",
        info.git_version
    );
}

#[needs_test_cluster]
#[tokio::test]
async fn server_side_apply_quota_clusterqueue_and_volcano_queue() {
    let Some(tc) =
        TestCluster::connect("server_side_apply_quota_clusterqueue_and_volcano_queue").await
    else {
        return;
    };

    // ResourceQuota with an extended-resource request quota.
    let quotas: Api<ResourceQuota> = tc.namespaced();
    let rq = tc
        .apply(
            &quotas,
            &json!({
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "gpu-quota", "labels": {"app.kubernetes.io/managed-by": "gpuctl"}},
                "spec": {"hard": {"requests.nvidia.com/gpu": "8", "pods": "20"}},
            }),
        )
        .await
        .expect("apply ResourceQuota");
    assert!(
        applied_by(&rq.metadata, FIELD_MANAGER),
        "managedFields: {:?}",
        rq.metadata.managed_fields
    );
    let rq = quotas
        .get("gpu-quota")
        .await
        .expect("read ResourceQuota back");
    let hard = rq.spec.and_then(|s| s.hard).expect("spec.hard");
    assert_eq!(hard.get("requests.nvidia.com/gpu"), Some(&q("8")));
    assert_eq!(hard.get("pods"), Some(&q("20")));
    assert_eq!(hard.len(), 2, "{hard:?}");

    // Kueue ClusterQueue (v1beta2, cluster-scoped): fields round-trip and the CRD's defaults apply.
    let cqs = tc.dynamic(
        "kueue.x-k8s.io",
        "v1beta2",
        "ClusterQueue",
        "clusterqueues",
        false,
    );
    let cq_name = tc.name("cq");
    tc.apply(
        &cqs,
        &cluster_queue(&cq_name, json!({"cohortName": "gpu-pool"})),
    )
    .await
    .expect("apply ClusterQueue");
    let cq = cqs.get(&cq_name).await.expect("read ClusterQueue back");
    assert!(applied_by(&cq.metadata, FIELD_MANAGER));
    let spec = &cq.data["spec"];
    assert_eq!(spec["cohortName"], "gpu-pool");
    let flavor = &spec["resourceGroups"][0]["flavors"][0];
    assert_eq!(flavor["name"], "h100-80gb");
    assert_eq!(flavor["resources"][1]["name"], "nvidia.com/gpu");
    assert_eq!(flavor["resources"][1]["nominalQuota"], "16");
    assert_eq!(
        spec["queueingStrategy"], "BestEffortFIFO",
        "the CRD's structural-schema default must be applied by the server: {spec}"
    );

    // Volcano Queue (v1beta1, cluster-scoped).
    let queues = tc.dynamic("scheduling.volcano.sh", "v1beta1", "Queue", "queues", false);
    let queue_name = tc.name("queue");
    tc.apply(
        &queues,
        &json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": queue_name},
            "spec": {"weight": 4, "reclaimable": false, "capability": {"nvidia.com/gpu": "16", "cpu": "256"}},
        }),
    )
    .await
    .expect("apply Volcano Queue");
    let queue = queues.get(&queue_name).await.expect("read Queue back");
    assert_eq!(queue.data["spec"]["weight"], 4);
    assert_eq!(queue.data["spec"]["reclaimable"], false);
    assert_eq!(queue.data["spec"]["capability"]["nvidia.com/gpu"], "16");

    // Re-applying a changed manifest with the same manager updates the object in place.
    let cq = tc
        .apply(
            &cqs,
            &cluster_queue(&cq_name, json!({"cohortName": "gpu-pool-2"})),
        )
        .await
        .expect("re-apply ClusterQueue");
    assert_eq!(cq.data["spec"]["cohortName"], "gpu-pool-2");
}

/// Server-side apply of an object with a field its schema does not declare. On Kubernetes 1.35 the
/// apply machinery rejects it before field validation runs, whatever the `fieldValidation` directive,
/// with HTTP 500 "failed to create typed patch object (...): .spec.x: field not declared in schema"
/// (kubernetes/kubernetes#139253, fix proposed in #139255 to make it 400). Accept that or a 4xx.
fn assert_unknown_field_rejected(result: kube::Result<impl std::fmt::Debug>, field: &str) {
    let (code, message) = api_error(result).expect("an unknown field must be rejected");
    assert!(
        matches!(code, 400 | 422)
            || (code == 500 && message.contains("field not declared in schema")),
        "HTTP {code}: {message}"
    );
    assert!(
        message.contains(field),
        "the error must name {field}: {message}"
    );
}

/// A manifest whose `spec` repeats a key, which `serde_json::Value` cannot hold.
#[derive(Debug)]
struct DuplicateKeySpec<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    spec: Vec<(&'a str, Value)>,
}

impl serde::Serialize for DuplicateKeySpec<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Entries<'b>(&'b [(&'b str, Value)]);
        impl serde::Serialize for Entries<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in self.0 {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("apiVersion", self.api_version)?;
        m.serialize_entry("kind", self.kind)?;
        m.serialize_entry("metadata", &json!({"name": self.name}))?;
        m.serialize_entry("spec", &Entries(&self.spec))?;
        m.end()
    }
}

#[needs_test_cluster]
#[tokio::test]
async fn strict_field_validation_rejects_unknown_fields() {
    let Some(tc) = TestCluster::connect("strict_field_validation_rejects_unknown_fields").await
    else {
        return;
    };
    let cqs = tc.dynamic(
        "kueue.x-k8s.io",
        "v1beta2",
        "ClusterQueue",
        "clusterqueues",
        false,
    );
    let quotas: Api<ResourceQuota> = tc.namespaced();

    // Server-side apply with an unknown field: a custom resource and a built-in kind.
    let cq_name = tc.name("cq-typo");
    let typo = cluster_queue(&cq_name, json!({"queueingStrategyy": "StrictFIFO"}));
    assert_unknown_field_rejected(tc.apply(&cqs, &typo).await, "queueingStrategyy");
    let (code, _) = api_error(cqs.get(&cq_name).await)
        .expect("the rejected apply must not create the ClusterQueue");
    assert_eq!(code, 404);
    let quota_typo = json!({
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "typo"},
        "spec": {"hardd": {"requests.nvidia.com/gpu": "1"}},
    });
    assert_unknown_field_rejected(tc.apply(&quotas, &quota_typo).await, "spec.hardd");

    // Strict validation proper, where the directive decides: a duplicate field in an apply is a 400 naming
    // it under Strict, and is let through under Ignore.
    let duplicate = DuplicateKeySpec {
        api_version: "kueue.x-k8s.io/v1beta2",
        kind: "ClusterQueue",
        name: &cq_name,
        spec: vec![
            ("queueingStrategy", json!("StrictFIFO")),
            ("queueingStrategy", json!("BestEffortFIFO")),
        ],
    };
    let strict = cqs
        .patch(
            &cq_name,
            &cluster::apply_params(),
            &Patch::Apply(&duplicate),
        )
        .await;
    let (code, message) =
        api_error(strict).expect("strict validation must reject a duplicate field");
    assert_eq!(code, 400, "{message}");
    assert!(
        message.contains("\"queueingStrategy\" already set"),
        "{message}"
    );
    let ignore = PatchParams::apply(FIELD_MANAGER)
        .validation_ignore()
        .dry_run();
    cqs.patch(&cq_name, &ignore, &Patch::Apply(&duplicate))
        .await
        .expect("with fieldValidation=Ignore the duplicate is not an error");

    // An unknown field in a patch of an existing object: 422 naming it under Strict, dropped under Ignore.
    let cq_name = tc.name("cq-patched");
    tc.apply(&cqs, &cluster_queue(&cq_name, json!({})))
        .await
        .expect("apply ClusterQueue");
    let typo_patch = json!({"spec": {"queueingStrategyy": "StrictFIFO"}});
    let strict = PatchParams::default().validation_strict();
    let (code, message) = api_error(
        cqs.patch(&cq_name, &strict, &Patch::Merge(&typo_patch))
            .await,
    )
    .expect("strict validation must reject the unknown field");
    assert_eq!(code, 422, "{message}");
    assert!(
        message.contains("strict decoding error: unknown field \"spec.queueingStrategyy\""),
        "{message}"
    );
    let ignore = PatchParams::default().validation_ignore().dry_run();
    let patched = cqs
        .patch(&cq_name, &ignore, &Patch::Merge(&typo_patch))
        .await
        .expect("with fieldValidation=Ignore the unknown field is dropped");
    assert!(
        patched.data["spec"].get("queueingStrategyy").is_none(),
        "{}",
        patched.data
    );

    // The CRDs' own schema and CEL rules are enforced too (422 Invalid).
    let borrowing_without_cohort = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": tc.name("cq-cel")},
        "spec": {
            "resourceGroups": [{
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "h100", "resources": [
                    {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4"},
                ]}],
            }],
        },
    });
    let (code, message) =
        api_error(tc.apply(&cqs, &borrowing_without_cohort).await).expect("CEL rule must reject");
    assert_eq!(code, 422, "{message}");
    assert!(
        message.contains("borrowingLimit must be nil when cohort is empty"),
        "{message}"
    );

    let queues = tc.dynamic("scheduling.volcano.sh", "v1beta1", "Queue", "queues", false);
    let too_heavy = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": tc.name("queue-heavy")},
        "spec": {"weight": 70000},
    });
    let (code, message) =
        api_error(tc.apply(&queues, &too_heavy).await).expect("maximum must reject");
    assert_eq!(code, 422, "{message}");
    assert!(message.contains("spec.weight"), "{message}");
}

#[needs_test_cluster]
#[tokio::test]
async fn gpu_nodes_carry_gfd_labels_and_gpu_capacity() {
    let Some(tc) = TestCluster::connect("gpu_nodes_carry_gfd_labels_and_gpu_capacity").await else {
        return;
    };
    tc.create_gpu_node("h100", &GpuNode::h100(8).driver("595.91.07", (13, 2)))
        .await
        .expect("create H100 node");
    tc.create_gpu_node(
        "a100-mig",
        &GpuNode::a100_80gb(2).mig_mixed(&[("1g.10gb", 7, 9728), ("3g.40gb", 2, 40192)]),
    )
    .await
    .expect("create A100 MIG node");
    tc.create_gpu_node("l4", &GpuNode::l4(4))
        .await
        .expect("create L4 node");

    let nodes = tc.gpu_nodes().await.expect("list this test's nodes");
    let names: Vec<_> = nodes
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, [tc.name("a100-mig"), tc.name("h100"), tc.name("l4")]);

    // Read each back by name, as gpuctl would.
    let api: Api<Node> = tc.cluster_scoped();
    let h100 = api.get(&tc.name("h100")).await.expect("get H100 node");
    let labels = h100.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| labels.get(k).map(String::as_str);
    assert_eq!(
        label("nvidia.com/gpu.product"),
        Some("NVIDIA-H100-80GB-HBM3")
    );
    assert_eq!(label("nvidia.com/gpu.count"), Some("8"));
    assert_eq!(label("nvidia.com/gpu.memory"), Some("81559"));
    assert_eq!(label("nvidia.com/gpu.family"), Some("hopper"));
    assert_eq!(label("nvidia.com/cuda.driver.major"), Some("595"));
    assert_eq!(label("nvidia.com/cuda.driver.minor"), Some("91"));
    assert_eq!(label("nvidia.com/cuda.driver.rev"), Some("07"));
    assert_eq!(
        label("nvidia.com/cuda.driver-version.full"),
        Some("595.91.07")
    );
    assert_eq!(label("nvidia.com/cuda.runtime-version.full"), Some("13.2"));
    assert_eq!(label("nvidia.com/mig.capable"), Some("true"));
    assert_eq!(label("nvidia.com/gpu.present"), Some("true"));
    let status = h100
        .status
        .expect("node status written through the status subresource");
    let capacity = status.capacity.expect("capacity");
    let allocatable = status.allocatable.expect("allocatable");
    assert_eq!(capacity.get("nvidia.com/gpu"), Some(&q("8")));
    assert_eq!(allocatable.get("nvidia.com/gpu"), Some(&q("8")));
    assert_eq!(capacity.get("cpu"), Some(&q("128")));
    let ready = status.conditions.unwrap_or_default();
    assert!(
        ready
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "{ready:?}"
    );

    let a100 = api.get(&tc.name("a100-mig")).await.expect("get A100 node");
    let labels = a100.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("nvidia.com/mig.strategy").map(String::as_str),
        Some("mixed")
    );
    assert_eq!(
        labels
            .get("nvidia.com/mig-1g.10gb.count")
            .map(String::as_str),
        Some("7")
    );
    assert_eq!(
        labels
            .get("nvidia.com/mig-3g.40gb.product")
            .map(String::as_str),
        Some("NVIDIA-A100-SXM4-80GB-MIG-3g.40gb")
    );
    let capacity = a100.status.and_then(|s| s.capacity).expect("capacity");
    assert_eq!(capacity.get("nvidia.com/mig-1g.10gb"), Some(&q("7")));
    assert_eq!(capacity.get("nvidia.com/mig-3g.40gb"), Some(&q("2")));
    assert_eq!(
        capacity.get("nvidia.com/gpu"),
        None,
        "mixed MIG exposes no whole GPUs here"
    );

    let l4 = api.get(&tc.name("l4")).await.expect("get L4 node");
    let labels = l4.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("nvidia.com/mig.capable").map(String::as_str),
        Some("false")
    );
    assert_eq!(
        labels.get("nvidia.com/gpu.family").map(String::as_str),
        Some("ada-lovelace")
    );
    assert_eq!(
        l4.status
            .and_then(|s| s.allocatable)
            .unwrap_or_default()
            .get("nvidia.com/gpu"),
        Some(&q("4"))
    );
}

#[needs_test_cluster]
#[tokio::test]
async fn resource_quota_admission_limits_gpu_requests() {
    let Some(tc) = TestCluster::connect("resource_quota_admission_limits_gpu_requests").await
    else {
        return;
    };
    let quotas: Api<ResourceQuota> = tc.namespaced();
    tc.apply(
        &quotas,
        &json!({
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpu-quota"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
        }),
    )
    .await
    .expect("apply ResourceQuota");
    // Fill in status.hard/used at once, as the resource-quota controller does on its first sync.
    tc.sync_quota_status("gpu-quota")
        .await
        .expect("sync quota status");

    let pods: Api<Pod> = tc.namespaced();
    let too_big = gpu_pod("two-gpus", 2);
    // Quota admission reads quotas from an informer; wait (dry run, bounded) until it sees the status.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match api_error(pods.create(&dry_run, &too_big).await) {
            Ok((403, _)) => break,
            other if Instant::now() > deadline => {
                panic!(
                    "quota admission never rejected a 2-GPU pod against a 1-GPU quota: {other:?}"
                )
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }

    let (code, message) = api_error(pods.create(&PostParams::default(), &too_big).await)
        .expect("a pod requesting 2 GPUs must be rejected by a 1-GPU quota");
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("exceeded quota"), "{message}");
    assert!(message.contains("requests.nvidia.com/gpu"), "{message}");

    // One GPU fits, and admission charges it to the quota...
    pods.create(&PostParams::default(), &gpu_pod("one-gpu", 1))
        .await
        .expect("a 1-GPU pod fits the quota");
    let used = quotas
        .get("gpu-quota")
        .await
        .expect("read quota")
        .status
        .and_then(|s| s.used)
        .unwrap_or_default();
    assert_eq!(
        used.get("requests.nvidia.com/gpu"),
        Some(&q("1")),
        "{used:?}"
    );
    // ...so the next one does not.
    let (code, message) = api_error(
        pods.create(&PostParams::default(), &gpu_pod("another-gpu", 1))
            .await,
    )
    .expect("the quota is used up");
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("exceeded quota"), "{message}");
}
