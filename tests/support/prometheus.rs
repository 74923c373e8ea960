//! Test support for the metric tests: a real Prometheus (Debian's `prometheus` package) on
//! 127.0.0.1 scraping `tests/support/dcgm_exporter.py`, a stand-in for dcgm-exporter that serves the
//! GPUs a test describes exactly as dcgm-exporter formats them; history a test cannot wait for is
//! backfilled with `promtool tsdb create-blocks-from openmetrics` before Prometheus starts.
//!
//! ```ignore
//! #[path = "support/prometheus.rs"]
//! mod prometheus;
//!
//! #[needs_prometheus] // use gpuctl_test_skip::needs_prometheus;
//! #[tokio::test]
//! async fn my_test() {
//!     let prom = prometheus::TestPrometheus::start("my_test", &fleet, None);
//! ```
//!
//! build.rs sets `gpuctl_no_prometheus` when `prometheus` or `promtool` is not on PATH (and neither
//! `CI` nor `GPUCTL_REQUIRE_CLUSTER` is set), so those tests (`#[needs_prometheus]`) are listed as ignored; otherwise a
//! missing binary fails the test. Each test gets its own exporter, Prometheus and data directory;
//! both processes are killed when the value is dropped.
//!
//! Prometheus scrapes the exporter as prometheus-operator scrapes the ServiceMonitor `gpuctl render`
//! writes ([`Scrape::rendered`], the default): one target per node (the exporter's DaemonSet pod
//! there), the target labels prometheus-operator generates (pkg/prometheus/promcfg.go: namespace,
//! service, pod, container, job, endpoint), then the ServiceMonitor's own relabelings and its
//! `honorLabels`. So the labels a test's queries see are the labels the rendered setting produces;
//! `start` checks the targets Prometheus built against that emulation. [`Scrape::Static`] is a plain
//! scrape without Kubernetes target labels.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gpuctl_core::profiles::Catalog;
use serde_json::{Value, json};

/// How long startup and scrapes may take before a test fails.
pub const WAIT: Duration = Duration::from_secs(60);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// One GPU as the exporter shows it.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub node: String,
    pub index: u32,
    /// `(namespace, pod)` when a pod holds the GPU.
    pub pod: Option<(String, String)>,
    /// Metric name -> value (a number, or `{"<xid>": count}` for the per-Xid count).
    pub values: serde_json::Map<String, Value>,
}

impl Gpu {
    /// A healthy, unallocated H100: cool, no errors, counters at 0, clocks held only because idle.
    pub fn healthy(node: &str, index: u32) -> Gpu {
        let m = &Catalog::embedded().dcgm().exporter.metrics;
        let mut values = serde_json::Map::new();
        for (name, v) in [
            (&m.gpu_temp, json!(41)),
            (&m.power_usage, json!(72.5)),
            (&m.gpu_util, json!(0)),
            (&m.gr_engine_active, json!(0.0)),
            (&m.xid_last, json!(0)),
            (&m.ecc_sbe_volatile, json!(0)),
            (&m.ecc_dbe_volatile, json!(0)),
            (&m.row_remap_failure, json!(0)),
            (&m.uncorrectable_remapped_rows, json!(0)),
            (&m.correctable_remapped_rows, json!(0)),
            // gpu_idle (1): the clocks are down because nothing runs, which is no fault.
            (&m.clock_event_reasons, json!(1)),
        ] {
            values.insert(name.clone(), v);
        }
        for name in &m.nvlink_errors {
            values.insert(name.clone(), json!(0));
        }
        values.insert(m.xid_count.clone(), json!({}));
        Gpu {
            node: node.to_owned(),
            index,
            pod: None,
            values,
        }
    }

    /// Allocated to `namespace/pod`.
    pub fn held_by(mut self, namespace: &str, pod: &str) -> Gpu {
        self.pod = Some((namespace.to_owned(), pod.to_owned()));
        self
    }

    /// Busy: engines active, utilisation high.
    pub fn busy(self) -> Gpu {
        let m = &Catalog::embedded().dcgm().exporter.metrics;
        self.set(&m.gr_engine_active, json!(0.83))
            .set(&m.gpu_util, json!(97))
            .set(&m.clock_event_reasons, json!(0))
    }

