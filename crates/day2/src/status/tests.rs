//! `gpuctl status` figures on hand-built clusters.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use gpuctl_model::blueprint::model::Blueprint;

const BP: &str = r#"
apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata: { name: t }
spec:
  kubernetes: { version: "1.34.2" }
  gpuOperator:
    version: v26.7.0
    namespace: gpu-operator
    driver: { version: "580.173.02" }
  nodePools:
    - name: train
      role: training
      selector: { gpuctl.dev/pool: train }
      nodes: 5
      gpu: { model: H100-SXM5-80GB, count: 8 }
    - name: infer
      role: inference
      selector: { gpuctl.dev/pool: infer }
      nodes: 2
      gpu: { model: H100-SXM5-80GB, count: 2 }
      partitioning:
        mode: mig
        mig: { strategy: mixed, layout: { "3g.40gb": 2 } }
    - name: share
      role: inference
      selector: { gpuctl.dev/pool: share }
      nodes: 1
      gpu: { model: L4, count: 2 }
      partitioning: { mode: time-slicing, timeSlicing: { replicas: 4 } }
  scheduling:
    queueing: kueue
    kueue:
      version: v0.19.2
      cohorts: [{ name: all }]
      clusterQueues:
        - name: cq-a
          cohort: all
          resources: [{ pool: train, quota: { nvidia.com/gpu: 16 } }]
        - name: cq-b
          cohort: all
          resources: [{ pool: train, quota: { nvidia.com/gpu: 8 } }]
        - name: cq-declared-only
          resources: [{ pool: infer, quota: { nvidia.com/mig-3g.40gb: 4 } }]
  tenants:
    - name: team-a
      namespaces: [a1, a2]
      queue: cq-a
      quota: { nvidia.com/gpu: 16 }
    - name: team-b
      namespaces: [b1]
      quota: { nvidia.com/gpu: 8 }
"#;

fn bp() -> Blueprint {
    gpuctl_model::blueprint::load_str("t.yaml", BP)
        .expect("the test blueprint loads")
        .blueprint
}

fn node(
    name: &str,
    pool: &str,
    ready: bool,
    cordoned: bool,
    cap: &[(&str, u64)],
    alloc: &[(&str, u64)],
) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        labels: BTreeMap::from([("gpuctl.dev/pool".to_string(), pool.to_string())]),
        ready,
        unschedulable: cordoned,
        capacity: cap.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        allocatable: alloc.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

fn pod(ns: &str, name: &str, node: &str, phase: &str, gpus: &[(&str, u64)]) -> PodFacts {
    PodFacts {
        namespace: ns.into(),
        name: name.into(),
        node: node.into(),
        phase: phase.into(),
        gpus: gpus.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

const G: &str = "nvidia.com/gpu";

fn train_cluster() -> StatusInput {
    StatusInput {
        nodes: vec![
            node("t1", "train", true, false, &[(G, 8)], &[(G, 8)]),
            node("t2", "train", true, true, &[(G, 8)], &[(G, 8)]),
            node("t3", "train", false, false, &[(G, 8)], &[(G, 8)]),
            // One GPU withdrawn by the device plugin.
            node("t4", "train", true, false, &[(G, 8)], &[(G, 7)]),
            node("stray", "nope", true, false, &[(G, 4)], &[(G, 4)]),
            node("cpu-only", "nope", true, false, &[], &[]),
        ],
        pods: vec![
            pod("a1", "job-0", "t1", "Running", &[(G, 4)]),
            pod("b1", "job-1", "t1", "Running", &[(G, 2)]),
            pod("a1", "done", "t1", "Succeeded", &[(G, 8)]),
            pod("a2", "job-2", "t2", "Running", &[(G, 2)]),
            pod("a1", "job-3", "t3", "Running", &[(G, 4)]),
            pod("b1", "wait", "", "Pending", &[(G, 8)]),
        ],
        ..StatusInput::default()
    }
}

fn res<'a>(r: &'a StatusReport, pool: &str, resource: &str) -> &'a ResourceStatus {
    r.pools
        .iter()
        .find(|p| p.name == pool)
        .and_then(|p| p.resources.iter().find(|x| x.resource == resource))
        .unwrap_or_else(|| panic!("{pool} has no {resource}"))
}

