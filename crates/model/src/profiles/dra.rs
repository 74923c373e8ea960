//! Dynamic Resource Allocation facts (`profiles/dra.yaml`): the `resource.k8s.io` API and its
//! feature gates per Kubernetes minor, the quota keys and limits the API server applies, what
//! NVIDIA's DRA driver publishes and requires per release (its chart was renamed and its versions
//! changed scheme with its move to kubernetes-sigs, so releases are ordered by the table, not by
//! comparing numbers), the GPU Operator's GPUCluster, and the claim forms Kueue cannot admit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::DRA_FILE;
use super::common::{PartialDate, TextList, text_list};
use super::{FactRow, ProfileError, RowLog, inconsistent, sourced};
use crate::version::KubeVersion;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DraFile {
    pub(super) source: TextList,
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) kubernetes: KubernetesDra,
    pub(super) driver: DriverFacts,
    pub(super) standalone: StandaloneFacts,
    pub(super) gpu_operator: OperatorDra,
    pub(super) kueue: KueueDra,
    pub(super) shapes: ShapeFacts,
}

/// All DRA facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DraFacts {
    /// What Kubernetes serves, gates and enforces.
    pub kubernetes: KubernetesDra,
    /// NVIDIA's DRA driver.
    pub driver: DriverFacts,
    /// The ClusterPolicy + standalone DRA chart path.
    pub standalone: StandaloneFacts,
    /// The GPU Operator's DRA deployment (GPUCluster).
    pub gpu_operator: OperatorDra,
    /// Kueue's DRA integration.
    pub kueue: KueueDra,
    /// Claim shapes beyond one kind of whole device: alternatives, shares, partitions.
    pub shapes: ShapeFacts,
}

/// Claim shapes beyond one kind of whole device (`spec.dra.shapes[].firstAvailable`,
/// `memoryShare`, MIG shapes under DynamicMIG): the gates that keep their fields, what quota
/// charges them, and what the queue backends do with them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// `firstAvailable` subrequests.
    pub first_available: FirstAvailableFacts,
    /// Consumable capacity (a share of a device's capacity).
    pub consumable_capacity: ConsumableCapacityFacts,
    /// Partitionable devices (counters; NVIDIA's DynamicMIG).
    pub partitionable: PartitionableFacts,
}

/// `spec.devices.requests[].firstAvailable`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirstAvailableFacts {
    /// The Kubernetes gate that keeps the field (a kubernetes.gates entry).
    pub gate: String,
    /// Most subrequests one request may list.
    pub max_alternatives: u32,
    /// What ResourceQuota charges a claim with subrequests.
    pub quota_charge: String,
    /// What Volcano's queue does with such a claim.
    pub volcano: String,
}

/// `spec.devices.requests[].exactly.capacity.requests`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumableCapacityFacts {
    /// The Kubernetes gate that keeps the field (a kubernetes.gates entry).
    pub gate: String,
    /// The device capacity a share is taken from (as NVIDIA's driver publishes it on `gpu` devices).
    pub capacity: String,
    /// Kueue's gate for charging the capacity, and whether it is on by default in the release
    /// gpuctl targets; without it Kueue charges each device of the request in full.
    pub kueue_gate: String,
    /// Whether `kueue_gate` is on by default (v0.19.2: alpha, off).
    pub kueue_gate_on: bool,
}

/// Partitionable devices (KEP-4815).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionableFacts {
    /// The Kubernetes gate (a kubernetes.gates entry).
    pub gate: String,
    /// The gate of NVIDIA's DRA driver that publishes MIG partitions with counters.
    pub driver_gate: String,
    /// Kueue's gate for charging counters (needs `sources.counter` in the class's mapping).
    pub kueue_gate: String,
}

/// NVIDIA's DRA driver chart next to a ClusterPolicy: release, node labels, the values gpuctl
/// renders, the rename of v0.4.0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandaloneFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Helm release name.
    pub release: String,
    /// Namespace of the release.
    pub namespace: String,
    /// Helm repository of the charts before the rename.
    pub calver_chart_repository: String,
    /// Node label the kubelet plugin's nodeSelector names.
    pub pool_label: String,
    /// The GPU Operator's per-node device-plugin switch.
    pub device_plugin_label: String,
    /// The driver manager's variable naming the DRA nodes' label.
    pub driver_manager_eviction_env: String,
    /// The release that renamed the chart.
    pub renamed_in: String,
    /// `nameOverride` of the first upgrade across the rename.
    pub name_override: String,
    /// The chart values gpuctl renders.
    pub values: StandaloneValues,
    /// Releases whose values tree is stored in shared/upstream.
    pub values_tree_in_shared: Vec<String>,
}

/// Dotted paths of the chart values gpuctl renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandaloneValues {
    /// The guard against both plugins on one node.
    pub gpu_resources_override: String,
    /// GPU allocation on or off.
    pub gpus_enabled: String,
    /// Compute domains on or off.
    pub compute_domains_enabled: String,
    /// The driver's feature gates.
    pub feature_gates: String,
    /// The kubelet plugin's nodeSelector.
    pub kubelet_plugin_node_selector: String,
    /// The chart's name override.
    pub name_override: String,
}

