//! `gpuctl doctor` against the real kube-apiserver (issue 16), one test per failure story, each
//! built from real objects and asserting the cause and the fix the doctor names.
//!
//! Real parts: the API server, etcd, kube-controller-manager (the Job controller creates pods; the
//! ResourceQuota admission refuses them and the Job controller writes the `FailedCreate` event),
//! and the real Kueue controller (it writes the Workload's `QuotaReserved` condition). The doctor
//! reads them with the same paged LIST calls `gpuctl doctor` makes.
//!
//! Stand-ins, stated plainly (the harness has no scheduler, kubelet or GPU Operator):
//! - GPU Nodes carry the labels GPU Feature Discovery and the operator set, and `status.allocatable`
//!   as the device plugin registers it (tests/support/cluster.rs).
//! - The scheduler: a test binds a pod with the `pods/binding` subresource, as kube-scheduler does,
//!   or, for a pod it cannot place, writes exactly what kube-scheduler writes: the pod's
//!   `PodScheduled=False` condition with reason `Unschedulable` and the scheduler's message, and an
//!   events.k8s.io/v1 `FailedScheduling` Event from `default-scheduler`.
//! - The kubelet: a test writes a bound pod's status (Running and Ready, or a container in
//!   `CrashLoopBackOff` with its last termination) through the status subresource.
//!
//! The cluster is shared with other tests, so each test's blueprint selects only its own nodes
//! (pools labelled with the test's prefix) and tenants in its own namespace, and the assertions
//! look at the findings about the test's own objects.

use crate::support;

use std::time::{Duration, Instant};

use gpuctl_core::located::Severity;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Event, ResourceQuota};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster};
use support::doctor::*;
use support::gpuctl::Gpuctl;

/// Seed 000: a team's CUDA image on a pool whose nodes run a driver too old for it. The containers
/// crash with the runtime's message; the doctor names the driver, the tenant and the upgrade.
#[needs_test_cluster]
#[tokio::test]
async fn driver_too_old_for_the_tenants_cuda() {
    let Some(tc) = TestCluster::connect("doctor_cuda").await else {
        return;
    };
    let node = gpu_node(
        &tc,
        "n0",
        "train",
        GpuNode::h100(8).driver("550.163.01", (12, 4)),
    )
    .await;
    let bp = load(&blueprint_text(
        &tc,
        &[("train", "")],
        "      cuda: [\"13.0\"]\n",
        "",
    ));
    let pod = create_pod(
        &tc,
        pod_manifest(
            "train-0",
            &tc.namespace,
            json!({"nvidia.com/gpu": "8"}),
            json!({}),
            None,
        ),
    )
    .await;
    bind(&tc, &tc.namespace, &pod, &node).await;
    kubelet(
        &tc,
        &tc.namespace,
        &pod,
        Some((
            "RuntimeError: CUDA driver version is insufficient for CUDA runtime version",
            6,
        )),
    )
    .await;
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU235");
    assert_eq!(f.severity, Severity::Error);
    assert!(f.subjects.contains(&format!("node/{node}")), "{f:#?}");
    assert!(
        f.subjects.contains(&format!("tenant/{}-team", tc.prefix)),
        "{f:#?}"
    );
    assert!(
        f.cause
            .contains("CUDA 13.0 needs driver 580.65.06 or newer"),
        "{}",
        f.cause
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.text.contains("CUDA driver version is insufficient")),
        "the crashing container is evidence: {:#?}",
        f.evidence
    );
    assert!(
        f.fix.contains(&format!(
            "gpuctl upgrade driver bp.yaml --pool {}-train --to {DRIVER}",
            tc.prefix
        )),
        "{}",
        f.fix
    );
    let drift = one(&r, &tc, "GPU234");
    assert!(
        drift
            .title
            .contains("runs driver 550.163.01; the blueprint says 580.173.02")
    );
    assert!(r.has_errors());
}

