//! Kubernetes 1.36's DRA features as gpuctl renders them (issue 39), on a cluster of their own at
//! Kubernetes v1.36.3 (`run up --kube 1.36 --with-scheduler`: the real kube-apiserver, scheduler
//! and kube-controller-manager with its resourceclaim and quota controllers).
//!
//! `pods_keep_asking_nvidia_com_gpu_after_their_pool_moves_to_dra`: the zero-edit move
//! (`spec.dra.extendedResources`). Three pools: one on the device plugin (its node advertises
//! `nvidia.com/gpu: 8`), one of whole H100s and one of A100s pre-split into `1g.10gb` moved to DRA
//! (`gpuPlugin: dra`; their nodes advertise nothing and publish ResourceSlices the way NVIDIA's
//! DRA driver v25.12.0 does, played by `support::dra`, with the chart's `gpu.nvidia.com` class
//! as its template writes it on resource.k8s.io/v1, `extendedResourceName: nvidia.com/gpu`).
//! gpuctl renders no class for `nvidia.com/gpu` (the chart's serves it) and one for
//! `nvidia.com/mig-1g.10gb`. Pods that only ask `nvidia.com/gpu: 2` land on the DRA pool through a
//! claim the scheduler makes and allocates from that node's slice, or on the device-plugin pool the
//! old way (no claim); a pod asking `nvidia.com/mig-1g.10gb: 1` gets a MIG device through gpuctl's
//! class. The tenant's one `requests.nvidia.com/gpu: 4` quota is charged by both stacks and refuses
//! the next pod. The same blueprint declared for 1.35 is refused naming DRAExtendedResource
//! (GPU158); after apply the next plan is empty (a dropped `extendedResourceName` would show).

use std::time::Instant;

use crate::dra_harness::poll;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

use crate::support;
use support::cluster::{GpuNode, TestCluster};
use support::dra::{self, DraNode};
use support::fresh::FreshCluster;
use support::gpuctl::{Gpuctl, TODAY};

fn gpuctl(args: &[&str], kubeconfig: &str) -> std::process::Output {
    Gpuctl::new(args)
        .args(["--kubeconfig", kubeconfig])
        .today(TODAY)
        .output()
}

/// The blueprint: Kubernetes `kube`, the standalone DRA driver v25.12.0, extended resources on.
fn blueprint(p: &str, kube: &str) -> String {
    let head =
        crate::dra_apply::head(p).replace("version: \"1.35.1\"", &format!("version: \"{kube}\""));
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
    - name: {p}-mig
      selector: {{ gpuctl.dev/pool: {p}-mig }}
      nodes: 1
      gpu: {{ model: A100-SXM4-80GB, count: 1 }}
      gpuPlugin: dra
      partitioning:
        mode: mig
        mig: {{ strategy: mixed, layout: {{ "1g.10gb": 7 }} }}
  dra:
    driver: {{ deployment: standalone, version: v25.12.0 }}
    extendedResources: true
  tenants:
    - name: {p}-t
      namespaces: [{p}-ns]
      quota: {{ nvidia.com/gpu: 4 }}
"#
    )
}

/// A pod that asks `resource: n` (requests = limits), nothing else, for the harness's scheduler,
/// pinned to a pool by its label.
fn plain_pod(name: &str, resource: &str, n: u32, pool: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "schedulerName": dra::SCHEDULER,
            "nodeSelector": {"gpuctl.dev/pool": pool},
            "containers": [{
                "name": "cuda",
                "image": "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04",
                "command": ["nvidia-smi", "-L"],
                "resources": {
                    "requests": {resource: n.to_string()},
                    "limits": {resource: n.to_string()},
                },
            }],
        },
    }))
    .unwrap()
}

