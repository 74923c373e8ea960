//! Each finding kind from hand-built query results, and the queries themselves.

use std::collections::BTreeMap;

use super::*;
use gpuctl_model::profiles::Catalog;

const AT: f64 = 1_796_112_000.0; // 2026-12-01T08:00:00Z

fn facts() -> &'static DcgmFacts {
    Catalog::embedded().dcgm()
}

fn settings() -> MetricSettings {
    MetricSettings::new(facts(), None, None).expect("profile defaults are valid")
}

/// Labels as dcgm-exporter writes them for GPU `i` of `node`, allocated to `pod` when given.
fn gpu(node: &str, i: u32, pod: Option<(&str, &str)>) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert("gpu".into(), i.to_string());
    l.insert("UUID".into(), format!("GPU-{node}-{i}"));
    l.insert("device".into(), format!("nvidia{i}"));
    l.insert("modelName".into(), "NVIDIA H100 80GB HBM3".into());
    l.insert("Hostname".into(), node.into());
    let (ns, p) = pod.unwrap_or(("", ""));
    l.insert("namespace".into(), ns.into());
    l.insert("pod".into(), p.into());
    l.insert(
        "container".into(),
        if p.is_empty() { "" } else { "main" }.into(),
    );
    l
}

fn sample(labels: BTreeMap<String, String>, value: f64) -> Sample {
    Sample {
        labels,
        value,
        timestamp: AT,
    }
}

fn with(mut l: BTreeMap<String, String>, k: &str, v: &str) -> BTreeMap<String, String> {
    l.insert(k.into(), v.into());
    l
}

/// Results where the exporter is scraped and nothing is wrong.
fn healthy() -> Results {
    let mut r = Results {
        at: AT,
        ..Results::default()
    };
    r.samples.insert(
        (Check::Inventory, Part::Value),
        vec![sample(BTreeMap::new(), 8.0)],
    );
    r
}

fn ids(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.id).collect()
}

#[test]
fn healthy_results_give_no_findings() {
    assert_eq!(findings(facts(), &settings(), &healthy()), vec![]);
}

#[test]
fn no_dcgm_series_is_reported() {
    let f = findings(facts(), &settings(), &Results::default());
    assert_eq!(ids(&f), ["GPU261"]);
}

#[test]
fn xid_79_is_fell_off_the_bus_with_drain_fix() {
    let mut r = healthy();
    let l = with(gpu("node-a", 3, Some(("team-a", "train-0"))), "xid", "79");
    r.samples
        .insert((Check::XidCount, Part::Value), vec![sample(l.clone(), 2.0)]);
    let mut t = l.clone();
    t.remove("__name__");
    r.samples.insert(
        (Check::XidCount, Part::FirstSeen),
        vec![sample(t.clone(), AT - 600.0)],
    );
    r.samples.insert(
        (Check::XidCount, Part::LastSeen),
        vec![sample(t, AT - 60.0)],
    );
    let f = findings(facts(), &settings(), &r);
    assert_eq!(ids(&f), ["GPU250"]);
    let x = &f[0];
    assert_eq!(x.severity, Severity::Error);
    assert_eq!(x.layer, Layer::NodeHardware);
    assert_eq!(x.subjects[0].name, "node-a");
    assert_eq!(x.subjects[1].name, "GPU-node-a-3");
    assert_eq!(x.subjects[2].name, "train-0");
    assert!(x.cause.contains("fell off the bus"), "{}", x.cause);
    assert!(
        x.fix
            .starts_with("kubectl cordon node-a && kubectl drain node-a"),
        "{}",
        x.fix
    );
    assert_eq!(
        x.evidence[0].metric,
        "DCGM_EXP_XID_ERRORS_COUNT{xid=\"79\"}"
    );
    assert_eq!(
        x.evidence[0].first_seen.as_deref(),
        Some("2026-12-01T07:50:00Z")
    );
    assert_eq!(
        x.evidence[0].last_seen.as_deref(),
        Some("2026-12-01T07:59:00Z")
    );
}

