//! Plan decisions as pure functions of (rendered set, live view): no API server needed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

mod topology;

use super::fixture::*;
use super::*;
use crate::journal::{Journal, JournalPhase};
use crate::live::release::{LiveRelease, OwnedRelease};
use crate::live::{DryRun, Reading};
use gpuctl_model::applyset::{BLUEPRINT_LABEL, PART_OF};
use gpuctl_model::blueprint::InstallMode;
use gpuctl_model::object::TypeRef;
use gpuctl_pipeline::render::{HelmRelease, RenderedObject, Stack};

#[test]
fn offline_every_object_is_a_create_and_nothing_live_is_said() {
    let p = plan_of(&LiveView::offline());
    assert_eq!(p.mode, Mode::Offline);
    assert!(p.actions.iter().all(|a| a.action == ActionKind::Create));
    assert_eq!(p.summary.create, 3);
    assert!(p.nodes.is_empty() && p.findings.is_empty());
    assert!(p.helm_release.is_none() && p.cluster_fingerprint.is_none());
    // A create lists the object's fields as additions, without apiVersion/kind.
    let quota = &p.actions[1];
    assert!(
        quota
            .changes
            .iter()
            .any(|c| c.path.contains("requests.nvidia.com/gpu"))
    );
    assert!(!quota.changes.iter().any(|c| c.path == "kind"));
}

#[test]
fn an_empty_set_is_refused() {
    let mut s = set();
    s.objects.clear();
    assert!(matches!(
        plan(&s, &LiveView::offline(), PlanOptions::default()),
        Err(PlanError::EmptySet(_))
    ));
    assert!(refuse_empty(&s).is_err() && refuse_empty(&set()).is_ok());
}

#[test]
fn kinds_not_served_are_created_after_their_crd() {
    let mut v = snapshot_view();
    v.served = Some(BTreeSet::from([
        TypeRef::new("v1", "Namespace"),
        TypeRef::new("v1", "ResourceQuota"),
    ]));
    let p = plan_of(&v);
    assert_eq!(p.actions[2].action, ActionKind::CreateAfterCrd);
    assert!(
        p.actions[2]
            .reason
            .as_deref()
            .unwrap()
            .contains("not served yet")
    );
    assert_eq!(p.summary.create, 3);
}

#[test]
fn an_object_stored_as_declared_is_a_no_op_with_its_resource_version() {
    let mut v = snapshot_view();
    for o in [namespace(), quota(), queue()] {
        with_member(&mut v, stored(&o));
    }
    let p = plan_of(&v);
    assert!(
        p.actions.iter().all(|a| a.action == ActionKind::NoOp),
        "{:?}",
        kinds(&p)
    );
    assert_eq!(p.actions[0].resource_version.as_deref(), Some("41"));
    let s = p.summary;
    assert_eq!(
        (s.unchanged, s.create + s.update + s.delete + s.conflict),
        (3, 0)
    );
}

#[test]
fn a_changed_field_is_an_update_from_the_dry_run_when_there_is_one() {
    let mut v = snapshot_view();
    let mut live = stored(&quota());
    live["spec"]["hard"]["requests.nvidia.com/gpu"] = json!("4");
    with_member(&mut v, live.clone());
    let p = plan_of(&v);
    let a = &p.actions[1];
    assert_eq!(a.action, ActionKind::Update);
    assert_eq!(a.changes.len(), 1);
    assert_eq!(a.changes[0].before, Some(json!("4")));
    assert_eq!(a.changes[0].after, Some(json!("8")));

    // The server's answer wins over gpuctl's guess: here it normalises to what is live.
    v.dry_run
        .insert(quota().object_ref(), DryRun::Applied(live));
    let p = plan_of(&v);
    assert_eq!(p.actions[1].action, ActionKind::NoOp);
}

#[test]
fn another_sets_object_and_a_dry_run_conflict_are_conflicts() {
    let mut v = snapshot_view();
    let mut other = stored(&namespace());
    other["metadata"]["labels"][PART_OF] = json!("applyset-other-v1");
    other["metadata"]["labels"][BLUEPRINT_LABEL] = json!("prod");
    v.objects.insert(namespace().object_ref(), other);
    v.dry_run.insert(
        queue().object_ref(),
        DryRun::Conflict("conflict with \"kueue-manager\": .spec.cohort".into()),
    );
    let p = plan_of(&v);
    assert_eq!(p.actions[0].action, ActionKind::Conflict);
    assert!(
        p.actions[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("blueprint `prod`")
    );
    assert_eq!(p.actions[2].action, ActionKind::Conflict);
    assert!(
        p.actions[2]
            .reason
            .as_deref()
            .unwrap()
            .contains("kueue-manager")
    );
    assert_eq!(p.summary.conflict, 2);
}

#[test]
fn members_no_longer_declared_are_pruned_except_protected_kinds() {
    let mut v = snapshot_view();
    let old_cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "old", "namespace": OPERATOR_NS, "resourceVersion": "3", "labels": labels()}});
    let old_ns = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team-gone", "resourceVersion": "4", "labels": labels()}});
    with_member(&mut v, old_cm);
    with_member(&mut v, old_ns);
    let p = plan_of(&v);
    let deletes: Vec<_> = p
        .actions
        .iter()
        .filter(|a| a.action == ActionKind::Delete)
        .map(|a| (a.id(), a.resource_version.clone()))
        .collect();
    assert_eq!(
        deletes,
        [("ConfigMap/gpu-operator/old".into(), Some("3".into()))]
    );
    assert!(messages(&p, Severity::Warning)
        .iter()
        .any(|m| m.starts_with("Namespace/team-gone is no longer in the blueprint but is kept")));

    let p = plan(
        &set(),
        &v,
        PlanOptions {
            prune_protected: true,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(p.summary.delete, 2);
    // Prunes come last, after every declared object.
    assert_eq!(p.actions.last().unwrap().action, ActionKind::Delete);
}

fn journal(phase: JournalPhase, to: &str) -> Journal {
    serde_json::from_value(json!({
        "format": 1, "blueprint": BLUEPRINT, "file": "lab.yaml", "pool": "train",
        "namespace": OPERATOR_NS, "selector": {"pool": "train"},
        "fromVersion": "570.172.08", "toVersion": to,
        "blueCr": "train-570", "greenCr": "train-580", "greenManifest": {},
        "greenCrExisted": false, "removeBlueCr": true, "colorLabel": "gpuctl.dev/color",
        "blueColor": "blue", "greenColor": "green", "maxUnavailable": 1,
        "drainTimeoutS": 600, "waitForJobs": true,
        "blueprintChange": "set pools[train].driver to 580.95.05",
        "batches": [], "nodes": {}, "phase": phase, "step": 3, "events": []
    }))
    .unwrap()
}

#[test]
fn upgrade_journals_block_the_pools_they_move() {
    let mut v = snapshot_view();
    v.journals = Reading::Read(vec![journal(JournalPhase::Running, "580.95.05")]);
    let p = plan_of(&v);
    let errors = messages(&p, Severity::Error);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("gpuctl upgrade driver --resume --pool train"));

    // Done, and the blueprint declares the new driver (as a version, not as text): nothing to say.
    v.journals = Reading::Read(vec![journal(JournalPhase::Completed, "580.95.5")]);
    assert!(messages(&plan_of(&v), Severity::Error).is_empty());
    // Done to a driver the blueprint does not declare: applying would move the pool back.
    v.journals = Reading::Read(vec![journal(JournalPhase::Completed, "590.44.01")]);
    assert!(messages(&plan_of(&v), Severity::Error)[0].contains("would move every node back"));
    // Another blueprint's journal is not this plan's business.
    let mut other = journal(JournalPhase::Running, "580.95.05");
    other.blueprint = "prod".into();
    v.journals = Reading::Read(vec![other]);
    assert!(messages(&plan_of(&v), Severity::Error).is_empty());
    // Unreadable journals: apply must not guess.
    v.journals = Reading::Failed("forbidden".into());
    assert!(
        messages(&plan_of(&v), Severity::Error)[0]
            .contains("cannot read the driver upgrade journals")
    );
}

