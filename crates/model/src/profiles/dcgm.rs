//! DCGM facts (`profiles/dcgm.yaml`): dcgm-exporter's metric and label names, NVIDIA's Xid
//! classification, the clock event (throttle) reasons and the thresholds doctor judges metrics by.
//! The rendered alerts and the metric findings both read their names from here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::DCGM_FILE;
use super::common::{FactRow, PartialDate, TextList, text_list};
use super::{ProfileError, RowLog, inconsistent, sourced};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DcgmFile {
    pub(super) source: TextList,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) exporter: ExporterFacts,
    pub(super) clock_events: ClockEvents,
    pub(super) xid: XidCatalog,
    pub(super) recovery_action: RecoveryActions,
    pub(super) thresholds: Thresholds,
    pub(super) alert_bounds: AlertBounds,
}

/// All DCGM facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DcgmFacts {
    /// Metric and label names.
    pub exporter: ExporterFacts,
    /// Clock event reasons.
    pub clock_events: ClockEvents,
    /// Xid classification.
    pub xid: XidCatalog,
    /// The GPU's required recovery (DCGM field 1523, Xid 154).
    pub recovery_action: RecoveryActions,
    /// Doctor's thresholds.
    pub thresholds: Thresholds,
    /// What the blueprint's alert thresholds may be.
    pub alert_bounds: AlertBounds,
}

/// What dcgm-exporter publishes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExporterFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// The labels each fact is read from, first present (and non-empty) wins.
    pub labels: LabelNames,
    /// Metric names.
    pub metrics: MetricNames,
    /// Caveats from the data file (what a re-read confirmed and what it could not).
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// Label names, in the order they are tried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelNames {
    /// GPU index on its node.
    pub gpu: Vec<String>,
    /// GPU UUID.
    pub uuid: Vec<String>,
    /// Device file name (`nvidia0`).
    pub device: Vec<String>,
    /// GPU model name.
    pub model: Vec<String>,
    /// Node name.
    pub node: Vec<String>,
    /// Pod the GPU is allocated to.
    pub pod: Vec<String>,
    /// Namespace of that pod.
    pub namespace: Vec<String>,
    /// Container of that pod.
    pub container: Vec<String>,
    /// MIG profile of a GPU instance.
    pub mig_profile: Vec<String>,
    /// Xid value of `xid_count`.
    pub xid: Vec<String>,
    /// Target labels prometheus-operator sets on every series it scrapes through a ServiceMonitor or
    /// PodMonitor: their presence marks the `target_owned` labels as the exporter's own.
    pub scrape_target: Vec<String>,
    /// Labels that, on such a series, name the scraped exporter pod rather than the GPU's workload.
    pub target_owned: Vec<String>,
}

impl LabelNames {
    /// The names the workload's `pick` (pod, namespace or container) may be read from on a series
    /// with `labels`: all of them, except that on a series scraped through prometheus-operator the
    /// target-owned names (the exporter's own `pod`, ...) are skipped, so an unallocated GPU is never
    /// reported as held by the exporter.
    pub fn workload<'n>(
        &'n self,
        labels: &std::collections::BTreeMap<String, String>,
        pick: &'n [String],
    ) -> impl Iterator<Item = &'n String> {
        let scraped = self.scrape_target.iter().any(|l| labels.contains_key(l));
        pick.iter()
            .filter(move |n| !(scraped && self.target_owned.contains(n)))
    }

    /// Every list, named, for the loader's checks.
    pub(super) fn all(&self) -> [(&'static str, &Vec<String>); 12] {
        [
            ("gpu", &self.gpu),
            ("uuid", &self.uuid),
            ("device", &self.device),
            ("model", &self.model),
            ("node", &self.node),
            ("pod", &self.pod),
            ("namespace", &self.namespace),
            ("container", &self.container),
            ("mig_profile", &self.mig_profile),
            ("xid", &self.xid),
            ("scrape_target", &self.scrape_target),
            ("target_owned", &self.target_owned),
        ]
    }
}

/// Metric names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricNames {
    /// Value of the last Xid (gauge).
    pub xid_last: String,
    /// Xid errors in the exporter's window, label `xid` (gauge).
    pub xid_count: String,
    /// Single-bit volatile ECC errors (counter).
    pub ecc_sbe_volatile: String,
    /// Double-bit volatile ECC errors (counter).
    pub ecc_dbe_volatile: String,
    /// Row remapping failed (gauge, 0/1).
    pub row_remap_failure: String,
    /// Rows remapped after uncorrectable errors (counter).
    pub uncorrectable_remapped_rows: String,
    /// Rows remapped after correctable errors (counter).
    pub correctable_remapped_rows: String,
    /// GPU temperature in C (gauge).
    pub gpu_temp: String,
    /// Power draw in W (gauge).
    pub power_usage: String,
    /// Clock event reasons bitmask (gauge).
    pub clock_event_reasons: String,
    /// GPU utilisation in % (gauge).
    pub gpu_util: String,
    /// Engine activity 0..1 (gauge, DCP).
    pub gr_engine_active: String,
    /// NVLink error counters.
    pub nvlink_errors: Vec<String>,
}

