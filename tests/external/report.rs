//! `gpuctl report` against a real Prometheus (Debian's 2.42, as CI installs it), backfilled with
//! `promtool tsdb create-blocks-from openmetrics` with two days of synthetic kube-state-metrics,
//! dcgm-exporter and Kueue series for `tests/fixtures/accounting/blueprint.yaml`: whole GPUs (h100),
//! a MIG pool (a100, 1g.10gb), a time-sliced pool (l4, 4 replicas), a DRA pool (h100-dra) and a
//! tenant that borrows quota (team-b). Every figure is computed by hand below; each case is one
//! OpenCost gets wrong (opencost v2.4.2 pkg/costmodel, opencost#3900, #3828; docs/report.md):
//!
//! - team-a holds 2 whole GPUs 48 h at activity 0.5: allocated 96, used 48, idle 48. A finished
//!   pod's requests (kube-state-metrics keeps them) are not counted.
//! - team-b holds 8 GPUs on day one at activity 0.25, with a 2-hour dcgm-exporter scrape gap:
//!   allocated 192, used 22 x 8 x 0.25 = 44, idle 132, unknown 16 (never idle); plus 4 GPUs for 12 h
//!   at activity 1 (48, 48, 0), which its ClusterQueue borrows: 4 x 12 = 48 borrowed GPU-hours.
//! - serving holds one 1g.10gb slice (1/7 of an A100) 48 h at 0.5: 48/7 = 6.86 allocated, 3.43 used.
//! - dev holds one of 4 time-sliced replicas 48 h at 0.8: 12 allocated, 9.6 used, 2.4 idle.
//! - research holds 2 GPUs through a DRA claim on day two at activity 1: 48, 48, 0.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::support::gpuctl::gpuctl;
use gpuctl_test_skip::needs_prometheus;

const BLUEPRINT: &str = "tests/fixtures/accounting/blueprint.yaml";
const H: i64 = 3600;

