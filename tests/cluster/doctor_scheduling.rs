//! `gpuctl doctor`'s scheduling findings against the real kube-apiserver (issue 16): one test per
//! finding kind GPU200–GPU213 that tests/cluster/doctor_cluster.rs does not cover, each built from real
//! objects and asserting the cause and the fix the doctor names.
//!
//! Real parts: the API server and etcd (its ResourceQuota and Priority admission refuse pods),
//! kube-controller-manager (the Job controller creates a Job's pods and writes the `FailedCreate`
//! event when admission refuses one), the real Kueue v0.19.2 controller (it creates the Workload of
//! each queued Job and writes its `QuotaReserved` condition: no Kueue text here is written by a
//! test), and Volcano's admission webhook (it checks a PodGroup's queue is `Open` on create). The
//! doctor reads them with the same paged LIST calls `gpuctl doctor` makes.
//!
//! Stand-ins, stated plainly (the harness has no scheduler, kubelet, GPU Operator or Volcano
//! scheduler and controllers):
//! - GPU Nodes carry the labels GPU Feature Discovery and the operator set, and `status.allocatable`
//!   as the device plugin registers it (tests/support/cluster.rs); a pool's taint is set on the
//!   Node as `gpuctl apply` or an administrator sets it.
//! - kube-scheduler: a test binds a pod it placed with the `pods/binding` subresource, or, for a pod
//!   it cannot place, writes exactly what kube-scheduler writes (`PodScheduled=False`, reason
//!   `Unschedulable`, and a `FailedScheduling` events.k8s.io/v1 Event from `default-scheduler`) with
//!   the scheduler's message format. The node counts in those messages count the test's own nodes;
//!   the real scheduler would also count the other tests' nodes of the shared cluster.
//! - The kubelet: a test writes a bound pod's status (Running and Ready) through the status
//!   subresource.
//! - Volcano: vc-controller-manager's queue controller opens a Queue (`status.state: Open`, through
//!   the Queue's status subresource); vc-scheduler's gang plugin writes the PodGroup's status
//!   (phase, counts, the `Unschedulable` condition with reason `NotEnoughResources` and its
//!   `N/M tasks in gang unschedulable: ...` message, texts from volcano v1.15.1
//!   pkg/scheduler/plugins/gang/gang.go and api/job_info.go `FitError`) with a plain update of the
//!   object, as vc-scheduler does (the PodGroup CRD has no status subresource), and its cache
//!   records the `Unschedulable` Warning event from component `volcano`.
//!
//! The cluster is shared with other tests, so each test's blueprint selects only its own nodes
//! (pools labelled with the test's prefix), tenants in its own namespace and cluster-scoped queues
//! named with its prefix, and the assertions look at the findings about the test's own objects.

use crate::support;

use std::time::{Duration, Instant};

use gpuctl_core::doctor::{Finding, Report};
use gpuctl_core::located::Severity;
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{Event, ResourceQuota};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster};
use support::doctor::*;

/// The finding `id` about `subject` (exactly one).
fn about<'a>(r: &'a Report, tc: &TestCluster, id: &str, subject: &str) -> &'a Finding {
    let f: Vec<&Finding> = mine(r, tc)
        .into_iter()
        .filter(|f| f.id == id && f.subjects.iter().any(|s| s == subject))
        .collect();
    assert_eq!(
        f.len(),
        1,
        "one {id} about {subject} among {:#?}",
        mine(r, tc)
    );
    f[0]
}

/// Whether some evidence of `f` quotes `text`.
fn quotes(f: &Finding, text: &str) -> bool {
    f.evidence.iter().any(|e| e.text.contains(text))
}

/// Sets `taints` on a node, as `gpuctl apply` sets a pool's taints.
async fn taint(tc: &TestCluster, node: &str, taints: Value) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = tc.cluster_scoped();
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": taints}})),
        )
        .await
        .expect("node taints");
}

/// A running pod holding `gpus` on `node` (bound as the scheduler binds, Running as the kubelet
/// reports).
async fn busy(tc: &TestCluster, name: &str, node: &str, pool: &str, gpus: u32) {
    let p = create_pod(
        tc,
        pod_manifest(
            name,
            &tc.namespace,
            json!({"nvidia.com/gpu": gpus.to_string()}),
            json!({"gpuctl.dev/pool": pool}),
            None,
        ),
    )
    .await;
    bind(tc, &tc.namespace, &p, node).await;
    kubelet(tc, &tc.namespace, &p, None).await;
}

