//! Doctor's runtime and hardware findings from DCGM metrics (GPU250-GPU299, registered in
//! the model crate's `finding/metrics.rs`), as pure functions.
//!
//! The flow: [`plan`] turns the DCGM facts (`profiles/dcgm.yaml`) and the [`MetricSettings`] into
//! PromQL [`Query`]s; the cluster crate runs them against Prometheus's HTTP API at one evaluation
//! time and hands back the samples as [`Results`]; [`findings`] turns those into [`Finding`]s with
//! the node, GPU and pod they concern, the evidence (metric, value, time), the cause and the fix.
//! No network here: a test builds `Results` by hand.

mod analyze;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use gpuctl_model::located::Severity;
use gpuctl_model::profiles::dcgm::DcgmFacts;
use gpuctl_model::quantity::parse_duration_ms;

pub use analyze::findings;

/// The runbook layer: metric findings are in the last two.
pub use gpuctl_model::finding::Layer;

/// What kind of object a finding concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum SubjectKind {
    /// A Kubernetes Node.
    Node,
    /// A GPU (name: its UUID, or `<node>/gpu<index>` without one).
    #[serde(rename = "GPU")]
    Gpu,
    /// A Pod.
    Pod,
}

/// One object a finding concerns.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Subject {
    /// Node, GPU or Pod.
    pub kind: SubjectKind,
    /// The pod's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name (a GPU's UUID).
    pub name: String,
    /// What else identifies it (a GPU's index, device and model; a pod's container).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What a finding is based on: one metric series, its value and when.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// The series or expression (`DCGM_EXP_XID_ERRORS_COUNT{xid="79"}`).
    pub metric: String,
    /// The value, as shown (`3`, `91 C`).
    pub value: String,
    /// When the condition was first seen in the window (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<String>,
    /// When it was last seen (RFC 3339, UTC); the evaluation time for a value over a window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<String>,
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} = {}", self.metric, self.value)?;
        match (&self.first_seen, &self.last_seen) {
            (Some(a), Some(b)) if a != b => write!(f, " (from {a} to {b})"),
            (_, Some(t)) | (Some(t), None) => write!(f, " (at {t})"),
            (None, None) => Ok(()),
        }
    }
}

/// One thing wrong at runtime or in the hardware.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable id (`GPU250`), registered in the model crate's `finding/metrics.rs`.
    pub id: &'static str,
    /// Runbook layer.
    pub layer: Layer,
    /// Error: work fails or will; warning: degraded or wasted; info: worth knowing.
    pub severity: Severity,
    /// Node, GPU and pod it concerns, in that order.
    pub subjects: Vec<Subject>,
    /// The metric values it is based on.
    pub evidence: Vec<Evidence>,
    /// The cause, in one sentence.
    pub cause: String,
    /// The next step, as a concrete command.
    pub fix: String,
}

impl Finding {
    /// The same finding in `gpuctl doctor`'s shape, to merge into its report
    /// ([`crate::doctor::Report::extend`]): subjects as `node/<name>`, `gpu/<uuid>`,
    /// `pod/<namespace>/<name>`; the title is the cause up to its colon; evidence is `metric
    /// <series>` with its value, at the last time it was seen.
    pub fn to_doctor(&self) -> gpuctl_model::finding::Finding {
        let subjects = self
            .subjects
            .iter()
            .map(|s| {
                let kind = match s.kind {
                    SubjectKind::Node => "node",
                    SubjectKind::Gpu => "gpu",
                    SubjectKind::Pod => "pod",
                };
                match &s.namespace {
                    Some(ns) => format!("{kind}/{ns}/{}", s.name),
                    None => format!("{kind}/{}", s.name),
                }
            })
            .collect();
        let evidence = self
            .evidence
            .iter()
            .map(|e| gpuctl_model::finding::Evidence {
                source: format!("metric {}", e.metric),
                text: match (&e.first_seen, &e.last_seen) {
                    (Some(a), Some(b)) if a != b => format!("{} (since {a})", e.value),
                    _ => e.value.clone(),
                },
                time: e.last_seen.clone().or_else(|| e.first_seen.clone()),
            })
            .collect();
        let title = self
            .cause
            .split_once(": ")
            .map_or(self.cause.as_str(), |(head, _)| head)
            .to_owned();
        gpuctl_model::finding::Finding {
            id: self.id.to_owned(),
            layer: self.layer,
            severity: self.severity,
            title,
            subjects,
            evidence,
            cause: self.cause.clone(),
            fix: self.fix.clone(),
        }
    }
}

