//! Accounting facts (`profiles/accounting.yaml`): the metric and label names the accounting
//! recording rules and `gpuctl report` read from dcgm-exporter, kube-state-metrics, Kueue and
//! Volcano, and which dcgm-exporter release names engine activity how.

use serde::{Deserialize, Serialize};

use super::ACCOUNTING_FILE;
use super::common::{PartialDate, TextList, text_list};
use super::{FactRow, ProfileError, RowLog, inconsistent, sourced};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AccountingFile {
    source: TextList,
    read: Option<PartialDate>,
    dcgm_exporter: ExporterAccounting,
    kube_state_metrics: KubeStateMetrics,
    kueue: KueueMetrics,
    volcano: VolcanoMetrics,
}

/// All accounting facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccountingFacts {
    /// dcgm-exporter: activity metric per release, the settings accounting needs.
    pub dcgm_exporter: ExporterAccounting,
    /// kube-state-metrics: requests, phases, node labels.
    pub kube_state_metrics: KubeStateMetrics,
    /// Kueue's ClusterQueue resource metrics.
    pub kueue: KueueMetrics,
    /// Volcano's queue metrics.
    pub volcano: VolcanoMetrics,
}

/// dcgm-exporter as accounting reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExporterAccounting {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    pub read: Option<PartialDate>,
    /// The exporter release each GPU Operator release defaults to.
    pub operator_defaults: Vec<OperatorDefault>,
    /// The activity metric by exporter release, newest first.
    pub activity: Vec<ActivityMetric>,
    /// Environment variable names.
    pub env: ExporterEnv,
    /// Label names.
    pub labels: ExporterLabels,
}

/// The dcgm-exporter release a GPU Operator release deploys by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorDefault {
    /// GPU Operator release (`v26.7.0`).
    pub operator: String,
    /// dcgm-exporter tag without its image suffix (`4.6.0-4.8.3`).
    pub exporter: String,
}

/// How one range of exporter releases names engine activity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActivityMetric {
    /// First exporter release (its own version, before the DCGM part of the tag).
    pub since: String,
    /// Metric name.
    pub metric: String,
    /// Factor to a 0..1 ratio.
    pub scale: f64,
}

/// Environment variables of dcgm-exporter accounting sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExporterEnv {
    /// Per-pod copies of a shared GPU's series.
    pub virtual_gpus: String,
    /// Extra resource names to map to pods.
    pub resource_names: String,
    /// DRA claim mapping.
    pub dra: String,
}

/// dcgm-exporter labels accounting reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExporterLabels {
    /// MIG GPU-instance profile.
    pub mig_profile: String,
    /// DRA claim name.
    pub dra_claim: String,
}

/// kube-state-metrics names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeStateMetrics {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    pub read: Option<PartialDate>,
    /// Container resource requests.
    pub requests: String,
    /// Pod phase.
    pub phase: String,
    /// The phase whose pods hold devices.
    pub running_phase: String,
    /// Node labels.
    pub node_labels: String,
    /// The node label of requests and node labels.
    pub node_label: String,
    /// Prefix of a node label's series label.
    pub node_label_prefix: String,
}

/// Kueue's ClusterQueue resource metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KueueMetrics {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    pub read: Option<PartialDate>,
    /// Dotted path of the Configuration setting that enables the ClusterQueue resource metrics.
    pub enable_setting: String,
    /// Quota reserved by workloads.
    pub reservation: String,
    /// Nominal quota.
    pub nominal: String,
    /// Label names.
    pub labels: QueueLabels,
}

/// Volcano's queue metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolcanoMetrics {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    pub read: Option<PartialDate>,
    /// Allocated scalar resources per queue.
    pub allocated: String,
    /// Label names.
    pub labels: QueueLabels,
    /// Milli-units per unit.
    pub unit_divisor: f64,
}

/// Queue metric labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueLabels {
    /// The queue.
    pub queue: String,
    /// The flavor (Kueue only).
    #[serde(default)]
    pub flavor: Option<String>,
    /// The resource.
    pub resource: String,
    /// The queue's cohort (Kueue only): what a queue lends goes to its cohort.
    #[serde(default)]
    pub cohort: Option<String>,
}

impl ExporterAccounting {
    /// The exporter release (`4.6.0`) of an image tag (`4.6.0-4.8.3-distroless`).
    pub fn release_of(tag: &str) -> Option<semver::Version> {
        semver::Version::parse(tag.trim_start_matches('v').split('-').next()?).ok()
    }

    /// The activity metric of exporter `tag`: the newest row at or below its release.
    pub fn activity_for(&self, tag: &str) -> Option<&ActivityMetric> {
        let release = Self::release_of(tag)?;
        self.activity
            .iter()
            .find(|a| Self::release_of(&a.since).is_some_and(|since| since <= release))
    }

    /// The exporter tag a GPU Operator release defaults to.
    pub fn default_for(&self, operator: &str) -> Option<&str> {
        self.operator_defaults
            .iter()
            .find(|d| d.operator == operator)
            .map(|d| d.exporter.as_str())
    }
}

pub(super) fn load_accounting(
    file: AccountingFile,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<AccountingFacts, ProfileError> {
    const F: &str = ACCOUNTING_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let e = &file.dcgm_exporter;
    sourced(sources, F, Some("dcgm_exporter"), &e.source)?;
    sourced(
        sources,
        F,
        Some("kube_state_metrics"),
        &file.kube_state_metrics.source,
    )?;
    sourced(sources, F, Some("kueue"), &file.kueue.source)?;
    sourced(sources, F, Some("volcano"), &file.volcano.source)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    log.row("dcgm_exporter", &e.source, e.read);
    let k = &file.kube_state_metrics;
    log.row("kube_state_metrics", &k.source, k.read);
    log.row("kueue", &file.kueue.source, file.kueue.read);
    log.row("volcano", &file.volcano.source, file.volcano.read);
    let mut last: Option<semver::Version> = None;
    for a in &e.activity {
        let Some(v) = ExporterAccounting::release_of(&a.since) else {
            return Err(inconsistent(
                F,
                format!("activity since `{}` is not a release", a.since),
            ));
        };
        if last.as_ref().is_some_and(|l| *l <= v) || !(a.scale.is_finite() && a.scale > 0.0) {
            return Err(inconsistent(
                F,
                format!(
                    "activity rows go from the newest release down with a positive scale (at `{}`)",
                    a.since
                ),
            ));
        }
        last = Some(v);
    }
    for d in &e.operator_defaults {
        if e.activity_for(&d.exporter).is_none() {
            return Err(inconsistent(
                F,
                format!("no activity metric for exporter `{}`", d.exporter),
            ));
        }
    }
    Ok(AccountingFacts {
        dcgm_exporter: file.dcgm_exporter,
        kube_state_metrics: file.kube_state_metrics,
        kueue: file.kueue,
        volcano: file.volcano,
    })
}