/// One synthetic series: its metric, labels and value at `t` seconds into the window (`None`: no
/// sample, a scrape gap or the series not existing yet).
struct Synth {
    metric: &'static str,
    labels: Vec<(&'static str, String)>,
    value: Box<dyn Fn(i64) -> Option<f64>>,
}

fn s(
    metric: &'static str,
    labels: &[(&'static str, &str)],
    value: impl Fn(i64) -> Option<f64> + 'static,
) -> Synth {
    Synth {
        metric,
        labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        value: Box::new(value),
    }
}

fn always(v: f64) -> impl Fn(i64) -> Option<f64> {
    move |_| Some(v)
}

fn ksm<'a>(mut l: Vec<(&'static str, &'a str)>) -> Vec<(&'static str, &'a str)> {
    l.extend([("job", "kube-state-metrics"), ("instance", "ksm:8080")]);
    l
}

/// A pod: its requests (if any) on `node` and its phase series, Running while `running(t)`.
fn pod(
    ns: &'static str,
    name: &'static str,
    node: &'static str,
    request: Option<(&'static str, f64)>,
    running: fn(i64) -> bool,
) -> Vec<Synth> {
    let mut out = Vec::new();
    if let Some((resource, n)) = request {
        out.push(s(
            "kube_pod_container_resource_requests",
            &ksm(vec![
                ("namespace", ns),
                ("pod", name),
                ("uid", name),
                ("container", "main"),
                ("node", node),
                ("resource", resource),
                ("unit", "integer"),
            ]),
            always(n),
        ));
    }
    for (phase, want) in [("Running", true), ("Succeeded", false)] {
        out.push(s(
            "kube_pod_status_phase",
            &ksm(vec![
                ("namespace", ns),
                ("pod", name),
                ("uid", name),
                ("phase", phase),
            ]),
            move |t| Some(if running(t) == want { 1.0 } else { 0.0 }),
        ));
    }
    out
}

/// A dcgm-exporter series as scraped through gpuctl's ServiceMonitor (honorLabels: false): the
/// exporter's pod as `pod`, the pod holding the device as `exported_pod`.
fn gpu(
    node: &'static str,
    index: u32,
    held: Option<(&'static str, &'static str)>,
    extra: &[(&'static str, &'static str)],
    value: impl Fn(i64) -> Option<f64> + 'static,
) -> Synth {
    let mut labels: Vec<(&'static str, String)> = vec![
        ("node", node.to_owned()),
        ("gpu", index.to_string()),
        ("UUID", format!("GPU-{node}-{index}")),
        ("device", format!("nvidia{index}")),
        ("namespace", "gpu-operator".to_owned()),
        ("pod", format!("nvidia-dcgm-exporter-{node}")),
        ("job", "nvidia-dcgm-exporter".to_owned()),
        ("instance", format!("{node}:9400")),
    ];
    if let Some((ns, p)) = held {
        labels.push(("exported_namespace", ns.to_owned()));
        labels.push(("exported_pod", p.to_owned()));
        labels.push(("exported_container", "main".to_owned()));
    }
    labels.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    Synth {
        metric: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        labels,
        value: Box::new(value),
    }
}

fn day1(t: i64) -> bool {
    t < 24 * H
}
fn day2(t: i64) -> bool {
    t >= 24 * H
}
fn first_half(t: i64) -> bool {
    t < 12 * H
}
fn whole(_: i64) -> bool {
    true
}

fn scenario() -> Vec<Synth> {
    let mut v = Vec::new();
    for (node, pool) in [
        ("h100-n1", "h100"),
        ("h100-n2", "h100"),
        ("a100-n1", "a100"),
        ("l4-n1", "l4"),
        ("dra-n1", "h100-dra"),
    ] {
        v.push(s(
            "kube_node_labels",
            &ksm(vec![("node", node), ("label_gpuctl_dev_pool", pool)]),
            always(1.0),
        ));
    }
    // team-a: 2 GPUs all along at 0.5; a finished job whose requests kube-state-metrics still shows.
    v.extend(pod(
        "team-a",
        "train-a",
        "h100-n1",
        Some(("nvidia_com_gpu", 2.0)),
        whole,
    ));
    v.extend(pod(
        "team-a",
        "done",
        "h100-n1",
        Some(("nvidia_com_gpu", 1.0)),
        |_| false,
    ));
    for i in 0..2 {
        v.push(gpu(
            "h100-n1",
            i,
            Some(("team-a", "train-a")),
            &[],
            always(0.5),
        ));
    }
    // team-b: 8 GPUs on h100-n2 on day one at 0.25, the exporter silent from 9 h to 12 h; 4 GPUs on
    // h100-n1 for 12 h at 1.0.
    v.extend(pod(
        "team-b",
        "train-b",
        "h100-n2",
        Some(("nvidia_com_gpu", 8.0)),
        day1,
    ));
    v.extend(pod(
        "team-b",
        "burst",
        "h100-n1",
        Some(("nvidia_com_gpu", 4.0)),
        first_half,
    ));
    for i in 0..8 {
        v.push(gpu("h100-n2", i, Some(("team-b", "train-b")), &[], |t| {
            (day1(t) && !(t > 9 * H && t < 12 * H)).then_some(0.25)
        }));
    }
    for i in 2..6 {
        v.push(gpu("h100-n1", i, Some(("team-b", "burst")), &[], |t| {
            first_half(t).then_some(1.0)
        }));
        v.push(gpu("h100-n1", i, None, &[], |t| {
            (!first_half(t)).then_some(0.0)
        }));
    }
    // serving: one 1g.10gb slice of the A100 at 0.5; the GPU's other slices idle and unheld.
    v.extend(pod(
        "serve",
        "infer",
        "a100-n1",
        Some(("nvidia_com_mig_1g_10gb", 1.0)),
        whole,
    ));
    let mig = [("GPU_I_PROFILE", "1g.10gb"), ("GPU_I_ID", "7")];
    v.push(gpu(
        "a100-n1",
        0,
        Some(("serve", "infer")),
        &mig,
        always(0.5),
    ));
    v.push(gpu(
        "a100-n1",
        0,
        None,
        &[("GPU_I_PROFILE", "1g.10gb"), ("GPU_I_ID", "8")],
        always(0.0),
    ));
    // dev: one of the L4's 4 time-sliced replicas at 0.8 (KUBERNETES_VIRTUAL_GPUS: a copy per pod).
    v.extend(pod(
        "dev",
        "nb",
        "l4-n1",
        Some(("nvidia_com_gpu", 1.0)),
        whole,
    ));
    v.push(gpu(
        "l4-n1",
        0,
        Some(("dev", "nb")),
        &[("vgpu", "0")],
        always(0.8),
    ));
    // research: 2 GPUs through a DRA claim on day two (no device-plugin request).
    v.extend(pod("research", "sim", "dra-n1", None, day2));
    for i in 0..2 {
        let claim = [
            ("dra_claim_name", "sim-gpu"),
            ("dra_claim_namespace", "research"),
        ];
        v.push(gpu("dra-n1", i, Some(("research", "sim")), &claim, |t| {
            day2(t).then_some(1.0)
        }));
    }
    // Kueue: cq-a reserves 2 of its 8; cq-b 12 of its 8 for 12 h (borrowing 4), then 8, then 0.
    let kq = |cq: &'static str| {
        vec![
            ("cohort", "all"),
            ("cluster_queue", cq),
            ("flavor", "h100"),
            ("resource", "nvidia.com/gpu"),
            ("job", "kueue"),
            ("instance", "kueue:8443"),
        ]
    };
    for cq in ["cq-a", "cq-b"] {
        v.push(s("kueue_cluster_queue_nominal_quota", &kq(cq), always(8.0)));
    }
    v.push(s(
        "kueue_cluster_queue_resource_reservation",
        &kq("cq-a"),
        always(2.0),
    ));
    v.push(s(
        "kueue_cluster_queue_resource_reservation",
        &kq("cq-b"),
        |t| {
            Some(if first_half(t) {
                12.0
            } else if day1(t) {
                8.0
            } else {
                0.0
            })
        },
    ));
    v
}

/// The series as OpenMetrics, one sample a minute over `[start, start + len)`, each series in time
/// order (promtool drops an earlier sample after a later one silently), ending with `# EOF`.
fn openmetrics(series: &[Synth], start: i64, len: i64) -> String {
    let mut out = String::new();
    for x in series {
        let labels: Vec<String> = x
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        let name = format!("{}{{{}}}", x.metric, labels.join(","));
        let mut t = 0;
        while t < len {
            if let Some(v) = (x.value)(t) {
                let _ = writeln!(out, "{name} {v} {}", start + t);
            }
            t += 60;
        }
    }
    out.push_str("# EOF\n");
    out
}

struct Prom {
    url: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_prometheus(om: &str) -> Prom {
    let dir = tempfile::Builder::new()
        .prefix("gpuctl-report-")
        .tempdir()
        .unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let file = dir.path().join("history.om");
    std::fs::write(&file, om).unwrap();
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&file)
        .arg(&data)
        .output()
        .expect("promtool runs (apt-get install prometheus)");
    assert!(
        out.status.success(),
        "backfill failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, "global: {evaluation_interval: 1m}\n").unwrap();
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let mut child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("prometheus runs");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && ready(port) {
                return Prom {
                    url: format!("http://127.0.0.1:{port}"),
                    child,
                    _dir: dir,
                };
            }
            assert!(Instant::now() < deadline, "prometheus was not ready");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    panic!(
        "prometheus did not start: {}",
        std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
    );
}

fn ready(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(s, "GET /-/ready HTTP/1.0\r\n\r\n");
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.1 200") || buf.starts_with("HTTP/1.0 200")
}

/// The window: two whole UTC days ending at least 4 hours ago (promtool: not the last 3 hours),
/// well inside the default 15-day retention.
fn window() -> (i64, i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let end = (now - 4 * H).div_euclid(86_400) * 86_400;
    (end - 2 * 86_400, end)
}

fn rfc3339(t: i64) -> String {
    jiff::Timestamp::from_second(t).unwrap().to_string()
}

fn report(url: &str, start: i64, end: i64, extra: &[&str]) -> String {
    let (since, until) = (rfc3339(start), rfc3339(end));
    let mut args = vec![
        "report",
        BLUEPRINT,
        "--prometheus",
        url,
        "--since",
        &since,
        "--until",
        &until,
        "--step",
        "1h",
    ];
    args.extend(extra);
    let o = gpuctl(&args);
    assert!(
        o.status.success(),
        "gpuctl report failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// `key -> [allocated, used, idle, unknown, borrowed, cost]` of the CSV's total lines.
fn totals(csv: &str) -> BTreeMap<String, Vec<String>> {
    csv.lines()
        .filter(|l| l.starts_with("total,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[1].to_owned(),
                f[3..9].iter().map(|x| x.to_string()).collect(),
            )
        })
        .collect()
}

fn row(a: &str, u: &str, i: &str, unk: &str, b: &str, c: &str) -> Vec<String> {
    [a, u, i, unk, b, c].iter().map(|x| x.to_string()).collect()
}

#[needs_prometheus]
#[test]
fn report_matches_hand_computed_gpu_hours() {
    let (start, end) = window();
    let prom = start_prometheus(&openmetrics(&scenario(), start, end - start));
    let csv = report(&prom.url, start, end, &["-o", "csv"]);
    let t = totals(&csv);
    let want = BTreeMap::from([
        (
            "team-a".to_owned(),
            row("96.00", "48.00", "48.00", "0.00", "0.00", "240.00"),
        ),
        (
            "team-b".to_owned(),
            row("240.00", "92.00", "132.00", "16.00", "48.00", "600.00"),
        ),
        (
            "serving".to_owned(),
            row("6.86", "3.43", "3.43", "0.00", "0.00", "12.00"),
        ),
        (
            "dev".to_owned(),
            row("12.00", "9.60", "2.40", "0.00", "0.00", "6.00"),
        ),
        (
            "research".to_owned(),
            row("48.00", "48.00", "0.00", "0.00", "0.00", "120.00"),
        ),
    ]);
    assert_eq!(t, want, "{csv}");
    // Per day: team-b's second day is empty; cost centres beside the tenants.
    let day1 = jiff::Timestamp::from_second(start).unwrap().to_string()[..10].to_owned();
    assert!(
        csv.contains(&format!(
            "{day1},team-b,CC-4712,240.00,92.00,132.00,16.00,48.00,600.00,EUR"
        )),
        "{csv}"
    );
    let human = report(&prom.url, start, end, &[]);
    assert!(
        human.contains("unknown: 16.00 of 402.86 allocated GPU-hours had no engine-activity data"),
        "{human}"
    );
    assert!(!human.contains("none of its nodes"), "{human}");
    let by_pool = totals(&report(
        &prom.url,
        start,
        end,
        &["-o", "csv", "--by", "pool"],
    ));
    assert_eq!(by_pool["a100"][0], "6.86");
    assert_eq!(by_pool["h100"][0], "336.00");
    assert_eq!(by_pool["h100"][4], "48.00");
    let json = report(&prom.url, start, end, &["-o", "json", "--by", "model"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["version"], 1);
    let a100 = v["report"]["totals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "A100-SXM4-80GB")
        .unwrap();
    let by_queue = totals(&report(
        &prom.url,
        start,
        end,
        &["-o", "csv", "--by", "queue"],
    ));
    assert_eq!(by_queue["cq-b"][4], "48.00");
    assert_eq!(by_queue["cq-serve"][0], "6.86");
    let md = report(&prom.url, start, end, &["-o", "markdown"]);
    assert!(
        md.contains("| total | team-a | CC-4711 | 96.00 | 48.00 | 48.00 | 0.00 | 0.00 | 240.00 |"),
        "{md}"
    );
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("report.svg");
    report(&prom.url, start, end, &["--svg", svg.to_str().unwrap()]);
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg "), "{picture}");
    assert!(
        picture.contains("<title>unknown: 16.00 GPU-hours</title>"),
        "{picture}"
    );
    assert!(picture.contains(">research</text>"), "{picture}");
    // 48 hourly points of 1/7 each: the sum of 48 additions, within rounding of 48/7.
    let got = a100["allocated"].as_f64().unwrap();
    assert!((got - 48.0 / 7.0).abs() < 1e-12, "{got}");
}
