//! The blue-green driver upgrade of a DRA pool on Kubernetes 1.36 (issue 39, Deliver 3), on a
//! cluster of its own at v1.36.3 (`run up --kube 1.36 --with-scheduler`: the real kube-apiserver,
//! kube-scheduler and kube-controller-manager, DRADeviceTaintRules on). The nodes publish their
//! GPUs as NVIDIA's DRA driver does (`support::dra`); `support::operator_driver` plays the GPU
//! Operator's driver swap and validator.

use std::time::{Duration, Instant};

use crate::dra_harness::{poll, unschedulable};
use crate::support;
use gpuctl_cluster::upgrade::execute::{self, Cancel};
use gpuctl_cluster::upgrade::journal::JournalStore;
use gpuctl_core::render::Templates;
use gpuctl_core::upgrade::journal::{JournalPhase, NodeState};
use gpuctl_core::upgrade::schedule as plan;
use gpuctl_core::upgrade::{Timing, device_taints, preflight, runbook};
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use support::cluster::{GpuNode, TestCluster};
use support::dra::{self, DraNode};
use support::fixture::quiet;
use support::fresh::FreshCluster;
use support::gpuctl::{Gpuctl, TODAY};
use support::operator_driver::{self, DriverConfig, OperatorDriver, put_validator};

const FROM: &str = "580.173.02";
const TO: &str = "595.91.07";

/// gpuctl's client of the cluster whose kubeconfig is `kc`.
pub(crate) async fn kube_of(kc: &std::path::Path) -> gpuctl_cluster::Kube {
    gpuctl_cluster::connect(&gpuctl_cluster::ConnectOptions {
        kubeconfig: Some(kc.to_path_buf()),
        context: None,
    })
    .await
    .unwrap()
}

/// Pre-flight of upgrading `pool` of the blueprint at `path` to `to` (on the tests' date), and
/// the plan it gives against what the cluster `k` runs.
pub(crate) async fn plan_upgrade(
    k: &gpuctl_cluster::Kube,
    path: &std::path::Path,
    pool: &str,
    to: &str,
    t: &Timing,
) -> (preflight::Prepared, plan::UpgradePlan) {
    let today = jiff::civil::date(2026, 11, 30);
    let prep = preflight::prepare(path, pool, to, today, &Templates::embedded())
        .unwrap_or_else(|e| panic!("{e}"));
    let view = gpuctl_cluster::read::pool_workloads(k, &prep.node_patch().selector)
        .await
        .unwrap();
    let up = plan::build(&prep, &view.workloads.unwrap_or_default(), None, t);
    (prep, up)
}

/// One DRA pool of two single-H100 nodes on its own driver `FROM`, moved one node per batch, and a
/// tenant that claims one H100.
fn blueprint(p: &str) -> String {
    let head = crate::dra_apply::head_with_driver(p, FROM)
        .replace("version: \"1.35.1\"", "version: \"1.36.3\"");
    format!(
        r#"{head}  nodePools:
    - name: {p}
      selector: {{ gpuctl.dev/pool: {p} }}
      nodes: 2
      gpu: {{ model: H100-SXM5-80GB, count: 1 }}
      gpuPlugin: dra
      driver: {{ version: "{FROM}" }}
  dra:
    driver: {{ deployment: standalone, version: v25.12.0 }}
    shapes:
      - name: {p}-h100
        gpu: {{ model: H100-SXM5-80GB }}
  tenants:
    - name: {p}-t
      namespaces: [{p}-ns]
      claims: {{ {p}-h100: 2 }}
  upgrades:
    strategy: blue-green
    blueGreen: {{ batch: 1, drainTimeout: 60s, waitForJobs: false }}
"#
    )
}

