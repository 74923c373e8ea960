//! From query results to findings: one function per kind, each reading only [`Results`].

use std::collections::BTreeMap;

use super::{
    Check, Evidence, Finding, Layer, MetricSettings, Part, Results, Sample, Subject, SubjectKind,
    resolution_s,
};
use gpuctl_model::located::Severity;
use gpuctl_model::profiles::dcgm::{
    DcgmFacts, LabelNames, RecoveryAct, XidClass, XidCode, XidResponse,
};

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
    for f in &out {
        gpuctl_model::finding::debug_check_cluster(
            gpuctl_model::finding::Family::Metrics,
            f.id,
            f.severity,
            f.layer,
        );
    }
    out
}

struct Cx<'a> {
    facts: &'a DcgmFacts,
    settings: &'a MetricSettings,
    results: &'a Results,
}

/// What an Xid asks for: the finding's id, severity, cause and fix.
type XidAdvice = (&'static str, Severity, String, String);

/// A series' labels without `__name__` (functions drop it; a join must too).
type Key = BTreeMap<String, String>;

/// One Xid seen on one GPU.
struct Seen {
    labels: BTreeMap<String, String>,
    evidence: Evidence,
    /// Its windowed count or span says it happened more than once.
    recurs: bool,
}

/// A GPU whose recovery action asks for something.
struct Recovery {
    target: Target,
    idx: String,
    value: u32,
    evidence: Vec<Evidence>,
}

/// The same GPU (node and name), whichever pod the series carried.
fn same_gpu(a: &Target, b: &Target) -> bool {
    a.node == b.node && a.gpu.name == b.gpu.name
}

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
                layer: Layer::NodeHardware,
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
        let rec = &self.facts.xid.recurring;
        let span_s = gpuctl_model::quantity::parse_duration_ms(&rec.span)
            .map_or(f64::INFINITY, |ms| ms as f64 / 1000.0);
        // (target, xid) -> what was seen; the windowed count wins over the last-value gauge when
        // both report the same Xid (it also tells whether the Xid recurs).
        let mut seen: BTreeMap<(Target, u32), Seen> = BTreeMap::new();
        let (firsts, lasts) = self.times(Check::XidCount);
        for s in self.results.get(Check::XidCount, Part::Value) {
            let Some(xid) = first(&s.labels, &names.xid).and_then(|x| x.parse::<u32>().ok()) else {
                continue;
            };
            if xid == 0 || !above(s.value, 0.0) {
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
            let k = key(s);
            let span = match (firsts.get(&k), lasts.get(&k)) {
                (Some(a), Some(b)) if b >= a => b - a,
                _ => 0.0,
            };
            let recurs = s.value >= f64::from(rec.count) || span > span_s;
            seen.insert(
                (t, xid),
                Seen {
                    labels: s.labels.clone(),
                    evidence: ev,
                    recurs,
                },
            );
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
            seen.entry((t, xid)).or_insert(Seen {
                labels: s.labels.clone(),
                evidence: ev,
                recurs: false,
            });
        }
        // Which Xids each GPU reported (for "Xid 45 alone").
        let mut per_gpu: BTreeMap<(Option<String>, String), Vec<u32>> = BTreeMap::new();
        for (t, xid) in seen.keys() {
            per_gpu
                .entry((t.node.clone(), t.gpu.name.clone()))
                .or_default()
                .push(*xid);
        }
        let mut recovery = self.recovery_actions();
        for ((t, xid), s) in seen {
            let others = per_gpu
                .get(&(t.node.clone(), t.gpu.name.clone()))
                .is_some_and(|v| v.iter().any(|x| *x != xid));
            match self.facts.xid.code(xid) {
                None => out.push(self.xid_unclassified(&t, xid, s)),
                Some(c) => {
                    if c.immediate.response() == XidResponse::RecoveryAction {
                        // Xid 154 names the GPU's required recovery: with the recovery metric it
                        // joins that finding, without it the finding says where to read it.
                        match recovery.iter_mut().find(|r| same_gpu(&r.target, &t)) {
                            Some(r) => r.evidence.push(s.evidence),
                            None => out.push(self.xid_154_unread(&t, c, s)),
                        }
                        continue;
                    }
                    if let Some(f) = self.xid_finding(&t, c, s, others) {
                        out.push(f);
                    }
                }
            }
        }
        for r in recovery {
            out.push(self.recovery_finding(r));
        }
    }

    /// The GPUs whose recovery action (DCGM field 1523) asks for something now.
    fn recovery_actions(&self) -> Vec<Recovery> {
        let names = self.names();
        let mut v = Vec::new();
        for s in self.results.get(Check::RecoveryAction, Part::Value) {
            if !(s.value >= 1.0 && s.value <= f64::from(u32::MAX) && s.value.fract() == 0.0) {
                continue;
            }
            let value = s.value as u32;
            let metric = s
                .labels
                .get("__name__")
                .cloned()
                .unwrap_or_else(|| self.facts.recovery_action.metrics[0].clone());
            let shown = match self.facts.recovery_action.of(value) {
                Some(a) => format!("{value} ({}: {})", a.nvml, a.text),
                None => value.to_string(),
            };
            let ev = self.evidence(Check::RecoveryAction, s, metric, shown);
            v.push(Recovery {
                target: Target::of(&s.labels, names),
                idx: Target::of(&s.labels, names).smi_id(&s.labels, names),
                value,
                evidence: vec![ev],
            });
        }
        v
    }

    /// `kubectl debug ... dmesg` for the Xid lines of a node.
    fn kernel_log(node: &str) -> String {
        format!("kubectl debug node/{node} -it --image=busybox -- dmesg | grep -i xid")
    }

    /// What the catalog says to do when the Xid recurs: its investigatory action, that bucket's
    /// text, and the row's own words on recurrence.
    fn if_it_recurs(&self, c: &XidCode) -> String {
        let mut s = format!("the catalog's investigatory action is {}", c.investigatory);
        if let Some(text) = self.facts.xid.bucket(&c.investigatory)
            && text != c.investigatory.as_str()
        {
            s.push_str(&format!(" (\"{text}\")"));
        }
        if let Some(r) = &c.recurring {
            s.push_str(&format!("; its Xid {} entry adds: \"{r}\"", c.xid));
        }
        s
    }

    fn catalog_says(&self, c: &XidCode) -> String {
        format!(
            "NVIDIA's Xid catalog: immediate action {}, investigatory {}",
            c.immediate, c.investigatory
        )
    }

    fn xid_unclassified(&self, t: &Target, xid: u32, s: Seen) -> Finding {
        let node = t.node();
        let url = self.facts.xid.url();
        Finding {
            id: "GPU253",
            layer: Layer::NodeHardware,
            severity: Severity::Warning,
            subjects: t.subjects(true),
            evidence: vec![s.evidence],
            cause: format!(
                "{} reported Xid {xid}, which gpuctl's Xid classification does not cover",
                t.gpu_phrase()
            ),
            fix: format!(
                "look Xid {xid} up in NVIDIA's Xid catalog ({url}) and read the node's kernel log: {}",
                Self::kernel_log(node)
            ),
        }
    }

    fn xid_154_unread(&self, t: &Target, c: &XidCode, s: Seen) -> Finding {
        let r = &self.facts.recovery_action;
        let texts: Vec<String> = r.message_texts.iter().map(|m| format!("'{m}'")).collect();
        Finding {
            id: "GPU264",
            layer: Layer::NodeHardware,
            severity: Severity::Warning,
            subjects: t.subjects(true),
            evidence: vec![s.evidence],
            cause: format!(
                "{} reported Xid {} ({}): the driver changed the recovery the GPU needs, and the metrics do not say to what ({} is not collected)",
                t.gpu_phrase(),
                c.xid,
                c.text,
                r.metrics.join(" or ")
            ),
            fix: format!(
                "read the Xid {} line in the node's kernel log ({}): it ends 'changed from 0x.. (...) to 0x.. (ACTION)', ACTION one of {}; do what it names (the Xid it came with has its own finding)",
                c.xid,
                Self::kernel_log(t.node()),
                texts.join(", ")
            ),
        }
    }

    fn recovery_finding(&self, r: Recovery) -> Finding {
        let t = &r.target;
        let node = t.node();
        let idx = &r.idx;
        let a = self.facts.recovery_action.of(r.value);
        let what = match a {
            Some(a) => format!(
                "NVML recovery action {} {} (\"{}\")",
                r.value, a.nvml, a.text
            ),
            None => format!("recovery action {}", r.value),
        };
        let (severity, fix) = match a.map(|a| a.act) {
            Some(RecoveryAct::ResetGpu) => (
                Severity::Error,
                format!(
                    "{}; then reset the GPU on the node (nvidia-smi -r -i {idx}) and kubectl uncordon {node}",
                    drain(node)
                ),
            ),
            Some(RecoveryAct::RebootNode) => (
                Severity::Error,
                format!(
                    "{}; then reboot {node} and kubectl uncordon {node} when nvidia-smi lists every GPU",
                    drain(node)
                ),
            ),
            Some(RecoveryAct::DrainP2p) => (
                Severity::Warning,
                format!(
                    "kubectl cordon {node}; stop the jobs on it that use peer-to-peer (NVLink) traffic between GPUs, then read the value again: it turns into the action that follows"
                ),
            ),
            Some(RecoveryAct::None) => (Severity::Info, "none: the GPU can be used again".into()),
            Some(RecoveryAct::Other) | None => (
                Severity::Warning,
                format!(
                    "kubectl cordon {node}; look the value up in NVML's nvmlDeviceGpuRecoveryAction_t and read the Xid lines of the node's kernel log ({})",
                    Self::kernel_log(node)
                ),
            ),
        };
        Finding {
            id: "GPU264",
            layer: Layer::NodeHardware,
            severity,
            subjects: t.subjects(true),
            evidence: r.evidence,
            cause: format!(
                "{} needs recovery: the driver reports {what}",
                t.gpu_phrase()
            ),
            fix,
        }
    }

    /// The finding for a classified Xid (not Xid 154), by what its immediate action asks for.
    fn xid_finding(&self, t: &Target, c: &XidCode, s: Seen, others: bool) -> Option<Finding> {
        let layer = match c.class {
            XidClass::Application => Layer::Runtime,
            XidClass::Hardware | XidClass::OffBus => Layer::NodeHardware,
        };
        let (id, severity, cause, mut fix) = match c.immediate.response() {
            XidResponse::RestartNode => self.xid_off_the_bus(t, c),
            XidResponse::ResetGpu => self.xid_reset_gpu(t, c, &s),
            XidResponse::RestartApp => self.xid_restart_app(t, c, &s),
            XidResponse::Ignore => {
                let (cause, fix) = self.xid_ignore(t, c, &s);
                return Some(Finding {
                    id: "GPU262",
                    layer,
                    severity: Severity::Info,
                    subjects: t.subjects(true),
                    evidence: vec![s.evidence],
                    cause,
                    fix,
                });
            }
            // With another Xid the catalog says to follow that one, which has its own finding.
            XidResponse::IfAlone if others => return None,
            XidResponse::IfAlone => self.xid_alone(t, c),
            XidResponse::DecodeMessage => self.xid_decode_message(t, c),
            XidResponse::RecoveryAction | XidResponse::Unhandled => self.xid_unhandled(t, c),
        };
        if s.recurs {
            fix.push_str(&format!(
                "; Xid {} recurred in the last {}: {}",
                c.xid,
                self.error_window(),
                self.if_it_recurs(c)
            ));
        }
        Some(Finding {
            id,
            layer,
            severity,
            subjects: t.subjects(true),
            evidence: vec![s.evidence],
            cause,
            fix,
        })
    }

    /// GPU250: the GPU fell off the bus (RESTART_BM).
    fn xid_off_the_bus(&self, t: &Target, c: &XidCode) -> XidAdvice {
        let node = t.node();
        (
            "GPU250",
            Severity::Error,
            format!(
                "{} fell off the bus (Xid {}): the driver lost it on PCIe, and every job on it died",
                t.gpu_phrase(),
                c.xid
            ),
            format!(
                "{}; then reboot {node} ({}), check its BMC log and kernel log (dmesg) for the PCIe fault, and reseat or replace the GPU if it happens again; kubectl uncordon {node} when nvidia-smi lists every GPU",
                drain(node),
                self.catalog_says(c)
            ),
        )
    }

    /// GPU251: a hardware fault the GPU needs a reset for (RESET_GPU, WORKFLOW_XID_48).
    fn xid_reset_gpu(&self, t: &Target, c: &XidCode, s: &Seen) -> XidAdvice {
        let node = t.node();
        let xid = c.xid;
        let mut fix = format!(
            "{}; then reset the GPU on the node (nvidia-smi -r -i {}, or reboot it) and kubectl uncordon {node}",
            drain(node),
            t.smi_id(&s.labels, self.names())
        );
        if !s.recurs {
            fix.push_str(&format!("; if Xid {xid} returns, {}", self.if_it_recurs(c)));
        }
        if c.driver {
            fix.push_str("; if it recurs on several GPUs, move the pool to a newer driver: gpuctl upgrade driver BLUEPRINT --pool POOL --to VERSION");
        }
        (
            "GPU251",
            Severity::Error,
            format!(
                "{} reported Xid {xid} ({}), a hardware fault the GPU needs a reset for ({})",
                t.gpu_phrase(),
                c.text,
                self.catalog_says(c)
            ),
            fix,
        )
    }

    /// GPU252: the application must be restarted (RESTART_APP); after a contained memory error
    /// (Xid 94) the GPU also wants a reset when convenient.
    fn xid_restart_app(&self, t: &Target, c: &XidCode, s: &Seen) -> XidAdvice {
        let gpu = t.gpu_phrase();
        let xid = c.xid;
        let (who, mut fix) = self.restart_app(t, c.class);
        let cause = match c.class {
            XidClass::Application => format!(
                "{who} caused Xid {xid} ({}) on {gpu}: an application error, not a GPU fault ({})",
                c.text,
                self.catalog_says(c)
            ),
            XidClass::Hardware | XidClass::OffBus => {
                // The catalog's Xid 94 text: "It is recommended to reset the GPU when
                // convenient. Applications can continue to be run until the reset can be
                // performed."
                fix.push_str(&format!(
                    "; then, at a quiet moment, {} and reset the GPU on the node: nvidia-smi -r -i {}",
                    drain(t.node()),
                    t.smi_id(&s.labels, self.names())
                ));
                format!(
                    "{who} lost its work to Xid {xid} ({}) on {gpu}: the application must be restarted; other work on the GPU is unaffected ({})",
                    c.text,
                    self.catalog_says(c)
                )
            }
        };
        ("GPU252", Severity::Warning, cause, fix)
    }

    /// GPU262's cause and fix: the catalog asks for no action (IGNORE), unless it recurs.
    fn xid_ignore(&self, t: &Target, c: &XidCode, s: &Seen) -> (String, String) {
        let gpu = t.gpu_phrase();
        let xid = c.xid;
        let who = match (c.class, t.pod_phrase()) {
            (XidClass::Application, Some(p)) => format!(" (pod {p})"),
            _ => String::new(),
        };
        if s.recurs {
            (
                format!(
                    "{gpu} reported Xid {xid} ({}){who} repeatedly in the last {}: NVIDIA's Xid catalog asks for no immediate action (IGNORE), but it recurs",
                    c.text,
                    self.error_window()
                ),
                format!("nothing to reset or drain; {}", self.if_it_recurs(c)),
            )
        } else {
            (
                format!(
                    "{gpu} reported Xid {xid} ({}){who}: NVIDIA's Xid catalog asks for no action (immediate action IGNORE)",
                    c.text
                ),
                format!("none; if it recurs, {}", self.if_it_recurs(c)),
            )
        }
    }

    /// GPU263 for an Xid the catalog decides by whether it comes alone (Xid 45), when it does.
    fn xid_alone(&self, t: &Target, c: &XidCode) -> XidAdvice {
        let xid = c.xid;
        let bucket = self.facts.xid.bucket(&c.immediate).unwrap_or("");
        (
            "GPU263",
            Severity::Warning,
            format!(
                "{} reported Xid {xid} ({}) and no other Xid in the last {}; NVIDIA's catalog decides Xid {xid} by whether it comes alone ({}: \"{bucket}\")",
                t.gpu_phrase(),
                c.text,
                self.error_window(),
                c.immediate
            ),
            format!(
                "on a node that runs NVIDIA Fabric Manager (NVSwitch systems) restart it, the catalog's RESTART_FM; Xid {xid} alone also follows an application stopped by Ctrl-C, SIGKILL or a GPU reset, so check whether one was: {}",
                Self::kernel_log(t.node())
            ),
        )
    }

    /// GPU263 for an Xid whose action the catalog takes from its message (the NVLink Xids).
    fn xid_decode_message(&self, t: &Target, c: &XidCode) -> XidAdvice {
        let xid = c.xid;
        let bucket = self.facts.xid.bucket(&c.immediate).unwrap_or("");
        (
            "GPU263",
            Severity::Warning,
            format!(
                "{} reported Xid {xid} ({}): NVIDIA's catalog decides its action from the Xid message ({}), which the metrics do not carry",
                t.gpu_phrase(),
                c.text,
                c.immediate
            ),
            format!(
                "read the Xid {xid} line in the node's kernel log ({}) and decode it with the catalog ({}): \"{bucket}\"; an Xid 154 on the same GPU names the recovery it needs",
                Self::kernel_log(t.node()),
                self.facts.xid.url()
            ),
        )
    }

    /// GPU253 for a classified Xid whose immediate action gpuctl has no command for.
    fn xid_unhandled(&self, t: &Target, c: &XidCode) -> XidAdvice {
        let bucket = self
            .facts
            .xid
            .bucket(&c.immediate)
            .map(|b| format!(" (\"{b}\")"))
            .unwrap_or_default();
        (
            "GPU253",
            Severity::Warning,
            format!(
                "{} reported Xid {} ({}): NVIDIA's catalog's immediate action is {}{bucket}, which gpuctl has no command for",
                t.gpu_phrase(),
                c.xid,
                c.text,
                c.immediate
            ),
            format!(
                "follow the catalog ({}); the node's kernel log has the full message: {}",
                self.facts.xid.url(),
                Self::kernel_log(t.node())
            ),
        )
    }

    /// Who to restart, and how, for an Xid whose immediate action is RESTART_APP: an application
    /// error is the code's to fix (the GPU needs nothing); a contained hardware error only needs
    /// the work restarted.
    fn restart_app(&self, t: &Target, class: XidClass) -> (String, String) {
        let node = t.node();
        let app = class == XidClass::Application;
        match (&t.pod, t.pod_phrase()) {
            (Some(p), Some(phrase)) => {
                let ns = p.namespace.as_deref().unwrap_or("default");
                let container = p
                    .detail
                    .as_deref()
                    .and_then(|d| d.strip_prefix("container "))
                    .map(|c| format!(" -c {c}"))
                    .unwrap_or_default();
                let fix = if app {
                    format!(
                        "check the pod's code: kubectl -n {ns} logs {}{container} --previous, and run it under compute-sanitizer to find the bad access; restart it once fixed (kubectl -n {ns} delete pod {}; its controller starts it again); the GPU needs nothing",
                        p.name, p.name
                    )
                } else {
                    format!(
                        "kubectl -n {ns} delete pod {} (its controller starts it again)",
                        p.name
                    )
                };
                (format!("pod {phrase}"), fix)
            }
            _ => (
                "the application".to_owned(),
                if app {
                    format!(
                        "find the process in the node's kernel log ({}) and check its code; the GPU needs nothing",
                        Self::kernel_log(node)
                    )
                } else {
                    "restart the job that used the GPU".to_owned()
                },
            ),
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
                layer: Layer::NodeHardware,
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
                layer: Layer::NodeHardware,
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
                layer: Layer::NodeHardware,
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
                layer: Layer::NodeHardware,
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
                layer: Layer::NodeHardware,
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
        if let Some(a) = &self.settings.accounting {
            return self.accounting_idle(a, out);
        }
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

    /// GPU260 as the accounting alert judges it: a running pod whose devices were active less
    /// than the blueprint's share of their weighted allocation for the whole idle window.
    fn accounting_idle(&self, a: &super::AccountingIdle, out: &mut Vec<Finding>) {
        let window_s = (self.settings.idle_window_ms / 1000) as f64;
        let slack = 2.0 * resolution_s(self.settings.idle_window_ms) as f64 + 1.0;
        let latest_start = self.results.at - window_s + slack;
        let starts: BTreeMap<Key, f64> = self
            .results
            .get(Check::IdleAccounting, Part::FirstSeen)
            .iter()
            .map(|s| (key(s), s.value))
            .collect();
        let window = dur(self.settings.idle_window_ms);
        for s in self.results.get(Check::IdleAccounting, Part::Value) {
            let label = |k: &str| s.labels.get(k).filter(|v| !v.is_empty());
            let (Some(ns), Some(pod)) = (label("namespace"), label("pod")) else {
                continue;
            };
            let pool = label("pool").map_or("?", String::as_str);
            let Some(start) = starts.get(&key(s)) else {
                continue;
            };
            // NaN (no allocation left to divide by) is no finding.
            let idle = s.value < a.below;
            if !idle || *start > latest_start {
                continue;
            }
            let pct = |r: f64| format!("{} %", num(r * 100.0));
            out.push(Finding {
                id: "GPU260",
                layer: Layer::Runtime,
                severity: Severity::Warning,
                subjects: vec![Subject {
                    kind: SubjectKind::Pod,
                    namespace: Some(ns.clone()),
                    name: pod.clone(),
                    detail: Some(format!("pool {pool}")),
                }],
                evidence: vec![Evidence {
                    metric: format!("max_over_time(({})[{window}])", a.shown_as),
                    value: pct(s.value),
                    first_seen: time(*start),
                    last_seen: time(self.results.at),
                }],
                cause: format!(
                    "pod {ns}/{pod} holds GPUs of pool {pool} that were active at most {} of the time for the last {window}, below the {} of spec.accounting.idle: they are allocated and wasted (the same condition fires the {} alert, and `gpuctl report` counts these hours as idle)",
                    pct(s.value),
                    pct(a.below),
                    gpuctl_pipeline::render::accounting::IDLE_ALERT
                ),
                fix: format!(
                    "kubectl -n {ns} logs {pod} (is it stuck or waiting on data?); if it no longer needs the GPUs, kubectl -n {ns} delete pod {pod} (or scale its owner to 0) to give them back"
                ),
            });
        }
    }
}
