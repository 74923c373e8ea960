//! Import as a pure function of the live view: every example blueprint's cluster, built by hand,
//! imports to a blueprint that validates and whose plan against the same cluster only adopts.

use std::path::Path;

use serde_json::{Value, json};

use super::fixture::{hand_built, unowned};
use super::*;
use gpuctl_model::object::ObjectRef;
use gpuctl_plan::live::Source;
use gpuctl_plan::plan::{ActionKind, HelmAction};

fn today() -> Date {
    jiff::civil::date(2026, 11, 30)
}

fn catalog() -> &'static Catalog {
    Catalog::embedded()
}

fn render_text(
    file: &str,
    text: &str,
) -> (
    gpuctl_model::blueprint::Blueprint,
    gpuctl_pipeline::render::RenderedSet,
) {
    let loaded = gpuctl_model::blueprint::load_str(file, text).expect("loads");
    let v = gpuctl_pipeline::validate::validate(
        loaded,
        catalog(),
        gpuctl_pipeline::validate::Options { today: today() },
    )
    .unwrap_or_else(|r| panic!("{file} validates: {:?}", r.findings));
    let bp = v.blueprint().clone();
    let set =
        gpuctl_pipeline::render::render(&v, catalog(), &Templates::embedded()).expect("renders");
    (bp, set)
}

fn example(name: &str) -> String {
    let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../blueprints")).join(name);
    std::fs::read_to_string(p).expect("example exists")
}

/// The examples that validate (mixed-lab.yaml is the broken one the fixed one repairs).
const EXAMPLES: &[&str] = &[
    "dgx-h100-training.yaml",
    "gb200-nvl72-training.yaml",
    "inference-mig.yaml",
    "mixed-lab-fixed.yaml",
    "air-gapped.yaml",
];

fn opts() -> ImportOptions {
    ImportOptions {
        name: None,
        today: today(),
    }
}

#[test]
fn every_example_cluster_imports_to_a_blueprint_whose_plan_only_adopts() {
    for file in EXAMPLES {
        let (bp, set) = render_text(file, &example(file));
        let (live, ctx) = hand_built(&bp, &set);
        let imported = import(&live, &ctx, catalog(), &opts());
        assert!(imported.valid, "{file}:\n{}", imported.yaml);
        let changes: Vec<&Note> = imported
            .warnings
            .iter()
            .filter(|w| w.message.contains("a plan of this blueprint would"))
            .collect();
        assert!(
            changes.is_empty(),
            "{file}: {changes:#?}\n{}",
            imported.yaml
        );

        // Independently of import's own self-check: render the imported text and plan it.
        let (_, again) = render_text("imported.yaml", &imported.yaml);
        // The name comes from gpuctl's alert rules when the cluster has them.
        let alerts = &bp.spec.monitoring.alerts;
        let named = alerts.xid || alerts.ecc_errors || alerts.temperature_c.is_some();
        let expected = if named {
            bp.metadata.name.as_str()
        } else {
            "imported"
        };
        assert_eq!(again.blueprint, expected, "{file}");
        let plan = gpuctl_plan::plan::plan(&again, &live, PlanOptions::default()).unwrap();
        let not_adopted: Vec<String> = plan
            .actions
            .iter()
            .filter(|a| a.action != ActionKind::Adopt)
            .map(|a| format!("{:?} {} {:?}", a.action, a.id(), a.changes))
            .collect();
        assert!(
            not_adopted.is_empty(),
            "{file}: {not_adopted:#?}\n{}",
            imported.yaml
        );
        let missing: Vec<String> = set
            .objects
            .iter()
            .filter(|o| {
                !plan
                    .actions
                    .iter()
                    .any(|a| a.kind == o.kind && a.name == o.name && a.namespace == o.namespace)
            })
            .map(|o| format!("{} {}/{}", o.api_version, o.kind, o.name))
            .collect();
        // Every rendered object is in the imported blueprint's plan, the Network Operator's and
        // the Kueue Topology objects included.
        assert_eq!(plan.actions.len(), set.objects.len(), "{file}: {missing:?}");
        assert!(
            plan.nodes.is_empty(),
            "{file}: node changes {:#?}",
            plan.nodes
        );
        if let Some(h) = &plan.helm_release {
            assert_eq!(
                h.action,
                HelmAction::NoOp,
                "{file}: {:#?}\n{}",
                h.changes,
                imported.yaml
            );
        }
        assert_eq!(imported.plan_counts.adopt, set.objects.len(), "{file}");
        assert_eq!(
            imported.plan_counts.change + imported.plan_counts.create,
            0,
            "{file}"
        );
        // Same input, same bytes.
        assert_eq!(
            imported.yaml,
            import(&live, &ctx, catalog(), &opts()).yaml,
            "{file}"
        );
    }
}

