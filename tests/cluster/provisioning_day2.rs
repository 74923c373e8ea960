//! Issue 40, Day-2 on provisioned pools with the real Karpenter (v1.15.0, KWOK cloud provider), the
//! real kwok controller and the real kube-scheduler (`tools/kube-harness/run up --with-karpenter`):
//! `gpuctl doctor` names the pod a pool at its GPU limit leaves Pending (with the limit and the
//! usage), the node still carrying the readiness startup taint, and a NodeClaim that failed to
//! launch; `gpuctl status` shows each pool's nodes against `minNodes`/`maxNodes` and its NodeClaims.
//!
//! What is played, and why: nothing removes the readiness taint here (the Node Readiness Controller
//! cannot be built, and this test is about a node where it did not act). Under KWOK a node's
//! capacity is what its NodeClaim requested (shared/reference/node-pools.md §3.2): the pool's limit
//! (8 GPUs, `maxNodes: 1`) is filled by one 8-GPU pod. The startup-taint finding needs the taint to
//! outlast the profile's grace (15 min): the test reads the cluster once with `gpuctl snapshot
//! --all` and runs `gpuctl doctor --snapshot` with the snapshot's read time moved 20 minutes on,
//! which is the only thing it changes. The failed launch is a NodeClaim the test creates with an
//! instance type no offering has: the KWOK provider cannot translate it into a node and Karpenter
//! records `Launched=Unknown` with reason `LaunchFailed` (lifecycle/launch.go).

use std::time::{Duration, Instant};

use crate::dra_harness::poll;
use crate::provisioning::{
    KarpenterCluster, READINESS, blueprint, claims_of, dynamic, gpu_pod, gpuctl, karpenter_cluster,
    launched_node, node_claims, pod_node, text,
};
use crate::support;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::gpuctl::{Gpuctl, TODAY};