/// How the metrics are judged: the profile's thresholds, the blueprint's alert threshold and the
/// command's flags, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSettings {
    /// An allocated GPU idle this long is reported (`--idle-window`).
    pub idle_window_ms: u64,
    /// How far back errors are looked for.
    pub error_window_ms: u64,
    /// Temperature threshold in C.
    pub temperature_c: f64,
    /// How long the temperature must stay above it.
    pub temperature_for_ms: u64,
    /// With `spec.accounting`: the idle check is the accounting alert's ([`AccountingIdle`]).
    pub accounting: Option<AccountingIdle>,
}

/// With `spec.accounting` (docs/report.md), doctor's allocated-but-idle check (GPU260) is the
/// condition of the accounting alert `GPUAllocatedIdle`, evaluated over the expressions its
/// recording rules record: the exporter's metric names and scale of the release gpuctl renders,
/// the MIG and shared-GPU weights, the blueprint's threshold. So doctor, the alert and `gpuctl
/// report` never disagree on which pods hold idle GPUs; without `accounting` doctor judges each
/// GPU by the profile's thresholds (`profiles/dcgm.yaml`).
#[derive(Debug, Clone, PartialEq)]
pub struct AccountingIdle {
    /// Per namespace, pod and pool: the share of its weighted allocation that was active.
    pub ratio: String,
    /// Below this share (`spec.accounting.idle.activityBelowPercent` / 100) it is idle.
    pub below: f64,
    /// The recorded series the ratio stands for, as evidence names it.
    pub shown_as: String,
}

impl AccountingIdle {
    /// The check of `table` (built from the blueprint by `AccountingTable::new`).
    pub fn of(table: &gpuctl_pipeline::render::accounting::AccountingTable) -> AccountingIdle {
        use gpuctl_pipeline::render::accounting::series;
        AccountingIdle {
            ratio: table.pod_activity_ratio_expr(),
            below: table.idle_below,
            shown_as: format!("{} / {}", series::POD_ACTIVE, series::POD_ALLOCATED),
        }
    }
}

/// A flag or profile value that is not a usable window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {message}")]
pub struct SettingsError {
    /// Which setting (`--idle-window`).
    pub what: &'static str,
    /// What is wrong.
    pub message: String,
}

/// The shortest window the checks accept: one step of Prometheus's default scrape interval would
/// already be longer, and subqueries need a few steps.
const MIN_WINDOW_MS: u64 = 10_000;
/// The longest: a week of raw samples per GPU is what Prometheus keeps by default twice over.
const MAX_WINDOW_MS: u64 = 7 * 24 * 3_600_000;

impl MetricSettings {
    /// The profile's defaults, the blueprint's `spec.monitoring.alerts.temperatureC` if set, and
    /// `--idle-window` if given.
    pub fn new(
        facts: &DcgmFacts,
        temperature_c: Option<u32>,
        idle_window: Option<&str>,
    ) -> Result<MetricSettings, SettingsError> {
        let t = &facts.thresholds;
        let window = |what: &'static str, text: &str| {
            let ms = parse_duration_ms(text).map_err(|message| SettingsError { what, message })?;
            if !(MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(&ms) {
                return Err(SettingsError {
                    what,
                    message: format!("`{text}` is outside 10s..168h"),
                });
            }
            Ok(ms)
        };
        Ok(MetricSettings {
            idle_window_ms: window("--idle-window", idle_window.unwrap_or(&t.idle_window))?,
            error_window_ms: window("thresholds.error_window", &t.error_window)?,
            temperature_c: temperature_c.map_or(t.temperature_c, f64::from),
            temperature_for_ms: window("thresholds.temperature_for", &t.temperature_for)?,
            accounting: None,
        })
    }

    /// The same settings judging idleness as the accounting alert does (`None`: by the profile).
    pub fn with_accounting(self, accounting: Option<AccountingIdle>) -> MetricSettings {
        MetricSettings { accounting, ..self }
    }
}

