//! Table tests: each thing a file of a chain can do to a field, followed by keys through
//! parents that order their lists differently, and the errors for fields nobody sets.

use serde_json::json;

use super::*;
use crate::blueprint::load_file_in;

/// Lines: 9 dcgmExporter, 11 item train, 14 its nodes, 15 gpu, 16 labels, 18 its taint, 22
/// infer's nodes, 26 team-a's namespaces, 27 its quota.
const BASE: &str = r#"apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata: { name: base }
spec:
  kubernetes: { version: "1.33.5" }
  gpuOperator:
    version: v26.7.0
    driver: { version: "595.91.07" }
    dcgmExporter: { enabled: true, interval: 30s }
  nodePools:
    - name: train
      role: training
      selector: { gpuctl.dev/pool: train }
      nodes: 4
      gpu: { model: H100-SXM5-80GB, count: 8 }
      labels: { tier: premium, zone: a }
      taints:
        - { key: nvidia.com/gpu, value: present, effect: NoSchedule }
    - name: infer
      role: inference
      selector: { gpuctl.dev/pool: infer }
      nodes: 2
      gpu: { model: A100-SXM4-80GB, count: 8 }
  tenants:
    - name: team-a
      namespaces: [team-a, team-a-dev]
      quota: { nvidia.com/gpu: 8 }
"#;

/// The overlay `us.yaml` with `spec` (its `spec:` is line 5).
fn overlay(spec: &str) -> String {
    format!(
        "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: base.yaml\nmetadata: {{ name: us }}\n{spec}"
    )
}

/// The chain of `field` in `us.yaml` over `base.yaml`.
fn explain_in(spec: &str, field: &str) -> Result<Explained, NoField> {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(d.path().join("base.yaml"), BASE).expect("write");
    std::fs::write(d.path().join("us.yaml"), overlay(spec)).expect("write");
    let loaded = load_file_in(&d.path().join("us.yaml"), None)
        .unwrap_or_else(|b| panic!("loads: {:#?}", b.report.findings));
    let out = explain(&loaded, field);
    // The winner is the file the loader recorded for the value (`Loaded::origin`).
    if let Ok(e) = &out
        && let Some(w) = e.files.iter().position(|f| f.verdict == Verdict::Wins)
    {
        assert_eq!(loaded.tree.origin(&e.path), w, "{field}");
    }
    out
}

fn sets(v: Value) -> Mark {
    Mark::Sets {
        value: v,
        replace: false,
    }
}

/// (name, overlay spec, field, effective value, (mark, line, verdict) per file).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    Option<Value>,
    Vec<(Mark, Option<usize>, Verdict)>,
);

/// (mark, line, verdict) per file, nearest first.
fn marks(e: &Explained) -> Vec<(Mark, Option<usize>, Verdict)> {
    e.files
        .iter()
        .map(|f| (f.mark.clone(), f.pos.map(|p| p.line), f.verdict))
        .collect()
}

const POOLS: &str =
    "spec:\n  nodePools:\n    - name: infer\n      nodes: 3\n    - name: train\n      nodes: 16\n";

