//! `plan` and `apply` against the real kube-apiserver of the test harness (docs/testing.md), with
//! hand-built rendered sets so each test controls exactly what changes. Every test works under a
//! unique prefix, so tests run in parallel on one server.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use gpuctl_cluster::apply::{self, ApplyError, ApplyOptions};
use gpuctl_cluster::lock::{self, LeaseGuard, Policy};
use gpuctl_cluster::read;
use gpuctl_cluster::{ConnectOptions, Kube};
use gpuctl_core::applyset::{self, ApplySetParent};
use gpuctl_core::blueprint::InstallMode;
use gpuctl_core::located::Severity;
use gpuctl_core::lock::Holder;
use gpuctl_core::plan::{self, ActionKind, Plan, PlanFinding, PlanOptions};
use gpuctl_core::render::{
    DRIVER_LABEL, HelmRelease, NodePatch, NodeTaint, Phase, RenderedObject, RenderedSet,
    TENANT_LABEL,
};
use gpuctl_test_skip::needs_test_cluster;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster, gpuctl_kube};
use support::fixture::{live_plan, quiet, snapshot_plan};
use support::gpuctl::Gpuctl;

/// A small rendered set under `prefix`: namespace, priority class, quota, Kueue flavor/cluster
/// queue/local queue, a Volcano queue, and one pool of nodes.
struct Fixture {
    prefix: String,
    quota: u32,
    with_volcano: bool,
    with_limit_range: bool,
}

impl Fixture {
    fn new(prefix: &str) -> Fixture {
        Fixture {
            prefix: prefix.to_string(),
            quota: 8,
            with_volcano: true,
            with_limit_range: false,
        }
    }

    fn ns(&self) -> String {
        format!("{}-ns", self.prefix)
    }

    fn parent(&self) -> ApplySetParent {
        ApplySetParent::for_blueprint(&self.prefix, &self.ns())
    }

    fn object(
        &self,
        phase: Phase,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        body: Value,
    ) -> RenderedObject {
        let mut manifest = json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {
                "name": name,
                "labels": {
                    applyset::PART_OF: self.parent().id(),
                    applyset::MANAGED_BY: "gpuctl",
                    applyset::BLUEPRINT_LABEL: self.prefix,
                },
            },
        });
        if let Some(ns) = namespace {
            manifest["metadata"]["namespace"] = json!(ns);
        }
        for (k, v) in body.as_object().expect("object body") {
            manifest[k] = v.clone();
        }
        RenderedObject {
            phase,
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_string),
            name: name.into(),
            manifest,
        }
    }

    fn set(&self) -> RenderedSet {
        let p = &self.prefix;
        let ns = self.ns();
        let mut objects = vec![
            self.object(Phase::Foundation, "v1", "Namespace", None, &ns, json!({})),
            self.object(Phase::Foundation, "scheduling.k8s.io/v1", "PriorityClass", None, &format!("{p}-pc"), json!({"value": 1000, "preemptionPolicy": "Never"})),
            self.object(Phase::Quotas, "v1", "ResourceQuota", Some(&ns), "gpu-quota", json!({"spec": {"hard": {"requests.nvidia.com/gpu": self.quota.to_string(), "pods": "50"}}})),
            self.object(Phase::Queues, "kueue.x-k8s.io/v1beta2", "ResourceFlavor", None, &format!("{p}-flavor"), json!({"spec": {"nodeLabels": {"gpuctl-test/pool": format!("{p}-pool")}}})),
            self.object(Phase::Queues, "kueue.x-k8s.io/v1beta2", "ClusterQueue", None, &format!("{p}-cq"), json!({"spec": {
                "namespaceSelector": {"matchLabels": {TENANT_LABEL: p}},
                "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": format!("{p}-flavor"), "resources": [{"name": "nvidia.com/gpu", "nominalQuota": self.quota.to_string()}]}]}],
            }})),
            self.object(Phase::Queues, "kueue.x-k8s.io/v1beta2", "LocalQueue", Some(&ns), "default", json!({"spec": {"clusterQueue": format!("{p}-cq")}})),
        ];
        if self.with_volcano {
            objects.push(self.object(
                Phase::Queues,
                "scheduling.volcano.sh/v1beta1",
                "Queue",
                None,
                &format!("{p}-vq"),
                json!({"spec": {"weight": 4, "reclaimable": true}}),
            ));
        }
        if self.with_limit_range {
            objects.push(self.object(Phase::Quotas, "v1", "LimitRange", Some(&ns), "gpu-defaults", json!({"spec": {"limits": [{"type": "Container", "default": {"nvidia.com/gpu": "1"}, "defaultRequest": {"nvidia.com/gpu": "1"}}]}})));
        }
        objects.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        RenderedSet {
            releases: vec![],
            undeclared: vec![],
            blueprint: p.clone(),
            objects,
            node_patches: vec![NodePatch {
                pool: format!("{p}-pool"),
                selector: BTreeMap::from([("gpuctl-test/pool".to_string(), format!("{p}-pool"))]),
                expected_nodes: 2,
                node_range: None,
                labels: BTreeMap::from([(
                    "gpu.example.com/tier".to_string(),
                    "premium".to_string(),
                )]),
                taints: vec![NodeTaint {
                    key: "nvidia.com/gpu".into(),
                    value: Some("present".into()),
                    effect: "NoSchedule".into(),
                }],
                expected_products: vec!["NVIDIA-H100-80GB-HBM3".into()],
                expected_driver: "580.105.08".into(),
                blue_green: false,
                topology_levels: Vec::new(),
                dra_switch: None,
            }],
            helm: HelmRelease {
                stack: Default::default(),
                release: "gpu-operator".into(),
                chart: "nvidia/gpu-operator".into(),
                version: "v26.7.0".into(),
                namespace: ns,
                install: InstallMode::None,
                values: json!({}),
                source: Default::default(),
            },
            documents: BTreeMap::new(),
        }
    }
}

/// Short waits; the apply lock of a run cut off mid-way expires after 3s, and a later apply waits
/// up to 20s for it.
fn opts() -> ApplyOptions {
    ApplyOptions {
        poll: std::time::Duration::from_millis(200),
        crd_timeout: std::time::Duration::from_secs(5),
        wait_timeout: std::time::Duration::from_secs(20),
        lock_duration: std::time::Duration::from_secs(3),
        lock_timeout: std::time::Duration::from_secs(20),
        ..ApplyOptions::default()
    }
}

/// Connects as `test`, with a [`Fixture`] named `suffix`.
async fn connected(test: &str, suffix: &str) -> Option<(TestCluster, Kube, Fixture)> {
    let tc = TestCluster::connect(test).await?;
    let k = gpuctl_kube().await;
    let f = Fixture::new(&tc.name(suffix));
    Some((tc, k, f))
}

/// Connects as `test` and applies a [`Fixture`] named `suffix`: where most tests start.
async fn applied(test: &str, suffix: &str) -> Option<(TestCluster, Kube, Fixture)> {
    let (tc, k, f) = connected(test, suffix).await?;
    let p = live_plan(&k, &f.set()).await;
    apply::apply(&k, &p, &opts(), &quiet())
        .await
        .expect("apply");
    Some((tc, k, f))
}

/// The two H100 nodes of the fixture's pool.
async fn nodes(tc: &TestCluster, prefix: &str) {
    let gpu = GpuNode::h100(8)
        .driver("580.105.08", (13, 0))
        .label("gpuctl-test/pool", &format!("{prefix}-pool"));
    tc.create_gpu_nodes(2, &gpu).await.expect("nodes");
}