#[test]
fn every_unit_of_capacity_is_allocated_free_cordoned_or_unhealthy() {
    let r = compute(&bp(), &train_cluster(), "test");
    let g = res(&r, "train", G);
    assert_eq!(g.capacity, 32);
    // t1: 6 of 8; t2 cordoned: 2 of 8; t3 NotReady: not counted; t4: 0 of 7.
    assert_eq!(g.allocated, 8);
    assert_eq!(g.allocatable, 8 + 8 + 7);
    assert_eq!(g.free, 2 + 7);
    assert_eq!(g.cordoned, 6);
    assert_eq!(g.unhealthy, 8 + 1);
    assert_eq!(g.capacity, g.allocated + g.free + g.cordoned + g.unhealthy);
    assert_eq!(g.expected, 40);
    let pool = &r.pools[0];
    assert_eq!(
        (
            pool.nodes.total,
            pool.nodes.ready,
            pool.nodes.cordoned,
            pool.nodes.not_ready
        ),
        (4, 3, 1, 1)
    );
    assert_eq!(pool.nodes.expected, 5);
    assert_eq!(pool.gpus, 32);
    assert_eq!(r.unpooled.nodes, 1);
    assert_eq!(r.unpooled.names, ["stray"]);
    assert_eq!(r.pending_gpu_pods, 1);
    // Holders are listed per node with their tenant; the finished pod holds nothing.
    let t1 = &pool.node_list[0].resources[G];
    let who: Vec<(&str, Option<&str>, u64)> = t1
        .holders
        .iter()
        .map(|h| (h.pod.as_str(), h.tenant.as_deref(), h.amount))
        .collect();
    assert_eq!(
        who,
        [("job-0", Some("team-a"), 4), ("job-1", Some("team-b"), 2)]
    );
}

#[test]
fn fragmentation_compares_the_largest_placeable_request_with_the_packed_one() {
    // Eight free GPUs as two on each of four 8-GPU nodes: a 4-GPU job cannot start.
    assert_eq!(fragmentation(&[2, 2, 2, 2], 8), (2, 8, 0.75));
    // Two whole free nodes are not fragmented.
    assert_eq!(fragmentation(&[8, 8, 0], 8), (8, 8, 0.0));
    // Four free spread as one each: only 1-GPU jobs fit where a 4-GPU one could.
    assert_eq!(fragmentation(&[1, 1, 1, 1], 8), (1, 4, 0.75));
    // Nothing free: 0, not a division by zero.
    assert_eq!(fragmentation(&[0, 0], 8), (0, 0, 0.0));
    assert_eq!(fragmentation(&[], 0), (0, 0, 0.0));
    // 3 + 1 free on 4-GPU nodes: the packed request is one node's 4.
    assert_eq!(fragmentation(&[3, 1], 4), (3, 4, 0.25));

    let r = compute(&bp(), &train_cluster(), "test");
    let g = res(&r, "train", G);
    // Free on schedulable nodes: t1 2, t4 7 -> largest 7, packed min(9, 8) = 8.
    assert_eq!((g.largest_placeable, g.largest_packed), (7, 8));
    assert_eq!(g.fragmentation, 0.125);
    assert_eq!(r.pools[0].fragmentation, 0.125);
}

