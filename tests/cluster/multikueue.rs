//! Issue 31: MultiKueue for real. Three fresh harnesses, each with the real Kueue v0.19.2: the
//! manager `hub` (Kueue with `batch/job` and `jobset.x-k8s.io/jobset`, whose CRD the test gives
//! both workers: Kueue connects only workers that serve every framework's kind) and the workers
//! `worker-a` (no GPU quota) and `worker-b` (8 GPUs). `fleet apply` (one wave) renders and applies
//! the workers' ServiceAccount, token Secret and RBAC, the manager's MultiKueueClusters, config,
//! AdmissionCheck and the ClusterQueue's strategy, then writes each worker's kubeconfig Secret on
//! the manager (never printed: the output shows `***`, `fleet plan` never names it). The test
//! checks, against the clusters: both MultiKueueClusters become Active; a Job submitted to the
//! manager's LocalQueue gets a Workload there whose `status.clusterName` is `worker-b`, and a copy
//! of the Job appears on worker-b (not on worker-a). Then each MultiKueue mistake gpuctl refuses
//! (GPU188, GPU193, GPU194) or never renders (exec kubeconfigs, check placements) is forced through
//! by writing the objects directly, and the test asserts what Kueue does: the exec kubeconfig's
//! MultiKueueCluster inactive (`InsecureKubeConfig`), ClusterQueues with two MultiKueue checks, a
//! per-flavor one, one beside a ProvisioningRequest check, or one on a worker inactive with
//! Kueue's reason, 21 clusters refused by the CRD, a Job from a LocalQueue the workers lack never
//! admitted there, a worker without the JobSet CRD never connected, and a manager quota above the
//! workers' (GPU196) admitting a Job on the manager that no worker admits, and the manager as its
//! own worker (GPU187): connected, and its Job suspended for good. Last, worker-a loses the JobSet
//! CRD and the next `fleet apply` names what it no longer serves.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpuctl_test_skip::needs_test_cluster;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::fleet::FleetRepo;
use support::fresh::FreshCluster;
use support::gpuctl::in_dir as gpuctl;
use support::releases::text;

const CLUSTERS: [&str; 3] = ["hub", "worker-a", "worker-b"];