    pub fn set(mut self, metric: &str, v: Value) -> Gpu {
        self.values.insert(metric.to_owned(), v);
        self
    }

    pub fn uuid(&self) -> String {
        format!("GPU-{}-{:04}", self.node, self.index)
    }
}

/// The exporter's state file for `gpus`: metric names, types and help from the catalog's facts.
pub fn state(gpus: &[Gpu]) -> Value {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let mut metrics = vec![
        json!({"name": m.gpu_temp, "type": "gauge", "help": "GPU temperature (in C)."}),
        json!({"name": m.power_usage, "type": "gauge", "help": "Power draw (in W)."}),
        json!({"name": m.gpu_util, "type": "gauge", "help": "GPU utilization (in %)."}),
        json!({"name": m.xid_last, "type": "gauge", "help": "Value of the last XID error encountered."}),
        json!({"name": m.clock_event_reasons, "type": "gauge", "help": "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)."}),
        json!({"name": m.ecc_sbe_volatile, "type": "counter", "help": "Total number of single-bit volatile ECC errors."}),
        json!({"name": m.ecc_dbe_volatile, "type": "counter", "help": "Total number of double-bit volatile ECC errors."}),
        json!({"name": m.uncorrectable_remapped_rows, "type": "counter", "help": "Number of remapped rows for uncorrectable errors"}),
        json!({"name": m.correctable_remapped_rows, "type": "counter", "help": "Number of remapped rows for correctable errors"}),
        json!({"name": m.row_remap_failure, "type": "gauge", "help": "Whether remapping of rows has failed"}),
        json!({"name": m.gr_engine_active, "type": "gauge", "help": "Ratio of time the graphics engine is active."}),
        json!({"name": m.xid_count, "type": "gauge", "help": "Count of XID Errors within user-specified time window (see xid-count-window-size param).", "per": "xid"}),
    ];
    // DCGM field 1523 under its older name (gpuctl does not collect it; a GPU that sets it stands
    // for an exporter configured with it).
    let recovery = &Catalog::embedded().dcgm().recovery_action.metrics;
    metrics.push(json!({"name": recovery[recovery.len() - 1], "type": "gauge", "help": "GPU Recovery Action (see nvmlDeviceGpuRecoveryAction_t for return values)."}));
    for name in &m.nvlink_errors {
        metrics.push(
            json!({"name": name, "type": "counter", "help": "Total number of NVLink errors."}),
        );
    }
    let gpus: Vec<Value> = gpus
        .iter()
        .map(|g| {
            let (ns, pod) = g.pod.clone().unwrap_or_default();
            json!({
                "gpu": g.index,
                "uuid": g.uuid(),
                "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + g.index),
                "model": "NVIDIA H100 80GB HBM3",
                "hostname": g.node,
                "namespace": ns,
                "pod": pod,
                "container": if pod.is_empty() { "" } else { "main" },
                "values": g.values,
            })
        })
        .collect();
    json!({
        "metrics": metrics,
        "driver_label": "DCGM_FI_DRIVER_VERSION",
        "driver": "580.95.05",
        "gpus": gpus,
    })
}

/// How Prometheus scrapes the exporter.
#[derive(Debug, Clone)]
pub enum Scrape {
    /// One static target, no Kubernetes target labels: the exporter's labels as it writes them.
    Static,
    /// As prometheus-operator scrapes this ServiceMonitor (the rendered object).
    ServiceMonitor(Value),
}

/// The ServiceMonitor's relabelings prometheus-operator runs after its own (promcfg.go
/// generateServiceMonitorConfig, prometheus-operator @002266347d12f6ee0ef0b4a774dfcc613d2d9547),
/// and the target labels they give each node's exporter pod.
struct OperatorScrape {
    honor_labels: bool,
    path: String,
    relabel: Vec<Value>,
    /// Node -> the target's static labels (the `__meta_kubernetes_*` a Kubernetes SD would give).
    meta: Vec<(String, Value)>,
}

/// The exporter's container and Service name in the GPU Operator's DaemonSet.
const EXPORTER: &str = "nvidia-dcgm-exporter";