#[test]
fn objects_already_in_the_set_are_unchanged_and_adoption_is_idempotent() {
    let file = "dgx-h100-training.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (mut live, _) = hand_built(&bp, &set);
    // What apply --adopt leaves: each object with the membership label added, nothing else.
    let id = gpuctl_plan::plan::parent_of(&set).id();
    let mut members = std::collections::BTreeMap::new();
    for o in live.objects.values_mut() {
        o["metadata"]["labels"][gpuctl_model::applyset::PART_OF] = json!(id);
        members.insert(ObjectRef::of(o).unwrap(), o.clone());
    }
    live.members = Some(members);
    let plan = gpuctl_plan::plan::plan(&set, &live, PlanOptions::default()).unwrap();
    assert!(plan.actions.iter().all(|a| a.action == ActionKind::NoOp));
    assert!(!plan.summary.has_changes());
    // The informational labels gpuctl puts on what it creates are not added to adopted objects.
    assert!(plan.actions.iter().all(|a| {
        a.manifest.as_ref().unwrap()["metadata"]["labels"][gpuctl_model::applyset::MANAGED_BY]
            .is_null()
    }));
}

#[test]
fn a_field_difference_on_an_unowned_object_is_an_adopting_update() {
    let file = "dgx-h100-training.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (mut live, _) = hand_built(&bp, &set);
    let pc = ObjectRef::new("scheduling.k8s.io/v1", "PriorityClass", None, "batch-low");
    live.objects.get_mut(&pc).unwrap()["value"] = json!(999);
    let plan = gpuctl_plan::plan::plan(&set, &live, PlanOptions::default()).unwrap();
    let a = plan.actions.iter().find(|a| a.object_ref() == pc).unwrap();
    assert_eq!(a.action, ActionKind::Update);
    assert!(a.adopt);
    assert_eq!(a.changes.len(), 1, "{:?}", a.changes);
    assert_eq!(a.changes[0].path, "value");
    assert_eq!(gpuctl_plan::plan::adoptions(&plan).len(), set.objects.len());
    assert_eq!(plan.summary.adopt, set.objects.len() - 1);
}