#[test]
fn mig_profiles_and_shared_replicas_are_counted_in_their_own_units() {
    let mig = "nvidia.com/mig-3g.40gb";
    let input = StatusInput {
        nodes: vec![
            node("i1", "infer", true, false, &[(mig, 4)], &[(mig, 4)]),
            node("i2", "infer", true, false, &[(mig, 4)], &[(mig, 4)]),
            node("s1", "share", true, false, &[(G, 8)], &[(G, 8)]),
        ],
        pods: vec![
            pod("a1", "srv-0", "i1", "Running", &[(mig, 3)]),
            pod("a1", "srv-1", "i2", "Running", &[(mig, 3)]),
            pod("b1", "nb", "s1", "Running", &[(G, 5)]),
        ],
        ..StatusInput::default()
    };
    let r = compute(&bp(), &input, "test");
    let m = res(&r, "infer", mig);
    assert_eq!(m.kind, UnitKind::Mig);
    assert_eq!(m.profile.as_deref(), Some("3g.40gb"));
    assert_eq!((m.expected, m.capacity, m.allocated, m.free), (8, 8, 6, 2));
    // One slice free on each node: a 2-slice pod cannot start.
    assert_eq!(
        (m.largest_placeable, m.largest_packed, m.fragmentation),
        (1, 2, 0.5)
    );
    assert_eq!(r.pools[1].partitioning, "mig");
    assert_eq!(r.pools[1].mig_layout.len(), 2);
    let s = res(&r, "share", G);
    assert_eq!(s.kind, UnitKind::Shared);
    assert_eq!((s.expected, s.allocated, s.free), (8, 5, 3));
    // Resources the blueprint expects but no node offers are shown with capacity 0.
    let r = compute(&bp(), &StatusInput::default(), "test");
    let m = res(&r, "infer", mig);
    assert_eq!((m.expected, m.capacity), (8, 0));
}

#[test]
fn a_pod_asking_more_than_a_node_now_offers_is_capped_at_allocatable() {
    let input = StatusInput {
        nodes: vec![node("t1", "train", true, false, &[(G, 8)], &[(G, 6)])],
        pods: vec![pod("a1", "big", "t1", "Running", &[(G, 8)])],
        ..StatusInput::default()
    };
    let r = compute(&bp(), &input, "test");
    let g = res(&r, "train", G);
    assert_eq!((g.allocated, g.free, g.unhealthy), (6, 0, 2));
    assert_eq!(g.capacity, g.allocated + g.free + g.cordoned + g.unhealthy);
}

#[test]
fn tenant_quotas_show_used_against_hard() {
    let mut input = train_cluster();
    input.quotas = vec![
        QuotaFacts::from_json(&json!({
            "metadata": { "namespace": "a1", "name": "team-a-quota" },
            "spec": { "hard": { "requests.nvidia.com/gpu": "16" } },
            "status": {
                "hard": { "requests.nvidia.com/gpu": "16", "pods": "10" },
                "used": { "requests.nvidia.com/gpu": "12", "pods": "3" }
            }
        })),
        // Not counted yet: status.hard from spec, used 0.
        QuotaFacts::from_json(&json!({
            "metadata": { "namespace": "a2", "name": "team-a-quota" },
            "spec": { "hard": { "requests.nvidia.com/gpu": "16" } }
        })),
        QuotaFacts::from_json(&json!({
            "metadata": { "namespace": "elsewhere", "name": "q" },
            "status": { "hard": { "pods": "1" }, "used": { "pods": "1" } }
        })),
    ];
    let r = compute(&bp(), &input, "test");
    let a = &r.tenants[0];
    assert_eq!(a.name, "team-a");
    assert_eq!(a.quotas.len(), 2);
    let q = &a.quotas[0];
    assert!(q.counted);
    let gpu = q
        .resources
        .iter()
        .find(|u| u.resource == "requests.nvidia.com/gpu")
        .unwrap();
    assert_eq!(
        (gpu.used.as_str(), gpu.hard.as_str(), gpu.ratio),
        ("12", "16", Some(0.75))
    );
    assert!(!a.quotas[1].counted);
    assert_eq!(a.quotas[1].resources[0].used, "0");
    assert!(a.namespaces_without_quota.is_empty());
    // team-a pods hold 4 + 2 + 4 GPUs (the finished one none; the one on a NotReady node still holds).
    assert_eq!(a.allocated[G], 10);
    let b = &r.tenants[1];
    assert_eq!(b.namespaces_without_quota, ["b1"]);
    assert_eq!(b.allocated[G], 2);
}

