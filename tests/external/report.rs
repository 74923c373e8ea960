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
//!   at activity 1 (48, 48, 0), which its ClusterQueue borrows: 4 x 12 = 48 borrowed GPU-hours,
//!   lent by team-a's ClusterQueue (6 of its 8 unused, the cohort's only unused quota): 48 lent.
//! - serving holds one 1g.10gb slice (1/7 of an A100) 48 h at 0.5: 48/7 = 6.86 allocated, 3.43 used.
//! - dev holds one of 4 time-sliced replicas 48 h at 0.8: 12 allocated, 9.6 used, 2.4 idle.
//! - research holds 2 GPUs through a DRA claim on day two at activity 1: 48, 48, 0.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::support::gpuctl::gpuctl;
use crate::support::prometheus::Backfilled;
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
/// exporter's pod and container as `pod` and `container` (and prometheus-operator's `endpoint`
/// target label), the pod holding the device as `exported_pod`.
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
        ("container", "nvidia-dcgm-exporter".to_owned()),
        ("endpoint", "gpu-metrics".to_owned()),
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

/// `key -> [allocated, used, idle, unknown, borrowed, lent, cost]` of the CSV's total lines.
fn totals(csv: &str) -> BTreeMap<String, Vec<String>> {
    csv.lines()
        .filter(|l| l.starts_with("total,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[1].to_owned(),
                f[3..10].iter().map(|x| x.to_string()).collect(),
            )
        })
        .collect()
}

fn row(a: &str, u: &str, i: &str, unk: &str, b: &str, l: &str, c: &str) -> Vec<String> {
    [a, u, i, unk, b, l, c]
        .iter()
        .map(|x| x.to_string())
        .collect()
}