fn actions(plan: &Plan) -> Vec<(ActionKind, String)> {
    plan.actions
        .iter()
        .filter(|a| a.action != ActionKind::NoOp)
        .map(|a| (a.action, a.id()))
        .collect()
}

#[needs_test_cluster]
#[tokio::test]
async fn apply_then_plan_reports_no_changes() {
    let Some((tc, k, f)) = connected("apply_noop", "noop").await else {
        return;
    };
    nodes(&tc, &f.prefix).await;
    let first = live_plan(&k, &f.set()).await;
    assert_eq!(first.summary.create, 7, "{:#?}", actions(&first));
    assert_eq!(first.summary.nodes, 2);
    apply::apply(&k, &first, &opts(), &quiet())
        .await
        .expect("apply");

    let second = live_plan(&k, &f.set()).await;
    assert!(
        !second.summary.has_changes(),
        "second plan: {:#?} {:#?}",
        actions(&second),
        second.nodes
    );
    assert_eq!(second.summary.unchanged, 7);

    // The ApplySet parent names its kinds, so kubectl (and gpuctl's prune) find every member.
    let cm: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(k.client(), &f.ns());
    let parent = cm.get(&f.parent().name).await.expect("parent exists");
    let ann = parent.metadata.annotations.unwrap();
    let kinds = &ann[applyset::CONTAINS_GROUP_KINDS];
    for gk in [
        "ClusterQueue.kueue.x-k8s.io",
        "Namespace",
        "Queue.scheduling.volcano.sh",
        "ResourceQuota",
    ] {
        assert!(
            kinds.split(',').any(|k| k == gk),
            "{gk} missing from {kinds}"
        );
    }
    assert_eq!(
        parent.metadata.labels.unwrap()[applyset::ID],
        f.parent().id()
    );

    // Node labels and taints landed per key, leaving GFD's labels alone.
    let node_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(k.client());
    for n in node_api
        .list(
            &kube::api::ListParams::default()
                .labels(&format!("gpuctl-test/pool={}-pool", f.prefix)),
        )
        .await
        .unwrap()
    {
        let labels = n.metadata.labels.unwrap();
        assert_eq!(labels["gpu.example.com/tier"], "premium");
        assert_eq!(labels["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
        let taints = n.spec.unwrap().taints.unwrap();
        assert_eq!(
            taints.iter().filter(|t| t.key == "nvidia.com/gpu").count(),
            1
        );
    }
}

#[needs_test_cluster]
#[tokio::test]
async fn an_edit_yields_exactly_the_expected_actions() {
    let Some((_tc, k, mut f)) = applied("apply_edit", "edit").await else {
        return;
    };

    f.quota = 16;
    f.with_volcano = false;
    f.with_limit_range = true;
    let p = live_plan(&k, &f.set()).await;
    let mut got = actions(&p);
    got.sort();
    let ns = f.ns();
    let mut want = vec![
        (ActionKind::Create, format!("LimitRange/{ns}/gpu-defaults")),
        (ActionKind::Update, format!("ResourceQuota/{ns}/gpu-quota")),
        (ActionKind::Update, format!("ClusterQueue/{}-cq", f.prefix)),
        (ActionKind::Delete, format!("Queue/{}-vq", f.prefix)),
    ];
    want.sort();
    assert_eq!(got, want);
    let quota = p
        .actions
        .iter()
        .find(|a| a.kind == "ResourceQuota")
        .unwrap();
    assert_eq!(quota.changes.len(), 1, "{:#?}", quota.changes);
    assert_eq!(
        quota.changes[0].path,
        "spec.hard.\"requests.nvidia.com/gpu\""
    );
    assert_eq!(quota.changes[0].before, Some(json!("8")));
    assert_eq!(quota.changes[0].after, Some(json!("16")));

    apply::apply(&k, &p, &opts(), &quiet())
        .await
        .expect("apply edit");
    let again = live_plan(&k, &f.set()).await;
    assert!(!again.summary.has_changes(), "{:#?}", actions(&again));
}

#[needs_test_cluster]
#[tokio::test]
async fn prune_removes_only_members() {
    let Some((tc, k, mut f)) = applied("apply_prune", "prune").await else {
        return;
    };

    // An object that looks like ours (same gpuctl labels) but is not a member of the set.
    let cm: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(k.client(), &f.ns());
    let lookalike = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lookalike", "namespace": f.ns(),
        "labels": {applyset::MANAGED_BY: "gpuctl", applyset::BLUEPRINT_LABEL: f.prefix}}});
    cm.patch(
        "lookalike",
        &PatchParams::apply("someone-else"),
        &Patch::Apply(&lookalike),
    )
    .await
    .unwrap();

    f.with_volcano = false;
    let p = live_plan(&k, &f.set()).await;
    assert_eq!(
        actions(&p),
        vec![(ActionKind::Delete, format!("Queue/{}-vq", f.prefix))]
    );
    apply::apply(&k, &p, &opts(), &quiet())
        .await
        .expect("prune");

    let queues = tc.dynamic("scheduling.volcano.sh", "v1beta1", "Queue", "queues", false);
    assert!(
        queues
            .get_opt(&format!("{}-vq", f.prefix))
            .await
            .unwrap()
            .is_none(),
        "member was pruned"
    );
    assert!(
        cm.get_opt("lookalike").await.unwrap().is_some(),
        "non-member survived"
    );

    assert_eq!(p.summary.delete, 1, "only the dropped queue was pruned");

    // Protected kinds are kept without --prune-protected: dropping the PriorityClass from the set
    // plans no delete for it, only a finding that says so; with the flag it is pruned.
    let mut set = f.set();
    set.objects.retain(|o| o.kind != "PriorityClass");
    let p = live_plan(&k, &set).await;
    assert!(
        !p.actions.iter().any(|a| a.kind == "PriorityClass"),
        "{:#?}",
        actions(&p)
    );
    assert!(
        p.findings.iter().any(|x| x
            .message
            .contains(&format!("PriorityClass/{}-pc", f.prefix))
            && x.message.contains("--prune-protected")),
        "{:#?}",
        p.findings
    );
    let forced = read::plan(
        &k,
        &set,
        PlanOptions {
            prune_protected: true,
            ..PlanOptions::default()
        },
        32,
    )
    .await
    .expect("plan");
    assert_eq!(
        actions(&forced),
        vec![(ActionKind::Delete, format!("PriorityClass/{}-pc", f.prefix))]
    );
}

#[needs_test_cluster]
#[tokio::test]
async fn another_managers_field_is_a_conflict() {
    let Some((_tc, k, mut f)) = applied("apply_conflict", "conflict").await else {
        return;
    };

    // Someone raises the quota by hand with their own field manager.
    let rq: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(k.client(), &f.ns());
    let edit = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "12"}}});
    rq.patch(
        "gpu-quota",
        &PatchParams::apply("kubectl-edit").force(),
        &Patch::Apply(&edit),
    )
    .await
    .unwrap();

    f.quota = 16;
    let p = live_plan(&k, &f.set()).await;
    let c = p
        .actions
        .iter()
        .find(|a| a.kind == "ResourceQuota")
        .unwrap();
    assert_eq!(c.action, ActionKind::Conflict, "{c:#?}");
    assert!(
        c.reason.as_deref().unwrap().contains("kubectl-edit"),
        "{:?}",
        c.reason
    );

    match apply::apply(&k, &p, &opts(), &quiet()).await {
        Err(ApplyError::Conflicts(list)) => assert!(list[0].contains("gpu-quota"), "{list:?}"),
        other => panic!("expected a conflict refusal, got {other:?}"),
    }
    let forced = ApplyOptions {
        force_conflicts: true,
        ..opts()
    };
    apply::apply(&k, &p, &forced, &quiet())
        .await
        .expect("forced apply");
    let now = rq.get("gpu-quota").await.unwrap();
    assert_eq!(
        now.spec.unwrap().hard.unwrap()["requests.nvidia.com/gpu"].0,
        "16"
    );
}