#[test]
fn nodes_get_their_labels_and_taints_and_say_what_is_wrong() {
    let mut v = snapshot_view();
    let taint = json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]);
    v.nodes = Some(vec![
        // In place: nothing to do.
        node(
            "n1",
            json!({"pool": "train", "gpuctl.dev/driver": "train-580",
                   "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
                   "nvidia.com/cuda.driver-version.full": "580.95.05"}),
            taint,
        ),
        // Wrong GPU, old driver, no label, no taint.
        node(
            "n2",
            json!({"pool": "train", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                   "nvidia.com/cuda.driver-version.full": "570.172.08"}),
            json!([]),
        ),
        // Another pool's node.
        node("x", json!({"pool": "infer"}), json!([])),
    ]);
    let p = plan_of(&v);
    assert_eq!(p.nodes.len(), 1);
    assert_eq!(p.nodes[0].node, "n2");
    assert_eq!(p.nodes[0].labels[0].after, Some(json!("train-580")));
    assert_eq!(p.nodes[0].taints, ["nvidia.com/gpu=present:NoSchedule"]);
    assert_eq!(p.summary.nodes, 1);
    let errors = messages(&p, Severity::Error);
    assert_eq!(
        errors,
        [
            "node `n2` of pool `train` reports GPU `NVIDIA-A100-SXM4-80GB`; the blueprint says NVIDIA-H100-80GB-HBM3"
        ]
    );
    let warnings = messages(&p, Severity::Warning);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("1 node(s) of pool `train` run driver 570.172.08 (n2)"))
    );

    v.nodes.as_mut().unwrap().pop();
    v.nodes.as_mut().unwrap().pop();
    let p = plan_of(&v);
    assert_eq!(
        messages(&p, Severity::Warning),
        ["pool `train` expects 2 nodes but 1 match `pool=train`"]
    );
}

#[test]
fn findings_carry_their_registered_id_in_the_plan_document() {
    let mut v = snapshot_view();
    v.nodes = Some(vec![node(
        "n2",
        json!({"pool": "train", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        json!([]),
    )]);
    let p = plan_of(&v);
    let ids: Vec<&str> = p.findings.iter().map(|f| f.id.as_str()).collect();
    assert!(
        ids.contains(&"GPU400") && ids.contains(&"GPU401"),
        "{ids:?}"
    );
    for f in &p.findings {
        let r = gpuctl_model::finding::rule(&f.id).expect("registered");
        assert_eq!(r.family, gpuctl_model::finding::Family::Plan);
    }
    let model = p
        .findings
        .iter()
        .find(|f| f.message.contains("reports GPU"));
    let doc = serde_json::to_value(model.expect("the GPU model finding")).unwrap();
    assert_eq!(doc["id"], "GPU401");
    // A plan saved before findings had ids still loads: its findings' id is empty.
    let old: PlanFinding =
        serde_json::from_value(json!({"severity": "warning", "message": "m"})).unwrap();
    assert_eq!(old.id, "");
}

#[test]
fn moving_nodes_between_driver_crs_is_an_upgrades_job_unless_a_journal_explains_it() {
    let mut v = snapshot_view();
    v.nodes = Some(vec![
        node(
            "n1",
            json!({"pool": "train", "gpuctl.dev/driver": "train-570"}),
            json!([]),
        ),
        node(
            "n2",
            json!({"pool": "train", "gpuctl.dev/driver": "train-570"}),
            json!([]),
        ),
    ]);
    let p = plan_of(&v);
    let errors = messages(&p, Severity::Error);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with(
        "2 node(s) of pool `train` (n1, n2) would move from NVIDIADriver `train-570` to `train-580`"
    ));

    // Blue-green off: a warning, apply may go ahead.
    let mut s = set();
    s.node_patches[0].blue_green = false;
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    assert!(messages(&p, Severity::Error).is_empty());

    // A running upgrade of the pool explains the move: its finding alone is shown.
    v.journals = Reading::Read(vec![journal(JournalPhase::Running, "580.95.05")]);
    let p = plan_of(&v);
    let errors = messages(&p, Severity::Error);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("pool `train` has a driver upgrade"));
}

#[test]
fn the_operator_release_is_installed_upgraded_or_left_alone() {
    let mut v = snapshot_view();
    let p = plan_of(&v);
    assert_eq!(p.helm_release.as_ref().unwrap().action, HelmAction::Install);
    assert_eq!(p.summary.helm, 1);

    let same = json!({"driver": {"enabled": true}});
    v.helm_release = Reading::Read(Some(release("26.7.0", "deployed", same.clone())));
    let p = plan_of(&v);
    assert_eq!(p.helm_release.as_ref().unwrap().action, HelmAction::NoOp);
    assert_eq!(p.summary.helm, 0);

    v.helm_release = Reading::Read(Some(release("v25.10.1", "deployed", same.clone())));
    let h = plan_of(&v).helm_release.unwrap();
    assert_eq!(
        (h.action, h.chart_version_before.as_deref()),
        (HelmAction::Upgrade, Some("v25.10.1"))
    );

    v.helm_release = Reading::Read(Some(release("v26.7.0", "failed", same)));
    let p = plan_of(&v);
    assert_eq!(p.helm_release.as_ref().unwrap().action, HelmAction::Upgrade);
    assert!(messages(&p, Severity::Warning)[0].contains("is `failed`, not `deployed`"));

    v.helm_release = Reading::Failed("forbidden".into());
    let p = plan_of(&v);
    assert!(p.helm_release.is_none());
    assert!(messages(&p, Severity::Warning)[0].contains("cannot read the live Helm release"));

    // GitOps installs the release: no Helm step at all.
    let mut s = set();
    s.helm = helm(InstallMode::Gitops);
    assert!(
        plan(&s, &v, PlanOptions::default())
            .unwrap()
            .helm_release
            .is_none()
    );
}

