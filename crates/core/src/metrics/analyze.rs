//! From query results to findings: one function per kind, each reading only [`Results`].

use std::collections::BTreeMap;

use super::{
    Check, Evidence, Finding, Layer, MetricSettings, Part, Results, Sample, Subject, SubjectKind,
    resolution_s,
};
use crate::diag::Severity;
use crate::profiles::dcgm::{DcgmFacts, LabelNames, XidAction, XidClass};

/// Every metric finding for `results`, sorted by id, then subjects.
pub fn findings(facts: &DcgmFacts, settings: &MetricSettings, results: &Results) -> Vec<Finding> {
    let cx = Cx {
        facts,
        settings,
        results,
    };
    let mut out = Vec::new();
    cx.inventory(&mut out);
    cx.xids(&mut out);
    cx.ecc(&mut out);
    cx.row_remap(&mut out);
    cx.temperature(&mut out);
    cx.throttle(&mut out);
    cx.nvlink(&mut out);
    cx.idle(&mut out);
    out.sort_by(|a, b| {
        (a.id, &a.subjects)
            .cmp(&(b.id, &b.subjects))
            .then_with(|| a.cause.cmp(&b.cause))
    });
    out
}

struct Cx<'a> {
    facts: &'a DcgmFacts,
    settings: &'a MetricSettings,
    results: &'a Results,
}

/// A series' labels without `__name__` (functions drop it; a join must too).
type Key = BTreeMap<String, String>;

fn key(s: &Sample) -> Key {
    let mut k = s.labels.clone();
    k.remove("__name__");
    k
}

fn first<'l>(labels: &'l BTreeMap<String, String>, names: &[String]) -> Option<&'l str> {
    names
        .iter()
        .filter_map(|n| labels.get(n))
        .map(String::as_str)
        .find(|v| !v.is_empty())
}

/// The node, GPU and pod a series is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Target {
    node: Option<String>,
    gpu: Subject,
    pod: Option<Subject>,
}

impl Target {
    fn of(labels: &BTreeMap<String, String>, names: &LabelNames) -> Target {
        let node = first(labels, &names.node).map(str::to_owned);
        let index = first(labels, &names.gpu);
        let uuid = first(labels, &names.uuid);
        let name = match (uuid, index) {
            (Some(uuid), _) => uuid.to_owned(),
            (None, Some(i)) => format!("{}/gpu{i}", node.as_deref().unwrap_or("?")),
            (None, None) => format!("{}/gpu?", node.as_deref().unwrap_or("?")),
        };
        let mut detail = Vec::new();
        if let Some(i) = index {
            detail.push(format!("index {i}"));
        }
        if let Some(d) = first(labels, &names.device) {
            detail.push(d.to_owned());
        }
        if let Some(m) = first(labels, &names.model) {
            detail.push(m.to_owned());
        }
        if let Some(p) = first(labels, &names.mig_profile) {
            detail.push(format!("MIG {p}"));
        }
        // The pod holding the GPU: never the exporter's own pod, which a ServiceMonitor's scrape
        // puts in `pod` (see LabelNames::workload).
        let workload = |pick: &[String]| {
            names
                .workload(labels, pick)
                .filter_map(|n| labels.get(n))
                .map(String::as_str)
                .find(|v| !v.is_empty())
        };
        let pod = workload(&names.pod).map(|pod| Subject {
            kind: SubjectKind::Pod,
            namespace: workload(&names.namespace).map(str::to_owned),
            name: pod.to_owned(),
            detail: workload(&names.container).map(|c| format!("container {c}")),
        });
        Target {
            node,
            gpu: Subject {
                kind: SubjectKind::Gpu,
                namespace: None,
                name,
                detail: (!detail.is_empty()).then(|| detail.join(", ")),
            },
            pod,
        }
    }

    fn subjects(&self, with_pod: bool) -> Vec<Subject> {
        let mut v = Vec::new();
        if let Some(node) = &self.node {
            v.push(Subject {
                kind: SubjectKind::Node,
                namespace: None,
                name: node.clone(),
                detail: None,
            });
        }
        v.push(self.gpu.clone());
        if with_pod && let Some(pod) = &self.pod {
            v.push(pod.clone());
        }
        v
    }

