//! DRA in the test cluster (issue 29): ResourceQuota on device-class keys with the real
//! resourceclaim controller, and allocation by the real kube-scheduler from ResourceSlices that
//! `support::dra` publishes the way NVIDIA's DRA driver v25.12.0 does.
//!
//! - Quota runs on the shared harness (kube-controller-manager runs `resourceclaim-controller`; no
//!   scheduler, so its pods stay Pending).
//! - Allocation starts a harness of its own with `run up --with-scheduler`: kube-scheduler with the
//!   one profile `gpuctl-dra`, which takes only pods naming it (DeviceClass names are cluster-wide,
//!   another reason for a cluster of its own).
//!
//! Run: `tools/kube-harness/run up && eval "$(tools/kube-harness/run env)" && cargo test --test cluster dra_harness`.

use crate::support::cluster::{GpuNode, TestCluster, api_error, create_admitted};
use crate::support::dra::{self, DraNode, SCHEDULER};
use crate::support::fresh::FreshCluster;

use std::time::{Duration, Instant};

use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Event, Pod, ResourceQuota};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

const GPU_CLASS: &str = "gpu.nvidia.com";
const MIG_CLASS: &str = "mig.nvidia.com";
const QUOTA_KEY: &str = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices";

/// Polls `check` every 200 ms until it gives a value; panics after `secs` naming `what`.
pub(crate) async fn poll<T>(secs: u64, what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A ResourceClaimTemplate asking for `count` devices of `class` (ExactCount), with CEL `selectors`.
fn claim_template(
    name: &str,
    class: &str,
    count: u32,
    selectors: &[&str],
) -> ResourceClaimTemplate {
    let selectors: Vec<Value> = selectors
        .iter()
        .map(|e| json!({"cel": {"expression": e}}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{
            "name": "gpu",
            "exactly": {
                "deviceClassName": class,
                "allocationMode": "ExactCount",
                "count": count,
                "selectors": selectors,
            },
        }]}}},
    }))
    .expect("valid template")
}

/// The name of the ResourceClaim the resourceclaim controller made for pod claim `gpu`, once it
/// is in the pod's status.
pub(crate) async fn generated_claim(pods: &Api<Pod>, pod: &str) -> String {
    poll(
        30,
        &format!("pod {pod}'s generated claim in status.resourceClaimStatuses"),
        async || {
            let p = pods.get(pod).await.ok()?;
            p.status?
                .resource_claim_statuses?
                .into_iter()
                .find(|s| s.name == "gpu")?
                .resource_claim_name
        },
    )
    .await
}

fn used(rq: &ResourceQuota, key: &str) -> Option<String> {
    rq.status
        .as_ref()?
        .used
        .as_ref()?
        .get(key)
        .map(|q| q.0.clone())
}