impl MetricNames {
    /// Every name, for the loader's checks.
    pub(super) fn all(&self) -> Vec<&str> {
        let mut v = vec![
            self.xid_last.as_str(),
            &self.xid_count,
            &self.ecc_sbe_volatile,
            &self.ecc_dbe_volatile,
            &self.row_remap_failure,
            &self.uncorrectable_remapped_rows,
            &self.correctable_remapped_rows,
            &self.gpu_temp,
            &self.power_usage,
            &self.clock_event_reasons,
            &self.gpu_util,
            &self.gr_engine_active,
        ];
        v.extend(self.nvlink_errors.iter().map(String::as_str));
        v
    }
}

/// Clock event (throttle) reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockEvents {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// The bits.
    pub reasons: Vec<ClockEventReason>,
}

/// One bit of the clock event reasons mask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockEventReason {
    /// Mask value.
    pub bit: u64,
    /// dcgm-exporter's name (`hw_thermal`).
    pub name: String,
    /// Heat or a hardware protection, not policy or idleness.
    pub fault: bool,
}

impl ClockEvents {
    /// The names of the fault reasons set in `mask`, in bit order.
    pub fn faults_in(&self, mask: u64) -> Vec<&str> {
        self.reasons
            .iter()
            .filter(|r| r.fault && mask & r.bit != 0)
            .map(|r| r.name.as_str())
            .collect()
    }

    /// The OR of every fault bit.
    pub fn fault_mask(&self) -> u64 {
        self.reasons
            .iter()
            .filter(|r| r.fault)
            .fold(0, |m, r| m | r.bit)
    }
}

/// NVIDIA's Xid classification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XidCatalog {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// What could not be read (the catalog page's date).
    pub note: String,
    /// The catalog's products (its "Applies to" columns).
    pub products: Vec<String>,
    /// The catalog's resolution buckets and what each means, verbatim.
    pub buckets: BTreeMap<String, String>,
    /// When an Xid counts as recurring.
    pub recurring: Recurrence,
    /// The classified Xids.
    pub codes: Vec<XidCode>,
}

/// When gpuctl calls an Xid recurring in the error window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recurrence {
    /// The exporter's windowed count reached this.
    pub count: u32,
    /// Or the Xid showed over a span longer than this (`7m`).
    pub span: String,
}

impl XidCatalog {
    /// The entry of `xid`, if classified.
    pub fn code(&self, xid: u32) -> Option<&XidCode> {
        self.codes.iter().find(|c| c.xid == xid)
    }

    /// The Xids of one class, ascending.
    pub fn of_class(&self, class: XidClass) -> Vec<u32> {
        self.matching(|c| c.class == class)
    }

    /// The Xids gpuctl answers with `response`, ascending: the one list the rendered alerts and the
    /// doctor's findings both take, so they cannot disagree.
    pub fn with_response(&self, response: XidResponse) -> Vec<u32> {
        self.matching(|c| c.immediate.response() == response)
    }

    fn matching(&self, keep: impl Fn(&XidCode) -> bool) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .codes
            .iter()
            .filter(|c| keep(c))
            .map(|c| c.xid)
            .collect();
        v.sort_unstable();
        v
    }

    /// What the catalog says a bucket means (its Guidance Class table), if it defines it.
    pub fn bucket(&self, action: &XidAction) -> Option<&str> {
        self.buckets.get(action.as_str()).map(String::as_str)
    }

    /// The catalog's first URL, for findings.
    pub fn url(&self) -> &str {
        self.source
            .first()
            .and_then(|s| s.split_whitespace().next())
            .map(|s| s.trim_end_matches(':'))
            .unwrap_or("")
    }
}

/// One classified Xid: the catalog's cells verbatim, with gpuctl's class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XidCode {
    /// The Xid value.
    pub xid: u32,
    /// The catalog's mnemonic (`ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS`).
    pub mnemonic: String,
    /// Whose fault it usually is (gpuctl's grouping, not a catalog column).
    pub class: XidClass,
    /// The catalog's "Resolution Bucket (Immediate Action)".
    pub immediate: XidAction,
    /// The catalog's "Resolution Bucket (Investigatory Action)": what to do if it recurs.
    pub investigatory: XidAction,
    /// The catalog's own words on recurrence or persistence, where its row has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurring: Option<String>,
    /// The products the catalog limits the row to (all of `products` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies_to: Option<Vec<String>>,
    /// A newer driver is the lasting fix when it recurs (gpuctl's judgement).
    #[serde(default)]
    pub driver: bool,
    /// What it means, in a few words.
    pub text: String,
}

/// Whose fault an Xid usually is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XidClass {
    /// The application (its code or data): the GPU is fine.
    Application,
    /// GPU hardware (memory, NVLink, GSP): reset or replace the GPU.
    Hardware,
    /// The GPU fell off the PCIe bus.
    OffBus,
}

/// A resolution bucket of the catalog, by the name it gives it. The ones gpuctl acts on are
/// variants; any other cell is kept verbatim (`Other`), quoted in findings and never acted on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum XidAction {
    /// `IGNORE`: no action.
    Ignore,
    /// `RESTART_APP`: restart the application.
    RestartApp,
    /// `RESET_GPU`: reset the GPU.
    ResetGpu,
    /// `RESTART_BM`: restart the machine (bare metal).
    RestartBm,
    /// `CONTACT_SUPPORT`.
    ContactSupport,
    /// `WORKFLOW_XID_45`: alone, restart Fabric Manager; with another Xid, follow that one.
    WorkflowXid45,
    /// `WORKFLOW_XID_48`: alone, reset the GPU; with Xid 63 or 64, drain and reset.
    WorkflowXid48,
    /// `WORKFLOW_NVLINK_ERR`: decode the registers of the Xid 74 message.
    WorkflowNvlinkErr,
    /// `WORKFLOW_NVLINK5_ERR`: decode the Xid 144-150 message with the catalog's decode table.
    WorkflowNvlink5Err,
    /// `XID_154`: follow the recovery action Xid 154 reports.
    Xid154,
    /// Any other cell, verbatim (`CHECK_APP/CUDA`, `IGNORE (sympathetic)`, ...).
    Other(String),
}