    fn node(&self) -> &str {
        self.node.as_deref().unwrap_or("NODE")
    }

    /// `nvidia-smi -i` takes the index (or the UUID).
    fn smi_id(&self, labels: &BTreeMap<String, String>, names: &LabelNames) -> String {
        first(labels, &names.gpu)
            .or_else(|| first(labels, &names.uuid))
            .unwrap_or("0")
            .to_owned()
    }

    fn gpu_phrase(&self) -> String {
        format!("GPU {} on node {}", self.gpu.name, self.node())
    }

    fn pod_phrase(&self) -> Option<String> {
        self.pod.as_ref().map(|p| match &p.namespace {
            Some(ns) => format!("{ns}/{}", p.name),
            None => p.name.clone(),
        })
    }
}

/// `v > limit`, false for NaN (a `!` before a float comparison reads wrongly).
fn above(v: f64, limit: f64) -> bool {
    v > limit
}

/// `v <= limit`, false for NaN.
fn at_most(v: f64, limit: f64) -> bool {
    v <= limit
}

fn time(t: f64) -> Option<String> {
    if !t.is_finite() || t.abs() > 1e11 {
        return None;
    }
    jiff::Timestamp::from_second(t.floor() as i64)
        .ok()
        .map(|ts| ts.to_string())
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

fn dur(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn drain(node: &str) -> String {
    format!(
        "kubectl cordon {node} && kubectl drain {node} --ignore-daemonsets --delete-emptydir-data"
    )
}

fn series(metric: &str, labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return metric.to_owned();
    }
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{metric}{{{}}}", inner.join(","))
}

impl Cx<'_> {
    fn names(&self) -> &LabelNames {
        &self.facts.exporter.labels
    }

    /// First and last time of a check's condition, by series.
    fn times(&self, check: Check) -> (BTreeMap<Key, f64>, BTreeMap<Key, f64>) {
        let map = |part| {
            self.results
                .get(check, part)
                .iter()
                .map(|s| (key(s), s.value))
                .collect::<BTreeMap<_, _>>()
        };
        (map(Part::FirstSeen), map(Part::LastSeen))
    }

    fn evidence(&self, check: Check, s: &Sample, metric: String, value: String) -> Evidence {
        let (firsts, lasts) = self.times(check);
        let k = key(s);
        Evidence {
            metric,
            value,
            first_seen: firsts.get(&k).and_then(|t| time(*t)),
            last_seen: lasts.get(&k).and_then(|t| time(*t)),
        }
    }

    fn error_window(&self) -> String {
        dur(self.settings.error_window_ms)
    }

    fn inventory(&self, out: &mut Vec<Finding>) {
        let m = &self.facts.exporter.metrics;
        let seen = self
            .results
            .get(Check::Inventory, Part::Value)
            .iter()
            .any(|s| s.value > 0.0);
        if !seen {
            out.push(Finding {
                id: "GPU261",
                layer: Layer::NodeAndHardware,
                severity: Severity::Warning,
                subjects: Vec::new(),
                evidence: vec![Evidence {
                    metric: format!("count({}) or count({})", m.gpu_temp, m.gpu_util),
                    value: "no series in the last 5m".to_owned(),
                    first_seen: None,
                    last_seen: time(self.results.at),
                }],
                cause: "Prometheus has no dcgm-exporter metrics, so no GPU's health or use could be checked".to_owned(),
                fix: "kubectl get pods,servicemonitors -A -l app=nvidia-dcgm-exporter (is the exporter running and scraped? `gpuctl render` shows the ServiceMonitor gpuctl renders)".to_owned(),
            });
        }
    }

    fn xids(&self, out: &mut Vec<Finding>) {
        let names = self.names();
        let m = &self.facts.exporter.metrics;
        // (target, xid) -> (labels of the series, evidence); the windowed count wins over the
        // last-value gauge when both report the same Xid.
        let mut seen: BTreeMap<(Target, u32), (BTreeMap<String, String>, Evidence)> =
            BTreeMap::new();
        for s in self.results.get(Check::XidCount, Part::Value) {
            let Some(xid) = first(&s.labels, &names.xid).and_then(|x| x.parse::<u32>().ok()) else {
                continue;
            };
            if xid == 0 || s.value <= 0.0 {
                continue;
            }
            let t = Target::of(&s.labels, names);
            let xid_s = xid.to_string();
            let ev = self.evidence(
                Check::XidCount,
                s,
                series(&m.xid_count, &[(names.xid[0].as_str(), xid_s.as_str())]),
                format!(
                    "{} in the exporter's window (peak over the last {})",
                    num(s.value),
                    self.error_window()
                ),
            );
            seen.insert((t, xid), (s.labels.clone(), ev));
        }
        for s in self.results.get(Check::XidLast, Part::Value) {
            if !(s.value >= 1.0 && s.value <= f64::from(u32::MAX) && s.value.fract() == 0.0) {
                continue;
            }
            let xid = s.value as u32;
            let t = Target::of(&s.labels, names);
            let ev = self.evidence(
                Check::XidLast,
                s,
                m.xid_last.clone(),
                format!("{xid} (the last Xid the GPU reported)"),
            );
            seen.entry((t, xid)).or_insert((s.labels.clone(), ev));
        }
        let url = self.facts.xid.url();
        for ((t, xid), (labels, ev)) in seen {
            let idx = t.smi_id(&labels, names);
            let node = t.node().to_owned();
            let gpu = t.gpu_phrase();
            let code = self.facts.xid.code(xid);
            let (id, layer, severity, cause, fix, with_pod) = match code {
                None => (
                    "GPU253",
                    Layer::NodeAndHardware,
                    Severity::Warning,
                    format!(
                        "{gpu} reported Xid {xid}, which gpuctl's Xid classification does not cover"
                    ),
                    format!(
                        "look Xid {xid} up in NVIDIA's Xid catalog ({url}) and read the node's kernel log: kubectl debug node/{node} -it --image=busybox -- dmesg | grep -i xid"
                    ),
                    true,
                ),
                Some(c) if c.action == XidAction::Ignore => continue,
                Some(c) => match c.class {
                    XidClass::OffBus => (
                        "GPU250",
                        Layer::NodeAndHardware,
                        Severity::Error,
                        format!(
                            "{gpu} fell off the bus (Xid {xid}): the driver lost it on PCIe, and every job on it died"
                        ),
                        format!(
                            "{}; then reboot {node}, check its BMC log and kernel log (dmesg) for the PCIe fault, and reseat or replace the GPU if it happens again; kubectl uncordon {node} when nvidia-smi lists every GPU",
                            drain(&node)
                        ),
                        true,
                    ),
                    XidClass::Hardware => {
                        let mut fix = match c.action {
                            XidAction::RestartApp => match t.pod_phrase() {
                                Some(_) => {
                                    let p = t.pod.as_ref().expect("pod phrase implies a pod");
                                    format!(
                                        "kubectl -n {} delete pod {} (its controller starts it again); then, at a quiet moment, {} and reset the GPU on the node: nvidia-smi -r -i {idx}",
                                        p.namespace.as_deref().unwrap_or("default"),
                                        p.name,
                                        drain(&node)
                                    )
                                }
                                None => format!(
                                    "restart the job that used the GPU; then, at a quiet moment, {} and reset the GPU on the node: nvidia-smi -r -i {idx}",
                                    drain(&node)
                                ),
                            },
                            _ => format!(
                                "{}; then reset the GPU on the node (nvidia-smi -r -i {idx}, or reboot it) and kubectl uncordon {node}; replace the GPU if Xid {xid} returns",
                                drain(&node)
                            ),
                        };
                        if c.driver {
                            fix.push_str("; if it recurs on several GPUs, move the pool to a newer driver: gpuctl upgrade driver BLUEPRINT --pool POOL --to VERSION");
                        }
                        (
                            "GPU251",
                            Layer::NodeAndHardware,
                            Severity::Error,
                            format!("{gpu} reported Xid {xid} ({}), a hardware fault", c.text),
                            fix,
                            true,
                        )
                    }
                    XidClass::Application => {
                        let (who, fix) = match (&t.pod, t.pod_phrase()) {
                            (Some(p), Some(phrase)) => (
                                format!("pod {phrase}"),
                                format!(
                                    "check the pod's code: kubectl -n {} logs {}{} --previous, and run it under compute-sanitizer to find the bad access; the GPU needs nothing",
                                    p.namespace.as_deref().unwrap_or("default"),
                                    p.name,
                                    p.detail
                                        .as_deref()
                                        .and_then(|d| d.strip_prefix("container "))
                                        .map(|c| format!(" -c {c}"))
                                        .unwrap_or_default()
                                ),
                            ),
                            _ => (
                                "the application".to_owned(),
                                format!(
                                    "find the process in the node's kernel log (kubectl debug node/{node} -it --image=busybox -- dmesg | grep -i xid) and check its code; the GPU needs nothing"
                                ),
                            ),
                        };
                        (
                            "GPU252",
                            Layer::Runtime,
                            Severity::Warning,
                            format!(
                                "{who} caused Xid {xid} ({}) on {gpu}: an application error, not a GPU fault",
                                c.text
                            ),
                            fix,
                            true,
                        )
                    }
                },
            };
            out.push(Finding {
                id,
                layer,
                severity,
                subjects: t.subjects(with_pod),
                evidence: vec![ev],
                cause,
                fix,
            });
        }
    }

    /// One finding per GPU for a counter check.
    #[allow(clippy::too_many_arguments)]
    fn counter_findings(
        &self,
        check: Check,
        metric: &str,
        id: &'static str,
        severity: Severity,
        cause: impl Fn(&Target, &str) -> String,
        fix: impl Fn(&Target, &str) -> String,
        out: &mut Vec<Finding>,
    ) {
        let names = self.names();
        for s in self.results.get(check, Part::Value) {
            if !above(s.value, 0.0) {
                continue;
            }
            let t = Target::of(&s.labels, names);
            let idx = t.smi_id(&s.labels, names);
            let value = format!("+{} in the last {}", num(s.value), self.error_window());
            let ev = self.evidence(check, s, metric.to_owned(), value);
            out.push(Finding {
                id,
                layer: Layer::NodeAndHardware,
                severity,
                subjects: t.subjects(true),
                evidence: vec![ev],
                cause: cause(&t, &num(s.value)),
                fix: fix(&t, &idx),
            });
        }
    }

    fn ecc(&self, out: &mut Vec<Finding>) {
        let w = self.error_window();
        self.counter_findings(
            Check::EccUncorrectable,
            &self.facts.exporter.metrics.ecc_dbe_volatile,
            "GPU254",
            Severity::Error,
            |t, n| {
                format!(
                    "{} had {n} uncorrectable (double-bit) ECC errors in the last {w}: results computed on it may be wrong (NaN loss) and jobs on it may crash",
                    t.gpu_phrase()
                )
            },
            |t, idx| {
                format!(
                    "{}; then reset the GPU on the node (nvidia-smi -r -i {idx}) and kubectl uncordon {}; rerun the affected jobs from a checkpoint, and replace the GPU if the errors return",
                    drain(t.node()),
                    t.node()
                )
            },
            out,
        );
    }

    fn row_remap(&self, out: &mut Vec<Finding>) {
        let names = self.names();
        let m = &self.facts.exporter.metrics;
        for s in self.results.get(Check::RowRemapFailure, Part::Value) {
            if !above(s.value, 0.0) {
                continue;
            }
            let t = Target::of(&s.labels, names);
            let ev = self.evidence(
                Check::RowRemapFailure,
                s,
                m.row_remap_failure.clone(),
                num(s.value),
            );
            out.push(Finding {
                id: "GPU255",
                layer: Layer::NodeAndHardware,
                severity: Severity::Error,
                subjects: t.subjects(true),
                evidence: vec![ev],
                cause: format!(
                    "{} failed to remap a faulty memory row: it has no spare rows left and its memory can no longer be repaired",
                    t.gpu_phrase()
                ),
                fix: format!(
                    "{}; then replace the GPU (RMA), it will keep producing memory errors",
                    drain(t.node())
                ),
            });
        }
        let w = self.error_window();
        self.counter_findings(
            Check::RowRemapPending,
            &m.uncorrectable_remapped_rows,
            "GPU256",
            Severity::Warning,
            |t, n| {
                format!(
                    "{} remapped {n} memory rows after uncorrectable errors in the last {w}; the remap takes effect only after a GPU reset",
                    t.gpu_phrase()
                )
            },
            |t, idx| {
                format!(
                    "{}; then reset the GPU on the node (nvidia-smi -r -i {idx}) and kubectl uncordon {}",
                    drain(t.node()),
                    t.node()
                )
            },
            out,
        );
    }

    fn temperature(&self, out: &mut Vec<Finding>) {
        let names = self.names();
        let m = &self.facts.exporter.metrics;
        let limit = self.settings.temperature_c;
        let held = dur(self.settings.temperature_for_ms);
        for s in self.results.get(Check::Temperature, Part::Value) {
            if !above(s.value, limit) {
                continue;
            }
            let t = Target::of(&s.labels, names);
            let idx = t.smi_id(&s.labels, names);
            let ev = self.evidence(
                Check::Temperature,
                s,
                m.gpu_temp.clone(),
                format!("at least {} C for the last {held}", num(s.value)),
            );
            out.push(Finding {
                id: "GPU257",
                layer: Layer::NodeAndHardware,
                severity: Severity::Warning,
                subjects: t.subjects(true),
                evidence: vec![ev],
                cause: format!(
                    "{} has stayed above {} C for {held}: it slows its clocks to protect itself, and heat shortens its life",
                    t.gpu_phrase(),
                    num(limit)
                ),
                fix: format!(
                    "check the node's cooling (fans, airflow, inlet temperature in its BMC) and on the node run nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {idx}; kubectl cordon {} while it stays hot",
                    t.node()
                ),
            });
        }
    }

    fn throttle(&self, out: &mut Vec<Finding>) {
        let names = self.names();
        let m = &self.facts.exporter.metrics;
        let ce = &self.facts.clock_events;
        for s in self.results.get(Check::Throttle, Part::Value) {
            if !(s.value >= 1.0 && s.value < 1e15) {
                continue;
            }
            let mask = s.value as u64;
            let reasons = ce.faults_in(mask);
            if reasons.is_empty() {
                continue;
            }
            let t = Target::of(&s.labels, names);
            let idx = t.smi_id(&s.labels, names);
            let ev = self.evidence(
                Check::Throttle,
                s,
                m.clock_event_reasons.clone(),
                format!("{mask} ({})", reasons.join(", ")),
            );
            let thermal = reasons.iter().all(|r| r.contains("thermal"));
            let why = if thermal {
                "it is too hot"
            } else {
                "a hardware protection engaged (power brake or slowdown: power supply, or heat)"
            };
            out.push(Finding {
                id: "GPU258",
                layer: Layer::NodeAndHardware,
                severity: Severity::Warning,
                subjects: t.subjects(true),
                evidence: vec![ev],
                cause: format!(
                    "{} held its clocks down in the last {} because {why}: jobs on it run slower",
                    t.gpu_phrase(),
                    self.error_window()
                ),
                fix: format!(
                    "on the node run nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {idx} and check its cooling and power supply (BMC log); kubectl cordon {} if it persists",
                    t.node()
                ),
            });
        }
    }

    fn nvlink(&self, out: &mut Vec<Finding>) {
        let names = self.names();
        let m = &self.facts.exporter.metrics;
        let mut per_gpu: BTreeMap<Target, (String, Vec<Evidence>)> = BTreeMap::new();
        for (i, metric) in m.nvlink_errors.iter().enumerate() {
            for s in self.results.get(Check::NvLink(i), Part::Value) {
                if !above(s.value, 0.0) {
                    continue;
                }
                let t = Target::of(&s.labels, names);
                let idx = t.smi_id(&s.labels, names);
                let value = format!("+{} in the last {}", num(s.value), self.error_window());
                let ev = self.evidence(Check::NvLink(i), s, metric.clone(), value);
                per_gpu
                    .entry(t)
                    .or_insert_with(|| (idx, Vec::new()))
                    .1
                    .push(ev);
            }
        }
        for (t, (idx, evidence)) in per_gpu {
            out.push(Finding {
                id: "GPU259",
                layer: Layer::NodeAndHardware,
                severity: Severity::Warning,
                subjects: t.subjects(true),
                evidence,
                cause: format!(
                    "{} counted NVLink errors in the last {}: multi-GPU jobs on the node slow down (retries) or hang in NCCL",
                    t.gpu_phrase(),
                    self.error_window()
                ),
                fix: format!(
                    "on the node run nvidia-smi nvlink -e -i {idx} to see which link; {} and reset the GPUs (or reboot the node); reseat or replace the board if the errors return",
                    drain(t.node())
                ),
            });
        }
    }

    fn idle(&self, out: &mut Vec<Finding>) {
        let names = self.names();
        let m = &self.facts.exporter.metrics;
        let th = &self.facts.thresholds;
        let window_s = (self.settings.idle_window_ms / 1000) as f64;
        // The first subquery step is at most one step after the window's start.
        let slack = 2.0 * resolution_s(self.settings.idle_window_ms) as f64 + 1.0;
        let latest_start = self.results.at - window_s + slack;
        let mut reported: BTreeMap<Target, ()> = BTreeMap::new();
        for (check, metric, limit, unit) in [
            (
                Check::IdleEngine,
                &m.gr_engine_active,
                th.idle_engine_active,
                "",
            ),
            (Check::IdleUtil, &m.gpu_util, th.idle_gpu_util_percent, " %"),
        ] {
            let starts: BTreeMap<Key, f64> = self
                .results
                .get(check, Part::FirstSeen)
                .iter()
                .map(|s| (key(s), s.value))
                .collect();
            for s in self.results.get(check, Part::Value) {
                let t = Target::of(&s.labels, names);
                let Some(pod) = t.pod_phrase() else { continue };
                // A GPU the engine metric already judged is not judged again by utilisation.
                if check == Check::IdleUtil && reported.contains_key(&t) {
                    continue;
                }
                let Some(start) = starts.get(&key(s)) else {
                    continue;
                };
                if check == Check::IdleEngine {
                    reported.insert(t.clone(), ());
                }
                if !at_most(s.value, limit) || *start > latest_start {
                    continue;
                }
                let p = t.pod.as_ref().expect("pod phrase implies a pod");
                let ns = p.namespace.as_deref().unwrap_or("default");
                let window = dur(self.settings.idle_window_ms);
                out.push(Finding {
                    id: "GPU260",
                    layer: Layer::Runtime,
                    severity: Severity::Warning,
                    subjects: t.subjects(true),
                    evidence: vec![Evidence {
                        metric: format!("max_over_time({metric}[{window}])"),
                        value: format!("{}{unit}", num(s.value)),
                        first_seen: time(*start),
                        last_seen: time(self.results.at),
                    }],
                    cause: format!(
                        "pod {pod} holds {} but has not used it for the last {window} (peak {}{unit}): the GPU is allocated and wasted",
                        t.gpu_phrase(),
                        num(s.value)
                    ),
                    fix: format!(
                        "kubectl -n {ns} logs {} (is it stuck or waiting on data?); if it no longer needs the GPU, kubectl -n {ns} delete pod {} (or scale its owner to 0) to give the GPU back",
                        p.name, p.name
                    ),
                });
            }
        }
    }
}
