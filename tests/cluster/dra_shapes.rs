//! Claim shapes of Kubernetes 1.36 as gpuctl renders them (issue 39, Deliver 4), on a cluster of
//! their own at v1.36.3 (`run up --kube 1.36 --with-scheduler`: the real kube-apiserver, scheduler
//! and kube-controller-manager with its resourceclaim and quota controllers).
//!
//! `first_available_and_memory_shares_on_the_real_1_36_scheduler`: a shape of alternatives
//! (`firstAvailable: [pair, one]`: two H100s, else one) and a 20Gi share of an H100
//! (`memoryShare`, consumable capacity). The DRA node of three GPUs and the node whose one GPU
//! allows multiple allocations publish ResourceSlices the way NVIDIA's DRA driver does
//! (`support::dra`; the second node's `allowMultipleAllocations` is set by the test, playing a
//! driver that shares GPUs: which NVIDIA release publishes it was not read). The API server keeps
//! both templates as rendered (the next plan is empty); the first claim of alternatives gets the
//! pair, the second, with one GPU left, gets the single GPU; the quota charges every alternative
//! of each claim (pair 2 + one 1 per claim, whichever was allocated); two shares are allocated
//! the same GPU with 20Gi consumed each, while the class's device key counts them as two devices.
//! Partitionable devices: a node whose GPU's memory slices are a counter set (KEP-4815, as
//! NVIDIA's DynamicMIG publishes partitions; the counter names here are the test's) gives two
//! `3g.40gb` claims its two halves, after which a whole-GPU claim on it stays unschedulable;
//! the MIG class's device key counts 2, nothing counts the slices.

use std::time::Instant;

use crate::dra_harness::poll;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

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