fn hand_made_cluster() -> (LiveView, ImportContext) {
    let mut live = LiveView::empty(Source::Snapshot {
        server: None,
        fingerprint: None,
        captured_at: None,
    });
    let objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}),
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": "ml"},
               "spec": {"hard": {"requests.nvidia.com/gpu": "8", "requests.example.com/fpga": "2", "pods": "20"}}}),
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "caps", "namespace": "ml"},
               "spec": {"limits": [{"type": "Container", "default": {"nvidia.com/gpu": "1"},
                                    "defaultRequest": {"nvidia.com/gpu": "1"}, "max": {"nvidia.com/gpu": "4"}}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a100"},
               "spec": {"nodeLabels": {"pool": "a100"}}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "cpu-only"}, "spec": {}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "main"},
               "spec": {"resourceGroups": [
                   {"coveredResources": ["cpu"], "flavors": [{"name": "cpu-only", "resources": [{"name": "cpu", "nominalQuota": "100"}]}]},
                   {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "default", "namespace": "ml"},
               "spec": {"clusterQueue": "main"}}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "system-node-critical"}, "value": 2000001000}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "PreemptLowerPriority"}),
    ];
    for o in objects {
        live.objects.insert(ObjectRef::of(&o).unwrap(), o);
    }
    live.nodes = Some(
        (0..2)
            .map(|i| {
                json!({"metadata": {"name": format!("gpu-{i}"), "labels": {
                    "pool": "a100", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8",
                    "nvidia.com/cuda.driver-version.full": "580.105.08"}}})
            })
            .collect(),
    );
    live.helm_release = gpuctl_plan::live::Reading::Read(None);
    (
        live,
        ImportContext {
            operator_namespace: None,
            kubernetes_version: Some("v1.34.2".into()),
            releases: None,
            releases_unread: 0,
        },
    )
}

#[test]
fn what_gpuctl_cannot_express_is_a_comment_at_its_place_and_a_warning() {
    let (live, ctx) = hand_made_cluster();
    let imported = import(&live, &ctx, catalog(), &opts());
    let warned = |needle: &str| {
        assert!(
            imported.warnings.iter().any(|w| w.message.contains(needle)),
            "no warning with {needle:?}: {:#?}",
            imported.warnings
        );
        assert!(
            imported.yaml.contains(needle),
            "no comment with {needle:?}:\n{}",
            imported.yaml
        );
    };
    warned(
        "`requests.example.com/fpga: 2` in ResourceQuota ml/gpu quotas a resource no GPU pool provides",
    );
    warned("LimitRange ml/caps sets `max`");
    warned("ClusterQueue `main` quotas ResourceFlavor `cpu-only`, which selects no GPU node pool");
    warned("gpuctl names the tenant's quota `ml-quota`");
    // The comments sit at their place: the quota notes above the tenant's quota.
    let quota_at = imported
        .yaml
        .find("\n      quota:")
        .expect("a tenant quota");
    let note_at = imported.yaml.find("example.com/fpga").unwrap();
    assert!(note_at < quota_at, "{}", imported.yaml);
    assert!(
        imported
            .yaml
            .contains("      # ClusterQueue `main` has 2 resource groups"),
        "{}",
        imported.yaml
    );
    // System PriorityClasses are not imported; the pool is named after its flavor.
    assert!(!imported.yaml.contains("system-node-critical"));
    assert!(imported.yaml.contains("name: a100\n"), "{}", imported.yaml);
    let v: Value = serde_saphyr::from_str(&imported.yaml).unwrap();
    assert_eq!(
        v["spec"]["tenants"][0]["quota"],
        json!({"nvidia.com/gpu": "8", "pods": "20"})
    );
    assert_eq!(
        v["spec"]["tenants"][0]["defaults"],
        json!({"nvidia.com/gpu": "1"})
    );
    assert_eq!(
        v["spec"]["nodePools"][0]["gpu"],
        json!({"model": "A100-SXM4-80GB", "count": 8})
    );
    assert_eq!(v["spec"]["gpuOperator"]["install"], "none");
    assert_eq!(v["spec"]["gpuOperator"]["driver"]["version"], "580.105.08");
    // Kueue would hold the tenant's pods (they request cpu, the queue quotas GPUs only): the
    // finding is a comment above the field it is about, and the header says so.
    assert!(!imported.valid);
    assert!(
        imported
            .yaml
            .contains("      # validate: GPU075 tenant `ml`'s pods request `cpu`"),
        "{}",
        imported.yaml
    );
    assert!(
        imported
            .yaml
            .contains("It does not pass `gpuctl validate` yet")
    );
}

#[test]
fn unowned_strips_only_gpuctls_labels() {
    let m = json!({"metadata": {"name": "a", "labels": {PART_OF_KEY: "x", "app.kubernetes.io/managed-by": "gpuctl", "keep": "1"}}});
    assert_eq!(
        unowned(&m),
        json!({"metadata": {"name": "a", "labels": {"keep": "1"}}})
    );
}