const BASE: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: base
spec:
  kubernetes:
    version: \"1.35.1\"
  gpuOperator:
    version: v26.7.0
    namespace: gpu-operator
    install: none
    driver:
      version: \"580.173.02\"
      kernelModuleType: open
  nodePools:
    - name: train
      role: training
      selector: { gpuctl.dev/pool: train }
      nodes: 1
      gpu: { model: H100-SXM5-80GB, count: 8 }
  scheduling:
    queueing: kueue
    kueue:
      version: v0.19.2
      install: none
      config: { integrations: { frameworks: [batch/job, jobset.x-k8s.io/jobset] } }
      clusterQueues:
        - name: cq-team-a
          resources:
            - { pool: train, quota: { nvidia.com/gpu: 8, cpu: \"16\", memory: 64Gi } }
  tenants:
    - name: team-a
      namespaces: [team-a]
      queue: cq-team-a
";

const FLEET: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: Fleet
metadata: { name: mk }
spec:
  clusters:
    - { name: hub, blueprint: clusters/hub.yaml, context: ctx-hub }
    - { name: worker-a, blueprint: clusters/worker-a.yaml, context: ctx-worker-a }
    - { name: worker-b, blueprint: clusters/worker-b.yaml, context: ctx-worker-b }
  multiKueue:
    manager: hub
    workers: [worker-a, worker-b]
    clusterQueues: [cq-team-a]
";

fn kueue(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "kueue.x-k8s.io/v1beta2".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn condition(o: &DynamicObject, kind: &str) -> Option<(String, String, String)> {
    let conds = o.data.pointer("/status/conditions")?.as_array()?;
    let c = conds.iter().find(|c| c["type"] == kind)?;
    Some((
        c["status"].as_str()?.into(),
        c["reason"].as_str().unwrap_or("").into(),
        c["message"].as_str().unwrap_or("").into(),
    ))
}

/// Polls `f` every 250 ms until it is `Some`, at most `secs`; `what` names it in the panic. The
/// bounds are generous (120 s): CI runs four cluster tests at a time on two cores, and a wait
/// ends as soon as its state is reached (45 s failed once under that load).
async fn until<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(last) if Instant::now() > end => panic!("{what} within {secs}s; last: {last}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

fn job(name: &str) -> k8s_openapi::api::batch::v1::Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a",
            "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.invalid/train:1", "resources": {
                "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"}}}]}}}
    }))
    .unwrap()
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multikueue_dispatches_a_job_to_the_worker_with_quota() {
    let Some(_shared) = TestCluster::connect("multikueue").await else {
        return;
    };
    let started = Instant::now();
    let fresh = FreshCluster::up_all(&CLUSTERS.map(|c| {
        let mut flags = vec!["--without-volcano"];
        if c == "hub" {
            flags.extend(["--kueue-frameworks", "batch/job,jobset.x-k8s.io/jobset"]);
        }
        (format!("multikueue-{c}"), flags)
    }));
    eprintln!(
        "multikueue: three clusters up in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let mut fleet = FleetRepo::new().git().file("base.yaml", BASE);
    for c in CLUSTERS {
        let gpus = if c == "worker-a" { "0" } else { "8" };
        fleet = fleet.cluster(
            c,
            &format!(
                "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources:\n            - {{ pool: train, quota: {{ nvidia.com/gpu: {gpus} }} }}\n"
            ),
        );
    }
    let repo = fleet.file("fleet.yaml", FLEET).build();
    let dir = repo.path();
    let harnesses: Vec<(&str, PathBuf)> = CLUSTERS
        .iter()
        .zip(&fresh)
        .map(|(c, f)| (*c, f.kubeconfig()))
        .collect();
    let kc = dir.join("kubeconfig.json");
    support::fleet::kubeconfig(&harnesses, &kc);
    let kcs = kc.display().to_string();
    let mut clients = Vec::new();
    for f in &fresh {
        clients.push(f.client().await);
    }
    let (hub, worker_a, worker_b) = (&clients[0], &clients[1], &clients[2]);
    for w in [worker_a, worker_b] {
        jobset_crd(w).await;
    }

    // `fleet apply`, run first to connect the workers and last to check what they serve.
    let fleet_apply = || {
        gpuctl(
            &[
                "fleet",
                "apply",
                "fleet.yaml",
                "--kubeconfig",
                &kcs,
                "--yes",
            ],
            dir,
        )
    };
    let o = fleet_apply();
    assert_eq!(o.status.code(), Some(0), "fleet apply: {}", text(&o));
    let shown = text(&o);
    eprintln!("multikueue: fleet apply said:\n{shown}");
    assert!(
        shown.contains("kubeconfig of `worker-b`") && shown.contains("token ***"),
        "{shown}"
    );
    // Both workers serve every kind the manager's Kueue enables (Job, and JobSet by its CRD).
    assert!(!shown.contains("does not serve"), "{shown}");
    // The token never leaves gpuctl: read it from the worker and look for it in the output.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(worker_b.clone(), "kueue-system");
    let token = secrets
        .get("gpuctl-multikueue-token")
        .await
        .unwrap()
        .data
        .unwrap()["token"]
        .0
        .clone();
    let token = String::from_utf8(token).unwrap();
    assert!(
        !token.is_empty() && !shown.contains(&token),
        "token printed"
    );
    eprintln!(
        "multikueue: fleet apply done at {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // Both MultiKueueClusters connect.
    let mkc: Api<DynamicObject> = Api::all_with(
        hub.clone(),
        &kueue("MultiKueueCluster", "multikueueclusters"),
    );
    for w in ["worker-a", "worker-b"] {
        until(120, &format!("MultiKueueCluster {w} Active"), || async {
            let o = mkc.get(w).await.map_err(|e| e.to_string())?;
            match condition(&o, "Active") {
                Some((s, _, _)) if s == "True" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
    let ac: Api<DynamicObject> =
        Api::all_with(hub.clone(), &kueue("AdmissionCheck", "admissionchecks"));
    until(120, "AdmissionCheck Active", || async {
        let o = ac.get("multikueue").await.map_err(|e| e.to_string())?;
        match condition(&o, "Active") {
            Some((s, _, _)) if s == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    eprintln!(
        "multikueue: clusters Active at {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // The secret is no part of any plan.
    let o = gpuctl(
        &[
            "fleet",
            "plan",
            "fleet.yaml",
            "--kubeconfig",
            &kcs,
            "-o",
            "json",
        ],
        dir,
    );
    let plan = text(&o);
    assert!(!plan.contains(&token), "token in fleet plan");
    assert!(!plan.contains("certificate-authority-data"), "{plan}");

    // A Job on the manager goes to worker-b, the worker with quota.
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(hub.clone(), "team-a");
    jobs.create(&PostParams::default(), &job("train-1"))
        .await
        .unwrap();
    let wl: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), "team-a", &kueue("Workload", "workloads"));
    let cluster = until(120, "the manager's Workload names its worker", || async {
        let list = wl
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|w| {
                w.data
                    .pointer("/status/clusterName")?
                    .as_str()
                    .map(String::from)
            })
            .collect();
        names.first().cloned().ok_or_else(|| {
            format!(
                "{:?}",
                list.items
                    .iter()
                    .map(|w| &w.data["status"])
                    .collect::<Vec<_>>()
            )
        })
    })
    .await;
    assert_eq!(cluster, "worker-b");
    let remote: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(worker_b.clone(), "team-a");
    until(120, "the Job's copy on worker-b", || async {
        remote
            .get_opt("train-1")
            .await
            .map_err(|e| e.to_string())?
            .map(|_| ())
            .ok_or_else(|| "absent".to_string())
    })
    .await;
    let other: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(worker_a.clone(), "team-a");
    until(120, "no copy left on worker-a", || async {
        match other.get_opt("train-1").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("present".to_string()),
        }
    })
    .await;
    eprintln!(
        "multikueue: positive part done in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // Each MultiKueue rule gpuctl checks (or guarantees), forced through by writing the objects
    // directly: what the real Kueue does. Fresh object names, so the wiring above is untouched.
    forced_exec_kubeconfig(hub, &fresh[1].kubeconfig()).await;
    forced_checks_on_cluster_queues(hub, worker_a).await;
    forced_too_many_workers(hub).await;
    forced_unmirrored_local_queue(hub, worker_a, worker_b).await;
    forced_missing_framework(hub).await;
    forced_manager_quota_above_workers(hub, worker_b).await;
    forced_manager_as_its_own_worker(hub, &fresh[0].kubeconfig()).await;
    // gpuctl's own check of GPU195 on the live workers: worker-a loses the JobSet CRD, and the
    // next `fleet apply` names it (the Secret is still written; Kueue will not connect it).
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(worker_a.clone());
    crds.delete("jobsets.jobset.x-k8s.io", &Default::default())
        .await
        .unwrap();
    until(120, "worker-a no longer serves JobSets", || async {
        match crds
            .get_opt("jobsets.jobset.x-k8s.io")
            .await
            .map_err(|e| e.to_string())?
        {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await;
    let o = fleet_apply();
    let again = text(&o);
    eprintln!("multikueue: fleet apply without worker-a's JobSet CRD:\n{again}");
    assert_eq!(o.status.code(), Some(0), "{again}");
    assert!(
        again.contains("worker `worker-a` does not serve jobsets.jobset.x-k8s.io")
            && !again.contains("worker `worker-b` does not serve"),
        "{again}"
    );
    eprintln!(
        "multikueue: done in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

async fn create(client: &Client, ns: Option<&str>, ar: &ApiResource, body: Value) {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let o: DynamicObject = serde_json::from_value(body).unwrap();
    api.create(&PostParams::default(), &o).await.unwrap();
}

/// The `Active` condition of a cluster-scoped Kueue object once it is `False` with a reason other
/// than Kueue's placeholder.
async fn inactive(client: &Client, ar: &ApiResource, name: &str) -> (String, String) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    until(120, &format!("{} {name} inactive", ar.kind), || async {
        let o = api.get(name).await.map_err(|e| e.to_string())?;
        match condition(&o, "Active") {
            Some((s, r, m)) if s == "False" && !r.is_empty() => Ok((r, m)),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// A kubeconfig with an exec plugin (what an EKS or GKE context holds; gpuctl never writes one:
/// its kubeconfig holds the worker's ServiceAccount token) for a real worker: Kueue refuses it, the MultiKueueCluster is inactive with reason
/// `InsecureKubeConfig`.
async fn forced_exec_kubeconfig(hub: &Client, worker: &Path) {
    let kc: Value = serde_saphyr::from_str(&std::fs::read_to_string(worker).unwrap()).unwrap();
    let kubeconfig = json!({"apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "w", "cluster": kc["clusters"][0]["cluster"]}],
        "users": [{"name": "w", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
            "command": "aws", "args": ["eks", "get-token", "--cluster-name", "w"],
            "interactiveMode": "Never"}}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
        "current-context": "w"});
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(hub.clone(), "kueue-system");
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "neg-exec-kubeconfig"},
        "stringData": {"kubeconfig": kubeconfig.to_string()}}))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let mkc = kueue("MultiKueueCluster", "multikueueclusters");
    create(
        hub,
        None,
        &mkc,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster", "metadata": {"name": "neg-exec"},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
            "location": "neg-exec-kubeconfig"}}}}),
    )
    .await;
    let (reason, message) = inactive(hub, &mkc, "neg-exec").await;
    eprintln!("multikueue: exec plugin -> {reason}: {message}");
    assert_eq!(reason, "InsecureKubeConfig", "{message}");
    assert!(
        message.contains("exec plugins are not allowed"),
        "{message}"
    );
}

/// The check placements gpuctl never renders: two MultiKueue checks on one ClusterQueue, one per
/// flavor, one beside a ProvisioningRequest check (manager), and one on a worker's ClusterQueue.
/// Kueue keeps each ClusterQueue inactive, saying why.
async fn forced_checks_on_cluster_queues(hub: &Client, worker: &Client) {
    let ac = kueue("AdmissionCheck", "admissionchecks");
    let cq = kueue("ClusterQueue", "clusterqueues");
    let check = |name: &str, controller: &str, params: Value| {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
            "metadata": {"name": name}, "spec": {"controllerName": controller, "parameters": params}})
    };
    let mk_params =
        json!({"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "multikueue"});
    create(
        hub,
        None,
        &ac,
        check("neg-mk-2", "kueue.x-k8s.io/multikueue", mk_params.clone()),
    )
    .await;
    // The second check must be Active before a ClusterQueue names both: until Kueue's MultiKueue
    // controller has marked it (seconds on a loaded CI machine), the queue is inactive for a
    // reason that says nothing about two checks (`AdmissionCheckInactive`; seen once in CI).
    let checks: Api<DynamicObject> = Api::all_with(hub.clone(), &ac);
    until(120, "AdmissionCheck neg-mk-2 Active", || async {
        let o = checks.get("neg-mk-2").await.map_err(|e| e.to_string())?;
        match condition(&o, "Active") {
            Some((s, _, _)) if s == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    create(
        hub,
        None,
        &ac,
        check(
            "neg-prov",
            "kueue.x-k8s.io/provisioning-request",
            json!(null),
        ),
    )
    .await;
    let rf = kueue("ResourceFlavor", "resourceflavors");
    create(
        hub,
        None,
        &rf,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor", "metadata": {"name": "neg-flavor"}}),
    )
    .await;
    let queue = |name: &str, flavors: &[&str], checks: Value| {
        let flavors: Vec<Value> = flavors
            .iter()
            .map(|f| {
                json!({"name": f,
            "resources": [{"name": "cpu", "nominalQuota": "1"}]})
            })
            .collect();
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name}, "spec": {
                "namespaceSelector": {"matchLabels": {"gpuctl.dev/none": "none"}},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}],
                "admissionChecksStrategy": {"admissionChecks": checks}}})
    };
    let cases = [
        (
            "neg-two-checks",
            vec!["train"],
            json!([{"name": "multikueue"}, {"name": "neg-mk-2"}]),
            "MultipleMultiKueueAdmissionChecks",
            "Cannot use multiple MultiKueue AdmissionChecks",
        ),
        (
            "neg-per-flavor",
            vec!["train", "neg-flavor"],
            json!([{"name": "multikueue", "onFlavors": ["train"]}]),
            "MultiKueueAdmissionCheckAppliedPerFlavor",
            "Cannot specify MultiKueue AdmissionCheck per flavor",
        ),
        (
            "neg-with-prov",
            vec!["train"],
            json!([{"name": "multikueue"}, {"name": "neg-prov"}]),
            "",
            "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together",
        ),
    ];
    for (name, flavors, checks, want_reason, want_message) in cases {
        create(hub, None, &cq, queue(name, &flavors, checks)).await;
        let (reason, message) = inactive(hub, &cq, name).await;
        eprintln!("multikueue: {name} -> {reason}: {message}");
        if !want_reason.is_empty() {
            assert_eq!(reason, want_reason, "{message}");
        }
        assert!(message.contains(want_message), "{reason}: {message}");
    }
    // A worker's ClusterQueue with a MultiKueue check: the worker has no MultiKueueConfig, so
    // the check is inactive and so is the queue.
    create(
        worker,
        None,
        &ac,
        check("neg-worker-mk", "kueue.x-k8s.io/multikueue", mk_params),
    )
    .await;
    create(
        worker,
        None,
        &cq,
        queue(
            "neg-worker-cq",
            &["train"],
            json!([{"name": "neg-worker-mk"}]),
        ),
    )
    .await;
    let (reason, message) = inactive(worker, &cq, "neg-worker-cq").await;
    eprintln!("multikueue: worker queue with a MultiKueue check -> {reason}: {message}");
    assert_eq!(reason, "AdmissionCheckInactive", "{message}");
    assert!(message.contains("neg-worker-mk"), "{message}");
}

/// A MultiKueueConfig of 21 clusters (GPU188 allows 20): the real CRD refuses it at create.
async fn forced_too_many_workers(hub: &Client) {
    let api: Api<DynamicObject> =
        Api::all_with(hub.clone(), &kueue("MultiKueueConfig", "multikueueconfigs"));
    let clusters: Vec<String> = (0..21).map(|i| format!("c{i}")).collect();
    let o: DynamicObject = serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueConfig", "metadata": {"name": "neg-21"},
        "spec": {"clusters": clusters}}))
    .unwrap();
    match api.create(&PostParams::default(), &o).await {
        Err(kube::Error::Api(e)) => {
            eprintln!("multikueue: 21 clusters -> {} {}", e.code, e.message);
            assert_eq!(e.code, 422, "{e:?}");
            assert!(
                e.message.contains("must have at most 20 items"),
                "{}",
                e.message
            );
        }
        other => panic!("a MultiKueueConfig of 21 clusters: {other:?}"),
    }
}

/// A manager LocalQueue the workers lack (GPU194): the namespace exists on both workers, its
/// LocalQueue does not. The manager admits the Job and Kueue copies the Workload to the workers,
/// where it is never admitted (`LocalQueue default doesn't exist`); the manager's Workload names
/// no worker.
async fn forced_unmirrored_local_queue(hub: &Client, worker_a: &Client, worker_b: &Client) {
    let ns = "team-a-unmirrored";
    for c in [hub, worker_a, worker_b] {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.clone());
        let n = serde_json::from_value(json!({"metadata": {"name": ns,
            "labels": {"gpuctl.dev/tenant": "team-a"}}}))
        .unwrap();
        api.create(&PostParams::default(), &n).await.unwrap();
    }
    create(
        hub,
        Some(ns),
        &kueue("LocalQueue", "localqueues"),
        json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": ns}, "spec": {"clusterQueue": "cq-team-a"}}),
    )
    .await;
    // Kueue's Job webhook sets `managedBy: kueue.x-k8s.io/multikueue` only for a LocalQueue it
    // has cached (jobframework/defaults.go ApplyDefaultForManagedBy): a Job created before that is
    // never dispatched. Wait until the manager's Kueue reports the new LocalQueue active.
    let lqs: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), ns, &kueue("LocalQueue", "localqueues"));
    until(120, "the manager's new LocalQueue active", || async {
        let o = lqs.get("default").await.map_err(|e| e.to_string())?;
        match condition(&o, "Active") {
            Some((s, _, _)) if s == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let mut j = job("unmirrored-1");
    j.metadata.namespace = Some(ns.into());
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(hub.clone(), ns);
    jobs.create(&PostParams::default(), &j).await.unwrap();
    let remote: Api<DynamicObject> =
        Api::namespaced_with(worker_b.clone(), ns, &kueue("Workload", "workloads"));
    let local: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), ns, &kueue("Workload", "workloads"));
    let (reason, message) = until(120, "the copy on worker-b says why it waits", || async {
        let list = remote
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let Some(w) = list.items.first() else {
            let hub = local
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            return Err(format!(
                "no copy yet; the manager's: {:?}",
                hub.items
                    .iter()
                    .map(|w| &w.data["status"])
                    .collect::<Vec<_>>()
            ));
        };
        match condition(w, "QuotaReserved") {
            Some((s, r, m)) if s == "False" && m.contains("LocalQueue") => Ok((r, m)),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    eprintln!("multikueue: unmirrored LocalQueue -> worker-b Workload {reason}: {message}");
    assert!(
        message.contains("LocalQueue default doesn't exist"),
        "{message}"
    );
    let list = local.list(&Default::default()).await.unwrap();
    let w = list.items.first().expect("the manager's Workload");
    assert!(
        w.data.pointer("/status/clusterName").is_none(),
        "{:?}",
        w.data["status"]
    );
}

/// The JobSet CRD's served kind (`jobset.x-k8s.io/v1alpha2` JobSet, the version Kueue v0.19.2's
/// adapter watches): all a watch needs; the schema is left open.
async fn jobset_crd(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "jobsets.jobset.x-k8s.io"},
        "spec": {"group": "jobset.x-k8s.io", "scope": "Namespaced",
            "names": {"kind": "JobSet", "listKind": "JobSetList", "plural": "jobsets",
                "singular": "jobset"},
            "versions": [{"name": "v1alpha2", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}}]}}))
    .unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.create(&PostParams::default(), &crd).await.unwrap();
    until(120, "the JobSet CRD established", || async {
        let o = api
            .get("jobsets.jobset.x-k8s.io")
            .await
            .map_err(|e| e.to_string())?;
        let conds = o.status.and_then(|s| s.conditions).unwrap_or_default();
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
            .ok_or_else(|| format!("{conds:?}"))
    })
    .await;
}