/// The findings of `gpuctl doctor -o json` output with rule `id`.
fn findings(stdout: &[u8], id: &str) -> Vec<Value> {
    let report: Value = serde_json::from_slice(stdout)
        .unwrap_or_else(|e| panic!("doctor -o json: {e}: {}", String::from_utf8_lossy(stdout)));
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == id)
        .cloned()
        .collect()
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_and_status_on_a_karpenter_pool_at_its_limit() {
    let Some(_shared) = TestCluster::connect("provisioning-day2").await else {
        return;
    };
    let started = Instant::now();
    let KarpenterCluster {
        fresh: _fresh,
        tc,
        kc,
        p,
        up,
    } = karpenter_cluster("karpenter-day2", "provisioning-day2", "kd").await;
    let (train, mig) = (format!("{p}-train"), format!("{p}-mig"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kd.yaml");
    std::fs::write(&path, blueprint(&p, true)).unwrap();
    let bp = path.to_str().unwrap().to_string();
    let o = gpuctl(&["apply", &bp, "--yes", "--wait-timeout", "60s"], &kc);
    assert!(o.status.success(), "apply: {}", text(&o));

    let ns = format!("{p}-ns");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(tc.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), &ns);

    // 1. An 8-GPU pod: Karpenter launches the pool's one node, born with the readiness taint,
    // which nothing removes here.
    let gpus = json!({"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "8"});
    pods.create(
        &PostParams::default(),
        &gpu_pod("train", gpus.clone(), &["nvidia.com/gpu"]),
    )
    .await
    .unwrap();
    let node = launched_node(&tc, &train, 90).await;
    let node_name = node.metadata.name.clone().unwrap();

    // 2. A second 8-GPU pod: the pool is at its limit of 8 GPUs, Karpenter launches nothing.
    pods.create(
        &PostParams::default(),
        &gpu_pod("train-2", gpus, &["nvidia.com/gpu"]),
    )
    .await
    .unwrap();
    let nodepools = dynamic(&tc, "karpenter.sh", "v1", "NodePool", "nodepools");
    poll(30, "the NodePool to count the node's GPUs", async || {
        let np = nodepools.get(&train).await.ok()?;
        (np.data["status"]["resources"]["nvidia.com/gpu"] == "8").then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        claims_of(&tc, &train).await.len(),
        1,
        "nothing launched beyond the limit"
    );
    assert_eq!(pod_node(&pods, "train-2").await, None);

    // 3. doctor names the Pending pod, the pool, its limit and usage.
    let o = gpuctl(&["doctor", &bp, "-o", "json"], &kc);
    let at_limit = findings(&o.stdout, "GPU225");
    assert_eq!(at_limit.len(), 1, "{}", text(&o));
    let f = at_limit[0].to_string();
    for want in [
        format!("pod/{ns}/train-2"),
        format!("nodepool/{train}"),
        "limit of 8 `nvidia.com/gpu` (8 in use)".to_string(),
    ] {
        assert!(f.contains(&want), "{want}: {f}");
    }
    assert!(
        !f.contains(&format!("pod/{ns}/train\"")),
        "the pod nominated to the node waits for its taint, not the limit: {f}"
    );
    eprintln!("provisioning_day2: doctor names train-2 and {train}'s limit");

    // 4. The node still carries the readiness taint: read once, judged 20 minutes later.
    let snap = dir.path().join("all.json");
    let o = Gpuctl::new(["snapshot", "--all", "--out", snap.to_str().unwrap()])
        .args(["--kubeconfig", &kc])
        .output();
    assert!(o.status.success(), "snapshot --all: {}", text(&o));
    let mut s: Value = serde_json::from_slice(&std::fs::read(&snap).unwrap()).unwrap();
    let d = &mut s["diagnostics"];
    assert!(
        d["node_pools"].as_array().is_some_and(|a| a.len() == 2)
            && d["node_claims"].as_array().is_some_and(|a| a.len() == 1),
        "snapshot --all holds the NodePools and NodeClaims: {} / {}",
        d["node_pools"],
        d["node_claims"]
    );
    let read_at: jiff::Timestamp = d["read_at"].as_str().unwrap().parse().unwrap();
    let later = read_at + jiff::SignedDuration::from_mins(20);
    d["read_at"] = json!(later.to_string());
    std::fs::write(&snap, serde_json::to_vec(&s).unwrap()).unwrap();
    let o = Gpuctl::new([
        "doctor",
        &bp,
        "--snapshot",
        snap.to_str().unwrap(),
        "-o",
        "json",
    ])
    .today(TODAY)
    .output();
    let taint = findings(&o.stdout, "GPU245");
    assert_eq!(taint.len(), 1, "{}", text(&o));
    let f = taint[0].to_string();
    for want in [
        format!("node/{node_name}"),
        format!("pool/{train}"),
        READINESS.to_string(),
        // The blueprint's readiness signal is `external`: the cluster's own component removes it.
        "spec.nodeReadiness.signal: external".to_string(),
    ] {
        assert!(f.contains(&want), "{want}: {f}");
    }
    assert_eq!(
        findings(&o.stdout, "GPU225").len(),
        1,
        "the snapshot has the limit too"
    );
    // The same reading judged now: the node is young, no finding.
    let o = gpuctl(&["doctor", &bp, "-o", "json"], &kc);
    assert!(findings(&o.stdout, "GPU245").is_empty(), "{}", text(&o));
    eprintln!("provisioning_day2: doctor names {node_name} still carrying {READINESS}");

    // 5. A NodeClaim no offering can satisfy fails to launch, and doctor names it.
    let bad = format!("{train}-bad");
    let claim: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": bad, "labels": {"karpenter.sh/nodepool": train}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": p},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p9.nonexistent"]}],
            "resources": {"requests": {"nvidia.com/gpu": "8"}}
        }
    }))
    .unwrap();
    node_claims(&tc)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap();
    let reason = poll(60, "Karpenter to record the failed launch", async || {
        let c = node_claims(&tc).get(&bad).await.ok()?;
        let conds = c.data["status"]["conditions"].as_array()?.clone();
        conds
            .iter()
            .find(|c| c["type"] == "Launched" && c["status"] != "True")
            .and_then(|c| c["reason"].as_str().map(str::to_string))
            .filter(|r| r != "AwaitingReconciliation")
    })
    .await;
    let o = gpuctl(&["doctor", &bp, "-o", "json"], &kc);
    let failed = findings(&o.stdout, "GPU246");
    assert_eq!(failed.len(), 1, "{}", text(&o));
    let f = failed[0].to_string();
    for want in [
        format!("nodeclaim/{bad}"),
        format!("nodepool/{train}"),
        "failed to launch".to_string(),
        reason.clone(),
        "p9.nonexistent".to_string(),
    ] {
        assert!(f.contains(&want), "{want}: {f}");
    }
    eprintln!("provisioning_day2: doctor names NodeClaim {bad} ({reason})");

    // 6. status: nodes against min/max and the NodeClaims, in JSON and in the table.
    let o = gpuctl(&["status", &bp, "-o", "json"], &kc);
    assert!(o.status.success(), "status: {}", text(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pool = |name: &str| {
        r["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == name)
            .cloned()
            .unwrap()
    };
    let t = pool(&train);
    assert_eq!(t["nodes"]["total"], 1, "{t}");
    assert_eq!(
        t["provisioner"],
        json!({"kind": "karpenter", "minNodes": 0, "maxNodes": 1, "bound": "at-max",
            "nodeClaims": {"launched": 1, "pending": 1}}),
        "{t}"
    );
    assert_eq!(pool(&mig)["provisioner"]["bound"], "within");
    let o = gpuctl(&["status", &bp], &kc);
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("min 0 max 1 (at max), NodeClaims 1 launched 1 pending"),
        "{}",
        text(&o)
    );
    // 7. import gives the Karpenter pools back: provisioner, instance types, maxNodes from the
    // GPU limit, the taint, the readiness key; the plan it checks itself with leaves the training
    // NodePool alone.
    let out = dir.path().join("imported.yaml");
    // `--name`: no GPU Operator release runs here, so import cannot find the operator's
    // namespace, where the blueprint's ApplySet parent (and so its name) is recorded.
    let o = gpuctl(
        &["import", "--name", &p, "--out", out.to_str().unwrap()],
        &kc,
    );
    assert!(o.status.success(), "import: {}", text(&o));
    let yaml = std::fs::read_to_string(&out).unwrap();
    let back = gpuctl_core::blueprint::load_str("imported.yaml", &yaml)
        .unwrap_or_else(|e| panic!("{e:?}\n{yaml}"))
        .blueprint;
    let pool = |name: &str| {
        back.spec
            .node_pools
            .iter()
            .find(|x| x.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name}:\n{yaml}"))
    };
    let tp = pool(&train);
    assert_eq!(tp.provisioner.kind.as_str(), "karpenter", "{yaml}");
    assert_eq!(tp.provisioner.max_nodes, Some(1), "{yaml}");
    assert_eq!(tp.provisioner.instance_types, ["p5.48xlarge"], "{yaml}");
    assert_eq!(tp.provisioner.node_class.as_deref(), Some(p.as_str()));
    assert_eq!(
        (tp.gpu.model.as_str(), tp.gpu.count, tp.nodes),
        ("H100-SXM5-80GB", 8, 1)
    );
    assert_eq!(tp.taints.len(), 1, "{yaml}");
    assert_eq!(pool(&mig).provisioner.kind.as_str(), "karpenter");
    assert_eq!(
        back.spec
            .node_readiness
            .as_ref()
            .map(|r| r.taint_key.as_str()),
        Some(READINESS)
    );
    // The imported blueprint, planned against the cluster, leaves the training NodePool as it is.
    // No GPU Operator release runs here, so import guesses the operator's namespace (where the
    // blueprint's ApplySet parent lives): the test sets the one this blueprint used, the only edit.
    let ns_line = |ns: &str| format!("namespace: {ns}\n");
    assert_eq!(yaml.matches(&ns_line("gpu-operator")).count(), 1, "{yaml}");
    let fixed = yaml.replace(
        &ns_line("gpu-operator"),
        &ns_line(&format!("{p}-gpu-operator")),
    );
    std::fs::write(&out, fixed).unwrap();
    let o = gpuctl(&["plan", out.to_str().unwrap(), "-o", "json"], &kc);
    let plan: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("plan -o json: {e}: {}", text(&o)));
    let action = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "NodePool" && a["name"] == train.as_str())
        .unwrap_or_else(|| panic!("NodePool/{train} not planned: {}", text(&o)));
    assert_eq!(action["action"], "no-op", "{action:#}");
    eprintln!("provisioning_day2: import gives {train} and {mig} back as Karpenter pools");
    eprintln!(
        "provisioning_day2: done in {:.1}s (cluster with Karpenter up in {up:.1}s)",
        started.elapsed().as_secs_f64()
    );
}
