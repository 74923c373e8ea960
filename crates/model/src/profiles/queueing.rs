//! Kueue and Volcano releases (`profiles/queueing.yaml`): which release lines gpuctl knows and
//! which API version each serves, so that a blueprint's `scheduling.kueue.version` or
//! `scheduling.volcano.version` is checked (GPU076 / GPU084) and render writes an API version the
//! declared release serves.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::common::FactRow;
use super::common::{PartialDate, TextList, text_list};
use super::{ProfileError, RowLog, inconsistent, sourced};
use super::{QUEUEING_FILE, Queueing};

/// The `kueue.x-k8s.io` versions gpuctl reads, newest first, for every command that lists Kueue's
/// objects: v1beta2 (served from Kueue v0.15) and v1beta1 (still served, deprecated, in v0.19.2);
/// the sources are `profiles/queueing.yaml`'s `kueue` section.
pub const KUEUE_API_VERSIONS: &[&str] = &["v1beta2", "v1beta1"];

/// [`KUEUE_API_VERSIONS`] for the kinds Kueue first served as v1alpha1 (Cohort, Topology), which a
/// cluster on an older Kueue may still serve only that way.
pub const KUEUE_API_VERSIONS_FROM_ALPHA: &[&str] = &["v1beta2", "v1beta1", "v1alpha1"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct QueueingFile {
    pub(super) source: TextList,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) kueue: QueueSystem,
    pub(super) volcano: QueueSystem,
    pub(super) kueue_configuration: KueueConfiguration,
    pub(super) composition: Composition,
    pub(super) volcano_hierarchy: VolcanoHierarchy,
    pub(super) volcano_release: VolcanoRelease,
    pub(super) scheduling_messages: SchedulingMessages,
    pub(super) multikueue: MultiKueueFacts,
}

/// What gpuctl renders for MultiKueue, as Kueue defines it (`multikueue` of the data file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiKueueFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Kueue's namespace (the kubeconfig Secrets of MultiKueueClusters live there).
    pub namespace: String,
    /// The MultiKueue admission-check controller name.
    pub controller_name: String,
    /// The rules of the ClusterRole the manager uses on each worker.
    pub worker_rules: Vec<PolicyRule>,
    /// Frameworks of kinds every Kubernetes cluster serves (no CRD): a manager may enable them
    /// whatever its workers enable (GPU195).
    pub builtin_frameworks: Vec<String>,
    /// Per framework name, the API group and resource of its kind on a worker.
    pub framework_resources: std::collections::BTreeMap<String, FrameworkResource>,
    /// What the worker's ClusterRole grants on each enabled framework's resource.
    pub job_verbs: Vec<String>,
    /// What it grants on the resource's `status`.
    pub status_verbs: Vec<String>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// A framework's kind as RBAC names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameworkResource {
    /// API group (`""`: the core group).
    pub group: String,
    /// Resource (the plural).
    pub resource: String,
}

/// One RBAC rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    /// API groups (`""`: the core group).
    pub api_groups: Vec<String>,
    /// Resources (`jobs`, `jobs/status`).
    pub resources: Vec<String>,
    /// Verbs.
    pub verbs: Vec<String>,
}

/// What Kueue and Volcano write on the objects the doctor reads, and the parts it tells causes
/// apart by (GPU206-GPU211), each read from a named release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulingMessages {
    /// Where these texts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Kueue's texts on a Workload's `QuotaReserved` condition.
    pub kueue: KueueMessages,
    /// Volcano's PodGroup phases and condition.
    pub volcano: VolcanoMessages,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// Kueue's words for why a workload is not admitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KueueMessages {
    /// The release these texts were read from.
    pub release: String,
    /// The workload's namespace is not selected by its ClusterQueue.
    pub namespace_mismatch: String,
    /// A requested resource the ClusterQueue does not cover; the name sits between the parts.
    pub resource_uncovered: Affixes,
    /// The queue's unused quota is too small now.
    pub quota_in_use: Vec<String>,
    /// The cohort cannot lend enough (older releases' wording).
    pub quota_in_use_cohort: Vec<String>,
    /// The request is more than the queue can ever give.
    pub request_above_quota: Vec<String>,
    /// The word before the resource name in a quota message.
    pub resource_after: String,
    /// Condition reason of a workload Kueue cannot consider at all.
    pub inadmissible_reason: String,
    /// The LocalQueue or ClusterQueue is missing, stopped or inactive.
    pub queue_unusable: Vec<String>,
    /// `ClusterQueue <name> not found`.
    pub queue_not_found: Affixes,
}