const PART_OF_KEY: &str = gpuctl_model::applyset::PART_OF;

#[test]
fn a_generated_cluster_of_about_5000_objects_round_trips() {
    let text = crate::testgen::blueprint(64, 600, 2);
    let (bp, set) = render_text("scale.yaml", &text);
    assert!(set.objects.len() >= 4_900, "{} objects", set.objects.len());
    let (live, ctx) = hand_built(&bp, &set);
    // Through the snapshot file format, as `gpuctl snapshot --all` writes it.
    let snap = crate::snapshot::Snapshot::capture_all(&live, &ctx);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.json");
    std::fs::write(&path, snap.to_json()).unwrap();
    let (live, ctx) = crate::snapshot::Snapshot::read(&path)
        .unwrap()
        .import_view()
        .expect("an --all snapshot");
    let imported = import(&live, &ctx, catalog(), &opts());
    assert!(imported.valid, "{:#?}", imported.warnings);
    assert_eq!(imported.plan_counts.adopt, set.objects.len());
    assert_eq!(imported.plan_counts.change + imported.plan_counts.create, 0);
    let (_, again) = render_text("imported.yaml", &imported.yaml);
    assert_eq!(again.objects.len(), set.objects.len());
    let plan = gpuctl_plan::plan::plan(&again, &live, PlanOptions::default()).unwrap();
    assert!(plan.actions.iter().all(|a| a.action == ActionKind::Adopt));
    assert!(plan.nodes.is_empty());
    assert_eq!(plan.helm_release.map(|h| h.action), Some(HelmAction::NoOp));
}

#[test]
fn a_snapshot_for_one_blueprint_is_not_an_import_snapshot() {
    let file = "dgx-h100-training.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (live, ctx) = hand_built(&bp, &set);
    let mut snap = crate::snapshot::Snapshot::capture_all(&live, &ctx);
    assert!(snap.import_view().is_some());
    snap.import = None;
    assert!(snap.import_view().is_none());
}