fn cq(
    name: &str,
    nominal: u64,
    used: u64,
    borrowed: u64,
    lending: Option<u64>,
) -> serde_json::Value {
    let mut res = json!({ "name": G, "nominalQuota": nominal });
    if let Some(l) = lending {
        res["lendingLimit"] = json!(l.to_string());
    }
    json!({
        "metadata": { "name": name },
        "spec": {
            "cohortName": "all",
            "resourceGroups": [{ "coveredResources": [G], "flavors": [{ "name": "train", "resources": [res] }] }]
        },
        "status": {
            "admittedWorkloads": 2, "reservingWorkloads": 2, "pendingWorkloads": 1,
            "conditions": [{ "type": "Active", "status": "True" }],
            "flavorsReservation": [{ "name": "train", "resources": [{ "name": G, "total": used.to_string(), "borrowed": borrowed.to_string() }] }]
        }
    })
}

#[test]
fn cluster_queues_report_use_borrowing_and_what_each_lends() {
    // cq-a borrows 4 beyond its 16; cq-b uses 2 of 8, lends at most 3; cq-c (not in the
    // blueprint) uses nothing of 4.
    let input = StatusInput {
        cluster_queues: Some(vec![
            cq("cq-a", 16, 20, 4, None),
            cq("cq-b", 8, 2, 0, Some(3)),
            cq("cq-c", 4, 0, 0, None),
        ]),
        ..StatusInput::default()
    };
    let r = compute(&bp(), &input, "test");
    let qs = r.cluster_queues.as_ref().unwrap();
    let names: Vec<&str> = qs.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["cq-a", "cq-b", "cq-c", "cq-declared-only"]);
    let a = &qs[0];
    assert!(a.in_blueprint && a.live && a.active);
    assert_eq!((a.admitted, a.reserving, a.pending), (2, 2, 1));
    let f = &a.flavors[0];
    assert_eq!(
        (
            f.flavor.as_str(),
            f.nominal.as_str(),
            f.used.as_str(),
            f.borrowed.as_str()
        ),
        ("train", "16", "20", "4")
    );
    assert_eq!(f.ratio, Some(1.25));
    assert_eq!(f.lent, "0");
    // 4 borrowed, lendable 3 (cq-b, limited) and 4 (cq-c): 12/7 and 16/7 -> 2 and 2.
    let lent: Vec<&str> = qs[1..3]
        .iter()
        .map(|q| q.flavors[0].lent.as_str())
        .collect();
    assert_eq!(lent, ["2", "2"]);
    assert_eq!(qs[1].flavors[0].lending_limit.as_deref(), Some("3"));
    assert!(!qs[2].in_blueprint);
    let d = &qs[3];
    assert!(d.in_blueprint && !d.live && !d.active);
    assert_eq!(d.flavors[0].nominal, "4");
    assert_eq!(d.flavors[0].used, "0");
    // Not read: None, not an empty list.
    assert!(
        compute(&bp(), &StatusInput::default(), "t")
            .cluster_queues
            .is_none()
    );
}

