//! NVIDIA GPU Operator releases (`profiles/gpu-operator.yaml`): supported Kubernetes range and the
//! drivers each release defaults to, recommends and validates.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use super::common::kernel_major_minor as major_minor;
use super::common::{PartialDate, TextList, text_list};
use super::{DriverBranch, FactRow, OPERATOR_FILE};
use super::{ProfileError, RowLog, inconsistent, require_source, sourced};
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
    /// Drivers the final matrix may list but that no source read for the catalog confirms (a
    /// count or a pull-request title only). Not validated: GPU028 still warns, and says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unconfirmed_drivers: Vec<DriverVersion>,
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
    /// When the row's sources were read.
    #[serde(default)]
    pub read: Option<PartialDate>,
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

    /// Whether `driver` is one the release's final matrix may list without a source confirming it.
    pub fn maybe_supports_driver(&self, driver: &DriverVersion) -> bool {
        self.unconfirmed_drivers.contains(driver)
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
    /// Releases known to exist or expected, deliberately not in the catalog, and why.
    pub not_captured: Vec<NotCaptured>,
    /// The operating systems and kernels each major's platform page lists.
    pub os_support: Vec<OsSupport>,
}

impl OperatorFacts {
    /// The operating systems of `release`'s major (`v26.3.2` -> the `26.3` entry).
    pub fn os_support(&self, release: &OperatorVersion) -> Option<&OsSupport> {
        self.os_support.iter().find(|o| {
            o.majors
                .iter()
                .any(|m| m.minor_version() == release.minor_version())
        })
    }

    /// Why `version` is not in the catalog, when the data file says.
    pub fn not_captured(&self, version: &OperatorVersion) -> Option<&NotCaptured> {
        self.not_captured
            .iter()
            .find(|n| n.versions.contains(version))
    }
}

/// Releases the catalog deliberately leaves out (v26.7.1 and v26.7.2: no source shows them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotCaptured {
    /// The versions.
    pub versions: Vec<OperatorVersion>,
    /// Why they are not captured and what was searched.
    #[serde(rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
    /// Where was looked.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When.
    #[serde(default)]
    pub read: Option<PartialDate>,
}

/// The operating systems one or more operator majors support (their final platform page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsSupport {
    /// Operator majors (`24.9`, `26.3`) this list is for.
    pub majors: Vec<OperatorVersion>,
    /// Where the list comes from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When it was read.
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// The supported systems (bare metal and VMs with GPU passthrough).
    pub systems: Vec<OsSystem>,
    /// Kernel series with precompiled driver containers, and their driver branches.
    #[serde(default)]
    pub precompiled: Vec<Precompiled>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl OsSupport {
    /// The system `id` (`ubuntu`) at `version` (`22.04`, or the OpenShift minor for `rhcos`),
    /// compared by major.minor.
    pub fn system(&self, id: &str, version: &str) -> Option<&OsSystem> {
        let want = major_minor(version)?;
        self.systems.iter().find(|s| {
            s.id == id
                && match (&s.version, &s.openshift) {
                    (Some(v), _) => major_minor(v) == Some(want),
                    (None, Some(range)) => range.contains(want),
                    (None, None) => false,
                }
        })
    }

    /// The precompiled driver containers for `id` `version` and kernel series `kernel`.
    pub fn precompiled(&self, id: &str, version: &str, kernel: (u32, u32)) -> Option<&Precompiled> {
        let want = major_minor(version)?;
        self.precompiled.iter().find(|p| {
            p.id == id
                && major_minor(&p.version) == Some(want)
                && major_minor(&p.kernel) == Some(kernel)
        })
    }

    /// Every system as `id version` (`rhcos` as its OpenShift range), for hints.
    pub fn known(&self) -> Vec<String> {
        self.systems.iter().map(OsSystem::label).collect()
    }
}