impl Scrape {
    /// The ServiceMonitor `gpuctl render` writes for `blueprints/dgx-h100-training.yaml`.
    pub fn rendered() -> Scrape {
        let file = "blueprints/dgx-h100-training.yaml";
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let loaded = gpuctl_core::blueprint::load_str(file, &text).unwrap();
        let catalog = Catalog::embedded();
        let valid = gpuctl_core::validate::validate(
            loaded,
            catalog,
            gpuctl_core::validate::Options {
                today: jiff::civil::date(2026, 11, 30),
            },
        )
        .unwrap_or_else(|r| panic!("{file}: {:#?}", r.findings));
        let set = gpuctl_core::render::render(
            &valid,
            catalog,
            &gpuctl_core::render::Templates::embedded(),
        )
        .unwrap();
        let sm = set
            .objects
            .iter()
            .find(|o| o.kind == "ServiceMonitor")
            .expect("the example renders a ServiceMonitor");
        Scrape::ServiceMonitor(sm.manifest.clone())
    }

    fn operator(&self, nodes: &[String]) -> Option<OperatorScrape> {
        let Scrape::ServiceMonitor(sm) = self else {
            return None;
        };
        let spec = &sm["spec"];
        let endpoints = spec["endpoints"].as_array().expect("endpoints");
        assert_eq!(endpoints.len(), 1, "one endpoint: {sm:#}");
        let ep = &endpoints[0];
        let port = ep["port"].as_str().expect("a named port");
        let namespace = sm["metadata"]["namespace"].as_str().unwrap();
        let job_label = spec["jobLabel"].as_str().unwrap_or("");
        let selector = spec["selector"]["matchLabels"].as_object().unwrap();
        let label_of = |n: &str| format!("__meta_kubernetes_service_label_{n}");
        let replace = |from: &str, to: &str| json!({"source_labels": [from], "target_label": to});
        let mut relabel = vec![
            replace("__meta_kubernetes_namespace", "namespace"),
            replace("__meta_kubernetes_service_name", "service"),
            replace("__meta_kubernetes_pod_name", "pod"),
            replace("__meta_kubernetes_pod_container_name", "container"),
            json!({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"}),
        ];
        if !job_label.is_empty() {
            relabel.push(json!({"source_labels": [label_of(job_label)], "target_label": "job", "regex": "(.+)", "replacement": "${1}"}));
        }
        relabel.push(json!({"target_label": "endpoint", "replacement": port}));
        for r in ep["relabelings"].as_array().into_iter().flatten() {
            let mut out = serde_json::Map::new();
            for (k, v) in r.as_object().unwrap() {
                let key = match k.as_str() {
                    "sourceLabels" => "source_labels",
                    "targetLabel" => "target_label",
                    "action" => "action",
                    "regex" => "regex",
                    "replacement" => "replacement",
                    "separator" => "separator",
                    other => panic!("relabeling field `{other}` is not emulated: {r}"),
                };
                let v = match key {
                    "action" => json!(v.as_str().unwrap().to_lowercase()),
                    _ => v.clone(),
                };
                out.insert(key.to_owned(), v);
            }
            relabel.push(Value::Object(out));
        }
        let meta = nodes
            .iter()
            .map(|node| {
                let mut m = serde_json::Map::new();
                m.insert("__param_node".into(), json!(node));
                m.insert("__meta_kubernetes_namespace".into(), json!(namespace));
                m.insert("__meta_kubernetes_service_name".into(), json!(EXPORTER));
                for (k, v) in selector {
                    m.insert(label_of(k), v.clone());
                }
                m.insert(
                    "__meta_kubernetes_pod_name".into(),
                    json!(format!("{EXPORTER}-{node}")),
                );
                m.insert(
                    "__meta_kubernetes_pod_container_name".into(),
                    json!(EXPORTER),
                );
                m.insert("__meta_kubernetes_pod_node_name".into(), json!(node));
                (node.clone(), Value::Object(m))
            })
            .collect();
        Some(OperatorScrape {
            honor_labels: ep["honorLabels"].as_bool().unwrap_or(false),
            path: ep["path"].as_str().unwrap_or("/metrics").to_owned(),
            relabel,
            meta,
        })
    }
}

/// What Prometheus's `replace` relabeling makes of `labels` (the only action the emulated configs
/// use; regexes `(.*)`, the default, and `(.+)`), then its target defaults: `instance` from
/// `__address__`, the `__` labels dropped.
fn relabel(
    mut labels: serde_json::Map<String, Value>,
    rules: &[Value],
) -> BTreeMap<String, String> {
    for r in rules {
        let action = r["action"].as_str().unwrap_or("replace");
        assert_eq!(
            action, "replace",
            "relabel action `{action}` is not emulated"
        );
        let sep = r["separator"].as_str().unwrap_or(";");
        let source: Vec<&str> = r["source_labels"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| {
                labels
                    .get(l.as_str().unwrap())
                    .and_then(Value::as_str)
                    .unwrap_or("")
            })
            .collect();
        let value = source.join(sep);
        let matched = match r["regex"].as_str().unwrap_or("(.*)") {
            "(.*)" => true,
            "(.+)" => !value.is_empty(),
            other => panic!("relabel regex `{other}` is not emulated"),
        };
        if !matched {
            continue;
        }
        let out = r["replacement"]
            .as_str()
            .unwrap_or("$1")
            .replace("${1}", &value)
            .replace("$1", &value);
        let target = r["target_label"].as_str().unwrap().to_owned();
        if out.is_empty() {
            labels.remove(&target);
        } else {
            labels.insert(target, json!(out));
        }
    }
    if !labels.contains_key("instance") {
        let a = labels["__address__"].clone();
        labels.insert("instance".into(), a);
    }
    labels
        .into_iter()
        .filter(|(k, _)| !k.starts_with("__"))
        .map(|(k, v)| (k, v.as_str().unwrap().to_owned()))
        .collect()
}

/// History to backfill: `gpus` as they were from `from` to `to` seconds before now, every `step`.
pub struct History<'a> {
    pub gpus: &'a [Gpu],
    pub from_s_ago: u64,
    pub to_s_ago: u64,
    pub step_s: u64,
}

pub struct TestPrometheus {
    pub url: String,
    /// The `job` label of the exporter's targets.
    pub job: String,
    dir: tempfile::TempDir,
    state_path: PathBuf,
    exporter: Child,
    prometheus: Child,
}

fn require(program: &str) {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "`{program}` is not installed: apt-get install prometheus (docs/testing.md); without it these tests are reported ignored only outside CI"
    );
}

