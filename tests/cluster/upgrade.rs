//! Blue-green driver upgrades against the real kube-apiserver of the harness (docs/testing.md),
//! with `support/operator_driver.rs` playing the GPU Operator, MIG Manager, the kubelet, a
//! ReplicaSet and the disruption controller. Every test works under its own prefix (nodes, pool,
//! NVIDIADriver CRs, namespace), so the tests run in parallel on one server; polls are 50 ms and
//! the operator's steps 25 ms, so each test takes seconds.
//!
//! The bounds are checked on every event the API server sends (watches on the pool's nodes and on
//! the service's pods), not by sampling: at most `max_unavailable` nodes cordoned or NotReady, and
//! never fewer healthy pods than the PodDisruptionBudget's `minAvailable`.

use crate::render_common;
use crate::support;
use crate::support::operator_driver;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuctl_cluster::Kube;
use gpuctl_cluster::upgrade::UpgradeError;
use gpuctl_cluster::upgrade::execute::{self, Cancel};
use gpuctl_cluster::upgrade::journal::JournalStore;
use gpuctl_core::blueprint::UpgradeStrategy;
use gpuctl_core::plan::ActionKind;
use gpuctl_core::render::{
    DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL, RenderedSet, Templates,
    pool_driver_cr_name,
};
use gpuctl_core::upgrade::journal::{Journal, JournalPhase, NodeState};
use gpuctl_core::upgrade::preflight::{self, Prepared};
use gpuctl_core::upgrade::schedule::{self as plan, UpgradePlan};
use gpuctl_core::upgrade::{
    DRIVER_VERSION_LABEL as VERSION, MIG_CONFIG_STATE_LABEL, PENDING_TAINT_KEY, Timing,
};
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use operator_driver::{
    DriverConfig, FailMode, Failure, Invariants, OperatorDriver, ServeWorkload, put_validator,
};
use serde_json::json;
use support::cluster::{GpuNode, TestCluster, gpuctl_kube};
use support::fixture::{errors, live_plan, quiet, snapshot_plan};
use support::gpuctl::{Gpuctl, TODAY};

const FROM: &str = "580.173.02";
const TO: &str = "595.91.07";
/// The blueprint's default `upgrades.blueGreen.colorLabel`.
const COLOR: &str = gpuctl_core::names::DEFAULT_COLOR_LABEL;

fn today() -> jiff::civil::Date {
    jiff::civil::date(2026, 11, 30)
}

fn timing(validate: Duration) -> Timing {
    Timing {
        poll: Duration::from_millis(50),
        validate_timeout: validate,
        lease_duration: Duration::from_secs(1),
        node_upgrade_estimate: Duration::from_secs(600),
    }
}

/// The name render gives the NVIDIADriver CR of `pool` on driver `version` under blue-green upgrades.
fn cr_name(pool: &str, version: &str) -> String {
    pool_driver_cr_name(pool, version, UpgradeStrategy::BlueGreen)
}