#[test]
fn switching_an_installed_operator_between_cluster_policy_and_gpu_cluster_is_refused() {
    let mut v = snapshot_view();
    let policy = json!({"driver": {"enabled": true}});
    let dra = json!({"driver": {"enabled": true}, "clusterPolicy": {"deployCR": false}, "gpuCluster": {"deployCR": true}});
    let mut s = set();
    // Installed with the ClusterPolicy, the blueprint now says GPUCluster: an error, so apply
    // refuses (src/commands/apply.rs refuse_errors).
    s.helm.values = dra.clone();
    v.helm_release = Reading::Read(Some(release("v26.7.0", "deployed", policy.clone())));
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    let errors = messages(&p, Severity::Error);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains(
            "deploys the ClusterPolicy (device plugin), the blueprint the GPUCluster (DRA)"
        )
    );
    assert!(errors[0].contains("no in-place migration"));
    // And back.
    s.helm.values = policy.clone();
    v.helm_release = Reading::Read(Some(release("v26.7.0", "deployed", dra.clone())));
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    assert!(
        messages(&p, Severity::Error)[0]
            .contains("deploys the GPUCluster (DRA), the blueprint the ClusterPolicy")
    );
    // A new install, or either kept as it is: nothing to refuse.
    for (live, want) in [
        (None, dra.clone()),
        (Some(dra.clone()), dra.clone()),
        (Some(policy.clone()), policy),
    ] {
        s.helm.values = want;
        v.helm_release = Reading::Read(live.map(|l| release("v26.7.0", "deployed", l)));
        let p = plan(&s, &v, PlanOptions::default()).unwrap();
        assert!(messages(&p, Severity::Error).is_empty());
    }
}

/// Kueue's release as render makes it (values: the managerConfig text).
#[test]
fn every_release_is_planned_on_its_own_and_counted() {
    let mut s = set();
    s.releases = vec![kueue_release("fairSharing: {}\n")];
    let key = ("kueue-system".to_string(), "kueue".to_string());
    let mut v = snapshot_view();
    v.helm_release = Reading::Read(Some(release(
        "v26.7.0",
        "deployed",
        json!({"driver": {"enabled": true}}),
    )));
    // Not installed yet: an install of exactly its values, counted with the operator's no-op.
    v.releases.insert(key.clone(), Reading::Read(None));
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    assert_eq!(p.helm_release.as_ref().unwrap().action, HelmAction::NoOp);
    assert_eq!(p.releases.len(), 1);
    let k = p.releases[0].plan.as_ref().unwrap();
    assert_eq!(k.action, HelmAction::Install);
    assert_eq!(k.changes.len(), 1);
    assert_eq!(
        k.changes[0].path,
        "managerConfig.controllerManagerConfigYaml"
    );
    assert_eq!(p.summary.helm, 1);
    assert!(p.summary.has_changes());

    // Installed with these values: up to date, nothing to do.
    v.releases.insert(
        key.clone(),
        Reading::Read(Some(kueue_live(1, "fairSharing: {}\n"))),
    );
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    assert_eq!(
        p.releases[0].plan.as_ref().unwrap().action,
        HelmAction::NoOp
    );
    assert_eq!(p.summary.helm, 0);

    // Another configuration: an upgrade of exactly that value.
    v.releases
        .insert(key.clone(), Reading::Read(Some(kueue_live(1, "{}\n"))));
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    let k = p.releases[0].plan.as_ref().unwrap();
    assert_eq!(k.action, HelmAction::Upgrade);
    assert_eq!(
        k.changes
            .iter()
            .map(|c| c.path.as_str())
            .collect::<Vec<_>>(),
        ["managerConfig.controllerManagerConfigYaml"]
    );

    // A saved plan goes stale when the release moves, and only then.
    let mut now = LiveView::empty(Source::Offline);
    now.helm_release = v.helm_release.clone();
    now.releases
        .insert(key.clone(), Reading::Read(Some(kueue_live(1, "{}\n"))));
    assert!(stale::changes_since(&p, &now).is_empty());
    now.releases
        .insert(key.clone(), Reading::Read(Some(kueue_live(2, "{}\n"))));
    assert_eq!(
        stale::changes_since(&p, &now),
        ["HelmRelease/kueue-system/kueue: revision 1 -> 2"]
    );

    // A snapshot that does not record it says the plan cannot tell.
    v.releases.clear();
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    assert!(p.releases[0].plan.is_none());
    assert!(
        messages(&p, Severity::Warning)
            .iter()
            .any(|m| m.contains("does not record the Kueue Helm release kueue-system/kueue")),
        "{:?}",
        p.findings
    );

    // GitOps: no step at all.
    s.releases[0].install = InstallMode::Gitops;
    assert!(
        plan(&s, &v, PlanOptions::default())
            .unwrap()
            .releases
            .is_empty()
    );
}

#[test]
fn a_saved_plan_is_stale_when_what_it_planned_moved() {
    // Planned against a cluster holding the namespace (rv 41), a node to relabel and a release.
    let mut then = snapshot_view();
    with_member(&mut then, stored(&namespace()));
    then.nodes = Some(vec![node("n1", json!({"pool": "train"}), json!([]))]);
    then.helm_release = Reading::Read(Some(release("v26.7.0", "deployed", json!({}))));
    let p = plan_of(&then);

    // Read again, unchanged: nothing moved.
    let mut now = LiveView::empty(Source::Offline);
    now.objects
        .insert(namespace().object_ref(), stored(&namespace()));
    now.nodes = then.nodes.clone();
    now.helm_release = then.helm_release.clone();
    assert!(stale::changes_since(&p, &now).is_empty());

    // Someone else created the quota, bumped the namespace, relabelled the node, upgraded helm.
    let mut bumped = stored(&namespace());
    bumped["metadata"]["resourceVersion"] = json!("42");
    bumped["metadata"]["annotations"] = json!({"someone.example.com/else": "wrote this"});
    now.objects.insert(namespace().object_ref(), bumped);
    now.objects.insert(quota().object_ref(), stored(&quota()));
    let mut relabelled = node(
        "n1",
        json!({"pool": "train", "gpuctl.dev/driver": "other"}),
        json!([]),
    );
    relabelled["metadata"]["resourceVersion"] = json!("8");
    now.nodes = Some(vec![relabelled]);
    let mut r = release("v26.7.0", "deployed", json!({}));
    r.revision = 5;
    now.helm_release = Reading::Read(Some(r));
    assert_eq!(
        stale::changes_since(&p, &now),
        [
            "Namespace/team-a: resourceVersion 41 -> 42",
            "ResourceQuota/team-a/team-a-quota: created by someone else since the plan",
            "Node/n1: label gpuctl.dev/driver changed since the plan",
            "HelmRelease/gpu-operator/gpu-operator: revision 4 -> 5",
        ]
    );

    // A deleted object, and a kind the cluster stopped serving.
    now.objects.clear();
    now.served = Some(BTreeSet::from([
        TypeRef::new("v1", "Namespace"),
        TypeRef::new("v1", "ResourceQuota"),
    ]));
    let moved = stale::changes_since(&p, &now);
    assert!(
        moved.contains(&"Namespace/team-a: deleted since the plan".to_string()),
        "{moved:?}"
    );
    assert!(
        moved.contains(&"ClusterQueue/train: its kind is no longer served".to_string()),
        "{moved:?}"
    );
}