fn dynamic(
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

/// The node a pod is bound to, and the claim the scheduler made for its extended resources
/// (`status.extendedResourceClaimStatus.resourceClaimName`, read as JSON: the API of 1.36).
async fn bound(tc: &TestCluster, ns: &str, pod: &str) -> (String, Option<String>) {
    let pods = dynamic(tc, "", "v1", "Pod", "pods", Some(ns));
    poll(60, &format!("pod {pod} to be bound"), async || {
        let p = pods.get(pod).await.ok()?;
        let node = p.data["spec"]["nodeName"].as_str()?.to_string();
        let claim = p.data["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
            .as_str()
            .map(str::to_string);
        Some((node, claim))
    })
    .await
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_keep_asking_nvidia_com_gpu_after_their_pool_moves_to_dra() {
    let Some(_shared) = TestCluster::connect("dra_extended").await else {
        return;
    };
    let started = Instant::now();
    let fresh = FreshCluster::up_with(
        "dra-ext",
        &["--kube", "1.36", "--with-scheduler", "--without-kueue"],
    );
    assert_eq!(fresh.var("GPUCTL_HARNESS_KUBE"), "v1.36.3");
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "dra-ext")
        .await
        .unwrap();
    let kc = kc.to_str().unwrap().to_string();
    let mut p = tc.name("ext");
    p.truncate(24);
    let p = p.trim_end_matches('-').to_string();
    let pool = |s: &str| format!("{p}-{s}");
    let label = "gpuctl.dev/pool";

    // The chart's gpu.nvidia.com as its v1 template writes it (with extendedResourceName), and
    // mig.nvidia.com; nodes: one on the device plugin, two on DRA with their slices.
    let classes = dra::create_device_classes_v1(&tc).await.unwrap();
    let gpu_class = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some("gpu.nvidia.com"))
        .unwrap();
    assert_eq!(
        gpu_class.spec.extended_resource_name.as_deref(),
        Some("nvidia.com/gpu"),
        "1.36 keeps the chart's extendedResourceName"
    );
    let dp = tc
        .create_ready_gpu_node("dp", &GpuNode::h100(8).label(label, &pool("dp")))
        .await
        .unwrap();
    let (dra_node, _) = dra::create_dra_node(
        &tc,
        "dra",
        &GpuNode::h100(8).label(label, &pool("dra")),
        |n| DraNode::h100(n, 8),
    )
    .await
    .unwrap();
    let (mig_node, _) = dra::create_dra_node(
        &tc,
        "mig",
        &GpuNode::a100_80gb(1).label(label, &pool("mig")),
        |n| DraNode::a100_80gb(n, 1).mig_1g_10gb(&[0]),
    )
    .await
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    // Declared for 1.35: refused, naming the gate.
    let old = dir.path().join("ext-135.yaml");
    std::fs::write(&old, blueprint(&p, "1.35.4")).unwrap();
    let o = gpuctl(&["plan", old.to_str().unwrap()], &kc);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.status.success(), "1.35 must be refused:\n{text}");
    assert!(
        text.contains("GPU158") && text.contains("DRAExtendedResource") && text.contains("1.35.4"),
        "{text}"
    );

    let path = dir.path().join("ext.yaml");
    std::fs::write(&path, blueprint(&p, "1.36.3")).unwrap();
    let bp = path.to_str().unwrap();
    let o = gpuctl(&["apply", bp, "--yes", "--wait-timeout", "60s"], &kc);
    assert!(
        o.status.success(),
        "apply: exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // gpuctl's class for the pre-created MIG profile, its extendedResourceName kept by 1.36.
    let dc = dynamic(
        &tc,
        "resource.k8s.io",
        "v1",
        "DeviceClass",
        "deviceclasses",
        None,
    );
    let mig_class = dc.get("mig-1g.10gb.extended.gpuctl.dev").await.unwrap();
    assert_eq!(
        mig_class.data["spec"]["extendedResourceName"],
        json!("nvidia.com/mig-1g.10gb")
    );
    assert!(
        dc.get("gpu.extended.gpuctl.dev").await.is_err(),
        "nvidia.com/gpu is the chart's class's: gpuctl renders no second one"
    );

    let ns = format!("{p}-ns");
    let quotas: Api<ResourceQuota> = Api::namespaced(tc.client.clone(), &ns);
    let quota = gpuctl_core::names::quota_name(&format!("{p}-t"));
    poll(
        60,
        &format!("the quota controller to sync {quota}"),
        async || {
            let h = quotas.get(&quota).await.ok()?.status?.hard?;
            (!h.is_empty()).then_some(())
        },
    )
    .await;

    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), &ns);
    pods.create(
        &PostParams::default(),
        &plain_pod("on-dra", "nvidia.com/gpu", 2, &pool("dra")),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &plain_pod("on-dp", "nvidia.com/gpu", 2, &pool("dp")),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &plain_pod("on-mig", "nvidia.com/mig-1g.10gb", 1, &pool("mig")),
    )
    .await
    .unwrap();

    // The DRA pool: a claim the scheduler made, allocated two GPUs from that node's slice.
    let (node, claim) = bound(&tc, &ns, "on-dra").await;
    assert_eq!(node, dra_node);
    let claim = claim.expect("a pod served by DRA has an extended-resource claim");
    let claims = dynamic(
        &tc,
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        "resourceclaims",
        Some(&ns),
    );
    let c = claims.get(&claim).await.unwrap();
    let results = c.data["status"]["allocation"]["devices"]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(results.len(), 2, "{:?}", c.data);
    for r in &results {
        assert_eq!(r["driver"], json!(dra::DRIVER));
        assert_eq!(
            r["pool"],
            json!(dra_node),
            "allocated from the node's own slice: {r}"
        );
    }
    assert_eq!(
        c.data["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"],
        json!("gpu.nvidia.com"),
        "served by the chart's class"
    );
    // The device-plugin pool: bound the old way, no claim.
    let (node, claim) = bound(&tc, &ns, "on-dp").await;
    assert_eq!((node.as_str(), claim), (dp.as_str(), None));
    // The MIG pool: gpuctl's class serves nvidia.com/mig-1g.10gb with a MIG device.
    let (node, claim) = bound(&tc, &ns, "on-mig").await;
    assert_eq!(node, mig_node);
    let c = claims.get(&claim.expect("a MIG claim")).await.unwrap();
    let device = c.data["status"]["allocation"]["devices"]["results"][0]["device"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(device.starts_with("gpu-0-mig-19-"), "{device}");

    // One quota, both stacks: 2 (device plugin) + 2 (DRA) of 4.
    poll(60, "requests.nvidia.com/gpu used 4", async || {
        let used = quotas.get(&quota).await.ok()?.status?.used?;
        (used.get("requests.nvidia.com/gpu")?.0 == "4").then_some(())
    })
    .await;
    let err = pods
        .create(
            &PostParams::default(),
            &plain_pod("beyond", "nvidia.com/gpu", 1, &pool("dra")),
        )
        .await
        .expect_err("the fifth GPU is beyond the quota");
    let text = err.to_string();
    assert!(
        text.contains("exceeded quota") && text.contains("requests.nvidia.com/gpu"),
        "{text}"
    );

    // The next plan is empty: 1.36 kept every field gpuctl wrote.
    let o = gpuctl(&["plan", bp, "--detailed-exitcode"], &kc);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the plan after apply is empty:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!(
        "dra_extended: done in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

/// A blueprint with one DRA pool of one H100, a shape of it, a tenant that claims one, and
/// `maintenance` spliced into `spec.dra`.
fn taint_blueprint(p: &str, maintenance: &str) -> String {
    let head = crate::dra_apply::head(p).replace("version: \"1.35.1\"", "version: \"1.36.3\"");
    format!(
        r#"{head}  nodePools:
    - name: {p}-dra
      selector: {{ gpuctl.dev/pool: {p}-dra }}
      nodes: 2
      gpu: {{ model: H100-SXM5-80GB, count: 1 }}
      gpuPlugin: dra
  dra:
    driver: {{ deployment: standalone, version: v25.12.0 }}
{maintenance}    shapes:
      - name: {p}-h100
        gpu: {{ model: H100-SXM5-80GB }}
  tenants:
    - name: {p}-t
      namespaces: [{p}-ns]
      claims: {{ {p}-h100: 2 }}
"#
    )
}

/// `taint_rule_from_the_blueprint_keeps_the_scheduler_off_a_gpu_until_removed`: a
/// `spec.dra.maintenance` entry for the one GPU of a DRA node becomes a DeviceTaintRule
/// (`resource.k8s.io/v1beta2`) on 1.36; a pod claiming that GPU through the tenant's template stays
/// Pending under the real scheduler, and `gpuctl doctor` names the taint and its rule (GPU218).
/// Removing the entry from the blueprint makes apply delete the rule, and the pod is bound with the
/// GPU allocated.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taint_rule_from_the_blueprint_keeps_the_scheduler_off_a_gpu_until_removed() {
    let Some(_shared) = TestCluster::connect("dra_taints").await else {
        return;
    };
    let fresh = FreshCluster::up_with(
        "dra-taint",
        &["--kube", "1.36", "--with-scheduler", "--without-kueue"],
    );
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "dra-taint")
        .await
        .unwrap();
    let kc = kc.to_str().unwrap().to_string();
    let mut p = tc.name("tnt");
    p.truncate(24);
    let p = p.trim_end_matches('-').to_string();
    let (node, _) = dra::create_dra_node(
        &tc,
        "dra",
        &GpuNode::h100(1).label("gpuctl.dev/pool", &format!("{p}-dra")),
        |n| DraNode::h100(n, 1),
    )
    .await
    .unwrap();

    // A second node whose GPU NVIDIA's driver tainted after Xid 79 (as its health check publishes
    // it in the slice: gpu.nvidia.com/xid=79:NoSchedule): doctor's GPU217.
    let sick = tc
        .create_ready_gpu_node(
            "sick",
            &GpuNode::h100(1)
                .label("gpuctl.dev/pool", &format!("{p}-dra"))
                .dra(),
        )
        .await
        .unwrap();
    let mut slice = serde_json::to_value(DraNode::h100(&sick, 1).slice(&sick).unwrap()).unwrap();
    slice["spec"]["devices"][0]["taints"] =
        json!([{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]);
    let slices = dynamic(
        &tc,
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        None,
    );
    let stored = slices
        .create(
            &PostParams::default(),
            &serde_json::from_value(slice).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        stored.data["spec"]["devices"][0]["taints"][0]["key"],
        json!("gpu.nvidia.com/xid"),
        "1.36 keeps the driver's device taint"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("taint.yaml");
    let bp = path.to_str().unwrap().to_string();
    let maintenance =
        format!("    maintenance:\n      - {{ name: rma, node: {node}, device: gpu-0 }}\n");
    std::fs::write(&path, taint_blueprint(&p, &maintenance)).unwrap();
    let apply = |what: &str| {
        let o = gpuctl(&["apply", &bp, "--yes", "--wait-timeout", "60s"], &kc);
        assert!(
            o.status.success(),
            "apply ({what}): exit {:?}\n{}\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    apply("with the maintenance entry");
    let rules = dynamic(
        &tc,
        "resource.k8s.io",
        "v1beta2",
        "DeviceTaintRule",
        "devicetaintrules",
        None,
    );
    let rule = rules
        .get("gpuctl-maintenance-rma")
        .await
        .expect("the rule exists");
    assert_eq!(rule.data["spec"]["deviceSelector"]["pool"], json!(node));
    assert_eq!(
        rule.data["spec"]["taint"]["key"],
        json!("gpuctl.dev/maintenance")
    );

    let ns = format!("{p}-ns");
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), &ns);
    support::cluster::create_admitted(
        &pods,
        &dra::claim_pod("train", &format!("{p}-h100"), Some(dra::SCHEDULER), None),
    )
    .await
    .unwrap();
    let why = crate::dra_harness::unschedulable(&pods, "train").await;
    eprintln!("dra_taints: train Pending: {why}");
    // doctor names the taint and the rule
    let out = Gpuctl::new(["doctor"])
        .arg(&bp)
        .args(["--kubeconfig", &kc, "-o", "json", "--today", TODAY])
        .output();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let found: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "GPU218")
        .collect();
    assert_eq!(found.len(), 1, "{:#}", v["findings"]);
    let text = found[0].to_string();
    assert!(
        text.contains("gpuctl-maintenance-rma")
            && text.contains("gpuctl.dev/maintenance=rma:NoSchedule")
            && text.contains(&format!("pod/{ns}/train")),
        "{text}"
    );
    let xid: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "GPU217")
        .collect();
    assert_eq!(xid.len(), 1, "{:#}", v["findings"]);
    let text = xid[0].to_string();
    assert!(
        text.contains(&format!("node/{sick}/gpu-0")) && text.contains("Xid 79"),
        "{text}"
    );
    let bound = pods.get("train").await.unwrap().spec.unwrap().node_name;
    assert_eq!(bound, None, "the tainted GPU is left alone");

    // The entry removed: apply deletes the rule, and the pod is bound.
    std::fs::write(&path, taint_blueprint(&p, "")).unwrap();
    apply("without it");
    assert!(
        rules.get("gpuctl-maintenance-rma").await.is_err(),
        "the rule is gone"
    );
    let (got, _) = bound_pod(&tc, &ns, "train").await;
    assert_eq!(got, node);
}

async fn bound_pod(tc: &TestCluster, ns: &str, pod: &str) -> (String, Option<String>) {
    bound(tc, ns, pod).await
}