/// A text with a name between two parts (`resource cpu unavailable in ClusterQueue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Affixes {
    /// What comes before the name.
    pub before: String,
    /// What comes after it.
    pub after: String,
}

impl Affixes {
    /// The name `text` holds between the two parts (compared ignoring ASCII case, which keeps
    /// byte offsets: the message may hold any text), if it has them and the name is one word.
    pub fn name_in(&self, text: &str) -> Option<String> {
        let lower = text.to_ascii_lowercase();
        let end = lower.find(&self.after.to_ascii_lowercase())?;
        let start = lower[..end].rfind(&self.before.to_ascii_lowercase())? + self.before.len();
        let name = text.get(start..end)?;
        (!name.is_empty() && !name.contains(' ')).then(|| name.to_string())
    }

    /// Whether `text` is `before NAME after` and nothing more (ignoring ASCII case).
    pub fn whole(&self, text: &str) -> bool {
        let lower = text.to_ascii_lowercase();
        lower.len() > self.before.len() + self.after.len()
            && lower.starts_with(&self.before.to_ascii_lowercase())
            && lower.ends_with(&self.after.to_ascii_lowercase())
    }
}

impl KueueMessages {
    /// Whether `message` holds one of `texts` (ignoring ASCII case).
    pub fn says(message: &str, texts: &[String]) -> bool {
        let lower = message.to_ascii_lowercase();
        texts
            .iter()
            .any(|t| lower.contains(&t.to_ascii_lowercase()))
    }

