//! GPUs claimed through Dynamic Resource Allocation (`spec.dra`): the device shapes tenants may
//! claim, written without CEL. gpuctl turns each shape into a DeviceClass whose selectors read the
//! attributes and capacities NVIDIA's DRA driver publishes (profiles/dra.yaml), each tenant's
//! `claims` into a ResourceClaimTemplate per shape in its namespaces and a ResourceQuota on the
//! shapes' device-class keys.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::scalars::{Quantity, version_text};
use super::{ChartSourceSpec, InstallMode};

/// `spec.dra`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dra {
    /// How NVIDIA's DRA driver is deployed. Absent: someone else deploys it (gpuctl renders the
    /// classes, templates and quotas only).
    #[serde(default)]
    pub driver: Option<DraDriver>,
    /// Device shapes tenants may claim; each becomes the DeviceClass `<name>.shapes.gpuctl.dev`.
    #[serde(default)]
    pub shapes: Vec<DeviceShape>,
    /// Serve the extended resources pods already ask for (`nvidia.com/gpu`, and
    /// `nvidia.com/mig-<profile>` for the MIG profiles pre-created on DRA pools) from DRA on the
    /// pools DRA serves, through DeviceClasses with `extendedResourceName` (Kubernetes 1.36+,
    /// gate DRAExtendedResource): a pool moves from the device plugin to DRA with no change to
    /// any pod spec. A name is served by one class only: NVIDIA's driver chart's `gpu.nvidia.com`
    /// where it sets the field (v25.12.0+), otherwise a class gpuctl renders.
    #[serde(default, skip_serializing_if = "is_false")]
    #[schemars(example = &true)]
    pub extended_resources: bool,
    /// GPUs taken out of service (maintenance, a suspected fault): each entry becomes a
    /// DeviceTaintRule (Kubernetes 1.36+: DRADeviceTaintRules) that taints one device, or every
    /// GPU device of a node, so the scheduler places no new claim there (`NoExecute` also evicts
    /// the pods using them). Removing the entry removes the rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintenance: Vec<DeviceMaintenance>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `spec.dra.maintenance[]`: devices out of service.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceMaintenance {
    /// DNS-1123 label: names the DeviceTaintRule (`gpuctl-maintenance-<name>`) and is the taint's value.
    #[schemars(example = &"node7-gpu3-rma")]
    pub name: String,
    /// The node whose GPU devices are tainted (NVIDIA's driver publishes one pool per node, named after it).
    #[schemars(example = &"gpu-node-7")]
    pub node: String,
    /// One device of that node (`gpu-3`, or a MIG device `gpu-3-mig-19-0-1`); absent: all of them.
    #[serde(default)]
    #[schemars(example = &"gpu-3")]
    pub device: Option<String>,
    /// `NoSchedule` (default: no new claims; running pods stay) or `NoExecute` (pods using the
    /// devices are evicted too).
    #[serde(default)]
    #[schemars(example = &"NoSchedule")]
    pub effect: TaintEffect,
}

/// The effect of a device taint gpuctl writes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
pub enum TaintEffect {
    /// No new allocation of the device.
    #[default]
    NoSchedule,
    /// No new allocation, and pods using the device are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A device taint a tenant's ResourceClaimTemplates tolerate (`tenants[].deviceTolerations`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceToleration {
    /// The taint key (`gpu.nvidia.com/xid`).
    #[schemars(example = &"gpu.nvidia.com/xid")]
    pub key: String,
    /// `Exists` (any value) or `Equal` (the default: `value` must match).
    #[serde(default)]
    #[schemars(example = &"Exists")]
    pub operator: TolerationOperator,
    /// The value for `Equal` (`"43"`).
    #[serde(default)]
    #[schemars(example = &"43")]
    pub value: Option<String>,
    /// The effect tolerated (`NoSchedule`, `NoExecute`); absent: every effect.
    #[serde(default)]
    #[schemars(example = &"NoSchedule")]
    pub effect: Option<TaintEffect>,
}

/// How a toleration matches a taint's value.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
pub enum TolerationOperator {
    /// The values are equal.
    #[default]
    Equal,
    /// Any value.
    Exists,
}