/// Waits for the Job controller's `FailedCreate` event whose message contains `needle` (the API
/// server refused one of its pods) and returns that message.
async fn failed_create(tc: &TestCluster, needle: &str) -> String {
    let events: Api<Event> = tc.namespaced();
    let deadline = Instant::now() + WAIT;
    loop {
        let list = events.list(&ListParams::default()).await.expect("events");
        if let Some(m) = list.items.iter().find_map(|e| {
            (e.reason.as_deref() == Some("FailedCreate"))
                .then_some(e.message.as_deref())
                .flatten()
                .filter(|m| m.contains(needle))
        }) {
            return m.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no FailedCreate with {needle:?} from the Job controller within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn create_job(tc: &TestCluster, job: Value) {
    let jobs: Api<DynamicObject> = tc.dynamic("batch", "v1", "Job", "jobs", true);
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(job).unwrap(),
    )
    .await
    .expect("job");
}

/// A Job whose pods ask for `gpus` GPUs each, with `extra` merged into the pod spec.
fn gpu_job(name: &str, pods: u32, gpus: u32, extra: Value) -> Value {
    let mut spec = json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": IMAGE,
        "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]});
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
            "template": {"spec": spec}}})
}

// --- Kueue -------------------------------------------------------------------------------------

/// The flavor `<prefix>-train` (nodes of that pool), a ClusterQueue per `(name, spec)` and a
/// LocalQueue per `(name, clusterqueue)` in the test's namespace. Returns the flavor's name.
async fn kueue_setup(tc: &TestCluster, cqs: &[(&str, Value)], lqs: &[(&str, &str)]) -> String {
    let flavor = format!("{}-train", tc.prefix);
    tc.apply(
        &kueue_api(tc, "ResourceFlavor", "resourceflavors", false),
        &json!({"apiVersion": format!("kueue.x-k8s.io/{KUEUE}"), "kind": "ResourceFlavor",
            "metadata": {"name": flavor}, "spec": {"nodeLabels": {"gpuctl.dev/pool": flavor}}}),
    )
    .await
    .expect("flavor");
    let api = kueue_api(tc, "ClusterQueue", "clusterqueues", false);
    for (name, spec) in cqs {
        tc.apply(
            &api,
            &json!({"apiVersion": format!("kueue.x-k8s.io/{KUEUE}"), "kind": "ClusterQueue",
                "metadata": {"name": name}, "spec": spec}),
        )
        .await
        .expect("cluster queue");
    }
    let api = kueue_api(tc, "LocalQueue", "localqueues", true);
    for (lq, cq) in lqs {
        tc.apply(
            &api,
            &json!({"apiVersion": format!("kueue.x-k8s.io/{KUEUE}"), "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": tc.namespace}, "spec": {"clusterQueue": cq}}),
        )
        .await
        .expect("local queue");
    }
    flavor
}

/// A ClusterQueue spec without cohort: `gpus` of `nvidia.com/gpu` in `flavor`, for the namespaces
/// `selector` selects.
fn cq_spec(flavor: &str, gpus: u32, selector: Value) -> Value {
    json!({"namespaceSelector": selector,
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]})
}

/// The blueprint's Kueue section declaring `cq` with `gpus` GPUs of pool `<prefix>-train`.
fn kueue_blueprint(tc: &TestCluster, cq: &str, gpus: u32) -> String {
    format!(
        "  scheduling:\n    queueing: kueue\n    kueue:\n      version: v0.19.2\n      install: none\n      clusterQueues:\n        - name: {cq}\n          resources:\n            - pool: {p}-train\n              quota: {{ nvidia.com/gpu: {gpus} }}\n",
        p = tc.prefix
    )
}

/// The Workload Kueue made for `job`, once its `QuotaReserved` condition is False with a message
/// containing `needle`; returns the Workload and that message.
async fn not_reserved(tc: &TestCluster, job: &str, needle: &str) -> (Value, String) {
    let w = workload_condition(tc, job, |w| {
        condition(w, "QuotaReserved").is_some_and(|c| {
            c["status"] == "False" && c["message"].as_str().unwrap_or("").contains(needle)
        })
    })
    .await;
    let msg = condition(&w, "QuotaReserved").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    (w, msg)
}