#[needs_test_cluster]
#[tokio::test]
async fn an_object_of_another_blueprint_is_a_conflict() {
    let Some((tc, k, a)) = applied("apply_other_set", "own-a").await else {
        return;
    };

    // Blueprint b also declares a's quota. Both apply as field manager `gpuctl`, so server-side
    // apply cannot see a conflict: b's apply would silently replace a's fields.
    let b = Fixture::new(&tc.name("own-b"));
    let mut set = b.set();
    set.objects.push(b.object(
        Phase::Quotas,
        "v1",
        "ResourceQuota",
        Some(&a.ns()),
        "gpu-quota",
        json!({"spec": {"hard": {"pods": "10"}}}),
    ));
    set.objects.sort_by(|x, y| x.sort_key().cmp(&y.sort_key()));
    let p = live_plan(&k, &set).await;
    let rq_id = format!("ResourceQuota/{}/gpu-quota", a.ns());
    let c = p.actions.iter().find(|x| x.id() == rq_id).unwrap();
    assert_eq!(c.action, ActionKind::Conflict, "{c:#?}");
    let reason = c.reason.as_deref().unwrap();
    assert!(
        reason.contains(&format!("blueprint `{}`", a.prefix)) && reason.contains(&a.parent().id()),
        "{reason}"
    );
    assert_eq!(
        p.summary.conflict,
        1,
        "only the shared object: {:#?}",
        actions(&p)
    );

    // Refused before anything is written: b's own namespace is not created either.
    match apply::apply(&k, &p, &opts(), &quiet()).await {
        Err(ApplyError::Conflicts(list)) => {
            assert!(list.len() == 1 && list[0].contains(&rq_id), "{list:?}")
        }
        other => panic!("expected a conflict refusal, got {other:?}"),
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(k.client());
    assert!(namespaces.get_opt(&b.ns()).await.unwrap().is_none());

    // Forced, the quota moves to b's set, and now a's plan reports it as b's.
    let forced = ApplyOptions {
        force_conflicts: true,
        ..opts()
    };
    apply::apply(&k, &p, &forced, &quiet())
        .await
        .expect("forced apply");
    let p = live_plan(&k, &a.set()).await;
    let c = p.actions.iter().find(|x| x.id() == rq_id).unwrap();
    assert_eq!(c.action, ActionKind::Conflict, "{c:#?}");
    assert!(
        c.reason
            .as_deref()
            .unwrap()
            .contains(&format!("blueprint `{}`", b.prefix)),
        "{:?}",
        c.reason
    );
}

/// Writes revision `revision` of release `gpu-operator` the way Helm 3's Secret storage driver does
/// (helm `pkg/storage/driver`: JSON, gzip, base64, in `data.release` of a labelled Secret). This
/// plays helm, which is not installed here; gpuctl only reads what helm writes.
async fn put_helm_release(
    k: &Kube,
    namespace: &str,
    revision: u64,
    status: &str,
    chart_version: &str,
    values: Value,
) {
    use base64::Engine;
    use std::io::Write;
    let release = json!({"name": "gpu-operator", "namespace": namespace, "version": revision,
        "info": {"status": status, "description": "test"},
        "chart": {"metadata": {"name": "gpu-operator", "version": chart_version}},
        "config": values, "manifest": "---\n"});
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&serde_json::to_vec(&release).unwrap())
        .unwrap();
    let encoded = base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap());
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": format!("sh.helm.release.v1.gpu-operator.v{revision}"), "namespace": namespace,
            "labels": {"owner": "helm", "name": "gpu-operator", "version": revision.to_string(), "status": status}},
        "data": {"release": base64::engine::general_purpose::STANDARD.encode(encoded)},
    }))
    .unwrap();
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(k.client(), namespace);
    api.patch(
        secret.metadata.name.as_deref().unwrap(),
        &PatchParams::apply("helm").force(),
        &Patch::Apply(&secret),
    )
    .await
    .unwrap();
}

#[needs_test_cluster]
#[tokio::test]
async fn the_operator_release_is_diffed_against_its_live_values() {
    let Some((_tc, k, f)) = connected("apply_helm", "helm").await else {
        return;
    };
    let mut set = f.set();
    set.helm.install = InstallMode::Helm;
    set.helm.values =
        json!({"driver": {"version": "580.95.05"}, "dcgmExporter": {"enabled": true}});
    let no_helm = ApplyOptions {
        run_helm: false,
        ..opts()
    };

    // No release yet: an install, and the plan says so.
    let p = live_plan(&k, &set).await;
    let hp = p.helm_release.as_ref().expect("helm part of the plan");
    assert_eq!(hp.action, plan::HelmAction::Install);
    assert_eq!(p.summary.helm, 1);
    apply::apply(&k, &p, &no_helm, &quiet())
        .await
        .expect("apply");

    // Someone installed an older chart with other values, one of them a credential.
    put_helm_release(&k, &f.ns(), 1, "deployed", "v25.10.1",
        json!({"driver": {"version": "570.195.03"}, "dcgmExporter": {"enabled": true}, "ngc": {"apiKey": "s3cr3t-key"}})).await;
    let p = live_plan(&k, &set).await;
    let hp = p.helm_release.as_ref().unwrap();
    assert_eq!(hp.action, plan::HelmAction::Upgrade);
    assert_eq!(hp.revision, Some(1));
    assert_eq!(hp.chart_version_before.as_deref(), Some("v25.10.1"));
    let changes: Vec<(String, Option<Value>, Option<Value>)> = hp
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.before.clone(), c.after.clone()))
        .collect();
    assert_eq!(
        changes,
        vec![
            (
                "driver.version".to_string(),
                Some(json!("570.195.03")),
                Some(json!("580.95.05"))
            ),
            (
                "ngc".to_string(),
                Some(json!({"apiKey": "(sensitive)"})),
                None
            ),
        ],
        "exactly the value changes, the credential masked"
    );
    assert!(!p.to_json().contains("s3cr3t"));
    let text = gpuctl::output::plan::human(&p, gpuctl::settings::Style::Plain, false);
    assert!(
        text.contains(&format!("~ upgrade  HelmRelease/{}/gpu-operator", f.ns()))
            && text.contains("revision 1 (deployed), chart nvidia/gpu-operator v25.10.1 -> v26.7.0, 2 value(s) change")
            && !text.contains("s3cr3t"),
        "{text}"
    );
    // A saved plan is stale once the release moves on.
    put_helm_release(
        &k,
        &f.ns(),
        2,
        "deployed",
        "v26.7.0",
        set.helm.values.clone(),
    )
    .await;
    match apply::check_stale(&k, &p, 16).await {
        Err(ApplyError::Stale(moved)) => assert!(
            moved
                .iter()
                .any(|m| m.contains("gpu-operator: revision 1 -> 2")),
            "{moved:?}"
        ),
        other => panic!("expected a stale refusal, got {other:?}"),
    }

    // Revision 2 has this chart and exactly these values: nothing to do, and apply skips helm.
    let p = live_plan(&k, &set).await;
    let hp = p.helm_release.as_ref().unwrap();
    assert_eq!(hp.action, plan::HelmAction::NoOp, "{hp:#?}");
    assert!(!p.summary.has_changes(), "{:#?}", actions(&p));
    let report = apply::apply(&k, &p, &opts(), &quiet())
        .await
        .expect("apply");
    assert!(
        report.helm.contains("up to date (revision 2"),
        "{}",
        report.helm
    );

    // A snapshot carries the release, so CI plans see the same.
    let (snap, from_snapshot) = snapshot_plan(&k, &set).await;
    assert_eq!(snap.helm_release.as_ref().map(|r| r.revision), Some(2));
    assert_eq!(from_snapshot.helm_release, p.helm_release);

    // A release stuck mid-operation is upgraded again, with a warning that says why.
    put_helm_release(
        &k,
        &f.ns(),
        3,
        "pending-upgrade",
        "v26.7.0",
        set.helm.values.clone(),
    )
    .await;
    let p = live_plan(&k, &set).await;
    assert_eq!(
        p.helm_release.as_ref().unwrap().action,
        plan::HelmAction::Upgrade
    );
    assert!(
        p.findings.iter().any(|f| f.severity == Severity::Warning
            && f.message.contains("revision 3 is `pending-upgrade`")),
        "{:#?}",
        p.findings
    );

    // A newest revision that is not helm's encoding: a warning naming the Secret and what to run.
    let garbage: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "sh.helm.release.v1.gpu-operator.v4", "namespace": f.ns(),
            "labels": {"owner": "helm", "name": "gpu-operator", "version": "4", "status": "deployed"}},
        "data": {"release": "bm90IGEgcmVsZWFzZQ=="},
    }))
    .unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(k.client(), &f.ns());
    secrets
        .patch(
            "sh.helm.release.v1.gpu-operator.v4",
            &PatchParams::apply("test"),
            &Patch::Apply(&garbage),
        )
        .await
        .unwrap();
    let p = live_plan(&k, &set).await;
    assert!(p.helm_release.is_none());
    let w = p
        .findings
        .iter()
        .find(|f| f.message.contains("cannot read the live Helm release"))
        .unwrap_or_else(|| panic!("{:#?}", p.findings));
    assert!(
        w.message.contains(&format!(
            "Secret/{}/sh.helm.release.v1.gpu-operator.v4 cannot be read",
            f.ns()
        )) && w
            .message
            .contains(&format!("helm history gpu-operator -n {}", f.ns())),
        "{}",
        w.message
    );
}

