//! Moving a pool from the device plugin to DRA on the ClusterPolicy + standalone path (issue 29),
//! against the shared test API server.
//!
//! `a_pool_moves_to_dra_only_once_no_pod_holds_device_plugin_gpus`: a blueprint with
//! `spec.dra.driver.deployment: standalone` and one of its two pools declared `gpuPlugin: dra`,
//! rendered by gpuctl (its node patches as rendered; of its objects only the tenant's namespaced
//! ones and its namespaces, so the cluster-wide NVIDIADriver other tests apply is not touched).
//! With a pod bound to a node of that pool requesting `nvidia.com/gpu` (no kubelet: it stays
//! Pending with its `nodeName`, which is what the device plugin's accounting sees), the plan has an
//! error naming the pod and its node, `--force-migration` turns it into a warning, and apply
//! refuses under its lock with nothing written (the nodes keep their labels). Once the pod is
//! gone, apply moves the labels: the DRA pool's nodes get the operator's device-plugin switch off
//! and the DRA kubelet plugin's label on, the other pool's node the reverse; and the next plan is
//! empty, with one warning: the moved nodes still advertise `nvidia.com/gpu` (no GPU Operator runs
//! here to take the device plugin off). No DRA driver runs here (its chart cannot be obtained in this environment): the test
//! covers gpuctl's side of the move, not the kubelet plugin publishing ResourceSlices.

use crate::render_common;
use crate::support;

use gpuctl_cluster::apply::{self, ApplyError, ApplyOptions};
use gpuctl_cluster::read;
use gpuctl_core::located::Severity;
use gpuctl_core::plan::PlanOptions;
use gpuctl_core::render::RenderedSet;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use support::cluster::{GpuNode, TestCluster, gpuctl_kube};
use support::fixture::{errors, quiet};

const DEVICE_PLUGIN: &str = "nvidia.com/gpu.deploy.device-plugin";
const DRA_PLUGIN: &str = "nvidia.com/dra-kubelet-plugin";

fn blueprint(p: &str) -> String {
    format!(
        r#"{head}  nodePools:
    - name: {p}-h100
      selector: {{ gpuctl-test/pool: {p}-h100 }}
      nodes: 2
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
      gpuPlugin: dra
    - name: {p}-a100
      selector: {{ gpuctl-test/pool: {p}-a100 }}
      nodes: 1
      gpu: {{ model: A100-SXM4-80GB, count: 4 }}
  dra:
    driver: {{ deployment: standalone, version: v25.12.0 }}
    shapes:
      - name: {p}-h100
        gpu: {{ model: H100-SXM5-80GB }}
  tenants:
    - name: {p}-t
      namespaces: [{p}-ns]
      claims: {{ {p}-h100: 8 }}
"#,
        head = crate::dra_apply::head(p)
    )
}

/// gpuctl's render of the blueprint, keeping the node patches and only the objects of this test's
/// own namespaces (no cluster-wide object other tests share).
fn set(p: &str) -> RenderedSet {
    let mut set = render_common::render_text("dra-migration.yaml", &blueprint(p));
    set.objects.retain(|o| {
        let ns = o.namespace.as_deref().unwrap_or(o.name.as_str());
        (o.namespace.is_some() || o.kind == "Namespace") && ns.starts_with(p)
    });
    assert!(!set.objects.is_empty());
    assert!(set.node_patches.iter().any(|n| n.dra_switch.is_some()));
    set
}

fn opts() -> ApplyOptions {
    ApplyOptions {
        poll: std::time::Duration::from_millis(200),
        wait_timeout: std::time::Duration::from_secs(20),
        lock_duration: std::time::Duration::from_secs(5),
        ..ApplyOptions::default()
    }
}