#[test]
fn volcano_queues_report_allocated_against_deserved() {
    let input = StatusInput {
        volcano_queues: Some(vec![json!({
            "metadata": { "name": "research" },
            "spec": { "parent": "root", "deserved": { G: "8" }, "capability": { G: 16, "cpu": "64" } },
            "status": { "state": "Open", "allocated": { G: "6", "cpu": "12" }, "pending": 1, "running": 3, "inqueue": 2 }
        })]),
        ..StatusInput::default()
    };
    let r = compute(&bp(), &input, "test");
    let q = &r.volcano_queues.as_ref().unwrap()[0];
    assert_eq!(
        (q.state.as_deref(), q.pending, q.inqueue, q.running),
        (Some("Open"), 1, 2, 3)
    );
    assert!(q.live && !q.in_blueprint);
    let cpu = &q.resources[0];
    assert_eq!(
        (cpu.resource.as_str(), cpu.allocated.as_str(), cpu.ratio),
        ("cpu", "12", Some(0.1875))
    );
    let g = &q.resources[1];
    assert_eq!(
        (
            g.allocated.as_str(),
            g.deserved.as_deref(),
            g.capability.as_deref(),
            g.ratio
        ),
        ("6", Some("8"), Some("16"), Some(0.75))
    );
}

#[test]
fn kubernetes_json_is_read_as_the_api_server_writes_it() {
    let n = NodeFacts::from_json(&json!({
        "metadata": { "name": "n", "labels": { "a": "b" } },
        "spec": { "unschedulable": true },
        "status": {
            "conditions": [{ "type": "MemoryPressure", "status": "False" }, { "type": "Ready", "status": "True" }],
            "capacity": { "cpu": "8", G: "8", "nvidia.com/mig-1g.10gb": "7", "example.com/foo": "1" },
            "allocatable": { G: "7", "nvidia.com/mig-1g.10gb": "bogus" }
        }
    }));
    assert!(n.ready && n.unschedulable);
    assert_eq!(n.capacity.len(), 2, "only GPU resources: {:?}", n.capacity);
    assert_eq!(n.allocatable, BTreeMap::from([(G.to_string(), 7)]));
    let p = PodFacts::from_json(&json!({
        "metadata": { "namespace": "x", "name": "p" },
        "spec": {
            "nodeName": "n",
            "initContainers": [{ "resources": { "limits": { G: "6" } } }],
            "containers": [
                { "resources": { "limits": { G: "2" } } },
                { "resources": { "requests": { G: "3" }, "limits": { G: "3" } } }
            ]
        },
        "status": { "phase": "Running" }
    }))
    .unwrap();
    assert_eq!(p.gpus[G], 6);
    assert!(p.holds_devices());
    assert!(PodFacts::from_json(&json!({ "spec": { "containers": [{}] } })).is_none());
    // Hostile shapes do not panic.
    let _ = NodeFacts::from_json(&json!([1, 2]));
    let _ = PodFacts::from_json(&json!({ "spec": { "containers": "x" } }));
}

#[test]
fn the_day_two_example_shows_its_spread_out_gpus_and_its_silent_inference_node() {
    let bp = gpuctl_model::blueprint::load_str(
        "dgx.yaml",
        include_str!("../../../../blueprints/dgx-h100-training.yaml"),
    )
    .expect("the example loads")
    .blueprint;
    let d = crate::testgen::day2::diagnostics(crate::testgen::day2::Size::EXAMPLE);
    let r = compute(&bp, &StatusInput::from_diagnostics(&d), "example");
    // Eight free GPUs, two on each of four nodes: a 4-GPU pod waits while they idle.
    let g = res(&r, "h100-train", G);
    assert_eq!((g.capacity, g.allocated, g.free), (128, 120, 8));
    assert_eq!(
        (g.largest_placeable, g.largest_packed, g.fragmentation),
        (2, 8, 0.75)
    );
    // The device plugin crash-loops on one inference node: it advertises no slices at all.
    let m = res(&r, "h100-infer", "nvidia.com/mig-3g.40gb");
    assert_eq!(
        (m.expected, m.capacity, m.allocated, m.free),
        (64, 48, 36, 12)
    );
    assert_eq!(r.pending_gpu_pods, 2);
    // Kueue's ClusterQueues come from the reading; rdma/* resources are not GPU units.
    assert!(r.cluster_queues.is_some());
    assert!(
        r.pools[0]
            .resources
            .iter()
            .all(|x| x.resource.starts_with("nvidia.com/"))
    );
}