#[test]
fn xids_are_classified_from_the_catalog() {
    let mut r = healthy();
    r.samples.insert(
        (Check::XidCount, Part::Value),
        vec![
            sample(with(gpu("n", 0, Some(("ml", "p"))), "xid", "13"), 1.0),
            sample(with(gpu("n", 1, None), "xid", "48"), 1.0),
            sample(with(gpu("n", 3, None), "xid", "999"), 1.0),
        ],
    );
    // The last-value gauge reports the same Xid 48 on GPU 1 (not a second finding) and Xid 119
    // on GPU 4 (a driver-related hardware Xid).
    r.samples.insert(
        (Check::XidLast, Part::Value),
        vec![
            sample(gpu("n", 1, None), 48.0),
            sample(gpu("n", 4, None), 119.0),
        ],
    );
    let f = findings(facts(), &settings(), &r);
    assert_eq!(ids(&f), ["GPU251", "GPU251", "GPU252", "GPU253"]);
    let app = &f[2];
    assert_eq!(app.layer, Layer::Runtime);
    assert_eq!(app.severity, Severity::Warning);
    assert!(
        app.cause.starts_with("pod ml/p caused Xid 13"),
        "{}",
        app.cause
    );
    assert!(
        app.fix.contains("kubectl -n ml logs p -c main --previous")
            && app.fix.contains("the GPU needs nothing"),
        "{}",
        app.fix
    );
    assert!(f[1].fix.contains("gpuctl upgrade driver"), "{}", f[1].fix);
    assert!(!f[0].fix.contains("gpuctl upgrade"), "{}", f[0].fix);
    // Xid 48's workflow resets the GPU either way; the catalog's actions are quoted.
    assert!(
        f[0].cause.contains("immediate action WORKFLOW_XID_48")
            && f[0].fix.contains("nvidia-smi -r -i 1"),
        "{:?}",
        f[0]
    );
    assert!(f[3].fix.contains(facts().xid.url()), "{}", f[3].fix);
}

/// One Xid on GPU 0 of node `n` (held by ml/p), `count` in the exporter's window, seen from
/// `first` to `last` seconds before AT.
fn one_xid(xid: u32, count: f64, first: f64, last: f64) -> Results {
    let mut r = healthy();
    let l = with(gpu("n", 0, Some(("ml", "p"))), "xid", &xid.to_string());
    r.samples.insert(
        (Check::XidCount, Part::Value),
        vec![sample(l.clone(), count)],
    );
    r.samples.insert(
        (Check::XidCount, Part::FirstSeen),
        vec![sample(l.clone(), AT - first)],
    );
    r.samples.insert(
        (Check::XidCount, Part::LastSeen),
        vec![sample(l, AT - last)],
    );
    r
}

/// The catalog's immediate action for 43, 63 and 92 (and 121, 157) is IGNORE: at most an info
/// finding, never a reset, a drain or a reboot, and it says what to do if the Xid recurs.
#[test]
fn ignore_xids_are_info_and_give_no_reset_advice() {
    for xid in facts()
        .xid
        .with_response(gpuctl_model::profiles::dcgm::XidResponse::Ignore)
    {
        let f = findings(facts(), &settings(), &one_xid(xid, 1.0, 300.0, 0.0));
        assert_eq!(ids(&f), ["GPU262"], "Xid {xid}: {f:#?}");
        let x = &f[0];
        assert_eq!(x.severity, Severity::Info, "Xid {xid}");
        assert!(x.cause.contains("immediate action IGNORE"), "{}", x.cause);
        for advice in [
            "nvidia-smi -r",
            "kubectl drain",
            "kubectl cordon",
            "reboot",
            "delete pod",
        ] {
            assert!(
                !x.fix.contains(advice),
                "Xid {xid}: `{advice}` in {}",
                x.fix
            );
        }
        assert!(
            x.fix
                .starts_with("none; if it recurs, the catalog's investigatory action is"),
            "{}",
            x.fix
        );
    }
}