/// `upgrade_takes_a_dra_nodes_gpus_out_of_service_with_a_device_taint_rule_and_resumes`: the plan
/// of the DRA pool's upgrade on 1.36 gives each node the DeviceTaintRule `spec.dra.maintenance`
/// would render (the runbook shows the `kubectl` commands); the run applies the first node's rule
/// before cordoning it, and is stopped there (the journal records the rule). A claim pod pinned to
/// that node and tolerating the cordon, so only the rule can keep it off, is refused by the real
/// scheduler. `--resume` finishes the upgrade: every rule is gone, the journal says so, and the
/// pod is bound to the node with its GPU.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upgrade_takes_a_dra_nodes_gpus_out_of_service_with_a_device_taint_rule_and_resumes() {
    let started = Instant::now();
    let Some(_shared) = TestCluster::connect("upgrade_dra").await else {
        return;
    };
    let fresh = FreshCluster::up_with(
        "upg-dra",
        &["--kube", "1.36", "--with-scheduler", "--without-kueue"],
    );
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "upg-dra")
        .await
        .unwrap();
    let k = kube_of(&kc).await;
    let kc = kc.to_str().unwrap().to_string();
    let mut p = tc.name("u");
    p.truncate(20);
    let p = p.trim_end_matches('-').to_string();
    let blue_cr = gpuctl_core::render::pool_driver_cr_name(
        &p,
        FROM,
        gpuctl_core::blueprint::UpgradeStrategy::BlueGreen,
    );
    let mut nodes = Vec::new();
    for s in ["a", "b"] {
        let gpu = GpuNode::h100(1)
            .driver(FROM, (13, 0))
            .label("gpuctl.dev/pool", &p)
            .label(operator_driver::OWNER, &blue_cr)
            .label(operator_driver::STATE, "upgrade-done");
        let (n, _) = dra::create_dra_node(&tc, s, &gpu, |n| DraNode::h100(n, 1))
            .await
            .unwrap();
        nodes.push(n);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dra-upgrade.yaml");
    std::fs::write(&path, blueprint(&p)).unwrap();
    let bp = path.to_str().unwrap().to_string();
    let o = Gpuctl::new(["apply", &bp, "--yes", "--wait-timeout", "60s"])
        .args(["--kubeconfig", &kc])
        .today(TODAY)
        .output();
    assert!(
        o.status.success(),
        "apply: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let ns = format!("{p}-gpu-operator");
    let nss: Api<Namespace> = Api::all(tc.client.clone());
    let _ = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .unwrap(),
        )
        .await;
    for n in &nodes {
        put_validator(&tc.client, &ns, n, true).await;
    }
    let config = DriverConfig {
        step_delay: Duration::from_millis(300),
        ..DriverConfig::default()
    };
    let _driver = OperatorDriver::spawn(
        tc.client.clone(),
        &ns,
        &format!("gpuctl.dev/pool={p}"),
        config,
    );

    // The plan: one rule per node, of the maintenance render's shape; the runbook's commands.
    let t = Timing {
        poll: Duration::from_millis(50),
        validate_timeout: Duration::from_secs(60),
        lease_duration: Duration::from_secs(1),
        node_upgrade_estimate: Duration::from_secs(600),
    };
    let (prep, up) = plan_upgrade(&k, &path, &p, TO, &t).await;
    assert_eq!(up.errors(), 0, "{:#?}", up.checks);
    let bp_model = prep.blueprint();
    for n in &nodes {
        let want = gpuctl_core::render::dra::taint_rule(
            bp_model,
            gpuctl_core::profiles::Catalog::embedded(),
            &device_taints::maintenance_entry(n),
        )
        .unwrap();
        assert_eq!(up.device_taints.rules.get(n), Some(&want), "{n}");
    }
    let md = runbook::markdown(&up, &Templates::embedded(), "t.svg").unwrap();
    let (a, b) = (&nodes[0], &nodes[1]);
    let (rule_a, rule_b) = (device_taints::rule_name(a), device_taints::rule_name(b));
    assert!(
        md.contains(&format!("kubectl delete devicetaintrules {rule_a}"))
            && md.contains(&format!("name: {rule_b}"))
            && md.contains("kind: DeviceTaintRule"),
        "{md}"
    );

    // The run, stopped once the first node's rule is applied (the journal records it).
    let rules = Api::<DynamicObject>::all_with(
        tc.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("resource.k8s.io", "v1beta2", "DeviceTaintRule"),
            "devicetaintrules",
        ),
    );
    let (k2, up2, t2) = (
        kube_of(fresh.kubeconfig().as_path()).await,
        up.clone(),
        t.clone(),
    );
    let task =
        tokio::spawn(
            async move { execute::start(&k2, &up2, &t2, &quiet(), Cancel::never()).await },
        );
    let journal = async || JournalStore::new(&k, &ns, &p).load().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let j = journal().await;
        if j.as_ref()
            .and_then(|j| j.nodes.get(a))
            .is_some_and(|r| r.state >= NodeState::Cordoned)
        {
            break;
        }
        assert!(!task.is_finished(), "the run ended before cordoning {a}");
        assert!(Instant::now() < deadline, "{a} not cordoned within 60s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task.abort();
    let _ = task.await;
    let j = journal().await.unwrap();
    assert!(
        j.nodes[a].state < NodeState::Done,
        "stopped too late: {:?}",
        j.nodes[a]
    );
    assert_eq!(
        j.device_taint_rules.len(),
        2,
        "the journal records the rules"
    );
    assert!(
        j.events
            .iter()
            .any(|e| e.message.contains(&format!("DeviceTaintRule {rule_a}"))
                && e.message.contains("applied")),
        "{:#?}",
        j.events
    );
    let live = rules
        .get(&rule_a)
        .await
        .expect("the rule of the first node");
    assert_eq!(live.data["spec"]["deviceSelector"]["pool"], json!(a));
    assert!(rules.get_opt(&rule_b).await.unwrap().is_none(), "not yet");

    // A claim pod for that node that tolerates the cordon: only the rule keeps it off.
    let tns = format!("{p}-ns");
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), &tns);
    let mut pod = dra::claim_pod("train", &format!("{p}-h100"), Some(dra::SCHEDULER), Some(a));
    pod.spec.as_mut().unwrap().tolerations = Some(vec![
        serde_json::from_value(
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}),
        )
        .unwrap(),
    ]);
    support::cluster::create_admitted(&pods, &pod)
        .await
        .unwrap();
    let why = unschedulable(&pods, "train").await;
    eprintln!("upgrade_dra: train Pending on the tainted node: {why}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bound = pods.get("train").await.unwrap().spec.unwrap().node_name;
    assert_eq!(bound, None, "the tainted GPU was allocated: {why}");

    // Resumed: every node moved, every rule gone, the pod gets the node's GPU.
    let j = execute::resume(&k, Some(&ns), Some(&p), &t, &quiet(), Cancel::never())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(j.phase, JournalPhase::Completed);
    for (n, r) in [(a, &rule_a), (b, &rule_b)] {
        assert!(rules.get_opt(r).await.unwrap().is_none(), "{r} left behind");
        assert!(
            j.events
                .iter()
                .any(|e| e.message
                    == format!("{n}: GPUs back in service: DeviceTaintRule {r} deleted")),
            "{:#?}",
            j.events
        );
    }
    let got = poll(60, "train to be bound", async || {
        pods.get("train").await.ok()?.spec?.node_name
    })
    .await;
    assert_eq!(&got, a);
    eprintln!("upgrade_dra: {:.1}s", started.elapsed().as_secs_f64());
}