fn write_state(path: &Path, gpus: &[Gpu]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&state(gpus)).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl TestPrometheus {
    /// Starts the exporter with `gpus`, backfills `history`, starts Prometheus scraping the
    /// exporter every second through the rendered ServiceMonitor ([`Scrape::rendered`]), and waits
    /// until it is ready and has scraped once.
    pub fn start(name: &str, gpus: &[Gpu], history: Option<History<'_>>) -> TestPrometheus {
        TestPrometheus::start_with(name, gpus, history, &Scrape::rendered())
    }

    /// [`TestPrometheus::start`] with the scrape given.
    pub fn start_with(
        name: &str,
        gpus: &[Gpu],
        history: Option<History<'_>>,
        scrape: &Scrape,
    ) -> TestPrometheus {
        require("prometheus");
        require("promtool");
        let dir = tempfile::Builder::new()
            .prefix(&format!("gpuctl-prom-{name}-"))
            .tempdir()
            .unwrap();
        let state_path = dir.path().join("state.json");
        write_state(&state_path, gpus);
        let port_file = dir.path().join("exporter.port");
        let exporter = Command::new("python3")
            .arg(root().join("tests/support/dcgm_exporter.py"))
            .arg("serve")
            .arg(&state_path)
            .arg(&port_file)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs tests/support/dcgm_exporter.py");
        let deadline = Instant::now() + WAIT;
        let exporter_port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p.trim().parse::<u16>().unwrap();
            }
            assert!(Instant::now() < deadline, "the exporter did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        let target = format!("127.0.0.1:{exporter_port}");
        // One exporter pod per node, as the GPU Operator's DaemonSet runs it (a node with no GPU
        // series still has one, so a fleet without GPUs is still scraped).
        let mut nodes: Vec<String> = gpus.iter().map(|g| g.node.clone()).collect();
        if let Some(h) = &history {
            nodes.extend(h.gpus.iter().map(|g| g.node.clone()));
        }
        nodes.sort();
        nodes.dedup();
        if nodes.is_empty() {
            nodes.push("node-0".into());
        }
        let operator = scrape.operator(&nodes);
        let job_name = "dcgm-exporter";
        // The target labels each node's series get: computed here for the backfill, and checked
        // against what Prometheus built once it runs.
        let targets: Vec<(Option<String>, BTreeMap<String, String>)> = match &operator {
            None => vec![(
                None,
                BTreeMap::from([
                    ("instance".to_owned(), target.clone()),
                    ("job".to_owned(), job_name.to_owned()),
                ]),
            )],
            Some(op) => op
                .meta
                .iter()
                .map(|(node, meta)| {
                    let mut l = meta.as_object().unwrap().clone();
                    l.insert("__address__".into(), json!(target));
                    l.insert("job".into(), json!(job_name));
                    (Some(node.clone()), relabel(l, &op.relabel))
                })
                .collect(),
        };
        let job = targets[0].1["job"].clone();
        let scrape_json = json!({
            "honor_labels": operator.as_ref().is_some_and(|o| o.honor_labels),
            "targets": targets.iter().map(|(node, labels)| json!({"node": node, "labels": labels})).collect::<Vec<_>>(),
        });
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        if let Some(h) = history {
            let hist_state = dir.path().join("history.json");
            write_state(&hist_state, h.gpus);
            let now = now() as u64;
            let scrape_path = dir.path().join("scrape.json");
            std::fs::write(
                &scrape_path,
                serde_json::to_vec_pretty(&scrape_json).unwrap(),
            )
            .unwrap();
            let om = Command::new("python3")
                .arg(root().join("tests/support/dcgm_exporter.py"))
                .arg("openmetrics")
                .arg(&hist_state)
                .arg((now - h.from_s_ago).to_string())
                .arg((now - h.to_s_ago).to_string())
                .arg(h.step_s.to_string())
                .arg(&scrape_path)
                .output()
                .unwrap();
            assert!(
                om.status.success(),
                "{}",
                String::from_utf8_lossy(&om.stderr)
            );
            backfill(dir.path(), &om.stdout, &data);
        }
        let config = dir.path().join("prometheus.yml");
        // Every second instead of the rendered interval, so a test sees a change at once. JSON is
        // YAML: Prometheus reads it.
        let scrape_config = match &operator {
            None => json!({
                "job_name": job_name,
                "static_configs": [{"targets": [target]}],
            }),
            Some(op) => json!({
                "job_name": job_name,
                "honor_labels": op.honor_labels,
                "metrics_path": op.path,
                "static_configs": op.meta.iter().map(|(_, meta)| json!({"targets": [target], "labels": meta})).collect::<Vec<_>>(),
                "relabel_configs": op.relabel,
            }),
        };
        std::fs::write(
            &config,
            serde_json::to_vec_pretty(&json!({
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [scrape_config],
            }))
            .unwrap(),
        )
        .unwrap();
        let (prometheus, port) = serve(dir.path(), &config, &data, deadline);
        let p = TestPrometheus {
            url: format!("http://127.0.0.1:{port}"),
            job,
            dir,
            state_path,
            exporter,
            prometheus,
        };
        p.wait_for_scrapes(2);
        p.check_targets(&targets);
        p
    }

    /// Replaces the GPUs the exporter serves (from the next scrape on).
    pub fn set(&self, gpus: &[Gpu]) {
        write_state(&self.state_path, gpus);
    }

    /// Serves `gpus` as dcgm-exporter releases before the pod mapping became conditional did: a
    /// GPU no pod holds gets `pod`, `namespace` and `container` written empty.
    pub fn set_empty_attributes(&self, gpus: &[Gpu]) {
        let mut st = state(gpus);
        st["empty_attributes"] = json!(true);
        let tmp = self.state_path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&st).unwrap()).unwrap();
        std::fs::rename(&tmp, &self.state_path).unwrap();
    }

    /// The label sets Prometheus holds for `metric` now (an instant query).
    pub fn series(&self, metric: &str) -> Vec<BTreeMap<String, String>> {
        let body = http_get(
            self.port(),
            &format!("/api/v1/query?query={}", url_encode(metric)),
        )
        .unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| serde_json::from_value(r["metric"].clone()).unwrap())
            .collect()
    }

    /// Waits until Prometheus has scraped the exporter `n` more times.
    pub fn wait_for_scrapes(&self, n: u32) {
        let start = self.scrapes();
        let deadline = Instant::now() + WAIT;
        while self.scrapes() < start + n {
            assert!(Instant::now() < deadline, "no scrape in {WAIT:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The targets Prometheus built are the ones the backfill was written for (one per node,
    /// with the target labels of the emulated ServiceMonitor scrape).
    fn check_targets(&self, expected: &[(Option<String>, BTreeMap<String, String>)]) {
        let body = http_get(self.port(), "/api/v1/targets?state=active").unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        let mut got: Vec<BTreeMap<String, String>> = v["data"]["activeTargets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| serde_json::from_value(t["labels"].clone()).unwrap())
            .collect();
        got.sort();
        let mut want: Vec<BTreeMap<String, String>> =
            expected.iter().map(|(_, l)| l.clone()).collect();
        want.sort();
        assert_eq!(
            got, want,
            "Prometheus's targets differ from the emulated scrape"
        );
    }

    fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Successful scrapes in the last 10 minutes of the least-scraped target.
    fn scrapes(&self) -> u32 {
        let query = format!("min(sum_over_time(up{{job=\"{}\"}}[10m]))", self.job);
        let body = http_get(
            self.port(),
            &format!("/api/v1/query?query={}", url_encode(&query)),
        )
        .unwrap_or_default();
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        v["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok())
            .map_or(0, |f| f as u32)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }
}

/// Writes `openmetrics` (ending with `# EOF`) to `dir/history.om` and backfills it into the TSDB
/// folder `data` with `promtool tsdb create-blocks-from openmetrics`.
pub fn backfill(dir: &Path, openmetrics: &[u8], data: &Path) {
    let om_path = dir.join("history.om");
    std::fs::write(&om_path, openmetrics).unwrap();
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&om_path)
        .arg(data)
        .output()
        .expect("promtool runs (apt-get install prometheus)");
    assert!(
        out.status.success(),
        "promtool backfill failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts Prometheus with `config` over the TSDB folder `data` on a free 127.0.0.1 port (its log
/// in `dir/prometheus.log`) and returns it once `/-/ready` answers, before `deadline`. A free port
/// can be taken between the check and the bind: then it retries with another, up to 5 times.
pub fn serve(dir: &Path, config: &Path, data: &Path, deadline: Instant) -> (Child, u16) {
    let log_path = dir.join("prometheus.log");
    for _ in 0..5 {
        let port = free_port();
        let log = std::fs::File::create(&log_path).unwrap();
        let mut prometheus = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("prometheus runs");
        let ready = loop {
            if let Some(status) = prometheus.try_wait().unwrap() {
                break Err(status);
            }
            if http_ok(port, "/-/ready") {
                break Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "prometheus was not ready in time: {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        match ready {
            Ok(()) => return (prometheus, port),
            Err(status) => {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                assert!(
                    log.contains("address already in use"),
                    "prometheus exited with {status}: {log}"
                );
            }
        }
    }
    panic!("no free port for prometheus after 5 tries");
}

/// A Prometheus that scrapes nothing, over history backfilled from OpenMetrics text: for tests
/// whose series are synthetic from start to end (`gpuctl report`, the accounting idle check).
pub struct Backfilled {
    pub url: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Backfilled {
    /// Backfills `openmetrics` (ending with `# EOF`; promtool takes nothing from the last 3 hours)
    /// and starts Prometheus over it, rules evaluated every minute.
    pub fn start(name: &str, openmetrics: &str) -> Backfilled {
        require("prometheus");
        require("promtool");
        let dir = tempfile::Builder::new()
            .prefix(&format!("gpuctl-prom-{name}-"))
            .tempdir()
            .unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        backfill(dir.path(), openmetrics.as_bytes(), &data);
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, "global: {evaluation_interval: 1m}\n").unwrap();
        let (child, port) = serve(dir.path(), &config, &data, Instant::now() + WAIT);
        Backfilled {
            url: format!("http://127.0.0.1:{port}"),
            child,
            _dir: dir,
        }
    }
}

impl Drop for Backfilled {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestPrometheus {
    fn drop(&mut self) {
        let _ = self.prometheus.kill();
        let _ = self.exporter.kill();
        let _ = self.prometheus.wait();
        let _ = self.exporter.wait();
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then_some(())
        .or_else(|| head.starts_with("HTTP/1.1 200").then_some(()))?;
    Some(body.to_owned())
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn http_ok(port: u16, path: &str) -> bool {
    http_get(port, path).is_some()
}