/// 92 recurring (its count reached 2 in the window, or it showed over more than the window's
/// span): still info, and it says so with the catalog's investigatory action, contact support.
#[test]
fn a_recurring_ignore_xid_says_so() {
    for (count, first, recurs) in [
        (3.0, 300.0, true),
        (1.0, 20.0 * 60.0, true),
        (1.0, 360.0, false),
    ] {
        let f = findings(facts(), &settings(), &one_xid(92, count, first, 0.0));
        assert_eq!(ids(&f), ["GPU262"], "{f:#?}");
        let x = &f[0];
        assert_eq!(x.severity, Severity::Info);
        assert_eq!(
            x.cause.contains("repeatedly in the last 1h"),
            recurs,
            "{count} over {first}s: {}",
            x.cause
        );
        if recurs {
            assert!(
                x.fix.starts_with("nothing to reset or drain; the catalog's investigatory action is CONTACT_SUPPORT (\"Please contact your support organization for further investigation.\")"),
                "{}",
                x.fix
            );
        }
    }
    // 63 recurring: its investigatory action is IGNORE too.
    let f = findings(facts(), &settings(), &one_xid(63, 4.0, 600.0, 0.0));
    assert_eq!(f[0].severity, Severity::Info);
    assert!(
        f[0].fix
            .contains("investigatory action is IGNORE (\"No Action required\")"),
        "{}",
        f[0].fix
    );
}

/// Xid 79 still asks for the node to be drained and rebooted; 140 for a reset, and when it
/// recurs the catalog's own words come with it.
#[test]
fn restart_and_reset_xids_keep_their_advice() {
    let f = findings(facts(), &settings(), &one_xid(79, 1.0, 60.0, 0.0));
    assert_eq!(ids(&f), ["GPU250"]);
    assert!(
        f[0].fix.contains("kubectl drain n") && f[0].fix.contains("reboot n"),
        "{}",
        f[0].fix
    );
    assert!(
        f[0].fix.contains("immediate action RESTART_BM"),
        "{}",
        f[0].fix
    );
    let f = findings(facts(), &settings(), &one_xid(140, 2.0, 60.0, 0.0));
    assert_eq!(ids(&f), ["GPU251"]);
    assert_eq!(f[0].severity, Severity::Error);
    assert!(
        f[0].fix.contains("nvidia-smi -r -i 0")
            && f[0].fix.contains("Xid 140 recurred in the last 1h")
            && f[0].fix.contains("\"Reset the GPU, and if the problem persists, contact your hardware vendor for support.\""),
        "{}",
        f[0].fix
    );
}

/// Xid 94 (contained memory error): restart the pod, reset the GPU when convenient; a warning.
#[test]
fn contained_memory_error_restarts_the_pod() {
    let f = findings(facts(), &settings(), &one_xid(94, 1.0, 60.0, 0.0));
    assert_eq!(ids(&f), ["GPU252"]);
    let x = &f[0];
    assert_eq!(
        (x.severity, x.layer),
        (Severity::Warning, Layer::NodeHardware)
    );
    assert!(
        x.fix.starts_with("kubectl -n ml delete pod p") && x.fix.contains("at a quiet moment"),
        "{}",
        x.fix
    );
}

/// NVLink Xids whose action is in the message: the finding says to decode it, not a guess.
#[test]
fn decode_message_xids_say_where_the_action_is() {
    for xid in [74, 144, 149, 150] {
        let f = findings(facts(), &settings(), &one_xid(xid, 1.0, 60.0, 0.0));
        assert_eq!(ids(&f), ["GPU263"], "Xid {xid}");
        let x = &f[0];
        assert_eq!(x.severity, Severity::Warning);
        assert!(
            x.cause.contains("decides its action from the Xid message"),
            "{}",
            x.cause
        );
        assert!(
            x.fix.contains("kubectl debug node/n") && x.fix.contains("Xid 154"),
            "{}",
            x.fix
        );
        assert!(!x.fix.contains("nvidia-smi -r"), "{}", x.fix);
    }
    let f = findings(facts(), &settings(), &one_xid(149, 1.0, 60.0, 0.0));
    assert!(f[0].fix.contains("XID 144-150 Decode"), "{}", f[0].fix);
}

/// Xid 45 alone gets the catalog's solo workflow; next to another Xid it follows that one.
#[test]
fn xid_45_alone_or_with_another() {
    let f = findings(facts(), &settings(), &one_xid(45, 1.0, 60.0, 0.0));
    assert_eq!(ids(&f), ["GPU263"]);
    assert!(f[0].fix.contains("RESTART_FM"), "{}", f[0].fix);
    let mut r = one_xid(45, 1.0, 60.0, 0.0);
    r.samples
        .get_mut(&(Check::XidCount, Part::Value))
        .unwrap()
        .push(sample(
            with(gpu("n", 0, Some(("ml", "p"))), "xid", "94"),
            1.0,
        ));
    let f = findings(facts(), &settings(), &r);
    assert_eq!(ids(&f), ["GPU252"], "{f:#?}");
}