#[needs_test_cluster]
#[tokio::test]
async fn dra_quota_charges_template_claims_and_refuses_claims_beyond_it() {
    let Some(tc) = TestCluster::connect("dra_quota").await else {
        return;
    };
    let started = Instant::now();
    let quotas: Api<ResourceQuota> = tc.namespaced();
    let templates: Api<ResourceClaimTemplate> = tc.namespaced();
    let claims: Api<ResourceClaim> = tc.namespaced();
    let pods: Api<Pod> = tc.namespaced();
    let events: Api<Event> = tc.namespaced();

    let rq: ResourceQuota = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus"},
        "spec": {"hard": {QUOTA_KEY: "1"}},
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &rq).await.unwrap();
    // Quota admission refuses what a quota's status does not cover yet: wait for KCM's quota
    // controller to write status.hard (and used 0).
    poll(30, "the quota controller to fill status.used", async || {
        let rq = quotas.get("gpus").await.ok()?;
        (used(&rq, QUOTA_KEY)? == "0").then_some(())
    })
    .await;
    eprintln!(
        "dra_quota: quota status synced after {:.1}s",
        started.elapsed().as_secs_f64()
    );

    templates
        .create(
            &PostParams::default(),
            &claim_template("one-gpu", GPU_CLASS, 1, &[]),
        )
        .await
        .expect("the API server stores the template (templates are not charged)");

    // Pod 1: the controller makes its claim from the template, through quota admission.
    create_admitted(&pods, &dra::claim_pod("p1", "one-gpu", None, None))
        .await
        .expect("pod 1 created");
    let claim1 = generated_claim(&pods, "p1").await;
    eprintln!(
        "dra_quota: pod 1's claim {claim1} after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let c = claims.get(&claim1).await.unwrap();
    assert!(
        claim1.starts_with("p1-gpu-"),
        "generateName <pod>-<podClaim>-: {claim1}"
    );
    let owner = &c.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Pod", "p1", Some(true)),
        "the pod owns its claim"
    );
    assert_eq!(
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("resource.kubernetes.io/pod-claim-name"))
            .map(String::as_str),
        Some("gpu")
    );
    let exactly = c.spec.devices.as_ref().unwrap().requests.as_ref().unwrap()[0]
        .exactly
        .clone()
        .unwrap();
    assert_eq!(
        (exactly.device_class_name.as_str(), exactly.count),
        (GPU_CLASS, Some(1))
    );
    poll(30, "quota status.used 1", async || {
        let rq = quotas.get("gpus").await.ok()?;
        (used(&rq, QUOTA_KEY)? == "1").then_some(())
    })
    .await;

    // Pod 2: admitted (pods are not charged), but the controller's create of its claim is refused.
    create_admitted(&pods, &dra::claim_pod("p2", "one-gpu", None, None))
        .await
        .expect("pod 2 created: the pod itself is not charged");
    let event = poll(
        30,
        "a FailedResourceClaimCreation event on pod p2",
        async || {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.involved_object.name.as_deref() == Some("p2")
                    && e.reason.as_deref() == Some("FailedResourceClaimCreation")
            })
        },
    )
    .await;
    let message = event.message.clone().unwrap_or_default();
    eprintln!(
        "dra_quota: pod 2's event after {:.1}s: {} {}: {message}",
        started.elapsed().as_secs_f64(),
        event.type_.as_deref().unwrap_or(""),
        event.reason.as_deref().unwrap_or("")
    );
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.involved_object.kind.as_deref(), Some("Pod"));
    assert!(
        message.contains("PodResourceClaim gpu") && message.contains("exceeded quota: gpus"),
        "{message}"
    );
    assert!(message.contains(QUOTA_KEY), "{message}");
    let p2 = pods.get("p2").await.unwrap();
    let p2_claims = p2
        .status
        .and_then(|s| s.resource_claim_statuses)
        .unwrap_or_default();
    assert!(
        p2_claims.iter().all(|s| s.resource_claim_name.is_none()),
        "pod 2 has no claim: {p2_claims:?}"
    );
    let names: Vec<String> = claims
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, vec![claim1.clone()], "only pod 1's claim exists");
    // `gpuctl doctor` names the cause from the controller's event and the pod's missing claim.
    let bp = crate::support::doctor::load(&crate::support::doctor::blueprint_text(
        &tc,
        &[("h100", "")],
        "",
        "",
    ));
    let report = crate::support::doctor::diagnose(&tc, &bp).await;
    let f = crate::support::doctor::one(&report, &tc, "GPU214");
    assert!(
        f.title.contains(&format!(
            "{}/gpus refuses the claim `gpu` of pod/{}/p2",
            tc.namespace, tc.namespace
        )),
        "{}",
        f.title
    );

    // A claim created directly is refused by the API server's quota admission.
    let direct: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "direct"},
        "spec": {"devices": {"requests": [{
            "name": "gpu",
            "exactly": {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 1},
        }]}},
    }))
    .unwrap();
    let (code, msg) = api_error(claims.create(&PostParams::default(), &direct).await).unwrap();
    eprintln!("dra_quota: direct claim refused: {code} {msg}");
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("exceeded quota: gpus"), "{msg}");
    assert!(
        msg.contains(&format!("requested: {QUOTA_KEY}=1"))
            && msg.contains(&format!("used: {QUOTA_KEY}=1"))
            && msg.contains(&format!("limited: {QUOTA_KEY}=1")),
        "{msg}"
    );
    let rq = quotas.get("gpus").await.unwrap();
    assert_eq!(used(&rq, QUOTA_KEY).as_deref(), Some("1"));
    eprintln!("dra_quota: done in {:.1}s", started.elapsed().as_secs_f64());
}

/// What a bound pod's claim got: `(node, [(pool, device)])`.
async fn bound(
    pods: &Api<Pod>,
    claims: &Api<ResourceClaim>,
    pod: &str,
) -> (String, Vec<(String, String)>) {
    let node = poll(60, &format!("pod {pod} to be bound"), async || {
        pods.get(pod).await.ok()?.spec?.node_name
    })
    .await;
    let claim = generated_claim(pods, pod).await;
    let c = claims.get(&claim).await.unwrap();
    let status = c.status.expect("an allocated claim has a status");
    let results = status
        .allocation
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default();
    for r in &results {
        assert_eq!(r.driver, dra::DRIVER, "{claim}: {r:?}");
        assert_eq!(r.request, "gpu", "{claim}: {r:?}");
    }
    let reserved: Vec<String> = status
        .reserved_for
        .unwrap_or_default()
        .into_iter()
        .map(|r| format!("{}/{}", r.resource, r.name))
        .collect();
    assert_eq!(
        reserved,
        vec![format!("pods/{pod}")],
        "{claim} is reserved for its pod"
    );
    (
        node,
        results.into_iter().map(|r| (r.pool, r.device)).collect(),
    )
}