/// A framework the manager enables (`jobset.x-k8s.io/jobset`) on a cluster without its CRD
/// (GPU195): a MultiKueueCluster for the shared test cluster, which has Kueue's CRDs but not
/// JobSet's, with a kubeconfig Kueue accepts. Kueue's JobSet watch fails there, so it never
/// connects: inactive, `ClientConnectionFailed`.
async fn forced_missing_framework(hub: &Client) {
    let path = std::env::var("GPUCTL_TEST_KUBECONFIG").expect("the shared test cluster");
    let kubeconfig = std::fs::read_to_string(path).unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(hub.clone(), "kueue-system");
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "neg-no-crd-kubeconfig"},
        "stringData": {"kubeconfig": kubeconfig}}))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let mkc = kueue("MultiKueueCluster", "multikueueclusters");
    create(
        hub,
        None,
        &mkc,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster", "metadata": {"name": "neg-no-crd"},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
            "location": "neg-no-crd-kubeconfig"}}}}),
    )
    .await;
    let (reason, message) = inactive(hub, &mkc, "neg-no-crd").await;
    eprintln!("multikueue: worker without the JobSet CRD -> {reason}: {message}");
    assert_eq!(reason, "ClientConnectionFailed", "{message}");
    assert!(
        message.contains("no matches for kind \"JobSet\""),
        "{message}"
    );
}