/// The catalog names of the variants gpuctl acts on.
static ACTION_NAMES: [(XidAction, &str); 10] = [
    (XidAction::Ignore, "IGNORE"),
    (XidAction::RestartApp, "RESTART_APP"),
    (XidAction::ResetGpu, "RESET_GPU"),
    (XidAction::RestartBm, "RESTART_BM"),
    (XidAction::ContactSupport, "CONTACT_SUPPORT"),
    (XidAction::WorkflowXid45, "WORKFLOW_XID_45"),
    (XidAction::WorkflowXid48, "WORKFLOW_XID_48"),
    (XidAction::WorkflowNvlinkErr, "WORKFLOW_NVLINK_ERR"),
    (XidAction::WorkflowNvlink5Err, "WORKFLOW_NVLINK5_ERR"),
    (XidAction::Xid154, "XID_154"),
];

impl XidAction {
    /// The catalog's name, verbatim.
    pub fn as_str(&self) -> &str {
        match self {
            XidAction::Other(s) => s,
            known => ACTION_NAMES
                .iter()
                .find(|(a, _)| a == known)
                .map_or("", |(_, n)| *n),
        }
    }

    /// What gpuctl does about an Xid whose immediate action this is.
    pub fn response(&self) -> XidResponse {
        match self {
            XidAction::RestartBm => XidResponse::RestartNode,
            // The catalog's workflow for 48 resets the GPU either way (alone: RESET_GPU; with 63
            // or 64: DRAIN_AND_RESET), and gpuctl's fix drains first in both.
            XidAction::ResetGpu | XidAction::WorkflowXid48 => XidResponse::ResetGpu,
            XidAction::RestartApp => XidResponse::RestartApp,
            XidAction::Ignore => XidResponse::Ignore,
            XidAction::WorkflowXid45 => XidResponse::IfAlone,
            XidAction::WorkflowNvlinkErr | XidAction::WorkflowNvlink5Err => {
                XidResponse::DecodeMessage
            }
            XidAction::Xid154 => XidResponse::RecoveryAction,
            XidAction::ContactSupport | XidAction::Other(_) => XidResponse::Unhandled,
        }
    }
}

impl From<String> for XidAction {
    fn from(s: String) -> XidAction {
        ACTION_NAMES
            .iter()
            .find(|(_, n)| *n == s)
            .map_or(XidAction::Other(s), |(a, _)| a.clone())
    }
}

impl std::fmt::Display for XidAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for XidAction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for XidAction {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<XidAction, D::Error> {
        String::deserialize(d).map(XidAction::from)
    }
}

/// What gpuctl does about an Xid, from the catalog's immediate action. The doctor's finding kind and
/// severity and the rendered alert an Xid lands in both follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum XidResponse {
    /// RESTART_BM: drain the node and reboot it (error; pages).
    RestartNode,
    /// RESET_GPU (and WORKFLOW_XID_48): drain the node and reset the GPU (error; pages).
    ResetGpu,
    /// RESTART_APP: restart the pod (warning).
    RestartApp,
    /// IGNORE: nothing now; the investigatory action if it recurs (info; never pages).
    Ignore,
    /// WORKFLOW_XID_45: alone, the catalog's solo action; with another Xid, that Xid's (warning).
    IfAlone,
    /// WORKFLOW_NVLINK_ERR, WORKFLOW_NVLINK5_ERR: the action is in the kernel message (warning).
    DecodeMessage,
    /// XID_154: the recovery action the GPU reports (DCGM field 1523) or its kernel message.
    RecoveryAction,
    /// CONTACT_SUPPORT or a bucket gpuctl does not act on: quote the catalog (warning).
    Unhandled,
}

/// NVML's GPU recovery actions (DCGM field 1523; the value Xid 154's message names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoveryActions {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Why gpuctl does not collect it.
    pub note: String,
    /// The texts Xid 154's kernel message may name, as the catalog lists them.
    pub message_texts: Vec<String>,
    /// The metric names the field may have, tried in order.
    pub metrics: Vec<String>,
    /// The values.
    pub values: Vec<RecoveryAction>,
}

impl RecoveryActions {
    /// The entry of `value`, if known.
    pub fn of(&self, value: u32) -> Option<&RecoveryAction> {
        self.values.iter().find(|v| v.value == value)
    }
}

/// One value of `nvmlDeviceGpuRecoveryAction_t`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoveryAction {
    /// The number.
    pub value: u32,
    /// NVML's name without its prefix (`GPU_RESET`).
    pub nvml: String,
    /// NVML's description (`Reset Gpu`).
    pub text: String,
    /// What gpuctl tells the operator to do.
    pub act: RecoveryAct,
}

