//! DRA device shapes and tenant claims (issue 29) applied to the real API server: the shapes'
//! DeviceClasses (whose CEL selectors the API server compiles and type-checks on create), the
//! tenant's ResourceClaimTemplates and its ResourceQuota on device-class keys are stored as
//! rendered; the next plan is empty; a changed shape replaces the template (its spec is
//! immutable) and converges; and the quota is enforced by the API server's quota admission on
//! ResourceClaims: a claim within the tenant's shape allowance is admitted and charged, one beyond
//! it or of NVIDIA's own `gpu.nvidia.com` class (closed at 0) is refused.
//!
//! Nothing plays the DRA driver here: no ResourceSlices exist and nothing allocates. What is
//! asserted is what the API server itself does with these objects (the scheduler's allocation is
//! tested with the harness's scheduler in `dra_harness`).

use crate::render_common;
use crate::support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ResourceQuota;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};
use support::cluster::TestCluster;

fn blueprint(p: &str) -> String {
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
      version: "595.91.07"
      kernelModuleType: open
  nodePools:
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
"#
    )
}

fn gpuctl(args: &[&str], kubeconfig: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuctl"))
        .args(args)
        .args(["--kubeconfig", kubeconfig])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("GPUCTL_TODAY", "2026-11-30")
        .output()
        .expect("gpuctl runs")
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    gpuctl_no_test_cluster,
    ignore = "skipped: needs the test API server (docs/testing.md)"
)]
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