impl StandaloneFacts {
    /// Every value path gpuctl renders.
    pub fn rendered_paths(&self) -> Vec<&str> {
        let v = &self.values;
        vec![
            &v.gpu_resources_override,
            &v.gpus_enabled,
            &v.compute_domains_enabled,
            &v.feature_gates,
            &v.kubelet_plugin_node_selector,
            &v.name_override,
        ]
    }
}

/// A feature gate's stage, and so its default, in one release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateStage {
    /// Alpha: off unless turned on.
    Alpha,
    /// Beta, on by default.
    BetaOn,
    /// Beta, off by default.
    BetaOff,
    /// Generally available: on.
    Ga,
    /// Generally available and locked on.
    GaLocked,
}

impl GateStage {
    /// Whether the gate is on when nobody sets it.
    pub fn on_by_default(self) -> bool {
        matches!(
            self,
            GateStage::BetaOn | GateStage::Ga | GateStage::GaLocked
        )
    }
}

/// Kubernetes' DRA API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesDra {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// The API version gpuctl writes (`resource.k8s.io/v1`).
    pub api_version: String,
    /// The first minor (`1.34`) that serves it by default.
    pub v1_from: String,
    /// The DRA feature gates, per minor.
    pub gates: Vec<KubeGate>,
    /// ResourceQuota keys for claims.
    pub quota: DraQuota,
    /// Size limits of slices, devices and allocations.
    pub limits: DraLimits,
    /// The namespace label that allows admin access.
    pub admin_access_namespace_label: String,
    /// Kinds whose whole `spec` is immutable.
    pub immutable_specs: Vec<String>,
    /// The gate that keeps `DeviceClass.spec.extendedResourceName` (KEP-5004: DRA serves a pod's
    /// plain extended-resource request, and claims of the class are charged `requests.<name>`).
    pub extended_resource_gate: String,
    /// Device taints (KEP-5055): the gates and the API of DeviceTaintRule.
    pub device_taints: DeviceTaintFacts,
}

/// Device taints (KEP-5055) as the declared Kubernetes serves them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceTaintFacts {
    /// Taints in ResourceSlices and tolerations in claims (`DRADeviceTaints`).
    pub gate: String,
    /// DeviceTaintRule objects (`DRADeviceTaintRules`).
    pub rule_gate: String,
    /// The API version that serves DeviceTaintRule per minor (`1.36`: `resource.k8s.io/v1beta2`).
    pub rule_api_versions: BTreeMap<String, String>,
    /// Which API group versions must be enabled on the API server for it (off-by-default beta).
    pub rule_runtime_config: BTreeMap<String, String>,
    /// Taint effects the scheduler honours (`NoSchedule`, `NoExecute`, `None`).
    pub effects: Vec<String>,
    /// The taint key NVIDIA's DRA driver's health check puts on a device that reported an Xid
    /// (`gpu.nvidia.com/xid`, the Xid as its value).
    pub xid_taint_key: String,
}

impl DeviceTaintFacts {
    /// The API version of DeviceTaintRule on Kubernetes `version`, if that minor serves it.
    pub fn rule_api_version(&self, version: &str) -> Option<&str> {
        let minor = minor_of(version)?;
        self.rule_api_versions
            .iter()
            .find(|(m, _)| minor_of(m) == Some(minor))
            .map(|(_, v)| v.as_str())
    }
}

/// One Kubernetes feature gate of DRA.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeGate {
    /// Gate name (`DRAExtendedResource`).
    pub name: String,
    /// The fields or behaviour it guards.
    pub guards: String,
    /// Its stage per minor (`1.35`); a minor missing here does not have the gate.
    pub stages: BTreeMap<String, GateStage>,
}

/// ResourceQuota keys for DRA.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraQuota {
    /// `.deviceclass.resource.k8s.io/devices`, after the class name.
    pub devices_key_suffix: String,
    /// `count/resourceclaims.resource.k8s.io`.
    pub claims_count_key: String,
    /// Devices one `allocationMode: All` request is charged.
    pub all_mode_charge: u32,
    /// Caveats.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl DraQuota {
    /// The device class a quota key counts devices of (`gpu.nvidia.com` for
    /// `gpu.nvidia.com.deviceclass.resource.k8s.io/devices`); `None` for any other key.
    pub fn class_of_key<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_suffix(self.devices_key_suffix.as_str())
            .filter(|class| !class.is_empty())
    }

    /// The quota key that counts devices of `class`.
    pub fn key_for_class(&self, class: &str) -> String {
        format!("{class}{}", self.devices_key_suffix)
    }
}

/// Size limits of the `resource.k8s.io/v1` API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraLimits {
    /// Devices in one ResourceSlice.
    pub max_devices_per_slice: u32,
    /// The same when devices carry taints or counters.
    pub max_devices_per_slice_with_taints_or_counters: u32,
    /// Attributes and capacities of one device together.
    pub max_attributes_and_capacities_per_device: u32,
    /// Devices one claim can be allocated.
    pub max_allocation_results: u32,
}