/// A manager quota above the workers' sum (GPU196, a warning): the hub's `cq-team-a` raised to
/// 16 GPUs while worker-b keeps 8 (worker-a 0). An 8-GPU Job is admitted on the manager (its
/// quota holds it) and copied to the workers, where it is not admitted for want of quota: the
/// manager's Workload holds 8 GPUs of quota and names no worker.
async fn forced_manager_quota_above_workers(hub: &Client, worker_b: &Client) {
    let cqs: Api<DynamicObject> =
        Api::all_with(hub.clone(), &kueue("ClusterQueue", "clusterqueues"));
    let mut cq = cqs.get("cq-team-a").await.unwrap();
    let mut raised = 0;
    for g in cq.data["spec"]["resourceGroups"].as_array_mut().unwrap() {
        for f in g["flavors"].as_array_mut().unwrap() {
            for r in f["resources"].as_array_mut().unwrap() {
                if r["name"] == "nvidia.com/gpu" {
                    r["nominalQuota"] = json!("16");
                    raised += 1;
                }
            }
        }
    }
    assert_eq!(raised, 1, "{:?}", cq.data["spec"]);
    cqs.replace("cq-team-a", &PostParams::default(), &cq)
        .await
        .unwrap();
    let mut j = job("over-quota-1");
    let c = &mut j
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0];
    let res = c.resources.as_mut().unwrap();
    for m in [res.requests.as_mut().unwrap(), res.limits.as_mut().unwrap()] {
        m.insert(
            "nvidia.com/gpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("8".into()),
        );
    }
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(hub.clone(), "team-a");
    jobs.create(&PostParams::default(), &j).await.unwrap();
    let remote: Api<DynamicObject> =
        Api::namespaced_with(worker_b.clone(), "team-a", &kueue("Workload", "workloads"));
    let message = until(120, "the copy on worker-b waits for quota", || async {
        let list = remote
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let copy = list.items.iter().find(|w| {
            w.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.contains("over-quota-1"))
        });
        let Some(w) = copy else {
            return Err("no copy yet".to_string());
        };
        match condition(w, "QuotaReserved") {
            Some((s, _, m)) if s == "False" && m.contains("insufficient") => Ok(m),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    eprintln!("multikueue: manager quota above the workers' -> worker-b copy: {message}");
    let local: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), "team-a", &kueue("Workload", "workloads"));
    let list = local.list(&Default::default()).await.unwrap();
    let w = list
        .items
        .iter()
        .find(|w| {
            w.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.contains("over-quota-1"))
        })
        .expect("the manager's Workload");
    assert_eq!(
        condition(w, "QuotaReserved").map(|c| c.0),
        Some("True".to_string()),
        "the manager holds quota for it: {:?}",
        w.data["status"]
    );
    assert!(
        w.data.pointer("/status/clusterName").is_none(),
        "{:?}",
        w.data["status"]
    );
}

