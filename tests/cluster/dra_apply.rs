//! DRA device shapes and tenant claims (issue 29) applied to the real API server.
//!
//! `dra_shapes_apply_converge_and_their_quota_is_enforced`: the shapes' DeviceClasses (whose CEL
//! selectors the API server compiles and type-checks on create), the tenant's
//! ResourceClaimTemplates and its ResourceQuota on device-class keys are stored as rendered; the
//! next plan is empty; a changed shape replaces the template (its spec is immutable) and
//! converges; and the quota is enforced by the API server's quota admission on ResourceClaims: a
//! claim within the tenant's shape allowance is admitted and charged, one beyond it or of NVIDIA's
//! own `gpu.nvidia.com` class (closed at 0) is refused. Nothing plays the DRA driver there: no
//! ResourceSlices exist and nothing allocates.
//!
//! `dra_shapes_applied_by_gpuctl_are_allocated_by_the_real_scheduler`: allocation, for real, with
//! gpuctl's own objects. A cluster of its own with the harness's kube-scheduler (`run up
//! --with-scheduler`, profile `gpuctl-dra`) and the resourceclaim controller; nodes of three pools
//! whose ResourceSlices `support::dra` publishes the way NVIDIA's DRA driver v25.12.0 does (8 whole
//! H100s; an A100 80GB in seven `1g.10gb`; two whole A100 80GB); `gpuctl apply` of a blueprint with
//! shapes on them; pods naming gpuctl's ResourceClaimTemplates. Each pod is bound to a node of the
//! shape's pool and its generated claim is allocated devices of that node of the right kind
//! (`gpu-N`, `gpu-N-mig-19-S-1`, two for a count-2 shape); a second claim beyond the tenant's
//! allowance is refused (`FailedResourceClaimCreation`, no claim); and the compute-capability and
//! driver selectors are evaluated by the scheduler (`cannot allocate all claims`). The scheduler's
//! own behaviour without gpuctl's objects is tested in `dra_harness`.

use crate::render_common;
use crate::support;

use std::process::Output;
use std::time::{Duration, Instant};

use crate::dra_harness::{generated_claim, poll, unschedulable};
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Event, Node, Pod, ResourceQuota};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster, create_admitted};
use support::dra::{self, DraNode};
use support::fresh::FreshCluster;
use support::gpuctl::{Gpuctl, TODAY};

/// What the DRA tests' blueprints start with: metadata, Kubernetes, the GPU Operator (not
/// installed; nodes' driver 595.91.07). Also dra_kueue's.
pub(crate) fn head(p: &str) -> String {
    head_with_driver(p, "595.91.07")
}

/// [`head`] with the nodes' NVIDIA driver `driver` (dra_operator's GB200 pool runs 580).
pub(crate) fn head_with_driver(p: &str, driver: &str) -> String {
    format!(
        r#"apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: {p}
spec:
  kubernetes:
    version: "1.35.1"
  gpuOperator:
    version: v26.7.0
    namespace: {p}-gpu-operator
    install: none
    driver:
      version: "{driver}"
      kernelModuleType: open
"#
    )
}

fn blueprint(p: &str) -> String {
    format!(
        r#"{head}  nodePools:
    - name: {p}-h100
      selector: {{ gpuctl.dev/pool: {p}-h100 }}
      nodes: 2
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
    - name: {p}-a100
      selector: {{ gpuctl.dev/pool: {p}-a100 }}
      nodes: 1
      gpu: {{ model: A100-SXM4-80GB, count: 4 }}
      partitioning:
        mode: mig
        mig: {{ strategy: mixed, layout: {{ "1g.10gb": 7 }} }}
  dra:
    shapes:
      - name: {p}-h100
        gpu: {{ model: H100-SXM5-80GB }}
        minMemory: 64Gi
        minComputeCapability: "9.0"
        minDriver: "580.95.05"
      - name: {p}-mig
        mig: {{ profile: 1g.10gb, model: A100-SXM4-80GB }}
  tenants:
    - name: {p}-t
      namespaces: [{p}-ns]
      claims: {{ {p}-h100: 8, {p}-mig: 14 }}
"#,
        head = head(p)
    )
}

