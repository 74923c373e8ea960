//! Doctor's metric findings against a real Prometheus: one scenario per failure story (an Xid 79
//! GPU, uncorrectable ECC errors, a GPU held by an idle pod) and a healthy fleet with none. The
//! GPUs are played by `tests/support/dcgm_exporter.py` (metrics as dcgm-exporter formats them);
//! Prometheus scrapes it and, for the idle story, holds an hour of backfilled history. Each
//! scenario asserts the exact set of findings, so removing a check fails its scenario.

#[path = "support/prometheus.rs"]
mod prometheus;

use std::time::{Duration, Instant};

use gpuctl_cluster::prometheus::{MetricRun, PrometheusConfig, metric_findings};
use gpuctl_core::metrics::{Finding, MetricSettings, SubjectKind};
use gpuctl_core::profiles::Catalog;
use prometheus::{Gpu, History, TestPrometheus, WAIT};
use serde_json::json;

fn settings() -> MetricSettings {
    MetricSettings::new(Catalog::embedded().dcgm(), None, None).unwrap()
}

async fn run(prom: &TestPrometheus) -> MetricRun {
    metric_findings(
        &PrometheusConfig::new(&prom.url),
        Catalog::embedded().dcgm(),
        &settings(),
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", prom.log()))
}

/// Runs doctor's queries until `done` holds for the findings (Prometheus needs a scrape or two to
/// see a change), then returns them; fails after [`WAIT`].
async fn until(prom: &TestPrometheus, done: impl Fn(&[Finding]) -> bool) -> Vec<Finding> {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = run(prom).await;
        if done(&r.findings) || Instant::now() > deadline {
            return r.findings;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn ids(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.id).collect()
}

fn names(f: &Finding, kind: SubjectKind) -> Vec<String> {
    f.subjects
        .iter()
        .filter(|s| s.kind == kind)
        .map(|s| match &s.namespace {
            Some(ns) => format!("{ns}/{}", s.name),
            None => s.name.clone(),
        })
        .collect()
}

fn fleet() -> Vec<Gpu> {
    vec![
        Gpu::healthy("node-a", 0)
            .held_by("team-a", "train-0")
            .busy(),
        Gpu::healthy("node-a", 1)
            .held_by("team-a", "train-0")
            .busy(),
        Gpu::healthy("node-b", 0),
        Gpu::healthy("node-b", 1)
            .held_by("team-b", "serve-0")
            .busy(),
    ]
}

#[tokio::test]
#[cfg_attr(
    gpuctl_no_prometheus,
    ignore = "skipped: needs prometheus and promtool (docs/testing.md)"
)]
async fn healthy_fleet_has_no_metric_findings() {
    let prom = TestPrometheus::start("healthy", &fleet(), None);
    prom.wait_for_scrapes(3);
    let r = run(&prom).await;
    assert_eq!(r.findings, vec![], "{:#?}", r.findings);
    // The exporter was seen: every query ran and the GPUs came back.
    assert!(r.samples >= 4, "{} samples", r.samples);
    assert!(r.queries >= 20, "{} queries", r.queries);
}

#[tokio::test]
#[cfg_attr(
    gpuctl_no_prometheus,
    ignore = "skipped: needs prometheus and promtool (docs/testing.md)"
)]
async fn xid_79_gpu_is_named_with_its_node_pod_and_fix() {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let prom = TestPrometheus::start("xid79", &fleet(), None);
    // GPU 1 of node-a falls off the bus under team-a's training pod.
    let mut gpus = fleet();
    gpus[1] = gpus[1]
        .clone()
        .set(&m.xid_count, json!({"79": 1}))
        .set(&m.xid_last, json!(79));
    prom.set(&gpus);
    let f = until(&prom, |f| !f.is_empty()).await;
    assert_eq!(ids(&f), ["GPU250"], "{f:#?}");
    let x = &f[0];
    assert_eq!(names(x, SubjectKind::Node), ["node-a"]);
    assert_eq!(names(x, SubjectKind::Gpu), [gpus[1].uuid()]);
    assert_eq!(names(x, SubjectKind::Pod), ["team-a/train-0"]);
    assert!(x.cause.contains("fell off the bus (Xid 79)"), "{}", x.cause);
    assert!(
        x.fix
            .starts_with("kubectl cordon node-a && kubectl drain node-a"),
        "{}",
        x.fix
    );
    assert!(
        x.evidence[0].metric.contains("xid=\"79\""),
        "{:?}",
        x.evidence
    );
    assert!(x.evidence[0].last_seen.is_some(), "{:?}", x.evidence);
}

#[tokio::test]
#[cfg_attr(
    gpuctl_no_prometheus,
    ignore = "skipped: needs prometheus and promtool (docs/testing.md)"
)]
async fn uncorrectable_ecc_errors_are_an_error_on_their_gpu() {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let prom = TestPrometheus::start("ecc", &fleet(), None);
    let mut gpus = fleet();
    gpus[3] = gpus[3].clone().set(&m.ecc_dbe_volatile, json!(2));
    prom.set(&gpus);
    let f = until(&prom, |f| !f.is_empty()).await;
    assert_eq!(ids(&f), ["GPU254"], "{f:#?}");
    assert_eq!(names(&f[0], SubjectKind::Node), ["node-b"]);
    assert_eq!(names(&f[0], SubjectKind::Pod), ["team-b/serve-0"]);
    assert_eq!(f[0].evidence[0].metric, m.ecc_dbe_volatile);
    assert!(
        f[0].evidence[0].value.starts_with("+2 "),
        "{:?}",
        f[0].evidence
    );
    assert!(f[0].fix.contains("nvidia-smi -r -i 1"), "{}", f[0].fix);
}

