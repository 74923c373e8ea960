//! Plan findings for pool nodes that lack a topology level label.

use serde_json::json;

use super::*;

#[test]
fn nodes_without_a_topology_level_label_are_reported_per_level() {
    let mut s = set();
    s.node_patches[0].topology_levels = vec![
        "topology.example.com/rack".into(),
        "kubernetes.io/hostname".into(),
    ];
    let mut v = snapshot_view();
    v.nodes = Some(vec![
        node(
            "n1",
            json!({"pool": "train", "topology.example.com/rack": "r1", "kubernetes.io/hostname": "n1"}),
            json!([]),
        ),
        node(
            "n2",
            json!({"pool": "train", "kubernetes.io/hostname": "n2"}),
            json!([]),
        ),
        // Another pool's node without labels is not this pool's business.
        node("x", json!({"pool": "infer"}), json!([])),
    ]);
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    let warnings = messages(&p, Severity::Warning);
    let topo: Vec<&&str> = warnings
        .iter()
        .filter(|w| w.contains("topology level"))
        .collect();
    assert_eq!(topo.len(), 1, "{warnings:?}");
    assert!(
        topo[0].starts_with("1 node(s) of pool `train` lack the topology level label `topology.example.com/rack` (n2)"),
        "{}",
        topo[0]
    );

    // Every node labelled: no finding; and a pool without levels never gets one.
    v.nodes.as_mut().unwrap()[1]["metadata"]["labels"]["topology.example.com/rack"] = json!("r1");
    let p = plan(&s, &v, PlanOptions::default()).unwrap();
    assert!(
        !messages(&p, Severity::Warning)
            .iter()
            .any(|w| w.contains("topology level")),
    );
    v.nodes.as_mut().unwrap()[1]["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("topology.example.com/rack");
    let p = plan_of(&v);
    assert!(
        !messages(&p, Severity::Warning)
            .iter()
            .any(|w| w.contains("topology level")),
    );
}