#[test]
fn a_status_write_since_the_plan_is_not_a_change_but_a_spec_write_is() {
    // A controller (Kueue on a LocalQueue, the quota controller on a ResourceQuota) writes status:
    // the resourceVersion moves, what the plan was made against does not.
    let mut then = snapshot_view();
    with_member(&mut then, stored(&namespace()));
    let p = plan_of(&then);
    let planned = p
        .actions
        .iter()
        .find(|a| a.kind == "Namespace")
        .expect("the namespace is planned");
    assert!(planned.content_digest.is_some(), "{planned:?}");

    let mut now = LiveView::empty(Source::Offline);
    let mut status_only = stored(&namespace());
    status_only["metadata"]["resourceVersion"] = json!("42");
    status_only["metadata"]["managedFields"] =
        json!([{"manager": "kueue", "subresource": "status"}]);
    status_only["status"] = json!({"phase": "Active"});
    now.objects
        .insert(namespace().object_ref(), status_only.clone());
    assert!(
        !stale::changes_since(&p, &now)
            .iter()
            .any(|m| m.starts_with("Namespace/team-a")),
        "{:?}",
        stale::changes_since(&p, &now)
    );

    let mut relabelled = status_only;
    relabelled["metadata"]["labels"]["team"] = json!("b");
    now.objects.insert(namespace().object_ref(), relabelled);
    assert!(
        stale::changes_since(&p, &now)
            .contains(&"Namespace/team-a: resourceVersion 41 -> 42".to_string()),
        "{:?}",
        stale::changes_since(&p, &now)
    );
}

#[test]
fn a_member_that_joined_the_set_since_the_plan_makes_it_stale() {
    let then = snapshot_view();
    let p = plan_of(&then);
    let mut now = LiveView::empty(Source::Offline);
    now.members = Some(BTreeMap::new());
    assert!(stale::changes_since(&p, &now).is_empty());

    // Another apply added a quota in a namespace this plan never saw, and a namespace.
    let mut extra = stored(&quota());
    extra["metadata"]["namespace"] = json!("team-z");
    let mut ns = stored(&namespace());
    ns["metadata"]["name"] = json!("team-z");
    let mut members = BTreeMap::new();
    for v in [extra, ns] {
        members.insert(gpuctl_model::object::ObjectRef::of(&v).unwrap(), v);
    }
    now.members = Some(members);
    assert_eq!(
        stale::changes_since(&p, &now),
        ["ResourceQuota/team-z/team-a-quota: joined the blueprint's ApplySet since the plan"],
        "a protected kind the plan would only keep (the namespace) is not a change"
    );
}

/// A snapshot's capture time reaches the plan only when it is a timestamp: the file is input.
#[test]
fn snapshot_capture_time_is_shown_only_when_it_is_a_timestamp() {
    for (written, shown) in [
        (Some("2026-11-28T09:30:00Z"), Some("2026-11-28T09:30:00Z")),
        (
            Some("2026-11-28T09:30:00.75+01:00"),
            Some("2026-11-28T08:30:01Z"),
        ),
        (Some("\u{1b}[2Jyesterday"), None),
        (None, None),
    ] {
        let mut view = snapshot_view();
        view.source = Source::Snapshot {
            server: None,
            fingerprint: None,
            captured_at: written.map(str::to_string),
        };
        assert_eq!(
            plan_of(&view).snapshot_captured_at.as_deref(),
            shown,
            "{written:?}"
        );
    }
}

// --- Hierarchies: Volcano parent queues before children, children pruned first ------------------

/// A parent, two children and a grandchild, in an order that puts children before parents.
fn hierarchy_set() -> RenderedSet {
    let mut s = set();
    s.objects = vec![
        namespace(),
        volcano_queue("a-leaf", Some("serving-online")),
        volcano_queue("serving-batch", Some("serving")),
        volcano_queue("serving-online", Some("serving")),
        volcano_queue("serving", Some("root")),
        volcano_queue("research", None),
    ];
    s
}

#[test]
fn children_of_a_parent_that_does_not_exist_yet_are_created_after_it() {
    let s = hierarchy_set();
    let p = plan(&s, &LiveView::offline(), PlanOptions::default()).unwrap();
    let kind_of = |name: &str| {
        p.actions
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.action)
            .unwrap()
    };
    // `root` is Volcano's implicit top queue, never waited for.
    assert_eq!(kind_of("serving"), ActionKind::Create);
    assert_eq!(kind_of("research"), ActionKind::Create);
    for child in ["serving-batch", "serving-online", "a-leaf"] {
        assert_eq!(kind_of(child), ActionKind::CreateAfterParent, "{child}");
    }
    let reason = p.actions.iter().find(|a| a.name == "a-leaf").unwrap();
    assert!(
        reason
            .reason
            .as_deref()
            .unwrap()
            .contains("parent serving-online"),
        "{:?}",
        reason.reason
    );
    assert_eq!(p.summary.create, 6);

    // Once the parent exists, its children are plain creates (dry-run like any other).
    let mut v = snapshot_view();
    let serving = s.objects.iter().find(|o| o.name == "serving").unwrap();
    with_member(&mut v, stored(serving));
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    let kinds: BTreeMap<&str, ActionKind> = p
        .actions
        .iter()
        .map(|a| (a.name.as_str(), a.action))
        .collect();
    assert_eq!(kinds["serving"], ActionKind::NoOp);
    assert_eq!(kinds["serving-batch"], ActionKind::Create);
    assert_eq!(kinds["a-leaf"], ActionKind::CreateAfterParent);
}

#[test]
fn a_child_waiting_for_its_parent_is_never_dry_run() {
    let s = hierarchy_set();
    let child = s
        .objects
        .iter()
        .find(|o| o.name == "serving-batch")
        .unwrap();
    let root_child = s.objects.iter().find(|o| o.name == "serving").unwrap();
    assert!(objects::waits_for_parent(child, None));
    let parent_live = json!({"metadata": {"name": "serving"}});
    assert!(!objects::waits_for_parent(child, Some(&parent_live)));
    // A queue under the implicit root, and objects of other kinds, have no parent to wait for.
    assert!(!objects::waits_for_parent(root_child, None));
    assert!(!objects::waits_for_parent(&queue(), None));
}

#[test]
fn apply_writes_parents_in_an_earlier_wave_than_their_children() {
    let p = plan(
        &hierarchy_set(),
        &LiveView::offline(),
        PlanOptions::default(),
    )
    .unwrap();
    let steps: Vec<&Action> = p.actions.iter().collect();
    let waves = hierarchy::write_waves(&steps);
    let wave_of = |name: &str| {
        waves
            .iter()
            .position(|w| w.iter().any(|a| a.name == name))
            .unwrap()
    };
    assert_eq!(waves.len(), 3, "{waves:#?}");
    assert_eq!(wave_of("serving"), 0);
    assert_eq!(wave_of("research"), 0);
    assert_eq!(wave_of("team-a"), 0);
    assert_eq!(wave_of("serving-batch"), 1);
    assert_eq!(wave_of("serving-online"), 1);
    assert_eq!(wave_of("a-leaf"), 2);
    // Every step is in exactly one wave.
    assert_eq!(waves.iter().map(Vec::len).sum::<usize>(), steps.len());
}