/// One supported operating system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsSystem {
    /// `/etc/os-release` ID (`ubuntu`, `rhel`, `rocky`, `rhcos`).
    pub id: String,
    /// `/etc/os-release` VERSION_ID, major.minor (`22.04`); absent for Red Hat CoreOS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The OpenShift minors Red Hat CoreOS is supported with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openshift: Option<MinorRange>,
    /// The page's name for it.
    pub name: String,
    /// Kernel series (`5.15`) the page lists for it; empty: the page lists none.
    #[serde(default)]
    pub kernels: Vec<String>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl OsSystem {
    /// `ubuntu 22.04`, or `rhcos (OpenShift 4.18-4.22)`.
    pub fn label(&self) -> String {
        match (&self.version, &self.openshift) {
            (Some(v), _) => format!("{} {v}", self.id),
            (None, Some(r)) => format!("{} (OpenShift {}-{})", self.id, r.min, r.max),
            (None, None) => self.id.clone(),
        }
    }

    /// Whether the page lists kernel series `kernel` for this system.
    pub fn lists_kernel(&self, kernel: (u32, u32)) -> bool {
        self.kernels.iter().any(|k| major_minor(k) == Some(kernel))
    }
}

/// An inclusive range of `major.minor` versions (`4.18` to `4.22`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinorRange {
    /// Oldest.
    pub min: String,
    /// Newest.
    pub max: String,
}

impl MinorRange {
    fn contains(&self, v: (u32, u32)) -> bool {
        match (major_minor(&self.min), major_minor(&self.max)) {
            (Some(min), Some(max)) => min <= v && v <= max,
            _ => false,
        }
    }
}

/// Precompiled driver containers for one OS and kernel series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Precompiled {
    /// `/etc/os-release` ID.
    pub id: String,
    /// Its VERSION_ID.
    pub version: String,
    /// Kernel series (`6.8`).
    pub kernel: String,
    /// Driver branches with precompiled containers for it.
    pub branches: Vec<u32>,
}

/// The operator's `driver.kernelModuleType` (`auto | open | proprietary`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelModuleTypeFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default)]
    pub read: Option<PartialDate>,
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
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) support_as_of: PartialDate,
    pub(super) support_note: String,
    #[serde(default)]
    pub(super) not_captured: Vec<NotCaptured>,
    pub(super) kernel_module_type: KernelModuleTypeFacts,
    pub(super) releases: Vec<OperatorRelease>,
    pub(super) os_support: Vec<OsSupport>,
}

pub(super) type OperatorTables = (BTreeMap<OperatorVersion, OperatorRelease>, OperatorFacts);