/// Which deployment of NVIDIA's DRA driver serves the cluster's GPUs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum DraDeployment {
    /// The GPU Operator's `GPUCluster` (v26.7.0+) instead of its ClusterPolicy: the operator
    /// deploys the DRA driver, and no device plugin, GPU Feature Discovery, MIG Manager or
    /// container toolkit, on every GPU node. NVIDIA supports no in-place move from a ClusterPolicy
    /// to it: it is for a new cluster.
    GpuCluster,
    /// The GPU Operator's ClusterPolicy (device plugin kept) plus NVIDIA's DRA driver chart, pinned
    /// by `version`: the pools declared `gpuPlugin: dra` move to DRA one by one (their device
    /// plugin switched off per node), the others stay on the device plugin.
    Standalone,
}

/// `spec.dra.driver`: NVIDIA's DRA driver as gpuctl deploys it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DraDriver {
    /// `gpuCluster`: the GPU Operator's GPUCluster (rendered into its chart values);
    /// `standalone`: the ClusterPolicy plus NVIDIA's DRA driver chart (`helm/dra-driver-values.yaml`)
    /// on the pools declared `gpuPlugin: dra`.
    #[schemars(example = &"gpuCluster")]
    pub deployment: DraDeployment,
    /// Release of NVIDIA's DRA driver (profiles/dra.yaml `driver.releases`); under `gpuCluster`
    /// default: the one the GPU Operator release pins (`v0.5.0` for v26.7.0); under `standalone`
    /// required (the chart's name and home follow from it: `nvidia-dra-driver-gpu` before
    /// v0.4.0, `dra-driver-nvidia-gpu` from it; upgrades go forward only).
    #[serde(default, deserialize_with = "optional_version")]
    #[schemars(example = &"v0.5.0")]
    pub version: Option<String>,
    /// Compute domains (multi-node NVLink through IMEX channels, NVL72 racks): the driver's
    /// controller and kubelet plugin for them. Default: on, as in the operator's chart.
    #[serde(default = "yes")]
    #[schemars(example = &true)]
    pub compute_domains: bool,
    /// The driver's feature gates (`FEATURE_GATES`), e.g. `{DynamicMIG: true}`: checked against
    /// the release (profiles/dra.yaml `driver.gates`).
    #[serde(default)]
    #[schemars(example = &feature_gates_example())]
    pub feature_gates: std::collections::BTreeMap<String, bool>,
    /// `standalone` only: how the chart is installed: `none` (the default: someone else installs
    /// it with gpuctl's values), `helm` (apply runs `helm upgrade --install` in the operator
    /// phase) or `gitops`.
    #[serde(default = "install_none")]
    #[schemars(example = &"helm")]
    pub install: InstallMode,
    /// `standalone` only: where the chart comes from (default: the release's own home,
    /// profiles/dra.yaml), as for `gpuOperator.chart`.
    #[serde(default)]
    pub chart: ChartSourceSpec,
    /// `standalone` only: chart values deep-merged over gpuctl's (e.g. `nameOverride:
    /// nvidia-dra-driver-gpu` for the first upgrade across v0.4.0, or `image`).
    #[serde(default)]
    #[schemars(with = "std::collections::BTreeMap<String, serde_json::Value>")]
    pub values: serde_json::Map<String, serde_json::Value>,
}

fn install_none() -> InstallMode {
    InstallMode::None
}

/// `gpuctl explain --fields` shows this for `driver.featureGates`.
fn feature_gates_example() -> std::collections::BTreeMap<String, bool> {
    std::collections::BTreeMap::from([("MPSSupport".to_string(), true)])
}

fn yes() -> bool {
    true
}