#[needs_test_cluster]
#[tokio::test]
async fn a_stale_saved_plan_is_refused() {
    let Some((_tc, k, mut f)) = applied("apply_stale", "stale").await else {
        return;
    };

    f.quota = 24;
    let saved =
        Plan::from_json(&live_plan(&k, &f.set()).await.to_saved_json()).expect("round trip");
    // The object moves after planning.
    let rq: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(k.client(), &f.ns());
    let touch = json!({"metadata": {"annotations": {"touched": "yes"}}});
    rq.patch("gpu-quota", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .unwrap();

    match apply::check_stale(&k, &saved, 16).await {
        Err(ApplyError::Stale(moved)) => {
            assert_eq!(moved.len(), 1, "{moved:?}");
            assert!(
                moved[0].contains(&format!("ResourceQuota/{}/gpu-quota", f.ns())),
                "{moved:?}"
            );
        }
        other => panic!("expected a stale refusal, got {other:?}"),
    }
    // An untouched saved plan passes.
    let fresh = Plan::from_json(&live_plan(&k, &f.set()).await.to_saved_json()).unwrap();
    apply::check_stale(&k, &fresh, 16)
        .await
        .expect("fresh plan is not stale");
}

#[needs_test_cluster]
#[tokio::test]
async fn node_mismatches_are_findings() {
    let Some((tc, k, f)) = connected("plan_nodes", "nodes").await else {
        return;
    };
    // One node of the wrong model and an old driver; the pool expects two.
    tc.create_gpu_node(
        "odd",
        &GpuNode::a100_80gb(8)
            .driver("550.127.05", (12, 4))
            .label("gpuctl-test/pool", &format!("{}-pool", f.prefix)),
    )
    .await
    .unwrap();
    let p = live_plan(&k, &f.set()).await;
    let msgs: Vec<&str> = p.findings.iter().map(|x| x.message.as_str()).collect();
    assert!(
        msgs.iter().any(|m| m.contains("expects 2 nodes but 1")),
        "{msgs:#?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.contains("reports GPU `NVIDIA-A100-SXM4-80GB`")),
        "{msgs:#?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.contains("1 node(s) of pool") && m.contains("run driver 550.127.05")),
        "{msgs:#?}"
    );
    assert!(
        !msgs.iter().any(|m| m.contains("would move")),
        "a node without a driver label moves nowhere: {msgs:#?}"
    );

    // A node on one NVIDIADriver CR that the blueprint assigns to another: every driver pod of
    // the pool would restart at once. An error when the blueprint upgrades blue-green (that is
    // `gpuctl upgrade driver`'s job), a warning under the operator's rolling upgrades.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(k.client());
    let odd = tc.name("odd");
    let label = json!({"metadata": {"labels": {DRIVER_LABEL: "pool-old"}}});
    nodes
        .patch(&odd, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let mut set = f.set();
    set.node_patches[0]
        .labels
        .insert(DRIVER_LABEL.into(), "pool-new".into());
    for (blue_green, severity) in [(true, Severity::Error), (false, Severity::Warning)] {
        set.node_patches[0].blue_green = blue_green;
        let p = live_plan(&k, &set).await;
        let moves: Vec<&PlanFinding> = p
            .findings
            .iter()
            .filter(|x| x.message.contains("would move"))
            .collect();
        assert_eq!(moves.len(), 1, "{:#?}", p.findings);
        assert_eq!(moves[0].severity, severity);
        assert!(
            moves[0].message.contains(&format!(
                "1 node(s) of pool `{}-pool` ({odd}) would move from NVIDIADriver `pool-old` to `pool-new`",
                f.prefix
            )),
            "{}",
            moves[0].message
        );
        assert_eq!(
            moves[0]
                .message
                .contains("gpuctl upgrade driver BLUEPRINT --pool"),
            blue_green
        );
    }
}

/// The fault-injecting proxy (`tests/support/fault_proxy.py`) in front of the harness.
struct FaultProxy {
    child: std::process::Child,
    kubeconfig: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl FaultProxy {
    fn start(fail_every: u32, cut_after_writes: u32) -> FaultProxy {
        use std::io::BufRead;
        let harness =
            std::env::var("GPUCTL_HARNESS_DIR").expect("the harness env names its directory");
        let kc = kube::config::Kubeconfig::read_from(
            std::env::var(support::cluster::KUBECONFIG_ENV).unwrap(),
        )
        .unwrap();
        let upstream = kc.clusters[0]
            .cluster
            .as_ref()
            .unwrap()
            .server
            .clone()
            .unwrap();
        let pki = std::path::Path::new(&harness).join("pki");
        let mut child = std::process::Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/support/fault_proxy.py"
            ))
            .args(["--upstream", &upstream])
            .arg("--ca")
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("admin.crt"))
            .arg("--key")
            .arg(pki.join("admin.key"))
            .args([
                "--fail-every",
                &fail_every.to_string(),
                "--cut-after-writes",
                &cut_after_writes.to_string(),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs the proxy");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("proxy prints its port");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: http://127.0.0.1:{port}\n\
                 users:\n- name: proxy\n  user: {{}}\ncontexts:\n- name: proxy\n  context: {{cluster: proxy, user: proxy}}\ncurrent-context: proxy\n"
            ),
        )
        .unwrap();
        FaultProxy {
            child,
            kubeconfig,
            _dir: dir,
        }
    }

    async fn kube(&self) -> Kube {
        gpuctl_cluster::connect(&ConnectOptions {
            kubeconfig: Some(self.kubeconfig.clone()),
            context: None,
        })
        .await
        .expect("connect via proxy")
    }

    /// Stops the proxy and returns its counters.
    fn stop(mut self) -> Value {
        drop(self.child.stdin.take());
        let out = self.child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        serde_json::from_str(text.lines().last().unwrap_or("{}")).unwrap_or(Value::Null)
    }
}

