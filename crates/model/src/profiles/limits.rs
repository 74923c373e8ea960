//! Limits enforced by the Kubernetes API server, Kueue, Volcano and the GPU stack
//! (`profiles/limits.yaml`), so that validation rejects what apply would.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::LIMITS_FILE;
use super::common::{FactRow, PartialDate, text_list};
use super::{ProfileError, RowLog, inconsistent, push_sources, require_source};

/// All limits, by the component that enforces them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Where the file's facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Kubernetes object-name limits.
    pub kubernetes_names: KubernetesNameLimits,
    /// PriorityClass limits.
    pub priority_class: PriorityClassLimits,
    /// ResourceQuota / LimitRange rules for extended resources.
    pub resource_quota: ResourceQuotaLimits,
    /// Node labels gpuctl must not write.
    pub node_labels: NodeLabelLimits,
    /// Kueue `v1beta2` limits.
    pub kueue: KueueLimits,
    /// Volcano queue limits.
    pub volcano: VolcanoLimits,
    /// Counts a node pool can have.
    pub node_pools: NodePoolLimits,
    /// NVIDIA device-plugin sharing limits.
    pub device_plugin: DevicePluginLimits,
    /// dcgm-exporter limits.
    pub dcgm_exporter: DcgmExporterLimits,
    /// Fields the API server refuses to change on an existing object.
    pub immutable_fields: ImmutableFields,
    /// Overlays and fleets: how deep `extends` chains go, how many MultiKueue workers.
    pub fleet: FleetLimits,
}

/// Overlay and fleet limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Most parents an `extends` chain may have (4: a base, a region, an environment, a cluster).
    pub max_extends_depth: usize,
    /// Most worker clusters one MultiKueueConfig may list (Kueue: `spec.clusters` maxItems 20).
    pub multikueue_max_workers: usize,
    /// Most clusters one fleet file may name.
    pub max_clusters: usize,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// Fields the API server refuses to change on an existing object, per kind gpuctl renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImmutableFields {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Per kind.
    pub kinds: Vec<ImmutableKind>,
}

/// The immutable fields of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImmutableKind {
    /// API group (`""` for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Dotted field paths (`spec.clusterQueue`); everything under one is immutable too.
    pub paths: Vec<String>,
    /// Immutable only when the live object has this field (ResourceFlavor: `spec.topologyName`).
    #[serde(default)]
    pub when_live_has: Option<String>,
}

impl ImmutableFields {
    /// The immutable paths of `group`/`kind` on `live` (empty: none).
    pub fn paths_of(&self, group: &str, kind: &str, live: &serde_json::Value) -> Vec<&str> {
        self.kinds
            .iter()
            .filter(|k| k.group == group && k.kind == kind)
            .filter(|k| {
                k.when_live_has.as_deref().is_none_or(|p| {
                    p.split('.')
                        .try_fold(live, |v, part| v.get(part))
                        .is_some_and(|v| !v.is_null())
                })
            })
            .flat_map(|k| k.paths.iter().map(String::as_str))
            .collect()
    }
}

/// Kubernetes name limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesNameLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Longest DNS-1123 label (63).
    pub dns1123_label_max_length: usize,
    /// Longest DNS-1123 subdomain (253).
    pub dns1123_subdomain_max_length: usize,
    /// Longest name part of a label key (63).
    pub label_name_max_length: usize,
    /// Longest label value (63).
    pub label_value_max_length: usize,
    /// Kinds whose names must be DNS-1123 labels.
    pub label_names: Vec<String>,
    /// Kinds whose names must be DNS-1123 subdomains.
    pub subdomain_names: Vec<String>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// PriorityClass limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityClassLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Highest value of a user-defined class (1000000000).
    pub max_user_value: i64,
    /// Lowest value (int32 minimum).
    pub min_value: i64,
    /// Name prefix reserved for system classes (`system-`).
    pub reserved_name_prefix: String,
    /// The built-in system classes and their values.
    pub system_classes: BTreeMap<String, i64>,
    /// How many classes may be `globalDefault` (1).
    pub max_global_defaults: u32,
    /// Fields that cannot change after creation.
    pub immutable_fields: Vec<String>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// ResourceQuota and LimitRange rules for extended resources such as `nvidia.com/gpu`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceQuotaLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Quota keys without a `/` that the API server accepts (`cpu`, `requests.memory`, `pods`, ...).
    pub standard_keys: Vec<String>,
    /// Prefixes that also make a `/`-less key standard (hugepages forms).
    pub standard_key_prefixes: Vec<String>,
    /// The only quota-key prefix the API server enforces for extended resources (`requests.`).
    pub extended_resource_quota_prefix: String,
    /// Prefix of object count quota keys (`count/`), written as is.
    pub object_count_prefix: String,
    /// Quota key forms that are accepted but never enforced.
    pub unenforced_extended_forms: Vec<String>,
    /// Extended-resource quantities must be whole numbers.
    pub extended_resources_integer_only: bool,
    /// LimitRange `default` must equal `defaultRequest` for extended resources.
    pub limit_range_extended_default_equals_default_request: bool,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl ResourceQuotaLimits {
    /// Whether a quota key without a `/` is one the API server accepts.
    pub fn is_standard_key(&self, key: &str) -> bool {
        self.standard_keys.iter().any(|k| k == key)
            || self
                .standard_key_prefixes
                .iter()
                .any(|p| key.starts_with(p.as_str()))
    }
}

