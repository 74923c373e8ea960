//! Issue 40: the blue-green driver upgrade of a Karpenter pool goes through Karpenter's own drift,
//! with the real Karpenter (v1.15.0, KWOK provider), the real kwok controller and the real
//! kube-scheduler (`tools/kube-harness/run up --with-karpenter`), on a cluster of its own.
//!
//! gpuctl applies the blueprint (the NodePool's template labels its nodes `gpuctl.dev/driver=<blue
//! CR>`); a training pod makes Karpenter launch a node. The upgrade applies the green CR and moves
//! the NodePool's template label; Karpenter marks the NodeClaim drifted, launches its replacement
//! from the new template, drains the old node and deletes it; the run validates the replacement on
//! the new driver, deletes the blue CR and completes. After the blueprint edit the upgrade asks
//! for, the plan is empty.
//!
//! Played by the test, and why (as in `provisioning.rs`): the Node Readiness Controller cannot be
//! built here, so the test removes the readiness taint from a new node, and the harness runs no
//! node-lifecycle controller, so it also removes `node.kubernetes.io/not-ready`.
//! `support::operator_driver` plays the GPU Operator's driver install and validator on the nodes
//! Karpenter launches (a node's NVIDIADriver CR is the one selecting its `gpuctl.dev/driver`).

use std::time::{Duration, Instant};

use crate::dra_harness::poll;
use crate::provisioning::{
    KarpenterCluster, NOT_READY, READINESS, claims_of, dynamic, gpuctl, is_ready,
    karpenter_cluster, launched_node, strip_taints, taint_keys, text,
};
use crate::support;
use crate::upgrade_dra::{kube_of, plan_upgrade};
use gpuctl_cluster::upgrade::execute::{self, Cancel};
use gpuctl_core::render::DRIVER_LABEL;
use gpuctl_core::upgrade::Timing;
use gpuctl_core::upgrade::journal::{JournalPhase, NodeState};
use gpuctl_core::upgrade::schedule as plan;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::fixture::quiet;
use support::operator_driver::{DriverConfig, FailMode, Failure, OWNER, OperatorDriver, STATE};

const FROM: &str = "580.173.02";
const TO: &str = "595.91.07";

/// One Karpenter training pool of p5.48xlarge on its own driver `FROM`, one node at a time.
fn blueprint(p: &str, driver: &str) -> String {
    format!(
        r#"{head}  nodeReadiness:
    taintKey: {READINESS}
    signal: external
  nodePools:
    - name: {p}
      role: training
      selector: {{ gpuctl.dev/pool: {p} }}
      nodes: 0
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
      driver: {{ version: "{driver}" }}
      provisioner:
        type: karpenter
        platform: kwok
        nodeClass: {p}
        minNodes: 0
        maxNodes: 2
        instanceTypes: [p5.48xlarge]
      taints:
        - {{ key: nvidia.com/gpu, value: present, effect: NoSchedule }}
  upgrades:
    strategy: blue-green
    blueGreen: {{ batch: 1, drainTimeout: 60s }}
"#,
        head = crate::dra_apply::head_with_driver(p, FROM)
    )
}