#[needs_prometheus]
#[test]
fn report_matches_hand_computed_gpu_hours() {
    let (start, end) = window();
    let prom = Backfilled::start("report", &openmetrics(&scenario(), start, end - start));
    let csv = report(&prom.url, start, end, &["-o", "csv"]);
    let t = totals(&csv);
    let want = BTreeMap::from([
        (
            "team-a".to_owned(),
            row("96.00", "48.00", "48.00", "0.00", "0.00", "48.00", "240.00"),
        ),
        (
            "team-b".to_owned(),
            row(
                "240.00", "92.00", "132.00", "16.00", "48.00", "0.00", "600.00",
            ),
        ),
        (
            "serving".to_owned(),
            row("6.86", "3.43", "3.43", "0.00", "0.00", "0.00", "12.00"),
        ),
        (
            "dev".to_owned(),
            row("12.00", "9.60", "2.40", "0.00", "0.00", "0.00", "6.00"),
        ),
        (
            "research".to_owned(),
            row("48.00", "48.00", "0.00", "0.00", "0.00", "0.00", "120.00"),
        ),
    ]);
    assert_eq!(t, want, "{csv}");
    // Per day: team-b's second day is empty; cost centres beside the tenants.
    let day1 = jiff::Timestamp::from_second(start).unwrap().to_string()[..10].to_owned();
    assert!(
        csv.contains(&format!(
            "{day1},team-b,CC-4712,240.00,92.00,132.00,16.00,48.00,0.00,600.00,EUR"
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
    // cq-a's 6 unused GPUs were the cohort's only unused quota while cq-b borrowed 4: it lent 4
    // for 12 hours (Kueue has no lending metric; docs/report.md says how it is attributed).
    assert_eq!(by_queue["cq-a"][5], "48.00");
    assert_eq!(by_queue["cq-b"][5], "0.00");
    assert_eq!(by_queue["cq-serve"][0], "6.86");
    let md = report(&prom.url, start, end, &["-o", "markdown"]);
    assert!(
        md.contains(
            "| total | team-a | CC-4711 | 96.00 | 48.00 | 48.00 | 0.00 | 0.00 | 48.00 | 240.00 |"
        ),
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

    status_shows_the_last_hour_per_pool(&prom.url, start);
}

/// Issue 41, the Day-2 join: `gpuctl status --prometheus` shows the hour before `--until` per
/// pool as `report --by pool` computes it, here the last hour of day one (minute steps): h100 holds
/// team-a's 2 GPUs at 0.5 and team-b's 8 at 0.25 (10 allocated, 3 used, 7 idle); a100 one 1g.10gb
/// slice at 0.5 (1/7, 1/14, 1/14); l4 one of 4 replicas at 0.8 (0.25, 0.2, 0.05); h100-dra nothing
/// (its claim runs on day two). The cluster side is a diagnostics snapshot without GPU nodes.
fn status_shows_the_last_hour_per_pool(url: &str, start: i64) {
    use gpuctl_core::snapshot::{SNAPSHOT_FORMAT_VERSION, Snapshot};
    let dir = tempfile::tempdir().unwrap();
    let snap_path = dir.path().join("diagnostics.json");
    let snap = Snapshot {
        format_version: SNAPSHOT_FORMAT_VERSION,
        diagnostics: Some(gpuctl_core::diagnostics::Diagnostics::new(
            "gpu-operator",
            Some(rfc3339(start + 24 * H)),
        )),
        ..Snapshot::default()
    };
    std::fs::write(&snap_path, snap.to_json()).unwrap();
    let until = rfc3339(start + 24 * H);
    let status = |extra: &[&str]| {
        let mut args = vec![
            "status",
            BLUEPRINT,
            "--snapshot",
            snap_path.to_str().unwrap(),
            "--prometheus",
            url,
            "--until",
            &until,
        ];
        args.extend(extra);
        let o = gpuctl(&args);
        assert!(
            o.status.success(),
            "gpuctl status failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let json = status(&["-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let h = &v["lastHour"];
    assert_eq!(h["from"], rfc3339(start + 23 * H), "{json}");
    assert_eq!(h["until"], until, "{json}");
    let figures: Vec<(String, [f64; 4])> = h["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let f = |k: &str| p[k].as_f64().unwrap();
            (
                p["pool"].as_str().unwrap().to_owned(),
                [f("allocated"), f("used"), f("idle"), f("unknown")],
            )
        })
        .collect();
    let want = |pool: &str, f: [f64; 4]| (pool.to_owned(), f);
    assert_eq!(
        figures,
        [
            want("h100", [10.0, 3.0, 7.0, 0.0]),
            want("a100", [0.1429, 0.0714, 0.0714, 0.0]),
            want("l4", [0.25, 0.2, 0.05, 0.0]),
            want("h100-dra", [0.0, 0.0, 0.0, 0.0]),
        ],
        "{json}"
    );
    let human = status(&[]);
    assert!(human.contains("GPUs in the last hour ("), "{human}");
    let picture = dir.path().join("status.svg");
    status(&["--svg", picture.to_str().unwrap()]);
    let picture = std::fs::read_to_string(&picture).unwrap();
    assert!(
        picture.contains(
            "<title>h100: idle 7.00 of 10.00 allocated (used 3.00, unknown 0.00)</title>"
        ),
        "{picture}"
    );
    assert!(
        human
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["h100", "10.00", "3.00", "7.00", "0.00"]),
        "{human}"
    );
    // Without accounting there is nothing to judge idleness by: refused before any read.
    let o = gpuctl(&[
        "status",
        "blueprints/dgx-h100-training.yaml",
        "--snapshot",
        snap_path.to_str().unwrap(),
        "--prometheus",
        url,
    ]);
    assert_eq!(o.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("has no `spec.accounting`"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Issue 41, the Day-2 join: with `spec.accounting`, doctor's allocated-but-idle finding (GPU260)
/// is the accounting alert's condition over the same expressions the recording rules record, so
/// it judges by the blueprint's threshold (5 % here, not the profile's 1 %) and by weighted
/// shares. Two hours of history; doctor evaluates at the end with a 30m window:
///
/// - team-a holds 2 whole GPUs at 3 %: idle (GPU260, pool h100), though above the profile's 1 %.
/// - serve holds a 1g.10gb slice at 50 %: not idle; the A100's unheld slice at 0 is nobody's.
/// - dev holds a time-sliced replica at 4 %: idle (pool l4).
/// - team-b holds 8 GPUs at 0 for the last 20 minutes only (busy before): younger than the window
///   as an idle pod, so not reported.
#[needs_prometheus]
#[tokio::test]
async fn doctor_judges_idle_pods_as_the_accounting_alert_does() {
    use gpuctl_cluster::prometheus::{PrometheusConfig, metric_findings};
    use gpuctl_core::metrics::{AccountingIdle, MetricSettings, SubjectKind};
    use gpuctl_core::profiles::Catalog;

    fn recent(t: i64) -> bool {
        t >= 2 * H - 20 * 60
    }
    let len = 2 * H;
    let (_, end) = window();
    let start = end - len;
    let mut v = Vec::new();
    for (node, pool) in [("h100-n1", "h100"), ("a100-n1", "a100"), ("l4-n1", "l4")] {
        v.push(s(
            "kube_node_labels",
            &ksm(vec![("node", node), ("label_gpuctl_dev_pool", pool)]),
            always(1.0),
        ));
    }
    v.extend(pod(
        "team-a",
        "train-a",
        "h100-n1",
        Some(("nvidia_com_gpu", 2.0)),
        whole,
    ));
    for i in 0..2 {
        v.push(gpu(
            "h100-n1",
            i,
            Some(("team-a", "train-a")),
            &[],
            always(0.03),
        ));
    }
    v.extend(pod(
        "team-b",
        "train-b",
        "h100-n1",
        Some(("nvidia_com_gpu", 4.0)),
        whole,
    ));
    for i in 2..6 {
        v.push(gpu("h100-n1", i, Some(("team-b", "train-b")), &[], |t| {
            Some(if recent(t) { 0.0 } else { 0.9 })
        }));
    }
    v.extend(pod(
        "serve",
        "infer",
        "a100-n1",
        Some(("nvidia_com_mig_1g_10gb", 1.0)),
        whole,
    ));
    v.push(gpu(
        "a100-n1",
        0,
        Some(("serve", "infer")),
        &[("GPU_I_PROFILE", "1g.10gb"), ("GPU_I_ID", "7")],
        always(0.5),
    ));
    v.push(gpu(
        "a100-n1",
        0,
        None,
        &[("GPU_I_PROFILE", "1g.10gb"), ("GPU_I_ID", "8")],
        always(0.0),
    ));
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
        always(0.04),
    ));
    let prom = Backfilled::start("doctor-idle", &openmetrics(&v, start, len));

    let bp = gpuctl_core::blueprint::load_file(std::path::Path::new(BLUEPRINT))
        .unwrap()
        .blueprint;
    let table = gpuctl_core::render::accounting::AccountingTable::new(&bp, Catalog::embedded())
        .expect("the fixture has spec.accounting");
    let facts = Catalog::embedded().dcgm();
    let settings = MetricSettings::new(facts, None, Some(&table.idle_for))
        .unwrap()
        .with_accounting(Some(AccountingIdle::of(&table)));
    // The last sample is at `end - 60`.
    let at = (end - 60) as f64;
    let run = metric_findings(
        &PrometheusConfig::new(&prom.url),
        facts,
        &settings,
        Some(at),
    )
    .await
    .unwrap();
    let idle: Vec<(String, String, String)> = run
        .findings
        .iter()
        .filter(|f| f.id == "GPU260")
        .map(|f| {
            let p = &f.subjects[0];
            assert_eq!(p.kind, SubjectKind::Pod, "{f:?}");
            (
                p.namespace.clone().unwrap_or_default(),
                p.name.clone(),
                format!(
                    "{} = {}",
                    p.detail.clone().unwrap_or_default(),
                    f.evidence[0].value
                ),
            )
        })
        .collect();
    let want = |ns: &str, pod: &str, d: &str| (ns.to_owned(), pod.to_owned(), d.to_owned());
    assert_eq!(
        idle,
        [
            want("dev", "nb", "pool l4 = 4 %"),
            want("team-a", "train-a", "pool h100 = 3 %"),
        ],
        "{:#?}",
        run.findings
    );
    // Without accounting, the profile's GPU check (1 %) finds none of them idle.
    let plain = MetricSettings::new(facts, None, Some(&table.idle_for)).unwrap();
    let run = metric_findings(&PrometheusConfig::new(&prom.url), facts, &plain, Some(at))
        .await
        .unwrap();
    assert!(
        run.findings.iter().all(|f| f.id != "GPU260"),
        "{:#?}",
        run.findings
    );
}