/// Node labels owned by the GPU Operator, GPU Feature Discovery and Node Feature Discovery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeLabelLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// A label key starting with one of these is written by the operator or discovery, never by
    /// gpuctl.
    pub operator_owned_prefixes: Vec<String>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl NodeLabelLimits {
    /// Whether the operator or feature discovery owns this label key.
    pub fn is_operator_owned(&self, key: &str) -> bool {
        self.operator_owned_prefixes
            .iter()
            .any(|p| key.starts_with(p.as_str()))
    }
}

/// Kueue `v1beta2` API limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KueueLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// The API version the limits are read from.
    pub api_version: String,
    /// Resource groups per ClusterQueue (16).
    pub max_resource_groups: usize,
    /// Covered resources per resource group (64).
    pub max_covered_resources_per_group: usize,
    /// Flavors per resource group (64).
    pub max_flavors_per_group: usize,
    /// Resources per flavor of a group (64).
    pub max_resources_per_flavor: usize,
    /// Flavors across all groups of a ClusterQueue (256).
    pub max_flavors_total: usize,
    /// Covered resources across all groups of a ClusterQueue (256).
    pub max_covered_resources_total: usize,
    /// Flavor x resource entries per group (512).
    pub max_flavor_resources_per_group: usize,
    /// Resource groups per Cohort (16).
    pub max_cohort_resource_groups: usize,
    /// Admission checks per ClusterQueue (64).
    pub max_admission_checks: usize,
    /// ResourceFlavor `nodeLabels` entries (8).
    pub max_flavor_node_labels: usize,
    /// ResourceFlavor `nodeTaints` entries (8).
    pub max_flavor_node_taints: usize,
    /// ResourceFlavor `tolerations` entries (8).
    pub max_flavor_tolerations: usize,
    /// Topology levels (16).
    pub max_topology_levels: usize,
    /// Cohort hierarchy depth; `None`: Kueue enforces no depth (cycles disable their members).
    pub max_cohort_depth: Option<usize>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// Volcano queue limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolcanoLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Lowest queue weight (1).
    pub min_queue_weight: u32,
    /// Highest queue weight (65535).
    pub max_queue_weight: u32,
    /// Weight a queue gets when none is set (1).
    pub default_queue_weight: u32,
    /// Deepest queue hierarchy (default of `--max-queue-depth`, 5).
    pub max_queue_depth: usize,
    /// Queues the scheduler creates itself and that cannot be deleted.
    pub reserved_queues: Vec<String>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// Counts a node pool can have: checked before anything is allocated or multiplied from them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePoolLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Most GPUs the NVIDIA driver supports in one system (32).
    pub max_gpus_per_node: u32,
    /// Most nodes in one Kubernetes cluster (5,000).
    pub max_nodes_per_cluster: u32,
    /// Most time-slicing or MPS replicas per GPU gpuctl accepts (1,024).
    pub max_sharing_replicas: u32,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// NVIDIA device-plugin limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevicePluginLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Fewest replicas of a time-sliced or MPS-shared GPU (2).
    pub min_sharing_replicas: u32,
    /// Caveats from the data file (what a re-read confirmed and what it could not).
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// dcgm-exporter limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DcgmExporterLimits {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When the facts were last read against their sources (`gpuctl profiles --stale-after`).
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Shortest collection interval in milliseconds (100).
    pub min_collect_interval_ms: u64,
    /// The exporter's default collection interval in milliseconds (30000).
    pub default_collect_interval_ms: u64,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

pub(super) fn load_limits(
    limits: &Limits,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<(), ProfileError> {
    const F: &str = LIMITS_FILE;
    require_source(F, "the file", &limits.source)?;
    push_sources(sources, F, None, &limits.source);
    let sections: [(&str, &[String], Option<PartialDate>); 11] = [
        (
            "kubernetes_names",
            &limits.kubernetes_names.source,
            limits.kubernetes_names.read,
        ),
        (
            "priority_class",
            &limits.priority_class.source,
            limits.priority_class.read,
        ),
        (
            "resource_quota",
            &limits.resource_quota.source,
            limits.resource_quota.read,
        ),
        (
            "node_labels",
            &limits.node_labels.source,
            limits.node_labels.read,
        ),
        ("kueue", &limits.kueue.source, limits.kueue.read),
        ("volcano", &limits.volcano.source, limits.volcano.read),
        (
            "node_pools",
            &limits.node_pools.source,
            limits.node_pools.read,
        ),
        (
            "device_plugin",
            &limits.device_plugin.source,
            limits.device_plugin.read,
        ),
        (
            "dcgm_exporter",
            &limits.dcgm_exporter.source,
            limits.dcgm_exporter.read,
        ),
        (
            "immutable_fields",
            &limits.immutable_fields.source,
            limits.immutable_fields.read,
        ),
        ("fleet", &limits.fleet.source, limits.fleet.read),
    ];
    let mut log = RowLog::new(rows, F, &limits.source, limits.read);
    for (name, list, read) in sections {
        require_source(F, name, list)?;
        push_sources(sources, F, Some(name), list);
        log.row(name, list, read);
    }
    let volcano = &limits.volcano;
    if volcano.min_queue_weight > volcano.max_queue_weight
        || !(volcano.min_queue_weight..=volcano.max_queue_weight)
            .contains(&volcano.default_queue_weight)
    {
        return Err(inconsistent(F, "volcano queue weights are out of order"));
    }
    if limits.priority_class.min_value > limits.priority_class.max_user_value {
        return Err(inconsistent(
            F,
            "priority_class min_value is above max_user_value",
        ));
    }
    Ok(())
}
