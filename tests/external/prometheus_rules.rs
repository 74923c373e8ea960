//! `promtool test rules` on the PrometheusRules the example blueprints render: every rendered alert
//! must fire on its fault series (with the labels and annotations an on-call engineer sees) and
//! stay quiet on a healthy GPU. The series use the metric and label names of `profiles/dcgm.yaml`
//! and the Xid classes of its catalog, the facts the templates read, so a renamed metric or a
//! reclassified Xid that the rules do not follow fails here.

use crate::render_common;

use std::collections::BTreeMap;
use std::process::Command;

use gpuctl_core::profiles::Catalog;
use gpuctl_core::profiles::dcgm::XidClass;
use render_common::{render_file, valid_blueprints};
use serde_json::{Map, Value, json};

type Labels = BTreeMap<String, String>;

/// A GPU's labels as Prometheus stores dcgm-exporter's series (plus `node` from gpuctl's
/// ServiceMonitor relabeling).
fn gpu(node: &str, index: u32) -> Labels {
    let l = &Catalog::embedded().dcgm().exporter.labels;
    let mut m = Labels::new();
    m.insert(l.node[0].clone(), node.to_owned());
    m.insert(l.gpu[0].clone(), index.to_string());
    m.insert(l.uuid[0].clone(), format!("GPU-{node}-{index}"));
    m.insert(l.device[0].clone(), format!("nvidia{index}"));
    m.insert(l.model[0].clone(), "NVIDIA H100 80GB HBM3".to_owned());
    m
}

struct Series {
    metric: String,
    labels: Labels,
    values: &'static str,
}

impl Series {
    fn text(&self) -> String {
        let inner: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        format!("{}{{{}}}", self.metric, inner.join(","))
    }
}

/// The fault series, by name, and the healthy ones.
fn scenarios() -> (BTreeMap<&'static str, Series>, Vec<Series>) {
    let facts = Catalog::embedded().dcgm();
    let m = &facts.exporter.metrics;
    let xid_label = facts.exporter.labels.xid[0].clone();
    let first = |class| facts.xid.of_class(class)[0].to_string();
    let with_xid = |mut l: Labels, xid: String| {
        l.insert(xid_label.clone(), xid);
        l
    };
    let s = |metric: &str, labels: Labels, values| Series {
        metric: metric.to_owned(),
        labels,
        values,
    };
    let mut faults = BTreeMap::new();
    faults.insert(
        "off-bus",
        s(
            &m.xid_count,
            with_xid(gpu("n1", 0), first(XidClass::OffBus)),
            "1x20",
        ),
    );
    faults.insert(
        "hardware-xid",
        s(
            &m.xid_count,
            with_xid(gpu("n1", 1), first(XidClass::Hardware)),
            "1x20",
        ),
    );
    faults.insert(
        "application-xid",
        s(
            &m.xid_count,
            with_xid(gpu("n1", 2), first(XidClass::Application)),
            "1x20",
        ),
    );
    faults.insert(
        "ecc",
        s(&m.ecc_dbe_volatile, gpu("n1", 0), "0 0 0 0 0 2x15"),
    );
    faults.insert(
        "remap-failure",
        s(&m.row_remap_failure, gpu("n1", 1), "1x20"),
    );
    faults.insert(
        "remapped-rows",
        s(&m.uncorrectable_remapped_rows, gpu("n1", 1), "0 0 0 3x17"),
    );
    faults.insert("hot", s(&m.gpu_temp, gpu("n1", 2), "95x20"));
    let ok = gpu("n2", 0);
    let healthy = vec![
        s(&m.xid_count, with_xid(ok.clone(), "0".into()), "0x20"),
        s(&m.ecc_dbe_volatile, ok.clone(), "0x20"),
        s(&m.row_remap_failure, ok.clone(), "0x20"),
        s(&m.uncorrectable_remapped_rows, ok.clone(), "0x20"),
        s(&m.gpu_temp, ok, "45x20"),
    ];
    (faults, healthy)
}

/// Which fault series each rendered alert must fire on. An alert missing here fails the test:
/// every rendered alert needs a fault that proves it.
fn fires_on(alert: &str) -> &'static [&'static str] {
    match alert {
        "GPUXidError" => &["off-bus", "hardware-xid", "application-xid"],
        "GPUXidHardwareFault" => &["hardware-xid"],
        "GPUFellOffTheBus" => &["off-bus"],
        "GPUUncorrectableECCError" => &["ecc"],
        "GPURowRemapFailure" => &["remap-failure"],
        "GPUUncorrectableRowRemap" => &["remapped-rows"],
        "GPUTemperatureHigh" => &["hot"],
        other => panic!(
            "rendered alert {other} has no fault series in tests/external/prometheus_rules.rs: add one"
        ),
    }
}