/// `gpuctl upgrade driver`'s preparation of an upgrade of `pool` in `blueprint` to `to`.
fn prepare(blueprint: &std::path::Path, pool: &str, to: &str) -> Prepared {
    preflight::prepare(blueprint, pool, to, today(), &Templates::embedded())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// One pool of H100 nodes on its own NVIDIADriver CR, as `gpuctl apply` leaves it (render's name,
/// `pool-<pool>-580-173-02`; with [`Fixture::legacy`] `pool-<pool>`, as an apply from before
/// blue-green CR names carried the version left it), and the operator stand-in running.
struct Fixture {
    tc: TestCluster,
    k: Kube,
    _dir: tempfile::TempDir,
    blueprint: PathBuf,
    drain: String,
    pool: String,
    selector: String,
    nodes: Vec<String>,
    driver: OperatorDriver,
}

fn blueprint_text(prefix: &str, ns: &str, nodes: usize, version: &str, drain: &str) -> String {
    format!(
        r#"apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: {prefix}
spec:
  kubernetes: {{ version: "1.34.2" }}
  gpuOperator:
    version: v26.7.0
    namespace: {ns}
    install: none
    driver: {{ version: "{FROM}", kernelModuleType: open }}
    dcgmExporter: {{ enabled: false }}
  nodePools:
    - name: {prefix}
      role: training
      selector: {{ gpuctl-test/pool: {prefix} }}
      nodes: {nodes}
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
      driver: {{ version: "{version}" }}
  upgrades:
    strategy: blue-green
    blueGreen: {{ batch: "25%", drainTimeout: {drain}, waitForJobs: true }}
"#
    )
}

impl Fixture {
    async fn new(name: &str, nodes: usize, drain: &str, config: DriverConfig) -> Option<Fixture> {
        Fixture::create(name, nodes, drain, config, false).await
    }

    /// The pool on the CR `pool-<pool>`.
    async fn legacy(
        name: &str,
        nodes: usize,
        drain: &str,
        config: DriverConfig,
    ) -> Option<Fixture> {
        Fixture::create(name, nodes, drain, config, true).await
    }

    async fn create(
        name: &str,
        nodes: usize,
        drain: &str,
        config: DriverConfig,
        legacy: bool,
    ) -> Option<Fixture> {
        let tc = TestCluster::connect(name).await?;
        let k = gpuctl_kube().await;
        let pool = tc.prefix.clone();
        let dir = tempfile::tempdir().unwrap();
        let blueprint = dir.path().join("blueprint.yaml");
        std::fs::write(
            &blueprint,
            blueprint_text(&pool, &tc.namespace, nodes, FROM, drain),
        )
        .unwrap();
        let blue = if legacy {
            pool_driver_cr_name(&pool, FROM, UpgradeStrategy::Rolling)
        } else {
            cr_name(&pool, FROM)
        };
        let gpu = GpuNode::h100(8)
            .driver(FROM, (13, 0))
            .label("gpuctl-test/pool", &pool)
            .label(operator_driver::OWNER, &blue)
            .label(operator_driver::STATE, "upgrade-done");
        let names = tc.create_gpu_nodes(nodes, &gpu).await.unwrap();
        // What `gpuctl apply` leaves: the pool's CR and its node labels (field manager `gpuctl`).
        let prep = prepare(&blueprint, &pool, TO);
        assert_eq!(
            prep.declared_cr(),
            cr_name(&pool, FROM),
            "render names the pool's CR after its driver"
        );
        let mut cr = prep
            .rendered
            .objects
            .iter()
            .find(|o| o.kind == "NVIDIADriver" && o.name == prep.declared_cr())
            .expect("the pool's CR is rendered")
            .manifest
            .clone();
        let mut labels = prep.node_patch().labels.clone();
        if legacy {
            cr["metadata"]["name"] = json!(blue);
            cr["spec"]["nodeSelector"] = json!({ DRIVER_LABEL: blue });
            labels.insert(DRIVER_LABEL.to_string(), blue.clone());
        }
        tc.nvidia_drivers()
            .patch(
                &blue,
                &PatchParams::apply("gpuctl").force(),
                &Patch::Apply(&cr),
            )
            .await
            .unwrap();
        let nodes_api: Api<Node> = tc.cluster_scoped();
        for n in &names {
            let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": labels}});
            nodes_api
                .patch(
                    n,
                    &PatchParams::apply("gpuctl").force(),
                    &Patch::Apply(&body),
                )
                .await
                .unwrap();
            put_validator(&tc.client, &tc.namespace, n, true).await;
        }
        let selector = format!("gpuctl-test/pool={pool}");
        let driver = OperatorDriver::spawn(tc.client.clone(), &tc.namespace, &selector, config);
        Some(Fixture {
            tc,
            k,
            _dir: dir,
            blueprint,
            drain: drain.to_string(),
            pool,
            selector,
            nodes: names,
            driver,
        })
    }

    async fn plan(&self, to: &str, t: &Timing) -> UpgradePlan {
        let prep = prepare(&self.blueprint, &self.pool, to);
        let view = gpuctl_cluster::read::pool_workloads(&self.k, &prep.node_patch().selector)
            .await
            .unwrap();
        let existing = JournalStore::new(&self.k, &self.tc.namespace, &self.pool)
            .load()
            .await
            .unwrap();
        plan::build(
            &prep,
            &view.workloads.unwrap_or_default(),
            existing.as_ref(),
            t,
        )
    }

    /// Rewrites the fixture's blueprint to declare driver `version` for the pool.
    fn declare(&self, version: &str) {
        let text = blueprint_text(
            &self.pool,
            &self.tc.namespace,
            self.nodes.len(),
            version,
            &self.drain,
        );
        std::fs::write(&self.blueprint, text).unwrap();
    }

    /// A live `gpuctl plan` of the fixture's blueprint as it is on disk now.
    async fn live_plan(&self) -> (RenderedSet, gpuctl_core::plan::Plan) {
        let set = render_common::render_file(&self.blueprint);
        let plan = live_plan(&self.k, &set).await;
        (set, plan)
    }

    /// Error findings of a live `gpuctl plan` of the fixture's blueprint as it is on disk now,
    /// after checking that a plan against a snapshot taken now (what CI plans against) has the
    /// same.
    async fn plan_errors(&self) -> Vec<String> {
        let (set, plan) = self.live_plan().await;
        let (_, from_snapshot) = snapshot_plan(&self.k, &set).await;
        let live = errors(&plan);
        assert_eq!(
            errors(&from_snapshot),
            live,
            "a snapshot plan sees what a live plan sees"
        );
        live
    }

    /// Once the blueprint declares the driver the pool's nodes run on NVIDIADriver `cr`, `gpuctl
    /// apply` agrees with the cluster: render names the pool's CR `cr`, with the live CR's spec,
    /// and labels the nodes `gpuctl.dev/driver=cr` (every declared label is on every node already);
    /// a live plan has no error, moves no node to another CR, and creates, prunes or respecifies
    /// no CR of the pool.
    async fn assert_apply_agrees(&self, cr: &str) {
        let (set, plan) = self.live_plan().await;
        let patch = set
            .node_patches
            .iter()
            .find(|p| p.pool == self.pool)
            .expect("the pool's node patch");
        assert_eq!(
            patch.labels.get(DRIVER_LABEL).map(String::as_str),
            Some(cr),
            "render labels the nodes with another CR"
        );
        let pool_crs: Vec<&str> = set
            .objects
            .iter()
            .filter(|o| o.kind == "NVIDIADriver" && o.name != "cluster-default")
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(pool_crs, [cr], "render names the pool's CR differently");
        for n in &self.nodes {
            let l = self.labels(n).await;
            for (k, v) in &patch.labels {
                assert_eq!(l.get(k), Some(v), "{n}: apply would change {k}");
            }
        }
        let live_cr: DynamicObject = self.tc.nvidia_drivers().get(cr).await.unwrap();
        let rendered = set
            .objects
            .iter()
            .find(|o| o.kind == "NVIDIADriver" && o.name == cr)
            .unwrap();
        assert_eq!(
            live_cr.data["spec"], rendered.manifest["spec"],
            "apply would change the CR's spec"
        );
        let errors = errors(&plan);
        assert!(errors.is_empty(), "{errors:#?}");
        let moves: Vec<&str> = plan
            .nodes
            .iter()
            .filter(|a| a.labels.iter().any(|c| c.path.contains(DRIVER_LABEL)))
            .map(|a| a.node.as_str())
            .collect();
        assert!(moves.is_empty(), "apply would move {moves:?} to another CR");
        for a in plan
            .actions
            .iter()
            .filter(|a| a.kind == "NVIDIADriver" && a.name != "cluster-default")
        {
            assert_eq!(a.name, cr, "apply would touch another CR: {a:?}");
            assert!(
                matches!(a.action, ActionKind::Update | ActionKind::NoOp)
                    && !a.changes.iter().any(|c| c.path.starts_with("spec")),
                "apply would recreate or respecify {cr}: {a:?}"
            );
        }
    }

    /// A GPU service `app` on the pool: `replicas` pods of one GPU, PDB `minAvailable`.
    async fn serve(&self, app: &str, replicas: usize, min_available: i32) -> ServeWorkload {
        let (client, ns) = (self.tc.client.clone(), &self.tc.namespace);
        let tick = Duration::from_millis(20);
        ServeWorkload::start(
            client,
            ns,
            app,
            &self.selector,
            replicas,
            min_available,
            1,
            tick,
        )
        .await
    }

    async fn journal(&self) -> Option<Journal> {
        JournalStore::new(&self.k, &self.tc.namespace, &self.pool)
            .load()
            .await
            .unwrap()
    }

    async fn node(&self, name: &str) -> Node {
        let api: Api<Node> = self.tc.cluster_scoped();
        api.get(name).await.unwrap()
    }

    async fn labels(&self, name: &str) -> BTreeMap<String, String> {
        self.node(name).await.metadata.labels.unwrap_or_default()
    }

    async fn cr_exists(&self, name: &str) -> bool {
        self.tc
            .nvidia_drivers()
            .get_opt(name)
            .await
            .unwrap()
            .is_some()
    }

    /// `gpuctl upgrade driver --resume` of the pool.
    async fn resume(&self, t: &Timing) -> Result<Journal, UpgradeError> {
        let (ns, pool) = (Some(self.tc.namespace.as_str()), Some(self.pool.as_str()));
        execute::resume(&self.k, ns, pool, t, &quiet(), Cancel::never()).await
    }

    /// `gpuctl upgrade rollback` of the pool.
    async fn rollback(&self, t: &Timing) -> Result<Journal, UpgradeError> {
        let (ns, pool) = (Some(self.tc.namespace.as_str()), Some(self.pool.as_str()));
        execute::rollback(&self.k, ns, pool, t, &quiet(), Cancel::never()).await
    }

    /// Every node on `cr`, running `version`, coloured `color`, schedulable, without the steering
    /// taint, with its recorded MIG config.
    async fn assert_converged(&self, cr: &str, version: &str, color: Option<&str>) {
        for n in &self.nodes {
            let node = self.node(n).await;
            let l = node.metadata.labels.clone().unwrap_or_default();
            assert_eq!(
                l.get(DRIVER_LABEL).map(String::as_str),
                Some(cr),
                "{n}: {l:?}"
            );
            assert_eq!(l.get(VERSION).map(String::as_str), Some(version), "{n}");
            assert_eq!(l.get(COLOR).map(String::as_str), color, "{n}");
            assert_eq!(
                l.get(MIG_CONFIG_LABEL).map(String::as_str),
                Some("all-disabled"),
                "{n}"
            );
            assert_eq!(
                l.get(MIG_CONFIG_STATE_LABEL).map(String::as_str),
                Some("success"),
                "{n}"
            );
            assert_released(n, &node);
        }
    }
}

/// Node `n` is schedulable and without the steering taint.
fn assert_released(n: &str, node: &Node) {
    let spec = node.spec.clone().unwrap_or_default();
    assert!(
        !spec.unschedulable.unwrap_or(false),
        "{n} is still cordoned"
    );
    assert!(
        !spec
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == PENDING_TAINT_KEY),
        "{n} keeps the steering taint"
    );
}

