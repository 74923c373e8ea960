//! Changing one blueprint field changes exactly the rendered objects that depend on it (issue 3,
//! "Done means"): the cluster driver version, a pool's MIG layout and a tenant's quota, each edited
//! in `blueprints/dgx-h100-training.yaml`; and a pool's own driver version, whose CR is named after
//! it with blue-green upgrades and keeps its name with rolling ones.

use crate::render_common;

use std::collections::BTreeSet;

use gpuctl_core::render::RenderedSet;
use render_common::{render_text, root};

fn base() -> String {
    std::fs::read_to_string(root().join("blueprints/dgx-h100-training.yaml")).unwrap()
}

fn edited(from: &str, to: &str) -> String {
    let text = base();
    assert_eq!(text.matches(from).count(), 1, "`{from}` must occur once");
    text.replacen(from, to, 1)
}

/// The example rendered as it is, and with `from` replaced by `to`.
fn before_after(from: &str, to: &str) -> (RenderedSet, RenderedSet) {
    let a = render_text("a.yaml", &base());
    (a, render_text("b.yaml", &edited(from, to)))
}

/// Objects (by `Kind/namespace/name`) that differ between two renders, including added/removed.
fn changed_objects(a: &RenderedSet, b: &RenderedSet) -> BTreeSet<String> {
    let index = |s: &RenderedSet| {
        s.objects
            .iter()
            .map(|o| (o.display_id(), o.manifest.clone()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (ia, ib) = (index(a), index(b));
    ia.keys()
        .chain(ib.keys())
        .filter(|k| ia.get(*k) != ib.get(*k))
        .cloned()
        .collect()
}

fn ids(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn driver_version_changes_the_default_driver_cr_values_and_expected_driver_only() {
    let (a, b) = before_after(
        "driver:\n      version: \"580.173.02\"",
        "driver:\n      version: \"595.91.07\"",
    );
    assert_eq!(
        changed_objects(&a, &b),
        ids(&["NVIDIADriver/cluster-default"])
    );
    assert_ne!(
        a.helm.values["driver"]["version"],
        b.helm.values["driver"]["version"]
    );
    let mut helm_b = b.helm.values.clone();
    helm_b["driver"]["version"] = a.helm.values["driver"]["version"].clone();
    assert_eq!(
        a.helm.values, helm_b,
        "only driver.version changes in the values"
    );
    for (pa, pb) in a.node_patches.iter().zip(&b.node_patches) {
        assert_eq!(pb.expected_driver, "595.91.07");
        assert_eq!((&pa.labels, &pa.taints), (&pb.labels, &pb.taints));
    }
}

#[test]
fn mig_layout_changes_the_mig_manager_config_only() {
    let (a, b) = before_after(
        "layout: { \"3g.40gb\": 2 }",
        "layout: { \"3g.40gb\": 1, \"4g.40gb\": 1 }",
    );
    assert_eq!(
        changed_objects(&a, &b),
        ids(&["ConfigMap/gpu-operator/gpuctl-mig-parted-config"])
    );
    assert_eq!(a.helm, b.helm);
    assert_eq!(a.node_patches, b.node_patches);
}

#[test]
fn tenant_quota_changes_that_tenants_resource_quota_only() {
    let (a, b) = before_after(
        // Raised: below what team-a's queue admits it would be refused (GPU112).
        "quota: { nvidia.com/gpu: 80,",
        "quota: { nvidia.com/gpu: 96,",
    );
    assert_eq!(
        changed_objects(&a, &b),
        ids(&["ResourceQuota/team-a-train/team-a-quota"])
    );
    let rq = b
        .objects
        .iter()
        .find(|o| o.display_id() == "ResourceQuota/team-a-train/team-a-quota")
        .unwrap();
    assert_eq!(rq.manifest["spec"]["hard"]["requests.nvidia.com/gpu"], "96");
    assert_eq!(a.helm, b.helm);
    assert_eq!(a.node_patches, b.node_patches);
}

/// The blueprint with pool `h100-train` on its own driver `version`, under `strategy`.
fn own_driver(version: &str, strategy: &str) -> RenderedSet {
    let text = edited(
        "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      os:",
        &format!(
            "      gpu: {{ model: H100-SXM5-80GB, count: 8 }}\n      driver: {{ version: \"{version}\" }}\n      os:"
        ),
    );
    assert_eq!(text.matches("strategy: blue-green").count(), 1);
    let text = text.replacen("strategy: blue-green", strategy, 1);
    render_text("own.yaml", &text)
}

fn driver_label(set: &RenderedSet, pool: &str) -> String {
    let p = set.node_patches.iter().find(|p| p.pool == pool).unwrap();
    p.labels[gpuctl_core::render::DRIVER_LABEL].clone()
}

#[test]
fn a_blue_green_pools_driver_cr_is_named_after_its_version_and_replaced_on_a_change() {
    // With blue-green upgrades a CR never changes version: a new driver is a new CR (the one
    // `gpuctl upgrade driver` moves the pool to), and the pool's nodes name it.
    let a = own_driver("580.173.02", "strategy: blue-green");
    let b = own_driver("595.91.07", "strategy: blue-green");
    assert_eq!(driver_label(&a, "h100-train"), "pool-h100-train-580-173-02");
    assert_eq!(driver_label(&b, "h100-train"), "pool-h100-train-595-91-07");
    assert_eq!(
        changed_objects(&a, &b),
        ids(&[
            "NVIDIADriver/pool-h100-train-580-173-02",
            "NVIDIADriver/pool-h100-train-595-91-07"
        ])
    );
    let cr = b
        .objects
        .iter()
        .find(|o| o.display_id() == "NVIDIADriver/pool-h100-train-595-91-07")
        .unwrap();
    assert_eq!(cr.manifest["spec"]["version"], "595.91.07");
    assert_eq!(
        cr.manifest["spec"]["nodeSelector"][gpuctl_core::render::DRIVER_LABEL],
        "pool-h100-train-595-91-07"
    );
    // The other pool stays on the cluster default CR.
    assert_eq!(driver_label(&b, "h100-infer"), "cluster-default");
}

#[test]
fn a_rolling_pools_driver_cr_keeps_its_name_and_changes_version_in_place() {
    // With rolling upgrades the operator upgrades the CR in place under its upgradePolicy; a new
    // name per version would move every node at once.
    let a = own_driver("580.173.02", "strategy: rolling");
    let b = own_driver("595.91.07", "strategy: rolling");
    assert_eq!(driver_label(&a, "h100-train"), "pool-h100-train");
    assert_eq!(driver_label(&b, "h100-train"), "pool-h100-train");
    assert_eq!(
        changed_objects(&a, &b),
        ids(&["NVIDIADriver/pool-h100-train"])
    );
    assert_eq!(a.node_patches.len(), b.node_patches.len());
    for (pa, pb) in a.node_patches.iter().zip(&b.node_patches) {
        assert_eq!((&pa.labels, &pa.taints), (&pb.labels, &pb.taints));
    }
}