    /// Problems in the table itself: an empty text would match every message.
    pub(super) fn check(&self) -> Result<(), String> {
        let all = [
            &self.namespace_mismatch,
            &self.resource_uncovered.after,
            &self.resource_after,
            &self.inadmissible_reason,
            &self.queue_not_found.after,
        ]
        .into_iter()
        .chain(&self.quota_in_use)
        .chain(&self.quota_in_use_cohort)
        .chain(&self.request_above_quota)
        .chain(&self.queue_unusable);
        for t in all {
            if t.trim().is_empty() {
                return Err(
                    "scheduling_messages.kueue: a text is empty and would match every message"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

/// Volcano's PodGroup phases and condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolcanoMessages {
    /// The release these names were read from.
    pub release: String,
    /// PodGroup phases in which a gang waits.
    pub waiting_phases: Vec<String>,
    /// The PodGroup condition that says it cannot be placed.
    pub unschedulable_condition: String,
}

/// Kueue's own Configuration: what `scheduling.kueue.config` may say, the chart's defaults, and
/// where a running Kueue keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KueueConfiguration {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// `config.kueue.x-k8s.io/v1beta2`.
    pub api_version: String,
    /// The manager's ConfigMap.
    pub config_map: ConfigMapKey,
    /// Dotted path of the chart value holding the Configuration text.
    pub chart_values_key: String,
    /// Where the chart is published.
    pub chart_reference: String,
    /// Kueue's chart per release gpuctl renders `managerConfig` values for.
    pub charts: Vec<KueueChart>,
    /// What gpuctl writes as `fairSharing.preemptionStrategies` when the blueprint names none
    /// (Kueue's v1beta2 Configuration requires a list and has no default).
    pub fair_sharing_default_strategies: Vec<String>,
    /// Accepted `fairSharing.preemptionStrategies` lists.
    pub fair_sharing_strategy_sets: Vec<Vec<String>>,
    /// Framework names `integrations.frameworks` accepts.
    pub frameworks: Vec<String>,
    /// The chart's Configuration, which the rendered one starts from.
    pub chart_defaults: serde_json::Value,
}

/// Kueue's Helm chart of one Kueue release, as read from the chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KueueChart {
    /// The Kueue release (`v0.19.2`).
    pub release: String,
    /// The chart's `version` (`0.19.2`): what helm installs, pins and lists.
    pub version: String,
    /// The chart's `appVersion`.
    pub app_version: String,
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
}

impl KueueConfiguration {
    /// The chart of Kueue release `version` (`v0.19.2` or `0.19.2`), if gpuctl knows it.
    pub fn chart(&self, version: &str) -> Option<&KueueChart> {
        let want = version.trim().trim_start_matches('v');
        self.charts
            .iter()
            .find(|c| c.release.trim_start_matches('v') == want)
    }

    /// The Kueue releases whose chart gpuctl knows, for messages (`v0.19.2`).
    pub fn chart_releases(&self) -> String {
        self.charts
            .iter()
            .map(|c| c.release.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Volcano's own Helm release (`scheduling.volcano.install: helm` or `gitops`): where its chart is
/// published, the release name and namespace, and the chart per Volcano release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolcanoRelease {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// The Helm repository Volcano publishes its chart in.
    pub chart_repository: String,
    /// The chart's name there (`volcano`).
    pub chart: String,
    /// Release name (`volcano`).
    pub release: String,
    /// Release namespace (`volcano-system`).
    pub namespace: String,
    /// Volcano's chart per release gpuctl installs.
    pub charts: Vec<VolcanoChart>,
}

/// Volcano's Helm chart of one Volcano release, as read from the chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolcanoChart {
    /// The Volcano release (`v1.15.1`).
    pub release: String,
    /// The chart's `version` (`1.15.1`): what helm installs, pins and lists.
    pub version: String,
    /// The chart's `appVersion`.
    pub app_version: String,
    /// The CRDs the chart installs (as templates: helm would delete them with the release).
    pub crds: Vec<String>,
    /// The top-level sections of the chart's values.yaml.
    pub values_sections: Vec<String>,
    /// The chart's hook Jobs (pre-install, pre-upgrade).
    #[serde(default)]
    pub hook_jobs: Vec<String>,
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
}

impl VolcanoRelease {
    /// The chart of Volcano release `version` (`v1.15.1` or `1.15.1`), if gpuctl knows it.
    pub fn chart_of(&self, version: &str) -> Option<&VolcanoChart> {
        let want = version.trim().trim_start_matches('v');
        self.charts
            .iter()
            .find(|c| c.release.trim_start_matches('v') == want)
    }

    /// The Volcano releases whose chart gpuctl knows, for messages (`v1.15.1`).
    pub fn chart_releases(&self) -> String {
        self.charts
            .iter()
            .map(|c| c.release.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Problems in the table itself.
    pub(super) fn check(&self) -> Result<(), String> {
        for c in &self.charts {
            if parse(&c.release).is_none() {
                return Err(format!(
                    "volcano_release.charts: `{}` is not a release",
                    c.release
                ));
            }
            if c.version.is_empty() || c.version.starts_with('v') {
                return Err(format!(
                    "volcano_release.charts {}: chart version `{}` is not a chart version (Volcano publishes it without `v`)",
                    c.release, c.version
                ));
            }
            if c.crds.is_empty() || c.source.iter().all(|s| s.trim().is_empty()) {
                return Err(format!(
                    "volcano_release.charts {} has no CRDs or no `source:`",
                    c.release
                ));
            }
        }
        Ok(())
    }
}

/// A key of a ConfigMap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigMapKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Data key.
    pub key: String,
}

/// How quotas and queues compose at admission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Composition {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// ResourceQuota keys that make the API server require a container value.
    pub keys_requiring_container_values: std::collections::BTreeMap<String, RequiredValue>,
    /// Caveats from the data file (what a re-read confirmed and what it could not).
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// The container value a ResourceQuota key requires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequiredValue {
    /// `requests` or `limits`.
    pub field: String,
    /// The resource (`cpu`).
    pub resource: String,
}

/// Volcano's hierarchical queues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolcanoHierarchy {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Path of the parent's name in a Queue manifest.
    pub parent_field: Vec<String>,
    /// The implicit top queue.
    pub implicit_root: String,
    /// Caveats from the data file (what a re-read confirmed and what it could not).
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl VolcanoHierarchy {
    /// The parent a Queue manifest names, unless it is the implicit root or absent.
    pub fn parent_of<'a>(&self, manifest: &'a serde_json::Value) -> Option<&'a str> {
        let mut v = manifest;
        for k in &self.parent_field {
            v = v.get(k)?;
        }
        v.as_str()
            .filter(|p| !p.is_empty() && *p != self.implicit_root)
    }
}

impl KueueConfiguration {
    /// Problems in the table itself.
    pub(super) fn check(&self) -> Result<(), String> {
        if !self.chart_defaults.is_object() {
            return Err("kueue_configuration.chart_defaults is not a mapping".into());
        }
        if !self
            .fair_sharing_strategy_sets
            .contains(&self.fair_sharing_default_strategies)
        {
            return Err(
                "kueue_configuration.fair_sharing_default_strategies is not an accepted strategy set"
                    .into(),
            );
        }
        for c in &self.charts {
            if parse(&c.release).is_none() {
                return Err(format!(
                    "kueue_configuration.charts: `{}` is not a release",
                    c.release
                ));
            }
            if c.version.is_empty() || c.version.starts_with('v') {
                return Err(format!(
                    "kueue_configuration.charts {}: chart version `{}` is not a chart version (Kueue publishes it without `v`)",
                    c.release, c.version
                ));
            }
            if c.source.iter().all(|s| s.trim().is_empty()) {
                return Err(format!(
                    "kueue_configuration.charts {} has no `source:`",
                    c.release
                ));
            }
        }
        Ok(())
    }
}

/// One queueing system's releases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSystem {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Display name (`Kueue`).
    pub name: String,
    /// API group of the objects gpuctl renders (`kueue.x-k8s.io`).
    pub group: String,
    /// The API version gpuctl's templates write (`v1beta2`).
    pub renders: String,
    /// First release with the quota check strategy `IgnoreUndeclared` (Kueue only).
    #[serde(default)]
    pub ignore_undeclared_since: Option<String>,
    /// Release lines, oldest first.
    pub releases: Vec<ReleaseLine>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// A release line (`v0.19`) and the API versions it serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseLine {
    /// `v<major>.<minor>`.
    pub line: String,
    /// Date of the line's first release, when known.
    #[serde(default)]
    pub released: Option<PartialDate>,
    /// The newest patch release of the line gpuctl knows; newer patches are refused until the
    /// table learns them. `None`: any patch of the line.
    #[serde(default)]
    pub newest_patch: Option<String>,
    /// API versions of [`QueueSystem::group`] the line serves.
    pub serves: Vec<String>,
}