impl KubernetesDra {
    /// The stage of `gate` on Kubernetes `version` (`1.35` or `1.35.4`, with or without `v`);
    /// `None` when the minor or the gate is not in the table.
    pub fn gate(&self, gate: &str, version: &str) -> Option<GateStage> {
        let minor = minor_of(version)?;
        let g = self.gates.iter().find(|g| g.name == gate)?;
        g.stages
            .iter()
            .find(|(m, _)| minor_of(m) == Some(minor))
            .map(|(_, stage)| *stage)
    }

    /// Whether Kubernetes `version` serves [`KubernetesDra::api_version`] by default.
    pub fn serves_v1(&self, version: &str) -> bool {
        matches!((minor_of(version), minor_of(&self.v1_from)), (Some(v), Some(from)) if v >= from)
    }

    /// The minors the table knows, oldest first.
    pub fn minors(&self) -> Vec<String> {
        let mut all: Vec<(u64, u64)> = self
            .gates
            .iter()
            .flat_map(|g| g.stages.keys().filter_map(|m| minor_of(m)))
            .collect();
        all.sort_unstable();
        all.dedup();
        all.into_iter().map(|(a, b)| format!("{a}.{b}")).collect()
    }
}

/// `(major, minor)` of `1.35`, `1.35.4` or `v1.35.4`, read as the blueprint reads a Kubernetes
/// version ([`KubeVersion`]).
fn minor_of(version: &str) -> Option<(u64, u64)> {
    version
        .parse::<KubeVersion>()
        .ok()
        .map(|v| v.minor_version())
}

/// NVIDIA's DRA driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// Releases in upgrade order, oldest first.
    pub releases: Vec<DriverRelease>,
    /// What the driver needs.
    pub prerequisites: DraPrerequisites,
    /// The driver's own feature gates.
    pub gates: Vec<DriverGate>,
    /// The DeviceClasses its chart creates.
    pub device_classes: Vec<DeviceClassFact>,
    /// What each device type publishes.
    pub device_types: Vec<DeviceType>,
    /// ComputeDomains.
    pub compute_domains: ComputeDomainFacts,
    /// Attributes a release stopped publishing.
    pub removed_attributes: Vec<RemovedAttribute>,
}

/// ComputeDomains: the resource, its channel class and the NVLink-domain node label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeDomainFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// API group (`resource.nvidia.com`).
    pub group: String,
    /// Resource (plural) name (`computedomains`).
    pub resource: String,
    /// The class of the channel claims (`compute-domain-default-channel.nvidia.com`).
    pub channel_class: String,
    /// The node label naming a node's NVLink domain (`nvidia.com/gpu.clique`).
    pub clique_label: String,
    /// GPU models (profiles/gpus.yaml keys) whose GPUs are attached to an NVLink fabric across
    /// nodes (NVL72 racks): GPU Feature Discovery sets the clique label only on such GPUs.
    pub fabric_attached_models: Vec<String>,
}

impl ComputeDomainFacts {
    /// The object-count quota key (`count/computedomains.resource.nvidia.com`).
    pub fn quota_key(&self, count_prefix: &str) -> String {
        format!("{count_prefix}{}.{}", self.resource, self.group)
    }
}

/// One release of the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverRelease {
    /// Tag (`v25.12.0`, `v0.4.0`).
    pub version: String,
    /// Release date.
    pub released: PartialDate,
    /// Its Helm chart's name.
    pub chart: String,
    /// Where the chart is published, when a source names it.
    #[serde(default)]
    pub chart_repository: Option<String>,
    /// The driver image.
    pub image: String,
    /// What an upgrade to it from an older release must do.
    #[serde(default)]
    pub upgrade_from_older: Option<String>,
}

/// The direction of a change from one driver release to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upgrade {
    /// To a later release: supported.
    Forward,
    /// The same release.
    Same,
    /// To an earlier release: not supported by the driver.
    Backward,
}

/// What the driver needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraPrerequisites {
    /// The oldest Kubernetes (`1.34.2`).
    pub kubernetes: String,
    /// The oldest NVIDIA driver branch for GPUs and MIG devices.
    pub gpu_driver_branch: u32,
    /// The oldest NVIDIA driver for ComputeDomains.
    pub compute_domain_driver: String,
}

/// One feature gate of the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverGate {
    /// Gate name.
    pub name: String,
    /// The release that added it.
    pub since: String,
    /// Its stage.
    pub stage: GateStage,
    /// Gates it may not be on with.
    #[serde(default)]
    pub excludes: Vec<String>,
    /// Gates it needs on.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Kubernetes gates it needs on (before they are on by default).
    #[serde(default)]
    pub kubernetes_gates: Vec<String>,
}

/// A DeviceClass the driver's chart creates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceClassFact {
    /// Class name.
    pub name: String,
    /// The driver whose devices it selects.
    pub driver: String,
    /// The device type it selects.
    pub device_type: String,
    /// Its CEL selector.
    pub selector: String,
    /// The `spec.extendedResourceName` the driver's chart sets on it (KEP-5004: a pod's plain
    /// extended-resource request can be served by DRA through this class), when it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_resource_name: Option<String>,
    /// The first driver release whose chart sets `extended_resource_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_resource_since: Option<String>,
}