/// The manager as its own worker (GPU187): a MultiKueueCluster whose kubeconfig is the manager's
/// own API server, with a ServiceAccount token the way gpuctl builds a worker's (the manager gets
/// the JobSet CRD first, so only the self-reference is wrong). Kueue connects it (`Active`) and
/// dispatches to it: a Job's Workload reserves the manager's quota and is nominated to the
/// manager itself, and then nothing happens: its MultiKueue check stays `Pending`, no cluster is
/// named, the Job stays suspended (its remote copy is itself).
async fn forced_manager_as_its_own_worker(hub: &Client, own: &Path) {
    jobset_crd(hub).await;
    let ns = "kueue-system";
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(hub.clone(), ns);
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "neg-self"}})).unwrap(),
    )
    .await
    .unwrap();
    let crbs: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(hub.clone());
    crbs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "neg-self"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "neg-self", "namespace": ns}]}))
        .unwrap(),
    )
    .await
    .unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(hub.clone(), ns);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "neg-self-token",
                "annotations": {"kubernetes.io/service-account.name": "neg-self"}},
                "type": "kubernetes.io/service-account-token"}))
            .unwrap(),
        )
        .await
        .unwrap();
    let (token, ca) = until(120, "the self token", || async {
        let s = secrets
            .get("neg-self-token")
            .await
            .map_err(|e| e.to_string())?;
        let d = s.data.unwrap_or_default();
        match (d.get("token"), d.get("ca.crt")) {
            (Some(t), Some(c)) => Ok((String::from_utf8(t.0.clone()).unwrap(), c.0.clone())),
            _ => Err("empty".to_string()),
        }
    })
    .await;
    use base64::Engine as _;
    let kc: Value = serde_saphyr::from_str(&std::fs::read_to_string(own).unwrap()).unwrap();
    let server = kc["clusters"][0]["cluster"]["server"].clone();
    let kubeconfig = json!({"apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "self", "cluster": {"server": server,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(&ca)}}],
        "users": [{"name": "self", "user": {"token": token}}],
        "contexts": [{"name": "self", "context": {"cluster": "self", "user": "self"}}],
        "current-context": "self"});
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "neg-self-kubeconfig"},
                "stringData": {"kubeconfig": kubeconfig.to_string()}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let mkc = kueue("MultiKueueCluster", "multikueueclusters");
    create(
        hub,
        None,
        &mkc,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster", "metadata": {"name": "neg-self"},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
            "location": "neg-self-kubeconfig"}}}}),
    )
    .await;
    let api: Api<DynamicObject> = Api::all_with(hub.clone(), &mkc);
    let (status, reason, message) = until(120, "neg-self has a verdict", || async {
        let o = api.get("neg-self").await.map_err(|e| e.to_string())?;
        match condition(&o, "Active") {
            Some((s, r, m)) if !r.is_empty() => Ok((s, r, m)),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    eprintln!(
        "multikueue: manager as its own worker -> MultiKueueCluster {status} {reason}: {message}"
    );
    // Kueue does not refuse it: it connects.
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "Active"),
        "{message}"
    );
    create(hub, None, &kueue("MultiKueueConfig", "multikueueconfigs"), json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueConfig", "metadata": {"name": "neg-self"}, "spec": {"clusters": ["neg-self"]}})).await;
    create(hub, None, &kueue("AdmissionCheck", "admissionchecks"), json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": "neg-self"}, "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "neg-self"}}})).await;
    create(hub, None, &kueue("ClusterQueue", "clusterqueues"), json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "neg-self-cq"}, "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-self"}},
            "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "train",
                "resources": [{"name": "cpu", "nominalQuota": "4"}, {"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "neg-self"}]}}})).await;
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(hub.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "team-self"}})).unwrap(),
    )
    .await
    .unwrap();
    create(hub, Some("team-self"), &kueue("LocalQueue", "localqueues"), json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": "team-self"}, "spec": {"clusterQueue": "neg-self-cq"}})).await;
    let lqs: Api<DynamicObject> = Api::namespaced_with(
        hub.clone(),
        "team-self",
        &kueue("LocalQueue", "localqueues"),
    );
    until(120, "team-self LocalQueue active", || async {
        let o = lqs.get("default").await.map_err(|e| e.to_string())?;
        match condition(&o, "Active") {
            Some((s, _, _)) if s == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let mut j = job("self-1");
    j.metadata.namespace = Some("team-self".into());
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(hub.clone(), "team-self");
    jobs.create(&PostParams::default(), &j).await.unwrap();
    let wl: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), "team-self", &kueue("Workload", "workloads"));
    let nominated = || async {
        let list = wl
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let w = list.items.into_iter().next().ok_or("no Workload yet")?;
        let st = &w.data["status"];
        let named = st["nominatedClusterNames"]
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c == "neg-self"));
        let reserved = condition(&w, "QuotaReserved").is_some_and(|c| c.0 == "True");
        if named && reserved {
            Ok(w)
        } else {
            Err(format!("{st}"))
        }
    };
    until(
        120,
        "the Workload nominated to the manager itself",
        nominated,
    )
    .await;
    // Nominated, with quota held on the manager: it never gets further. The check stays Pending,
    // no cluster is named, and the Job stays suspended.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let w = nominated().await.expect("still nominated");
    let st = &w.data["status"];
    eprintln!("multikueue: manager as its own worker -> Workload after 15 s: {st}");
    assert!(st.pointer("/clusterName").is_none(), "{st}");
    assert_eq!(st["admissionChecks"][0]["state"], "Pending", "{st}");
    let job = jobs.get("self-1").await.unwrap();
    assert_eq!(job.spec.unwrap().suspend, Some(true), "the Job started");
}
