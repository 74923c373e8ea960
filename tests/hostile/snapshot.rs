//! Snapshot corruptions: the shipped snapshot with objects, nodes, the Helm release and journals
//! replaced by wrong types, dropped, truncated, blown up or nested deep.

use serde_json::{Value, json};

use super::Rng;
use super::emit::{Seg, all_paths, get_mut, show_path};

/// One corrupted snapshot.
pub struct SnapInput {
    /// What was done to the shipped snapshot, in order.
    pub corruptions: Vec<String>,
    /// The JSON text.
    pub text: String,
}

const NOT_AN_OBJECT: &[&str] = &["null", "5", "[1]", "\"x\"", "{}", "true", "-1"];

fn wrong(rng: &mut Rng) -> Value {
    let text = *rng.pick::<&str>(NOT_AN_OBJECT);
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn hostile_text(rng: &mut Rng) -> Value {
    let choices = [
        json!(""),
        json!("../../x"),
        json!("😀"),
        json!("a\u{0}b"),
        json!("x".repeat(20_000)),
        json!("|||"),
        json!("580.173.02"),
        json!("999.99.99"),
        json!("v"),
        json!(5),
        Value::Null,
    ];
    rng.pick(&choices).clone()
}

fn object_keys(snap: &Value) -> Vec<String> {
    snap["objects"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn random_object<'a>(snap: &'a mut Value, rng: &mut Rng) -> Option<(String, &'a mut Value)> {
    let keys = object_keys(snap);
    if keys.is_empty() {
        return None;
    }
    let k = rng.pick(&keys).clone();
    let v = snap["objects"].get_mut(&k)?;
    Some((k, v))
}

fn random_node<'a>(snap: &'a mut Value, rng: &mut Rng) -> Option<(usize, &'a mut Value)> {
    let n = snap["nodes"].as_array().map_or(0, Vec::len);
    if n == 0 {
        return None;
    }
    let i = rng.below(n);
    Some((i, snap["nodes"].get_mut(i)?))
}

fn short_key(k: &str) -> String {
    if k.len() > 60 {
        format!(
            "{}…",
            &k[..k.char_indices().nth(50).map_or(k.len(), |(i, _)| i)]
        )
    } else {
        k.to_string()
    }
}

/// A journal the reader accepts, for the blueprint the snapshot was captured for.
fn journal(rng: &mut Rng) -> Value {
    let phase = *rng.pick(&[
        "running",
        "failed",
        "completed",
        "rollingBack",
        "rolledBack",
    ]);
    let to = hostile_text(rng);
    json!({
        "format": 1,
        "blueprint": "train-prod",
        "file": "blueprints/dgx-h100-training.yaml",
        "pool": rng.pick(&["h100-train", "h100-infer", "nope", ""]),
        "namespace": "gpu-operator",
        "selector": {"gpuctl.dev/pool": "h100-train"},
        "fromVersion": "580.105.08",
        "toVersion": if to.is_string() { to } else { json!("580.173.02") },
        "blueCr": "cluster-default",
        "greenCr": "gpuctl-h100-train",
        "greenManifest": wrong(rng),
        "greenCrExisted": false,
        "removeBlueCr": true,
        "colorLabel": "gpuctl.dev/color",
        "blueColor": "blue",
        "greenColor": "green",
        "maxUnavailable": 0,
        "drainTimeoutS": 0,
        "waitForJobs": true,
        "blueprintChange": "",
        "batches": [[], ["ghost-node"]],
        "nodes": {},
        "phase": phase,
        "step": 18446744073709551615u64,
        "events": []
    })
}

/// Snapshot `index` of the corpus under `master`, from the shipped snapshot `seed`.
pub fn generate(index: usize, master: u64, seed: &Value) -> SnapInput {
    let mut rng = Rng::new(super::input_seed(master ^ 0x5EED_5A45, index));
    let mut snap = seed.clone();
    let mut corruptions = Vec::new();
    let mut truncate = None;
    for _ in 0..rng.range(1, 3) {
        let d = match rng.below(15) {
            0 => {
                let w = wrong(&mut rng);
                match random_object(&mut snap, &mut rng) {
                    Some((k, o)) => {
                        *o = w.clone();
                        format!("object {} replaced by {w}", short_key(&k))
                    }
                    None => "object: none".into(),
                }
            }
            1 => {
                let field = *rng.pick(&["apiVersion", "kind", "metadata", "spec", "data"]);
                let drop = rng.chance(1, 2);
                let w = wrong(&mut rng);
                match random_object(&mut snap, &mut rng) {
                    Some((k, Value::Object(o))) => {
                        if drop {
                            o.shift_remove(field);
                            format!("object {}: {field} dropped", short_key(&k))
                        } else {
                            o.insert(field.into(), w.clone());
                            format!("object {}: {field} = {w}", short_key(&k))
                        }
                    }
                    _ => "object field: none".into(),
                }
            }
            2 => {
                let field = *rng.pick(&[
                    "labels",
                    "annotations",
                    "name",
                    "namespace",
                    "resourceVersion",
                    "managedFields",
                    "uid",
                ]);
                let w = if rng.chance(1, 2) {
                    wrong(&mut rng)
                } else {
                    json!({"applyset.kubernetes.io/part-of": 5, "k": [1]})
                };
                match random_object(&mut snap, &mut rng) {
                    Some((k, o)) if o["metadata"].is_object() => {
                        o["metadata"][field] = w.clone();
                        format!("object {}: metadata.{field} = {w}", short_key(&k))
                    }
                    _ => "metadata: none".into(),
                }
            }
            3 => {
                // Any field inside one object gets a wrong type.
                let w = wrong(&mut rng);
                match random_object(&mut snap, &mut rng) {
                    Some((k, o)) => {
                        let paths: Vec<Vec<Seg>> =
                            all_paths(o).into_iter().filter(|p| !p.is_empty()).collect();
                        if paths.is_empty() {
                            "deep field: none".into()
                        } else {
                            let p = rng.pick(&paths).clone();
                            if let Some(slot) = get_mut(o, &p) {
                                *slot = w.clone();
                            }
                            format!("object {}: {} = {w}", short_key(&k), show_path(&p))
                        }
                    }
                    None => "deep field: none".into(),
                }
            }
            4 => {
                let w = wrong(&mut rng);
                let which = rng.below(5);
                match random_node(&mut snap, &mut rng) {
                    Some((i, n)) => match which {
                        0 => {
                            *n = w.clone();
                            format!("nodes[{i}] = {w}")
                        }
                        1 => {
                            n["metadata"]["labels"] = w.clone();
                            format!("nodes[{i}].metadata.labels = {w}")
                        }
                        2 => {
                            n["spec"]["taints"] = if rng.chance(1, 2) {
                                w.clone()
                            } else {
                                json!([null, {"key": 5}, {"effect": []}])
                            };
                            format!("nodes[{i}].spec.taints corrupted ({w})")
                        }
                        3 => {
                            n["metadata"] = w.clone();
                            format!("nodes[{i}].metadata = {w}")
                        }
                        _ => {
                            n["metadata"]["name"] = w.clone();
                            format!("nodes[{i}].metadata.name = {w}")
                        }
                    },
                    None => "nodes: none".into(),
                }
            }
            5 => {
                // Node labels gpuctl reads (product, driver, MIG state) with hostile values.
                let key = *rng.pick(&[
                    "nvidia.com/gpu.product",
                    "nvidia.com/cuda.driver-version.full",
                    "nvidia.com/cuda.driver.major",
                    "nvidia.com/mig.config.state",
                    "nvidia.com/gpu.count",
                    "nvidia.com/gpu-driver-upgrade-state",
                    "gpuctl.dev/pool",
                ]);
                let v = hostile_text(&mut rng);
                match random_node(&mut snap, &mut rng) {
                    Some((i, n)) if n["metadata"]["labels"].is_object() => {
                        n["metadata"]["labels"][key] = v.clone();
                        format!("nodes[{i}] label {key} = {}", short_key(&v.to_string()))
                    }
                    _ => "node label: none".into(),
                }
            }
            6 => {
                let field = *rng.pick(&[
                    "revision",
                    "status",
                    "chart",
                    "chart_version",
                    "values",
                    "<whole>",
                ]);
                let v = match rng.below(4) {
                    0 => wrong(&mut rng),
                    1 => hostile_text(&mut rng),
                    2 => json!({"driver": {"version": 5, "upgradePolicy": []}, "mig": "x"}),
                    _ => json!(18446744073709551615u64),
                };
                if field == "<whole>" {
                    snap["helm_release"] = v.clone();
                } else if snap["helm_release"].is_object() {
                    snap["helm_release"][field] = v.clone();
                }
                format!("helm_release.{field} = {}", short_key(&v.to_string()))
            }
            7 => {
                let v = *rng.pick(&[
                    "0",
                    "1",
                    "3",
                    "99",
                    "-1",
                    "4294967296",
                    "\"2\"",
                    "null",
                    "1.5",
                ]);
                snap["format_version"] = serde_json::from_str(v).unwrap_or(Value::Null);
                format!("format_version = {v}")
            }
            8 => {
                let v = match rng.below(5) {
                    0 => json!([5]),
                    1 => json!(["x", "|", "||||", ""]),
                    2 => json!([]),
                    3 => json!("x"),
                    _ => json!(["v1|Namespace"]),
                };
                snap["served_kinds"] = v.clone();
                format!("served_kinds = {v}")
            }
            9 => {
                truncate = Some(rng.next_u64() as usize);
                "truncated JSON".into()
            }
            10 => {
                let paths: Vec<Vec<Seg>> = all_paths(&snap)
                    .into_iter()
                    .filter(|p| {
                        super::emit::get(&snap, p).is_some_and(Value::is_number) && !p.is_empty()
                    })
                    .collect();
                if paths.is_empty() {
                    "huge number: none".into()
                } else {
                    let p = rng.pick(&paths).clone();
                    let text = *rng.pick::<&str>(&[
                        "1e308",
                        "18446744073709551615",
                        "-9223372036854775808",
                        "-1",
                        "4294967296",
                    ]);
                    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                    if let Some(slot) = get_mut(&mut snap, &p) {
                        *slot = v.clone();
                    }
                    format!("{} = {v}", show_path(&p))
                }
            }
            11 => {
                let depth = *rng.pick(&[100usize, 120, 200]);
                let mut v = json!("x");
                for _ in 0..depth {
                    v = json!({ "a": v });
                }
                match random_object(&mut snap, &mut rng) {
                    Some((k, o)) => {
                        o["spec"] = v;
                        format!("object {}: spec nested {depth} levels", short_key(&k))
                    }
                    None => "nesting: none".into(),
                }
            }
            12 => {
                let j = journal(&mut rng);
                let d = format!(
                    "upgrade journal: pool {}, phase {}, toVersion {}",
                    j["pool"],
                    j["phase"],
                    short_key(&j["toVersion"].to_string())
                );
                if rng.chance(1, 4) {
                    snap["upgrade_journals"] = json!([{"format": "x"}]);
                    "upgrade journal of the wrong shape".into()
                } else {
                    snap["upgrade_journals"] = json!([j]);
                    d
                }
            }
            13 => {
                // The key says one thing, the object another; or a key without its separators.
                let keys = object_keys(&snap);
                if keys.len() < 2 {
                    "key mismatch: none".into()
                } else {
                    let a = rng.pick(&keys).clone();
                    let b = rng.pick(&keys).clone();
                    let new_key = rng
                        .pick(&["x", "|||", "a|b|c|d|e", "v1|Namespace||", b.as_str()])
                        .to_string();
                    let objects = snap["objects"].as_object_mut().expect("objects");
                    if let Some(o) = objects.shift_remove(&a) {
                        objects.insert(new_key.clone(), o);
                    }
                    format!(
                        "object {} moved to key {}",
                        short_key(&a),
                        short_key(&new_key)
                    )
                }
            }
            _ => {
                let field = *rng.pick(&[
                    "objects",
                    "nodes",
                    "served_kinds",
                    "helm_release",
                    "fingerprint",
                    "server",
                ]);
                if rng.chance(1, 2) {
                    if let Value::Object(m) = &mut snap {
                        m.shift_remove(field);
                    }
                    format!("{field} dropped")
                } else {
                    let v = if rng.chance(1, 2) {
                        wrong(&mut rng)
                    } else {
                        hostile_text(&mut rng)
                    };
                    snap[field] = v.clone();
                    format!("{field} = {}", short_key(&v.to_string()))
                }
            }
        };
        corruptions.push(d);
    }
    let mut text = serde_json::to_string_pretty(&snap).unwrap_or_default();
    if let Some(at) = truncate {
        let mut at = at % text.len().max(1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        if let Some(last) = corruptions.iter_mut().find(|c| *c == "truncated JSON") {
            *last = format!("truncated JSON at byte {at}");
        }
    }
    SnapInput { corruptions, text }
}