#[test]
fn an_object_gpuctl_wrote_outside_the_set_is_not_an_adoption() {
    // A driver upgrade's green NVIDIADriver CR: written by gpuctl's field manager, in no set yet.
    let file = "dgx-h100-training.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (mut live, _) = hand_built(&bp, &set);
    let cr = ObjectRef::new(
        "nvidia.com/v1alpha1",
        "NVIDIADriver",
        None,
        "cluster-default",
    );
    live.objects.get_mut(&cr).unwrap()["metadata"]["managedFields"] =
        json!([{"manager": "gpuctl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]);
    let plan = gpuctl_plan::plan::plan(&set, &live, PlanOptions::default()).unwrap();
    let a = plan.actions.iter().find(|a| a.object_ref() == cr).unwrap();
    assert_eq!(a.action, ActionKind::Update, "{a:?}");
    assert!(!a.adopt);
    assert!(
        a.changes
            .iter()
            .all(|c| c.path.starts_with("metadata.labels")),
        "{:?}",
        a.changes
    );
}

/// The imported blueprint as data.
fn parsed(imported: &Imported) -> Value {
    serde_saphyr::from_str(&imported.yaml).expect("the imported blueprint is YAML")
}

fn warned(imported: &Imported, needle: &str) -> bool {
    imported.warnings.iter().any(|w| w.message.contains(needle)) && imported.yaml.contains(needle)
}

#[test]
fn network_and_topology_are_imported_as_the_example_declares_them() {
    let file = "gb200-nvl72-training.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (live, ctx) = hand_built(&bp, &set);
    let imported = import(&live, &ctx, catalog(), &opts());
    assert!(imported.valid, "{}", imported.yaml);
    let v = parsed(&imported);
    let no = &v["spec"]["networkOperator"];
    assert_eq!(no["version"], "v26.4.1", "{}", imported.yaml);
    assert_eq!(no["namespace"], "nvidia-network-operator");
    assert_eq!(no["install"], "helm");
    assert_eq!(no["nicDriver"], json!({"source": "host"}));
    assert_eq!(
        no["devicePlugin"],
        json!({"kind": "rdma-shared", "resourceName": "rdma_shared_device_a", "hcaMax": 63})
    );
    let sn = &no["secondaryNetwork"];
    assert_eq!(
        (&sn["kind"], &sn["name"], &sn["master"]),
        (&json!("ipoib"), &json!("ib-storage"), &json!("ibp3s0"))
    );
    // The pods' addresses come from the nv-ipam IPPool the network names, read back whole.
    assert_eq!(sn["ipPool"], "ib-storage", "{}", imported.yaml);
    assert!(sn["range"].is_null(), "{}", imported.yaml);
    assert_eq!(
        no["ipPools"],
        json!([{
            "name": "ib-storage", "range": "10.200.0.0/16", "gateway": "10.200.0.1",
            "perNodeBlockSize": 64,
            "exclusions": [{"startIP": "10.200.0.2", "endIP": "10.200.0.31"}],
            "nodePools": ["gb200"],
        }]),
        "{}",
        imported.yaml
    );
    // The chart values the release has are rendered from fields: nothing kept by hand.
    assert!(no["values"].is_null(), "{}", imported.yaml);
    let pool = &v["spec"]["nodePools"][0];
    assert_eq!(
        pool["topology"]["levels"],
        json!([
            "network.topology.nvidia.com/spine",
            "nvidia.com/gpu.clique",
            "kubernetes.io/hostname"
        ])
    );
    assert_eq!(
        pool["topology"]["network"],
        json!({"fabric": "infiniband", "nicsPerNode": 4, "gpuDirectRDMA": true})
    );
    // The NIC count is a guess (one per GPU), and says so; the fabric is known from IPoIB.
    assert!(warned(
        &imported,
        "one per GPU, is a guess for `nicsPerNode`"
    ));
    assert!(!warned(&imported, "`infiniband` is a guess"));
    // The kubelet's NUMA policy cannot be read through the API server: a comment says so.
    assert!(
        imported
            .yaml
            .contains("cannot be read through the API server")
    );
    assert_eq!(
        v["spec"]["gpuOperator"]["rdma"],
        json!({"mechanism": "dma-buf"})
    );
    assert!(
        v["spec"]["gpuOperator"]["values"]["driver"].is_null(),
        "{}",
        imported.yaml
    );
    // RDMA quota of the tenants and the ClusterQueues.
    assert_eq!(
        v["spec"]["tenants"][0]["quota"]["rdma/rdma_shared_device_a"],
        "72"
    );
    assert_eq!(
        v["spec"]["scheduling"]["kueue"]["clusterQueues"][1]["resources"][0]["borrowingLimit"]["rdma/rdma_shared_device_a"],
        "18"
    );
    // No Network Operator or Topology object is left unmapped.
    assert!(
        !imported
            .warnings
            .iter()
            .any(|w| w.message.contains("neither changes nor prunes"))
    );
}

#[test]
fn without_a_secondary_network_the_fabric_is_a_guess_and_says_so() {
    let file = "dgx-h100-training.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (live, ctx) = hand_built(&bp, &set);
    let imported = import(&live, &ctx, catalog(), &opts());
    let v = parsed(&imported);
    // Only the training pool is under the NicClusterPolicy's node affinity.
    assert_eq!(
        v["spec"]["nodePools"][0]["topology"]["network"],
        json!({"fabric": "infiniband", "nicsPerNode": 8, "gpuDirectRDMA": true})
    );
    assert!(v["spec"]["nodePools"][1]["topology"]["network"].is_null());
    assert!(warned(&imported, "the fabric is not recorded"));
    // At the pool it is about.
    let at = imported.yaml.find("`infiniband` is a guess").unwrap();
    assert!(
        at > imported.yaml.find("- name: h100-train").unwrap(),
        "{}",
        imported.yaml
    );
    assert!(v["spec"]["networkOperator"]["secondaryNetwork"].is_null());
}

/// A hand-built cluster whose GPU Operator is a Helm release named otherwise, beside a second
/// one, with nvidia-peermem set in the ClusterPolicy and no Network Operator.
#[test]
fn releases_are_found_by_chart_and_one_named_otherwise_is_left_alone() {
    let file = "mixed-lab-fixed.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (mut live, mut ctx) = hand_built(&bp, &set);
    let mut releases = ctx.releases.clone().unwrap();
    assert_eq!(releases.len(), 1);
    releases[0].name = "gpu-op".into();
    releases[0].namespace = "platform".into();
    let mut failed = releases[0].clone();
    failed.name = "gpu-operator-old".into();
    failed.release.status = "failed".into();
    releases.push(failed);
    ctx.releases = Some(releases);
    ctx.operator_namespace = Some("platform".into());
    // What a plan reads: no release named `gpu-operator`.
    live.helm_release = gpuctl_plan::live::Reading::Read(None);
    let imported = import(&live, &ctx, catalog(), &opts());
    let v = parsed(&imported);
    assert_eq!(v["spec"]["gpuOperator"]["install"], "none");
    assert_eq!(v["spec"]["gpuOperator"]["namespace"], "platform");
    assert_eq!(
        v["spec"]["gpuOperator"]["version"],
        set.helm.version.as_str()
    );
    assert!(
        warned(&imported, "installed by Helm as release `platform/gpu-op`"),
        "{:#?}",
        imported.warnings
    );
    assert!(
        warned(&imported, "2 Helm releases of the GPU Operator chart"),
        "{:#?}",
        imported.warnings
    );
    assert!(warned(&imported, "platform/gpu-operator-old (failed"));
    // The values of the release still give the driver.
    assert_eq!(
        v["spec"]["gpuOperator"]["driver"]["version"],
        bp.spec.gpu_operator.driver.version.as_str()
    );
}

#[test]
fn gpudirect_rdma_without_a_network_operator_marks_every_pool_and_says_so() {
    let (mut live, ctx) = hand_made_cluster();
    let cp = json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"driver": {"version": "580.105.08", "rdma": {"enabled": true, "useHostMofed": true}}}});
    live.objects.insert(ObjectRef::of(&cp).unwrap(), cp);
    let imported = import(&live, &ctx, catalog(), &opts());
    let v = parsed(&imported);
    assert_eq!(
        v["spec"]["gpuOperator"]["rdma"],
        json!({"mechanism": "nvidia-peermem", "useHostMofed": true}),
        "{}",
        imported.yaml
    );
    assert_eq!(
        v["spec"]["nodePools"][0]["topology"]["network"]["gpuDirectRDMA"],
        true
    );
    assert_eq!(
        v["spec"]["nodePools"][0]["topology"]["network"]["nicsPerNode"],
        8
    );
    assert!(warned(
        &imported,
        "no NicClusterPolicy says which nodes have RDMA NICs"
    ));
    assert!(v["spec"]["networkOperator"].is_null());
}