#[test]
fn prune_removes_children_before_their_parents() {
    // The live set holds a hierarchy the blueprint no longer declares.
    let mut v = snapshot_view();
    for o in hierarchy_set().objects.iter().filter(|o| o.kind == "Queue") {
        with_member(&mut v, stored(o));
    }
    let p = plan_of(&v);
    let deletes: Vec<&str> = p
        .actions
        .iter()
        .filter(|a| a.action == ActionKind::Delete)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(deletes.len(), 5, "{deletes:?}");
    let at = |n: &str| deletes.iter().position(|d| *d == n).unwrap();
    assert!(at("a-leaf") < at("serving-online"), "{deletes:?}");
    assert!(at("serving-online") < at("serving"), "{deletes:?}");
    assert!(at("serving-batch") < at("serving"), "{deletes:?}");
}

#[test]
fn waves_survive_a_cycle() {
    let items = vec![("a", Some("b")), ("b", Some("a")), ("c", None)];
    let r = |n: &str| gpuctl_model::object::ObjectRef::new("x/v1", "Queue", None, n);
    let w = hierarchy::waves(items, |t| r(t.0), |t| t.1.map(r));
    assert_eq!(w.iter().map(Vec::len).sum::<usize>(), 3);
}

/// Without a server (snapshot, offline), a quantity written another way is the same quantity; a
/// different quantity, or text that only looks like one outside quantity fields, is a change.
#[test]
fn snapshot_plans_compare_quantities_normalised() {
    let mut v = snapshot_view();
    let mut live = stored(&quota());
    live["spec"]["hard"]["requests.nvidia.com/gpu"] = json!(8);
    with_member(&mut v, live.clone());
    let p = plan_of(&v);
    let q = p
        .actions
        .iter()
        .find(|a| a.kind == "ResourceQuota")
        .unwrap();
    assert_eq!(q.action, ActionKind::NoOp, "{:?}", q.changes);

    live["spec"]["hard"]["requests.nvidia.com/gpu"] = json!("8000m");
    with_member(&mut v, live.clone());
    let p = plan_of(&v);
    let q = p
        .actions
        .iter()
        .find(|a| a.kind == "ResourceQuota")
        .unwrap();
    assert_eq!(q.action, ActionKind::NoOp, "{:?}", q.changes);

    live["spec"]["hard"]["requests.nvidia.com/gpu"] = json!("9");
    with_member(&mut v, live);
    let p = plan_of(&v);
    let q = p
        .actions
        .iter()
        .find(|a| a.kind == "ResourceQuota")
        .unwrap();
    assert_eq!(q.action, ActionKind::Update);

    let c = |path: &str, a: Value, b: Value| diff::Change {
        path: path.into(),
        before: Some(a),
        after: Some(b),
    };
    assert!(diff::same_quantity(&c(
        "spec.hard.\"requests.cpu\"",
        json!("1000"),
        json!("1k")
    )));
    assert!(diff::same_quantity(&c(
        "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota",
        json!("1Gi"),
        json!("1024Mi")
    )));
    assert!(!diff::same_quantity(&c(
        "spec.version",
        json!("1.10"),
        json!("1.1")
    )));
    assert!(!diff::same_quantity(&c(
        "spec.hard.\"requests.cpu\"",
        json!("1"),
        json!("2")
    )));
}

fn local_queue(cluster_queue: &str) -> RenderedObject {
    object(
        Phase::Queues,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
               "metadata": {"name": "default", "namespace": "team-a", "labels": labels()},
               "spec": {"clusterQueue": cluster_queue}}),
    )
}

/// A ResourceClaimTemplate's whole `spec` is immutable: a changed shape (another count) replaces
/// the tenant's template; a label change is an ordinary update.
#[test]
fn a_changed_claim_template_is_replaced() {
    let template = |count: u32| {
        object(
            Phase::Quotas,
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": "h100", "namespace": "team-a", "labels": labels()},
                   "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                       "deviceClassName": "h100.shapes.gpuctl.dev", "allocationMode": "ExactCount",
                       "count": count}}]}}}}),
        )
    };
    let mut s = set();
    s.objects.push(template(2));
    let mut v = snapshot_view();
    with_member(&mut v, stored(&template(1)));
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    let a = p
        .actions
        .iter()
        .find(|a| a.kind == "ResourceClaimTemplate")
        .unwrap();
    assert_eq!(a.action, ActionKind::Update);
    assert!(a.replace, "{a:?}");
    assert_eq!(
        objects::replaced(&template(2), &stored(&template(1))),
        Some(vec!["spec".to_string()])
    );
    let mut labelled = template(1);
    labelled.manifest["metadata"]["labels"]["x"] = json!("y");
    assert_eq!(objects::replaced(&labelled, &stored(&template(1))), None);
}

/// A field the API server keeps immutable (LocalQueue `spec.clusterQueue`, a CEL rule
/// `self == oldSelf` in Kueue's CRD) is never planned as an update it would refuse: the object is
/// replaced, and a live plan does not dry-run it.
#[test]
fn a_change_of_an_immutable_field_is_a_replace() {
    let mut s = set();
    s.objects.push(local_queue("cq-b"));
    let mut v = snapshot_view();
    with_member(&mut v, stored(&local_queue("cq-a")));
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    let lq = p.actions.iter().find(|a| a.kind == "LocalQueue").unwrap();
    assert_eq!(lq.action, ActionKind::Update);
    assert!(lq.replace, "{lq:?}");
    assert!(
        lq.reason
            .as_deref()
            .unwrap()
            .contains("spec.clusterQueue cannot change"),
        "{:?}",
        lq.reason
    );
    assert_eq!(lq.changes.len(), 1);
    assert_eq!(p.summary.update, 1);
    let o = local_queue("cq-b");
    let live = stored(&local_queue("cq-a"));
    assert_eq!(
        objects::replaced(&o, &live),
        Some(vec!["spec.clusterQueue".to_string()])
    );
    assert!(!objects::needs_dry_run(
        &o,
        Some(&live),
        &BTreeSet::new(),
        &set_id()
    ));
    // Any other change of a LocalQueue is an ordinary update.
    let mut labelled = o.clone();
    labelled.manifest["metadata"]["labels"]["x"] = json!("y");
    let same_queue = stored(&local_queue("cq-b"));
    assert_eq!(objects::replaced(&labelled, &same_queue), None);

    // A ResourceFlavor's node labels are immutable only once it has a topology.
    let flavor = |node_labels: Value, topology: bool| {
        let mut m = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "train", "labels": labels()},
            "spec": {"nodeLabels": node_labels}});
        if topology {
            m["spec"]["topologyName"] = json!("train");
        }
        object(Phase::Queues, m)
    };
    let new = flavor(json!({"pool": "b"}), true);
    assert_eq!(
        objects::replaced(&new, &stored(&flavor(json!({"pool": "a"}), true))),
        Some(vec!["spec.nodeLabels".to_string()])
    );
    assert_eq!(
        objects::replaced(
            &flavor(json!({"pool": "b"}), false),
            &stored(&flavor(json!({"pool": "a"}), false))
        ),
        None
    );
}