/// Xid 154 and DCGM field 1523: the recovery the GPU needs, from NVML's value table.
#[test]
fn recovery_action_names_the_recovery() {
    let with_action = |value: f64, xid154: bool| {
        let mut r = if xid154 {
            one_xid(154, 1.0, 60.0, 0.0)
        } else {
            healthy()
        };
        let l = with(
            gpu("n", 0, Some(("ml", "p"))),
            "__name__",
            "DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION",
        );
        r.samples
            .insert((Check::RecoveryAction, Part::Value), vec![sample(l, value)]);
        findings(facts(), &settings(), &r)
    };
    let f = with_action(2.0, true);
    assert_eq!(ids(&f), ["GPU264"], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert!(
        f[0].cause
            .contains("NVML recovery action 2 NODE_REBOOT (\"Reboot Node\")"),
        "{}",
        f[0].cause
    );
    assert!(
        f[0].fix.contains("kubectl drain n") && f[0].fix.contains("reboot n"),
        "{}",
        f[0].fix
    );
    assert_eq!(f[0].evidence.len(), 2, "the field and the Xid 154 count");
    assert_eq!(
        f[0].evidence[0].metric,
        "DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION"
    );
    let f = with_action(1.0, false);
    assert!(f[0].fix.contains("nvidia-smi -r -i 0"), "{}", f[0].fix);
    let f = with_action(3.0, false);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].fix.contains("peer-to-peer"), "{}", f[0].fix);
    let f = with_action(42.0, false);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].fix.contains("nvmlDeviceGpuRecoveryAction_t"),
        "{}",
        f[0].fix
    );
    // Without the field, Xid 154 says where to read the recovery.
    let f = findings(facts(), &settings(), &one_xid(154, 1.0, 60.0, 0.0));
    assert_eq!(ids(&f), ["GPU264"]);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].fix.contains("kubectl debug node/n") && f[0].fix.contains("'Node Reboot Required'"),
        "{}",
        f[0].fix
    );
}

/// Through a ServiceMonitor (honorLabels false) an unallocated GPU carries the exporter's own pod
/// as `pod`: it is not reported as held by it.
#[test]
fn the_exporters_own_pod_is_never_the_workload() {
    let mut l = gpu("n", 0, None);
    l.remove("pod");
    l.remove("namespace");
    l.remove("container");
    l.insert("pod".into(), "nvidia-dcgm-exporter-7xk2p".into());
    l.insert("namespace".into(), "gpu-operator".into());
    l.insert("container".into(), "nvidia-dcgm-exporter".into());
    l.insert("endpoint".into(), "gpu-metrics".into());
    assert_eq!(analyze_target(&l), None);
    let s = settings();
    let w = (s.idle_window_ms / 1000) as f64;
    let mut r = healthy();
    r.samples.insert(
        (Check::IdleEngine, Part::Value),
        vec![sample(l.clone(), 0.0)],
    );
    r.samples.insert(
        (Check::IdleEngine, Part::FirstSeen),
        vec![sample(l, AT - w)],
    );
    assert_eq!(
        findings(facts(), &s, &r),
        vec![],
        "an idle free GPU is no finding"
    );
}

#[test]
fn exported_pod_labels_win_over_the_scrape_targets() {
    // A ServiceMonitor with honorLabels false keeps the exporter's pod mapping as exported_*.
    let l = with(
        with(
            gpu("n", 0, Some(("gpu-operator", "nvidia-dcgm-exporter-x"))),
            "exported_pod",
            "job-1",
        ),
        "exported_namespace",
        "team-b",
    );
    let t = analyze_target(&l);
    assert_eq!(t, Some("team-b/job-1".to_owned()));
}

fn analyze_target(l: &BTreeMap<String, String>) -> Option<String> {
    let mut r = healthy();
    r.samples.insert(
        (Check::EccUncorrectable, Part::Value),
        vec![sample(l.clone(), 1.0)],
    );
    let f = findings(facts(), &settings(), &r);
    f[0].subjects
        .iter()
        .find(|s| s.kind == SubjectKind::Pod)
        .map(|p| format!("{}/{}", p.namespace.as_deref().unwrap_or(""), p.name))
}