#[needs_test_cluster]
#[tokio::test]
async fn throttling_and_server_errors_are_survived() {
    let Some(tc) = TestCluster::connect("apply_faults").await else {
        return;
    };
    let proxy = FaultProxy::start(3, 0);
    let k = proxy.kube().await;
    let f = Fixture::new(&tc.name("faults"));
    nodes(&tc, &f.prefix).await;
    let p = live_plan(&k, &f.set()).await;
    apply::apply(&k, &p, &opts(), &quiet())
        .await
        .expect("apply through 429/500/503");
    let again = live_plan(&k, &f.set()).await;
    assert!(!again.summary.has_changes(), "{:#?}", actions(&again));
    let counters = proxy.stop();
    assert!(
        counters["faults"].as_u64().unwrap() >= 5,
        "the proxy injected faults: {counters}"
    );
}

#[needs_test_cluster]
#[tokio::test]
async fn an_interrupted_apply_converges_on_rerun() {
    let Some((_tc, direct, f)) = connected("apply_interrupted", "cut").await else {
        return;
    };
    // The API goes away after 5 writes of the apply (the lock, the namespace, the ApplySet parent,
    // the PriorityClass): mid-way through its phases, holding its lock.
    let proxy = FaultProxy::start(0, 5);
    let k = proxy.kube().await;
    let p = live_plan(&k, &f.set()).await;
    let fast = ApplyOptions {
        parallelism: 1,
        ..opts()
    };
    let err = apply::apply(&k, &p, &fast, &quiet())
        .await
        .expect_err("the apply is cut off");
    assert!(
        err.to_string().contains("re-run") || err.to_string().contains("error"),
        "{err}"
    );
    proxy.stop();

    // Some objects exist, not all.
    let mid = live_plan(&direct, &f.set()).await;
    assert!(
        mid.summary.create > 0 && mid.summary.unchanged > 0,
        "cut mid-way: {:#?}",
        actions(&mid)
    );

    // Re-running converges and loses nothing.
    apply::apply(&direct, &mid, &opts(), &quiet())
        .await
        .expect("re-run");
    let done = live_plan(&direct, &f.set()).await;
    assert!(!done.summary.has_changes(), "{:#?}", actions(&done));
    assert_eq!(done.summary.unchanged, 7);
}