async fn labels(tc: &TestCluster, node: &str) -> (Option<String>, Option<String>) {
    let n = Api::<Node>::all(tc.client.clone()).get(node).await.unwrap();
    let l = n.metadata.labels.unwrap_or_default();
    (l.get(DEVICE_PLUGIN).cloned(), l.get(DRA_PLUGIN).cloned())
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_moves_to_dra_only_once_no_pod_holds_device_plugin_gpus() {
    let Some(tc) = TestCluster::connect("dra_migration").await else {
        return;
    };
    let k = gpuctl_kube().await;
    let mut p = tc.name("drm");
    p.truncate(30);
    let p = p.trim_end_matches('-').to_string();
    let set = set(&p);

    // The device plugin is on every GPU node until told otherwise (the operator's default).
    let h100 = GpuNode::h100(8)
        .driver("595.91.07", (13, 0))
        .label("gpuctl-test/pool", &format!("{p}-h100"))
        .label(DEVICE_PLUGIN, "true");
    let a100 = GpuNode::a100_80gb(4)
        .driver("595.91.07", (13, 0))
        .label("gpuctl-test/pool", &format!("{p}-a100"))
        .label(DEVICE_PLUGIN, "true");
    let h = [
        tc.create_gpu_node("h0", &h100).await.unwrap(),
        tc.create_gpu_node("h1", &h100).await.unwrap(),
    ]
    .map(|n| n.metadata.name.unwrap());
    let a = tc
        .create_gpu_node("a0", &a100)
        .await
        .unwrap()
        .metadata
        .name
        .unwrap();

    // A training pod holds a device-plugin GPU on the first H100 node.
    let pods: Api<Pod> = tc.namespaced();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "train-0", "labels": tc.owner_labels()},
        "spec": {"nodeName": h[0], "containers": [{"name": "c", "image": "busybox",
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let holder = format!("{}/train-0", tc.namespace);

    let plan = read::plan(&k, &set, PlanOptions::default(), 32)
        .await
        .unwrap();
    let errs = errors(&plan);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].contains(&format!("{holder} (nvidia.com/gpu: 1 on {})", h[0]))
            && errs[0].contains(&format!("pool `{p}-h100` moves 2 node(s)"))
            && errs[0].contains("--force-migration"),
        "{}",
        errs[0]
    );
    let forced = read::plan(
        &k,
        &set,
        PlanOptions {
            force_migration: true,
            ..PlanOptions::default()
        },
        32,
    )
    .await
    .unwrap();
    assert!(errors(&forced).is_empty());
    assert!(
        forced
            .findings
            .iter()
            .any(|f| f.severity == Severity::Warning && f.message.contains(&holder))
    );

    // Apply checks again under its lock and writes nothing.
    match apply::apply(&k, &plan, &opts(), &quiet()).await {
        Err(ApplyError::Migration(m)) => {
            assert!(m.iter().any(|m| m.contains(&holder)), "{m:#?}")
        }
        other => panic!("apply must refuse the move: {other:?}"),
    }
    for n in &h {
        assert_eq!(labels(&tc, n).await, (Some("true".into()), None), "{n}");
    }

    // The pod gone (drained), the move goes through and converges.
    pods.delete("train-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let plan = read::plan(&k, &set, PlanOptions::default(), 32)
        .await
        .unwrap();
    assert!(errors(&plan).is_empty(), "{:#?}", errors(&plan));
    let moved: Vec<&str> = plan.nodes.iter().map(|n| n.node.as_str()).collect();
    assert!(h.iter().all(|n| moved.contains(&n.as_str())), "{moved:?}");
    apply::apply(&k, &plan, &opts(), &quiet())
        .await
        .expect("apply moves the pool");
    for n in &h {
        assert_eq!(
            labels(&tc, n).await,
            (Some("false".into()), Some("true".into())),
            "{n}"
        );
    }
    assert_eq!(
        labels(&tc, &a).await,
        (Some("true".into()), Some("false".into()))
    );
    let next = read::plan(&k, &set, PlanOptions::default(), 32)
        .await
        .unwrap();
    assert!(
        !next.summary.has_changes(),
        "the next plan is empty: {:?}",
        next.summary
    );
    assert!(errors(&next).is_empty(), "{:#?}", errors(&next));
    // No GPU Operator runs here to take the device plugin off: the moved nodes still advertise
    // `nvidia.com/gpu`, which the plan warns about (the runbook's step 4).
    let still: Vec<&str> = next
        .findings
        .iter()
        .filter(|f| f.message.contains("still advertise device-plugin GPUs"))
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(still.len(), 1, "{:#?}", next.findings);
    assert!(
        still[0].contains(&format!("2 node(s) of pool `{p}-h100`")),
        "{}",
        still[0]
    );
}