#[test]
fn uncorrectable_ecc_row_remap_temperature_throttle_nvlink() {
    let mut r = healthy();
    let g = gpu("n", 0, None);
    for check in [
        Check::EccUncorrectable,
        Check::RowRemapFailure,
        Check::RowRemapPending,
        Check::NvLink(0),
        Check::NvLink(2),
    ] {
        r.samples
            .insert((check, Part::Value), vec![sample(g.clone(), 2.0)]);
    }
    r.samples.insert(
        (Check::Temperature, Part::Value),
        vec![sample(g.clone(), 91.0)],
    );
    // hw_thermal (64) + gpu_idle (1): only the fault bit is named.
    r.samples.insert(
        (Check::Throttle, Part::Value),
        vec![sample(g.clone(), 65.0)],
    );
    let f = findings(facts(), &settings(), &r);
    assert_eq!(
        ids(&f),
        ["GPU254", "GPU255", "GPU256", "GPU257", "GPU258", "GPU259"]
    );
    assert_eq!(f[0].severity, Severity::Error);
    assert_eq!(f[0].evidence[0].value, "+2 in the last 1h");
    assert!(f[0].fix.contains("nvidia-smi -r -i 0"), "{}", f[0].fix);
    assert_eq!(f[4].evidence[0].value, "65 (hw_thermal)");
    assert_eq!(f[5].evidence.len(), 2, "both NVLink counters are evidence");
}

#[test]
fn blueprint_temperature_threshold_wins() {
    let s = MetricSettings::new(facts(), Some(95), None).unwrap();
    let mut r = healthy();
    r.samples.insert(
        (Check::Temperature, Part::Value),
        vec![sample(gpu("n", 0, None), 91.0)],
    );
    assert_eq!(findings(facts(), &s, &r), vec![]);
    assert!(
        plan(facts(), &s)
            .iter()
            .any(|q| q.check == Check::Temperature && q.promql.ends_with("> 95"))
    );
}

fn idle_results(peak: f64, first_seen: f64, pod: Option<(&str, &str)>) -> Results {
    let mut r = healthy();
    let g = gpu("n", 5, pod);
    r.samples.insert(
        (Check::IdleEngine, Part::Value),
        vec![sample(g.clone(), peak)],
    );
    r.samples.insert(
        (Check::IdleEngine, Part::FirstSeen),
        vec![sample(g, first_seen)],
    );
    r
}

#[test]
fn idle_allocated_gpu_for_the_whole_window() {
    let s = settings();
    let w = (s.idle_window_ms / 1000) as f64;
    let f = findings(
        facts(),
        &s,
        &idle_results(0.0, AT - w, Some(("team-a", "nb-0"))),
    );
    assert_eq!(ids(&f), ["GPU260"]);
    assert_eq!(f[0].layer, Layer::Runtime);
    assert!(
        f[0].fix.contains("kubectl -n team-a delete pod nb-0"),
        "{}",
        f[0].fix
    );
    // Busy, unallocated, or allocated for less than the window: nothing.
    assert_eq!(
        findings(facts(), &s, &idle_results(0.4, AT - w, Some(("a", "b")))),
        vec![]
    );
    assert_eq!(
        findings(facts(), &s, &idle_results(0.0, AT - w, None)),
        vec![]
    );
    assert_eq!(
        findings(
            facts(),
            &s,
            &idle_results(0.0, AT - w / 2.0, Some(("a", "b")))
        ),
        vec![]
    );
}

#[test]
fn idle_window_flag() {
    let s = MetricSettings::new(facts(), None, Some("30m")).unwrap();
    assert_eq!(s.idle_window_ms, 1_800_000);
    assert!(
        plan(facts(), &s)
            .iter()
            .any(|q| q.check == Check::IdleEngine && q.promql.contains("[1800s]"))
    );
    for bad in ["5s", "soon", "400h", ""] {
        let e = MetricSettings::new(facts(), None, Some(bad)).unwrap_err();
        assert_eq!(e.what, "--idle-window", "{bad}");
    }
}