/// `gpuctl status` lists only the kinds of `STATUS_READS`: a reading that holds nothing else gives
/// the same report as a whole one (a check of status that starts reading another kind fails here
/// until the kind is added to the table).
#[test]
fn status_needs_only_the_kinds_it_lists() {
    use crate::diagnostics::{DOCTOR_READS, DiagKind, Diagnostics, STATUS_READS};
    let bp = gpuctl_model::blueprint::load_str(
        "dgx.yaml",
        include_str!("../../../../blueprints/dgx-h100-training.yaml"),
    )
    .expect("the example loads")
    .blueprint;
    let whole = crate::testgen::day2::diagnostics(crate::testgen::day2::Size::EXAMPLE);
    let mut only = Diagnostics::new(&whole.operator_namespace, whole.read_at.clone());
    let json = serde_json::to_value(&whole).expect("serialises");
    for kind in STATUS_READS {
        let key = match kind {
            DiagKind::Node => "nodes",
            DiagKind::Pod => "pods",
            DiagKind::ResourceQuota => "resource_quotas",
            DiagKind::ClusterQueue => "cluster_queues",
            DiagKind::VolcanoQueue => "volcano_queues",
            DiagKind::ResourceClaim => "resource_claims",
            DiagKind::ResourceSlice => "resource_slices",
            DiagKind::NodeClaim => "node_claims",
            other => panic!("add {other:?} here"),
        };
        only.ingest(*kind, json[key].as_array().cloned().unwrap_or_default());
    }
    only.unread = whole.unread.clone();
    only.finish();
    assert!(STATUS_READS.iter().all(|k| DOCTOR_READS.contains(k)));
    assert!(only.events.is_empty() && only.workloads.is_empty());
    assert_eq!(
        compute(&bp, &StatusInput::from_diagnostics(&only), "example"),
        compute(&bp, &StatusInput::from_diagnostics(&whole), "example"),
    );
}