#[needs_test_cluster]
#[tokio::test]
async fn objects_of_missing_crds_wait_for_them() {
    let Some((tc, k, f)) = connected("apply_crd", "crd").await else {
        return;
    };
    let mut set = f.set();
    let group = format!("{}.example.gpuctl.dev", tc.name("g"));
    let mut widget = f.object(
        Phase::Queues,
        &format!("{group}/v1"),
        "Widget",
        None,
        &format!("{}-w", f.prefix),
        json!({"spec": {"size": 3}}),
    );
    widget.manifest["apiVersion"] = json!(format!("{group}/v1"));
    set.objects.push(widget);
    let p = live_plan(&k, &set).await;
    let w = p.actions.iter().find(|a| a.kind == "Widget").unwrap();
    assert_eq!(w.action, ActionKind::CreateAfterCrd);

    match apply::apply(&k, &p, &opts(), &quiet()).await {
        Err(ApplyError::WaitTimeout { what, .. }) => assert!(what.contains("Widget"), "{what}"),
        other => panic!("expected a bounded CRD wait, got {other:?}"),
    }

    // Install the CRD; apply now finishes.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Cluster", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}});
    tc.crds()
        .patch(
            &format!("widgets.{group}"),
            &PatchParams::apply("test"),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    k.forget_kinds();
    let p = live_plan(&k, &set).await;
    apply::apply(
        &k,
        &p,
        &ApplyOptions {
            crd_timeout: std::time::Duration::from_secs(30),
            ..opts()
        },
        &quiet(),
    )
    .await
    .expect("apply after CRD");
    let again = live_plan(&k, &set).await;
    assert!(!again.summary.has_changes(), "{:#?}", actions(&again));
}

// --- The apply lock and admission webhooks that are not ready yet --------------------------------

/// Records the waits a run reports.
#[derive(Default)]
struct Recorder {
    waits: std::sync::Mutex<Vec<String>>,
}

impl Recorder {
    fn waits(&self) -> Vec<String> {
        self.waits.lock().unwrap().clone()
    }

    fn waited_for(&self, needle: &str) -> bool {
        self.waits().iter().any(|w| w.contains(needle))
    }
}

impl gpuctl_cluster::Reporter for Recorder {
    fn phase(&self, _: &str, _: usize) {}
    fn step(&self, _: &str, _: &str) {}
    fn failed(&self, _: &str, _: &str) {}
    fn waiting(&self, what: &str, _: u64, _: u64) {
        self.waits.lock().unwrap().push(what.to_string());
    }
    fn note(&self, _: &str) {}
    fn done(&self, _: Value, _: String) {}
}

/// Polls `cond` every 100 ms for up to `secs` seconds.
async fn eventually(secs: u64, what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond().await {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(secs),
            "timed out after {secs}s waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Takes the blueprint's apply lock as another run would (`holder`), for 10s unless renewed.
async fn hold_lock(k: &Kube, plan: &Plan, holder: &Holder) -> LeaseGuard {
    let policy = Policy {
        duration: std::time::Duration::from_secs(10),
        poll: std::time::Duration::from_millis(200),
        wait: std::time::Duration::ZERO,
        outwait_silent: false,
    };
    lock::acquire(
        k,
        &apply::apply_lock(plan),
        holder,
        &policy,
        &gpuctl_cluster::report::Silent,
    )
    .await
    .expect("the test takes the lock")
}

async fn quota_hard(k: &Kube, ns: &str) -> String {
    let rq: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(k.client(), ns);
    let q = rq.get("gpu-quota").await.unwrap();
    q.spec.unwrap().hard.unwrap()["requests.nvidia.com/gpu"]
        .0
        .clone()
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_applies_one_writes_the_other_refuses_as_stale() {
    let Some((_tc, k, f)) = applied("apply_race", "race").await else {
        return;
    };
    // A raises the quota; B drops the Volcano queue and sets the quota to something else. Both
    // are planned before either writes, as two CI jobs of two merged pull requests would.
    let mut a = Fixture::new(&f.prefix);
    a.quota = 111;
    let mut b = Fixture::new(&f.prefix);
    b.quota = 222;
    b.with_volcano = false;
    let (plan_a, plan_b) = (live_plan(&k, &a.set()).await, live_plan(&k, &b.set()).await);

    // Another run holds the lock while both start, so both must wait for it.
    let other = lock::this_run("test", None);
    let held = hold_lock(&k, &plan_a, &other).await;
    let (ka, kb) = (gpuctl_kube().await, gpuctl_kube().await);
    let (ra, rb) = (Recorder::default(), Recorder::default());
    let waiting = ApplyOptions {
        lock_timeout: std::time::Duration::from_secs(60),
        ..opts()
    };
    let release = async {
        eventually(30, "both applies to wait for the lock", async || {
            ra.waited_for("held by gpuctl test") && rb.waited_for("held by gpuctl test")
        })
        .await;
        held.release().await;
    };
    let (res_a, res_b, ()) = tokio::join!(
        apply::apply(&ka, &plan_a, &waiting, &ra),
        apply::apply(&kb, &plan_b, &waiting, &rb),
        release
    );

    let (winner, loser) = match (&res_a, &res_b) {
        (Ok(_), Err(e)) => ((&a, "111"), e),
        (Err(e), Ok(_)) => ((&b, "222"), e),
        other => panic!("exactly one apply must write: {other:?}"),
    };
    match loser {
        ApplyError::Stale(moved) => assert!(
            moved
                .iter()
                .any(|m| m.contains(&format!("ResourceQuota/{}/gpu-quota", f.ns()))),
            "{moved:?}"
        ),
        other => panic!("the second apply must refuse as stale, got {other}"),
    }
    assert_eq!(quota_hard(&k, &f.ns()).await, winner.1);
    let after = live_plan(&k, &winner.0.set()).await;
    assert!(!after.summary.has_changes(), "{:#?}", actions(&after));
    // The lock is free again.
    let info = lock::info(&k, &f.ns(), &gpuctl_core::names::apply_lock_name(&f.prefix))
        .await
        .unwrap()
        .expect("the Lease stays, released");
    assert!(!info.live(), "{info:?}");
}

#[needs_test_cluster]
#[tokio::test]
async fn a_held_lock_refuses_at_once_naming_its_holder() {
    let Some((_tc, k, mut f)) = applied("apply_locked", "locked").await else {
        return;
    };
    f.quota = 30;
    let p = live_plan(&k, &f.set()).await;
    let env = |key: &str| match key {
        "GITLAB_CI" => Some("true".to_string()),
        "CI_JOB_URL" => Some("https://gitlab.example/acme/gpu/-/jobs/7".to_string()),
        _ => None,
    };
    let other = Holder::new("apply", Some("alice"), "build-7", 42, 1, env);
    let held = hold_lock(&k, &p, &other).await;
    let recorder = Recorder::default();
    let now = ApplyOptions {
        lock_timeout: std::time::Duration::ZERO,
        ..opts()
    };
    match apply::apply(&k, &p, &now, &recorder).await {
        Err(e @ ApplyError::Locked { .. }) => {
            let text = e.to_string();
            for part in [
                "gpuctl apply by alice on build-7 in https://gitlab.example/acme/gpu/-/jobs/7",
                &format!("Lease/{}/gpuctl-applyset-{}", f.ns(), f.prefix),
                "gpuctl unlock",
                "nothing was applied",
            ] {
                assert!(text.contains(part), "`{part}` missing from: {text}");
            }
        }
        other => panic!("expected a lock refusal, got {other:?}"),
    }
    assert!(recorder.waits().is_empty(), "{:?}", recorder.waits());
    assert_eq!(quota_hard(&k, &f.ns()).await, "8", "nothing was written");
    held.release().await;
    apply::apply(&k, &p, &now, &quiet())
        .await
        .expect("applies once the lock is free");
    assert_eq!(quota_hard(&k, &f.ns()).await, "30");
}

/// A validating webhook on the ResourceQuotas of namespace `ns`, behind Service `service` (with no
/// endpoints until a test adds them), answered by `tests/support/webhook_server.py`.
struct Webhook {
    name: String,
    config: String,
    service: String,
    ns: String,
    server: Option<std::process::Child>,
    endpoint: (String, u16),
    _dir: tempfile::TempDir,
}

impl Webhook {
    async fn register(k: &Kube, ns: &str, service: &str) -> Webhook {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let dns = format!("{service}.{ns}.svc");
        let ok = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "1",
            ])
            .args([
                "-subj",
                &format!("/CN={dns}"),
                "-addext",
                &format!("subjectAltName=DNS:{dns}"),
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl runs");
        assert!(ok.success(), "openssl made a certificate");
        let mut server = std::process::Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/support/webhook_server.py"
            ))
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs the webhook server");
        let mut line = String::new();
        std::io::BufReader::new(server.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let (port, ip) = line.trim().split_once(' ').expect("PORT IP");
        let endpoint = (ip.to_string(), port.parse().unwrap());
        let name = format!("check.{service}.gpuctl.test");
        let config = format!("{ns}-{service}");
        let apply = |v: Value| async move {
            let api: Api<kube::api::DynamicObject> = Api::all_with(
                k.client(),
                &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                    v["apiVersion"]
                        .as_str()
                        .unwrap()
                        .rsplit_once('/')
                        .map_or("", |x| x.0),
                    v["apiVersion"]
                        .as_str()
                        .unwrap()
                        .rsplit('/')
                        .next()
                        .unwrap(),
                    v["kind"].as_str().unwrap(),
                )),
            );
            let name = v["metadata"]["name"].as_str().unwrap().to_string();
            api.patch(&name, &PatchParams::apply("test"), &Patch::Apply(&v))
                .await
                .unwrap();
        };
        let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(k.client(), ns);
        services
            .patch(
                service,
                &PatchParams::apply("test"),
                &Patch::Apply(json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": service, "namespace": ns},
                    "spec": {"ports": [{"name": "https", "port": 443, "targetPort": endpoint.1}]}})),
            )
            .await
            .unwrap();
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&cert).unwrap());
        apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": config},
            "webhooks": [{"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Fail", "timeoutSeconds": 5,
                "clientConfig": {"service": {"namespace": ns, "name": service, "port": 443, "path": "/validate"}, "caBundle": ca},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["resourcequotas"]}]}]}))
        .await;
        Webhook {
            name,
            config,
            service: service.to_string(),
            ns: ns.to_string(),
            server: Some(server),
            endpoint,
            _dir: dir,
        }
    }

    /// Gives the Service a ready endpoint: the webhook server.
    async fn add_endpoint(&self, k: &Kube) {
        let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
            Api::namespaced(k.client(), &self.ns);
        let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{}-1", self.service), "namespace": self.ns,
                "labels": {"kubernetes.io/service-name": self.service}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [self.endpoint.0], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": self.endpoint.1, "protocol": "TCP"}]});
        slices
            .patch(
                &format!("{}-1", self.service),
                &PatchParams::apply("test"),
                &Patch::Apply(&slice),
            )
            .await
            .unwrap();
    }

    /// Removes the configuration and stops the server; returns how many reviews it answered.
    async fn remove(mut self, k: &Kube) -> u64 {
        let api: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
            Api::all(k.client());
        api.delete(&self.config, &Default::default()).await.unwrap();
        let mut child = self.server.take().unwrap();
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        let counters: Value = serde_json::from_str(
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("{}"),
        )
        .unwrap_or(Value::Null);
        counters["requests"].as_u64().unwrap_or(0)
    }
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_waits_once_for_a_webhook_until_its_service_has_an_endpoint() {
    let Some((_tc, k, mut f)) = applied("apply_webhook", "hook").await else {
        return;
    };
    f.quota = 12;
    let p = live_plan(&k, &f.set()).await;
    let hook = Webhook::register(&k, &f.ns(), "quota-check").await;

    let waiting = Arc::new(Recorder::default());
    let kw = gpuctl_kube().await;
    kw.webhooks.configure(
        std::time::Duration::from_secs(60),
        std::time::Duration::from_millis(200),
        waiting.clone(),
    );
    let expect = format!(
        "admission webhook `{}` (Service {}/quota-check) to have a ready endpoint",
        hook.name,
        f.ns()
    );
    let endpoint_later = async {
        eventually(30, "apply to wait for the webhook", async || {
            waiting.waited_for(&expect)
        })
        .await;
        hook.add_endpoint(&k).await;
    };
    let o = opts();
    let (res, ()) = tokio::join!(apply::apply(&kw, &p, &o, waiting.as_ref()), endpoint_later);
    res.expect("apply proceeds once the webhook has an endpoint");
    assert_eq!(quota_hard(&k, &f.ns()).await, "12");
    let waits = waiting.waits();
    assert!(
        waits.iter().all(|w| w == &expect),
        "one wait, for one webhook: {waits:?}"
    );
    let reviews = hook.remove(&k).await;
    // The dry-run probe and the write, at most once more if the probe raced the endpoint: no
    // retry storm.
    assert!(
        (1..=3).contains(&reviews),
        "the webhook answered {reviews} reviews"
    );

    // A webhook that never gets an endpoint stops the apply after its bound, naming it.
    f.quota = 13;
    let p = live_plan(&k, &f.set()).await;
    let dead = Webhook::register(&k, &f.ns(), "quota-dead").await;
    let kd = gpuctl_kube().await;
    kd.webhooks.configure(
        std::time::Duration::from_secs(2),
        std::time::Duration::from_millis(200),
        Arc::new(gpuctl_cluster::report::Silent),
    );
    match apply::apply(&kd, &p, &opts(), &quiet()).await {
        Err(ApplyError::Failed { failures, .. }) => assert!(
            failures.iter().any(|m| m.contains(&format!(
                "admission webhook `{}` did not answer within 2s",
                dead.name
            )) && m.contains(&format!("Service {}/quota-dead", f.ns()))),
            "{failures:?}"
        ),
        other => panic!("expected the webhook wait to run out, got {other:?}"),
    }
    dead.remove(&k).await;
}