#[test]
fn each_thing_a_file_can_do_to_a_field() {
    let (wins, merged, none, by) = (
        Verdict::Wins,
        Verdict::Merged,
        Verdict::None,
        Verdict::OverriddenBy,
    );
    let cases: Vec<Case> = vec![
        (
            "a scalar replaced by the overlay (its item listed second there)",
            POOLS,
            "spec.nodePools[0].nodes",
            Some(json!(16)),
            vec![
                (sets(json!(16)), Some(10), wins),
                (sets(json!(4)), Some(14), by(0)),
            ],
        ),
        (
            "the other item, by index of the effective blueprint",
            POOLS,
            "spec.nodePools[1].nodes",
            Some(json!(3)),
            vec![
                (sets(json!(3)), Some(8), wins),
                (sets(json!(2)), Some(22), by(0)),
            ],
        ),
        (
            "inherited from the base",
            POOLS,
            "spec.nodePools[train].gpu.count",
            Some(json!(8)),
            vec![(Mark::NotSet, None, none), (sets(json!(8)), Some(15), wins)],
        ),
        (
            "a keyed item merged: fields from both files",
            POOLS,
            "spec.nodePools[name=train]",
            None,
            vec![
                (sets(json!({"name": "train", "nodes": 16})), Some(9), merged),
                (sets(json!(null)), Some(11), merged),
            ],
        ),
        (
            "an item deleted with $patch",
            "spec:\n  nodePools:\n    - { name: infer, $patch: delete }\n",
            "spec.nodePools[infer].nodes",
            None,
            vec![
                (Mark::Deleted, Some(7), none),
                (sets(json!(2)), Some(22), by(0)),
            ],
        ),
        (
            "a key removed with null",
            "spec:\n  gpuOperator:\n    dcgmExporter: { interval: null }\n",
            "spec.gpuOperator.dcgmExporter.interval",
            None,
            vec![
                (Mark::Removed, Some(7), none),
                (sets(json!("30s")), Some(9), by(0)),
            ],
        ),
        (
            "a mapping above it removed with null",
            "spec:\n  gpuOperator:\n    dcgmExporter: null\n",
            "spec.gpuOperator.dcgmExporter.enabled",
            None,
            vec![
                (Mark::Removed, Some(7), none),
                (sets(json!(true)), Some(9), by(0)),
            ],
        ),
        (
            "an item replaced whole without the field",
            "spec:\n  nodePools:\n    - name: train\n      $patch: replace\n      role: training\n      selector: { gpuctl.dev/pool: train }\n      nodes: 1\n      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
            "spec.nodePools[train].labels.tier",
            None,
            vec![
                (Mark::Dropped, Some(7), none),
                (sets(json!("premium")), Some(16), by(0)),
            ],
        ),
        (
            "a field inside a mapping of an item replaced whole",
            "spec:\n  nodePools:\n    - name: train\n      $patch: replace\n      role: training\n      selector: { gpuctl.dev/pool: train }\n      nodes: 1\n      gpu: { model: H100-SXM5-80GB, count: 4 }\n      labels: { tier: basic }\n",
            "spec.nodePools[train].labels.zone",
            None,
            vec![
                (Mark::Dropped, Some(13), none),
                (sets(json!("a")), Some(16), by(0)),
            ],
        ),
        (
            "a mapping inside an item replaced whole replaces the parent's",
            "spec:\n  nodePools:\n    - name: train\n      $patch: replace\n      role: training\n      selector: { gpuctl.dev/pool: train }\n      nodes: 1\n      gpu: { model: H100-SXM5-80GB, count: 4 }\n      labels: { tier: basic }\n",
            "spec.nodePools[train].labels",
            Some(json!({"tier": "basic"})),
            vec![
                (
                    Mark::Sets {
                        value: json!({"tier": "basic"}),
                        replace: true,
                    },
                    Some(13),
                    merged,
                ),
                (
                    sets(json!({"tier": "premium", "zone": "a"})),
                    Some(16),
                    by(0),
                ),
            ],
        ),
        (
            "a list replaced whole",
            "spec:\n  tenants:\n    - name: team-a\n      namespaces: [a]\n",
            "spec.tenants[team-a].namespaces",
            Some(json!(["a"])),
            vec![
                (sets(json!(["a"])), Some(8), wins),
                (sets(json!(["team-a", "team-a-dev"])), Some(26), by(0)),
            ],
        ),
        (
            "a quoted key",
            "spec:\n  tenants:\n    - { name: team-a, quota: { nvidia.com/gpu: 2 } }\n",
            "spec.tenants[0].quota.\"nvidia.com/gpu\"",
            Some(json!(2)),
            vec![
                (sets(json!(2)), Some(7), wins),
                (sets(json!(8)), Some(27), by(0)),
            ],
        ),
        (
            "an item of a two-key list",
            "",
            "spec.nodePools[train].taints[key=nvidia.com/gpu,effect=NoSchedule].value",
            Some(json!("present")),
            vec![
                (Mark::NotSet, None, none),
                (sets(json!("present")), Some(18), wins),
            ],
        ),
    ];
    for (name, spec, field, value, want) in cases {
        let e = explain_in(spec, field).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(v) = value {
            assert_eq!(e.value, Some(v), "{name}");
        } else if name.starts_with("a keyed item") {
            assert_eq!(
                e.value.as_ref().map(|v| v["nodes"].clone()),
                Some(json!(16))
            );
            assert_eq!(
                e.value.as_ref().map(|v| v["role"].clone()),
                Some(json!("training"))
            );
        } else {
            assert_eq!(e.value, None, "{name}");
        }
        let mut got = marks(&e);
        if name.starts_with("a keyed item") {
            // The base's whole item: only its line and verdict are compared.
            got[1].0 = sets(json!(null));
        }
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn the_text_names_the_field_the_value_and_each_file() {
    let e = explain_in(POOLS, "spec.nodePools[train].nodes").expect("explains");
    assert_eq!(e.path, "spec.nodePools[0].nodes");
    assert_eq!(e.keyed, "spec.nodePools[name=train].nodes");
    let text = e.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "field: spec.nodePools[0].nodes (spec.nodePools[name=train].nodes)"
    );
    assert_eq!(lines[1], "value: 16");
    assert_eq!(lines[2], "chain, nearest first:");
    assert!(
        lines[3].ends_with("us.yaml:10    16  set here, wins"),
        "{text}"
    );
    assert!(
        lines[4].contains("base.yaml:14  4   overridden by "),
        "{text}"
    );
    assert!(lines[4].ends_with("us.yaml:10"), "{text}");

    let e = explain_in(
        "spec:\n  nodePools:\n    - { name: infer, $patch: delete }\n",
        "spec.nodePools[infer].gpu",
    )
    .expect("explains");
    let text = e.text();
    assert!(
        text.contains("value: none (removed from the effective blueprint)"),
        "{text}"
    );
    assert!(text.contains("deleted here ($patch: delete)"), "{text}");
    assert!(
        text.contains("{ model: A100-SXM4-80GB, count: 8 }"),
        "{text}"
    );
    assert!(text.contains("deleted by "), "{text}");
}

#[test]
fn fields_nobody_sets_and_wrong_paths_are_errors_with_a_hint() {
    let cases: Vec<(&str, &str, &str)> = vec![
        (
            "spec.nodePools[0].gpu.cont",
            "has no field `cont`",
            "did you mean `spec.nodePools[0].gpu.count`?",
        ),
        (
            "spec.nodePools[trian].nodes",
            "has no item `name=trian`",
            "did you mean `spec.nodePools[name=train]`?",
        ),
        (
            "spec.gpuOperator.zzz",
            "has no field `zzz`",
            "its fields: `version`, `driver`, `dcgmExporter`",
        ),
        (
            "spec.nodePools[5].nodes",
            "no item [5]",
            "spec.nodePools[name=...]",
        ),
        (
            "spec.tenants[0].namespaces[x]",
            "is not a keyed list",
            "spec.tenants[0].namespaces[0]",
        ),
        (
            "spec.nodePools[0].taints[nvidia.com/gpu]",
            "does not say its `key`",
            "[key=...,effect=...]",
        ),
        (
            "spec.nodePools[nme=train]",
            "`nme` is not a key",
            "keyed by name",
        ),
        (
            "spec.nodePools[0.nodes",
            "is not closed",
            "as findings print it",
        ),
        ("", "no field named", "as findings print it"),
        (
            "spec.nodePools[0].nodes.x",
            "is not a mapping",
            "the value itself",
        ),
    ];
    for (field, message, hint) in cases {
        let e = explain_in(POOLS, field).expect_err(field);
        assert!(e.message.contains(message), "{field}: {e}");
        assert!(
            e.hint.as_deref().unwrap_or("").contains(hint),
            "{field}: {e}"
        );
    }
}
