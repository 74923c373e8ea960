//! Doctor's metric findings against a real Prometheus: one scenario per failure story (an Xid 79
//! GPU, uncorrectable ECC errors, a GPU held by an idle pod, a fleet whose GPUs each carry one
//! hardware or application fault, a Prometheus without any dcgm-exporter series) and a healthy
//! fleet with none. The GPUs are played by `tests/support/dcgm_exporter.py` (metrics as
//! dcgm-exporter formats them); Prometheus scrapes it and, where a story needs minutes of history
//! (a temperature held for 5m, a counter that grew), holds backfilled history. Each scenario asserts
//! the exact set of findings and which GPU each is about, so removing a check fails its scenario.

use crate::support::prometheus;

use std::time::{Duration, Instant};

use gpuctl_cluster::prometheus::{MetricRun, PrometheusConfig, metric_findings};
use gpuctl_core::located::Severity;
use gpuctl_core::metrics::{Finding, MetricSettings, SubjectKind};
use gpuctl_core::profiles::Catalog;
use gpuctl_test_skip::needs_prometheus;
use prometheus::{Gpu, History, Scrape, TestPrometheus, WAIT};
use serde_json::json;

use crate::support::gpuctl::{Gpuctl, TODAY};

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

#[needs_prometheus]
#[tokio::test]
async fn healthy_fleet_has_no_metric_findings() {
    let prom = TestPrometheus::start("healthy", &fleet(), None);
    prom.wait_for_scrapes(3);
    let r = run(&prom).await;
    assert_eq!(r.findings, vec![], "{:#?}", r.findings);
    // The exporter was seen: every query ran and the GPUs came back.
    assert!(r.samples >= 4, "{} samples", r.samples);
    assert!(r.queries >= 20, "{} queries", r.queries);
}

#[needs_prometheus]
#[tokio::test]
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

#[needs_prometheus]
#[tokio::test]
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