fn gpuctl(args: &[&str], kubeconfig: &str) -> Output {
    Gpuctl::new(args)
        .args(["--kubeconfig", kubeconfig])
        .today(TODAY)
        .output()
}

fn api(tc: &TestCluster, kind: &str, plural: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", kind),
        plural,
    );
    match ns {
        Some(ns) => Api::namespaced_with(tc.client.clone(), ns, &ar),
        None => Api::all_with(tc.client.clone(), &ar),
    }
}

/// A ResourceClaim of `count` devices of `class`.
fn claim(name: &str, class: &str, count: u32) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": class, "allocationMode": "ExactCount", "count": count}}]}},
    }))
    .unwrap()
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_shapes_apply_converge_and_their_quota_is_enforced() {
    let Some(_shared) = TestCluster::connect("dra_apply").await else {
        return;
    };
    // A cluster of its own: every blueprint renders the cluster-wide NVIDIADriver
    // `cluster-default`, which tests applying through the CLI in parallel would fight over.
    let fresh = support::fresh::FreshCluster::up_with("dra-apply", &["--without-kueue"]);
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "dra-apply")
        .await
        .expect("connects to the fresh cluster");
    let kc = kc.to_str().unwrap().to_string();
    let mut p = tc.name("dra");
    p.truncate(30);
    let p = p.trim_end_matches('-').to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dra.yaml");
    std::fs::write(&path, blueprint(&p)).unwrap();
    let bp = path.to_str().unwrap();
    let text = |o: &Output| {
        format!(
            "exit {:?}\n{}\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let apply = ["apply", bp, "--yes", "--wait-timeout", "60s"];
    let started = Instant::now();
    let o = gpuctl(&apply, &kc);
    assert!(o.status.success(), "apply: {}", text(&o));
    eprintln!(
        "apply of DRA shapes: {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // Stored as rendered: classes (CEL compiled by the API server), templates, the quota.
    let set = render_common::render_file(&path);
    let ns = format!("{p}-ns");
    let mut checked = 0;
    for o in set.objects.iter().filter(|o| {
        matches!(
            o.kind.as_str(),
            "DeviceClass" | "ResourceClaimTemplate" | "ResourceQuota"
        )
    }) {
        let stored: Value = match o.kind.as_str() {
            "DeviceClass" => serde_json::to_value(
                api(&tc, "DeviceClass", "deviceclasses", None)
                    .get(&o.name)
                    .await
                    .unwrap(),
            )
            .unwrap(),
            "ResourceClaimTemplate" => serde_json::to_value(
                api(
                    &tc,
                    "ResourceClaimTemplate",
                    "resourceclaimtemplates",
                    Some(&ns),
                )
                .get(&o.name)
                .await
                .unwrap(),
            )
            .unwrap(),
            _ => serde_json::to_value(
                Api::<ResourceQuota>::namespaced(tc.client.clone(), &ns)
                    .get(&o.name)
                    .await
                    .unwrap(),
            )
            .unwrap(),
        };
        // A template's `spec.metadata` (ObjectMeta of the claims it makes) is stored as `{}`.
        let mut stored_spec = stored["spec"].clone();
        if stored_spec["metadata"] == json!({}) {
            stored_spec.as_object_mut().unwrap().remove("metadata");
        }
        assert_eq!(
            stored_spec, o.manifest["spec"],
            "{}/{} is stored as rendered",
            o.kind, o.name
        );
        checked += 1;
    }
    // Two classes, two templates, the DRA quota.
    assert_eq!(
        checked,
        5,
        "{:?}",
        set.objects.iter().map(|o| &o.kind).collect::<Vec<_>>()
    );

    let plan = ["plan", bp, "--detailed-exitcode"];
    let o = gpuctl(&plan, &kc);
    assert_eq!(o.status.code(), Some(0), "plan after apply: {}", text(&o));

    // Quota admission on claims, with the quota controller's status in place.
    let quotas: Api<ResourceQuota> = Api::namespaced(tc.client.clone(), &ns);
    let quota = gpuctl_core::names::dra_quota_name(&format!("{p}-t"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while quotas
        .get(&quota)
        .await
        .unwrap()
        .status
        .and_then(|s| s.hard)
        .is_none_or(|h| h.is_empty())
    {
        assert!(
            Instant::now() < deadline,
            "the quota controller never synced {quota}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let claims = api(&tc, "ResourceClaim", "resourceclaims", Some(&ns));
    let h100 = gpuctl_core::names::dra_shape_class(&format!("{p}-h100"));
    let pp = PostParams::default();
    claims
        .create(&pp, &claim("within", &h100, 6))
        .await
        .expect("a claim within the tenant's allowance is admitted");
    for (name, class, count) in [
        ("beyond", h100.as_str(), 3),
        ("upstream", "gpu.nvidia.com", 1),
    ] {
        let (code, message) =
            support::cluster::api_error(claims.create(&pp, &claim(name, class, count)).await)
                .unwrap();
        assert_eq!(code, 403, "{name}: {message}");
        assert!(message.contains("exceeded quota"), "{name}: {message}");
    }

    // A changed shape (2 devices per claim) replaces the template, then converges.
    std::fs::write(
        &path,
        blueprint(&p).replace(
            "        minDriver: \"580.95.05\"\n",
            "        minDriver: \"580.95.05\"\n        count: 2\n",
        ),
    )
    .unwrap();
    let o = gpuctl(&["plan", bp, "-o", "json"], &kc);
    assert!(o.status.success(), "plan of a changed shape: {}", text(&o));
    let planned: Value = serde_json::from_slice(&o.stdout).unwrap();
    let changed: Vec<&Value> = planned["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] != "no-op")
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0]["kind"], "ResourceClaimTemplate");
    assert_eq!(changed[0]["replace"], true, "{}", changed[0]);
    let o = gpuctl(&apply, &kc);
    assert!(
        o.status.success(),
        "apply of the changed shape: {}",
        text(&o)
    );
    let stored = api(
        &tc,
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        Some(&ns),
    )
    .get(&format!("{p}-h100"))
    .await
    .unwrap();
    assert_eq!(
        stored.data["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"],
        2
    );
    let o = gpuctl(&plan, &kc);
    assert_eq!(
        o.status.code(),
        Some(0),
        "plan after the replace: {}",
        text(&o)
    );
}

/// Three pools of nodes `support::dra` publishes: 8 whole H100s, an A100 80GB split into seven
/// `1g.10gb`, two whole A100 80GB; shapes on each, and a tenant whose allowance is one claim's
/// worth of most shapes (so the second claim of a shape is cheap to refuse).
///
/// The pools' driver is 595.91.07 while the nodes' slices publish 580.95.05 (the stand-in's
/// driver): a cluster in the middle of a driver rollout. That is how the `minDriver: 590.48.01`
/// shape gets past GPU172 (the blueprint's driver satisfies it) and can still be tested against
/// what the nodes really run: its selector is evaluated by the scheduler and matches no device.
fn allocation_blueprint(p: &str) -> String {
    format!(
        r#"{head}  nodePools:
    - name: {p}-h100
      selector: {{ gpuctl.dev/pool: {p}-h100 }}
      nodes: 1
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
    - name: {p}-mig
      selector: {{ gpuctl.dev/pool: {p}-mig }}
      nodes: 1
      gpu: {{ model: A100-SXM4-80GB, count: 1 }}
      partitioning:
        mode: mig
        mig: {{ strategy: mixed, layout: {{ "1g.10gb": 7 }} }}
    - name: {p}-a100
      selector: {{ gpuctl.dev/pool: {p}-a100 }}
      nodes: 1
      gpu: {{ model: A100-SXM4-80GB, count: 2 }}
  dra:
    shapes:
      - name: {p}-h100
        gpu: {{ model: H100-SXM5-80GB }}
        minMemory: 64Gi
        minComputeCapability: "9.0"
        minDriver: "580.95.05"
      - name: {p}-pair
        gpu: {{ model: H100-SXM5-80GB }}
        minDriver: "580.95.05"
        count: 2
      - name: {p}-mig
        mig: {{ profile: 1g.10gb, model: A100-SXM4-80GB }}
      - name: {p}-any
        gpu: {{}}
      - name: {p}-sm90
        gpu: {{}}
        minComputeCapability: "9.0"
      - name: {p}-drv590
        gpu: {{ model: H100-SXM5-80GB }}
        minDriver: "590.48.01"
  tenants:
    - name: {p}-t
      namespaces: [{p}-ns]
      claims: {{ {p}-h100: 1, {p}-pair: 2, {p}-mig: 1, {p}-any: 1, {p}-sm90: 2, {p}-drv590: 1 }}
"#,
        head = head(p)
    )
}

/// Where the scheduler put `pod`: its node, the `gpuctl.dev/pool` label of that node, the device
/// class its generated claim asks for, and the allocated devices (each asserted to be of NVIDIA's
/// driver and in the node's own pool, i.e. on that node).
async fn allocated(tc: &TestCluster, ns: &str, pod: &str) -> (String, String, String, Vec<String>) {
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), ns);
    let claims: Api<ResourceClaim> = Api::namespaced(tc.client.clone(), ns);
    let node = poll(60, &format!("pod {pod} to be bound"), async || {
        pods.get(pod).await.ok()?.spec?.node_name
    })
    .await;
    let claim = generated_claim(&pods, pod).await;
    let c = poll(30, &format!("claim {claim} allocated"), async || {
        let c = claims.get(&claim).await.ok()?;
        c.status.as_ref()?.allocation.as_ref()?;
        Some(c)
    })
    .await;
    let class = c.spec.devices.as_ref().unwrap().requests.as_ref().unwrap()[0]
        .exactly
        .as_ref()
        .unwrap()
        .device_class_name
        .clone();
    let results = c
        .status
        .and_then(|s| s.allocation)
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default();
    for r in &results {
        assert_eq!(r.driver, dra::DRIVER, "{claim}: {r:?}");
        assert_eq!(r.pool, node, "{claim}: a device of the pod's node: {r:?}");
    }
    let pool = Api::<Node>::all(tc.client.clone())
        .get(&node)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default()
        .get("gpuctl.dev/pool")
        .cloned()
        .unwrap_or_default();
    (
        node,
        pool,
        class,
        results.into_iter().map(|r| r.device).collect(),
    )
}

/// `gpu-<minor>`: a whole GPU as the driver names it.
fn whole_gpu(device: &str) -> bool {
    device
        .strip_prefix("gpu-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_shapes_applied_by_gpuctl_are_allocated_by_the_real_scheduler() {
    let Some(_shared) = TestCluster::connect("dra_apply_alloc").await else {
        return;
    };
    let started = Instant::now();
    // A cluster of its own: the harness's kube-scheduler, and cluster-wide classes and nodes.
    let fresh = FreshCluster::up_with("dra-alloc", &["--with-scheduler", "--without-kueue"]);
    assert_eq!(fresh.var("GPUCTL_HARNESS_SCHEDULER"), dra::SCHEDULER);
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "dra-alloc")
        .await
        .expect("connects to the fresh cluster");
    let kc = kc.to_str().unwrap().to_string();
    let up = started.elapsed().as_secs_f64();
    let mut p = tc.name("dra");
    p.truncate(30);
    let p = p.trim_end_matches('-').to_string();

    // The nodes of the three pools, with the slices NVIDIA's driver would publish for them.
    let pool = |name: &str| format!("{p}-{name}");
    let label = "gpuctl.dev/pool";
    let (h100, _) = dra::create_dra_node(
        &tc,
        "h100",
        &GpuNode::h100(8).label(label, &pool("h100")),
        |n| DraNode::h100(n, 8),
    )
    .await
    .unwrap();
    let (mig, _) = dra::create_dra_node(
        &tc,
        "mig",
        &GpuNode::a100_80gb(1).label(label, &pool("mig")),
        |n| DraNode::a100_80gb(n, 1).mig_1g_10gb(&[0]),
    )
    .await
    .unwrap();
    let (a100, _) = dra::create_dra_node(
        &tc,
        "a100",
        &GpuNode::a100_80gb(2).label(label, &pool("a100")),
        |n| DraNode::a100_80gb(n, 2),
    )
    .await
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dra-alloc.yaml");
    std::fs::write(&path, allocation_blueprint(&p)).unwrap();
    let bp = path.to_str().unwrap();
    let o = gpuctl(&["apply", bp, "--yes", "--wait-timeout", "60s"], &kc);
    assert!(
        o.status.success(),
        "apply: exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let applied = started.elapsed().as_secs_f64();

    let ns = format!("{p}-ns");
    let quotas: Api<ResourceQuota> = Api::namespaced(tc.client.clone(), &ns);
    let quota = gpuctl_core::names::dra_quota_name(&format!("{p}-t"));
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
    let create = async |name: &str, shape: &str, node: Option<&str>| {
        create_admitted(
            &pods,
            &dra::claim_pod(name, &pool(shape), Some(dra::SCHEDULER), node),
        )
        .await
        .unwrap_or_else(|e| panic!("pod {name}: {e}"));
    };
    // The first claim of the H100 shape first, so that the second is the one beyond the quota.
    create("h100", "h100", None).await;
    generated_claim(&pods, "h100").await;
    create("h100-over", "h100", None).await;
    create("pair", "pair", None).await;
    create("mig", "mig", None).await;
    create("any-a100", "any", Some(a100.as_str())).await;
    create("sm90", "sm90", None).await;
    create("sm90-a100", "sm90", Some(a100.as_str())).await;
    create("drv590", "drv590", None).await;
    let created = started.elapsed().as_secs_f64();

    let class = |shape: &str| gpuctl_core::names::dra_shape_class(&pool(shape));
    let mut on_h100 = Vec::new();
    for (pod, shape, node, want_pool, count) in [
        ("h100", "h100", &h100, pool("h100"), 1),
        ("pair", "pair", &h100, pool("h100"), 2),
        ("sm90", "sm90", &h100, pool("h100"), 1),
        ("any-a100", "any", &a100, pool("a100"), 1),
    ] {
        let (got_node, got_pool, got_class, devices) = allocated(&tc, &ns, pod).await;
        eprintln!("dra_alloc: {pod} bound to {got_node} ({got_pool}): {devices:?}");
        assert_eq!(
            (&got_node, &got_pool, &got_class),
            (node, &want_pool, &class(shape)),
            "{pod}"
        );
        assert_eq!(devices.len(), count, "{pod}: {devices:?}");
        assert!(devices.iter().all(|d| whole_gpu(d)), "{pod}: {devices:?}");
        if *node == h100 {
            on_h100.extend(devices);
        }
    }
    let mut distinct = on_h100.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "four distinct H100s: {on_h100:?}");

    let (got_node, got_pool, got_class, devices) = allocated(&tc, &ns, "mig").await;
    eprintln!("dra_alloc: mig bound to {got_node} ({got_pool}): {devices:?}");
    assert_eq!(
        (&got_node, &got_pool, &got_class),
        (&mig, &pool("mig"), &class("mig"))
    );
    assert_eq!(devices.len(), 1, "{devices:?}");
    assert!(
        devices[0].starts_with("gpu-0-mig-19-") && devices[0].ends_with("-1"),
        "a 1g.10gb instance of GPU 0: {devices:?}"
    );
    let bound = started.elapsed().as_secs_f64();

    // Beyond the tenant's allowance of the H100 shape: the controller's create of the claim is
    // refused by quota admission, and the pod gets no claim.
    let events: Api<Event> = Api::namespaced(tc.client.clone(), &ns);
    let event = poll(30, "FailedResourceClaimCreation on h100-over", async || {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("h100-over")
                && e.reason.as_deref() == Some("FailedResourceClaimCreation")
        })
    })
    .await;
    let message = event.message.unwrap_or_default();
    eprintln!("dra_alloc: h100-over: {message}");
    let key = format!("{}.deviceclass.resource.k8s.io/devices", class("h100"));
    assert!(
        message.contains(&format!("exceeded quota: {quota}")) && message.contains(&key),
        "{message}"
    );

    // The selectors gpuctl wrote for compute capability and driver are evaluated by the scheduler:
    // the whole A100s (CC 8.0) are free but not 9.0, and no device publishes a driver 590+.
    let message = unschedulable(&pods, "sm90-a100").await;
    eprintln!("dra_alloc: sm90-a100: {message}");
    assert!(
        message.starts_with("Unschedulable: ")
            && message.contains("0/3 nodes are available")
            && message.contains("1 cannot allocate all claims")
            && message.contains("2 node(s) didn't match Pod's node affinity/selector"),
        "{message}"
    );
    let message = unschedulable(&pods, "drv590").await;
    eprintln!("dra_alloc: drv590: {message}");
    assert!(
        message.starts_with("Unschedulable: ")
            && message.contains("0/3 nodes are available: 3 cannot allocate all claims"),
        "{message}"
    );
    for pod in ["h100-over", "sm90-a100", "drv590"] {
        let p = pods.get(pod).await.unwrap();
        assert_eq!(
            p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            None,
            "{pod} is not bound"
        );
        if pod == "h100-over" {
            let statuses = p
                .status
                .and_then(|s| s.resource_claim_statuses)
                .unwrap_or_default();
            assert!(
                statuses.iter().all(|s| s.resource_claim_name.is_none()),
                "h100-over has no claim: {statuses:?}"
            );
        }
    }
    // `gpuctl status` counts what the driver publishes and the claims hold, under the device
    // plugin's names: per pool its published GPUs or MIG devices and those allocated, per tenant
    // what its claims hold (the unbound pods hold nothing).
    let o = gpuctl(&["status", bp, "-o", "json"], &kc);
    assert!(
        o.status.success(),
        "status: {}",
        support::releases::text(&o)
    );
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = |pool_name: &str, resource: &str| -> (u64, u64) {
        let pool = report["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == pool_name)
            .unwrap_or_else(|| panic!("pool {pool_name}: {report:#}"));
        let r = pool["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == resource)
            .unwrap_or_else(|| panic!("{pool_name} {resource}: {pool:#}"));
        (
            r["capacity"].as_u64().unwrap(),
            r["allocated"].as_u64().unwrap(),
        )
    };
    assert_eq!(row(&pool("h100"), "nvidia.com/gpu"), (8, 4));
    assert_eq!(row(&pool("a100"), "nvidia.com/gpu"), (2, 1));
    assert_eq!(row(&pool("mig"), "nvidia.com/mig-1g.10gb"), (7, 1));
    let tenant = report["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == format!("{p}-t"))
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(
        tenant["allocated"],
        json!({"nvidia.com/gpu": 5, "nvidia.com/mig-1g.10gb": 1}),
        "{tenant:#}"
    );

    eprintln!(
        "dra_alloc: cluster up {up:.1}s, nodes+apply {:.1}s, pods created {:.1}s, bound {:.1}s, done {:.1}s",
        applied - up,
        created - applied,
        bound - created,
        started.elapsed().as_secs_f64() - bound
    );
    drop(fresh);
}
