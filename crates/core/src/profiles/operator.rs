//! NVIDIA GPU Operator releases (`profiles/gpu-operator.yaml`): supported Kubernetes range and the
//! drivers each release defaults to, recommends and validates.

use serde::{Deserialize, Serialize};

use super::common::{PartialDate, TextList, text_list};
use crate::version::{DriverVersion, KubeVersion, OperatorVersion};

/// One GPU Operator chart release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorRelease {
    /// Chart version (`v26.7.0`).
    pub version: OperatorVersion,
    /// Release date, when known.
    #[serde(default)]
    pub released: Option<PartialDate>,
    /// Upstream Kubernetes minors the release supports (bare metal).
    pub kubernetes: KubeRange,
    /// The chart's default `driver.version` (`deployments/gpu-operator/values.yaml` at the
    /// release's tag): what Helm deploys when a blueprint leaves the driver out, so the value
    /// every rule and render use.
    pub default_driver: DriverVersion,
    /// The default NVIDIA's documentation names when it disagrees with the chart (v25.3.2: the
    /// chart sets 570.148.08, the docs say 570.172.08). Kept as a fact; no rule uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docs_default_driver: Option<DriverVersion>,
    /// The driver NVIDIA recommends with this release, when it names one.
    #[serde(default)]
    pub recommended_driver: Option<DriverVersion>,
    /// The other drivers the release's component matrix lists as validated.
    #[serde(default)]
    pub other_drivers: Vec<DriverVersion>,
    /// Lifecycle state as of the data file's `support_as_of`.
    #[serde(default)]
    pub support: Option<OperatorSupport>,
    /// Where this row's facts come from when they were corrected after the file-wide sources.
    #[serde(
        default,
        deserialize_with = "text_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub source: Vec<String>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl OperatorRelease {
    /// Whether the release supports Kubernetes `v`, compared by minor version.
    pub fn supports_kubernetes(&self, v: &KubeVersion) -> bool {
        self.kubernetes.contains(v)
    }

    /// Every driver the release validates, newest first, without duplicates.
    pub fn drivers(&self) -> Vec<&DriverVersion> {
        let mut all: Vec<&DriverVersion> = std::iter::once(&self.default_driver)
            .chain(self.recommended_driver.as_ref())
            .chain(&self.other_drivers)
            .collect();
        all.sort_by(|a, b| b.cmp(a));
        all.dedup_by(|a, b| a == b);
        all
    }

    /// Whether `driver` is one of the release's validated drivers (numeric equality).
    pub fn supports_driver(&self, driver: &DriverVersion) -> bool {
        self.drivers().contains(&driver)
    }

    /// The validated driver branches, newest first.
    pub fn driver_branches(&self) -> Vec<u32> {
        let mut branches: Vec<u32> = self.drivers().iter().map(|d| d.branch()).collect();
        branches.dedup();
        branches
    }
}

/// An inclusive range of Kubernetes minor versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeRange {
    /// Oldest supported minor (`1.33`).
    pub min: KubeVersion,
    /// Newest supported minor (`1.36`).
    pub max: KubeVersion,
}

impl KubeRange {
    /// Whether `v`'s minor lies in the range (patch levels are ignored).
    pub fn contains(&self, v: &KubeVersion) -> bool {
        let minor = v.minor_version();
        self.min.minor_version() <= minor && minor <= self.max.minor_version()
    }
}

/// Lifecycle state of an operator release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OperatorSupport {
    /// Newest major: fully supported.
    Supported,
    /// Previous major: critical and CVE patches only.
    Deprecated,
    /// No longer supported.
    EndOfSupport,
}

/// Facts about the operator that are not per release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperatorFacts {
    /// Date the `support` states of the releases were read.
    pub support_as_of: PartialDate,
    /// How NVIDIA's lifecycle policy reads, with its caveats.
    pub support_note: String,
    /// The `driver.kernelModuleType` setting.
    pub kernel_module_type: KernelModuleTypeFacts,
}

/// The operator's `driver.kernelModuleType` (`auto | open | proprietary`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelModuleTypeFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// First release with the setting.
    pub since: OperatorVersion,
    /// Oldest driver container that supports `auto`.
    pub auto_min_driver: DriverVersion,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// `profiles/gpu-operator.yaml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OperatorFile {
    pub(super) source: TextList,
    pub(super) support_as_of: PartialDate,
    pub(super) support_note: String,
    pub(super) kernel_module_type: KernelModuleTypeFacts,
    pub(super) releases: Vec<OperatorRelease>,
}