/// What a query is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// Any DCGM series at all (is the exporter scraped?).
    Inventory,
    /// The exporter's windowed Xid count, per Xid.
    XidCount,
    /// The last Xid value per GPU.
    XidLast,
    /// The GPU's required recovery (DCGM field 1523), when a Prometheus has it.
    RecoveryAction,
    /// Double-bit volatile ECC errors.
    EccUncorrectable,
    /// Row remapping failed.
    RowRemapFailure,
    /// Rows remapped after uncorrectable errors.
    RowRemapPending,
    /// GPU temperature above the threshold.
    Temperature,
    /// Clocks held down by heat or a hardware protection.
    Throttle,
    /// NVLink errors, one query per counter (index into `exporter.metrics.nvlink_errors`).
    NvLink(usize),
    /// Peak engine activity of allocated GPUs over the idle window.
    IdleEngine,
    /// Peak utilisation of allocated GPUs, when the engine metric is not collected.
    IdleUtil,
    /// With `spec.accounting`: each running pod's peak active share of its allocation.
    IdleAccounting,
}

/// Which number of a check a query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// The value judged.
    Value,
    /// The first time (unix seconds) the condition held in the window.
    FirstSeen,
    /// The last time it held (for idle checks: the first time the series was there).
    LastSeen,
}

/// One PromQL instant query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// What it is for.
    pub check: Check,
    /// Which number.
    pub part: Part,
    /// The expression, evaluated at [`Results::at`].
    pub promql: String,
}

/// One sample of an instant query's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// The series' labels (without `__name__` when a function dropped it).
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
    /// Its timestamp, unix seconds.
    pub timestamp: f64,
}

/// The answers to a [`plan`], all evaluated at one time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results {
    /// Evaluation time, unix seconds.
    pub at: f64,
    /// Samples per query; a query missing here was not answered (treated as no series).
    pub samples: BTreeMap<(Check, Part), Vec<Sample>>,
}