/// One kind of device a claim asks for: whole GPUs (`gpu`) or MIG devices (`mig`), with optional
/// floors. Every constraint must hold (the DeviceClass's selectors are ANDed).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceShape {
    /// DNS-1123 label: names the DeviceClass (`<name>.shapes.gpuctl.dev`) and the tenants'
    /// ResourceClaimTemplates.
    #[schemars(example = &"h100")]
    pub name: String,
    /// Whole GPUs (devices of type `gpu`), optionally of one model.
    #[serde(default)]
    pub gpu: Option<GpuShape>,
    /// MIG devices (type `mig`) of one profile.
    #[serde(default)]
    pub mig: Option<MigShape>,
    /// Least device memory (the driver's `memory` capacity), e.g. `40Gi`. A GPU sold as 80 GB
    /// holds fewer than 80Gi bytes: write `80G` or less for it.
    #[serde(default)]
    #[schemars(example = &"40Gi")]
    pub min_memory: Option<Quantity>,
    /// Least CUDA compute capability, e.g. `"9.0"`.
    #[serde(default, deserialize_with = "optional_version")]
    #[schemars(example = &"9.0")]
    pub min_compute_capability: Option<String>,
    /// Least driver version on the device's node, e.g. `"580.95.05"`.
    #[serde(default, deserialize_with = "optional_version")]
    #[schemars(example = &"580.95.05")]
    pub min_driver: Option<String>,
    /// Devices one claim of this shape holds (all from one node).
    #[serde(default = "one")]
    pub count: u32,
    /// Ordered alternatives: names of other shapes of `spec.dra.shapes` (each of whole GPUs or MIG
    /// devices), most wanted first. A claim of this shape gets the first alternative the scheduler
    /// can allocate on one node (Kubernetes `firstAvailable` subrequests, gate DRAPrioritizedList:
    /// beta and on in 1.34 and 1.35, GA in 1.36). Such a shape has no `gpu`, `mig`, floors,
    /// `count` or `memoryShare` of its own and no DeviceClass: its template names the
    /// alternatives' classes. A tenant's `claims` amount for it counts claims, and each claim is
    /// charged by ResourceQuota every alternative's `count` on that alternative's class (the API
    /// server charges the worst case per class), whichever is allocated. Kueue v0.19 admits no
    /// such claim; Volcano v1.15 schedules it without charging its queue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(example = &first_available_example())]
    pub first_available: Vec<String>,
    /// Consumable capacity (KEP-5075, gate DRAConsumableCapacity: alpha in 1.34 and 1.35, beta and
    /// on in 1.36): each device of a claim gives it this much of its `memory` capacity instead of
    /// the whole device, e.g. `20Gi`; devices NVIDIA's driver publishes with
    /// `allowMultipleAllocations` are shared by several claims up to their memory. Whole-GPU
    /// shapes only. No ResourceQuota key charges memory: the class's device key counts each share
    /// as one device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"20Gi")]
    pub memory_share: Option<Quantity>,
}

impl DeviceShape {
    /// Whether the shape is a list of alternatives (`firstAvailable`) rather than one kind of device.
    pub fn has_alternatives(&self) -> bool {
        !self.first_available.is_empty()
    }
}

/// `gpuctl explain --fields` shows this for `shapes[].firstAvailable`.
fn first_available_example() -> Vec<String> {
    vec!["h100".to_string(), "l40s-pair".to_string()]
}

/// A version written as a string (as every version of the blueprint).
fn optional_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    version_text(d).map(Some)
}

fn one() -> u32 {
    1
}

/// Which whole GPUs: one catalog model (absent: any GPU; `minComputeCapability` picks an
/// architecture and newer).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuShape {
    /// GPU model, a key of profiles/gpus.yaml (`H100-SXM5-80GB`): the selector compares the
    /// product name the driver publishes (NVML's, e.g. `NVIDIA H100 80GB HBM3`).
    #[serde(default)]
    #[schemars(example = &"H100-SXM5-80GB")]
    pub model: Option<String>,
}

/// Which MIG devices: a profile, optionally on one GPU model.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigShape {
    /// MIG profile as NVML names it (`1g.10gb`, `3g.40gb`).
    #[schemars(example = &"1g.10gb")]
    pub profile: String,
    /// GPU model the instances are on (needed when the profile name exists on several models
    /// with different sizes; optional otherwise).
    #[serde(default)]
    #[schemars(example = &"A100-SXM4-80GB")]
    pub model: Option<String>,
}

impl Dra {
    /// The driver settings when the blueprint deploys the standalone chart.
    pub fn standalone(&self) -> Option<&DraDriver> {
        self.driver
            .as_ref()
            .filter(|d| d.deployment == DraDeployment::Standalone)
    }

    /// The shape named `name`.
    pub fn shape(&self, name: &str) -> Option<&DeviceShape> {
        self.shapes.iter().find(|s| s.name == name)
    }
}