/// DRA: the devices NVIDIA's driver publishes count as the node's GPUs and MIG devices, under the
/// device plugin's names; an allocated claim's devices count for the first pod it is reserved
/// for; another driver's devices, unallocated claims and devices no slice publishes count nothing;
/// a node whose device plugin already advertises the resource keeps its own numbers. The reading
/// keeps no claim spec (opaque driver configuration may hold anything).
#[test]
fn dra_devices_and_claims_count_as_the_device_plugins_would() {
    use crate::diagnostics::{DiagKind, Diagnostics};
    let mut d = Diagnostics::new("gpu-operator", None);
    d.ingest(
        DiagKind::Node,
        vec![
            json!({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8"}}}),
            json!({"metadata": {"name": "n2"}, "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}}),
        ],
    );
    let pod = |name: &str| {
        json!({"metadata": {"namespace": "t", "name": name},
            "spec": {"nodeName": "n1", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100"}],
                "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]},
            "status": {"phase": "Running"}})
    };
    d.ingest(DiagKind::Pod, vec![pod("a"), pod("b")]);
    let dev = |name: &str, kind: &str, profile: Option<&str>| {
        let mut attrs =
            json!({"type": {"string": kind}, "productName": {"string": "NVIDIA H100 80GB HBM3"}});
        if let Some(p) = profile {
            attrs["profile"] = json!({"string": p});
        }
        json!({"name": name, "attributes": attrs, "capacity": {"memory": {"value": "80Gi"}}})
    };
    let slice = |node: &str, driver: &str, devices: Vec<Value>| {
        json!({"metadata": {"name": format!("{node}-{driver}")},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
    };
    d.ingest(
        DiagKind::ResourceSlice,
        vec![
            slice(
                "n1",
                "gpu.nvidia.com",
                vec![
                    dev("gpu-0", "gpu", None),
                    dev("gpu-1", "gpu", None),
                    dev("gpu-2-mig-19-0-1", "mig", Some("1g.10gb")),
                ],
            ),
            slice("n1", "example.com", vec![dev("x-0", "gpu", None)]),
            slice("n2", "gpu.nvidia.com", vec![dev("gpu-0", "gpu", None)]),
        ],
    );
    let claim = |name: &str, pod: Option<&str>, devices: &[&str]| {
        let results: Vec<Value> = devices
            .iter()
            .map(|dv| json!({"driver": "gpu.nvidia.com", "pool": "n1", "device": dv, "request": "gpu"}))
            .collect();
        let reserved: Vec<Value> = pod
            .iter()
            .map(|p| json!({"resource": "pods", "name": p, "uid": "u"}))
            .collect();
        json!({"metadata": {"namespace": "t", "name": name},
            "spec": {"devices": {"config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"token": "s3cret"}}}]}},
            "status": {"allocation": {"devices": {"results": results}}, "reservedFor": reserved}})
    };
    d.ingest(
        DiagKind::ResourceClaim,
        vec![
            claim("a-gpu", Some("a"), &["gpu-0", "gpu-1"]),
            claim("b-gpu", Some("b"), &["gpu-2-mig-19-0-1", "gpu-9"]),
            claim("unreserved", None, &["gpu-0"]),
            json!({"metadata": {"namespace": "t", "name": "pending"}, "spec": {}}),
        ],
    );
    d.finish();
    assert_eq!(
        d.resource_claims.len(),
        3,
        "the unallocated claim is not kept"
    );
    assert!(!serde_json::to_string(&d).unwrap().contains("s3cret"));
    let input = StatusInput::from_diagnostics(&d);
    let n1 = input.nodes.iter().find(|n| n.name == "n1").unwrap();
    assert_eq!(
        n1.capacity,
        BTreeMap::from([
            ("nvidia.com/gpu".to_string(), 2),
            ("nvidia.com/mig-1g.10gb".to_string(), 1)
        ])
    );
    assert_eq!(n1.allocatable, n1.capacity);
    let n2 = input.nodes.iter().find(|n| n.name == "n2").unwrap();
    assert_eq!(
        n2.capacity["nvidia.com/gpu"], 8,
        "the device plugin's numbers stand"
    );
    let gpus = |name: &str| {
        input
            .pods
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.gpus.clone())
    };
    assert_eq!(
        gpus("a"),
        Some(BTreeMap::from([("nvidia.com/gpu".to_string(), 2)]))
    );
    assert_eq!(
        gpus("b"),
        Some(BTreeMap::from([("nvidia.com/mig-1g.10gb".to_string(), 1)]))
    );
}

/// Kubernetes 1.36: a pod that only asks `nvidia.com/gpu: 2` on a node served by DRA gets its GPUs
/// through a claim the scheduler makes (`status.extendedResourceClaimStatus`), reserved for the
/// pod. The pod counts 2 by its request, not 2 more for that claim; a template claim reserved for
/// another pod still counts for it.
#[test]
fn a_pods_extended_resource_claim_is_not_counted_twice() {
    use crate::diagnostics::{DiagKind, Diagnostics};
    let mut d = Diagnostics::new("gpu-operator", None);
    d.ingest(
        DiagKind::Node,
        vec![json!({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8"}}})],
    );
    d.ingest(
        DiagKind::Pod,
        vec![
            json!({"metadata": {"namespace": "t", "name": "plain"},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {
                    "requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]},
                "status": {"phase": "Running", "extendedResourceClaimStatus": {
                    "resourceClaimName": "plain-extended-resources-x7k2p",
                    "requestMappings": [{"containerName": "c", "resourceName": "nvidia.com/gpu", "requestName": "container-0-request-0"}]}}}),
            json!({"metadata": {"namespace": "t", "name": "templated"},
                "spec": {"nodeName": "n1", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100"}],
                    "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]},
                "status": {"phase": "Running"}}),
        ],
    );
    let gpus: Vec<Value> = (0..4)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"}}}))
        .collect();
    d.ingest(
        DiagKind::ResourceSlice,
        vec![json!({"metadata": {"name": "n1-gpu"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}, "devices": gpus}})],
    );
    let claim = |name: &str, pod: &str, devices: &[&str]| {
        json!({"metadata": {"namespace": "t", "name": name},
            "status": {"allocation": {"devices": {"results": devices.iter().map(|dv| json!(
                {"driver": "gpu.nvidia.com", "pool": "n1", "device": dv, "request": "r"})).collect::<Vec<_>>()}},
                "reservedFor": [{"resource": "pods", "name": pod, "uid": "u"}]}})
    };
    d.ingest(
        DiagKind::ResourceClaim,
        vec![
            claim(
                "plain-extended-resources-x7k2p",
                "plain",
                &["gpu-0", "gpu-1"],
            ),
            claim("templated-gpu-abcde", "templated", &["gpu-2"]),
        ],
    );
    d.finish();
    let input = StatusInput::from_diagnostics(&d);
    let gpus = |name: &str| {
        input
            .pods
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.gpus.clone())
    };
    assert_eq!(
        gpus("plain"),
        Some(BTreeMap::from([("nvidia.com/gpu".to_string(), 2)]))
    );
    assert_eq!(
        gpus("templated"),
        Some(BTreeMap::from([("nvidia.com/gpu".to_string(), 1)]))
    );
}

/// A Karpenter pool's nodes against `minNodes`/`maxNodes` and its NodeClaims by stage; a static
/// pool has no provisioner status; without NodeClaims read there are no counts.
#[test]
fn provisioned_pools_show_nodes_against_min_max_and_their_node_claims() {
    use super::provisioner::{Bound, NodeClaimCounts};
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../blueprints/eks-karpenter.yaml"
    ))
    .unwrap();
    let bp = gpuctl_model::blueprint::load_bytes("eks.yaml", text.into_bytes())
        .unwrap()
        .blueprint;
    let claim = |name: &str, pool: &str, launched: &str| {
        json!({"metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
            "status": {"conditions": [{"type": "Launched", "status": launched}]}})
    };
    let mut input = StatusInput {
        nodes: (0..4)
            .map(|i| {
                node(
                    &format!("t{i}"),
                    "h100-train",
                    true,
                    false,
                    &[(G, 8)],
                    &[(G, 8)],
                )
            })
            .collect(),
        node_claims: Some(vec![
            claim("a", "h100-train", "True"),
            claim("b", "h100-train", "True"),
            claim("c", "h100-train", "Unknown"),
            claim("d", "l40s-infer", "Unknown"),
        ]),
        ..StatusInput::default()
    };
    let r = compute(&bp, &input, "test");
    let p = |name: &str| r.pools.iter().find(|p| p.name == name).unwrap();
    let train = p("h100-train").provisioner.as_ref().unwrap();
    assert_eq!(
        (
            train.kind.as_str(),
            train.min_nodes,
            train.max_nodes,
            train.bound
        ),
        ("karpenter", 0, 4, Bound::AtMax)
    );
    assert_eq!(
        train.node_claims,
        Some(NodeClaimCounts {
            launched: 2,
            pending: 1
        })
    );
    let infer = p("l40s-infer").provisioner.as_ref().unwrap();
    assert_eq!((infer.max_nodes, infer.bound), (8, Bound::Within));
    assert_eq!(infer.node_claims.unwrap().pending, 1);
    assert!(p("l4-dev").provisioner.is_none(), "a static pool");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["pools"][0]["provisioner"]["bound"], "at-max");
    assert_eq!(json["pools"][0]["provisioner"]["nodeClaims"]["launched"], 2);
    input.node_claims = None;
    let r = compute(&bp, &input, "test");
    assert!(
        r.pools[0]
            .provisioner
            .as_ref()
            .unwrap()
            .node_claims
            .is_none()
    );
}