impl Results {
    /// The samples of one query (none if it was not run).
    pub fn get(&self, check: Check, part: Part) -> &[Sample] {
        self.samples
            .get(&(check, part))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

pub use gpuctl_model::promql::resolution_s;

fn dur(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The queries doctor runs, in a fixed order.
pub fn plan(facts: &DcgmFacts, settings: &MetricSettings) -> Vec<Query> {
    let win = Windows::of(settings);
    let mut out = Vec::new();
    fault_queries(facts, settings, &win, &mut out);
    match &settings.accounting {
        Some(a) => accounting_idle_queries(a, &win, &mut out),
        None => idle_queries(facts, &win, &mut out),
    }
    let m = &facts.exporter.metrics;
    push(
        &mut out,
        Check::Inventory,
        Part::Value,
        format!(
            "count(last_over_time({}[5m])) or count(last_over_time({}[5m]))",
            m.gpu_temp, m.gpu_util
        ),
    );
    out
}

fn push(out: &mut Vec<Query>, check: Check, part: Part, promql: String) {
    out.push(Query {
        check,
        part,
        promql,
    });
}

/// The windows and subquery steps of the queries, as PromQL durations.
struct Windows {
    /// The error window and its subquery step.
    w: String,
    r: String,
    /// A counter "increased" at a step when it grew over the last few steps (at least a minute,
    /// so two scrapes of the default 30 s interval fall in it).
    inc: String,
    /// The idle window and its subquery step.
    iw: String,
    ir: String,
}

impl Windows {
    fn of(settings: &MetricSettings) -> Windows {
        Windows {
            w: dur(settings.error_window_ms),
            r: format!("{}s", resolution_s(settings.error_window_ms)),
            inc: format!("{}s", (resolution_s(settings.error_window_ms) * 4).max(60)),
            iw: dur(settings.idle_window_ms),
            ir: format!("{}s", resolution_s(settings.idle_window_ms)),
        }
    }

    /// `cond` is an instant-vector condition; its first and last time in the window come from a
    /// subquery over `timestamp(cond)`. A subquery is evaluated at multiples of its step (`r`),
    /// so a condition that began after the last multiple (up to a minute ago for a 1h window) is
    /// in none of its steps: each part falls back to the condition at the evaluation time
    /// itself, or a fault seen by the latest scrapes would go unreported.
    fn timed(&self, out: &mut Vec<Query>, check: Check, value: String, cond: String) {
        let (w, r) = (&self.w, &self.r);
        push(out, check, Part::Value, value);
        push(
            out,
            check,
            Part::FirstSeen,
            format!("min_over_time(timestamp({cond})[{w}:{r}]) or timestamp({cond})"),
        );
        push(
            out,
            check,
            Part::LastSeen,
            format!("timestamp({cond}) or max_over_time(timestamp({cond})[{w}:{r}])"),
        );
    }

    /// The peak of a gauge condition over the window, or its value now (see `timed`).
    fn peak(&self, cond: &str) -> String {
        format!("max_over_time(({cond})[{}:{}]) or ({cond})", self.w, self.r)
    }

    /// A counter's growth over the window (the value) and its recent increase (the condition).
    fn counter(&self, name: &str) -> (String, String) {
        (
            format!(
                "(max_over_time({name}[{w}]) - min_over_time({name}[{w}])) > 0",
                w = self.w
            ),
            format!("increase({name}[{}]) > 0", self.inc),
        )
    }
}

/// The fault checks: Xids, recovery action, ECC, row remapping, temperature, throttling, NVLink.
fn fault_queries(
    facts: &DcgmFacts,
    settings: &MetricSettings,
    win: &Windows,
    out: &mut Vec<Query>,
) {
    let m = &facts.exporter.metrics;
    let xid_label = &facts.exporter.labels.xid[0];
    let xid_cond = format!("{}{{{xid_label}!=\"0\"}} > 0", m.xid_count);
    win.timed(out, Check::XidCount, win.peak(&xid_cond), xid_cond);
    let last_cond = format!("{} > 0", m.xid_last);
    win.timed(out, Check::XidLast, win.peak(&last_cond), last_cond);
    // The recovery the GPU needs now (a reset clears it): its value at the evaluation time, under
    // either of the field's names.
    let recovery = format!(
        "{{__name__=~\"{}\"}} > 0",
        facts.recovery_action.metrics.join("|")
    );
    win.timed(out, Check::RecoveryAction, recovery.clone(), recovery);
    let (v, c) = win.counter(&m.ecc_dbe_volatile);
    win.timed(out, Check::EccUncorrectable, v, c);
    let remap_cond = format!("{} > 0", m.row_remap_failure);
    win.timed(
        out,
        Check::RowRemapFailure,
        win.peak(&remap_cond),
        remap_cond,
    );
    let (v, c) = win.counter(&m.uncorrectable_remapped_rows);
    win.timed(out, Check::RowRemapPending, v, c);
    let hot = format!("{} > {}", m.gpu_temp, settings.temperature_c);
    win.timed(
        out,
        Check::Temperature,
        format!(
            "min_over_time({}[{}]) > {}",
            m.gpu_temp,
            dur(settings.temperature_for_ms),
            settings.temperature_c
        ),
        hot,
    );
    // PromQL has no bitwise operators: bit b of the mask is set when floor(mask / b) is odd.
    let bits: Vec<String> = facts
        .clock_events
        .reasons
        .iter()
        .filter(|reason| reason.fault)
        .map(|reason| format!("floor({} / {}) % 2 == 1", m.clock_event_reasons, reason.bit))
        .collect();
    if !bits.is_empty() {
        let cond = format!("{} and ({})", m.clock_event_reasons, bits.join(" or "));
        win.timed(out, Check::Throttle, win.peak(&cond), cond);
    }
    for (i, name) in m.nvlink_errors.iter().enumerate() {
        let (v, c) = win.counter(name);
        win.timed(out, Check::NvLink(i), v, c);
    }
}

/// The accounting idle check: each running pod's peak active share over the idle window, and the
/// first step its allocation was there (a pod younger than the window is not reported).
fn accounting_idle_queries(a: &AccountingIdle, win: &Windows, out: &mut Vec<Query>) {
    let (iw, ir) = (&win.iw, &win.ir);
    let ratio = &a.ratio;
    push(
        out,
        Check::IdleAccounting,
        Part::Value,
        format!("max_over_time(({ratio})[{iw}:{ir}])"),
    );
    push(
        out,
        Check::IdleAccounting,
        Part::FirstSeen,
        format!("min_over_time(timestamp({ratio})[{iw}:{ir}])"),
    );
}

/// The idle checks: the peak activity over the idle window, and when each series first appeared
/// in it (an allocation younger than the window is not reported).
fn idle_queries(facts: &DcgmFacts, win: &Windows, out: &mut Vec<Query>) {
    let m = &facts.exporter.metrics;
    let (iw, ir) = (&win.iw, &win.ir);
    for (check, name) in [
        (Check::IdleEngine, &m.gr_engine_active),
        (Check::IdleUtil, &m.gpu_util),
    ] {
        push(
            out,
            check,
            Part::Value,
            format!("max_over_time({name}[{iw}])"),
        );
        push(
            out,
            check,
            Part::FirstSeen,
            format!("min_over_time(timestamp({name})[{iw}:{ir}])"),
        );
    }
}