#[test]
fn a_topology_no_flavor_names_and_a_flavor_naming_another_topology_are_warnings() {
    let (mut live, ctx) = hand_made_cluster();
    for o in [
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "racks"},
               "spec": {"levels": [{"nodeLabel": "topology.example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "spare"},
               "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a100"},
               "spec": {"nodeLabels": {"pool": "a100"}, "topologyName": "racks"}}),
    ] {
        live.objects.insert(ObjectRef::of(&o).unwrap(), o);
    }
    let imported = import(&live, &ctx, catalog(), &opts());
    let v = parsed(&imported);
    assert_eq!(
        v["spec"]["nodePools"][0]["topology"]["levels"],
        json!(["topology.example.com/rack", "kubernetes.io/hostname"])
    );
    assert!(warned(&imported, "flavor names Topology `racks`"));
    assert!(warned(
        &imported,
        "Kueue Topology spare is named by no ResourceFlavor"
    ));
}

#[test]
fn kueues_release_gives_its_version_and_leaves_install_alone() {
    let file = "gb200-nvl72-training.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (live, mut ctx) = hand_built(&bp, &set);
    let without = import(&live, &ctx, catalog(), &opts());
    assert!(warned(
        &without,
        "Kueue's objects do not record its release"
    ));
    let mut releases = ctx.releases.clone().unwrap();
    releases.push(gpuctl_plan::live::release::NamedRelease {
        name: "queues".into(),
        namespace: "kueue-system".into(),
        release: gpuctl_plan::live::release::LiveRelease {
            revision: 3,
            status: "deployed".into(),
            chart: "kueue".into(),
            chart_version: "0.19.2".into(),
            values: json!({}),
        },
    });
    ctx.releases = Some(releases);
    let imported = import(&live, &ctx, catalog(), &opts());
    assert!(imported.valid, "{}", imported.yaml);
    let v = parsed(&imported);
    assert_eq!(v["spec"]["scheduling"]["kueue"]["version"], "v0.19.2");
    assert!(v["spec"]["scheduling"]["kueue"]["install"].is_null());
    assert!(!warned(
        &imported,
        "Kueue's objects do not record its release"
    ));
    assert!(imported.yaml.contains("Helm release kueue-system/queues"));
}