/// `max by (a, b) (...)` keeps a and b; anything else keeps every label of the series.
fn kept(expr: &str, labels: &Labels) -> Labels {
    match expr
        .split_once("by (")
        .and_then(|(_, rest)| rest.split_once(')'))
    {
        Some((list, _)) => {
            let keep: Vec<&str> = list.split(',').map(str::trim).collect();
            labels
                .iter()
                .filter(|(k, _)| keep.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }
        None => labels.clone(),
    }
}

/// Expands the `{{ $labels.x }}` and `{{ $value }}` of an annotation as Prometheus would.
fn expand(template: &str, labels: &Labels, value: &str) -> String {
    let mut out = template.replace("{{ $value }}", value);
    for (k, v) in labels {
        out = out.replace(&format!("{{{{ $labels.{k} }}}}"), v);
    }
    assert!(!out.contains("{{"), "unexpanded template left in `{out}`");
    out
}

fn value_of(values: &str) -> String {
    values
        .split_whitespace()
        .last()
        .unwrap()
        .split('x')
        .next()
        .unwrap()
        .to_owned()
}

#[test]
#[cfg_attr(
    gpuctl_no_prometheus,
    ignore = "skipped: needs prometheus and promtool (docs/testing.md)"
)]
fn rendered_alerts_fire_on_their_faults_and_stay_quiet_when_healthy() {
    let (faults, healthy) = scenarios();
    let mut checked = 0;
    for path in valid_blueprints() {
        let set = render_file(&path);
        let Some(rule) = set.objects.iter().find(|o| o.kind == "PrometheusRule") else {
            continue;
        };
        let groups = rule.manifest["spec"]["groups"].clone();
        let dir = tempfile::tempdir().unwrap();
        // JSON is YAML: promtool reads both.
        std::fs::write(
            dir.path().join("rules.json"),
            serde_json::to_vec_pretty(&json!({ "groups": groups })).unwrap(),
        )
        .unwrap();

        let mut fault_tests = Vec::new();
        let mut quiet_tests = Vec::new();
        for group in groups.as_array().unwrap() {
            for r in group["rules"].as_array().unwrap() {
                let Some(alert) = r["alert"].as_str() else {
                    continue;
                };
                let expr = r["expr"].as_str().unwrap();
                let rule_labels = r["labels"].as_object().cloned().unwrap_or_default();
                let annotations = r["annotations"].as_object().cloned().unwrap_or_default();
                let exp_alerts: Vec<Value> = fires_on(alert)
                    .iter()
                    .map(|name| {
                        let series = &faults[name];
                        let mut labels = kept(expr, &series.labels);
                        let mut exp_labels = Map::new();
                        for (k, v) in &labels {
                            exp_labels.insert(k.clone(), json!(v));
                        }
                        for (k, v) in &rule_labels {
                            exp_labels.insert(k.clone(), v.clone());
                            labels.insert(k.clone(), v.as_str().unwrap().to_owned());
                        }
                        let value = value_of(series.values);
                        let exp_annotations: Map<String, Value> = annotations
                            .iter()
                            .map(|(k, v)| {
                                (
                                    k.clone(),
                                    json!(expand(v.as_str().unwrap(), &labels, &value)),
                                )
                            })
                            .collect();
                        json!({ "exp_labels": exp_labels, "exp_annotations": exp_annotations })
                    })
                    .collect();
                fault_tests.push(
                    json!({ "eval_time": "10m", "alertname": alert, "exp_alerts": exp_alerts }),
                );
                quiet_tests
                    .push(json!({ "eval_time": "10m", "alertname": alert, "exp_alerts": [] }));
                checked += 1;
            }
        }
        let input = |series: Vec<&Series>| -> Vec<Value> {
            series
                .into_iter()
                .map(|s| json!({ "series": s.text(), "values": s.values }))
                .collect()
        };
        let tests = json!({
            "rule_files": ["rules.json"],
            "evaluation_interval": "1m",
            "tests": [
                {
                    "name": "faults",
                    "interval": "1m",
                    "input_series": input(faults.values().chain(healthy.iter()).collect()),
                    "alert_rule_test": fault_tests,
                },
                {
                    "name": "healthy",
                    "interval": "1m",
                    "input_series": input(healthy.iter().collect()),
                    "alert_rule_test": quiet_tests,
                },
            ],
        });
        std::fs::write(
            dir.path().join("tests.json"),
            serde_json::to_vec_pretty(&tests).unwrap(),
        )
        .unwrap();
        for args in [
            &["check", "rules", "rules.json"][..],
            &["test", "rules", "tests.json"],
        ] {
            let out = Command::new("promtool")
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect("promtool runs (apt-get install prometheus; docs/testing.md)");
            assert!(
                out.status.success(),
                "promtool {} for {}:\n{}{}\ntests: {}",
                args.join(" "),
                path.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                serde_json::to_string_pretty(&tests).unwrap()
            );
        }
    }
    assert!(
        checked >= 7,
        "only {checked} alerts were rendered and tested"
    );
}