#[test]
fn hostile_values_are_ignored_not_trusted() {
    let mut r = healthy();
    let g = gpu("n", 0, None);
    r.samples.insert(
        (Check::XidLast, Part::Value),
        vec![
            sample(g.clone(), f64::NAN),
            sample(g.clone(), 1e300),
            sample(g.clone(), -3.0),
            sample(g.clone(), 13.5),
        ],
    );
    r.samples.insert(
        (Check::XidCount, Part::Value),
        vec![sample(with(g.clone(), "xid", "not-a-number"), 1.0)],
    );
    r.samples.insert(
        (Check::Throttle, Part::Value),
        vec![sample(g, f64::INFINITY)],
    );
    assert_eq!(findings(facts(), &settings(), &r), vec![]);
}

#[test]
fn queries_use_the_profile_names_only() {
    let q = plan(facts(), &settings());
    let m = &facts().exporter.metrics;
    for name in m
        .nvlink_errors
        .iter()
        .chain([&m.xid_count, &m.ecc_dbe_volatile, &m.gpu_temp])
    {
        assert!(q.iter().any(|q| q.promql.contains(name.as_str())), "{name}");
    }
    // Every timed check has its three parts; the output is the same twice.
    assert_eq!(q, plan(facts(), &settings()));
    let throttle: Vec<_> = q.iter().filter(|q| q.check == Check::Throttle).collect();
    assert_eq!(throttle.len(), 3);
    assert!(
        throttle[0]
            .promql
            .contains("floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 64) % 2 == 1")
    );
}

#[test]
fn findings_are_sorted_and_deterministic() {
    let mut r = healthy();
    r.samples.insert(
        (Check::EccUncorrectable, Part::Value),
        vec![
            sample(gpu("z", 1, None), 1.0),
            sample(gpu("a", 0, None), 1.0),
        ],
    );
    let f = findings(facts(), &settings(), &r);
    assert_eq!(f[0].subjects[0].name, "a");
    assert_eq!(f, findings(facts(), &settings(), &r));
}

#[test]
fn findings_convert_to_the_doctor_shape() {
    let mut r = healthy();
    let l = with(gpu("node-a", 3, Some(("team-a", "train-0"))), "xid", "79");
    r.samples
        .insert((Check::XidCount, Part::Value), vec![sample(l, 1.0)]);
    let f = findings(facts(), &settings(), &r)[0].to_doctor();
    assert_eq!(f.id, "GPU250");
    assert_eq!(f.layer, crate::doctor::Layer::NodeHardware);
    assert_eq!(
        f.subjects,
        ["node/node-a", "gpu/GPU-node-a-3", "pod/team-a/train-0"]
    );
    assert!(
        f.title.ends_with("fell off the bus (Xid 79)"),
        "{}",
        f.title
    );
    assert!(
        f.evidence[0]
            .source
            .starts_with("metric DCGM_EXP_XID_ERRORS_COUNT")
    );
}

#[test]
fn gauge_checks_also_read_the_condition_now() {
    // A subquery sees a condition only at multiples of its step (60 s for the 1h window): a fault
    // the latest scrapes show, newer than the last multiple, must still be found and timed.
    let q = plan(facts(), &settings());
    let find = |check, part| {
        &q.iter()
            .find(|q| q.check == check && q.part == part)
            .unwrap()
            .promql
    };
    for check in [
        Check::XidCount,
        Check::XidLast,
        Check::RowRemapFailure,
        Check::Throttle,
    ] {
        let v = find(check, Part::Value);
        let (sub, now) = v.split_once("[3600s:60s]) or (").expect(v);
        let cond = now.strip_suffix(')').unwrap();
        assert_eq!(sub, format!("max_over_time(({cond})"), "{v}");
        assert!(
            find(check, Part::FirstSeen).ends_with(&format!(" or timestamp({cond})")),
            "{check:?}"
        );
        assert!(
            find(check, Part::LastSeen).starts_with(&format!("timestamp({cond}) or ")),
            "{check:?}"
        );
    }
}