/// Volcano's Helm release (found by its chart, `volcano`, under any name) gives
/// `scheduling.volcano.version`; `install` stays `none`. Without it the version is a guess, said.
#[test]
fn volcanos_release_gives_its_version_and_leaves_install_alone() {
    let file = "inference-mig.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (live, mut ctx) = hand_built(&bp, &set);
    let without = import(&live, &ctx, catalog(), &opts());
    assert!(warned(
        &without,
        "Volcano's queues do not record its release"
    ));
    let mut releases = ctx.releases.clone().unwrap();
    releases.push(gpuctl_plan::live::release::NamedRelease {
        name: "batch".into(),
        namespace: "volcano-system".into(),
        release: gpuctl_plan::live::release::LiveRelease {
            revision: 2,
            status: "deployed".into(),
            chart: "volcano".into(),
            chart_version: "1.14.4".into(),
            values: json!({}),
        },
    });
    ctx.releases = Some(releases);
    let imported = import(&live, &ctx, catalog(), &opts());
    assert!(imported.valid, "{}", imported.yaml);
    let v = parsed(&imported);
    assert_eq!(v["spec"]["scheduling"]["volcano"]["version"], "v1.14.4");
    assert!(v["spec"]["scheduling"]["volcano"]["install"].is_null());
    assert!(!warned(
        &imported,
        "Volcano's queues do not record its release"
    ));
    assert!(imported.yaml.contains("Helm release volcano-system/batch"));
}