fn workload_subject(tc: &TestCluster, w: &Value) -> String {
    format!(
        "workload/{}/{}",
        tc.namespace,
        w["metadata"]["name"].as_str().unwrap()
    )
}

// --- Pending pods (the scheduler's stand-in) ----------------------------------------------------

/// GPU200: both nodes of the pool are nearly full; a 4-GPU pod finds 2 free GPUs in all.
#[needs_test_cluster]
#[tokio::test]
async fn pending_pod_insufficient_gpus() {
    let Some(tc) = TestCluster::connect("doctor_sched_short").await else {
        return;
    };
    let pool = format!("{}-train", tc.prefix);
    let gpu = GpuNode::h100(8).driver(DRIVER, (13, 0));
    let n0 = gpu_node(&tc, "n0", "train", gpu.clone()).await;
    let n1 = gpu_node(&tc, "n1", "train", gpu).await;
    busy(&tc, "busy-0", &n0, &pool, 8).await;
    busy(&tc, "busy-1", &n1, &pool, 6).await;
    let p = create_pod(
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
    unschedulable(&tc, &p, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.").await;
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = about(
        &r,
        &tc,
        "GPU200",
        &format!("pod/{}/train-4gpu", tc.namespace),
    );
    assert_eq!(f.severity, Severity::Error);
    assert!(
        f.title.contains(&format!(
            "insufficient `nvidia.com/gpu` (needs 4, 2 free in pool {pool})"
        )),
        "{}",
        f.title
    );
    assert!(
        f.cause
            .contains("have 2 `nvidia.com/gpu` free in all and it needs 4"),
        "{}",
        f.cause
    );
    assert!(
        quotes(f, "2 Insufficient nvidia.com/gpu"),
        "the scheduler's words: {:#?}",
        f.evidence
    );
    assert!(
        f.fix.contains(&format!(
            "add nodes to pool {pool} (raise `nodes` in bp.yaml and `gpuctl apply bp.yaml`)"
        )),
        "{}",
        f.fix
    );
    assert!(
        mine(&r, &tc).iter().all(|f| f.id != "GPU220"),
        "not fragmentation: {:#?}",
        mine(&r, &tc)
    );
}

/// GPU201: the pool's nodes carry `nvidia.com/gpu=present:NoSchedule` and the pod tolerates nothing.
#[needs_test_cluster]
#[tokio::test]
async fn pending_pod_untolerated_pool_taint() {
    let Some(tc) = TestCluster::connect("doctor_sched_taint").await else {
        return;
    };
    let pool = format!("{}-train", tc.prefix);
    let node = gpu_node(&tc, "n0", "train", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    taint(
        &tc,
        &node,
        json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
    )
    .await;
    let mut m = pod_manifest(
        "train-0",
        &tc.namespace,
        json!({"nvidia.com/gpu": "8"}),
        json!({"gpuctl.dev/pool": pool}),
        None,
    );
    m["spec"]["tolerations"] = json!([]);
    let p = create_pod(&tc, m).await;
    unschedulable(&tc, &p, "0/1 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.").await;
    let taints =
        "      taints:\n        - { key: nvidia.com/gpu, value: present, effect: NoSchedule }\n";
    let bp = load(&blueprint_text(&tc, &[("train", taints)], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = about(&r, &tc, "GPU201", &format!("pod/{}/{p}", tc.namespace));
    assert!(
        f.title
            .ends_with(&format!("does not tolerate the taint of pool {pool}")),
        "{}",
        f.title
    );
    assert!(
        f.cause.contains("nvidia.com/gpu=present:NoSchedule"),
        "{}",
        f.cause
    );
    assert!(quotes(f, "had untolerated taint {nvidia.com/gpu: present}"));
    assert!(
        f.fix.contains(
            "add `tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]`"
        ),
        "{}",
        f.fix
    );
}

/// GPU202: the pod selects a pool label no node carries, while pool `train` has the GPUs.
#[needs_test_cluster]
#[tokio::test]
async fn pending_pod_selector_matches_no_pool_node() {
    let Some(tc) = TestCluster::connect("doctor_sched_sel").await else {
        return;
    };
    gpu_node(&tc, "n0", "train", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let wrong = format!("{}-h200", tc.prefix);
    let p = create_pod(
        &tc,
        pod_manifest(
            "train-0",
            &tc.namespace,
            json!({"nvidia.com/gpu": "8"}),
            json!({"gpuctl.dev/pool": wrong}),
            None,
        ),
    )
    .await;
    unschedulable(&tc, &p, "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.").await;
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = about(&r, &tc, "GPU202", &format!("pod/{}/{p}", tc.namespace));
    assert!(
        f.title
            .contains("matches no node that has `8 nvidia.com/gpu`"),
        "{}",
        f.title
    );
    assert!(
        f.cause.contains(&format!("`gpuctl.dev/pool={wrong}`"))
            && f.cause.contains(&format!("{}-train", tc.prefix)),
        "names the selector and the pool that has the GPUs: {}",
        f.cause
    );
    assert!(quotes(f, "didn't match Pod's node affinity/selector"));
    assert!(
        f.fix.contains("`kubectl get nodes -L gpuctl.dev/pool`"),
        "{}",
        f.fix
    );
}

/// GPU213: the node has 8 GPUs free, but the scheduler refused the pod for cpu.
#[needs_test_cluster]
#[tokio::test]
async fn pending_pod_with_gpu_room_refused_for_cpu() {
    let Some(tc) = TestCluster::connect("doctor_sched_other").await else {
        return;
    };
    let pool = format!("{}-train", tc.prefix);
    gpu_node(&tc, "n0", "train", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let mut m = pod_manifest(
        "train-0",
        &tc.namespace,
        json!({"nvidia.com/gpu": "1"}),
        json!({"gpuctl.dev/pool": pool}),
        None,
    );
    m["spec"]["containers"][0]["resources"]["requests"] = json!({"cpu": "4096"});
    let p = create_pod(&tc, m).await;
    unschedulable(&tc, &p, "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.").await;
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let f = about(&r, &tc, "GPU213", &format!("pod/{}/{p}", tc.namespace));
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.title
            .contains("although a node has room for `1 nvidia.com/gpu` now"),
        "{}",
        f.title
    );
    assert!(
        f.cause
            .contains("refused it for another reason (cpu, memory"),
        "{}",
        f.cause
    );
    assert!(
        quotes(f, "1 Insufficient cpu"),
        "the scheduler's own message: {:#?}",
        f.evidence
    );
    assert!(
        f.fix
            .contains(&format!("`kubectl describe pod -n {} {p}`", tc.namespace)),
        "{}",
        f.fix
    );
    for id in ["GPU200", "GPU201", "GPU202", "GPU220"] {
        assert!(mine(&r, &tc).iter().all(|f| f.id != id), "no {id}");
    }
}

// --- Refused by the API server ------------------------------------------------------------------

/// GPU205: a quota on `requests.cpu` and no LimitRange: the real quota admission refuses every pod
/// of a Job that sets only its GPU limit.
#[needs_test_cluster]
#[tokio::test]
async fn quota_needs_requests_no_default_gives() {
    let Some(tc) = TestCluster::connect("doctor_sched_lr").await else {
        return;
    };
    let quotas: Api<ResourceQuota> = tc.namespaced();
    let q: ResourceQuota = serde_json::from_value(json!({"metadata": {"name": "compute"},
        "spec": {"hard": {"requests.cpu": "64", "requests.nvidia.com/gpu": "16"}}}))
    .unwrap();
    quotas
        .create(&PostParams::default(), &q)
        .await
        .expect("quota");
    tc.sync_quota_status("compute").await.expect("quota status");
    create_job(&tc, gpu_job("train", 2, 1, json!({}))).await;
    let msg = failed_create(&tc, "must specify").await;
    assert!(
        msg.contains("failed quota: compute: must specify requests.cpu"),
        "{msg}"
    );
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let job = format!("job/{}/train", tc.namespace);
    let f = about(&r, &tc, "GPU205", &job);
    assert!(
        f.subjects.contains(&format!("namespace/{}", tc.namespace)),
        "{f:#?}"
    );
    assert!(
        f.title.contains("the quota needs `requests.cpu`"),
        "{}",
        f.title
    );
    assert!(
        f.cause
            .contains("the namespace has no LimitRange with defaults"),
        "{}",
        f.cause
    );
    assert!(quotes(f, "must specify requests.cpu"), "{:#?}", f.evidence);
    assert!(
        f.fix.contains(&format!(
            "set `defaults` of tenant `{}-team` in bp.yaml",
            tc.prefix
        )),
        "{}",
        f.fix
    );
    assert!(
        mine(&r, &tc).iter().all(|f| f.id != "GPU204"),
        "not an exhausted quota"
    );
}

/// GPU212: the tenant's PriorityClass is declared but not created: the Priority admission refuses
/// the Job's pods. A second declared class no pod uses yet is missing too.
#[needs_test_cluster]
#[tokio::test]
async fn missing_priority_class_refuses_pods() {
    let Some(tc) = TestCluster::connect("doctor_sched_pc").await else {
        return;
    };
    let pc = tc.name("batch-low");
    let unused = tc.name("urgent");
    create_job(
        &tc,
        gpu_job("train", 1, 1, json!({"priorityClassName": pc})),
    )
    .await;
    let msg = failed_create(&tc, "PriorityClass").await;
    assert!(
        msg.contains(&format!("no PriorityClass with name {pc} was found")),
        "{msg}"
    );
    let bp = load(&blueprint_text(
        &tc,
        &[("train", "")],
        &format!("      priorityClass: {pc}\n"),
        &format!(
            "  priorityClasses:\n    - {{ name: {pc}, value: 100 }}\n    - {{ name: {unused}, value: 1000 }}\n"
        ),
    ));
    let r = diagnose(&tc, &bp).await;
    let f = about(&r, &tc, "GPU212", &format!("priorityclass/{pc}"));
    assert!(
        f.subjects.contains(&format!("job/{}/train", tc.namespace))
            && f.subjects.contains(&format!("tenant/{}-team", tc.prefix)),
        "the refused Job and the tenant using it: {f:#?}"
    );
    assert_eq!(
        f.title,
        format!("PriorityClass `{pc}` does not exist in the cluster")
    );
    assert!(
        f.cause.contains("are refused by the API server"),
        "{}",
        f.cause
    );
    assert!(
        quotes(f, &format!("no PriorityClass with name {pc} was found")),
        "{:#?}",
        f.evidence
    );
    assert_eq!(
        f.fix,
        "`gpuctl apply bp.yaml` creates it (the blueprint declares it)"
    );
    // Declared, used by nothing yet, and not in the cluster: found from the blueprint alone.
    let f = about(&r, &tc, "GPU212", &format!("priorityclass/{unused}"));
    assert_eq!(f.subjects, vec![format!("priorityclass/{unused}")]);
    assert!(f.evidence.is_empty(), "{:#?}", f.evidence);
    assert_eq!(
        f.fix,
        "`gpuctl apply bp.yaml` creates it (the blueprint declares it)"
    );
}

// --- Kueue --------------------------------------------------------------------------------------

/// GPU206: a ClusterQueue of 4 GPUs without cohort: one Workload holds all 4, one waits for 2 of
/// them, and one asks for 6, more than the queue can ever give.
#[needs_test_cluster]
#[tokio::test]
async fn workload_over_cluster_queue_quota() {
    let Some(tc) = TestCluster::connect("doctor_sched_cq").await else {
        return;
    };
    let cq = tc.name("cq");
    let flavor = format!("{}-train", tc.prefix);
    kueue_setup(
        &tc,
        &[(&cq, cq_spec(&flavor, 4, json!({})))],
        &[("lq", &cq)],
    )
    .await;
    create_job(&tc, queued_job("job-hold", "lq", 4)).await;
    workload_condition(&tc, "job-hold", |w| {
        condition(w, "Admitted").is_some_and(|c| c["status"] == "True")
    })
    .await;
    create_job(&tc, queued_job("job-wait", "lq", 2)).await;
    create_job(&tc, queued_job("job-huge", "lq", 6)).await;
    let (wait, wait_msg) = not_reserved(&tc, "job-wait", "insufficient unused quota").await;
    assert!(
        wait_msg.contains(&format!(
            "insufficient unused quota for nvidia.com/gpu in flavor {flavor}, 2 more needed"
        )),
        "{wait_msg}"
    );
    let (huge, huge_msg) = not_reserved(&tc, "job-huge", "insufficient quota").await;
    let bp = load(&blueprint_text(
        &tc,
        &[("train", "")],
        &format!("      queue: {cq}\n"),
        &kueue_blueprint(&tc, &cq, 4),
    ));
    let r = diagnose(&tc, &bp).await;

    let f = about(&r, &tc, "GPU206", &workload_subject(&tc, &wait));
    assert!(
        f.subjects
            .contains(&format!("job/{}/job-wait", tc.namespace))
            && f.subjects.contains(&format!("clusterqueue/{cq}")),
        "{f:#?}"
    );
    assert!(
        f.title.ends_with(&format!(
            "ClusterQueue {cq} has no room for `nvidia.com/gpu`"
        )),
        "{}",
        f.title
    );
    assert!(
        f.cause.contains(&format!(
            "`{cq}`'s quota for `nvidia.com/gpu` is in use by admitted workloads (nominal quota 4)"
        )),
        "{}",
        f.cause
    );
    assert!(quotes(f, &wait_msg), "Kueue's words: {:#?}", f.evidence);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.source == format!("status.flavorsUsage of clusterqueue/{cq}")),
        "{:#?}",
        f.evidence
    );
    assert!(
        f.fix
            .contains(&format!("`kubectl get workloads -n {}`", tc.namespace))
            && f.fix.contains("raise its quota in bp.yaml"),
        "{}",
        f.fix
    );

    let f = about(&r, &tc, "GPU206", &workload_subject(&tc, &huge));
    assert!(
        f.cause.contains(&format!(
            "asks for more `nvidia.com/gpu` than ClusterQueue `{cq}` can ever give (nominal quota 4)"
        )),
        "{}: Kueue said {huge_msg}",
        f.cause
    );
    assert!(quotes(f, "maximum capacity (4)"), "{:#?}", f.evidence);
}

/// GPU208: the ClusterQueue selects namespaces by a label the tenant's namespace lacks.
#[needs_test_cluster]
#[tokio::test]
async fn workload_namespace_not_selected() {
    let Some(tc) = TestCluster::connect("doctor_sched_nssel").await else {
        return;
    };
    let cq = tc.name("cq");
    let flavor = format!("{}-train", tc.prefix);
    let sel = json!({"matchLabels": {"gpuctl.dev/tenant": format!("{}-team", tc.prefix)}});
    kueue_setup(&tc, &[(&cq, cq_spec(&flavor, 8, sel))], &[("lq", &cq)]).await;
    create_job(&tc, queued_job("train", "lq", 1)).await;
    let (w, msg) = not_reserved(&tc, "train", "namespace").await;
    let bp = load(&blueprint_text(
        &tc,
        &[("train", "")],
        &format!("      queue: {cq}\n"),
        &kueue_blueprint(&tc, &cq, 8),
    ));
    let r = diagnose(&tc, &bp).await;
    let f = about(&r, &tc, "GPU208", &workload_subject(&tc, &w));
    assert!(f.subjects.contains(&format!("clusterqueue/{cq}")), "{f:#?}");
    assert!(
        f.title.ends_with(&format!(
            "namespace {} is not selected by ClusterQueue {cq}",
            tc.namespace
        )),
        "{}",
        f.title
    );
    assert!(
        f.cause.contains("namespaceSelector does not match"),
        "{}",
        f.cause
    );
    assert!(
        quotes(f, &msg) && msg.contains("doesn't match ClusterQueue selector"),
        "Kueue's words ({msg}): {:#?}",
        f.evidence
    );
    assert!(
        f.fix.contains(&format!(
            "`kubectl label namespace {} KEY=VALUE`",
            tc.namespace
        )),
        "{}",
        f.fix
    );
}

/// GPU209: the Job asks for cpu too, which the ClusterQueue does not cover.
#[needs_test_cluster]
#[tokio::test]
async fn workload_resource_not_covered() {
    let Some(tc) = TestCluster::connect("doctor_sched_cover").await else {
        return;
    };
    let cq = tc.name("cq");
    let flavor = format!("{}-train", tc.prefix);
    kueue_setup(
        &tc,
        &[(&cq, cq_spec(&flavor, 8, json!({})))],
        &[("lq", &cq)],
    )
    .await;
    let mut job = queued_job("train", "lq", 1);
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("2");
    create_job(&tc, job).await;
    let (w, msg) = not_reserved(&tc, "train", "unavailable").await;
    let bp = load(&blueprint_text(
        &tc,
        &[("train", "")],
        &format!("      queue: {cq}\n"),
        &kueue_blueprint(&tc, &cq, 8),
    ));
    let r = diagnose(&tc, &bp).await;
    let f = about(&r, &tc, "GPU209", &workload_subject(&tc, &w));
    assert!(
        f.title
            .ends_with(&format!("ClusterQueue {cq} does not cover `cpu`")),
        "{}: Kueue said {msg}",
        f.title
    );
    assert!(
        quotes(f, "resource cpu unavailable in ClusterQueue"),
        "{:#?}",
        f.evidence
    );
    assert!(
        f.fix.contains(&format!(
            "add `cpu` to the quota of queue `{cq}` in bp.yaml"
        )),
        "{}",
        f.fix
    );
}

/// GPU210: one Job names a LocalQueue that does not exist; another's ClusterQueue is stopped
/// (`stopPolicy: Hold`; Kueue v0.19.2 then says the queue `is inactive`).
#[needs_test_cluster]
#[tokio::test]
async fn workload_inadmissible_queue_missing_or_stopped() {
    let Some(tc) = TestCluster::connect("doctor_sched_inadm").await else {
        return;
    };
    let cq = tc.name("cq");
    let flavor = format!("{}-train", tc.prefix);
    let mut spec = cq_spec(&flavor, 8, json!({}));
    spec["stopPolicy"] = json!("Hold");
    kueue_setup(&tc, &[(&cq, spec)], &[("lq", &cq)]).await;
    create_job(&tc, queued_job("orphan", "lq-missing", 1)).await;
    create_job(&tc, queued_job("held", "lq", 1)).await;
    let (orphan, orphan_msg) = not_reserved(&tc, "orphan", "lq-missing").await;
    let (held, held_msg) = not_reserved(&tc, "held", &cq).await;
    let bp = load(&blueprint_text(
        &tc,
        &[("train", "")],
        &format!("      queue: {cq}\n"),
        &kueue_blueprint(&tc, &cq, 8),
    ));
    let r = diagnose(&tc, &bp).await;

    let f = about(&r, &tc, "GPU210", &workload_subject(&tc, &orphan));
    assert!(
        f.title.contains(&orphan_msg),
        "the title quotes Kueue ({orphan_msg}): {}",
        f.title
    );
    assert!(
        f.cause.contains("its LocalQueue `lq-missing`"),
        "{}",
        f.cause
    );
    assert!(
        f.fix.contains(&format!(
            "`kubectl get localqueue -n {} lq-missing -o yaml`",
            tc.namespace
        )),
        "{}",
        f.fix
    );

    let f = about(&r, &tc, "GPU210", &workload_subject(&tc, &held));
    assert!(
        f.title.contains(&held_msg) && held_msg.contains(&cq),
        "the title quotes Kueue ({held_msg}): {}",
        f.title
    );
    assert!(
        f.cause.contains(&format!("ClusterQueue `{cq}`")),
        "{}",
        f.cause
    );
    assert!(f.fix.contains("`kubectl get clusterqueues`"), "{}", f.fix);
}

// --- Volcano ------------------------------------------------------------------------------------

/// GPU211: a gang of 4 pods of 4 GPUs on a pool of one 8-GPU node: vc-scheduler can place two,
/// so the PodGroup stays Inqueue with none running.
#[needs_test_cluster]
#[tokio::test]
async fn volcano_pod_group_stuck() {
    let Some(tc) = TestCluster::connect("doctor_sched_gang").await else {
        return;
    };
    let pool = format!("{}-train", tc.prefix);
    gpu_node(&tc, "n0", "train", GpuNode::h100(8).driver(DRIVER, (13, 0))).await;
    let queue = tc.name("q");
    let queues = tc.dynamic("scheduling.volcano.sh", "v1beta1", "Queue", "queues", false);
    queues
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue", "metadata": {"name": queue, "labels": tc.owner_labels()},
                "spec": {"weight": 1, "reclaimable": true, "capability": {"nvidia.com/gpu": "16"}}}))
            .unwrap(),
        )
        .await
        .expect("queue");
    // vc-controller-manager's queue controller opens a new Queue.
    queues
        .patch_status(
            &queue,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"state": "Open"}})),
        )
        .await
        .expect("queue state");
    // Volcano's webhook admits a PodGroup only to an Open queue (from its informer: retry a moment).
    let groups = tc.dynamic(
        "scheduling.volcano.sh",
        "v1beta1",
        "PodGroup",
        "podgroups",
        true,
    );
    let pg: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": tc.namespace},
        "spec": {"minMember": 4, "queue": queue, "minResources": {"nvidia.com/gpu": "16"}}}))
    .unwrap();
    let deadline = Instant::now() + WAIT;
    let created = loop {
        match groups.create(&PostParams::default(), &pg).await {
            Ok(g) => break g,
            Err(kube::Error::Api(s)) if s.message.contains("queue") => {
                assert!(Instant::now() < deadline, "webhook refuses: {}", s.message);
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("podgroup: {e}"),
        }
    };
    for i in 0..4 {
        let mut m = pod_manifest(
            &format!("train-{i}"),
            &tc.namespace,
            json!({"nvidia.com/gpu": "4"}),
            json!({"gpuctl.dev/pool": pool}),
            None,
        );
        m["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "train"});
        m["spec"]["schedulerName"] = json!("volcano");
        create_pod(&tc, m).await;
    }
    // vc-scheduler's gang plugin: the condition, written with the whole object.
    let message = "2/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; Pending: 2 Schedulable, 2 Unschedulable. Origin reason is train-3: 0/1 nodes are unavailable: 1 Insufficient nvidia.com/gpu.";
    let mut v = serde_json::to_value(&created).unwrap();
    v["status"] = json!({"phase": "Inqueue", "running": 0, "succeeded": 0, "failed": 0,
        "conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
            "message": message, "transitionID": "5a1c0d2e-4f6b-4c1a-9e7d-3b2a1f0e9d8c",
            "lastTransitionTime": now()}]});
    groups
        .replace(
            "train",
            &PostParams::default(),
            &serde_json::from_value(v).unwrap(),
        )
        .await
        .expect("podgroup status");
    // vc-scheduler's cache records the same text as a Warning event on the PodGroup.
    let events: Api<Event> = tc.namespaced();
    let t = now();
    events
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "train.volcano", "namespace": tc.namespace},
                "involvedObject": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "namespace": tc.namespace, "name": "train",
                    "uid": created.metadata.uid},
                "reason": "Unschedulable", "type": "Warning",
                "message": "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; Pending: 2 Schedulable, 2 Unschedulable. Origin reason is train-3: 0/1 nodes are unavailable: 1 Insufficient nvidia.com/gpu.",
                "source": {"component": "volcano"}, "firstTimestamp": t, "lastTimestamp": t, "count": 1}))
            .unwrap(),
        )
        .await
        .expect("event");
    let bp = load(&blueprint_text(&tc, &[("train", "")], "", ""));
    let r = diagnose(&tc, &bp).await;
    let me = format!("podgroup/{}/train", tc.namespace);
    let f = about(&r, &tc, "GPU211", &me);
    assert!(f.subjects.contains(&format!("queue/{queue}")), "{f:#?}");
    assert_eq!(
        f.title,
        format!("{me} is stuck in Inqueue: 0 of 4 members running")
    );
    assert!(
        f.cause.contains(&format!(
            "cannot place all 4 members of the gang at once (queue `{queue}`"
        )),
        "{}",
        f.cause
    );
    assert!(quotes(f, message), "the condition: {:#?}", f.evidence);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.source.starts_with("event Unschedulable on")),
        "the scheduler's event: {:#?}",
        f.evidence
    );
    assert!(
        f.fix
            .contains(&format!("`kubectl get queue {queue} -o yaml`"))
            && f.fix.contains(&format!(
                "`kubectl describe podgroup -n {} train`",
                tc.namespace
            )),
        "{}",
        f.fix
    );
}
