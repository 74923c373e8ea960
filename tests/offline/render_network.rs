//! Golden tests of the network documents render writes besides the objects: the per-pool kubelet
//! fragments, the Network Operator's values and release, and the NVIDIA IPAM pool, snapshotted in
//! `golden/network/` for every example that has any (`cargo insta review` to accept changes).

use crate::render_common;

use render_common::{render_file, root, valid_blueprints};

/// The documents of a render other than the troubleshooting runbook, each under a header naming
/// its path in the render tree.
fn network_documents(set: &gpuctl_core::render::RenderedSet) -> String {
    set.documents
        .iter()
        .filter(|(path, _)| *path != gpuctl_core::render::TROUBLESHOOTING_RUNBOOK)
        .map(|(path, text)| format!("--- {path}\n{text}"))
        .collect()
}

#[test]
fn network_documents_match_their_golden_files() {
    let mut seen = Vec::new();
    for path in valid_blueprints() {
        let set = render_file(&path);
        let docs = network_documents(&set);
        if docs.is_empty() {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        insta::with_settings!({
            snapshot_path => root().join("golden/network"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(format!("{name}.documents"), docs);
        });
        seen.push(format!("{name}.documents.snap"));
    }
    assert!(
        seen.iter().any(|s| s.starts_with("dgx-h100-training"))
            && seen.iter().any(|s| s.starts_with("gb200-nvl72-training")),
        "both network examples render documents: {seen:?}"
    );
    for entry in std::fs::read_dir(root().join("golden/network")).expect("golden/network") {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".snap.new") {
            continue;
        }
        assert!(
            seen.contains(&name),
            "golden/network/{name} belongs to no example with network documents: delete it"
        );
    }
}

/// Every kubelet fragment is a KubeletConfiguration of the kubelet's config API with only the
/// NUMA fields the blueprint sets, and parses as YAML.
#[test]
fn kubelet_fragments_are_kubelet_configurations() {
    let set = render_file(&root().join("blueprints/dgx-h100-training.yaml"));
    let text = set
        .documents
        .get("kubelet/h100-train.yaml")
        .expect("the training pool has a kubelet fragment");
    let v: serde_json::Value = serde_saphyr::from_str(text).unwrap();
    assert_eq!(v["apiVersion"], "kubelet.config.k8s.io/v1beta1");
    assert_eq!(v["kind"], "KubeletConfiguration");
    assert_eq!(v["topologyManagerPolicy"], "restricted");
    assert_eq!(v["cpuManagerPolicy"], "static");
    assert_eq!(v["reservedSystemCPUs"], "0-3");
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 6, "{keys:?}");
    assert!(
        !set.documents.contains_key("kubelet/h100-infer.yaml"),
        "a pool without a kubelet policy gets no fragment"
    );
}

/// Issue 26: with `nicDriver.source: operator` and no version, the NicClusterPolicy gets the
/// DOCA-OFED driver the chosen Network Operator release ships (profiles/network.yaml, read from the
/// release's hack/release.yaml); a version in the blueprint overrides it.
#[test]
fn the_nic_driver_defaults_to_the_doca_driver_the_release_ships() {
    let text = std::fs::read_to_string(root().join("blueprints/dgx-h100-training.yaml")).unwrap();
    let host = "nicDriver: { source: host }";
    assert!(text.contains(host), "the example's NIC driver line moved");
    assert!(
        text.contains("version: v26.4.1"),
        "the example's release moved"
    );
    let ofed_version = |nic_driver: &str| -> String {
        let set = render_common::render_text("dgx.yaml", &text.replace(host, nic_driver));
        let ncp = set
            .objects
            .iter()
            .find(|o| o.kind == "NicClusterPolicy")
            .expect("a NicClusterPolicy");
        ncp.manifest["spec"]["ofedDriver"]["version"]
            .as_str()
            .expect("spec.ofedDriver.version")
            .to_string()
    };
    let shipped = &gpuctl_core::profiles::Catalog::embedded()
        .network()
        .network_operator
        .release("v26.4.1")
        .expect("v26.4.1 is in the catalog")
        .doca_driver;
    assert_eq!(
        shipped, "doca3.4.1-26.04-1.1.0.0-1",
        "hack/release.yaml at v26.4.1"
    );
    assert_eq!(&ofed_version("nicDriver: { source: operator }"), shipped);
    assert_eq!(
        ofed_version("nicDriver: { source: operator, version: doca9.9.9-pinned }"),
        "doca9.9.9-pinned"
    );
}