/// What gpuctl tells the operator to do for a recovery action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAct {
    /// Nothing: the GPU can be used again.
    None,
    /// Drain the node and reset the GPU.
    ResetGpu,
    /// Drain the node and reboot it.
    RebootNode,
    /// Stop the jobs that use peer-to-peer traffic, then read the value again.
    DrainP2p,
    /// gpuctl has no command for it: quote NVML's words.
    Other,
}

/// Bounds on the blueprint's alert thresholds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertBounds {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// What no source gives.
    pub note: String,
    /// `spec.monitoring.alerts.temperatureC`.
    pub temperature_c: Bound,
}

/// An open-below, closed-above range: a value must be above `min` and at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bound {
    /// Values at or below fire everywhere.
    pub min: f64,
    /// Values above never fire.
    pub max: f64,
}

impl DcgmFile {
    /// The cross-table checks the types cannot express.
    pub(super) fn check(&self) -> Result<(), String> {
        let x = &self.xid;
        let mut seen = std::collections::BTreeSet::new();
        for c in &x.codes {
            if !seen.insert(c.xid) {
                return Err(format!("xid {} is listed twice", c.xid));
            }
            for (column, action) in [
                ("immediate", &c.immediate),
                ("investigatory", &c.investigatory),
            ] {
                if x.bucket(action).is_none() {
                    return Err(format!(
                        "xid {}: {column} `{action}` is not in xid.buckets (add the catalog's text for it)",
                        c.xid
                    ));
                }
            }
            if let Some(p) = c
                .applies_to
                .iter()
                .flatten()
                .find(|p| !x.products.contains(p))
            {
                return Err(format!(
                    "xid {}: applies_to names `{p}`, not one of xid.products",
                    c.xid
                ));
            }
            if c.recurring.as_ref().is_some_and(|r| r.trim().is_empty()) || c.text.trim().is_empty()
            {
                return Err(format!("xid {}: empty text", c.xid));
            }
            // The node-restart alert is named for Xid 79 (off the bus): an Xid that asks for a
            // restart and is not in that class would page under the wrong name.
            if (c.class == XidClass::OffBus) != (c.immediate.response() == XidResponse::RestartNode)
            {
                return Err(format!(
                    "xid {}: class off_bus and immediate RESTART_BM go together (GPUFellOffTheBus)",
                    c.xid
                ));
            }
        }
        if !x.url().starts_with("https://") {
            return Err("xid: the first source must be the catalog's URL".into());
        }
        if x.recurring.count < 2 {
            return Err("xid.recurring.count must be at least 2".into());
        }
        crate::quantity::parse_duration_ms(&x.recurring.span)
            .map_err(|e| format!("xid.recurring.span: {e}"))?;
        let r = &self.recovery_action;
        let mut values = std::collections::BTreeSet::new();
        for v in &r.values {
            if !values.insert(v.value) {
                return Err(format!(
                    "recovery_action: value {} is listed twice",
                    v.value
                ));
            }
        }
        if r.of(0).is_none_or(|v| v.act != RecoveryAct::None) {
            return Err("recovery_action: value 0 must be `act: none`".into());
        }
        if let Some(bad) = r.metrics.iter().find(|n| !is_prometheus_name(n, true)) {
            return Err(format!(
                "recovery_action.metrics: `{bad}` is not a Prometheus metric name"
            ));
        }
        if r.metrics.is_empty() {
            return Err("recovery_action.metrics names no metric".into());
        }
        let b = &self.alert_bounds.temperature_c;
        let t = self.thresholds.temperature_c;
        if !(b.min.is_finite() && b.max.is_finite() && b.min < b.max) {
            return Err("alert_bounds.temperature_c: min must be below max".into());
        }
        if !(t > b.min && t <= b.max) {
            return Err(format!(
                "thresholds.temperature_c {t} is outside alert_bounds.temperature_c ({}, {}]",
                b.min, b.max
            ));
        }
        Ok(())
    }
}

/// How doctor judges metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Temperature in C above which a GPU is too hot (the blueprint's alert threshold wins).
    pub temperature_c: f64,
    /// How long the temperature must stay above it (`5m`).
    pub temperature_for: String,
    /// Engine activity (0..1) at or below which an allocated GPU is idle.
    pub idle_engine_active: f64,
    /// GPU utilisation (%) at or below which an allocated GPU is idle.
    pub idle_gpu_util_percent: f64,
    /// Default idle window (`1h`).
    pub idle_window: String,
    /// How far back error counters are looked at (`1h`).
    pub error_window: String,
}

/// True for a valid Prometheus metric or label name.
pub(super) fn is_prometheus_name(name: &str, metric: bool) -> bool {
    let mut chars = name.chars();
    let first_ok = |c: char| c.is_ascii_alphabetic() || c == '_' || (metric && c == ':');
    chars.next().is_some_and(first_ok)
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (metric && c == ':'))
}