pub(super) fn load_operator(
    file: OperatorFile,
    drivers: &BTreeMap<u32, DriverBranch>,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<OperatorTables, ProfileError> {
    const F: &str = OPERATOR_FILE;
    sourced(sources, F, None, &file.source.0)?;
    sourced(
        sources,
        F,
        Some("kernel_module_type"),
        &file.kernel_module_type.source,
    )?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    log.row(
        "kernel_module_type",
        &file.kernel_module_type.source,
        file.kernel_module_type.read,
    );
    let releases = releases(file.releases, &mut log)?;
    check_not_captured(&file.not_captured, &releases, &mut log)?;
    check_os_coverage(&file.os_support, &releases, drivers, sources, &mut log)?;
    let facts = OperatorFacts {
        support_as_of: file.support_as_of,
        support_note: file.support_note,
        kernel_module_type: file.kernel_module_type,
        not_captured: file.not_captured,
        os_support: file.os_support,
    };
    Ok((releases, facts))
}

/// The releases by version: each listed once, its Kubernetes range in order, its unconfirmed
/// drivers not validated ones and explained.
fn releases(
    list: Vec<OperatorRelease>,
    log: &mut RowLog<'_>,
) -> Result<BTreeMap<OperatorVersion, OperatorRelease>, ProfileError> {
    const F: &str = OPERATOR_FILE;
    let mut releases = BTreeMap::new();
    for release in list {
        let version = release.version.clone();
        if release.kubernetes.min > release.kubernetes.max {
            return Err(inconsistent(
                F,
                format!("{version}: kubernetes min is above max"),
            ));
        }
        if let Some(d) = release
            .unconfirmed_drivers
            .iter()
            .find(|d| release.supports_driver(d))
        {
            return Err(inconsistent(
                F,
                format!("{version}: {d} is both validated and unconfirmed"),
            ));
        }
        if !release.unconfirmed_drivers.is_empty() && release.notes.is_empty() {
            return Err(inconsistent(
                F,
                format!("{version}: unconfirmed_drivers need a note saying why"),
            ));
        }
        log.row(format!("releases.{version}"), &release.source, release.read);
        if releases.insert(version.clone(), release).is_some() {
            return Err(inconsistent(F, format!("{version} is listed twice")));
        }
    }
    if releases.is_empty() {
        return Err(inconsistent(F, "no releases"));
    }
    Ok(releases)
}

/// The releases whose support was not captured: sourced, and none of them a release.
fn check_not_captured(
    not_captured: &[NotCaptured],
    releases: &BTreeMap<OperatorVersion, OperatorRelease>,
    log: &mut RowLog<'_>,
) -> Result<(), ProfileError> {
    const F: &str = OPERATOR_FILE;
    for missing in not_captured {
        require_source(F, "a not_captured entry", &missing.source)?;
        if let Some(v) = missing.versions.iter().find(|v| releases.contains_key(*v)) {
            return Err(inconsistent(
                F,
                format!("{v} is both a release and not_captured"),
            ));
        }
        let names: Vec<String> = missing.versions.iter().map(ToString::to_string).collect();
        log.row(
            format!("not_captured.{}", names.join(",")),
            &missing.source,
            missing.read,
        );
    }
    Ok(())
}

/// The operating-system lists: each sourced and consistent ([`check_os_support`]), and every
/// release's major covered by exactly one, which names no major without a release.
fn check_os_coverage(
    os_support: &[OsSupport],
    releases: &BTreeMap<OperatorVersion, OperatorRelease>,
    drivers: &BTreeMap<u32, DriverBranch>,
    sources: &mut Vec<(&'static str, String)>,
    log: &mut RowLog<'_>,
) -> Result<(), ProfileError> {
    const F: &str = OPERATOR_FILE;
    for os in os_support {
        let majors: Vec<String> = os
            .majors
            .iter()
            .map(|m| format!("{}.{}", m.major(), m.minor()))
            .collect();
        let what = format!("os_support {}", majors.join(","));
        sourced(sources, F, Some(&what), &os.source)?;
        log.row(
            format!("os_support.{}", majors.join(",")),
            &os.source,
            os.read,
        );
        check_os_support(&what, os, drivers).map_err(|m| inconsistent(F, m))?;
    }
    for version in releases.keys() {
        let covering = os_support
            .iter()
            .filter(|o| {
                o.majors
                    .iter()
                    .any(|m| m.minor_version() == version.minor_version())
            })
            .count();
        if covering != 1 {
            return Err(inconsistent(
                F,
                format!(
                    "{version}: {covering} os_support entries cover its major (need exactly one)"
                ),
            ));
        }
    }
    for os in os_support {
        for m in &os.majors {
            if !releases
                .keys()
                .any(|v| v.minor_version() == m.minor_version())
            {
                return Err(inconsistent(
                    F,
                    format!("os_support names major {m}, which has no release"),
                ));
            }
        }
    }
    Ok(())
}

/// One major's operating-system list: each system named once, with a version (or, for Red Hat
/// CoreOS, an OpenShift range), kernels and precompiled rows that parse, precompiled rows that
/// name a listed system and known driver branches.
fn check_os_support(
    what: &str,
    os: &OsSupport,
    drivers: &BTreeMap<u32, DriverBranch>,
) -> Result<(), String> {
    use super::common::kernel_major_minor as mm;
    if os.systems.is_empty() {
        return Err(format!("{what} lists no system"));
    }
    let mut seen = BTreeSet::new();
    for s in &os.systems {
        let label = s.label();
        match (&s.version, &s.openshift) {
            (Some(v), None) if mm(v).is_some() => {}
            (None, Some(r))
                if mm(&r.min).is_some_and(|min| mm(&r.max).is_some_and(|max| min <= max)) => {}
            _ => {
                return Err(format!(
                    "{what}: `{label}` needs either a major.minor `version` or an `openshift` range"
                ));
            }
        }
        if !seen.insert(label.clone()) {
            return Err(format!("{what}: `{label}` is listed twice"));
        }
        if let Some(k) = s.kernels.iter().find(|k| mm(k).is_none()) {
            return Err(format!("{what}: `{label}` kernel `{k}` is not major.minor"));
        }
    }
    for p in &os.precompiled {
        if os.system(&p.id, &p.version).is_none() || mm(&p.kernel).is_none() {
            return Err(format!(
                "{what}: precompiled `{} {}` kernel `{}` names no listed system or no kernel series",
                p.id, p.version, p.kernel
            ));
        }
        if let Some(b) = p.branches.iter().find(|b| !drivers.contains_key(b)) {
            return Err(format!(
                "{what}: precompiled branch R{b} is not in drivers.yaml"
            ));
        }
    }
    Ok(())
}
