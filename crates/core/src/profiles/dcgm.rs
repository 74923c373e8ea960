//! DCGM facts (`profiles/dcgm.yaml`): dcgm-exporter's metric and label names, NVIDIA's Xid
//! classification, the clock event (throttle) reasons and the thresholds doctor judges metrics by.
//! The rendered alerts and the metric findings both read their names from here.

use serde::{Deserialize, Serialize};

use super::common::{TextList, text_list};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DcgmFile {
    pub(super) source: TextList,
    pub(super) exporter: ExporterFacts,
    pub(super) clock_events: ClockEvents,
    pub(super) xid: XidCatalog,
    pub(super) thresholds: Thresholds,
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
    /// Doctor's thresholds.
    pub thresholds: Thresholds,
}

/// What dcgm-exporter publishes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExporterFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// The labels each fact is read from, first present (and non-empty) wins.
    pub labels: LabelNames,
    /// Metric names.
    pub metrics: MetricNames,
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
    /// The classified Xids.
    pub codes: Vec<XidCode>,
}

impl XidCatalog {
    /// The entry of `xid`, if classified.
    pub fn code(&self, xid: u32) -> Option<&XidCode> {
        self.codes.iter().find(|c| c.xid == xid)
    }

    /// The Xids of one class, ascending.
    pub fn of_class(&self, class: XidClass) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .codes
            .iter()
            .filter(|c| c.class == class)
            .map(|c| c.xid)
            .collect();
        v.sort_unstable();
        v
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

/// One classified Xid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XidCode {
    /// The Xid value.
    pub xid: u32,
    /// Whose fault it usually is.
    pub class: XidClass,
    /// The catalog's immediate action.
    pub action: XidAction,
    /// A newer driver is the lasting fix when it recurs.
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

/// The catalog's immediate action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XidAction {
    /// Nothing to do.
    Ignore,
    /// Restart the application.
    RestartApp,
    /// Reset the GPU.
    ResetGpu,
    /// Reboot the node (RESTART_BM).
    RestartNode,
}

/// How doctor judges metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles::Catalog;

    fn facts() -> &'static DcgmFacts {
        Catalog::embedded().dcgm()
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
}