/// Plays the Node Readiness Controller and the node-lifecycle controller for the pool's nodes:
/// a Ready node loses the readiness and not-ready taints.
fn play_readiness(tc: &TestCluster, pool: &str) -> tokio::task::JoinHandle<()> {
    let nodes: Api<Node> = Api::all(tc.client.clone());
    let lp = ListParams::default().labels(&format!("karpenter.sh/nodepool={pool}"));
    tokio::spawn(async move {
        loop {
            if let Ok(list) = nodes.list(&lp).await {
                for n in list.items {
                    let keys = [READINESS, NOT_READY];
                    if is_ready(&n) && taint_keys(&n).iter().any(|k| keys.contains(&k.as_str())) {
                        // A node gone meanwhile is no longer this loop's business.
                        let _ = strip_taints(&nodes, &n, &keys).await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

/// The training pod: one bare pod asking for the node's 8 GPUs, for the harness's scheduler
/// (kwok completes a Job's pods at once, so a Job would leave the node empty: Karpenter deletes an
/// empty drifted node without a replacement).
fn training_pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pretrain", "labels": {"app": "pretrain"}},
        "spec": {
            "schedulerName": support::dra::SCHEDULER,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{
                "name": "main",
                "image": "registry.example/cuda:12.8",
                "resources": {
                    "requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                    "limits": {"nvidia.com/gpu": "8"},
                },
            }],
        },
    }))
    .unwrap()
}

/// The whole path of the module documentation, in order.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_karpenter_pools_driver_upgrade_goes_through_karpenters_drift() {
    let Some(_shared) = TestCluster::connect("upgrade_karpenter").await else {
        return;
    };
    let started = Instant::now();
    let KarpenterCluster {
        fresh,
        tc,
        kc,
        p,
        up,
    } = karpenter_cluster("karp-upgrade", "upgrade_karpenter", "ku").await;
    let k = kube_of(std::path::Path::new(&kc)).await;
    let blue_cr = gpuctl_core::render::pool_driver_cr_name(
        &p,
        FROM,
        gpuctl_core::blueprint::UpgradeStrategy::BlueGreen,
    );
    let green_cr = plan::green_cr_name(&p, TO);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("karp-upgrade.yaml");
    std::fs::write(&path, blueprint(&p, FROM)).unwrap();
    let bp = path.to_str().unwrap().to_string();
    let o = gpuctl(&["apply", &bp, "--yes", "--wait-timeout", "60s"], &kc);
    assert!(o.status.success(), "apply: {}", text(&o));

    let operator_ns = format!("{p}-gpu-operator");
    let tenant_ns = format!("{p}-ns");
    let nss: Api<Namespace> = Api::all(tc.client.clone());
    for ns in [&operator_ns, &tenant_ns] {
        let _ = nss
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await;
    }
    let driver = OperatorDriver::spawn(
        tc.client.clone(),
        &operator_ns,
        &format!("gpuctl.dev/pool={p}"),
        DriverConfig {
            step_delay: Duration::from_millis(200),
            validator_daemonset: true,
            ..DriverConfig::default()
        },
    );
    let readiness = play_readiness(&tc, &p);

    // The training pod makes Karpenter launch a node from the template: on the blue CR, validated.
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), &tenant_ns);
    pods.create(&PostParams::default(), &training_pod())
        .await
        .unwrap();
    let blue_node = launched_node(&tc, &p, 120).await;
    let blue_name = blue_node.metadata.name.clone().unwrap();
    let nodes: Api<Node> = Api::all(tc.client.clone());
    let label = async |n: &str, key: &str| -> Option<String> {
        nodes.get(n).await.ok()?.metadata.labels?.get(key).cloned()
    };
    assert_eq!(
        label(&blue_name, DRIVER_LABEL).await.as_deref(),
        Some(blue_cr.as_str())
    );
    poll(60, "the first node to run the blue driver", async || {
        (label(&blue_name, OWNER).await.as_deref() == Some(blue_cr.as_str())
            && label(&blue_name, STATE).await.as_deref() == Some("upgrade-done"))
        .then_some(())
    })
    .await;
    let bound = poll(60, "the training pod to be bound", async || {
        pods.get("pretrain").await.ok()?.spec?.node_name
    })
    .await;
    assert_eq!(bound, blue_name);
    let old_claims: Vec<String> = claims_of(&tc, &p)
        .await
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(old_claims.len(), 1, "{old_claims:?}");
    eprintln!(
        "upgrade_karpenter: {blue_name} launched on {blue_cr} with the training pod after {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // The plan: drift of the NodePool, paced by the budget rendered from upgrades.blueGreen.batch.
    let t = Timing {
        poll: Duration::from_millis(500),
        validate_timeout: Duration::from_secs(120),
        lease_duration: Duration::from_secs(15),
        node_upgrade_estimate: Duration::from_secs(600),
    };
    let (_, up_plan) = plan_upgrade(&k, &path, &p, TO, &t).await;
    assert_eq!(up_plan.errors(), 0, "{:#?}", up_plan.checks);
    let drift = up_plan.karpenter.as_ref().expect("a drift plan");
    assert_eq!(drift.node_pool, p);
    assert_eq!(drift.budgets, vec!["1".to_string()]);

    // The run: template moved, Karpenter replaces the node, the replacement validates.
    let run = execute::start(&k, &up_plan, &t, &quiet(), Cancel::never()).await;
    let took = started.elapsed().as_secs_f64();
    // Karpenter's own account of what it did (its decisions: replace or delete).
    for line in fresh.log("karpenter-kwok").lines() {
        if line.contains("disrupting node(s)") {
            let v: Value = serde_json::from_str(line).unwrap_or_default();
            eprintln!("upgrade_karpenter: Karpenter: {}", v["command"]);
        }
    }
    let j = run.unwrap_or_else(|e| {
        let nodes_now: Vec<Value> = futures::executor::block_on(nodes.list(&ListParams::default()))
            .map(|l| l.items.iter().map(|n| json!({"name": n.metadata.name, "labels": n.metadata.labels, "taints": n.spec.as_ref().and_then(|s| s.taints.clone())})).collect())
            .unwrap_or_default();
        let claims_now: Vec<Value> = futures::executor::block_on(claims_of(&tc, &p))
            .iter()
            .map(|c| json!({"name": c.metadata.name, "status": c.data["status"]}))
            .collect();
        panic!("{e}\nnodes: {nodes_now:#?}\nclaims: {claims_now:#?}")
    });
    assert_eq!(j.phase, JournalPhase::Completed, "{:#?}", j.events);
    assert_eq!(
        j.nodes[&blue_name].state,
        NodeState::Replaced,
        "{:#?}",
        j.nodes
    );
    let arrived: Vec<&String> = j
        .nodes
        .iter()
        .filter(|(_, r)| r.state == NodeState::Done)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(arrived.len(), 1, "{:#?}\n{:#?}", j.nodes, j.events);
    let green_name = arrived[0].clone();
    assert_ne!(green_name, blue_name);
    assert!(
        nodes.get_opt(&blue_name).await.unwrap().is_none(),
        "the old node is gone"
    );
    assert_eq!(
        label(&green_name, DRIVER_LABEL).await.as_deref(),
        Some(green_cr.as_str())
    );
    assert_eq!(
        label(&green_name, OWNER).await.as_deref(),
        Some(green_cr.as_str())
    );
    let claims = claims_of(&tc, &p).await;
    assert!(
        claims
            .iter()
            .all(|c| !old_claims.contains(c.metadata.name.as_ref().unwrap())),
        "the old NodeClaim is gone"
    );
    let node_pools = dynamic(&tc, "karpenter.sh", "v1", "NodePool", "nodepools");
    let np = node_pools.get(&p).await.unwrap();
    assert_eq!(
        np.data["spec"]["template"]["metadata"]["labels"][DRIVER_LABEL],
        json!(green_cr)
    );
    let drivers = dynamic(
        &tc,
        "nvidia.com",
        "v1alpha1",
        "NVIDIADriver",
        "nvidiadrivers",
    );
    assert!(
        drivers.get_opt(&blue_cr).await.unwrap().is_none(),
        "the blue CR is deleted"
    );
    assert!(
        j.events.iter().any(|e| e.message.contains(&format!(
            "NodePool {p}: template label {DRIVER_LABEL}={green_cr}"
        ))),
        "{:#?}",
        j.events
    );
    eprintln!(
        "upgrade_karpenter: {blue_name} replaced by {green_name} on {green_cr} in {:.1}s",
        took - up
    );

    // Karpenter drained the old node: the training pod was evicted (a bare pod is not recreated).
    assert!(
        pods.get_opt("pretrain")
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "the training pod was evicted from the drifted node"
    );

    // The blueprint edit the upgrade asks for leaves nothing to apply.
    assert!(j.blueprint_change.contains(TO), "{}", j.blueprint_change);
    std::fs::write(&path, blueprint(&p, TO)).unwrap();
    // The plan after the edit: the NodePool and the nodes are as the blueprint renders them; the
    // only change is apply adopting the green CR into its ApplySet (the upgrade wrote it outside,
    // docs/upgrades.md, field ownership). No GPU400: one node is within the pool's 0..2.
    let o = gpuctl(&["plan", &bp, "-o", "json"], &kc);
    let planned: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("plan -o json: {e}: {}", text(&o)));
    let changed: Vec<String> = planned["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] != "no-op")
        .map(|a| format!("{} {}/{}", a["action"], a["kind"], a["name"]))
        .collect();
    assert_eq!(
        changed,
        [format!("\"update\" \"NVIDIADriver\"/\"{green_cr}\"")],
        "{}",
        text(&o)
    );
    assert_eq!(
        planned["nodes"].as_array().map_or(0, Vec::len),
        0,
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("GPU400"), "{}", text(&o));
    let o = gpuctl(&["apply", &bp, "--yes", "--wait-timeout", "60s"], &kc);
    assert!(o.status.success(), "apply after the edit: {}", text(&o));
    let o = gpuctl(&["plan", &bp, "--detailed-exitcode"], &kc);
    assert_eq!(o.status.code(), Some(0), "plan after apply: {}", text(&o));

    // 2. A second upgrade whose driver fails on the node Karpenter launches for it stops the run,
    // naming that node; the rollback moves the template back to the first upgrade's CR and
    // follows Karpenter's drift the other way, and the failed CR goes.
    const NEXT: &str = "610.57.04";
    let next_cr = plan::green_cr_name(&p, NEXT);
    driver.set_failures(vec![Failure {
        node: "*".into(),
        version: NEXT.into(),
        mode: FailMode::UpgradeFailed,
    }]);
    let mut second = training_pod();
    second.metadata.name = Some("pretrain-2".into());
    pods.create(&PostParams::default(), &second).await.unwrap();
    poll(60, "the second training pod to be bound", async || {
        pods.get("pretrain-2").await.ok()?.spec?.node_name
    })
    .await;
    let (_, next_plan) = plan_upgrade(&k, &path, &p, NEXT, &t).await;
    assert_eq!(next_plan.errors(), 0, "{:#?}", next_plan.checks);
    let failed = execute::start(&k, &next_plan, &t, &quiet(), Cancel::never())
        .await
        .expect_err("the next driver fails on the replacement");
    let msg = failed.to_string();
    assert!(
        msg.contains(&format!(
            "launched by Karpenter on NVIDIADriver {next_cr}, failed"
        )) && msg.contains("upgrade rollback"),
        "{msg}"
    );
    let j = execute::rollback(
        &k,
        Some(&operator_ns),
        Some(&p),
        &t,
        &quiet(),
        Cancel::never(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(j.phase, JournalPhase::RolledBack, "{:#?}", j.events);
    let np = node_pools.get(&p).await.unwrap();
    assert_eq!(
        np.data["spec"]["template"]["metadata"]["labels"][DRIVER_LABEL],
        json!(green_cr),
        "the template is back on the first upgrade's CR"
    );
    assert_eq!(
        np.data["spec"]["template"]["metadata"]["labels"]["gpuctl.dev/pool"],
        json!(p),
        "and keeps the pool's other labels"
    );
    let on_next = nodes
        .list(&ListParams::default().labels(&format!("{DRIVER_LABEL}={next_cr}")))
        .await
        .unwrap();
    assert!(on_next.items.is_empty(), "no node is left on {next_cr}");
    assert!(
        drivers.get_opt(&next_cr).await.unwrap().is_none(),
        "the failed CR is deleted"
    );
    assert!(
        j.nodes.values().any(|r| r.state == NodeState::Replaced),
        "{:#?}",
        j.nodes
    );
    eprintln!(
        "upgrade_karpenter: a failing {NEXT} stopped the run and the rollback returned the pool to {green_cr} after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    readiness.abort();
    eprintln!(
        "upgrade_karpenter: done in {:.1}s (cluster with Karpenter up in {up:.1}s)",
        started.elapsed().as_secs_f64()
    );
}