/// Why a declared release cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseProblem {
    /// Not `v<major>.<minor>.<patch>`.
    Unparsable {
        /// The text as written.
        written: String,
    },
    /// A release line the table does not list, or a patch newer than the newest it knows.
    Unknown {
        /// The release as written.
        written: String,
        /// A close known release, if any.
        suggestion: Option<String>,
    },
    /// A known release that does not serve the API version gpuctl renders.
    NotServed {
        /// The release as written.
        written: String,
        /// What the release serves.
        serves: Vec<String>,
        /// The first line that serves what gpuctl renders.
        first: Option<String>,
    },
}

impl QueueSystem {
    /// `group/version` gpuctl renders, e.g. `kueue.x-k8s.io/v1beta2`.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.renders)
    }

    /// The release lines gpuctl can write for, for hints: `v0.15.x, ..., v0.19.x (up to v0.19.3)`.
    pub fn known(&self) -> String {
        self.renderable_lines()
            .map(|r| match &r.newest_patch {
                Some(p) => format!("{}.x (up to {p})", r.line),
                None => format!("{}.x", r.line),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The release line of `version` and its parsed form, or why it is not one.
    pub fn release(&self, version: &str) -> Result<&ReleaseLine, ReleaseProblem> {
        let written = version.to_string();
        let v = parse(version).ok_or_else(|| ReleaseProblem::Unparsable {
            written: written.clone(),
        })?;
        let unknown = || ReleaseProblem::Unknown {
            written: written.clone(),
            suggestion: self.suggest(&v),
        };
        let line = self
            .releases
            .iter()
            .find(|r| parse_line(&r.line) == Some((v.major, v.minor)))
            .ok_or_else(unknown)?;
        if let Some(newest) = line.newest_patch.as_deref().and_then(parse)
            && v > newest
        {
            return Err(unknown());
        }
        Ok(line)
    }

    /// The API version (`group/version`) gpuctl writes for `version`, or why it cannot.
    pub fn renderable(&self, version: &str) -> Result<String, ReleaseProblem> {
        let line = self.release(version)?;
        if !line.serves.contains(&self.renders) {
            return Err(ReleaseProblem::NotServed {
                written: version.to_string(),
                serves: line.serves.clone(),
                first: self
                    .releases
                    .iter()
                    .find(|r| r.serves.contains(&self.renders))
                    .map(|r| format!("{}.0", r.line)),
            });
        }
        Ok(self.api_version())
    }

    /// Whether `version` (known to parse) is at least `since` (`v0.18.0`).
    pub fn at_least(version: &str, since: &str) -> bool {
        matches!((parse(version), parse(since)), (Some(v), Some(s)) if v >= s)
    }

    /// The lines that serve the API version gpuctl writes.
    fn renderable_lines(&self) -> impl Iterator<Item = &ReleaseLine> {
        self.releases
            .iter()
            .filter(|r| r.serves.contains(&self.renders))
    }

    fn suggest(&self, v: &semver::Version) -> Option<String> {
        // The same line's newest patch, or the nearest line of the same major.
        let newest = |r: &ReleaseLine| {
            r.newest_patch
                .clone()
                .unwrap_or_else(|| format!("{}.0", r.line))
        };
        self.renderable_lines()
            .filter(|r| parse_line(&r.line).is_some_and(|(major, _)| major == v.major))
            .min_by_key(|r| parse_line(&r.line).map_or(u64::MAX, |(_, m)| m.abs_diff(v.minor)))
            .map(newest)
    }

    /// Problems in the table itself.
    pub(super) fn check(&self) -> Result<(), String> {
        let mut last = None;
        for r in &self.releases {
            let line = parse_line(&r.line).ok_or_else(|| {
                format!(
                    "{} release line `{}` is not `v<major>.<minor>`",
                    self.name, r.line
                )
            })?;
            if last.is_some_and(|l| l >= line) {
                return Err(format!(
                    "{} release lines are not in ascending order at `{}`",
                    self.name, r.line
                ));
            }
            last = Some(line);
            if let Some(p) = &r.newest_patch
                && parse(p).is_none_or(|v| (v.major, v.minor) != line)
            {
                return Err(format!(
                    "{} {}: newest_patch `{p}` is not a release of the line",
                    self.name, r.line
                ));
            }
            if r.serves.is_empty() {
                return Err(format!("{} {} serves no API version", self.name, r.line));
            }
        }
        if let Some(s) = &self.ignore_undeclared_since
            && parse(s).is_none()
        {
            return Err(format!(
                "{}: ignore_undeclared_since `{s}` is not a release",
                self.name
            ));
        }
        if !self
            .releases
            .iter()
            .any(|r| r.serves.contains(&self.renders))
        {
            return Err(format!("no {} release serves {}", self.name, self.renders));
        }
        Ok(())
    }
}

impl ReleaseProblem {
    /// The finding's message for `system` (`Kueue`).
    pub fn message(&self, system: &QueueSystem) -> String {
        let name = &system.name;
        match self {
            ReleaseProblem::Unparsable { written } => format!(
                "`{}` is not a {name} release version",
                crate::blueprint::yaml::shorten(written)
            ),
            ReleaseProblem::Unknown { written, .. } => {
                format!("{name} {written} is not a release gpuctl knows")
            }
            ReleaseProblem::NotServed {
                written, serves, ..
            } => format!(
                "{name} {written} serves {} only, but gpuctl writes {}",
                serves
                    .iter()
                    .map(|s| format!("{}/{s}", system.group))
                    .collect::<Vec<_>>()
                    .join(" and "),
                system.api_version()
            ),
        }
    }

    /// What to do.
    pub fn hint(&self, system: &QueueSystem) -> String {
        let known = system.known();
        match self {
            ReleaseProblem::Unparsable { .. } => format!(
                "write the release you run as `v<major>.<minor>.<patch>`; releases gpuctl writes for: {known}"
            ),
            ReleaseProblem::Unknown { suggestion, .. } => {
                let dym = suggestion
                    .as_ref()
                    .map_or_else(String::new, |s| format!("did you mean `{s}`? "));
                format!("{dym}releases gpuctl writes for: {known}")
            }
            ReleaseProblem::NotServed { first, .. } => match first {
                Some(first) => format!(
                    "upgrade {} to {first} or later (it serves {} from that release)",
                    system.name,
                    system.api_version()
                ),
                None => format!("releases gpuctl writes for: {known}"),
            },
        }
    }
}

impl fmt::Display for ReleaseLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.line)
    }
}