/// The kind of a published attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttributeKind {
    /// A string.
    String,
    /// An integer.
    Int,
    /// A boolean.
    Bool,
    /// A semantic version (compare with `semver(...)` in CEL).
    Version,
}

/// What one device type publishes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceType {
    /// `gpu`, `mig`, `vfio`, `daemon`, `channel`.
    pub name: String,
    /// Attribute names and kinds.
    pub attributes: BTreeMap<String, AttributeKind>,
    /// Capacity names (quantities).
    pub capacities: Vec<String>,
}

/// An attribute a release stopped publishing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemovedAttribute {
    /// Attribute name.
    pub name: String,
    /// The first release without it.
    pub removed_in: String,
}

impl DriverFacts {
    /// Whether a change from `from` to `to` goes forward across the release `renamed_in` (the
    /// chart rename): `from` before it, `to` at or after it.
    pub fn crosses(&self, from: &str, to: &str, renamed_in: &str) -> bool {
        match (
            self.position(from),
            self.position(to),
            self.position(renamed_in),
        ) {
            (Some(a), Some(b), Some(r)) => a < r && b >= r,
            _ => false,
        }
    }

    /// The release a chart version names (`25.12.0`, `0.4.1`: Helm's chart versions carry no `v`).
    pub fn release_of_chart(&self, chart_version: &str) -> Option<&DriverRelease> {
        self.release(chart_version)
    }

    fn position(&self, version: &str) -> Option<usize> {
        let want = format!("v{}", version.trim_start_matches('v'));
        self.releases.iter().position(|r| r.version == want)
    }

    /// The release `version` (`v25.12.0` or `25.12.0`).
    pub fn release(&self, version: &str) -> Option<&DriverRelease> {
        self.position(version).map(|i| &self.releases[i])
    }

    /// The direction of a change from `from` to `to`; `None` when either is unknown.
    pub fn upgrade(&self, from: &str, to: &str) -> Option<Upgrade> {
        let (a, b) = (self.position(from)?, self.position(to)?);
        Some(match a.cmp(&b) {
            std::cmp::Ordering::Less => Upgrade::Forward,
            std::cmp::Ordering::Equal => Upgrade::Same,
            std::cmp::Ordering::Greater => Upgrade::Backward,
        })
    }

    /// The gates release `version` has; `None` when the release is unknown.
    pub fn gates_at(&self, version: &str) -> Option<Vec<&DriverGate>> {
        let at = self.position(version)?;
        Some(
            self.gates
                .iter()
                .filter(|g| self.position(&g.since).is_some_and(|since| since <= at))
                .collect(),
        )
    }

    /// The kind of attribute `name` on devices of `device_type`; `None` when that type does not
    /// publish it (a selector reading it fails at scheduling time).
    pub fn attribute(&self, device_type: &str, name: &str) -> Option<AttributeKind> {
        self.device_type(device_type)?.attributes.get(name).copied()
    }

    /// Whether devices of `device_type` publish capacity `name`.
    pub fn has_capacity(&self, device_type: &str, name: &str) -> bool {
        self.device_type(device_type)
            .is_some_and(|t| t.capacities.iter().any(|c| c == name))
    }

    /// The device type `name`.
    pub fn device_type(&self, name: &str) -> Option<&DeviceType> {
        self.device_types.iter().find(|t| t.name == name)
    }

    /// The DeviceClass `name` the chart creates.
    pub fn class(&self, name: &str) -> Option<&DeviceClassFact> {
        self.device_classes.iter().find(|c| c.name == name)
    }
}

/// The GPU Operator's DRA deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorDra {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// The GPUCluster resource.
    pub gpu_cluster: GpuClusterFacts,
}

/// The GPU Operator's GPUCluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuClusterFacts {
    /// The first operator release with it.
    pub since: String,
    /// Its API version.
    pub api_version: String,
    /// The one name it may have.
    pub name: String,
    /// The DRA driver release that operator release deploys.
    pub dra_driver: String,
    /// The oldest NVIDIA driver branch it supports.
    pub min_driver_branch: u32,
    /// Whether the operator's own claims (admin access, all devices) live in its namespace.
    pub admin_claims_in_operator_namespace: bool,
}

/// Kueue's DRA integration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KueueDra {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default)]
    pub read: Option<PartialDate>,
    /// The first release with it on by default.
    pub dra_since: String,
    /// The Kueue resources shapes' classes are charged to.
    pub resource_names: KueueResourceNames,
    /// Device classes one `deviceClassMappings` entry may name.
    pub max_classes_per_mapping: u32,
    /// Claim forms Kueue cannot admit.
    pub refused: Vec<RefusedForm>,
    /// Kueue's extended-resource integration: a pod's plain `nvidia.com/gpu` request that DRA
    /// serves (a DeviceClass with `extendedResourceName`) is charged to the class's
    /// `deviceClassMappings` name, or to the extended resource itself.
    pub extended_resource: KueueExtendedResource,
}

