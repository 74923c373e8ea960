//! The read table as a spec: what a live plan of a set reads, and the follow-ups decided from what
//! was read.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::live::Reading;
use crate::live::release::{LiveRelease, NamedRelease};
use crate::plan::fixture::*;
use gpuctl_pipeline::render::{Phase, Stack};

fn cluster_queue(name: &str) -> RenderedObject {
    object(
        Phase::Queues,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
               "metadata": {"name": name, "labels": labels()}, "spec": {"cohort": "all"}}),
    )
}

fn members_of(objects: &[&RenderedObject]) -> BTreeMap<ObjectRef, Value> {
    objects
        .iter()
        .map(|o| (o.object_ref(), stored(o)))
        .collect()
}

fn read_of<'r>(reads: &'r PlanReads, name: &str) -> &'r ObjectRead<'r> {
    reads.objects.iter().find(|r| r.id.name == name).unwrap()
}

#[test]
fn a_set_is_read_by_kind_once_with_its_pools_in_one_list_and_its_helm_releases() {
    let s = set();
    let reads = PlanReads::of(&s);
    let kinds: Vec<String> = reads.kinds.iter().map(|t| t.kind.clone()).collect();
    assert_eq!(kinds, ["ClusterQueue", "Namespace", "ResourceQuota"]);
    assert_eq!(reads.parent.id(), set_id());
    assert_eq!(reads.nodes.lists, ["pool=train"]);
    assert_eq!(reads.journals_namespace, OPERATOR_NS);
    assert_eq!(
        reads.operator_release.map(|r| &r.release[..]),
        Some("gpu-operator")
    );
    assert_eq!(reads.objects.len(), 3);
    assert!(reads.objects.iter().all(|r| r.parent.is_none()));

    // A release gpuctl does not install is not read.
    let mut s = set();
    s.helm = helm(InstallMode::None);
    s.releases = vec![helm(InstallMode::None), helm(InstallMode::Helm)];
    let reads = PlanReads::of(&s);
    assert!(reads.operator_release.is_none());
    assert_eq!(reads.releases.len(), 1);
}

#[test]
fn nodes_a_shared_selector_returns_are_kept_only_when_a_pool_selects_them() {
    let s = set();
    let reads = PlanReads::of(&s);
    let node = |pool: &str| json!({"metadata": {"name": "n", "labels": {"pool": pool}}});
    assert!(reads.nodes.keeps(&node("train")));
    assert!(!reads.nodes.keeps(&node("serve")));
}

#[test]
fn cluster_scoped_kinds_with_many_unread_objects_are_listed_and_namespaces_named_otherwise() {
    let mut s = set();
    s.objects
        .extend((0..LIST_THRESHOLD).map(|i| cluster_queue(&format!("q{i}"))));
    let reads = PlanReads::of(&s);
    // Nothing is a member yet: the queues (9 with the fixture's) are listed; the quota's
    // namespace is looked up by name (one Namespace is too few to list).
    let bulk = reads.bulk(&BTreeMap::new());
    assert_eq!(
        bulk.lists,
        [TypeRef::new("kueue.x-k8s.io/v1beta2", "ClusterQueue")]
    );
    assert!(bulk.namespace_names);

    // The members are not read again: with two queues left, they are read one by one.
    let all: Vec<&RenderedObject> = s.objects.iter().collect();
    let members = members_of(&all[..all.len() - 2]);
    assert_eq!(
        reads.bulk(&members),
        BulkReads {
            lists: vec![],
            namespace_names: false
        }
    );

    // Many namespaces: they are listed, and that list names them.
    let mut s = set();
    s.objects.extend((0..LIST_THRESHOLD).map(|i| {
        object(
            Phase::Foundation,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("t{i}")}}),
        )
    }));
    let bulk = PlanReads::of(&s).bulk(&BTreeMap::new());
    assert_eq!(bulk.lists, [TypeRef::new("v1", "Namespace")]);
    assert!(!bulk.namespace_names);
}