#[tokio::test]
#[cfg_attr(
    gpuctl_no_prometheus,
    ignore = "skipped: needs prometheus and promtool (docs/testing.md)"
)]
async fn gpu_held_by_an_idle_pod_for_the_whole_window() {
    // An hour and ten minutes of history: team-c's notebook has held GPU 0 of node-c without
    // using it; team-a's training pod uses its GPU; node-c's GPU 1 is free and idle (no finding:
    // nobody holds it). The profile's default window (1h) is used.
    let idle = Gpu::healthy("node-c", 0).held_by("team-c", "notebook-0");
    let gpus = vec![
        idle.clone(),
        Gpu::healthy("node-c", 1),
        Gpu::healthy("node-a", 0)
            .held_by("team-a", "train-0")
            .busy(),
    ];
    let history = History {
        gpus: &gpus,
        from_s_ago: 70 * 60,
        to_s_ago: 5,
        step_s: 30,
    };
    let prom = TestPrometheus::start("idle", &gpus, Some(history));
    let r = run(&prom).await;
    assert_eq!(ids(&r.findings), ["GPU260"], "{:#?}", r.findings);
    let x = &r.findings[0];
    assert_eq!(names(x, SubjectKind::Pod), ["team-c/notebook-0"]);
    assert_eq!(names(x, SubjectKind::Gpu), [idle.uuid()]);
    assert!(
        x.fix.contains("kubectl -n team-c delete pod notebook-0"),
        "{}",
        x.fix
    );
    // With a window longer than the history the pod is not (yet) reported.
    let long = MetricSettings::new(Catalog::embedded().dcgm(), None, Some("2h")).unwrap();
    let r = metric_findings(
        &PrometheusConfig::new(&prom.url),
        Catalog::embedded().dcgm(),
        &long,
        None,
    )
    .await
    .unwrap();
    assert_eq!(ids(&r.findings), Vec::<&str>::new(), "{:#?}", r.findings);
}

#[tokio::test]
#[cfg_attr(
    gpuctl_no_prometheus,
    ignore = "skipped: needs prometheus and promtool (docs/testing.md)"
)]
async fn errors_name_the_url_and_never_the_token() {
    let prom = TestPrometheus::start("errors", &fleet(), None);
    // A path that is not Prometheus's API.
    let mut cfg = PrometheusConfig::new(format!("{}/not-here", prom.url));
    cfg.token = Some(gpuctl_cluster::prometheus::Token::new("s3cret-token"));
    let e = metric_findings(&cfg, Catalog::embedded().dcgm(), &settings(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("{}/not-here", prom.url)), "{e}");
    assert!(e.contains("HTTP 404"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    // Nothing listening.
    let dead = format!("http://127.0.0.1:{}", {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    });
    let e = metric_findings(
        &PrometheusConfig::new(&dead),
        Catalog::embedded().dcgm(),
        &settings(),
        None,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(&format!("cannot reach Prometheus at {dead}")),
        "{e}"
    );
    // A response larger than the bound is refused, not read whole.
    let mut small = PrometheusConfig::new(&prom.url);
    small.max_response_bytes = 64;
    let e = metric_findings(&small, Catalog::embedded().dcgm(), &settings(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 64 bytes"), "{e}");
}

/// The real binary: `gpuctl doctor BLUEPRINT --snapshot DAY2 --prometheus URL` adds the metric
/// findings to the report (the example's Day-2 snapshot, the Xid 79 story from Prometheus).
#[tokio::test]
#[cfg_attr(
    gpuctl_no_prometheus,
    ignore = "skipped: needs prometheus and promtool (docs/testing.md)"
)]
async fn doctor_command_adds_metric_findings_to_its_report() {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let mut gpus = fleet();
    gpus[1] = gpus[1].clone().set(&m.xid_count, json!({"79": 1}));
    let prom = TestPrometheus::start("cli", &gpus, None);
    until(&prom, |f| !f.is_empty()).await;
    let root = env!("CARGO_MANIFEST_DIR");
    let doctor = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gpuctl"))
            .args([
                "doctor",
                &format!("{root}/blueprints/dgx-h100-training.yaml"),
                "--snapshot",
                &format!("{root}/blueprints/snapshots/dgx-h100-training-day2.json"),
                "-o",
                "json",
            ])
            .args(extra)
            .env_remove("GPUCTL_PROMETHEUS_URL")
            .env("GPUCTL_TODAY", "2026-11-30")
            .output()
            .unwrap()
    };
    let with = doctor(&["--prometheus", &prom.url]);
    let report: serde_json::Value = serde_json::from_slice(&with.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&with.stderr)));
    let found: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "GPU250")
        .collect();
    assert_eq!(found.len(), 1, "{report:#}");
    assert_eq!(found[0]["layer"], "node-hardware");
    assert!(
        found[0]["subjects"]
            .as_array()
            .unwrap()
            .contains(&json!("pod/team-a/train-0")),
        "{:#}",
        found[0]
    );
    assert_eq!(
        with.status.code(),
        Some(1),
        "an error finding fails the run"
    );
    // Without --prometheus there is no metric finding; a bad window is a usage error.
    let without = doctor(&[]);
    let report: serde_json::Value = serde_json::from_slice(&without.stdout).unwrap();
    assert!(
        !report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "GPU250"),
        "{report:#}"
    );
    let bad = doctor(&["--prometheus", &prom.url, "--idle-window", "soon"]);
    assert_eq!(
        bad.status.code(),
        Some(64),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