/// Kueue's extended-resource DRA integration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KueueExtendedResource {
    /// Its feature gate.
    pub gate: String,
    /// The first release with it on by default.
    pub since: String,
}

/// The logical resources of `resources.deviceClassMappings`: the names the device plugin gives the
/// same devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KueueResourceNames {
    /// Whole GPUs (`nvidia.com/gpu`).
    pub gpu: String,
    /// MIG devices: this prefix and the profile (`nvidia.com/mig-` + `1g.10gb`).
    pub mig_prefix: String,
    /// The channel claims of ComputeDomain workloads.
    pub compute_domain_channel: String,
}

impl KueueResourceNames {
    /// The resource of MIG `profile` (`1g.10gb+me` -> `nvidia.com/mig-1g.10gb.me`): `+` is not
    /// valid in a resource name, and the device plugin writes it as `.`, so the DRA mapping names
    /// the same resource (and Kueue accepts it as a `deviceClassMappings` name).
    pub fn mig(&self, profile: &str) -> String {
        format!("{}{}", self.mig_prefix, profile.replace('+', "."))
    }
}

/// A claim form Kueue cannot admit, with the words it says so in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefusedForm {
    /// `first_available`, `admin_access`, `allocation_mode_all`, `unmapped_class`, `direct_claim`.
    pub form: String,
    /// A part of Kueue's message.
    pub message: String,
}