/// The accounting fixture's table (docs/report.md): threshold 5 %, window 30m.
fn accounting() -> AccountingIdle {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/accounting/blueprint.yaml"
    );
    let bp = gpuctl_model::blueprint::load_file(std::path::Path::new(path))
        .expect("the accounting fixture loads")
        .blueprint;
    let table = gpuctl_pipeline::render::accounting::AccountingTable::new(&bp, Catalog::embedded())
        .expect("the fixture has spec.accounting");
    AccountingIdle::of(&table)
}

fn pod_share(ns: &str, pod: &str, pool: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("namespace".to_owned(), ns.to_owned()),
        ("pod".to_owned(), pod.to_owned()),
        ("pool".to_owned(), pool.to_owned()),
    ])
}

fn accounting_results(peak: f64, first_seen: f64) -> Results {
    let mut r = healthy();
    let l = pod_share("team-a", "train-a", "h100");
    r.samples.insert(
        (Check::IdleAccounting, Part::Value),
        vec![sample(l.clone(), peak)],
    );
    r.samples.insert(
        (Check::IdleAccounting, Part::FirstSeen),
        vec![sample(l, first_seen)],
    );
    r
}

#[test]
fn with_accounting_the_idle_queries_are_the_alerts_condition() {
    let a = accounting();
    assert_eq!(a.below, 0.05);
    let s = MetricSettings::new(facts(), None, Some("30m"))
        .unwrap()
        .with_accounting(Some(a.clone()));
    let q = plan(facts(), &s);
    let idle: Vec<&Query> = q
        .iter()
        .filter(|q| {
            matches!(
                q.check,
                Check::IdleEngine | Check::IdleUtil | Check::IdleAccounting
            )
        })
        .collect();
    assert_eq!(idle.len(), 2, "{idle:#?}");
    assert!(idle.iter().all(|q| q.check == Check::IdleAccounting));
    // The recording rules' own expressions, over the idle window.
    assert!(idle[0].promql.contains(&a.ratio), "{}", idle[0].promql);
    assert!(idle[0].promql.contains(")[1800s:"), "{}", idle[0].promql);
    assert!(a.ratio.contains("gpuctl_dev_pool"), "{}", a.ratio);
}

#[test]
fn with_accounting_an_idle_pod_is_judged_by_the_blueprints_threshold() {
    let s = settings().with_accounting(Some(accounting()));
    let w = (s.idle_window_ms / 1000) as f64;
    let f = findings(facts(), &s, &accounting_results(0.02, AT - w));
    assert_eq!(ids(&f), ["GPU260"]);
    assert_eq!(f[0].subjects.len(), 1);
    assert_eq!(f[0].subjects[0].kind, SubjectKind::Pod);
    assert_eq!(f[0].subjects[0].name, "train-a");
    assert_eq!(f[0].subjects[0].detail.as_deref(), Some("pool h100"));
    assert_eq!(f[0].evidence[0].value, "2 %");
    assert!(f[0].cause.contains("below the 5 %"), "{}", f[0].cause);
    assert!(f[0].cause.contains("GPUAllocatedIdle"), "{}", f[0].cause);
    assert!(
        f[0].fix.contains("kubectl -n team-a delete pod train-a"),
        "{}",
        f[0].fix
    );
    // The profile's threshold is not the judge: 4 % is idle here (its engine threshold is lower).
    let f = findings(facts(), &s, &accounting_results(0.04, AT - w));
    assert_eq!(ids(&f), ["GPU260"]);
    // At the threshold, younger than the window, or without the pod: nothing.
    assert_eq!(
        findings(facts(), &s, &accounting_results(0.05, AT - w)),
        vec![]
    );
    assert_eq!(
        findings(facts(), &s, &accounting_results(0.0, AT - w / 2.0)),
        vec![]
    );
    let mut r = accounting_results(0.0, AT - w);
    for part in [Part::Value, Part::FirstSeen] {
        for x in r.samples.get_mut(&(Check::IdleAccounting, part)).unwrap() {
            x.labels.remove("pod");
        }
    }
    assert_eq!(findings(facts(), &s, &r), vec![]);
    // DCGM idle series are not read in this mode: an idle GPU there is not reported twice.
    let mut r = idle_results(0.0, AT - w, Some(("team-a", "nb-0")));
    r.samples.extend(accounting_results(0.5, AT - w).samples);
    assert_eq!(findings(facts(), &s, &r), vec![]);
}