pub(super) fn load_dcgm(
    file: DcgmFile,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<DcgmFacts, ProfileError> {
    const F: &str = DCGM_FILE;
    sourced(sources, F, None, &file.source.0)?;
    sourced(sources, F, Some("exporter"), &file.exporter.source)?;
    sourced(sources, F, Some("clock_events"), &file.clock_events.source)?;
    sourced(sources, F, Some("xid"), &file.xid.source)?;
    sourced(
        sources,
        F,
        Some("recovery_action"),
        &file.recovery_action.source,
    )?;
    sourced(sources, F, Some("thresholds"), &file.thresholds.source)?;
    sourced(sources, F, Some("alert_bounds"), &file.alert_bounds.source)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    log.row("exporter", &file.exporter.source, file.exporter.read);
    log.row(
        "clock_events",
        &file.clock_events.source,
        file.clock_events.read,
    );
    log.row("xid", &file.xid.source, file.xid.read);
    log.row(
        "recovery_action",
        &file.recovery_action.source,
        file.recovery_action.read,
    );
    log.row("thresholds", &file.thresholds.source, file.thresholds.read);
    log.row(
        "alert_bounds",
        &file.alert_bounds.source,
        file.alert_bounds.read,
    );
    for (what, names) in file.exporter.labels.all() {
        if names.is_empty() {
            return Err(inconsistent(
                F,
                format!("exporter.labels.{what} names no label"),
            ));
        }
        if let Some(bad) = names.iter().find(|n| !is_prometheus_name(n, false)) {
            return Err(inconsistent(
                F,
                format!("exporter.labels.{what}: `{bad}` is not a Prometheus label name"),
            ));
        }
    }
    if let Some(bad) = file
        .exporter
        .metrics
        .all()
        .into_iter()
        .find(|n| !is_prometheus_name(n, true))
    {
        return Err(inconsistent(
            F,
            format!("exporter.metrics: `{bad}` is not a Prometheus metric name"),
        ));
    }
    let mut mask = 0u64;
    for r in &file.clock_events.reasons {
        if !r.bit.is_power_of_two() || mask & r.bit != 0 {
            return Err(inconsistent(
                F,
                format!(
                    "clock_events `{}`: bit {} is not a single bit or is listed twice",
                    r.name, r.bit
                ),
            ));
        }
        mask |= r.bit;
    }
    file.check().map_err(|m| inconsistent(F, m))?;
    let t = &file.thresholds;
    for (what, text) in [
        ("idle_window", &t.idle_window),
        ("error_window", &t.error_window),
        ("temperature_for", &t.temperature_for),
    ] {
        match crate::quantity::parse_duration_ms(text) {
            Ok(ms) if ms > 0 => {}
            Ok(_) => return Err(inconsistent(F, format!("thresholds.{what} is zero"))),
            Err(e) => return Err(inconsistent(F, format!("thresholds.{what}: {e}"))),
        }
    }
    if !(0.0..=1.0).contains(&t.idle_engine_active)
        || !(0.0..=100.0).contains(&t.idle_gpu_util_percent)
        || !t.temperature_c.is_finite()
    {
        return Err(inconsistent(F, "thresholds are out of range"));
    }
    Ok(DcgmFacts {
        exporter: file.exporter,
        clock_events: file.clock_events,
        xid: file.xid,
        recovery_action: file.recovery_action,
        thresholds: file.thresholds,
        alert_bounds: file.alert_bounds,
    })
}

/// `profiles/dcgm.yaml` with one edit, loaded: the loader's error (for the tables' tests).
#[cfg(test)]
pub(super) fn broken_for_test(from: &str, to: &str) -> String {
    use crate::profiles::{Catalog, ProfileSources};
    assert!(
        ProfileSources::EMBEDDED.dcgm.contains(from),
        "the profile no longer contains `{from}`"
    );
    let text: &'static str = Box::leak(
        ProfileSources::EMBEDDED
            .dcgm
            .replacen(from, to, 1)
            .into_boxed_str(),
    );
    let src = ProfileSources {
        dcgm: text,
        ..ProfileSources::EMBEDDED
    };
    Catalog::from_sources(&src).unwrap_err().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles::Catalog;

    fn facts() -> &'static DcgmFacts {
        Catalog::embedded().dcgm()
    }

    use super::broken_for_test as broken;

    /// Every Xid row against NVIDIA's Xid catalog (analyzing-xid-catalog.html, the revision with
    /// Xids 1 to 172, read 2026-12-03): immediate and investigatory action verbatim, and the products
    /// the catalog limits the row to. One line per fact; a row added to the profile without a line
    /// here fails. 43, 63 and 92 were restart/reset before the catalog was read: IGNORE.
    #[test]
    fn xid_rows_are_the_catalogs() {
        const ALL: Option<&[&str]> = None;
        const AH: Option<&[&str]> = Some(&["A100", "H100"]);
        const HBG: Option<&[&str]> = Some(&["H100", "B100", "GB200"]);
        const BG: Option<&[&str]> = Some(&["B100", "GB200"]);
        const AHB: Option<&[&str]> = Some(&["A100", "H100", "B100"]);
        /// (Xid, mnemonic, immediate, investigatory, applies to).
        type Row = (
            u32,
            &'static str,
            &'static str,
            &'static str,
            Option<&'static [&'static str]>,
        );
        let table: &[Row] = &[
            // 8, 32, 54, 137, 151, 159-161, 171, 172: the rows the 2026-12 facts audit found
            // missing (M9), read from the same catalog revision on 2026-12-06. 171 and 172 have
            // empty action cells ("Additional to Xid 48 ..."): gpuctl follows Xid 48's workflow.
            (
                8,
                "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT",
                "RESTART_APP",
                "CONTACT_SUPPORT",
                ALL,
            ),
            (
                32,
                "ROBUST_CHANNEL_PBDMA_ERROR",
                "RESTART_APP",
                "CHECK_APP/CUDA",
                ALL,
            ),
            (
                54,
                "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
                "CHECK_MECHANICALS",
                "CONTACT_SUPPORT",
                AHB,
            ),
            (137, "NVLINK_PRIV_ERR", "IGNORE", "XID_137_FLOW", ALL),
            (
                151,
                "ROBUST_CHANNEL_KEY_ROTATION_ERROR",
                "RESTART_VM",
                "CONTACT_SUPPORT",
                HBG,
            ),
            (
                159,
                "ROBUST_CHANNEL_CHI_NON_DATA_ERROR",
                "CHECK_UVM",
                "SYMPATHETIC_REPORT_SOLO",
                BG,
            ),
            (
                160,
                "CHANNEL_RETIREMENT_EVENT",
                "IGNORE",
                "INVESTIGATE_SW",
                BG,
            ),
            (
                161,
                "CHANNEL_RETIREMENT_FAILURE",
                "IGNORE",
                "INVESTIGATE_SW",
                BG,
            ),
            (
                171,
                "UNCORRECTABLE_DRAM_ERROR",
                "WORKFLOW_XID_48",
                "WORKFLOW_XID_48",
                ALL,
            ),
            (
                172,
                "UNCORRECTABLE_SRAM_ERROR",
                "WORKFLOW_XID_48",
                "WORKFLOW_XID_48",
                ALL,
            ),
            (
                13,
                "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
                "RESTART_APP",
                "WORKFLOW_XID_13",
                ALL,
            ),
            (
                31,
                "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
                "RESTART_APP",
                "WORKFLOW_XID_31",
                ALL,
            ),
            (
                43,
                "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
                "IGNORE",
                "CONTACT_SUPPORT",
                ALL,
            ),
            (
                45,
                "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
                "WORKFLOW_XID_45",
                "Solo: RESTART_FM Not Solo: IGNORE (follow other Xid)",
                ALL,
            ),
            (
                46,
                "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR",
                "RESET_GPU",
                "CONTACT_SUPPORT",
                ALL,
            ),
            (
                48,
                "ROBUST_CHANNEL_GPU_ECC_DBE",
                "WORKFLOW_XID_48",
                "WORKFLOW_XID_48",
                ALL,
            ),
            (62, "PMU_HALT_ERROR", "RESET_GPU", "CONTACT_SUPPORT", ALL),
            (63, "INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE", "IGNORE", ALL),
            (
                64,
                "INFOROM_DRAM_RETIREMENT_FAILURE",
                "RESET_GPU",
                "CONTACT_SUPPORT",
                ALL,
            ),
            (
                68,
                "ROBUST_CHANNEL_NVDEC0_ERROR",
                "RESTART_APP",
                "CONTACT_SUPPORT",
                ALL,
            ),
            (
                69,
                "ROBUST_CHANNEL_GR_CLASS_ERROR",
                "RESTART_APP",
                "CHECK_APP/CUDA",
                ALL,
            ),
            (
                74,
                "NVLINK_ERROR",
                "WORKFLOW_NVLINK_ERR",
                "CONTACT_SUPPORT",
                AH,
            ),
            (
                79,
                "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
                "RESTART_BM",
                "CONTACT_SUPPORT",
                ALL,
            ),
            (
                92,
                "EXCESSIVE_SBE_INTERRUPTS",
                "IGNORE",
                "CONTACT_SUPPORT",
                ALL,
            ),
            (
                94,
                "ROBUST_CHANNEL_CONTAINED_ERROR",
                "RESTART_APP",
                "IGNORE (sympathetic)",
                ALL,
            ),
            (
                95,
                "ROBUST_CHANNEL_UNCONTAINED_ERROR",
                "RESET_GPU",
                "IGNORE (sympathetic)",
                ALL,
            ),
            (
                109,
                "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR",
                "RESET_GPU",
                "CONTACT_SUPPORT",
                ALL,
            ),
            (110, "SEC_FAULT_ERROR", "RESET_GPU", "INVESTIGATE_SW", HBG),
            (119, "GSP_RPC_TIMEOUT", "RESET_GPU", "INVESTIGATE_SW", ALL),
            (120, "GSP_ERROR", "RESET_GPU", "INVESTIGATE_SW", ALL),
            (
                121,
                "C2C_ERROR",
                "IGNORE",
                "CONTACT_SUPPORT",
                Some(&["GB200"]),
            ),
            (
                136,
                "ALI_TRAINING_FAIL",
                "RESET_GPU",
                "INVESTIGATE_LINK_SI",
                Some(&["H100"]),
            ),
            (
                140,
                "UNRECOVERABLE_ECC_ERROR_ESCAPE",
                "RESET_GPU",
                "CONTACT_SUPPORT",
                ALL,
            ),
            (143, "GPU_INIT_ERROR", "RESET_GPU", "CONTACT_SUPPORT", HBG),
            (
                144,
                "NVLINK_SAW_ERROR",
                "WORKFLOW_NVLINK5_ERR",
                "WORKFLOW_NVLINK5_ERR",
                BG,
            ),
            (
                145,
                "NVLINK_RLW_ERROR",
                "WORKFLOW_NVLINK5_ERR",
                "WORKFLOW_NVLINK5_ERR",
                BG,
            ),
            (
                146,
                "NVLINK_TLW_ERROR",
                "WORKFLOW_NVLINK5_ERR",
                "WORKFLOW_NVLINK5_ERR",
                BG,
            ),
            (
                147,
                "NVLINK_TREX_ERROR",
                "WORKFLOW_NVLINK5_ERR",
                "WORKFLOW_NVLINK5_ERR",
                BG,
            ),
            (
                148,
                "NVLINK_NVLPW_CTRL_ERROR",
                "WORKFLOW_NVLINK5_ERR",
                "WORKFLOW_NVLINK5_ERR",
                BG,
            ),
            (
                149,
                "NVLINK_NETIR_ERROR",
                "WORKFLOW_NVLINK5_ERR",
                "WORKFLOW_NVLINK5_ERR",
                BG,
            ),
            (
                150,
                "NVLINK_MSE_ERROR",
                "WORKFLOW_NVLINK5_ERR",
                "WORKFLOW_NVLINK5_ERR",
                BG,
            ),
            (
                154,
                "GPU_RECOVERY_ACTION_CHANGED",
                "XID_154",
                "N/A Informational only regarding another Xid",
                ALL,
            ),
            (
                155,
                "NVLINK_SW_DEFINED_ERROR",
                "RESET_GPU",
                "INVESTIGATE_SW_USER",
                BG,
            ),
            (156, "RESOURCE_RETIREMENT_EVENT", "RESET_GPU", "IGNORE", HBG),
            (
                157,
                "RESOURCE_RETIREMENT_FAILURE",
                "IGNORE",
                "CONTACT_SUPPORT",
                HBG,
            ),
            (
                158,
                "GPU_FATAL_TIMEOUT",
                "RESET_GPU",
                "CONTACT_SUPPORT",
                ALL,
            ),
        ];
        let x = &facts().xid;
        for (xid, mnemonic, immediate, investigatory, applies) in table {
            let c = x
                .code(*xid)
                .unwrap_or_else(|| panic!("Xid {xid} is in the profile"));
            assert_eq!(c.mnemonic, *mnemonic, "Xid {xid} mnemonic");
            assert_eq!(
                c.immediate.as_str(),
                *immediate,
                "Xid {xid} immediate action"
            );
            assert_eq!(
                c.investigatory.as_str(),
                *investigatory,
                "Xid {xid} investigatory action"
            );
            assert_eq!(
                c.applies_to
                    .as_ref()
                    .map(|v| v.iter().map(String::as_str).collect::<Vec<_>>()),
                applies.map(<[&str]>::to_vec),
                "Xid {xid} applies to"
            );
        }
        assert_eq!(
            x.codes.len(),
            table.len(),
            "every profile row has a line here"
        );
    }

    /// The catalog's own words on recurrence, where a row has them, verbatim.
    #[test]
    fn recurrence_words_are_the_catalogs() {
        let x = &facts().xid;
        let words = |xid| x.code(xid).and_then(|c| c.recurring.clone());
        assert_eq!(
            words(74).as_deref(),
            Some(
                "If this error is seen repeatedly and GPU reset or node reboot fails to clear the condition, contact your hardware vendor for support."
            )
        );
        assert_eq!(
            words(140).as_deref(),
            Some(
                "Reset the GPU, and if the problem persists, contact your hardware vendor for support."
            )
        );
        assert!(
            words(119).is_some_and(|w| w.contains("If this problem reoccurs after a power cycle"))
        );
        assert!(words(121).is_some_and(|w| w.starts_with("NOTE: repeat errors may be reported")));
        assert!(words(157).is_some_and(|w| w.ends_with("may experience the same Xid again.")));
        // 92 has no trigger text: "contact support if it recurs" is its investigatory column.
        assert_eq!(words(92), None);
        assert_eq!(
            x.bucket(&XidAction::ContactSupport),
            Some("Please contact your support organization for further investigation.")
        );
        assert_eq!(x.recurring.count, 2);
        assert_eq!(x.recurring.span, "7m");
    }

    /// The names gpuctl acts on map to what it does; any other cell stays text.
    #[test]
    fn actions_and_responses() {
        let table = [
            ("IGNORE", XidResponse::Ignore),
            ("RESTART_APP", XidResponse::RestartApp),
            ("RESET_GPU", XidResponse::ResetGpu),
            ("WORKFLOW_XID_48", XidResponse::ResetGpu),
            ("RESTART_BM", XidResponse::RestartNode),
            ("WORKFLOW_XID_45", XidResponse::IfAlone),
            ("WORKFLOW_NVLINK_ERR", XidResponse::DecodeMessage),
            ("WORKFLOW_NVLINK5_ERR", XidResponse::DecodeMessage),
            ("XID_154", XidResponse::RecoveryAction),
            ("CONTACT_SUPPORT", XidResponse::Unhandled),
            ("RESTART_VM", XidResponse::Unhandled),
            ("CHECK_APP/CUDA", XidResponse::Unhandled),
        ];
        for (name, response) in table {
            let a = XidAction::from(name.to_owned());
            assert_eq!(a.as_str(), name, "round trip");
            assert_eq!(a.response(), response, "{name}");
        }
        assert_eq!(
            XidAction::from("RESTART_VM".to_owned()),
            XidAction::Other("RESTART_VM".into())
        );
        let x = &facts().xid;
        assert_eq!(x.with_response(XidResponse::RestartNode), [79]);
        assert_eq!(
            x.with_response(XidResponse::Ignore),
            [43, 63, 92, 121, 137, 157, 160, 161]
        );
        assert_eq!(
            x.with_response(XidResponse::DecodeMessage),
            [74, 144, 145, 146, 147, 148, 149, 150]
        );
        assert_eq!(x.with_response(XidResponse::RecoveryAction), [154]);
        let reset = x.with_response(XidResponse::ResetGpu);
        for xid in [48, 64, 95, 140, 143] {
            assert!(reset.contains(&xid), "{xid}");
        }
        for xid in [43, 63, 92] {
            assert!(!reset.contains(&xid), "{xid} is IGNORE, not a reset");
        }
    }

    /// NVML's recovery actions (DCGM field 1523), value by value.
    #[test]
    fn recovery_actions_are_nvmls() {
        let r = &facts().recovery_action;
        let table = [
            (0, "NONE", "No action needed", RecoveryAct::None),
            (1, "GPU_RESET", "Reset Gpu", RecoveryAct::ResetGpu),
            (2, "NODE_REBOOT", "Reboot Node", RecoveryAct::RebootNode),
            (3, "DRAIN_P2P", "Drain P2P", RecoveryAct::DrainP2p),
            (
                4,
                "DRAIN_AND_RESET",
                "Drain P2P and Reset Gpu",
                RecoveryAct::ResetGpu,
            ),
            // 5 to 7 are numbered differently by NVIDIA's sources: the text quotes both
            // readings and the finding advises no drain or reboot of its own.
            (
                5,
                "RECOVER_IMEX_DOMAIN",
                "Recover IMEX Domain (cuda-python preview numbering) or Reset the GPU's PCIe bus (pynvml 2025 numbering, GPU_RESET_BUS)",
                RecoveryAct::Other,
            ),
            (
                6,
                "BUS_RESET",
                "Reset the GPU's PCIe bus (cuda-python preview numbering; pynvml 2025 has no 6)",
                RecoveryAct::Other,
            ),
            (
                7,
                "SYSTEM_REBOOT",
                "Reboot the system (cuda-python preview numbering; pynvml 2025 has no 7)",
                RecoveryAct::Other,
            ),
        ];
        for (value, nvml, text, act) in table {
            let a = r.of(value).unwrap_or_else(|| panic!("value {value}"));
            assert_eq!(
                (a.nvml.as_str(), a.text.as_str(), a.act),
                (nvml, text, act),
                "value {value}"
            );
        }
        assert_eq!(r.values.len(), table.len());
        assert_eq!(
            r.metrics,
            [
                "DCGM_FI_DEV_GPU_RECOVERY_ACTION",
                "DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION"
            ]
        );
        assert_eq!(
            r.message_texts,
            [
                "None",
                "Drain P2P",
                "Drain and Reset",
                "GPU Reset Required",
                "Node Reboot Required"
            ]
        );
    }

    #[test]
    fn alert_bounds() {
        let b = facts().alert_bounds.temperature_c;
        assert_eq!((b.min, b.max), (18.0, 100.0));
        assert!(
            facts().thresholds.temperature_c > b.min && facts().thresholds.temperature_c <= b.max
        );
    }

    /// On a series scraped through a ServiceMonitor (it has `endpoint`), `pod` is the exporter's.
    #[test]
    fn workload_labels_skip_the_scrape_targets_own() {
        let l = &facts().exporter.labels;
        let labels = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let scraped = labels(&[
            ("endpoint", "gpu-metrics"),
            ("pod", "nvidia-dcgm-exporter-x"),
        ]);
        let names: Vec<&String> = l.workload(&scraped, &l.pod).collect();
        assert_eq!(names, ["exported_pod"]);
        let plain = labels(&[("pod", "train-0")]);
        let names: Vec<&String> = l.workload(&plain, &l.pod).collect();
        assert_eq!(names, ["exported_pod", "pod"]);
    }

    #[test]
    fn broken_tables_are_refused() {
        let e = broken(
            "investigatory: WORKFLOW_XID_13,",
            "investigatory: WORKFLOW_XID_99,",
        );
        assert!(
            e.contains("xid 13: investigatory `WORKFLOW_XID_99` is not in xid.buckets"),
            "{e}"
        );
        let e = broken("applies_to: [A100, H100]", "applies_to: [A100, V100]");
        assert!(e.contains("xid 74: applies_to names `V100`"), "{e}");
        let e = broken(
            "class: off_bus, immediate: RESTART_BM",
            "class: hardware, immediate: RESTART_BM",
        );
        assert!(
            e.contains("xid 79: class off_bus and immediate RESTART_BM go together"),
            "{e}"
        );
        let e = broken("{ value: 0, nvml: NONE", "{ value: 8, nvml: NONE");
        assert!(e.contains("value 0 must be `act: none`"), "{e}");
        let e = broken("    max: 100\n", "    max: 80\n");
        assert!(e.contains("thresholds.temperature_c 85 is outside"), "{e}");
        let e = broken("span: 7m", "span: a while");
        assert!(e.contains("xid.recurring.span"), "{e}");
        let e = broken(
            "  note: \"Page date not shown",
            "  nota: \"Page date not shown",
        );
        assert!(e.contains("nota"), "unknown fields are refused: {e}");
    }
}