/// Runs the plan's upgrade in a task and drops it once the journal has recorded `step` steps.
async fn run_until_step(
    f: &Fixture,
    task: tokio::task::JoinHandle<Result<Journal, UpgradeError>>,
    step: u64,
) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if task.is_finished() {
            let r = task.await.unwrap();
            r.unwrap_or_else(|e| panic!("the run failed before step {step}: {e}"));
            return true;
        }
        if f.journal().await.is_some_and(|j| j.step >= step) {
            task.abort();
            let _ = task.await;
            return false;
        }
        assert!(Instant::now() < deadline, "no step {step} within 60s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_nodes_upgrade_in_batches_within_every_bound() {
    let started = Instant::now();
    // The pool is on `pool-<pool>`, as an apply from before blue-green CR names carried the
    // driver version left it: the upgrade moves it to the versioned name like any other.
    let Some(f) = Fixture::legacy("upgrade_batches", 8, "20s", DriverConfig::default()).await
    else {
        return;
    };
    let t = timing(Duration::from_secs(20));
    // A GPU service (3 replicas, PDB minAvailable 2) and a training job (waitForJobs) on the pool.
    let serve = f.serve("serve", 3, 2).await;
    // The test plays the job's controller (its pod runs, then succeeds), so the Job names another
    // manager: the harness's real Job controller leaves Jobs with a foreign `spec.managedBy` alone
    // (it would delete the pod of a suspended Job, or start its own next to it).
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = f.tc.namespaced();
    let job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
        "spec": {"managedBy": "gpuctl.dev/upgrade-test", "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "t", "image": "pytorch"}]}}},
    })).unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let job_node = f.nodes[7].clone();
    let pods: Api<Pod> = f.tc.namespaced();
    let mut train = operator_driver::serve_pod("train-0", "train", &job_node, 8);
    train.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": job.metadata.uid, "controller": true,
    })).unwrap()]);
    // Kueue's Pod webhook looks the owning Job up in its informer cache and refuses the Pod
    // (`Job.batch "train" not found`) until the cache has it; a controller retries, so does this.
    support::cluster::create_admitted(&pods, &train)
        .await
        .expect("creating the job's pod");
    pods.patch_status(
        "train-0",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    // The job ends 300 ms after its node is cordoned; until then the drain must wait for it.
    let finisher = {
        let (nodes, pods, node) = (
            f.tc.cluster_scoped::<Node>(),
            pods.clone(),
            job_node.clone(),
        );
        tokio::spawn(async move {
            loop {
                let n = nodes.get(&node).await.unwrap();
                if n.spec.and_then(|s| s.unschedulable).unwrap_or(false) {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let p = pods.get("train-0").await.unwrap();
                    assert!(
                        p.metadata.deletion_timestamp.is_none(),
                        "waitForJobs: the job pod was evicted"
                    );
                    pods.patch_status(
                        "train-0",
                        &PatchParams::default(),
                        &Patch::Merge(&json!({"status": {"phase": "Succeeded"}})),
                    )
                    .await
                    .unwrap();
                    return Instant::now();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let mut inv = Invariants::start(f.tc.client.clone(), &f.selector, 2).await;
    inv.watch_service(f.tc.client.clone(), &f.tc.namespace, "serve", 2)
        .await;

    let plan = f.plan(TO, &t).await;
    assert_eq!(plan.errors(), 0, "{}", human(&plan));
    assert_eq!(plan.batches.len(), 4);
    assert!(plan.batches.iter().all(|b| b.nodes.len() == 2));
    assert_eq!(plan.policy.max_unavailable, 2);
    assert_eq!(
        plan.blue_cr,
        pool_driver_cr_name(&f.pool, FROM, UpgradeStrategy::Rolling)
    );
    assert_eq!(plan.green_cr, cr_name(&f.pool, TO));
    assert!(plan.remove_blue_cr, "the legacy CR is the pool's own");
    assert!(
        plan.checks.iter().any(|c| c.message.contains(&format!(
            "the blueprint renders `{}`",
            cr_name(&f.pool, FROM)
        ))),
        "{}",
        human(&plan)
    );
    // Emptiest nodes first: the job and the service's nodes come last.
    let last: Vec<&String> = plan.batches[2..].iter().flat_map(|b| &b.nodes).collect();
    assert!(last.contains(&&job_node), "{:?}", plan.batches);
    assert!(
        plan.batches
            .iter()
            .any(|b| b.wait_for.iter().any(|w| w.pod.ends_with("/train-0")))
    );

    let run_started = Instant::now();
    let j = execute::start(&f.k, &plan, &t, &quiet(), Cancel::never())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let run_time = run_started.elapsed();
    assert_eq!(j.phase, JournalPhase::Completed);
    assert!(j.nodes.values().all(|r| r.state == NodeState::Done));
    let finished_job_at = finisher.await.unwrap();
    assert!(
        finished_job_at.elapsed() < run_time,
        "the upgrade waited for the job"
    );

    f.assert_converged(&plan.green_cr, TO, Some("green")).await;
    assert!(
        !f.cr_exists(&plan.blue_cr).await,
        "the blue CR served only this pool and goes"
    );
    assert!(f.cr_exists(&plan.green_cr).await);
    let seen = inv.seen();
    assert!(seen.violations.is_empty(), "{:#?}", seen.violations);
    assert_eq!(
        seen.max_unavailable, 2,
        "batches use the whole budget, never more"
    );
    assert!(seen.min_healthy.is_some_and(|m| m >= 2), "{seen:?}");
    assert!(
        *serve.created.lock().unwrap() > 3,
        "service pods were evicted and replaced"
    );
    assert!(
        f.driver.conflicts.lock().unwrap().is_empty(),
        "{:?}",
        f.driver.conflicts.lock().unwrap()
    );
    assert_eq!(f.driver.installs.lock().unwrap().len(), 8);
    let status = gpuctl::output::upgrade::status(std::slice::from_ref(&j), &[None]);
    assert!(
        status.contains("completed") && status.contains("batch 4: done"),
        "{status}"
    );

    // Once the blueprint declares the new driver, render names the pool's CR and its nodes'
    // driver label after it: exactly the green CR the nodes run on, so `gpuctl apply` moves
    // nothing.
    f.declare(TO);
    f.assert_apply_agrees(&plan.green_cr).await;
    // Upgrading again to the driver the nodes run already is refused, even though the blueprint
    // said otherwise: green would be blue.
    f.declare(FROM);
    let again = f.plan(TO, &t).await;
    assert_eq!(again.blue_cr, again.green_cr);
    assert!(
        again
            .checks
            .iter()
            .any(|c| c.level == gpuctl_core::located::Severity::Error
                && c.message
                    .contains(&format!("are on NVIDIADriver `{}` already", plan.green_cr))),
        "{}",
        human(&again)
    );
    f.declare(TO);
    // The next upgrade moves the pool to the next version's CR, which the blueprint renders once
    // it declares that version.
    let plan2 = f.plan("610.57.04", &t).await;
    assert_eq!(plan2.errors(), 0, "{}", human(&plan2));
    assert_eq!(plan2.blue_cr, plan.green_cr);
    assert_eq!(plan2.green_cr, cr_name(&f.pool, "610.57.04"));
    assert!(
        plan2.remove_blue_cr,
        "the previous green CR is the pool's own"
    );
    execute::start(&f.k, &plan2, &t, &quiet(), Cancel::never())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    f.assert_converged(&plan2.green_cr, "610.57.04", Some("blue"))
        .await;
    assert!(
        !f.cr_exists(&plan.green_cr).await,
        "the previous green CR was this pool's own and goes"
    );
    // Until the blueprint says what the pool now runs, a plan refuses: an apply would move every
    // node back to the declared driver.
    let errors = f.plan_errors().await;
    assert!(
        errors.len() == 1
            && errors[0].contains(&format!(
                "pool `{}` was upgraded to driver 610.57.04",
                f.pool
            ))
            && errors[0].contains("declares 595.91.07"),
        "{errors:#?}"
    );
    f.declare("610.57.04");
    let errors = f.plan_errors().await;
    assert!(errors.is_empty(), "{errors:#?}");
    f.assert_apply_agrees(&plan2.green_cr).await;
    let seen = inv.seen();
    assert!(seen.violations.is_empty(), "{:#?}", seen.violations);
    eprintln!(
        "upgrade_batches: first run {:?}, whole test {:?}, {} node events, {} pod events checked",
        run_time,
        started.elapsed(),
        seen.node_events,
        seen.pod_events
    );
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopping_at_any_step_and_resuming_converges() {
    let started = Instant::now();
    let Some(f) = Fixture::new("upgrade_resume", 8, "20s", DriverConfig::default()).await else {
        return;
    };
    let t = timing(Duration::from_secs(20));
    let inv = Invariants::start(f.tc.client.clone(), &f.selector, 2).await;
    let plan = f.plan(TO, &t).await;
    assert_eq!(plan.errors(), 0, "{}", human(&plan));
    // The pool is on render's CR for its driver; green is render's CR for the target.
    assert_eq!(plan.blue_cr, cr_name(&f.pool, FROM));
    assert_eq!(plan.green_cr, cr_name(&f.pool, TO));
    assert!(plan.remove_blue_cr, "the blue CR is the pool's own");
    // Drop the run's future (a crash as far as the cluster can tell: the lease is not released)
    // after each of these journal steps, then resume; every step kind is hit at least once.
    let stops = [2u64, 5, 9, 14, 20, 27, 33, 38];
    let (k, p, tt) = (gpuctl_kube().await, plan.clone(), t.clone());
    let first =
        tokio::spawn(async move { execute::start(&k, &p, &tt, &quiet(), Cancel::never()).await });
    let mut done = run_until_step(&f, first, stops[0]).await;
    let mut resumes = 0;
    for &stop in &stops[1..] {
        if done {
            break;
        }
        let status = f.journal().await.unwrap();
        assert!(!status.phase.is_final());
        let (k, pool, ns, tt) = (
            gpuctl_kube().await,
            f.pool.clone(),
            f.tc.namespace.clone(),
            t.clone(),
        );
        let task = tokio::spawn(async move {
            execute::resume(&k, Some(&ns), Some(&pool), &tt, &quiet(), Cancel::never()).await
        });
        resumes += 1;
        done = run_until_step(&f, task, stop).await;
    }
    if !done {
        f.resume(&t).await.unwrap_or_else(|e| panic!("{e}"));
        resumes += 1;
    }
    let j = f.journal().await.unwrap();
    assert_eq!(j.phase, JournalPhase::Completed, "{}", j.where_it_is());
    assert!(
        resumes >= 7,
        "only {resumes} resumes: the run finished too early"
    );
    assert_eq!(
        j.events
            .iter()
            .filter(|e| e.message.starts_with("resumed by"))
            .count(),
        resumes
    );
    f.assert_converged(&plan.green_cr, TO, Some("green")).await;
    assert!(
        !f.cr_exists(&plan.blue_cr).await,
        "the blue CR served only this pool and goes"
    );
    let seen = inv.seen();
    assert!(seen.violations.is_empty(), "{:#?}", seen.violations);
    assert!(f.driver.conflicts.lock().unwrap().is_empty());
    f.declare(TO);
    f.assert_apply_agrees(&plan.green_cr).await;
    eprintln!(
        "upgrade_resume: {resumes} resumes, {} journal steps, {:?}",
        j.step,
        started.elapsed()
    );
}

/// Sends `signal` to `child` once the journal has recorded `step` steps.
async fn stop_at_step(
    f: &Fixture,
    mut child: std::process::Child,
    step: u64,
    signal: &str,
) -> std::process::Child {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if f.journal().await.is_some_and(|j| j.step >= step) {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "gpuctl ended before step {step}"
        );
        assert!(Instant::now() < deadline, "no step {step} within 60s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ok = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    child
}

fn gpuctl(args: &[&str]) -> Command {
    Gpuctl::new(args).today(TODAY).no_color().command()
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ctrl_c_and_sigkill_of_the_binary_then_resume_converges() {
    let Some(f) = Fixture::new("upgrade_sigkill", 4, "20s", DriverConfig::default()).await else {
        return;
    };
    let kc = std::env::var(support::cluster::KUBECONFIG_ENV).unwrap();
    let fast = [
        "--kubeconfig",
        &kc,
        "--poll-interval",
        "50ms",
        "--lease-duration",
        "1s",
        "--validate-timeout",
        "20s",
    ];
    let bp = f.blueprint.to_str().unwrap().to_string();
    // Plan mode changes nothing and writes the runbook with its timeline beside it.
    let runbook = f.blueprint.with_file_name("upgrade.md");
    let o = gpuctl(
        &[
            &[
                "upgrade",
                "driver",
                &bp,
                "--pool",
                &f.pool,
                "--to",
                TO,
                "--runbook",
                runbook.to_str().unwrap(),
            ][..],
            &fast[..2],
        ]
        .concat(),
    )
    .output()
    .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("Nothing was changed") && out.contains("batch 4/4"),
        "{out}"
    );
    let md = std::fs::read_to_string(&runbook).unwrap();
    assert!(
        md.contains("](upgrade.timeline.svg)") && md.contains("kubectl cordon"),
        "{md}"
    );
    assert!(
        std::fs::read_to_string(runbook.with_file_name("upgrade.timeline.svg"))
            .unwrap()
            .starts_with("<svg")
    );
    assert!(f.journal().await.is_none(), "a plan writes no journal");
    // Ctrl-C (SIGINT) stops cleanly: the lease is released and the error says how to go on.
    let child = gpuctl(
        &[
            &[
                "upgrade",
                "driver",
                &bp,
                "--pool",
                &f.pool,
                "--to",
                TO,
                "--execute",
            ][..],
            &fast[..],
        ]
        .concat(),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let child = stop_at_step(&f, child, 4, "-INT").await;
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("interrupted") && err.contains("--resume"),
        "{err}"
    );
    let lease = gpuctl_cluster::upgrade::journal::lease_info(&f.k, &f.tc.namespace, &f.pool)
        .await
        .unwrap()
        .unwrap();
    assert!(
        lease.holder.is_empty(),
        "Ctrl-C released the lease: {lease:?}"
    );
    // SIGKILL mid-run (batch 2 or later of 4, one node each): the lease stays until it expires.
    let child = gpuctl(
        &[
            &["upgrade", "driver", "--resume", "--pool", &f.pool][..],
            &fast[..],
        ]
        .concat(),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut child = stop_at_step(&f, child, 10, "-KILL").await;
    child.wait().unwrap();
    let j = f.journal().await.unwrap();
    assert_eq!(j.phase, JournalPhase::Running);
    let status = gpuctl(&[&["upgrade", "status", "--pool", &f.pool][..], &fast[..2]].concat())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success() && text.contains("in progress") && text.contains("--resume"),
        "{text}"
    );
    let o = gpuctl(
        &[
            &["upgrade", "driver", "--resume", "--pool", &f.pool][..],
            &fast[..],
        ]
        .concat(),
    )
    .output()
    .unwrap();
    assert!(
        o.status.success(),
        "resume failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Upgrade complete"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = gpuctl(
        &[
            &["upgrade", "status", "--pool", &f.pool, "-o", "json"][..],
            &fast[..2],
        ]
        .concat(),
    )
    .output()
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["journal"]["phase"], "completed");
    f.assert_converged(&cr_name(&f.pool, TO), TO, Some("green"))
        .await;
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_never_validates_stops_the_rollout_and_rollback_restores() {
    let Some(f) = Fixture::new(
        "upgrade_failure",
        8,
        "20s",
        DriverConfig {
            reset_mig_config: Some("all-balanced".into()),
            ..DriverConfig::default()
        },
    )
    .await
    else {
        return;
    };
    let t = timing(Duration::from_secs(3));
    let inv = Invariants::start(f.tc.client.clone(), &f.selector, 2).await;
    let plan = f.plan(TO, &t).await;
    assert_eq!(plan.errors(), 0, "{}", human(&plan));
    let bad = plan.batches[1].nodes[0].clone();
    f.driver.set_failures(vec![Failure {
        node: bad.clone(),
        version: TO.into(),
        mode: FailMode::NeverValidates,
    }]);
    let before: BTreeMap<String, BTreeMap<String, String>> = {
        let mut m = BTreeMap::new();
        for n in &f.nodes {
            m.insert(n.clone(), f.labels(n).await);
        }
        m
    };
    let err = execute::start(&f.k, &plan, &t, &quiet(), Cancel::never())
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&bad)
            && msg.contains("did not validate")
            && msg.contains("--resume")
            && msg.contains("rollback"),
        "{msg}"
    );
    let j = f.journal().await.unwrap();
    assert_eq!(j.phase, JournalPhase::Failed);
    assert_eq!(j.nodes[&bad].state, NodeState::Failed);
    // Batch 1 and the bad node's peer made it, with the reset MIG config restored.
    for n in plan.batches[0]
        .nodes
        .iter()
        .chain(plan.batches[1].nodes.iter().filter(|n| **n != bad))
    {
        let l = f.labels(n).await;
        assert_eq!(l[DRIVER_LABEL], plan.green_cr, "{n}");
        assert_eq!(l[VERSION], TO, "{n}");
        assert_eq!(
            l[MIG_CONFIG_LABEL], "all-disabled",
            "{n}: recorded MIG config restored"
        );
        assert_eq!(j.nodes[n].state, NodeState::Done);
    }
    let badn = f.node(&bad).await;
    assert!(
        badn.spec.unwrap().unschedulable.unwrap_or(false),
        "the failed node stays cordoned"
    );
    // The rest never left the old driver.
    for b in &plan.batches[2..] {
        for n in &b.nodes {
            let node = f.node(n).await;
            let l = node.metadata.labels.clone().unwrap();
            assert_eq!(l[DRIVER_LABEL], plan.blue_cr, "{n}");
            assert_eq!(l[VERSION], FROM, "{n}");
            assert_eq!(l[COLOR], "blue", "{n}");
            assert!(!node.spec.unwrap().unschedulable.unwrap_or(false), "{n}");
            assert_eq!(j.nodes[n].state, NodeState::Blue);
        }
    }
    // A stopped upgrade still owns the pool: a plan of the blueprint is refused, naming the way out.
    let errors = f.plan_errors().await;
    assert!(
        errors.len() == 1
            && errors[0].contains(&format!(
                "pool `{}` has a driver upgrade stopped on a failure",
                f.pool
            ))
            && errors[0].contains(&format!("gpuctl upgrade driver --resume --pool {}", f.pool))
            && errors[0].contains(&format!("gpuctl upgrade rollback --pool {}", f.pool)),
        "{errors:#?}"
    );
    let status = gpuctl::output::upgrade::status(&[j], &[None]);
    assert!(
        status.contains("batch 2: failed") && status.contains("batch 3: pending"),
        "{status}"
    );

    let j = f
        .rollback(&timing(Duration::from_secs(20)))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(j.phase, JournalPhase::RolledBack);
    let errors = f.plan_errors().await;
    assert!(errors.is_empty(), "after the rollback: {errors:#?}");
    // Every recorded label is back, the colour (absent before) is gone, nothing is cordoned.
    for n in &f.nodes {
        let node = f.node(n).await;
        let l = node.metadata.labels.clone().unwrap();
        for key in [
            DRIVER_LABEL,
            MIG_CONFIG_LABEL,
            DEVICE_PLUGIN_CONFIG_LABEL,
            COLOR,
            VERSION,
        ] {
            assert_eq!(l.get(key), before[n].get(key), "{n}: {key}");
        }
        assert_released(n, &node);
    }
    assert!(
        !f.cr_exists(&plan.green_cr).await,
        "the green CR goes with the rollback"
    );
    assert!(f.cr_exists(&plan.blue_cr).await);
    let seen = inv.seen();
    assert!(seen.violations.is_empty(), "{:#?}", seen.violations);
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_run_at_a_time_and_a_blocking_budget_stops_the_drain() {
    let Some(f) = Fixture::new("upgrade_lease_pdb", 2, "1s", DriverConfig::default()).await else {
        return;
    };
    let t = timing(Duration::from_secs(20));
    // One replica that must stay up: its budget never allows an eviction.
    let serve = f.serve("solo", 1, 1).await;
    let mut inv = Invariants::start(f.tc.client.clone(), &f.selector, 1).await;
    inv.watch_service(f.tc.client.clone(), &f.tc.namespace, "solo", 1)
        .await;
    let plan = f.plan(TO, &t).await;
    assert_eq!(plan.errors(), 0, "{}", human(&plan));
    assert!(
        plan.checks
            .iter()
            .any(|c| c.message.contains("allows no disruption now")),
        "{}",
        human(&plan)
    );
    let (k, p, tt) = (gpuctl_kube().await, plan.clone(), t.clone());
    let a =
        tokio::spawn(async move { execute::start(&k, &p, &tt, &quiet(), Cancel::never()).await });
    while f.journal().await.is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let plan_b = f.plan(TO, &t).await;
    assert!(
        plan_b.errors() > 0,
        "a second plan sees the upgrade in progress"
    );
    let err = f.resume(&t).await.unwrap_err();
    assert!(matches!(err, UpgradeError::Busy { .. }), "{err}");
    let err = a.await.unwrap().unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("drain of batch 2 timed out") && msg.contains("eviction refused"),
        "{msg}"
    );
    let solo = f.plan(TO, &t).await.batches.len();
    assert_eq!(solo, 2);
    let j = f.journal().await.unwrap();
    assert_eq!(j.phase, JournalPhase::Failed);
    let blocked = &plan.batches[1].nodes[0];
    assert_eq!(j.nodes[blocked].state, NodeState::Cordoned);
    assert_eq!(
        f.labels(blocked).await[DRIVER_LABEL],
        plan.blue_cr,
        "a node that did not drain never moves"
    );
    let j = f.rollback(&t).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(j.phase, JournalPhase::RolledBack);
    assert!(
        !f.node(blocked)
            .await
            .spec
            .unwrap()
            .unschedulable
            .unwrap_or(false)
    );
    let seen = inv.seen();
    assert!(seen.violations.is_empty(), "{:#?}", seen.violations);
    assert!(seen.min_healthy.is_none_or(|m| m >= 1), "{seen:?}");
    assert_eq!(
        *serve.created.lock().unwrap(),
        1,
        "the budget's pod was never evicted"
    );
    let solo: Api<Pod> = f.tc.namespaced();
    assert!(
        solo.get("solo-1")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
}

/// The upgrade plan as `gpuctl upgrade driver` prints it (without `--execute`).
fn human(plan: &UpgradePlan) -> String {
    gpuctl::output::upgrade::plan(plan, false)
}

#[needs_test_cluster]
#[tokio::test]
async fn an_upgrade_does_not_start_while_an_apply_of_its_blueprint_runs() {
    let Some(f) = Fixture::new("upgrade_apply_lock", 1, "1s", DriverConfig::default()).await else {
        return;
    };
    let t = timing(Duration::from_secs(20));
    let plan = f.plan(TO, &t).await;
    assert_eq!(plan.errors(), 0, "{}", human(&plan));
    let apply_lock = gpuctl_cluster::lock::LockRef {
        namespace: f.tc.namespace.clone(),
        name: gpuctl_core::names::apply_lock_name(&plan.blueprint),
        labels: Default::default(),
    };
    let policy = gpuctl_cluster::lock::Policy {
        duration: Duration::from_secs(10),
        poll: Duration::from_millis(200),
        wait: Duration::ZERO,
        outwait_silent: false,
    };
    let held = gpuctl_cluster::lock::acquire(
        &f.k,
        &apply_lock,
        &gpuctl_cluster::lock::this_run("apply", None),
        &policy,
        &gpuctl_cluster::report::Silent,
    )
    .await
    .unwrap();
    let err = execute::start(&f.k, &plan, &t, &quiet(), Cancel::never())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, UpgradeError::Refused(m) if m.contains(&format!("an apply of blueprint `{}` is running", plan.blueprint))),
        "{err}"
    );
    assert!(f.journal().await.is_none(), "nothing was recorded");
    let lease = gpuctl_cluster::upgrade::journal::lease_info(&f.k, &f.tc.namespace, &f.pool)
        .await
        .unwrap();
    assert!(
        lease.as_ref().is_none_or(|l| !l.live()),
        "the pool's Lease was released: {lease:?}"
    );
    held.release().await;
}