pub(super) fn load_dra(
    file: DraFile,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<DraFacts, ProfileError> {
    const F: &str = DRA_FILE;
    sourced(sources, F, None, &file.source.0)?;
    sourced(sources, F, Some("kubernetes"), &file.kubernetes.source)?;
    sourced(sources, F, Some("driver"), &file.driver.source)?;
    sourced(
        sources,
        F,
        Some("driver.compute_domains"),
        &file.driver.compute_domains.source,
    )?;
    sourced(sources, F, Some("standalone"), &file.standalone.source)?;
    sourced(sources, F, Some("gpu_operator"), &file.gpu_operator.source)?;
    sourced(sources, F, Some("kueue"), &file.kueue.source)?;
    sourced(sources, F, Some("shapes"), &file.shapes.source)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    log.row("kubernetes", &file.kubernetes.source, file.kubernetes.read);
    log.row("driver", &file.driver.source, file.driver.read);
    log.row(
        "driver.compute_domains",
        &file.driver.compute_domains.source,
        file.driver.compute_domains.read,
    );
    for r in &file.driver.releases {
        log.row(
            format!("driver.releases.{}", r.version),
            &file.driver.source,
            file.driver.read,
        );
    }
    log.row("standalone", &file.standalone.source, file.standalone.read);
    log.row(
        "gpu_operator",
        &file.gpu_operator.source,
        file.gpu_operator.read,
    );
    log.row("kueue", &file.kueue.source, file.kueue.read);
    log.row("shapes", &file.shapes.source, file.shapes.read);
    for gate in [
        &file.shapes.first_available.gate,
        &file.shapes.consumable_capacity.gate,
        &file.shapes.partitionable.gate,
    ] {
        if !file.kubernetes.gates.iter().any(|g| &g.name == gate) {
            return Err(inconsistent(
                F,
                format!("shapes names gate `{gate}`, which kubernetes.gates does not list"),
            ));
        }
    }
    if !file
        .driver
        .gates
        .iter()
        .any(|g| g.name == file.shapes.partitionable.driver_gate)
    {
        return Err(inconsistent(
            F,
            format!(
                "shapes.partitionable.driver_gate `{}` is not a gate of driver.gates",
                file.shapes.partitionable.driver_gate
            ),
        ));
    }
    check_kubernetes(&file.kubernetes).map_err(|m| inconsistent(F, m))?;
    check_driver(&file.driver, &file.kubernetes).map_err(|m| inconsistent(F, m))?;
    if file
        .driver
        .release(&file.gpu_operator.gpu_cluster.dra_driver)
        .is_none()
    {
        return Err(inconsistent(
            F,
            format!(
                "gpu_operator.gpu_cluster.dra_driver `{}` is not a driver release of the table",
                file.gpu_operator.gpu_cluster.dra_driver
            ),
        ));
    }
    if file.driver.release(&file.standalone.renamed_in).is_none() {
        return Err(inconsistent(
            F,
            format!(
                "standalone.renamed_in `{}` is not a driver release of the table",
                file.standalone.renamed_in
            ),
        ));
    }
    Ok(DraFacts {
        kubernetes: file.kubernetes,
        driver: file.driver,
        standalone: file.standalone,
        gpu_operator: file.gpu_operator,
        kueue: file.kueue,
        shapes: file.shapes,
    })
}

fn check_kubernetes(k: &KubernetesDra) -> Result<(), String> {
    if minor_of(&k.v1_from).is_none() {
        return Err(format!(
            "kubernetes.v1_from `{}` is not a minor like 1.34",
            k.v1_from
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    for g in &k.gates {
        if !names.insert(g.name.as_str()) {
            return Err(format!("kubernetes.gates: `{}` is listed twice", g.name));
        }
        if let Some(bad) = g.stages.keys().find(|m| minor_of(m).is_none()) {
            return Err(format!(
                "kubernetes.gates.{}: `{bad}` is not a minor like 1.35",
                g.name
            ));
        }
    }
    if !k.quota.devices_key_suffix.starts_with('.') || !k.quota.devices_key_suffix.contains('/') {
        return Err(format!(
            "kubernetes.quota.devices_key_suffix `{}` must start with `.` and name a resource",
            k.quota.devices_key_suffix
        ));
    }
    Ok(())
}

fn check_driver(d: &DriverFacts, k: &KubernetesDra) -> Result<(), String> {
    check_releases(d)?;
    let known_gate = |name: &str| d.gates.iter().any(|g| g.name == name);
    for g in &d.gates {
        if d.release(&g.since).is_none() {
            return Err(format!(
                "driver.gates.{}: since `{}` is not a release of the table",
                g.name, g.since
            ));
        }
        if let Some(bad) = g
            .excludes
            .iter()
            .chain(&g.requires)
            .find(|n| !known_gate(n))
        {
            return Err(format!(
                "driver.gates.{}: `{bad}` is not a gate of the table",
                g.name
            ));
        }
        if let Some(bad) = g
            .kubernetes_gates
            .iter()
            .find(|n| !k.gates.iter().any(|kg| &kg.name == *n))
        {
            return Err(format!(
                "driver.gates.{}: Kubernetes gate `{bad}` is not in kubernetes.gates",
                g.name
            ));
        }
    }
    for t in &d.device_types {
        if !t.attributes.contains_key("type") {
            return Err(format!(
                "driver.device_types.{}: every device publishes `type`",
                t.name
            ));
        }
        if let Some(both) = t.capacities.iter().find(|c| t.attributes.contains_key(*c)) {
            return Err(format!(
                "driver.device_types.{}: `{both}` is listed as an attribute and a capacity",
                t.name
            ));
        }
    }
    for c in &d.device_classes {
        if let Some(name) = &c.extended_resource_name
            && !name.split_once('/').is_some_and(|(domain, res)| {
                domain.contains('.') && !res.is_empty() && !res.contains('/')
            })
        {
            return Err(format!(
                "driver.device_classes.{}: extended_resource_name `{name}` is not a `<domain>/<name>` resource",
                c.name
            ));
        }
        if d.device_type(&c.device_type).is_none() {
            return Err(format!(
                "driver.device_classes.{}: device type `{}` is not in device_types",
                c.name, c.device_type
            ));
        }
    }
    for r in &d.removed_attributes {
        if d.release(&r.removed_in).is_none() {
            return Err(format!(
                "driver.removed_attributes.{}: `{}` is not a release of the table",
                r.name, r.removed_in
            ));
        }
        if let Some(t) = d
            .device_types
            .iter()
            .find(|t| t.attributes.contains_key(&r.name))
        {
            return Err(format!(
                "driver.removed_attributes.{}: device type `{}` still publishes it",
                r.name, t.name
            ));
        }
    }
    Ok(())
}

/// Releases: tags unique, and the chart renamed once: every release after the first one with a
/// chart name keeps that name or a later one, never an earlier one (the forward-only upgrade).
fn check_releases(d: &DriverFacts) -> Result<(), String> {
    let mut charts: Vec<&str> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for r in &d.releases {
        if !r.version.starts_with('v') || semver::Version::parse(&r.version[1..]).is_err() {
            return Err(format!(
                "driver.releases: `{}` is not a tag like v0.4.0",
                r.version
            ));
        }
        if !seen.insert(r.version.as_str()) {
            return Err(format!("driver.releases: `{}` is listed twice", r.version));
        }
        match charts.iter().position(|c| *c == r.chart) {
            Some(i) if i + 1 != charts.len() => {
                return Err(format!(
                    "driver.releases.{}: chart `{}` comes back after `{}`; releases are in upgrade order",
                    r.version,
                    r.chart,
                    charts[charts.len() - 1]
                ));
            }
            Some(_) => {}
            None => charts.push(&r.chart),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles::{Catalog, ProfileSources};

    fn facts() -> &'static DraFacts {
        Catalog::embedded().dra()
    }

    fn broken(from: &str, to: &str) -> String {
        assert!(
            ProfileSources::EMBEDDED.dra.contains(from),
            "the profile no longer contains `{from}`"
        );
        let text: &'static str = Box::leak(
            ProfileSources::EMBEDDED
                .dra
                .replacen(from, to, 1)
                .into_boxed_str(),
        );
        let src = ProfileSources {
            dra: text,
            ..ProfileSources::EMBEDDED
        };
        Catalog::from_sources(&src).unwrap_err().to_string()
    }

    /// Gates per Kubernetes minor, as kube_features.go states them (shared/reference/dra.md
    /// section 1): a field whose gate is off is dropped on write, so these decide what gpuctl may
    /// render for the declared version.
    #[test]
    fn kubernetes_gates_per_minor() {
        let k = &facts().kubernetes;
        for (gate, version, on) in [
            ("DRAPrioritizedList", "1.34", Some(true)),
            ("DRAPrioritizedList", "v1.36.0", Some(true)),
            ("DRAAdminAccess", "1.35.4", Some(true)),
            ("DRAExtendedResource", "1.35", Some(false)),
            ("DRAExtendedResource", "1.36", Some(true)),
            ("DRAPartitionableDevices", "1.35", Some(false)),
            ("DRAPartitionableDevices", "1.36", Some(true)),
            ("DRAConsumableCapacity", "1.34", Some(false)),
            ("DRADeviceTaintRules", "1.36", Some(false)),
            ("DRADeviceTaintRules", "1.34", None),
            ("DRAExtendedResource", "1.33", None),
            ("NoSuchGate", "1.35", None),
        ] {
            assert_eq!(
                k.gate(gate, version).map(GateStage::on_by_default),
                on,
                "{gate} on {version}"
            );
        }
        assert_eq!(k.gate("DRAAdminAccess", "1.36"), Some(GateStage::GaLocked));
        // 1.37 (the 2026-12 facts audit, M6: Kubernetes' versioned gate table of the 1.37 era).
        for (gate, stage) in [
            ("DRADeviceTaints", GateStage::Ga),
            ("DRADeviceTaintRules", GateStage::Ga),
            ("DRAExtendedResource", GateStage::GaLocked),
            ("DRAPrioritizedList", GateStage::GaLocked),
            ("DRAResourceClaimDeviceStatus", GateStage::GaLocked),
            ("DRAPartitionableDevices", GateStage::BetaOn),
            ("DRAWorkloadResourceClaims", GateStage::BetaOff),
            ("DRAListTypeAttributes", GateStage::Alpha),
            ("DRADerivedAttributes", GateStage::Alpha),
        ] {
            assert_eq!(k.gate(gate, "1.37.1"), Some(stage), "{gate} on 1.37");
        }
        assert_eq!(k.gate("DRADerivedAttributes", "1.36"), None);
        assert!(k.serves_v1("1.34.2") && k.serves_v1("v1.36.0"));
        assert!(!k.serves_v1("1.33.5") && !k.serves_v1("banana"));
        assert_eq!(k.minors(), ["1.34", "1.35", "1.36", "1.37"]);
        assert_eq!(k.api_version, "resource.k8s.io/v1");
        assert_eq!(
            k.immutable_specs,
            ["ResourceClaimTemplate", "ResourceClaim"]
        );
    }

    #[test]
    fn quota_keys_name_their_class() {
        let q = &facts().kubernetes.quota;
        assert_eq!(
            q.class_of_key("gpu.nvidia.com.deviceclass.resource.k8s.io/devices"),
            Some("gpu.nvidia.com")
        );
        assert_eq!(q.class_of_key(".deviceclass.resource.k8s.io/devices"), None);
        assert_eq!(q.class_of_key("requests.nvidia.com/gpu"), None);
        assert_eq!(q.class_of_key(&q.claims_count_key), None);
        assert_eq!(
            q.key_for_class("mig.nvidia.com"),
            "mig.nvidia.com.deviceclass.resource.k8s.io/devices"
        );
        assert_eq!(q.all_mode_charge, 32);
        assert_eq!(facts().kubernetes.limits.max_allocation_results, 32);
    }

    /// The chart was renamed with the move to kubernetes-sigs (v0.4.0), and the versions changed
    /// scheme: v0.4.0 is newer than v25.12.0, and going back is not an upgrade.
    #[test]
    fn driver_releases_in_upgrade_order_with_their_chart() {
        let d = &facts().driver;
        for (version, chart) in [
            ("v25.8.0", "nvidia-dra-driver-gpu"),
            ("25.12.0", "nvidia-dra-driver-gpu"),
            ("v0.4.0", "dra-driver-nvidia-gpu"),
            ("v0.5.0", "dra-driver-nvidia-gpu"),
            ("v0.5.1", "dra-driver-nvidia-gpu"),
        ] {
            assert_eq!(d.release(version).map(|r| r.chart.as_str()), Some(chart));
        }
        assert_eq!(d.upgrade("v0.5.0", "v0.5.1"), Some(Upgrade::Forward));
        // The driver's gates of v0.5.0 (2026-12 facts audit, M4), all alpha.
        for name in [
            "FabricManagerPartitioning",
            "HostManagedIMEXDaemon",
            "DRAListTypeAttributes",
            "ConsumableShares",
        ] {
            let g = d.gates.iter().find(|g| g.name == name).unwrap();
            assert_eq!((g.since.as_str(), g.stage), ("v0.5.0", GateStage::Alpha));
        }
        // The chart's gpu.nvidia.com class serves `nvidia.com/gpu` (M5); no other class does.
        for c in &d.device_classes {
            let want = (c.name == "gpu.nvidia.com").then_some("nvidia.com/gpu");
            assert_eq!(c.extended_resource_name.as_deref(), want, "{}", c.name);
        }
        assert!(d.release("v0.3.0").is_none());
        assert_eq!(d.upgrade("v25.12.0", "v0.4.0"), Some(Upgrade::Forward));
        assert_eq!(d.upgrade("v0.4.1", "v25.12.0"), Some(Upgrade::Backward));
        assert_eq!(d.upgrade("v0.5.0", "0.5.0"), Some(Upgrade::Same));
        assert_eq!(d.upgrade("v0.5.0", "v9.9.9"), None);
        assert!(
            d.release("v0.4.0")
                .and_then(|r| r.upgrade_from_older.as_deref())
                .is_some_and(|t| t.contains("nameOverride=nvidia-dra-driver-gpu"))
        );
        assert_eq!(d.prerequisites.kubernetes, "1.34.2");
        assert_eq!(d.prerequisites.compute_domain_driver, "570.158.01");
    }

    /// What each device type publishes: memory is a capacity; `profile` and `parentUUID` exist on
    /// MIG devices only; versions are semver; `index`/`minor` are gone.
    #[test]
    fn attributes_and_capacities_per_device_type() {
        let d = &facts().driver;
        assert_eq!(d.attribute("mig", "profile"), Some(AttributeKind::String));
        assert_eq!(
            d.attribute("mig", "parentUUID"),
            Some(AttributeKind::String)
        );
        assert_eq!(d.attribute("gpu", "profile"), None);
        assert_eq!(d.attribute("gpu", "parentUUID"), None);
        assert_eq!(
            d.attribute("gpu", "driverVersion"),
            Some(AttributeKind::Version)
        );
        assert_eq!(
            d.attribute("gpu", "cudaComputeCapability"),
            Some(AttributeKind::Version)
        );
        assert_eq!(d.attribute("gpu", "memory"), None);
        assert!(d.has_capacity("gpu", "memory") && d.has_capacity("mig", "multiprocessors"));
        assert!(!d.has_capacity("gpu", "multiprocessors"));
        assert_eq!(d.attribute("gpu", "index"), None);
        assert_eq!(d.attribute("channel", "id"), Some(AttributeKind::Int));
        let classes: Vec<(&str, &str)> = d
            .device_classes
            .iter()
            .map(|c| (c.name.as_str(), c.device_type.as_str()))
            .collect();
        assert_eq!(
            classes,
            [
                ("gpu.nvidia.com", "gpu"),
                ("mig.nvidia.com", "mig"),
                ("vfio.gpu.nvidia.com", "vfio"),
                ("compute-domain-daemon.nvidia.com", "daemon"),
                ("compute-domain-default-channel.nvidia.com", "channel"),
            ]
        );
    }

    #[test]
    fn driver_gates_per_release_and_their_rules() {
        let d = &facts().driver;
        let at = |v: &str| -> Vec<&str> {
            d.gates_at(v)
                .unwrap()
                .into_iter()
                .map(|g| g.name.as_str())
                .collect()
        };
        assert!(at("v25.8.0").contains(&"MPSSupport"));
        assert!(!at("v25.8.0").contains(&"DynamicMIG"));
        assert!(at("v25.12.0").contains(&"DynamicMIG"));
        assert!(!at("v25.12.0").contains(&"DeviceMetadata"));
        assert!(at("v0.5.0").contains(&"DeviceMetadata"));
        assert!(d.gates_at("v1.0.0").is_none());
        let dynamic_mig = d.gates.iter().find(|g| g.name == "DynamicMIG").unwrap();
        assert!(dynamic_mig.excludes.iter().any(|g| g == "MPSSupport"));
        assert_eq!(dynamic_mig.kubernetes_gates, ["DRAPartitionableDevices"]);
        assert_eq!(facts().gpu_operator.gpu_cluster.dra_driver, "v0.5.0");
        assert_eq!(facts().kueue.max_classes_per_mapping, 8);
    }

    /// The loader refuses a table that contradicts itself, naming the entry.
    #[test]
    fn inconsistent_tables_are_refused() {
        for (from, to, says) in [
            (
                "{ version: v0.4.1, released: 2026-06-30, chart: dra-driver-nvidia-gpu,",
                "{ version: v0.4.1, released: 2026-06-30, chart: nvidia-dra-driver-gpu,",
                "comes back after",
            ),
            (
                "excludes: [PassthroughSupport, NVMLDeviceHealthCheck, MPSSupport]",
                "excludes: [PassthroughSupport, NVMLHealth, MPSSupport]",
                "`NVMLHealth` is not a gate",
            ),
            (
                "device_type: vfio,",
                "device_type: vgpu,",
                "device type `vgpu` is not in device_types",
            ),
            (
                "{ name: minor, removed_in: v25.8.0 }",
                "{ name: profile, removed_in: v25.8.0 }",
                "still publishes it",
            ),
            (
                "dra_driver: v0.5.0",
                "dra_driver: v0.6.0",
                "is not a driver release",
            ),
            (
                "kubernetes_gates: [DRAPartitionableDevices]",
                "kubernetes_gates: [DRAPartitionable]",
                "Kubernetes gate `DRAPartitionable`",
            ),
            (
                "{ version: v0.4.0,",
                "{ version: 0.4.0,",
                "not a tag like v0.4.0",
            ),
        ] {
            let err = broken(from, to);
            assert!(err.contains(says), "{to}: {err}");
            assert!(err.contains("profiles/dra.yaml"), "{err}");
        }
    }
}