/// Issue 26: a live plan compares quantities by value too. Kueue stores `1k` when it creates a
/// ClusterQueue but answers a dry-run update with the `"1000"` it was sent: neither the unchanged
/// object nor that answer is a change, and the unchanged one is not even dry-run.
#[test]
fn live_plans_compare_quantities_by_value() {
    let cq = |nominal: &str| {
        object(
            Phase::Queues,
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                   "metadata": {"name": "train", "labels": labels()},
                   "spec": {"cohort": "all", "resourceGroups": [{"coveredResources": ["cpu"],
                     "flavors": [{"name": "a", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}]}}),
        )
    };
    let mut v = LiveView::empty(Source::Cluster {
        server: "https://example:6443".into(),
        fingerprint: "fp".into(),
    });
    v.members = Some(BTreeMap::new());
    v.nodes = Some(vec![]);
    v.journals = Reading::Read(vec![]);
    v.helm_release = Reading::Read(None);
    let created = stored(&cq("1k"));
    with_member(&mut v, created.clone());
    let mut s = set();
    s.objects.retain(|o| o.kind != "ClusterQueue");
    for written in ["1000", "1e3", "1k"] {
        let desired = cq(written);
        assert!(
            !objects::needs_dry_run(&desired, Some(&created), &BTreeSet::new(), &set_id()),
            "{written}"
        );
        let mut s = s.clone();
        s.objects.push(desired);
        let p = plan(&s, &v, PlanOptions::default()).unwrap();
        let a = p.actions.iter().find(|a| a.kind == "ClusterQueue").unwrap();
        assert_eq!(a.action, ActionKind::NoOp, "{written}: {:?}", a.changes);
    }
    // A real change is dry-run; the answer keeps the update's `"1000"` next to the live `1k`,
    // and only the changed field is planned.
    let mut desired = cq("1000");
    desired.manifest["spec"]["cohort"] = json!("other");
    assert!(objects::needs_dry_run(
        &desired,
        Some(&created),
        &BTreeSet::new(),
        &set_id()
    ));
    let mut answer = created.clone();
    answer["spec"]["cohort"] = json!("other");
    answer["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] =
        json!("1000");
    v.dry_run
        .insert(desired.object_ref(), DryRun::Applied(answer.clone()));
    let mut s2 = s.clone();
    s2.objects.push(desired.clone());
    let p = plan(&s2, &v, PlanOptions::default()).unwrap();
    let a = p.actions.iter().find(|a| a.kind == "ClusterQueue").unwrap();
    assert_eq!(a.action, ActionKind::Update);
    let paths: Vec<&str> = a.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["spec.cohort"]);
    // A dry-run answer that differs only in how the quantity is written is no change at all.
    answer["spec"]["cohort"] = json!("all");
    v.dry_run
        .insert(desired.object_ref(), DryRun::Applied(answer));
    let mut s3 = s.clone();
    s3.objects.push(cq("1000"));
    let p = plan(&s3, &v, PlanOptions::default()).unwrap();
    let a = p.actions.iter().find(|a| a.kind == "ClusterQueue").unwrap();
    assert_eq!(a.action, ActionKind::NoOp, "{:?}", a.changes);
}

/// Issue 26: the nodes of pools that select by the same label keys are read with one LIST
/// (64 pools were 64 LISTs); a shared selector over several keys also matches their cross
/// product, which `selects` then filters out.
#[test]
fn pools_share_node_lists() {
    let pool = |sel: &[(&str, &str)]| NodePatch {
        selector: sel
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..patch()
    };
    let many: Vec<NodePatch> = (0..64)
        .map(|i| pool(&[("gpuctl.dev/pool", &format!("p{i:03}"))]))
        .collect();
    let lists = nodes::node_list_selectors(&many);
    assert_eq!(lists.len(), 1, "{lists:?}");
    assert!(
        lists[0].starts_with("gpuctl.dev/pool in (p000,p001,"),
        "{}",
        lists[0]
    );
    assert!(lists[0].ends_with(",p063)"), "{}", lists[0]);
    // One pool: the equality selector it always had.
    assert_eq!(
        nodes::node_list_selectors(&many[..1]),
        ["gpuctl.dev/pool=p000"]
    );
    // Other key sets, a value a set-based selector cannot hold, and no selector at all: their
    // own LISTs.
    let mixed = vec![
        pool(&[("pool", "a"), ("zone", "x")]),
        pool(&[("pool", "b"), ("zone", "y")]),
        pool(&[("gpuctl.dev/pool", "c")]),
        pool(&[("gpuctl.dev/pool", "")]),
        pool(&[]),
    ];
    assert_eq!(
        nodes::node_list_selectors(&mixed),
        [
            "",
            "gpuctl.dev/pool=",
            "gpuctl.dev/pool=c",
            "pool in (a,b),zone in (x,y)"
        ]
    );
    let node =
        |pool: &str, zone: &str| json!({"metadata": {"labels": {"pool": pool, "zone": zone}}});
    let sel = |p: &NodePatch| p.selector.clone();
    assert!(nodes::selects(&sel(&mixed[0]), &node("a", "x")));
    // Listed by `pool in (a,b),zone in (x,y)` but selected by no pool.
    assert!(
        !mixed[..2]
            .iter()
            .any(|p| nodes::selects(&sel(p), &node("a", "y")))
    );
    // A long list is split so that no selector exceeds what proxies accept.
    let long: Vec<NodePatch> = (0..400)
        .map(|i| pool(&[("gpuctl.dev/pool", &format!("pool-with-a-long-name-{i:04}"))]))
        .collect();
    let lists = nodes::node_list_selectors(&long);
    assert!(
        lists.len() > 1 && lists.iter().all(|l| l.len() <= 4000),
        "{}",
        lists.len()
    );
    let listed: usize = lists.iter().map(|l| l.matches(',').count() + 1).sum();
    assert_eq!(listed, 400);
}

/// The content digest hashes exactly the bytes saved plans were made with (the object copied
/// without status and bookkeeping, keys sorted, compact JSON), now without the copies: a plan
/// saved by an earlier gpuctl is checked against the same digest.
#[test]
fn content_digest_hashes_the_sorted_object_without_copying_it() {
    use sha2::{Digest, Sha256};
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let reference = |obj: &Value| {
        let mut v = obj.clone();
        if let Value::Object(m) = &mut v {
            m.remove("status");
            if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                for k in ["resourceVersion", "managedFields", "generation"] {
                    meta.remove(k);
                }
            }
        }
        let digest = Sha256::digest(serde_json::to_vec(&sorted(&v)).unwrap());
        format!(
            "sha256:{}",
            digest
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        )
    };
    let mut live = stored(&quota());
    live["status"] = json!({"used": {"requests.nvidia.com/gpu": "2"}});
    live["metadata"]["managedFields"] = json!([{"manager": "gpuctl"}]);
    live["metadata"]["generation"] = json!(3);
    live["spec"]["scopes"] = json!(["b", {"z": 1, "a": "é\"\n"}]);
    live["zeta"] = json!({"status": "kept below the top", "metadata": {"generation": 1}});
    assert_eq!(stale::content_digest(&live), reference(&live));
    // Status and bookkeeping do not count; content does.
    let mut moved = live.clone();
    moved["status"] = json!({});
    moved["metadata"]["resourceVersion"] = json!("99");
    assert_eq!(stale::content_digest(&moved), stale::content_digest(&live));
    moved["spec"]["hard"]["requests.nvidia.com/gpu"] = json!("9");
    assert_ne!(stale::content_digest(&moved), stale::content_digest(&live));
    assert_eq!(stale::content_digest(&json!("x")), reference(&json!("x")));
}