#[test]
fn creates_of_custom_resources_and_real_updates_are_dry_run_nothing_else() {
    let s = set();
    let reads = PlanReads::of(&s);
    let queue = read_of(&reads, "train");
    let quota = read_of(&reads, "team-a-quota");
    // A create of a custom resource: dry-run, with the manifest apply will send.
    let manifest = reads.dry_run(queue, None, ParentState::NotAsked);
    assert_eq!(manifest.as_ref(), Some(&queue.object.manifest));
    // A create of a built-in kind in a namespace this apply creates: no dry-run.
    assert!(reads.dry_run(quota, None, ParentState::NotAsked).is_none());
    // Unchanged: no dry-run; changed: one.
    let live = stored(queue.object);
    assert!(
        reads
            .dry_run(queue, Some(&live), ParentState::NotAsked)
            .is_none()
    );
    let mut changed = live.clone();
    changed["spec"]["cohort"] = json!("other");
    assert!(
        reads
            .dry_run(queue, Some(&changed), ParentState::NotAsked)
            .is_some()
    );
    // Another ApplySet's object is a conflict the plan reports without asking the server.
    let mut foreign = changed;
    foreign["metadata"]["labels"][PART_OF_KEY] = json!("applyset-other-v1");
    assert!(
        reads
            .dry_run(queue, Some(&foreign), ParentState::NotAsked)
            .is_none()
    );
}

const PART_OF_KEY: &str = gpuctl_model::applyset::PART_OF;

#[test]
fn a_child_queue_whose_parent_does_not_exist_yet_is_not_dry_run() {
    let mut s = set();
    s.objects = vec![
        volcano_queue("child", Some("parent")),
        volcano_queue("parent", None),
    ];
    let reads = PlanReads::of(&s);
    let child = read_of(&reads, "child");
    assert_eq!(child.parent.map(|p| &p.name[..]), Some("parent"));
    assert!(read_of(&reads, "parent").parent.is_none());
    assert!(
        reads
            .dry_run(child, None, ParentState::Read(None))
            .is_none()
    );
    assert!(reads.dry_run(child, None, ParentState::NotServed).is_none());
    let parent_live = stored(read_of(&reads, "parent").object);
    assert!(
        reads
            .dry_run(child, None, ParentState::Read(Some(&parent_live)))
            .is_some()
    );
}

fn owned(stack: Stack, name: &str) -> OwnedRelease {
    OwnedRelease {
        named: NamedRelease {
            name: name.into(),
            namespace: "ns".into(),
            release: LiveRelease {
                revision: 1,
                status: "deployed".into(),
                chart: name.into(),
                chart_version: "1.0.0".into(),
                values: json!({}),
            },
        },
        stack,
        objects: Reading::NotRead,
    }
}

#[test]
fn the_objects_of_a_dropped_stacks_groups_are_read_and_its_own_never_block() {
    let mut s = set();
    s.undeclared = vec![Stack::Volcano, Stack::GpuOperator];
    let owned = [
        owned(Stack::Kueue, "kueue"),
        owned(Stack::Volcano, "volcano"),
        owned(Stack::GpuOperator, "gpu-operator"),
    ];
    let reads = uninstall_reads(&s, &owned);
    assert_eq!(
        reads.len(),
        1,
        "Kueue is declared; the operator is never uninstalled"
    );
    assert_eq!(reads[0].index, 1);
    assert!(
        reads[0]
            .groups
            .contains(&"scheduling.volcano.sh".to_string())
    );
    let blockers = uninstall_blockers(
        &owned[1],
        vec![
            "Queue/root".into(),
            "Queue/default".into(),
            "Queue/team".into(),
        ],
    );
    assert_eq!(blockers, ["Queue/team"]);
}

#[test]
fn only_nodes_of_a_pool_moving_to_dra_that_have_not_switched_need_their_pods_read() {
    let mut p = patch();
    p.dra_switch = Some("nvidia.com/gpu.deploy.device-plugin".into());
    p.labels
        .insert("nvidia.com/gpu.deploy.device-plugin".into(), "false".into());
    let node = |name: &str, pool: &str, plugin: &str| {
        json!({"metadata": {"name": name, "labels": {
            "pool": pool, "nvidia.com/gpu.deploy.device-plugin": plugin}}})
    };
    let mut view = snapshot_view();
    view.nodes = Some(vec![
        node("moving", "train", "true"),
        node("moved", "train", "false"),
        node("elsewhere", "serve", "true"),
    ]);
    let moving: Vec<String> = moving_nodes(std::slice::from_ref(&p), &view)
        .into_iter()
        .collect();
    assert_eq!(moving, ["moving"]);
    // A pool that stays on the device plugin reads no pods.
    assert!(moving_nodes(&[patch()], &view).is_empty());
}