/// Eight GPUs free, but spread: a 4-GPU pod stays Pending although the pool has room in total.
#[needs_test_cluster]
#[tokio::test]
async fn free_gpus_spread_over_nodes() {
    let Some(tc) = TestCluster::connect("doctor_spread").await else {
        return;
    };
    let pool = format!("{}-train", tc.prefix);
    let mut nodes = Vec::new();
    for i in 0..4 {
        nodes.push(
            gpu_node(
                &tc,
                &format!("n{i}"),
                "train",
                GpuNode::h100(8).driver(DRIVER, (13, 0)),
            )
            .await,
        );
    }
    for (i, n) in nodes.iter().enumerate() {
        let p = create_pod(
            &tc,
            pod_manifest(
                &format!("busy-{i}"),
                &tc.namespace,
                json!({"nvidia.com/gpu": "6"}),
                json!({"gpuctl.dev/pool": pool}),
                None,
            ),
        )
        .await;
        bind(&tc, &tc.namespace, &p, n).await;
        kubelet(&tc, &tc.namespace, &p, None).await;
    }
    let big = create_pod(
        &tc,
        pod_manifest(
            "train-4gpu",
            &tc.namespace,
            json!({"nvidia.com/gpu": "4"}),
            json!({"gpuctl.dev/pool": pool}),
            None,
        ),
    )
    .await;
    unschedulable(
        &tc,
        &big,
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.",
    )
    .await;
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU220");
    assert!(
        f.subjects
            .contains(&format!("pod/{}/train-4gpu", tc.namespace))
    );
    assert!(
        f.cause.contains("8 are free across 4 nodes") && f.cause.contains("at most 2"),
        "{}",
        f.cause
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.source.contains("FailedScheduling")),
        "{:#?}",
        f.evidence
    );
    assert!(f.evidence.iter().any(|e| {
        e.source
            .starts_with("condition PodScheduled=False (Unschedulable)")
    }));
    let room = r.pools.iter().find(|p| p.pool == pool).unwrap();
    assert_eq!(
        room.free["nvidia.com/gpu"],
        (8, 2),
        "8 free, at most 2 on one node"
    );
    assert!(
        mine(&r, &tc).iter().all(|f| f.id != "GPU200"),
        "not reported as insufficient"
    );
}