/// A built-in kind's false value the live object lacks is what the API server stores for it
/// (`omitempty`): not asked about again on every plan. A custom resource stores what it is sent,
/// so there the same difference is dry-run.
#[test]
fn absent_zero_values_of_built_in_kinds_need_no_dry_run() {
    let pc = object(
        Phase::Foundation,
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": "batch", "labels": labels()}, "value": 1000, "globalDefault": false,
               "description": "batch jobs"}),
    );
    let mut live = stored(&pc);
    live.as_object_mut().unwrap().remove("globalDefault");
    live["metadata"]["managedFields"] = json!([{"manager": FIELD_MANAGER, "operation": "Apply",
        "fieldsV1": {"f:globalDefault": {}, "f:value": {}, "f:description": {}, "f:metadata": {"f:labels": {}}}}]);
    assert!(!objects::needs_dry_run(
        &pc,
        Some(&live),
        &BTreeSet::new(),
        &set_id()
    ));
    let mut s = set();
    s.objects.push(pc.clone());
    let mut v = snapshot_view();
    with_member(&mut v, live.clone());
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    let a = p
        .actions
        .iter()
        .find(|a| a.kind == "PriorityClass")
        .unwrap();
    assert_eq!(a.action, ActionKind::NoOp, "{:?}", a.changes);
    // A real change of a built-in kind is still dry-run.
    let mut other = live.clone();
    other["description"] = json!("old words");
    assert!(objects::needs_dry_run(
        &pc,
        Some(&other),
        &BTreeSet::new(),
        &set_id()
    ));

    let cq = object(
        Phase::Queues,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
               "metadata": {"name": "train", "labels": labels()}, "spec": {"stopPolicy": ""}}),
    );
    let mut live = stored(&cq);
    live["spec"].as_object_mut().unwrap().remove("stopPolicy");
    live["metadata"]["managedFields"] = json!([{"manager": FIELD_MANAGER, "operation": "Apply",
        "fieldsV1": {"f:spec": {"f:stopPolicy": {}}, "f:metadata": {"f:labels": {}}}}]);
    assert!(objects::needs_dry_run(
        &cq,
        Some(&live),
        &BTreeSet::new(),
        &set_id()
    ));
}

fn owned(stack: Stack, ns: &str, name: &str, objects: Reading<Vec<String>>) -> OwnedRelease {
    OwnedRelease {
        named: crate::live::release::NamedRelease {
            name: name.into(),
            namespace: ns.into(),
            release: LiveRelease {
                revision: 3,
                status: "deployed".into(),
                chart: name.into(),
                chart_version: "0.19.2".into(),
                values: json!({}),
            },
        },
        stack,
        objects,
    }
}

#[test]
fn a_dropped_component_plans_its_release_uninstall_blocked_while_its_objects_exist() {
    let mut s = set();
    s.undeclared = vec![Stack::Kueue, Stack::NetworkOperator];
    let mut view = snapshot_view();
    // Before the owned releases are read (snapshots, offline): no uninstall.
    let p = plan(&s, &view, PlanOptions::default()).unwrap();
    assert!(p.uninstalls.is_empty());
    view.owned_releases = Reading::Read(vec![
        owned(
            Stack::Kueue,
            "kueue-system",
            "kueue",
            Reading::Read(vec!["ClusterQueue/cq".into(), "LocalQueue/team/lq".into()]),
        ),
        owned(
            Stack::NetworkOperator,
            "nvidia-network-operator",
            "network-operator",
            Reading::Read(vec![]),
        ),
        // The GPU Operator is always declared: its release is never uninstalled.
        owned(
            Stack::GpuOperator,
            OPERATOR_NS,
            "gpu-operator",
            Reading::NotRead,
        ),
    ]);
    let p = plan(&s, &view, PlanOptions::default()).unwrap();
    let ids: Vec<String> = p.uninstalls.iter().map(|u| u.id()).collect();
    assert_eq!(
        ids,
        [
            "HelmRelease/kueue-system/kueue",
            "HelmRelease/nvidia-network-operator/network-operator"
        ]
    );
    assert_eq!(p.summary.uninstall, 2);
    assert!(p.summary.has_changes());
    let kueue = &p.uninstalls[0];
    assert_eq!(kueue.blockers, ["ClusterQueue/cq", "LocalQueue/team/lq"]);
    assert_eq!(kueue.api_groups, ["kueue.x-k8s.io"]);
    assert!(
        kueue
            .reason
            .contains("gpuctl.dev/blueprint=lab, gpuctl.dev/stack=kueue")
            && kueue
                .reason
                .contains("no longer declares spec.scheduling.kueue"),
        "{}",
        kueue.reason
    );
    let warnings = messages(&p, Severity::Warning);
    assert!(
        warnings.iter().any(|w| w.contains(
            "HelmRelease/kueue-system/kueue (Kueue release) is not uninstalled while objects of its kinds exist: ClusterQueue/cq, LocalQueue/team/lq"
        ) && w.contains("--force-uninstall")),
        "{warnings:?}"
    );
    // Apply runs helm for them (and for the operator release, which is not installed yet).
    let runs: Vec<(String, &str)> = helm_runs(&p).into_iter().map(|r| (r.id, r.verb)).collect();
    assert_eq!(
        runs,
        [
            (
                "HelmRelease/gpu-operator/gpu-operator".to_string(),
                "install"
            ),
            ("HelmRelease/kueue-system/kueue".to_string(), "uninstall"),
            (
                "HelmRelease/nvidia-network-operator/network-operator".to_string(),
                "uninstall"
            ),
        ]
    );
    // The plan file carries them (format 4).
    let back = Plan::from_json(&p.to_saved_json()).unwrap();
    assert_eq!(back.uninstalls, p.uninstalls);
    assert_eq!(back.format_version, 4);

    // A component still declared (here with `install: none`: something else installs it now) is
    // never uninstalled, only noted.
    s.undeclared = vec![];
    let p = plan(&s, &view, PlanOptions::default()).unwrap();
    assert!(p.uninstalls.is_empty());
    let warnings = messages(&p, Severity::Warning);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("Helm release kueue-system/kueue") && w.contains("leaves it alone")),
        "{warnings:?}"
    );
    // Releases of unknown ownership cannot be read: said, nothing planned.
    view.owned_releases = Reading::Failed("forbidden".into());
    let p = plan(&s, &view, PlanOptions::default()).unwrap();
    assert!(p.uninstalls.is_empty());
    assert!(
        messages(&p, Severity::Warning)
            .iter()
            .any(|w| w.contains("cannot read which Helm releases gpuctl installed")),
    );
}