fn text(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The blueprint: Kubernetes `kube`, one DRA pool of H100s (NVIDIA's driver with DynamicMIG),
/// the five shapes, a tenant that may hold two claims of alternatives, two shares, one single GPU
/// and two `3g.40gb` MIG devices.
fn blueprint(p: &str, kube: &str) -> String {
    let head =
        crate::dra_apply::head(p).replace("version: \"1.35.1\"", &format!("version: \"{kube}\""));
    format!(
        r#"{head}  nodePools:
    - name: {p}-dra
      selector: {{ gpuctl.dev/pool: {p}-dra }}
      nodes: 3
      gpu: {{ model: H100-SXM5-80GB, count: 3 }}
      gpuPlugin: dra
  dra:
    driver: {{ deployment: standalone, version: v25.12.0, featureGates: {{ DynamicMIG: true }} }}
    shapes:
      - {{ name: {p}-pair, gpu: {{ model: H100-SXM5-80GB }}, count: 2 }}
      - {{ name: {p}-one, gpu: {{ model: H100-SXM5-80GB }} }}
      - {{ name: {p}-any, firstAvailable: [{p}-pair, {p}-one] }}
      - {{ name: {p}-slice, gpu: {{ model: H100-SXM5-80GB }}, memoryShare: 20Gi }}
      - {{ name: {p}-mig3g, mig: {{ profile: 3g.40gb, model: H100-SXM5-80GB }} }}
  tenants:
    - name: {p}-t
      namespaces: [{p}-ns]
      claims: {{ {p}-any: 2, {p}-slice: 2, {p}-one: 1, {p}-mig3g: 2 }}
"#
    )
}

fn dynamic(
    tc: &TestCluster,
    version: &str,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", version, kind),
        plural,
    );
    match ns {
        Some(ns) => Api::namespaced_with(tc.client.clone(), ns, &ar),
        None => Api::all_with(tc.client.clone(), &ar),
    }
}

/// The allocation results of the claim made for `pod`'s pod claim `gpu`, once the pod is bound.
async fn allocated(tc: &TestCluster, ns: &str, pod: &str) -> (String, Vec<Value>) {
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), ns);
    let claims = dynamic(tc, "v1", "ResourceClaim", "resourceclaims", Some(ns));
    poll(
        60,
        &format!("pod {pod} bound with its claim allocated"),
        async || {
            let p = pods.get(pod).await.ok()?;
            let node = p.spec?.node_name?;
            let claim = p
                .status?
                .resource_claim_statuses?
                .into_iter()
                .find(|s| s.name == "gpu")?
                .resource_claim_name?;
            let c = claims.get(&claim).await.ok()?;
            let results = c.data["status"]["allocation"]["devices"]["results"]
                .as_array()?
                .clone();
            Some((node, results))
        },
    )
    .await
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_available_and_memory_shares_on_the_real_1_36_scheduler() {
    let Some(_shared) = TestCluster::connect("dra_shapes").await else {
        return;
    };
    let started = Instant::now();
    let fresh = FreshCluster::up_with(
        "dra-shapes",
        &["--kube", "1.36", "--with-scheduler", "--without-kueue"],
    );
    assert_eq!(fresh.var("GPUCTL_HARNESS_KUBE"), "v1.36.3");
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "dra-shapes")
        .await
        .unwrap();
    let kc = kc.to_str().unwrap().to_string();
    let mut p = tc.name("shp");
    p.truncate(20);
    let p = p.trim_end_matches('-').to_string();
    let label = "gpuctl.dev/pool";
    let pool = format!("{p}-dra");

    // Three whole H100s on one node; on the other, one H100 that allows multiple allocations.
    let (three, _) =
        dra::create_dra_node(&tc, "three", &GpuNode::h100(3).label(label, &pool), |n| {
            DraNode::h100(n, 3)
        })
        .await
        .unwrap();
    let shared = tc
        .create_ready_gpu_node("shared", &GpuNode::h100(1).label(label, &pool).dra())
        .await
        .unwrap();
    // The node whose GPU is partitioned below: it exists before apply, which labels the
    // pool's nodes; its slices are published later.
    let part = tc
        .create_ready_gpu_node("part", &GpuNode::h100(1).label(label, &pool).dra())
        .await
        .unwrap();
    let mut slice =
        serde_json::to_value(DraNode::h100(&shared, 1).slice(&shared).unwrap()).unwrap();
    slice["spec"]["devices"][0]["allowMultipleAllocations"] = json!(true);
    let slices = dynamic(&tc, "v1", "ResourceSlice", "resourceslices", None);
    let stored = slices
        .create(
            &PostParams::default(),
            &serde_json::from_value(slice).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        stored.data["spec"]["devices"][0]["allowMultipleAllocations"],
        json!(true),
        "1.36 keeps allowMultipleAllocations (DRAConsumableCapacity on by default)"
    );

    let dir = tempfile::tempdir().unwrap();
    // Declared for 1.35: the share is refused naming its gate and the version.
    let old = dir.path().join("shapes-135.yaml");
    std::fs::write(&old, blueprint(&p, "1.35.4")).unwrap();
    let o = gpuctl(&["plan", old.to_str().unwrap()], &kc);
    let out = text(&o);
    assert!(!o.status.success(), "1.35 must be refused:\n{out}");
    assert!(
        out.contains("GPU1501") && out.contains("DRAConsumableCapacity") && out.contains("1.35.4"),
        "{out}"
    );

    let path = dir.path().join("shapes.yaml");
    std::fs::write(&path, blueprint(&p, "1.36.3")).unwrap();
    let bp = path.to_str().unwrap();
    let o = gpuctl(&["apply", bp, "--yes", "--wait-timeout", "60s"], &kc);
    assert!(o.status.success(), "apply: {}", text(&o));

    // The templates as the API server stored them.
    let ns = format!("{p}-ns");
    let rcts = dynamic(
        &tc,
        "v1",
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        Some(&ns),
    );
    let any = rcts.get(&format!("{p}-any")).await.unwrap();
    let request = &any.data["spec"]["spec"]["devices"]["requests"][0];
    let subs = request["firstAvailable"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = subs.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(
        names,
        [format!("{p}-pair"), format!("{p}-one")],
        "{request}"
    );
    assert_eq!(subs[0]["count"], json!(2));
    assert_eq!(
        subs[1]["deviceClassName"],
        json!(format!("{p}-one.shapes.gpuctl.dev"))
    );
    let share = rcts.get(&format!("{p}-slice")).await.unwrap();
    assert_eq!(
        share.data["spec"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]["memory"],
        json!("20Gi"),
        "1.36 keeps capacity.requests"
    );
    let classes = dynamic(&tc, "v1", "DeviceClass", "deviceclasses", None);
    assert!(
        classes
            .get(&format!("{p}-any.shapes.gpuctl.dev"))
            .await
            .is_err(),
        "a shape of alternatives has no class of its own"
    );

    let quotas: Api<ResourceQuota> = Api::namespaced(tc.client.clone(), &ns);
    let quota = gpuctl_core::names::dra_quota_name(&format!("{p}-t"));
    let key =
        |shape: &str| format!("{p}-{shape}.shapes.gpuctl.dev.deviceclass.resource.k8s.io/devices");
    let hard = poll(
        60,
        &format!("the quota controller to sync {quota}"),
        async || {
            let h = quotas.get(&quota).await.ok()?.status?.hard?;
            (!h.is_empty()).then_some(h)
        },
    )
    .await;
    // Room for two claims of alternatives: 2 x 2 on the pair's class, 2 x 1 on the single's.
    // (and one claim of the single shape itself: 2 + 1).
    assert_eq!(hard[&key("pair")].0, "4", "{hard:?}");
    assert_eq!(hard[&key("one")].0, "3", "{hard:?}");
    assert_eq!(hard[&key("slice")].0, "2", "{hard:?}");

    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), &ns);
    let create = async |name: &str, shape: &str, node: &str| {
        support::cluster::create_admitted(
            &pods,
            &dra::claim_pod(
                name,
                &format!("{p}-{shape}"),
                Some(dra::SCHEDULER),
                Some(node),
            ),
        )
        .await
        .unwrap();
    };
    // Three GPUs free: the first alternative, the pair.
    create("first", "any", &three).await;
    let (node, results) = allocated(&tc, &ns, "first").await;
    assert_eq!(node, three);
    assert_eq!(results.len(), 2, "{results:?}");
    for r in &results {
        assert_eq!(r["request"], json!(format!("device/{p}-pair")), "{r}");
    }
    // One GPU left: the pair cannot be allocated, the scheduler takes the second alternative.
    create("second", "any", &three).await;
    let (node, results) = allocated(&tc, &ns, "second").await;
    assert_eq!(node, three);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["request"], json!(format!("device/{p}-one")));

    // Each claim of alternatives charged both alternatives, whichever was allocated.
    poll(60, "the claims of alternatives charged", async || {
        let used = quotas.get(&quota).await.ok()?.status?.used?;
        (used.get(&key("pair"))?.0 == "4" && used.get(&key("one"))?.0 == "2").then_some(())
    })
    .await;

    // Two 20Gi shares of the one GPU that allows it: the same device, 20Gi consumed each.
    create("share-a", "slice", &shared).await;
    create("share-b", "slice", &shared).await;
    let mut devices = Vec::new();
    for pod in ["share-a", "share-b"] {
        let (node, results) = allocated(&tc, &ns, pod).await;
        assert_eq!(node, shared);
        assert_eq!(results.len(), 1, "{results:?}");
        assert_eq!(
            results[0]["consumedCapacity"]["memory"],
            json!("20Gi"),
            "{:?}",
            results[0]
        );
        devices.push(results[0]["device"].clone());
    }
    assert_eq!(devices[0], devices[1], "both shares on one GPU");
    // The class's device key counts the shares as two devices: nothing charges memory.
    poll(60, "the shares charged as devices", async || {
        let used = quotas.get(&quota).await.ok()?.status?.used?;
        (used.get(&key("slice"))?.0 == "2").then_some(())
    })
    .await;

    // Partitionable devices (DynamicMIG): one H100 whose memory slices are a counter set in a
    // slice of their own, published as the whole GPU and two 3g.40gb MIG devices that consume
    // them. Two MIG claims take both halves; the whole GPU then has no counters left.
    let whole = serde_json::to_value(DraNode::h100(&part, 1).slice(&part).unwrap()).unwrap();
    let gpu = whole["spec"]["devices"][0].clone();
    let slices_of = |n: u32| json!({"name": part, "generation": 1, "resourceSliceCount": n});
    let slot = |range: std::ops::Range<u32>| -> Value {
        json!([{ "counterSet": "gpu-0-counters", "counters": range
            .map(|i| (format!("memory-slice-{i}"), json!({"value": "1"})))
            .collect::<serde_json::Map<String, Value>>() }])
    };
    let mut devices = vec![gpu.clone()];
    devices[0]["consumesCounters"] = slot(0..8);
    for start in [0u32, 4] {
        let mut mig = gpu.clone();
        mig["name"] = json!(format!("gpu-0-mig-9-{start}-4"));
        mig["attributes"]["type"] = json!({"string": "mig"});
        mig["attributes"]["profile"] = json!({"string": "3g.40gb"});
        mig["attributes"]["parentUUID"] = gpu["attributes"]["uuid"].clone();
        mig["capacity"] = json!({"memory": {"value": "40448Mi"}});
        mig["consumesCounters"] = slot(start..start + 4);
        devices.push(mig);
    }
    let counters = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{part}-counters")},
        "spec": {
            "driver": dra::DRIVER, "nodeName": part, "pool": slices_of(2),
            "sharedCounters": [{ "name": "gpu-0-counters", "counters": (0..8)
                .map(|i| (format!("memory-slice-{i}"), json!({"value": "1"})))
                .collect::<serde_json::Map<String, Value>>() }],
        },
    });
    let partitioned = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{part}-devices")},
        "spec": { "driver": dra::DRIVER, "nodeName": part, "pool": slices_of(2), "devices": devices },
    });
    for s in [counters, partitioned] {
        let stored = slices
            .create(&PostParams::default(), &serde_json::from_value(s).unwrap())
            .await
            .unwrap();
        let spec = &stored.data["spec"];
        assert!(
            spec.get("sharedCounters").is_some()
                || spec["devices"][1].get("consumesCounters").is_some(),
            "1.36 keeps counters (DRAPartitionableDevices on by default): {spec}"
        );
    }
    create("mig-a", "mig3g", &part).await;
    create("mig-b", "mig3g", &part).await;
    let mut halves = Vec::new();
    for pod in ["mig-a", "mig-b"] {
        let (node, results) = allocated(&tc, &ns, pod).await;
        assert_eq!(node, part);
        halves.push(
            results[0]["device"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    halves.sort();
    assert_eq!(halves, ["gpu-0-mig-9-0-4", "gpu-0-mig-9-4-4"]);
    create("whole", "one", &part).await;
    let why = crate::dra_harness::unschedulable(&pods, "whole").await;
    eprintln!("dra_shapes: whole GPU after two MIG halves: {why}");
    // Two MIG devices of 4 memory slices each are charged as 2 devices: counters by no key.
    poll(60, "the MIG claims charged as devices", async || {
        let used = quotas.get(&quota).await.ok()?.status?.used?;
        (used.get(&key("mig3g"))?.0 == "2").then_some(())
    })
    .await;

    // The next plan is empty: 1.36 kept every field gpuctl wrote.
    let o = gpuctl(&["plan", bp, "--detailed-exitcode"], &kc);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the plan after apply is empty:\n{}",
        text(&o)
    );
    eprintln!(
        "dra_shapes: done in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}