#[needs_prometheus]
#[tokio::test]
async fn gpu_held_by_an_idle_pod_for_the_whole_window() {
    // An hour and ten minutes of history: team-c's notebook has held GPU 0 of node-c without
    // using it; team-a's training pod uses its GPU; node-c's GPU 1 is free and idle (no finding:
    // nobody holds it, though through the ServiceMonitor its series carries the exporter's own pod
    // as `pod`). The profile's default window (1h) is used.
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

#[needs_prometheus]
#[tokio::test]
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
#[needs_prometheus]
#[tokio::test]
async fn doctor_command_adds_metric_findings_to_its_report() {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let mut gpus = fleet();
    gpus[1] = gpus[1].clone().set(&m.xid_count, json!({"79": 1}));
    let prom = TestPrometheus::start("cli", &gpus, None);
    until(&prom, |f| !f.is_empty()).await;
    let root = env!("CARGO_MANIFEST_DIR");
    let doctor = |extra: &[&str]| {
        Gpuctl::new([
            "doctor",
            &format!("{root}/blueprints/dgx-h100-training.yaml"),
            "--snapshot",
            &format!("{root}/blueprints/snapshots/dgx-h100-training-day2.json"),
            "-o",
            "json",
        ])
        .args(extra)
        .env_remove("GPUCTL_PROMETHEUS_URL")
        .today(TODAY)
        .output()
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

fn about<'a>(f: &'a [Finding], id: &str, gpu: &Gpu) -> &'a Finding {
    let found: Vec<&Finding> = f
        .iter()
        .filter(|x| x.id == id && names(x, SubjectKind::Gpu) == [gpu.uuid()])
        .collect();
    assert_eq!(found.len(), 1, "one {id} about {}: {f:#?}", gpu.uuid());
    found[0]
}

/// Ten minutes of a fleet, then each of nine GPUs shows one fault as dcgm-exporter reports it: a
/// hardware Xid under a pod that needs a reset (48) and one that needs the pod restarted (94), an
/// application Xid (13) mapped to its pod, an Xid gpuctl does not classify (8), a failed row remap,
/// uncorrectable remapped rows that grew, a GPU above 85 C for the last 5 minutes, clocks held down
/// by hardware slowdown and power brake, and NVLink error counters that grew. A tenth GPU stays
/// healthy. The history (backfilled) holds the fleet before the faults, with the hot GPU already
/// hot, so the counters grew within the error window and the temperature held for 5 minutes.
#[needs_prometheus]
#[tokio::test]
async fn each_gpu_fault_is_named_on_its_gpu() {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let train = |node: &str, i: u32| Gpu::healthy(node, i).held_by("team-a", "train-1").busy();
    let before = vec![
        train("node-d", 0),
        train("node-d", 1),
        Gpu::healthy("node-e", 0).held_by("team-b", "sim-0").busy(),
        Gpu::healthy("node-e", 1),
        Gpu::healthy("node-f", 0),
        Gpu::healthy("node-f", 1),
        train("node-g", 0).set(&m.gpu_temp, json!(88)),
        train("node-g", 1),
        train("node-h", 0),
        train("node-h", 1),
    ];
    let mut now = before.clone();
    let xid = |g: Gpu, code: u32| {
        g.set(&m.xid_count, json!({code.to_string(): 1}))
            .set(&m.xid_last, json!(code))
    };
    now[0] = xid(now[0].clone(), 48);
    now[1] = xid(now[1].clone(), 94);
    now[2] = xid(now[2].clone(), 13);
    // An Xid NVIDIA's catalog does not define (Xid 8 was this example until the December facts
    // audit added it to profiles/dcgm.yaml).
    now[3] = xid(now[3].clone(), 999);
    now[4] = now[4].clone().set(&m.row_remap_failure, json!(1));
    now[5] = now[5].clone().set(&m.uncorrectable_remapped_rows, json!(3));
    // now[6] stays as hot as it was.
    // hw_slowdown (8) + hw_power_brake (128).
    now[7] = now[7].clone().set(&m.clock_event_reasons, json!(136));
    now[8] = now[8]
        .clone()
        .set(&m.nvlink_errors[0], json!(12))
        .set(&m.nvlink_errors[2], json!(2));
    let history = History {
        gpus: &before,
        from_s_ago: 10 * 60,
        to_s_ago: 5,
        step_s: 15,
    };
    let prom = TestPrometheus::start("faults", &now, Some(history));
    let f = until(&prom, |f| f.len() >= 9).await;
    assert_eq!(
        ids(&f),
        [
            "GPU251", "GPU252", "GPU252", "GPU253", "GPU255", "GPU256", "GPU257", "GPU258",
            "GPU259"
        ],
        "{f:#?}"
    );
    assert!(
        !f.iter()
            .any(|x| names(x, SubjectKind::Gpu) == [now[9].uuid()]),
        "the healthy GPU: {f:#?}"
    );

    // GPU251, Xid 48: drain and reset.
    let x = about(&f, "GPU251", &now[0]);
    assert_eq!(x.severity, Severity::Error);
    assert_eq!(names(x, SubjectKind::Node), ["node-d"]);
    assert_eq!(names(x, SubjectKind::Pod), ["team-a/train-1"]);
    assert!(
        x.cause.contains(
            "reported Xid 48 (double-bit (uncorrectable) ECC error), a hardware fault the GPU needs a reset for"
        ),
        "{}",
        x.cause
    );
    assert!(
        x.fix
            .starts_with("kubectl cordon node-d && kubectl drain node-d")
            && x.fix.contains("nvidia-smi -r -i 0"),
        "{}",
        x.fix
    );
    assert!(
        x.evidence[0].metric.contains("xid=\"48\""),
        "{:?}",
        x.evidence
    );
    // GPU252, Xid 94 (contained memory error): the catalog's immediate action is to restart the
    // application (a warning); the GPU is reset when convenient.
    let x = about(&f, "GPU252", &now[1]);
    assert_eq!(x.severity, Severity::Warning);
    assert!(
        x.cause.contains("Xid 94 (contained memory error"),
        "{}",
        x.cause
    );
    assert!(
        x.fix.starts_with("kubectl -n team-a delete pod train-1")
            && x.fix.contains("nvidia-smi -r -i 1"),
        "{}",
        x.fix
    );
    // GPU252: the application's fault, named by its pod.
    let x = about(&f, "GPU252", &now[2]);
    assert_eq!(x.severity, Severity::Warning);
    assert_eq!(names(x, SubjectKind::Pod), ["team-b/sim-0"]);
    assert!(
        x.cause.starts_with("pod team-b/sim-0 caused Xid 13")
            && x.cause.contains("an application error, not a GPU fault"),
        "{}",
        x.cause
    );
    assert!(
        x.fix
            .contains("kubectl -n team-b logs sim-0 -c main --previous"),
        "{}",
        x.fix
    );
    // GPU253: an Xid outside gpuctl's classification.
    let x = about(&f, "GPU253", &now[3]);
    assert_eq!(names(x, SubjectKind::Node), ["node-e"]);
    assert!(
        x.cause
            .contains("reported Xid 999, which gpuctl's Xid classification does not cover"),
        "{}",
        x.cause
    );
    assert!(
        x.fix.contains("look Xid 999 up in NVIDIA's Xid catalog")
            && x.fix.contains("kubectl debug node/node-e"),
        "{}",
        x.fix
    );
    // GPU255: no spare rows left.
    let x = about(&f, "GPU255", &now[4]);
    assert_eq!(x.severity, Severity::Error);
    assert_eq!(x.evidence[0].metric, m.row_remap_failure);
    assert!(
        x.cause.contains("failed to remap a faulty memory row"),
        "{}",
        x.cause
    );
    assert!(
        x.fix.starts_with("kubectl cordon node-f") && x.fix.contains("replace the GPU (RMA)"),
        "{}",
        x.fix
    );
    // GPU256: rows remapped after uncorrectable errors, pending a reset.
    let x = about(&f, "GPU256", &now[5]);
    assert_eq!(x.evidence[0].metric, m.uncorrectable_remapped_rows);
    assert!(x.evidence[0].value.starts_with("+3 "), "{:?}", x.evidence);
    assert!(x.cause.contains("remapped 3 memory rows"), "{}", x.cause);
    assert!(x.fix.contains("nvidia-smi -r -i 1"), "{}", x.fix);
    // GPU257: above the profile's 85 C for the profile's 5 minutes.
    let x = about(&f, "GPU257", &now[6]);
    assert_eq!(names(x, SubjectKind::Pod), ["team-a/train-1"]);
    assert_eq!(x.evidence[0].value, "at least 88 C for the last 5m");
    assert!(
        x.cause.contains("has stayed above 85 C for 5m"),
        "{}",
        x.cause
    );
    assert!(
        x.fix
            .contains("nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i 0")
            && x.fix.contains("kubectl cordon node-g"),
        "{}",
        x.fix
    );
    // GPU258: the fault bits of the clock event mask, by name.
    let x = about(&f, "GPU258", &now[7]);
    assert_eq!(x.evidence[0].value, "136 (hw_slowdown, hw_power_brake)");
    assert!(
        x.cause.contains("because a hardware protection engaged"),
        "{}",
        x.cause
    );
    assert!(
        x.fix
            .contains("nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i 1"),
        "{}",
        x.fix
    );
    // GPU259: one finding for the GPU, each counter that grew as evidence.
    let x = about(&f, "GPU259", &now[8]);
    let metrics: Vec<&str> = x.evidence.iter().map(|e| e.metric.as_str()).collect();
    assert_eq!(metrics, [&m.nvlink_errors[0], &m.nvlink_errors[2]]);
    assert!(x.evidence[0].value.starts_with("+12 "), "{:?}", x.evidence);
    assert!(x.cause.contains("counted NVLink errors"), "{}", x.cause);
    assert!(
        x.fix.contains("nvidia-smi nvlink -e -i 0") && x.fix.contains("kubectl drain node-h"),
        "{}",
        x.fix
    );
}

/// A Prometheus that scrapes no GPU at all (the exporter's target answers, with no GPU series):
/// the doctor says it could check nothing instead of reporting a healthy fleet.
#[needs_prometheus]
#[tokio::test]
async fn no_exporter_series_is_a_finding() {
    let prom = TestPrometheus::start("none", &[], None);
    let r = run(&prom).await;
    assert_eq!(ids(&r.findings), ["GPU261"], "{:#?}", r.findings);
    let x = &r.findings[0];
    assert_eq!(x.severity, Severity::Warning);
    assert_eq!(x.evidence[0].value, "no series in the last 5m");
    assert!(
        x.cause.contains("Prometheus has no dcgm-exporter metrics"),
        "{}",
        x.cause
    );
    assert!(
        x.fix
            .starts_with("kubectl get pods,servicemonitors -A -l app=nvidia-dcgm-exporter"),
        "{}",
        x.fix
    );
}

/// Faults that began after the last step of the window's subquery (its steps fall on whole
/// minutes for the 1h window): an Xid, a failed row remap and thermal slowdown that dcgm-exporter
/// reported from 10 s past a minute on, with the doctor run 25 s later. They are reported, with
/// when they were seen, instead of waiting for the next whole minute. The history is backfilled,
/// so the timing is exact.
#[needs_prometheus]
#[tokio::test]
async fn gauge_faults_newer_than_the_last_step_are_found() {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let gpus = vec![
        Gpu::healthy("node-j", 0)
            .set(&m.xid_count, json!({"48": 1}))
            .set(&m.xid_last, json!(48)),
        Gpu::healthy("node-j", 1).set(&m.row_remap_failure, json!(1)),
        // sw_thermal (32).
        Gpu::healthy("node-j", 2).set(&m.clock_event_reasons, json!(32)),
    ];
    let t = prometheus::now() as u64;
    let onset = t / 60 * 60 - 110;
    let history = History {
        gpus: &gpus,
        from_s_ago: t - onset,
        to_s_ago: t - onset - 15,
        step_s: 15,
    };
    let prom = TestPrometheus::start("fresh", &gpus, Some(history));
    let at = (onset + 25) as f64;
    assert!(at < ((onset / 60 + 1) * 60) as f64, "before the next step");
    let r = metric_findings(
        &PrometheusConfig::new(&prom.url),
        Catalog::embedded().dcgm(),
        &settings(),
        Some(at),
    )
    .await
    .unwrap();
    let f = &r.findings;
    assert_eq!(ids(f), ["GPU251", "GPU255", "GPU258"], "{f:#?}");
    for (id, gpu) in [
        ("GPU251", &gpus[0]),
        ("GPU255", &gpus[1]),
        ("GPU258", &gpus[2]),
    ] {
        let x = about(f, id, gpu);
        let seen = x.evidence[0].last_seen.as_deref().expect("seen at");
        let seen: jiff::Timestamp = seen.parse().unwrap();
        assert!(
            seen.as_second() >= onset as i64 && seen.as_second() <= at as i64,
            "{id}: {seen} is within the fault's {onset}..{at}"
        );
    }
    assert!(
        about(f, "GPU258", &gpus[2])
            .cause
            .contains("because it is too hot"),
        "{f:#?}"
    );
}

/// Issue 26: NVIDIA's catalog gives Xid 43, 63 and 92 the immediate action IGNORE. On a live
/// fleet they are info findings with no reset, drain or reboot advice (92, recurring, says so and
/// gives the catalog's investigatory action, contact support); Xid 79 still drains and reboots.
#[needs_prometheus]
#[tokio::test]
async fn ignore_xids_give_no_reset_advice_and_79_still_does() {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let xid = |g: Gpu, code: u32, count: u32| {
        g.set(&m.xid_count, json!({code.to_string(): count}))
            .set(&m.xid_last, json!(code))
    };
    let gpus = vec![
        xid(Gpu::healthy("node-k", 0), 63, 1),
        xid(
            Gpu::healthy("node-k", 1)
                .held_by("team-a", "train-2")
                .busy(),
            43,
            1,
        ),
        xid(Gpu::healthy("node-k", 2), 92, 3),
        xid(
            Gpu::healthy("node-l", 0)
                .held_by("team-b", "serve-1")
                .busy(),
            79,
            1,
        ),
    ];
    let prom = TestPrometheus::start("ignore", &gpus, None);
    let f = until(&prom, |f| f.len() >= 4).await;
    assert_eq!(ids(&f), ["GPU250", "GPU262", "GPU262", "GPU262"], "{f:#?}");
    for (gpu, code) in [(&gpus[0], 63), (&gpus[1], 43), (&gpus[2], 92)] {
        let x = about(&f, "GPU262", gpu);
        assert_eq!(x.severity, Severity::Info, "Xid {code}");
        assert!(
            x.cause.contains(&format!("reported Xid {code} ")),
            "{}",
            x.cause
        );
        for advice in [
            "nvidia-smi -r",
            "kubectl drain",
            "kubectl cordon",
            "reboot",
            "delete pod",
        ] {
            assert!(
                !x.fix.contains(advice),
                "Xid {code}: `{advice}` in {}",
                x.fix
            );
        }
    }
    // 43 is the application's fault: named with its pod, the pod holding the GPU (exported_pod).
    let x = about(&f, "GPU262", &gpus[1]);
    assert_eq!(names(x, SubjectKind::Pod), ["team-a/train-2"]);
    assert!(x.cause.contains("(pod team-a/train-2)"), "{}", x.cause);
    // 92 three times in the window: it recurs, and the finding says what the catalog asks then.
    let x = about(&f, "GPU262", &gpus[2]);
    assert!(x.cause.contains("repeatedly in the last 1h"), "{}", x.cause);
    assert!(
        x.fix.contains("investigatory action is CONTACT_SUPPORT"),
        "{}",
        x.fix
    );
    let x = about(&f, "GPU250", &gpus[3]);
    assert_eq!(x.severity, Severity::Error);
    assert!(
        x.fix
            .starts_with("kubectl cordon node-l && kubectl drain node-l")
            && x.fix.contains("reboot node-l"),
        "{}",
        x.fix
    );
    assert_eq!(names(x, SubjectKind::Pod), ["team-b/serve-1"]);
}

/// NVLink5 Xids and Xid 154: the action is in the Xid message or in DCGM field 1523. With the field
/// (value 2, node reboot) the doctor names the recovery; without it, where to read it; an NVLink5
/// Xid says to decode its message rather than guess.
#[needs_prometheus]
#[tokio::test]
async fn recovery_action_and_decoded_xids() {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let recovery = Catalog::embedded()
        .dcgm()
        .recovery_action
        .metrics
        .last()
        .unwrap()
        .clone();
    let xid = |g: Gpu, code: u32| {
        g.set(&m.xid_count, json!({code.to_string(): 1}))
            .set(&m.xid_last, json!(code))
    };
    let gpus = vec![
        xid(Gpu::healthy("node-m", 0), 154).set(&recovery, json!(2)),
        xid(Gpu::healthy("node-m", 1), 154),
        xid(Gpu::healthy("node-m", 2), 149),
        Gpu::healthy("node-m", 3).set(&recovery, json!(0)),
    ];
    let prom = TestPrometheus::start("recovery", &gpus, None);
    let f = until(&prom, |f| f.len() >= 3).await;
    assert_eq!(ids(&f), ["GPU263", "GPU264", "GPU264"], "{f:#?}");
    let x = about(&f, "GPU264", &gpus[0]);
    assert_eq!(x.severity, Severity::Error);
    assert!(
        x.cause
            .contains("NVML recovery action 2 NODE_REBOOT (\"Reboot Node\")"),
        "{}",
        x.cause
    );
    assert!(x.fix.contains("reboot node-m"), "{}", x.fix);
    let metrics: Vec<&str> = x.evidence.iter().map(|e| e.metric.as_str()).collect();
    assert_eq!(
        metrics,
        [recovery.as_str(), "DCGM_EXP_XID_ERRORS_COUNT{xid=\"154\"}"]
    );
    let x = about(&f, "GPU264", &gpus[1]);
    assert_eq!(x.severity, Severity::Warning);
    assert!(x.fix.contains("kubectl debug node/node-m"), "{}", x.fix);
    let x = about(&f, "GPU263", &gpus[2]);
    assert!(
        x.cause
            .contains("decides its action from the Xid message (WORKFLOW_NVLINK5_ERR)"),
        "{}",
        x.cause
    );
}

/// Issue 26: gpuctl's ServiceMonitor sets honorLabels: false, so Prometheus (2.42 here, scraping
/// through the relabelings prometheus-operator generates for the rendered ServiceMonitor) renames
/// dcgm-exporter's `pod` to `exported_pod` and puts the exporter's own pod in `pod`. The doctor
/// reads the GPU's pod from the label that setting produces: an Xid on an allocated GPU names the
/// pod, one on a free GPU names none (not the exporter), for today's dcgm-exporter (pod labels left
/// off a free GPU) and older ones (written empty). A plain scrape keeps the exporter's `pod` as is.
#[needs_prometheus]
#[tokio::test]
async fn the_pod_label_follows_the_rendered_honor_labels() {
    let m = &Catalog::embedded().dcgm().exporter.metrics;
    let xid = |g: Gpu| {
        g.set(&m.xid_count, json!({"13": 1}))
            .set(&m.xid_last, json!(13))
    };
    let gpus = vec![
        xid(Gpu::healthy("node-n", 0)
            .held_by("team-a", "train-3")
            .busy()),
        xid(Gpu::healthy("node-n", 1)),
    ];
    let rendered = Scrape::rendered();
    let Scrape::ServiceMonitor(sm) = &rendered else {
        unreachable!()
    };
    assert_eq!(
        sm["spec"]["endpoints"][0]["honorLabels"],
        json!(false),
        "{sm:#}"
    );
    for (how, scrape, empty_attributes) in [
        ("the rendered ServiceMonitor", &rendered, false),
        (
            "the rendered ServiceMonitor, empty pod labels",
            &rendered,
            true,
        ),
        ("a plain scrape", &Scrape::Static, false),
    ] {
        let prom = TestPrometheus::start_with("honor", &gpus, None, scrape);
        if empty_attributes {
            prom.set_empty_attributes(&gpus);
        }
        prom.wait_for_scrapes(2);
        // What Prometheus stored.
        let series = prom.series(&m.gpu_temp);
        let held = series.iter().find(|l| l["gpu"] == "0").unwrap();
        let free = series.iter().find(|l| l["gpu"] == "1").unwrap();
        let f = until(&prom, |f| f.len() >= 2).await;
        assert_eq!(ids(&f), ["GPU252", "GPU252"], "{how}: {f:#?}");
        assert_eq!(
            names(about(&f, "GPU252", &gpus[0]), SubjectKind::Pod),
            ["team-a/train-3"],
            "{how}"
        );
        assert_eq!(
            names(about(&f, "GPU252", &gpus[1]), SubjectKind::Pod),
            Vec::<String>::new(),
            "a free GPU is held by no pod ({how})"
        );
        match scrape {
            Scrape::ServiceMonitor(_) => {
                assert_eq!(
                    held.get("exported_pod").map(String::as_str),
                    Some("train-3"),
                    "{held:?}"
                );
                assert_eq!(
                    held.get("exported_namespace").map(String::as_str),
                    Some("team-a")
                );
                assert_eq!(
                    held.get("pod").map(String::as_str),
                    Some("nvidia-dcgm-exporter-node-n")
                );
                assert_eq!(
                    free.get("pod").map(String::as_str),
                    Some("nvidia-dcgm-exporter-node-n"),
                    "{free:?}"
                );
                assert_eq!(free.get("exported_pod"), None, "{free:?}");
            }
            Scrape::Static => {
                assert_eq!(
                    held.get("pod").map(String::as_str),
                    Some("train-3"),
                    "{held:?}"
                );
                assert_eq!(free.get("pod"), None, "{free:?}");
            }
        }
    }
}