/// A cluster that records no driver version anywhere (no Helm values, NVIDIADriver CR,
/// ClusterPolicy or node label) imports with the chart default driver of the release it guesses
/// (the newest release the catalog knows, since no Helm release was found), read from
/// profiles/gpu-operator.yaml, and a warning at the field that says it is a guess.
#[test]
fn without_any_driver_version_the_guessed_releases_chart_default_is_written_and_flagged() {
    let (mut live, ctx) = hand_made_cluster();
    for node in live.nodes.as_mut().unwrap() {
        node["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("nvidia.com/cuda.driver-version.full");
    }
    let imported = import(&live, &ctx, catalog(), &opts());
    let v = parsed(&imported);
    let version: gpuctl_model::version::OperatorVersion = v["spec"]["gpuOperator"]["version"]
        .as_str()
        .expect("a version")
        .parse()
        .expect("an operator version");
    let newest = catalog()
        .operator_releases()
        .last()
        .expect("the catalog lists releases");
    assert_eq!(
        catalog().operator_release(&version).map(|r| &r.version),
        Some(&newest.version),
        "no release was found, so the guess is the newest the catalog knows"
    );
    assert_eq!(
        v["spec"]["gpuOperator"]["driver"]["version"],
        newest.default_driver.to_string().as_str()
    );
    assert!(
        warned(&imported, "no driver version was found"),
        "{:#?}",
        imported.warnings
    );
}

/// A brownfield Karpenter cluster (the EKS example's, built by hand): each NodePool comes back as
/// a pool with `provisioner.type: karpenter` (instance types, GPU from the catalog, `maxNodes`
/// from the GPU limit, taints, the startup taint as `nodeReadiness`, training disruption as
/// `role: training`), its nodes are not imported a second time as a static pool, the blueprint
/// validates, and its plan against the same cluster changes nothing (NodePools and NodeOverlay
/// included); the MPS pool's sharing comes back from the device-plugin configuration its
/// NodePool's template label names.
#[test]
fn karpenter_nodepools_import_to_provisioned_pools() {
    let file = "eks-karpenter.yaml";
    let (bp, set) = render_text(file, &example(file));
    let (live, ctx) = hand_built(&bp, &set);
    let imported = import(&live, &ctx, catalog(), &opts());
    assert!(imported.valid, "{}", imported.yaml);
    let back = gpuctl_model::blueprint::load_str("back.yaml", &imported.yaml)
        .expect("loads")
        .blueprint;
    let pool = |name: &str| {
        back.spec
            .node_pools
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name}:\n{}", imported.yaml))
    };
    let train = pool("h100-train");
    let want = bp
        .spec
        .node_pools
        .iter()
        .find(|p| p.name == "h100-train")
        .unwrap();
    assert_eq!(train.provisioner.kind, want.provisioner.kind);
    assert_eq!(train.provisioner.platform, want.provisioner.platform);
    assert_eq!(train.provisioner.node_class, want.provisioner.node_class);
    assert_eq!(train.provisioner.max_nodes, want.provisioner.max_nodes);
    assert_eq!(
        train.provisioner.instance_types,
        want.provisioner.instance_types
    );
    assert_eq!(
        (train.nodes, &train.gpu.model, train.gpu.count),
        (2, &want.gpu.model, 8)
    );
    assert_eq!(train.role, want.role);
    assert_eq!(train.selector, want.selector);
    assert_eq!(train.taints, want.taints);
    assert_eq!(
        back.spec
            .node_readiness
            .as_ref()
            .map(|r| r.taint_key.as_str()),
        Some("readiness.k8s.io/nvidia-gpu-not-ready")
    );
    assert_eq!(
        back.spec
            .node_pools
            .iter()
            .filter(|p| p.selector == train.selector)
            .count(),
        1,
        "the NodePool's nodes are not a second, static pool"
    );
    assert_eq!(
        pool("l4-dev").provisioner.kind,
        gpuctl_model::blueprint::provisioning::ProvisionerKind::Static
    );
    let changes: Vec<&Note> = imported
        .warnings
        .iter()
        .filter(|w| w.message.contains("a plan of this blueprint would"))
        .collect();
    assert!(changes.is_empty(), "{changes:#?}\n{}", imported.yaml);
    let infer = pool("l40s-infer");
    let want = bp
        .spec
        .node_pools
        .iter()
        .find(|p| p.name == "l40s-infer")
        .unwrap();
    assert_eq!(infer.partitioning, want.partitioning, "{}", imported.yaml);
    assert_eq!(infer.provisioner.max_nodes, Some(8));
    let names: Vec<&str> = back
        .spec
        .node_pools
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["h100-train", "l40s-infer", "l4-dev"],
        "the blueprint's order"
    );
}