fn parse(v: &str) -> Option<semver::Version> {
    let t = v.trim();
    let t = t.strip_prefix('v').unwrap_or(t);
    semver::Version::parse(t).ok()
}

fn parse_line(line: &str) -> Option<(u64, u64)> {
    let (major, minor) = line.strip_prefix('v')?.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The MultiKueue facts agree with Kueue's framework list: every built-in is one of its names, and
/// every name has its kind in `framework_resources` (a worker's role is rendered from it).
fn check_multikueue(file: &QueueingFile) -> Result<(), ProfileError> {
    const F: &str = QUEUEING_FILE;
    if let Some(f) = file
        .multikueue
        .builtin_frameworks
        .iter()
        .find(|f| !file.kueue_configuration.frameworks.contains(f))
    {
        return Err(inconsistent(
            F,
            format!(
                "multikueue.builtin_frameworks names `{f}`, not one of kueue_configuration.frameworks"
            ),
        ));
    }
    if let Some(f) = file
        .kueue_configuration
        .frameworks
        .iter()
        .find(|f| !file.multikueue.framework_resources.contains_key(*f))
    {
        return Err(inconsistent(
            F,
            format!("multikueue.framework_resources has no entry for framework `{f}`"),
        ));
    }
    Ok(())
}

pub(super) fn load_queueing(
    file: QueueingFile,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<Queueing, ProfileError> {
    const F: &str = QUEUEING_FILE;
    sourced(sources, F, None, &file.source.0)?;
    for (name, system) in [("kueue", &file.kueue), ("volcano", &file.volcano)] {
        sourced(sources, F, Some(name), &system.source)?;
        system.check().map_err(|m| inconsistent(F, m))?;
    }
    sourced(
        sources,
        F,
        Some("kueue_configuration"),
        &file.kueue_configuration.source,
    )?;
    file.kueue_configuration
        .check()
        .map_err(|m| inconsistent(F, m))?;
    for c in &file.kueue_configuration.charts {
        sourced(
            sources,
            F,
            Some(&format!("kueue_configuration.charts.{}", c.release)),
            &c.source,
        )?;
    }
    sourced(
        sources,
        F,
        Some("volcano_release"),
        &file.volcano_release.source,
    )?;
    file.volcano_release
        .check()
        .map_err(|m| inconsistent(F, m))?;
    for c in &file.volcano_release.charts {
        sourced(
            sources,
            F,
            Some(&format!("volcano_release.charts.{}", c.release)),
            &c.source,
        )?;
    }
    sourced(sources, F, Some("composition"), &file.composition.source)?;
    sourced(
        sources,
        F,
        Some("volcano_hierarchy"),
        &file.volcano_hierarchy.source,
    )?;
    sourced(
        sources,
        F,
        Some("scheduling_messages"),
        &file.scheduling_messages.source,
    )?;
    file.scheduling_messages
        .kueue
        .check()
        .map_err(|m| inconsistent(F, m))?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    log.row("kueue", &file.kueue.source, file.kueue.read);
    log.row("volcano", &file.volcano.source, file.volcano.read);
    log.row(
        "kueue_configuration",
        &file.kueue_configuration.source,
        file.kueue_configuration.read,
    );
    log.row(
        "volcano_release",
        &file.volcano_release.source,
        file.volcano_release.read,
    );
    log.row(
        "composition",
        &file.composition.source,
        file.composition.read,
    );
    log.row(
        "volcano_hierarchy",
        &file.volcano_hierarchy.source,
        file.volcano_hierarchy.read,
    );
    log.row(
        "scheduling_messages",
        &file.scheduling_messages.source,
        file.scheduling_messages.read,
    );
    sourced(sources, F, Some("multikueue"), &file.multikueue.source)?;
    check_multikueue(&file)?;
    log.row("multikueue", &file.multikueue.source, file.multikueue.read);
    Ok(Queueing {
        kueue: file.kueue,
        volcano: file.volcano,
        kueue_configuration: file.kueue_configuration,
        composition: file.composition,
        volcano_hierarchy: file.volcano_hierarchy,
        volcano_release: file.volcano_release,
        messages: file.scheduling_messages,
        multikueue: file.multikueue,
    })
}

#[cfg(test)]
mod tests {
    use crate::profiles::Catalog;

    /// Kueue's chart version per Kueue release, as read from the chart; releases whose chart
    /// gpuctl does not know have none.
    #[test]
    fn kueue_chart_version_per_release() {
        let k = &Catalog::embedded().queueing().kueue_configuration;
        for (release, want) in [
            ("v0.19.2", Some(("0.19.2", "v0.19.2"))),
            ("0.19.2", Some(("0.19.2", "v0.19.2"))),
            (" v0.19.2 ", Some(("0.19.2", "v0.19.2"))),
            ("v0.19.1", None),
            ("v0.18.6", None),
            ("", None),
        ] {
            let got = k
                .chart(release)
                .map(|c| (c.version.as_str(), c.app_version.as_str()));
            assert_eq!(got, want, "{release:?}");
        }
        assert_eq!(k.chart_releases(), "v0.19.2");
    }

    /// Volcano's chart per Volcano release, as read from the chart; releases whose chart gpuctl
    /// does not know have none; the table's own checks.
    #[test]
    fn volcano_chart_per_release() {
        let v = &Catalog::embedded().queueing().volcano_release;
        assert_eq!(v.check(), Ok(()));
        for (release, want) in [
            ("v1.15.1", Some("1.15.1")),
            ("1.15.1", Some("1.15.1")),
            (" v1.15.1 ", Some("1.15.1")),
            ("v1.14.4", None),
            ("", None),
        ] {
            let got = v.chart_of(release).map(|c| c.version.as_str());
            assert_eq!(got, want, "{release:?}");
        }
        assert_eq!(v.chart_releases(), "v1.15.1");
        assert_eq!(
            (v.release.as_str(), v.namespace.as_str()),
            ("volcano", "volcano-system")
        );
        for (edit, want) in [
            (
                (|c: &mut super::VolcanoChart| c.version = "v1.15.1".into()) as fn(&mut _),
                "is not a chart version",
            ),
            (|c| c.release = "latest".into(), "is not a release"),
            (|c| c.crds.clear(), "no CRDs"),
        ] {
            let mut bad = v.clone();
            edit(&mut bad.charts[0]);
            assert!(bad.check().unwrap_err().contains(want), "{want}");
        }
    }

    /// A chart row with a `v` in its version, an unparsable release or no source is refused.
    #[test]
    fn kueue_chart_facts_are_checked_when_loaded() {
        let k = Catalog::embedded().queueing().kueue_configuration.clone();
        assert_eq!(k.check(), Ok(()));
        for (what, edit, want) in [
            (
                "version with v",
                (|c: &mut super::KueueChart| c.version = "v0.19.2".into()) as fn(&mut _),
                "is not a chart version",
            ),
            (
                "bad release",
                |c| c.release = "latest".into(),
                "is not a release",
            ),
            (
                "no source",
                |c| c.source = vec![String::new()],
                "has no `source:`",
            ),
        ] {
            let mut bad = k.clone();
            edit(&mut bad.charts[0]);
            let err = bad.check().unwrap_err();
            assert!(err.contains(want), "{what}: {err}");
        }
    }

    use super::ReleaseProblem;

    #[test]
    fn kueue_releases_map_to_the_api_version_they_serve() {
        let k = &Catalog::embedded().queueing().kueue;
        for (version, want) in [
            ("v0.19.2", Ok("kueue.x-k8s.io/v1beta2")),
            // Released 2026-09-03: refused as unknown before the re-read of 2026-12-03.
            ("v0.19.3", Ok("kueue.x-k8s.io/v1beta2")),
            ("v0.18.8", Ok("kueue.x-k8s.io/v1beta2")),
            ("v0.18.9", Err("not a release gpuctl knows")),
            ("0.19.0", Ok("kueue.x-k8s.io/v1beta2")),
            ("v0.15.0", Ok("kueue.x-k8s.io/v1beta2")),
            ("v0.16.3", Ok("kueue.x-k8s.io/v1beta2")),
            ("v0.13.0", Err("serves")),
            ("v0.14.6", Err("serves")),
            ("0.13", Err("not a Kueue release version")),
            ("banana", Err("not a Kueue release version")),
            ("v0.19.9", Err("not a release gpuctl knows")),
            ("v0.12.0", Err("not a release gpuctl knows")),
            ("v1.0.0", Err("not a release gpuctl knows")),
        ] {
            let got = k.renderable(version).map_err(|p| p.message(k));
            match (got, want) {
                (Ok(api), Ok(w)) => assert_eq!(api, w, "{version}"),
                (Err(m), Err(w)) => assert!(m.contains(w), "{version}: {m}"),
                (got, want) => panic!("{version}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn problems_point_at_a_release_that_works() {
        let k = &Catalog::embedded().queueing().kueue;
        let p = k.renderable("v0.13.0").unwrap_err();
        assert!(matches!(p, ReleaseProblem::NotServed { .. }));
        assert!(p.hint(k).contains("v0.15.0 or later"), "{}", p.hint(k));
        let p = k.renderable("v0.19.9").unwrap_err();
        assert!(
            p.hint(k).contains("did you mean `v0.19.3`?"),
            "{}",
            p.hint(k)
        );
        // Hints offer only releases gpuctl can write for.
        assert!(p.hint(k).contains("v0.15.x"), "{}", p.hint(k));
        assert!(
            !p.hint(k).contains("v0.13") && !p.hint(k).contains("v0.14"),
            "{}",
            p.hint(k)
        );
        let p = k.renderable("v0.12.0").unwrap_err();
        assert!(
            p.hint(k).contains("did you mean `v0.15.0`?"),
            "{}",
            p.hint(k)
        );
        let v = &Catalog::embedded().queueing().volcano;
        assert_eq!(
            v.renderable("v1.15.1").unwrap(),
            "scheduling.volcano.sh/v1beta1"
        );
        let p = v.renderable("v1.51.0").unwrap_err();
        assert!(p.message(v).contains("Volcano v1.51.0"), "{}", p.message(v));
    }
}