/// The real binary, with the harness's kubeconfig.
fn gpuctl(args: &[&str]) -> std::process::Output {
    Gpuctl::new(args)
        .arg("--kubeconfig")
        .arg(std::env::var(support::cluster::KUBECONFIG_ENV).unwrap())
        .output()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Starts `gpuctl apply PLAN` that blocks on `hook` (no endpoints) while holding the lock, waits
/// until the lock is held, and kills it (SIGKILL: nothing is released).
async fn kill_blocked_apply(k: &Kube, f: &Fixture, plan: &std::path::Path) {
    let mut child = Gpuctl::new(["apply"])
        .arg(plan)
        .arg("--kubeconfig")
        .arg(std::env::var(support::cluster::KUBECONFIG_ENV).unwrap())
        .args([
            "--lock-duration",
            "3s",
            "--webhook-timeout",
            "10m",
            "--output",
            "json",
        ])
        .spawn(std::process::Stdio::null(), std::process::Stdio::null());
    let name = gpuctl_core::names::apply_lock_name(&f.prefix);
    eventually(60, "the apply to hold its lock", async || {
        lock::info(k, &f.ns(), &name)
            .await
            .unwrap()
            .is_some_and(|i| i.live() && i.command.as_deref() == Some("apply"))
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_applys_lock_expires_and_unlock_clears_it() {
    let Some((_tc, k, mut f)) = applied("apply_killed", "killed").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let save = async |f: &Fixture, file: &str| {
        let path = dir.path().join(file);
        std::fs::write(&path, live_plan(&k, &f.set()).await.to_saved_json()).unwrap();
        path
    };
    // The quota write is held up by a webhook whose Service has no endpoints, so the apply sits
    // in its quotas phase holding the lock until it is killed.
    f.quota = 9;
    let first = save(&f, "first.json").await;
    let hook = Webhook::register(&k, &f.ns(), "quota-hold").await;
    kill_blocked_apply(&k, &f, &first).await;

    let o = gpuctl(&["apply", first.to_str().unwrap(), "--lock-timeout", "0s"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    for part in [
        "another apply of blueprint",
        "is held by gpuctl apply",
        "gpuctl unlock BLUEPRINT",
    ] {
        assert!(
            stderr(&o).contains(part),
            "`{part}` missing: {}",
            stderr(&o)
        );
    }
    // Nobody renews it: it expires after its 3s, and the next apply takes it over.
    hook.remove(&k).await;
    let name = gpuctl_core::names::apply_lock_name(&f.prefix);
    eventually(20, "the killed run's lock to expire", async || {
        !lock::info(&k, &f.ns(), &name)
            .await
            .unwrap()
            .unwrap()
            .live()
    })
    .await;
    let o = gpuctl(&["apply", first.to_str().unwrap(), "--lock-timeout", "0s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(quota_hard(&k, &f.ns()).await, "9");

    // Killed again; `gpuctl unlock` clears the lock at once (and asks first).
    f.quota = 10;
    let second = save(&f, "second.json").await;
    let hook = Webhook::register(&k, &f.ns(), "quota-hold").await;
    kill_blocked_apply(&k, &f, &second).await;
    hook.remove(&k).await;
    let o = gpuctl(&["unlock", second.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("confirm with --yes"), "{}", stderr(&o));
    assert!(
        lock::info(&k, &f.ns(), &name)
            .await
            .unwrap()
            .unwrap()
            .live()
    );
    let o = gpuctl(&["unlock", second.to_str().unwrap(), "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("Removed Lease/{}/{name}", f.ns()))
            && stderr(&o).contains("is held by gpuctl apply"),
        "{}",
        stderr(&o)
    );
    let o = gpuctl(&["apply", second.to_str().unwrap(), "--lock-timeout", "0s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(quota_hard(&k, &f.ns()).await, "10");
    let done = live_plan(&k, &f.set()).await;
    assert!(!done.summary.has_changes(), "{:#?}", actions(&done));
}

#[needs_test_cluster]
#[tokio::test]
async fn apply_does_not_run_beside_a_driver_upgrade_of_its_pools() {
    let Some((_tc, k, mut f)) = applied("apply_upgrade", "upg").await else {
        return;
    };
    f.quota = 14;
    let p = live_plan(&k, &f.set()).await;
    let pool = format!("{}-pool", f.prefix);
    let upgrade = gpuctl_cluster::upgrade::journal::acquire(
        &k,
        &f.ns(),
        &pool,
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(200),
        &gpuctl_cluster::report::Silent,
    )
    .await
    .expect("the test plays a running upgrade");
    match apply::apply(&k, &p, &opts(), &quiet()).await {
        Err(ApplyError::Upgrade(msgs)) => assert!(
            msgs.iter().any(|m| m.contains(&format!(
                "a driver upgrade holds Lease/{}/gpuctl-upgrade-{pool}",
                f.ns()
            )) && m.contains("gpuctl upgrade driver")),
            "{msgs:?}"
        ),
        other => panic!("expected a refusal beside a running upgrade, got {other:?}"),
    }
    assert_eq!(quota_hard(&k, &f.ns()).await, "8", "nothing was written");
    upgrade.release().await;
    apply::apply(&k, &p, &opts(), &quiet())
        .await
        .expect("applies once the upgrade is done");
}

/// A member whose kind the blueprint no longer renders is found through the ApplySet parent's
/// group-kinds, resolved in whichever version the group serves it: NVIDIADriver is served only as
/// nvidia.com/v1alpha1 while the group prefers v1 (ClusterPolicy), so resolving through the
/// preferred version alone missed it and prune left it behind.
#[needs_test_cluster]
#[tokio::test]
async fn a_dropped_member_of_a_kind_outside_the_groups_preferred_version_is_pruned() {
    let Some((tc, k, f)) = connected("apply_prune_v1alpha1", "prunedrv").await else {
        return;
    };
    let cr = format!("{}-drv", f.prefix);
    let mut set = f.set();
    set.objects.push(f.object(
        Phase::Operator,
        "nvidia.com/v1alpha1",
        "NVIDIADriver",
        None,
        &cr,
        json!({"spec": {"default": false, "driverType": "gpu", "image": "driver",
                        "nodeSelector": {"gpuctl-test/pool": format!("{}-pool", f.prefix)}}}),
    ));
    set.objects.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let p = live_plan(&k, &set).await;
    apply::apply(&k, &p, &opts(), &quiet())
        .await
        .expect("apply");
    assert!(
        tc.nvidia_drivers().get_opt(&cr).await.unwrap().is_some(),
        "the CR was applied"
    );
    // The set without any NVIDIADriver: the parent still records NVIDIADriver.nvidia.com.
    let p = live_plan(&k, &f.set()).await;
    assert_eq!(
        actions(&p),
        vec![(ActionKind::Delete, format!("NVIDIADriver/{cr}"))]
    );
    apply::apply(&k, &p, &opts(), &quiet())
        .await
        .expect("prune");
    assert!(
        tc.nvidia_drivers().get_opt(&cr).await.unwrap().is_none(),
        "the dropped NVIDIADriver member was pruned"
    );
}

// --- Hierarchies (issue 14): Volcano parents before children, children pruned first ------------

/// A Volcano queue hierarchy under `f`'s prefix whose children sort before their parent, so an
/// apply in render order (or all at once) would create a child before its parent, which Volcano's
/// webhook refuses (`failed to get parent queue ...`).
fn hierarchy(f: &Fixture) -> Vec<RenderedObject> {
    let p = &f.prefix;
    let q = |name: String, parent: String, gpus: u32| {
        f.object(
            Phase::Queues,
            "scheduling.volcano.sh/v1beta1",
            "Queue",
            None,
            &name,
            json!({"spec": {"weight": 1, "parent": parent, "deserved": {"nvidia.com/gpu": gpus.to_string()}}}),
        )
    };
    vec![
        q(format!("{p}-z-parent"), "root".into(), 16),
        q(format!("{p}-a-child"), format!("{p}-z-parent"), 8),
        q(format!("{p}-b-child"), format!("{p}-z-parent"), 8),
        q(format!("{p}-a-leaf"), format!("{p}-a-child"), 4),
    ]
}

fn resource_version(v: &DynamicObjectValue) -> u64 {
    v.metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .expect("numeric resourceVersion")
}

type DynamicObjectValue = kube::api::DynamicObject;

#[needs_test_cluster]
#[tokio::test]
async fn queue_parents_are_created_before_children_and_pruned_after_them() {
    let Some((tc, k, f)) = connected("apply_hierarchy", "tree").await else {
        return;
    };
    let p = f.prefix.clone();
    let mut set = f.set();
    set.objects.extend(hierarchy(&f));
    set.objects.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let plan = live_plan(&k, &set).await;
    let action = |name: &str| {
        plan.actions
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.action)
            .unwrap()
    };
    assert_eq!(action(&format!("{p}-z-parent")), ActionKind::Create);
    for child in ["a-child", "b-child", "a-leaf"] {
        assert_eq!(
            action(&format!("{p}-{child}")),
            ActionKind::CreateAfterParent,
            "{child}"
        );
    }
    apply::apply(&k, &plan, &opts(), &quiet())
        .await
        .expect("apply creates the hierarchy in one run");

    // etcd's resourceVersion orders writes: every parent was written before its children.
    let queues = tc.dynamic("scheduling.volcano.sh", "v1beta1", "Queue", "queues", false);
    let rv =
        async |name: &str| resource_version(&queues.get(&format!("{p}-{name}")).await.unwrap());
    let (parent, a, b, leaf) = (
        rv("z-parent").await,
        rv("a-child").await,
        rv("b-child").await,
        rv("a-leaf").await,
    );
    assert!(
        parent < a && parent < b && a < leaf,
        "{parent} {a} {b} {leaf}"
    );

    // Planned again against the hierarchy now live: nothing left to do.
    let again = live_plan(&k, &set).await;
    assert!(!again.summary.has_changes(), "{:#?}", actions(&again));

    // The blueprint drops the hierarchy: children are pruned before their parents.
    let p2 = live_plan(&k, &f.set()).await;
    let deletes: Vec<String> = p2
        .actions
        .iter()
        .filter(|a| a.action == ActionKind::Delete)
        .map(|a| a.name.clone())
        .collect();
    let at = |n: &str| {
        deletes
            .iter()
            .position(|d| *d == format!("{p}-{n}"))
            .unwrap_or_else(|| panic!("{n} not pruned: {deletes:?}"))
    };
    assert!(at("a-leaf") < at("a-child"), "{deletes:?}");
    assert!(
        at("a-child") < at("z-parent") && at("b-child") < at("z-parent"),
        "{deletes:?}"
    );
    apply::apply(&k, &p2, &opts(), &quiet())
        .await
        .expect("prune removes the hierarchy in one run");
    for n in ["z-parent", "a-child", "b-child", "a-leaf"] {
        assert!(
            queues.get_opt(&format!("{p}-{n}")).await.unwrap().is_none(),
            "{n} was pruned"
        );
    }
}

/// With Kueue installed by someone else, a live plan reads Kueue's manager ConfigMap and says
/// where it contradicts the blueprint's `scheduling.kueue.config` (issue 14).
#[needs_test_cluster]
#[tokio::test]
async fn a_running_kueues_configuration_is_read_and_compared() {
    let Some((tc, k, _f)) = connected("kueue_config", "kcfg").await else {
        return;
    };
    let facts = &gpuctl_core::profiles::Catalog::embedded()
        .queueing()
        .kueue_configuration;
    let cm = &facts.config_map;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(tc.client.clone(), &cm.namespace);
    let declared = gpuctl_core::blueprint::KueueConfig {
        fair_sharing: Some(Default::default()),
        ..Default::default()
    };
    if cms.get_opt(&cm.name).await.unwrap().is_some() {
        // A real Kueue runs on this server: its configuration is read, whatever it says.
        assert!(matches!(
            read::kueue_config(&k).await,
            read::KueueConfigReading::Read(_)
        ));
        return;
    }
    assert_eq!(
        read::kueue_config(&k).await,
        read::KueueConfigReading::Missing
    );
    let missing = plan::kueue_config_findings(&declared, &[], Some(&read::kueue_config(&k).await));
    assert!(missing[0].message.contains("does not exist"), "{missing:?}");

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(tc.client.clone());
    namespaces
        .patch(
            &cm.namespace,
            &PatchParams::apply("gpuctl-test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cm.namespace}})),
        )
        .await
        .unwrap();
    // The chart's own configuration: fair sharing off.
    let chart = serde_saphyr::to_string(&facts.chart_defaults).unwrap();
    cms.patch(
        &cm.name,
        &PatchParams::apply("gpuctl-test"),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm.name, "namespace": cm.namespace},
            "data": {cm.key.as_str(): chart}})),
    )
    .await
    .unwrap();
    let reading = read::kueue_config(&k).await;
    let found = plan::kueue_config_findings(&declared, &[], Some(&reading));
    cms.delete(&cm.name, &Default::default()).await.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].severity, Severity::Warning);
    assert!(
        found[0].message.contains("fair sharing on") && found[0].message.contains(&cm.name),
        "{}",
        found[0].message
    );
    // The blueprint that says what the chart says: nothing to report.
    assert!(
        plan::kueue_config_findings(&Default::default(), &[], Some(&reading)).is_empty(),
        "{:?}",
        plan::kueue_config_findings(&Default::default(), &[], Some(&reading))
    );
}