/// The scheduler's PodScheduled=False message for `pod`.
pub(crate) async fn unschedulable(pods: &Api<Pod>, pod: &str) -> String {
    poll(
        60,
        &format!("PodScheduled=False on pod {pod}"),
        async || {
            let p = pods.get(pod).await.ok()?;
            let c = p
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
            Some(format!(
                "{}: {}",
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default()
            ))
        },
    )
    .await
}

#[needs_test_cluster]
#[tokio::test]
async fn dra_claims_are_allocated_by_the_real_scheduler_from_published_slices() {
    // The shared cluster's presence decides skip (developer machine) or fail (CI), as elsewhere.
    let Some(_shared) = TestCluster::connect("dra_allocation").await else {
        return;
    };
    let started = Instant::now();
    let fresh = FreshCluster::up_with("dra_allocation", &["--with-scheduler"]);
    assert_eq!(fresh.var("GPUCTL_HARNESS_SCHEDULER"), SCHEDULER);
    let tc = TestCluster::connect_kubeconfig(&fresh.kubeconfig(), "dra_allocation")
        .await
        .expect("connects to the fresh cluster");
    let up = started.elapsed().as_secs_f64();

    let classes = dra::create_device_classes(&tc).await.unwrap();
    // Stored as the chart's templates define them (read from ../shared at test time).
    for (class, kind) in classes.iter().zip(["gpu", "mig"]) {
        let read = dra::device_class(kind).unwrap();
        assert_eq!(class.metadata.name, read.metadata.name);
        assert_eq!(class.spec.selectors, read.spec.selectors);
        let cel = &class.spec.selectors.as_ref().unwrap()[0]
            .cel
            .as_ref()
            .unwrap()
            .expression;
        assert!(cel.contains(&format!(".type == '{kind}'")), "{cel}");
    }
    assert_eq!(
        classes
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        [GPU_CLASS, MIG_CLASS]
    );

    // Two nodes: 8 whole H100s; an A100 80GB with GPU 0 split into seven 1g.10gb and GPU 1 whole.
    let (h100, h100_slice) =
        dra::create_dra_node(&tc, "h100", &GpuNode::h100(8), |n| DraNode::h100(n, 8))
            .await
            .unwrap();
    let (a100, a100_slice) = dra::create_dra_node(&tc, "a100", &GpuNode::a100_80gb(2), |n| {
        DraNode::a100_80gb(n, 2).mig_1g_10gb(&[0])
    })
    .await
    .unwrap();
    assert_eq!(h100_slice.spec.devices.as_ref().map(Vec::len), Some(8));
    assert_eq!(a100_slice.spec.devices.as_ref().map(Vec::len), Some(8));
    eprintln!(
        "dra_allocation: cluster up in {up:.1}s; classes, nodes {h100} {a100} and slices after {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let templates: Api<ResourceClaimTemplate> = tc.namespaced();
    let pods: Api<Pod> = tc.namespaced();
    let claims: Api<ResourceClaim> = tc.namespaced();
    let attr = |a: &str| format!("device.attributes['{GPU_CLASS}'].{a}");
    let memory =
        |q: &str| format!("device.capacity['{GPU_CLASS}'].memory.compareTo(quantity('{q}')) >= 0");
    let shapes = [
        (
            "h100-pair",
            GPU_CLASS,
            2,
            attr("productName") + " == 'NVIDIA H100 80GB HBM3'",
        ),
        // NVML's total of an H100 80GB is 81559 MiB, below 80Gi: only the whole A100 80GB matches.
        ("mem-80gi", GPU_CLASS, 1, memory("80Gi")),
        ("mig-1g", MIG_CLASS, 1, attr("profile") + " == '1g.10gb'"),
        ("mem-200gi", GPU_CLASS, 1, memory("200Gi")),
        // `profile` exists on MIG devices only: a CEL runtime error on every GPU, not a non-match.
        (
            "profile-on-gpu",
            GPU_CLASS,
            1,
            attr("profile") + " == '1g.10gb'",
        ),
    ];
    // A pod for the default scheduler (none runs): created first, never bound by gpuctl-dra.
    templates
        .create(
            &PostParams::default(),
            &claim_template("any-gpu", GPU_CLASS, 1, &[]),
        )
        .await
        .unwrap();
    create_admitted(
        &pods,
        &dra::claim_pod("default-scheduler", "any-gpu", None, None),
    )
    .await
    .unwrap();
    for (name, class, count, cel) in &shapes {
        templates
            .create(
                &PostParams::default(),
                &claim_template(name, class, *count, &[cel.as_str()]),
            )
            .await
            .unwrap_or_else(|e| panic!("template {name} ({cel}): {e}"));
        create_admitted(&pods, &dra::claim_pod(name, name, Some(SCHEDULER), None))
            .await
            .unwrap_or_else(|e| panic!("pod {name}: {e}"));
    }
    let created = started.elapsed().as_secs_f64();

    let (node, devices) = bound(&pods, &claims, "h100-pair").await;
    eprintln!(
        "dra_allocation: h100-pair bound to {node} after {:.1}s: {devices:?}",
        started.elapsed().as_secs_f64() - created
    );
    assert_eq!(node, h100);
    assert_eq!(devices.len(), 2, "{devices:?}");
    assert!(
        devices
            .iter()
            .all(|(pool, dev)| *pool == h100 && dev.starts_with("gpu-") && !dev.contains("mig")),
        "{devices:?}"
    );
    assert_ne!(devices[0].1, devices[1].1, "two distinct GPUs");

    let (node, devices) = bound(&pods, &claims, "mem-80gi").await;
    eprintln!("dra_allocation: mem-80gi bound to {node}: {devices:?}");
    assert_eq!(node, a100);
    assert_eq!(devices, vec![(a100.clone(), "gpu-1".to_string())]);

    let (node, devices) = bound(&pods, &claims, "mig-1g").await;
    eprintln!("dra_allocation: mig-1g bound to {node}: {devices:?}");
    assert_eq!(node, a100);
    assert_eq!(devices.len(), 1);
    let (pool, dev) = &devices[0];
    assert_eq!(pool, &a100);
    assert!(
        dev.starts_with("gpu-0-mig-19-") && dev.ends_with("-1"),
        "a 1g.10gb instance of GPU 0: {dev}"
    );

    let message = unschedulable(&pods, "mem-200gi").await;
    eprintln!("dra_allocation: mem-200gi: {message}");
    assert!(message.starts_with("Unschedulable: "), "{message}");
    assert!(
        message.contains("0/2 nodes are available")
            && message.contains("2 cannot allocate all claims"),
        "{message}"
    );

    let message = unschedulable(&pods, "profile-on-gpu").await;
    eprintln!("dra_allocation: profile-on-gpu: {message}");
    let claim = generated_claim(&pods, "profile-on-gpu").await;
    assert!(
        message.starts_with("SchedulerError: running \"DynamicResources\" filter plugin: ")
            && message.contains(&format!("claim {}/{claim}: selector #0: ", tc.namespace))
            && message.contains("CEL runtime error: no such key: profile"),
        "{message}"
    );
    for pod in ["mem-200gi", "profile-on-gpu"] {
        let p = pods.get(pod).await.unwrap();
        assert_eq!(p.spec.and_then(|s| s.node_name), None, "{pod} is not bound");
    }
    // `gpuctl doctor` on this cluster names both as unallocatable claims (GPU215), with the
    // scheduler's words; the pods that were allocated are not findings.
    let k = gpuctl_cluster::connect(&gpuctl_cluster::ConnectOptions {
        kubeconfig: Some(fresh.kubeconfig()),
        context: None,
    })
    .await
    .expect("connect");
    let read = gpuctl_cluster::diagnostics::read(
        &k,
        gpuctl_core::diagnostics::DOCTOR_READS,
        &crate::support::doctor::operator_ns(&tc),
        None,
    )
    .await
    .expect("diagnostics");
    let bp = crate::support::doctor::load(&crate::support::doctor::blueprint_text(
        &tc,
        &[("h100", "")],
        "",
        "",
    ));
    let report = gpuctl_core::doctor::diagnose(
        &bp,
        gpuctl_core::profiles::Catalog::embedded(),
        &read.diagnostics,
        "bp.yaml",
    );
    let mut unallocatable: Vec<&str> = report
        .findings
        .iter()
        .filter(|f| f.id == "GPU215")
        .map(|f| f.subjects[0].as_str())
        .collect();
    unallocatable.sort();
    assert_eq!(
        unallocatable,
        [
            format!("pod/{}/mem-200gi", tc.namespace),
            format!("pod/{}/profile-on-gpu", tc.namespace)
        ],
        "{:#?}",
        report.findings
    );
    // The default-scheduler pod got its claim (the controller does not wait for scheduling), but
    // gpuctl-dra, done with the pods created after it, never touched it: no node, no condition.
    generated_claim(&pods, "default-scheduler").await;
    let p = pods.get("default-scheduler").await.unwrap();
    assert_eq!(
        p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()),
        Some("default-scheduler")
    );
    assert_eq!(p.spec.and_then(|s| s.node_name), None);
    assert_eq!(
        p.status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .len(),
        0,
        "no scheduler wrote a condition"
    );
    eprintln!(
        "dra_allocation: done in {:.1}s (cluster start {up:.1}s)",
        started.elapsed().as_secs_f64()
    );
    drop(fresh);
}