/// Seed 004's worked case: a pod asks for a MIG profile no pool offers while the pool's slices of
/// another profile sit idle.
#[needs_test_cluster]
#[tokio::test]
async fn mig_profile_no_pool_offers() {
    let Some(tc) = TestCluster::connect("doctor_mig").await else {
        return;
    };
    let pool = format!("{}-infer", tc.prefix);
    gpu_node(
        &tc,
        "n0",
        "infer",
        GpuNode::h100(8)
            .driver(DRIVER, (13, 0))
            .mig_mixed(&[("3g.40gb", 16, 40192)]),
    )
    .await;
    let p = create_pod(
        &tc,
        pod_manifest(
            "infer-0",
            &tc.namespace,
            json!({"nvidia.com/mig-2g.20gb": "1"}),
            json!({"gpuctl.dev/pool": pool}),
            None,
        ),
    )
    .await;
    unschedulable(&tc, &p, "0/1 nodes are available: 1 Insufficient nvidia.com/mig-2g.20gb. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.").await;
    let mig = "      partitioning:\n        mode: mig\n        mig:\n          strategy: mixed\n          layout: { \"3g.40gb\": 2 }\n";
    let bp = load(&blueprint_text(&tc, &[("infer", mig)], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU203");
    assert!(
        f.title
            .contains("no pool advertises `nvidia.com/mig-2g.20gb`"),
        "{}",
        f.title
    );
    assert!(
        f.cause
            .contains(&format!("`nvidia.com/mig-3g.40gb` (pool {pool})")),
        "{}",
        f.cause
    );
    assert!(f.fix.contains("nvidia.com/mig-3g.40gb"), "{}", f.fix);
    let idle = one(&r, &tc, "GPU221");
    assert!(
        idle.title
            .starts_with("16 free `nvidia.com/mig-3g.40gb` slices"),
        "{}",
        idle.title
    );
}

/// The device plugin crash-loops on one pool only: the doctor names that pool, its node and the
/// log command, and nothing about the healthy pool.
#[needs_test_cluster]
#[tokio::test]
async fn device_plugin_crash_looping_on_one_pool() {
    let Some(tc) = TestCluster::connect("doctor_plugin").await else {
        return;
    };
    let a = gpu_node(&tc, "a0", "a", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let b = gpu_node(&tc, "b0", "b", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let op = create_operator_ns(&tc).await;
    for (node, crash) in [
        (&a, None),
        (
            &b,
            Some((
                "failed to initialize NVML: Driver/library version mismatch",
                9,
            )),
        ),
    ] {
        let p = create_pod(
            &tc,
            pod_manifest(
                &format!("nvidia-device-plugin-daemonset-{node}"),
                &op,
                json!({}),
                json!({}),
                Some("nvidia-device-plugin-daemonset"),
            ),
        )
        .await;
        bind(&tc, &op, &p, node).await;
        kubelet(&tc, &op, &p, crash).await;
    }
    let bp = load(&blueprint_text(&tc, &[("a", ""), ("b", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU230");
    assert_eq!(
        f.title,
        format!(
            "device plugin pods are not Ready on pool {}-b (CrashLoopBackOff)",
            tc.prefix
        )
    );
    assert!(
        f.subjects.contains(&format!("node/{b}")) && !f.subjects.contains(&format!("node/{a}"))
    );
    assert!(
        f.evidence[0].text.contains("9 restarts")
            && f.evidence[0]
                .text
                .contains("Driver/library version mismatch")
    );
    assert!(f.fix.contains(&format!(
        "kubectl logs -n {op} nvidia-device-plugin-daemonset-{b}"
    )));
}

/// A team's quota is used up: the Job controller's pods are refused by ResourceQuota admission.
#[needs_test_cluster]
#[tokio::test]
async fn exhausted_team_quota() {
    let Some(tc) = TestCluster::connect("doctor_quota").await else {
        return;
    };
    let quotas: Api<ResourceQuota> = tc.namespaced();
    let q: ResourceQuota = serde_json::from_value(json!({"metadata": {"name": "gpu-quota"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}))
    .unwrap();
    quotas
        .create(&PostParams::default(), &q)
        .await
        .expect("quota");
    tc.sync_quota_status("gpu-quota")
        .await
        .expect("quota status");
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = tc.namespaced();
    let job = serde_json::from_value(json!({"metadata": {"name": "train"}, "spec": {
        "parallelism": 3, "completions": 3, "backoffLimit": 0,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": IMAGE,
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}))
    .unwrap();
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("job");
    // The Job controller creates pods until quota admission refuses one and records it.
    let events: Api<Event> = tc.namespaced();
    let deadline = Instant::now() + WAIT;
    loop {
        let list = events.list(&ListParams::default()).await.expect("events");
        if list.items.iter().any(|e| {
            e.reason.as_deref() == Some("FailedCreate")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("exceeded quota"))
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no FailedCreate from the Job controller within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU204");
    assert!(
        f.subjects
            .contains(&format!("resourcequota/{}/gpu-quota", tc.namespace)),
        "{f:#?}"
    );
    assert!(
        f.subjects.contains(&format!("job/{}/train", tc.namespace)),
        "{f:#?}"
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.text.contains("exceeded quota: gpu-quota")),
        "{:#?}",
        f.evidence
    );
    assert!(
        f.fix.contains(&format!("tenant `{}-team`", tc.prefix)),
        "{}",
        f.fix
    );
}

/// A Workload waits on its cohort: its ClusterQueue is past its own quota and the other queue of
/// the cohort uses all it could lend. The real Kueue writes why; the doctor says it and the fix.
#[needs_test_cluster]
#[tokio::test]
async fn workload_waiting_on_its_cohort() {
    let Some(tc) = TestCluster::connect("doctor_cohort").await else {
        return;
    };
    let p = tc.prefix.clone();
    let flavor = format!("{p}-train");
    let (cq_a, cq_b, cohort) = (format!("{p}-a"), format!("{p}-b"), format!("{p}-c"));
    tc.apply(
        &kueue_api(&tc, "ResourceFlavor", "resourceflavors", false),
        &json!({"apiVersion": format!("kueue.x-k8s.io/{KUEUE}"), "kind": "ResourceFlavor",
            "metadata": {"name": flavor}, "spec": {"nodeLabels": {"gpuctl.dev/pool": flavor}}}),
    )
    .await
    .expect("flavor");
    let cqs = kueue_api(&tc, "ClusterQueue", "clusterqueues", false);
    tc.apply(&cqs, &cluster_queue(&cq_a, &cohort, &flavor, 4))
        .await
        .expect("cq a");
    tc.apply(&cqs, &cluster_queue(&cq_b, &cohort, &flavor, 4))
        .await
        .expect("cq b");
    let lqs = kueue_api(&tc, "LocalQueue", "localqueues", true);
    for (lq, cq) in [("lq-a", &cq_a), ("lq-b", &cq_b)] {
        tc.apply(
            &lqs,
            &json!({"apiVersion": format!("kueue.x-k8s.io/{KUEUE}"), "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": tc.namespace}, "spec": {"clusterQueue": cq}}),
        )
        .await
        .expect("local queue");
    }
    let jobs: Api<DynamicObject> = tc.dynamic("batch", "v1", "Job", "jobs", true);
    // Team b takes its whole quota first; then team a needs 6: its own 4 and 2 borrowed.
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(queued_job("job-b", "lq-b", 4)).unwrap(),
    )
    .await
    .expect("job b");
    workload_condition(&tc, "job-b", |w| {
        condition(w, "Admitted").is_some_and(|c| c["status"] == "True")
    })
    .await;
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(queued_job("job-a", "lq-a", 6)).unwrap(),
    )
    .await
    .expect("job a");
    let w = workload_condition(&tc, "job-a", |w| {
        condition(w, "QuotaReserved").is_some_and(|c| {
            c["status"] == "False"
                && c["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("insufficient unused quota")
        })
    })
    .await;
    // Kueue writes a ClusterQueue's usage to its status a moment after admitting.
    let deadline = Instant::now() + WAIT;
    loop {
        let q = cqs.get(&cq_b).await.expect("cq b");
        let v = serde_json::to_value(&q).unwrap();
        if v["status"]["flavorsUsage"][0]["resources"][0]["total"] == "4" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Kueue did not report cq b's usage: {v}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let kueue = format!(
        "  scheduling:\n    queueing: kueue\n    kueue:\n      version: v0.19.2\n      install: none\n      cohorts:\n        - {{ name: {cohort} }}\n      clusterQueues:\n        - name: {cq_a}\n          cohort: {cohort}\n          resources:\n            - pool: {flavor}\n              quota: {{ nvidia.com/gpu: 4 }}\n              borrowingLimit: {{ nvidia.com/gpu: 4 }}\n        - name: {cq_b}\n          cohort: {cohort}\n          resources:\n            - pool: {flavor}\n              quota: {{ nvidia.com/gpu: 4 }}\n"
    );
    let bp = load(&blueprint_text(
        &tc,
        &[("train", "")],
        &format!("      queue: {cq_a}\n"),
        &kueue,
    ));
    let r = diagnose(&tc, &bp).await;
    let f = one(&r, &tc, "GPU207");
    let wname = w["metadata"]["name"].as_str().unwrap();
    assert!(
        f.subjects
            .contains(&format!("workload/{}/{wname}", tc.namespace)),
        "{f:#?}"
    );
    assert!(
        f.subjects.contains(&format!("cohort/{cohort}"))
            && f.subjects.contains(&format!("clusterqueue/{cq_a}"))
    );
    assert!(
        f.evidence.iter().any(|e| e
            .text
            .contains("insufficient unused quota for nvidia.com/gpu")
            && e.text.contains("2 more needed")),
        "Kueue's own words: {:#?}",
        f.evidence
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.source.contains(&format!("clusterqueue/{cq_b}"))
                && e.text.contains("4 in use")),
        "the cohort's other queue holds what could be lent: {:#?}",
        f.evidence
    );
    assert!(
        f.cause
            .contains("borrowing limit for `nvidia.com/gpu` is 4"),
        "{}",
        f.cause
    );
    assert!(f.fix.contains("kubectl get clusterqueues"), "{}", f.fix);
}

/// A healthy cluster: pools Ready with the declared driver, the device plugin Ready everywhere, a
/// running GPU pod, the PriorityClass present, quota with room: no finding, exit 0 for its part.
/// Also runs the real binary live and on a `snapshot --diagnostics` file.
#[needs_test_cluster]
#[tokio::test]
async fn healthy_cluster_has_no_findings() {
    let Some(tc) = TestCluster::connect("doctor_healthy").await else {
        return;
    };
    let pool = format!("{}-train", tc.prefix);
    let mut nodes = Vec::new();
    for i in 0..2 {
        nodes.push(
            gpu_node(
                &tc,
                &format!("n{i}"),
                "train",
                GpuNode::h100(8).driver(DRIVER, (13, 0)),
            )
            .await,
        );
    }
    let op = create_operator_ns(&tc).await;
    for n in &nodes {
        let p = create_pod(
            &tc,
            pod_manifest(
                &format!("nvidia-device-plugin-daemonset-{n}"),
                &op,
                json!({}),
                json!({}),
                Some("nvidia-device-plugin-daemonset"),
            ),
        )
        .await;
        bind(&tc, &op, &p, n).await;
        kubelet(&tc, &op, &p, None).await;
    }
    let run = create_pod(
        &tc,
        pod_manifest(
            "train-0",
            &tc.namespace,
            json!({"nvidia.com/gpu": "8"}),
            json!({"gpuctl.dev/pool": pool}),
            None,
        ),
    )
    .await;
    bind(&tc, &tc.namespace, &run, &nodes[0]).await;
    kubelet(&tc, &tc.namespace, &run, None).await;
    let pc = tc.name("critical");
    let pcs: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = tc.cluster_scoped();
    pcs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": pc}, "value": 1000})).unwrap(),
    )
    .await
    .expect("priority class");
    let extra = format!("  priorityClasses:\n    - {{ name: {pc}, value: 1000 }}\n");
    let text = blueprint_text(
        &tc,
        &[("train", "")],
        &format!("      priorityClass: {pc}\n      cuda: [\"12.8\", \"13.0\"]\n"),
        &extra,
    );
    let bp = load(&text);
    let r = diagnose(&tc, &bp).await;
    assert!(mine(&r, &tc).is_empty(), "{:#?}", mine(&r, &tc));
    let room = r.pools.iter().find(|p| p.pool == pool).unwrap();
    assert_eq!((room.nodes, room.ready), (2, 2));
    assert_eq!(room.free["nvidia.com/gpu"], (8, 8));

    // The binary, live and from a diagnostics snapshot, agrees.
    let dir = tempfile::tempdir().unwrap();
    let bp_path = dir.path().join("bp.yaml");
    std::fs::write(&bp_path, &text).unwrap();
    let snap = dir.path().join("snap.json");
    let kc = kubeconfig();
    let out = Gpuctl::new(["snapshot"])
        .arg(&bp_path)
        .args(["--diagnostics", "--out"])
        .arg(&snap)
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["--today", "2026-12-01"])
        .output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&snap).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "snapshots are owner-only");
    }
    for source in [
        vec!["--kubeconfig".to_string(), kc.display().to_string()],
        vec!["--snapshot".to_string(), snap.display().to_string()],
    ] {
        let out = Gpuctl::new(["doctor"])
            .arg(&bp_path)
            .args(&source)
            .args(["-o", "json", "--today", "2026-12-01"])
            .output();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(v["format_version"], 1);
        let findings = v["findings"].as_array().unwrap();
        let ours = findings
            .iter()
            .filter(|f| f["subjects"].to_string().contains(&tc.prefix))
            .count();
        assert_eq!(ours, 0, "{source:?}: {findings:#?}");
        let errors = v["summary"]["errors"].as_u64().unwrap();
        assert_eq!(
            out.status.code(),
            Some(if errors > 0 { 1 } else { 0 }),
            "{source:?}"
        );
    }
}