/// A node with the DRA pool's selector, its device-plugin switch as given.
fn dra_node(name: &str, switch: Option<&str>) -> Value {
    let mut labels = json!({"gpuctl.dev/pool": "h100"});
    if let Some(s) = switch {
        labels["nvidia.com/gpu.deploy.device-plugin"] = json!(s);
    }
    json!({"metadata": {"name": name, "labels": labels}})
}

fn dra_pod(
    name: &str,
    node: &str,
    gpus: &[(&str, u64)],
    phase: &str,
) -> crate::live::workloads::LivePod {
    crate::live::workloads::LivePod {
        namespace: "research".into(),
        name: name.into(),
        uid: format!("u-{name}"),
        node: node.into(),
        phase: phase.into(),
        terminating: false,
        ready: true,
        gpus: gpus.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
        claims: 0,
        owner: None,
        role: crate::live::workloads::PodRole::Service,
        labels: BTreeMap::new(),
        grace_seconds: 30,
        do_not_disrupt: false,
    }
}

/// Moving a pool to DRA: refused while a pod on a moving node holds `nvidia.com/gpu` or a MIG
/// device (named, with its node), a warning with `force`; pods without device-plugin GPUs, pods
/// that finished and nodes already moved do not count; unread pods (a snapshot) warn.
#[test]
fn a_pool_moves_to_dra_only_without_device_plugin_gpus() {
    let mut p = patch();
    p.selector = BTreeMap::from([("gpuctl.dev/pool".to_string(), "h100".to_string())]);
    p.labels
        .insert("nvidia.com/gpu.deploy.device-plugin".into(), "false".into());
    p.dra_switch = Some("nvidia.com/gpu.deploy.device-plugin".into());
    let mut live = snapshot_view();
    live.nodes = Some(vec![
        dra_node("n1", None),
        dra_node("n2", Some("true")),
        dra_node("n3", Some("false")),
    ]);
    let f = nodes::dra_migrations(&live, std::slice::from_ref(&p), false);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].message.contains("not read"), "{}", f[0].message);

    live.migrating_pods = Some(BTreeMap::from([
        (
            "n1".to_string(),
            vec![
                dra_pod("train-0", "n1", &[("nvidia.com/gpu", 8)], "Running"),
                dra_pod("web", "n1", &[], "Running"),
                dra_pod("done", "n1", &[("nvidia.com/gpu", 1)], "Succeeded"),
            ],
        ),
        (
            "n2".to_string(),
            vec![dra_pod(
                "infer",
                "n2",
                &[("nvidia.com/mig-1g.10gb", 1)],
                "Running",
            )],
        ),
        (
            "n3".to_string(),
            vec![dra_pod("moved", "n3", &[("nvidia.com/gpu", 1)], "Running")],
        ),
    ]));
    let f = nodes::dra_migrations(&live, std::slice::from_ref(&p), false);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Error);
    let m = &f[0].message;
    assert!(
        m.contains("research/train-0 (nvidia.com/gpu: 8 on n1)"),
        "{m}"
    );
    assert!(
        m.contains("research/infer (nvidia.com/mig-1g.10gb: 1 on n2)"),
        "{m}"
    );
    assert!(m.contains("2 node(s) (n1, n2)"), "{m}");
    for not in ["web", "done", "moved"] {
        assert!(!m.contains(&format!("research/{not}")), "{not}: {m}");
    }
    let f = nodes::dra_migrations(&live, std::slice::from_ref(&p), true);
    assert_eq!(f[0].severity, Severity::Warning);

    live.migrating_pods = Some(BTreeMap::new());
    assert!(nodes::dra_migrations(&live, std::slice::from_ref(&p), false).is_empty());

    // Moved, but the device plugin still advertises GPUs on n3 (the operator has not acted yet).
    live.nodes.as_mut().unwrap()[2]["status"] =
        json!({"allocatable": {"cpu": "64", "nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "0"}});
    let f = nodes::dra_migrations(&live, std::slice::from_ref(&p), false);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].message.contains("1 node(s) of pool `train` (n3)")
            && f[0].message.contains("(nvidia.com/gpu)"),
        "{}",
        f[0].message
    );
    live.nodes.as_mut().unwrap()[2]["status"] = json!({"allocatable": {"nvidia.com/gpu": "0"}});
    assert!(nodes::dra_migrations(&live, std::slice::from_ref(&p), false).is_empty());
    p.dra_switch = None;
    live.migrating_pods = None;
    assert!(nodes::dra_migrations(&live, &[p], false).is_empty());
}

/// The DRA driver chart's release: a downgrade is an error; the first upgrade across v0.4.0 is an
/// error without the documented nameOverride and a warning with it; forward upgrades otherwise
/// pass.
#[test]
fn dra_driver_releases_go_forward_and_cross_the_rename_with_its_override() {
    let release = |to: &str, values: Value| HelmRelease {
        stack: gpuctl_pipeline::render::Stack::DraDriver,
        release: "nvidia-dra-driver-gpu".into(),
        chart: "dra-driver-nvidia-gpu".into(),
        version: to.into(),
        namespace: "nvidia-dra-driver-gpu".into(),
        install: InstallMode::Helm,
        values,
        source: Default::default(),
    };
    let live = |version: &str| crate::live::release::LiveRelease {
        revision: 3,
        status: "deployed".into(),
        chart: "nvidia-dra-driver-gpu".into(),
        chart_version: version.into(),
        values: json!({}),
    };
    let errors = |to: &str, from: &str, values: Value| -> Vec<(Severity, String)> {
        let (_, f) = helm::helm_plan(&release(to, values), Some(&live(from)));
        f.into_iter()
            .filter(|f| f.message.contains("DRA driver"))
            .map(|f| (f.severity, f.message))
            .collect()
    };
    let down = errors("25.8.0", "25.12.0", json!({}));
    assert_eq!(down.len(), 1);
    assert_eq!(down[0].0, Severity::Error);
    assert!(down[0].1.contains("no downgrade"), "{}", down[0].1);
    let cross = errors("0.4.0", "25.12.0", json!({}));
    assert_eq!(cross[0].0, Severity::Error);
    assert!(
        cross[0].1.contains("nameOverride: nvidia-dra-driver-gpu"),
        "{}",
        cross[0].1
    );
    let with = errors(
        "0.4.1",
        "25.12.0",
        json!({"nameOverride": "nvidia-dra-driver-gpu"}),
    );
    assert_eq!(with[0].0, Severity::Warning);
    assert!(with[0].1.contains("CRDs"), "{}", with[0].1);
    assert!(errors("0.5.0", "0.4.1", json!({})).is_empty());
    assert!(errors("25.12.0", "25.8.0", json!({})).is_empty());
    assert!(errors("25.12.0", "25.12.0", json!({})).is_empty());
}
