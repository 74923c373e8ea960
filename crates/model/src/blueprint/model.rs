//! The blueprint contract, `gpuctl.dev/v1alpha1` (see docs/blueprint.md): typed, strict, schema-derived.
//!
//! Types are deliberately lenient where a rule can say more than serde could (versions, durations and
//! quantities stay strings here and are parsed by the rules, so every bad value becomes a finding with
//! a position instead of stopping the load at the first one).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only accepted `apiVersion`.
pub const API_VERSION: &str = "gpuctl.dev/v1alpha1";
/// The only accepted `kind`.
pub const KIND: &str = "ClusterBlueprint";

/// A whole cluster blueprint.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Blueprint {
    /// Always `gpuctl.dev/v1alpha1`.
    pub api_version: String,
    /// Always `ClusterBlueprint`.
    pub kind: String,
    /// A parent blueprint this one overlays (docs/fleet.md): a relative path inside the fleet's
    /// root (for a single blueprint, its directory), at most `fleet.max_extends_depth` parents
    /// deep (profiles/limits.yaml). The loader merges the chain before anything reads it: maps
    /// merge, scalars replace, `null` removes a key, lists marked `x-kubernetes-list-type: map`
    /// merge item by item on their keys (`$patch: delete` removes one), other lists are replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"../base/training.yaml")]
    pub extends: Option<String>,
    /// Names the blueprint, its ApplySet and the labels on everything it renders.
    pub metadata: Metadata,
    /// What the cluster should be.
    pub spec: Spec,
}

/// Blueprint metadata.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// DNS-1123 label.
    pub name: String,
}

/// The desired cluster.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// Control-plane facts.
    pub kubernetes: Kubernetes,
    /// The NVIDIA GPU Operator release and its operands.
    pub gpu_operator: GpuOperator,
    /// Sets of identical GPU nodes.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub node_pools: Vec<NodePool>,
    /// PriorityClasses to create.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub priority_classes: Vec<PriorityClass>,
    /// Queueing system and its queues.
    #[serde(default)]
    pub scheduling: Scheduling,
    /// Teams, their namespaces, quotas and queues.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub tenants: Vec<Tenant>,
    /// Monitoring and alerting.
    #[serde(default)]
    pub monitoring: Monitoring,
    /// Driver upgrade policy.
    #[serde(default)]
    pub upgrades: Upgrades,
    /// The NVIDIA Network Operator (optional): NIC driver, RDMA device plugin and secondary
    /// networks for the pools' fabric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_operator: Option<crate::blueprint::network::NetworkOperator>,
    /// GPUs claimed through Dynamic Resource Allocation (optional): the device shapes tenants may
    /// claim (`tenants[].claims`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dra: Option<crate::blueprint::dra::Dra>,
    /// GPU-hours accounting (optional): prices, slice weights, the idle threshold and cost
    /// centres; with it, render writes the accounting recording rules and `gpuctl report` reads
    /// them (docs/report.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<crate::blueprint::accounting::Accounting>,
    /// How new GPU nodes are kept free of work until their GPU stack is up: one startup taint
    /// key, rendered into every Karpenter NodePool's `startupTaints`, the Cluster API template
    /// taints, the GPU Operator's and NFD's tolerations and the NodeReadinessRule (docs/node-pools.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_readiness: Option<crate::blueprint::provisioning::NodeReadiness>,
}

/// Kubernetes control plane.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kubernetes {
    /// Control-plane version, e.g. `1.34.2`.
    #[serde(deserialize_with = "version_text")]
    pub version: String,
    /// The cluster's pod address range (kube-controller-manager `--cluster-cidr`; one CIDR, or an
    /// IPv4 and an IPv6 one separated by a comma). Optional: when given, no nv-ipam pool may
    /// overlap it.
    #[serde(default, rename = "podCIDR")]
    #[schemars(example = &"10.244.0.0/16")]
    pub pod_cidr: Option<String>,
    /// The cluster's Service address range (kube-apiserver `--service-cluster-ip-range`, written
    /// the same way). Optional: when given, no nv-ipam pool may overlap it.
    #[serde(default, rename = "serviceCIDR")]
    #[schemars(example = &"10.96.0.0/12")]
    pub service_cidr: Option<String>,
}

pub use super::install::InstallMode;
pub use super::provisioning::Provisioner;
pub use super::scalars::{IntOrString, Quantity};
use super::scalars::{version_list, version_text};

/// GPU Operator settings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuOperator {
    /// Chart release, e.g. `v26.7.0`.
    #[serde(deserialize_with = "version_text")]
    pub version: String,
    /// Namespace of the operator.
    #[serde(default = "default_operator_namespace")]
    pub namespace: String,
    /// How the Helm release is handled.
    #[serde(default)]
    pub install: InstallMode,
    /// Cluster default driver.
    pub driver: Driver,
    /// dcgm-exporter settings.
    #[serde(default)]
    pub dcgm_exporter: DcgmExporter,
    /// Where the chart comes from (default: NVIDIA's Helm repository).
    #[serde(default)]
    pub chart: ChartSourceSpec,
    /// Where images come from: a registry mirror for air-gapped clusters.
    #[serde(default)]
    pub images: Option<Images>,
    /// GPUDirect RDMA: how GPU memory is registered with the NICs (when a pool asks for it).
    #[serde(default)]
    pub rdma: Option<Rdma>,
    /// Raw chart overrides, deep-merged last.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub values: serde_json::Map<String, serde_json::Value>,
}

/// Where a chart comes from: at most one of the three (none: where its project publishes it, for
/// the GPU Operator NVIDIA's Helm repository).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChartSourceSpec {
    /// A Helm repository URL serving the chart (`https://...`), e.g. an internal mirror of
    /// NVIDIA's.
    #[serde(default)]
    #[schemars(example = &"https://charts.internal.example.com/nvidia")]
    pub repository: Option<String>,
    /// An OCI chart reference, `oci://registry/path/gpu-operator` (the chart's own name last).
    #[serde(default)]
    #[schemars(example = &"oci://registry.internal.example.com/charts/gpu-operator")]
    pub oci: Option<String>,
    /// A chart archive (`.tgz`) or chart directory, relative to the blueprint file.
    #[serde(default)]
    #[schemars(example = &"charts/gpu-operator-v26.7.0.tgz")]
    pub path: Option<String>,
}

/// `gpuctl explain --fields` shows this for `images.pullSecrets`.
const PULL_SECRETS_EXAMPLE: [&str; 1] = ["internal-mirror-pull"];

/// A registry mirror: every image repository the rendered values and NVIDIADriver CRs name is
/// rewritten to it (its registry host replaced, its path kept).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Images {
    /// Mirror registry, `host[:port][/path]` without scheme, e.g. `registry.internal:5000/mirror`.
    #[schemars(example = &"registry.internal.example:5000/nvidia-mirror")]
    pub registry: String,
    /// Image pull Secrets (names in the operator's namespace) every operand uses.
    #[serde(default)]
    #[schemars(example = &PULL_SECRETS_EXAMPLE)]
    pub pull_secrets: Vec<String>,
}

/// The GPU Operator's namespace when a blueprint does not name one (`spec.gpuOperator.namespace`),
/// and where `gpuctl import` and `snapshot --all` look when no operator release says otherwise.
pub fn default_operator_namespace() -> String {
    "gpu-operator".to_string()
}

/// Kernel module flavour of the driver.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum KernelModuleType {
    /// The operator chooses (open modules on recent drivers).
    #[default]
    Auto,
    /// Open GPU kernel modules.
    Open,
    /// Proprietary kernel modules.
    Proprietary,
}

/// The cluster default driver.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Driver {
    /// Driver version, e.g. `580.105.08`.
    #[serde(deserialize_with = "version_text")]
    pub version: String,
    /// Kernel module flavour.
    #[serde(default)]
    pub kernel_module_type: KernelModuleType,
    /// Use precompiled driver containers.
    #[serde(default)]
    pub use_precompiled: bool,
    /// Operator-driven upgrade policy.
    #[serde(default)]
    pub upgrade_policy: Option<UpgradePolicy>,
}

/// The operator's driver upgrade policy.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpgradePolicy {
    /// Nodes upgraded in parallel (0 = unlimited).
    #[serde(default)]
    pub max_parallel_upgrades: Option<u32>,
    /// Nodes that may be unavailable, count or percentage.
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    /// Drain settings.
    #[serde(default)]
    pub drain: Option<Drain>,
    /// Wait for pods matching a selector to finish.
    #[serde(default)]
    pub wait_for_completion: Option<WaitForCompletion>,
}

/// Drain settings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Drain {
    /// Drain nodes before upgrading.
    #[serde(default)]
    pub enable: bool,
    /// Drain timeout.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// Wait for pods to complete before upgrading.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitForCompletion {
    /// Label selector of the pods to wait for.
    #[serde(default)]
    #[schemars(example = &"app=training")]
    pub pod_selector: String,
    /// 0 waits forever.
    #[serde(default)]
    pub timeout_seconds: u64,
}

/// dcgm-exporter settings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DcgmExporter {
    /// Deploy dcgm-exporter.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Collection interval, e.g. `30s`.
    #[serde(default = "default_interval")]
    pub interval: String,
    /// Create a ServiceMonitor.
    #[serde(default)]
    pub service_monitor: bool,
}

impl Default for DcgmExporter {
    fn default() -> Self {
        DcgmExporter {
            enabled: true,
            interval: default_interval(),
            service_monitor: false,
        }
    }
}

fn yes() -> bool {
    true
}

fn default_interval() -> String {
    "30s".to_string()
}

/// What a pool is for.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Batch training.
    Training,
    /// Latency-sensitive serving.
    Inference,
    /// Notebooks and experiments.
    Development,
    /// Anything.
    #[default]
    General,
}

/// A set of identical GPU nodes.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePool {
    /// DNS-1123 label, unique.
    pub name: String,
    /// What the pool is for.
    #[serde(default)]
    pub role: Role,
    /// Equality labels identifying the pool's nodes; must be non-empty.
    pub selector: BTreeMap<String, String>,
    /// Expected node count.
    pub nodes: u32,
    /// GPUs on each node.
    pub gpu: Gpu,
    /// Node operating system, checked against the operating systems and kernels the GPU
    /// Operator release's platform page lists (GPU037, GPU038).
    #[serde(default)]
    pub os: Option<Os>,
    /// Per-pool driver override (its own NVIDIADriver CR).
    #[serde(default)]
    pub driver: Option<PoolDriver>,
    /// How GPUs are shared.
    #[serde(default)]
    pub partitioning: Partitioning,
    /// Interconnect and network.
    #[serde(default)]
    pub topology: Option<Topology>,
    /// Extra node labels gpuctl manages, per key.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Node taints gpuctl manages, per key.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key", "effect"]))]
    pub taints: Vec<Taint>,
    /// Which GPU Operator operands run on the pool's nodes (all of them when absent). gpuctl
    /// labels the nodes `nvidia.com/gpu.deploy.<operand>` with the value given, which the operator
    /// honours per node; `driver: false` leaves the driver to the host (consumer GPUs, GPU029).
    #[serde(default, skip_serializing_if = "Operands::is_empty")]
    pub operands: Operands,
    /// Which plugin gives the pool's GPUs to pods: `devicePlugin` (the default: the GPU
    /// Operator's device plugin, `nvidia.com/gpu` requests) or `dra` (NVIDIA's DRA kubelet
    /// plugin, claims; only with `spec.dra.driver.deployment: standalone`). gpuctl moves a pool by
    /// its node labels: the operator's per-node device-plugin switch off, and the label the DRA
    /// chart's kubelet plugin selects on (docs/dra.md, Migration). Pools not declared `dra` stay
    /// on the device plugin, so an existing cluster stays as it is.
    #[serde(default, skip_serializing_if = "GpuPlugin::is_device_plugin")]
    #[schemars(example = &"dra")]
    pub gpu_plugin: GpuPlugin,
    /// How the pool's nodes come to exist: `static` (the default: they are there), `karpenter`,
    /// `clusterAPI` or `managed`, with minimum and maximum nodes and the instance types it may
    /// use (docs/node-pools.md). For a pool that scales, `nodes` is the count expected now and
    /// capacity checks use `maxNodes`.
    #[serde(default, skip_serializing_if = "Provisioner::is_static_default")]
    pub provisioner: Provisioner,
}

impl NodePool {
    /// The most nodes the pool can have: `provisioner.maxNodes` when a provisioner scales it,
    /// else `nodes`.
    pub fn max_nodes(&self) -> u32 {
        if self.provisioner.scales() {
            self.provisioner.max_nodes.unwrap_or(self.nodes)
        } else {
            self.nodes
        }
    }
}

/// The plugin that serves a pool's GPUs (`nodePools[].gpuPlugin`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum GpuPlugin {
    /// The GPU Operator's device plugin (extended resources `nvidia.com/gpu`, `nvidia.com/mig-*`).
    #[default]
    DevicePlugin,
    /// NVIDIA's DRA driver's GPU kubelet plugin (ResourceSlices, claims).
    Dra,
}

impl GpuPlugin {
    /// The default (for `skip_serializing_if`).
    pub fn is_device_plugin(&self) -> bool {
        *self == GpuPlugin::DevicePlugin
    }
}

/// Per-pool switches for the GPU Operator's operands. Each field set becomes the node label
/// `nvidia.com/gpu.deploy.<operand>` (`"true"` or `"false"`) on the pool's nodes; a field left out
/// leaves that label to the operator, which sets it to `true` on every GPU node.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Operands {
    /// The driver container (`false`: the hosts bring their own driver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = false)]
    pub driver: Option<bool>,
    /// The NVIDIA Container Toolkit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = false)]
    pub container_toolkit: Option<bool>,
    /// The Kubernetes device plugin (`false`: the nodes advertise no `nvidia.com/gpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = false)]
    pub device_plugin: Option<bool>,
    /// GPU Feature Discovery (the `nvidia.com/gpu.product` and other GPU labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = false)]
    pub gpu_feature_discovery: Option<bool>,
    /// The standalone DCGM host engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = false)]
    pub dcgm: Option<bool>,
    /// The DCGM exporter (GPU metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = false)]
    pub dcgm_exporter: Option<bool>,
    /// MIG Manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = false)]
    pub mig_manager: Option<bool>,
    /// The node status exporter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = false)]
    pub node_status_exporter: Option<bool>,
    /// The operator validator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = false)]
    pub operator_validator: Option<bool>,
}

impl Operands {
    /// Whether no operand is switched.
    pub fn is_empty(&self) -> bool {
        self.switches().is_empty()
    }

    /// The operands switched, as (label suffix after `nvidia.com/gpu.deploy.`, on), in a fixed
    /// order.
    pub fn switches(&self) -> Vec<(&'static str, bool)> {
        [
            ("driver", self.driver),
            ("container-toolkit", self.container_toolkit),
            ("device-plugin", self.device_plugin),
            ("gpu-feature-discovery", self.gpu_feature_discovery),
            ("dcgm", self.dcgm),
            ("dcgm-exporter", self.dcgm_exporter),
            ("mig-manager", self.mig_manager),
            ("node-status-exporter", self.node_status_exporter),
            ("operator-validator", self.operator_validator),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.map(|on| (name, on)))
        .collect()
    }
}

/// The GPU model and count of a node.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gpu {
    /// A key of the GPU catalog (`gpuctl profiles`).
    pub model: String,
    /// GPUs per node.
    pub count: u32,
}

/// Node operating system.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Os {
    /// Distribution id as `/etc/os-release` `ID` gives it, e.g. `ubuntu` (the GPU Operator
    /// supports `ubuntu`, `rhel`, `rocky` and `rhcos`).
    pub id: String,
    /// Distribution version as `/etc/os-release` `VERSION_ID`, e.g. `22.04`, compared by
    /// major.minor; for `rhcos` the OpenShift minor, e.g. `4.18`.
    #[serde(deserialize_with = "version_text")]
    pub version: String,
    /// Kernel release, e.g. `5.15.0-1055-aws`.
    #[serde(default)]
    pub kernel: Option<String>,
}

/// A per-pool driver override.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolDriver {
    /// Driver version, e.g. `595.91.07`.
    #[serde(deserialize_with = "version_text")]
    #[schemars(example = &"595.91.07")]
    pub version: String,
    /// Kernel module flavour (defaults to the cluster's).
    #[serde(default)]
    pub kernel_module_type: Option<KernelModuleType>,
}

/// GPU sharing mode.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionMode {
    /// Whole GPUs.
    #[default]
    None,
    /// Multi-Instance GPU.
    Mig,
    /// CUDA time-slicing.
    TimeSlicing,
    /// CUDA Multi-Process Service.
    Mps,
}

/// How a pool's GPUs are partitioned.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Partitioning {
    /// Sharing mode.
    #[serde(default)]
    pub mode: PartitionMode,
    /// MIG layout (mode `mig`).
    #[serde(default)]
    pub mig: Option<Mig>,
    /// Time-slicing (mode `time-slicing`).
    #[serde(default)]
    pub time_slicing: Option<TimeSlicing>,
    /// MPS (mode `mps`).
    #[serde(default)]
    pub mps: Option<Mps>,
}

/// MIG strategy as the device plugin exposes it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum MigStrategy {
    /// Every GPU exposes one profile as `nvidia.com/gpu`.
    #[default]
    Single,
    /// Each profile is its own `nvidia.com/mig-<profile>` resource.
    Mixed,
}

/// MIG layout of a pool.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mig {
    /// Device plugin strategy.
    #[serde(default)]
    pub strategy: MigStrategy,
    /// Instances per GPU, applied to every GPU of the node.
    #[serde(default)]
    pub layout: Option<BTreeMap<String, u32>>,
    /// Instances per group of GPU indices (exclusive with `layout`).
    #[serde(default)]
    pub devices: Option<Vec<MigDevices>>,
}

/// A MIG layout for some GPU indices.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigDevices {
    /// GPU indices.
    pub gpus: Vec<u32>,
    /// Instances per GPU of this group.
    pub layout: BTreeMap<String, u32>,
}

/// Time-slicing settings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeSlicing {
    /// Replicas per GPU.
    pub replicas: u32,
    /// Advertise `nvidia.com/gpu.shared` instead of `nvidia.com/gpu`.
    #[serde(default)]
    pub rename_by_default: bool,
    /// Reject requests for more than one shared GPU.
    #[serde(default)]
    pub fail_requests_greater_than_one: bool,
}

/// MPS settings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mps {
    /// Replicas per GPU.
    #[schemars(example = 4)]
    pub replicas: u32,
    /// Advertise `nvidia.com/gpu.shared` instead of `nvidia.com/gpu`.
    #[serde(default)]
    pub rename_by_default: bool,
}

/// Interconnect.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Interconnect {
    /// NVSwitch fabric.
    Nvswitch,
    /// NVLink bridges.
    Nvlink,
    /// PCIe only.
    Pcie,
}

/// Network fabric.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Fabric {
    /// InfiniBand.
    Infiniband,
    /// RDMA over Converged Ethernet.
    Roce,
    /// Plain Ethernet.
    Ethernet,
}

/// Topology of a node and its network.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Topology {
    /// GPU interconnect.
    #[serde(default)]
    pub interconnect: Option<Interconnect>,
    /// NUMA nodes per machine.
    #[serde(default)]
    pub numa_nodes: Option<u32>,
    /// Node network.
    #[serde(default)]
    pub network: Option<Network>,
    /// Node labels naming the pool's topology domains, widest first (for example block, rack,
    /// host). gpuctl renders them as a Kueue `Topology` the pool's ResourceFlavor names, so
    /// workloads can ask for "same rack" or "same NVLink domain"; the last level should be
    /// `kubernetes.io/hostname` when pods are to be placed per node.
    #[serde(default)]
    #[schemars(example = &TOPOLOGY_LEVELS_EXAMPLE)]
    pub levels: Vec<String>,
    /// The kubelet's NUMA alignment on the pool's nodes, rendered as a KubeletConfiguration
    /// fragment per pool (`kubelet/<pool>.yaml`) for node provisioning.
    #[serde(default)]
    pub kubelet: Option<KubeletNuma>,
}

/// `gpuctl explain --fields` shows this for `topology.levels`.
const TOPOLOGY_LEVELS_EXAMPLE: [&str; 3] = [
    "topology.example.com/block",
    "topology.example.com/rack",
    "kubernetes.io/hostname",
];

/// The kubelet's Topology Manager policy.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyManagerPolicy {
    /// No alignment (the kubelet's default).
    None,
    /// Prefer aligned resources, admit anyway.
    BestEffort,
    /// Refuse pods whose resources cannot be aligned to the preferred NUMA nodes.
    Restricted,
    /// Refuse pods whose resources do not fit one NUMA node.
    SingleNumaNode,
}

/// The kubelet's Topology Manager scope.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TopologyManagerScope {
    /// Align each container on its own (the kubelet's default).
    Container,
    /// Align all containers of a pod together.
    Pod,
}

/// The kubelet's CPU Manager policy.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CpuManagerPolicy {
    /// Shared CPU pool only (the kubelet's default).
    None,
    /// Exclusive CPUs for Guaranteed pods with integer CPU requests.
    Static,
}

/// The kubelet's Memory Manager policy (spelt as the kubelet spells it).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub enum MemoryManagerPolicy {
    /// No NUMA memory pinning (the kubelet's default).
    None,
    /// NUMA-pinned memory for Guaranteed pods.
    Static,
}

/// Per-pool kubelet NUMA settings (KubeletConfiguration fields of the same names).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeletNuma {
    /// `topologyManagerPolicy`.
    #[serde(default)]
    #[schemars(example = &"single-numa-node")]
    pub topology_manager_policy: Option<TopologyManagerPolicy>,
    /// `topologyManagerScope`.
    #[serde(default)]
    #[schemars(example = &"pod")]
    pub topology_manager_scope: Option<TopologyManagerScope>,
    /// `cpuManagerPolicy`.
    #[serde(default)]
    #[schemars(example = &"static")]
    pub cpu_manager_policy: Option<CpuManagerPolicy>,
    /// `memoryManagerPolicy`.
    #[serde(default)]
    #[schemars(example = &"Static")]
    pub memory_manager_policy: Option<MemoryManagerPolicy>,
    /// `reservedSystemCPUs`: CPUs kept for the system and the kubelet, e.g. `"0-1"`. The static
    /// CPU manager refuses to start without a CPU reservation.
    #[serde(default, rename = "reservedSystemCPUs")]
    #[schemars(example = &"0-1")]
    pub reserved_system_cpus: Option<String>,
    /// Memory reserved per NUMA node for the Static memory manager (`reservedMemory`), as a
    /// quantity per NUMA node id, e.g. `{ "0": 1Gi, "1": 1Gi }`. Its sum must equal the node's
    /// kube-reserved + system-reserved + eviction threshold memory, which the kubelet checks.
    #[serde(default)]
    pub reserved_memory: BTreeMap<String, Quantity>,
}

/// Node network.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Network {
    /// Fabric.
    pub fabric: Fabric,
    /// NICs per node.
    #[serde(default)]
    pub nics_per_node: Option<u32>,
    /// GPUDirect RDMA enabled.
    #[serde(default, rename = "gpuDirectRDMA")]
    pub gpu_direct_rdma: bool,
    /// MTU of the RDMA interfaces the runbook checks against (e.g. 4096 on InfiniBand, 9000 on
    /// RoCE); the runbook says to compare it with `ip link` on a node.
    #[serde(default)]
    #[schemars(example = 4096)]
    pub mtu: Option<u32>,
}

/// How GPUDirect RDMA registers GPU memory with the NIC.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RdmaMechanism {
    /// The Linux kernel's DMA-BUF (NVIDIA's recommendation): open kernel modules and a recent
    /// kernel; the GPU Operator loads no extra module.
    #[default]
    DmaBuf,
    /// The legacy `nvidia-peermem` module, loaded by the driver container
    /// (`driver.rdma.enabled: true`); needs the MOFED/DOCA NIC driver.
    NvidiaPeermem,
}

/// GPUDirect RDMA settings of the GPU Operator, used when a pool sets
/// `topology.network.gpuDirectRDMA`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rdma {
    /// `dma-buf` (default) or `nvidia-peermem`.
    #[serde(default)]
    pub mechanism: RdmaMechanism,
    /// The hosts carry the NIC driver (MOFED/DOCA-OFED installed on the host, not by the Network
    /// Operator): `driver.rdma.useHostMofed`.
    #[serde(default)]
    #[schemars(example = true)]
    pub use_host_mofed: bool,
}

/// Taint effect.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub enum TaintEffect {
    /// Do not schedule.
    NoSchedule,
    /// Avoid scheduling.
    PreferNoSchedule,
    /// Evict running pods.
    NoExecute,
}

/// A node taint.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value.
    #[serde(default)]
    pub value: Option<String>,
    /// Effect.
    pub effect: TaintEffect,
}

/// Whether a PriorityClass may preempt.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
pub enum PreemptionPolicy {
    /// Preempt lower-priority pods.
    #[default]
    PreemptLowerPriority,
    /// Never preempt.
    Never,
}

/// A PriorityClass.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriorityClass {
    /// Name.
    pub name: String,
    /// Priority value.
    pub value: i64,
    /// Preemption policy.
    #[serde(default)]
    pub preemption_policy: PreemptionPolicy,
    /// Default for pods without a class.
    #[serde(default)]
    pub global_default: bool,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
}

/// Which queueing system the cluster runs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Queueing {
    /// Kueue.
    Kueue,
    /// Volcano.
    Volcano,
    /// No queueing: quotas only.
    #[default]
    None,
}

/// Queueing configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scheduling {
    /// Queueing system.
    #[serde(default)]
    pub queueing: Queueing,
    /// Kueue objects.
    #[serde(default)]
    pub kueue: Option<Kueue>,
    /// Volcano objects.
    #[serde(default)]
    pub volcano: Option<Volcano>,
}

/// Kueue configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kueue {
    /// Kueue release, e.g. `v0.19.2`.
    #[serde(deserialize_with = "version_text")]
    pub version: String,
    /// How Kueue itself is handled: `none` (the default: someone else runs it, and a live plan
    /// compares its manager ConfigMap with `config`), `helm` or `gitops` (gpuctl renders the
    /// chart's `managerConfig` values from `config`).
    #[serde(default = "install_none")]
    #[schemars(example = &"gitops")]
    pub install: InstallMode,
    /// The settings of Kueue's own Configuration that the queues depend on (fair sharing, quota
    /// check, resource transformations, integrated frameworks, waiting for pods ready). Absent
    /// settings mean Kueue's defaults.
    #[serde(default)]
    pub config: KueueConfig,
    /// Where Kueue's chart comes from with `install: helm` (default: the chart Kueue publishes,
    /// `oci://registry.k8s.io/kueue/charts/kueue`), as for `gpuOperator.chart`.
    #[serde(default)]
    pub chart: ChartSourceSpec,
    /// Moved to `config.resources.excludeResourcePrefixes` (reported by GPU116).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub exclude_resource_prefixes: Option<serde_json::Value>,
    /// Moved to `config.resources.quotaCheckStrategy` (reported by GPU116).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub quota_check_strategy: Option<serde_json::Value>,
    /// Cohorts.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub cohorts: Vec<Cohort>,
    /// ClusterQueues.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub cluster_queues: Vec<ClusterQueue>,
}

fn install_none() -> InstallMode {
    InstallMode::None
}

/// `gpuctl explain --fields` shows this for `config.integrations.frameworks`.
const FRAMEWORKS_EXAMPLE: [&str; 2] = ["batch/job", "jobset.x-k8s.io/jobset"];
/// `gpuctl explain --fields` shows this for `config.resources.excludeResourcePrefixes`.
const EXCLUDE_EXAMPLE: [&str; 1] = ["example.com/"];
/// `gpuctl explain --fields` shows this for `config.fairSharing.preemptionStrategies`.
const STRATEGIES_EXAMPLE: [&str; 1] = ["LessThanOrEqualToFinalShare"];

/// Kueue's Configuration (`config.kueue.x-k8s.io/v1beta2`), the parts gpuctl's rules depend on.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KueueConfig {
    /// Kueue's `fairSharing`: present turns fair sharing on, so the `fairSharingWeight` of
    /// cohorts and cluster queues takes effect (absent: Kueue ignores the weights).
    #[serde(default)]
    pub fair_sharing: Option<KueueFairSharing>,
    /// Kueue's `resources`: which requested resources are checked against quota, and how.
    #[serde(default)]
    pub resources: KueueResources,
    /// Kueue's `integrations`: the job frameworks Kueue manages (absent: the chart's list).
    #[serde(default)]
    pub integrations: Option<KueueIntegrations>,
    /// Kueue's `waitForPodsReady`: all-or-nothing admission for gangs.
    #[serde(default)]
    pub wait_for_pods_ready: Option<KueueWaitForPodsReady>,
    /// Kueue's `multiKueue`, on a MultiKueue manager: set only by a fleet, from its
    /// `multiKueue.dispatcher`, for its manager (MultiKueue needs a fleet, so the fleet file is
    /// the one place that says it); never read from a blueprint file.
    #[serde(skip)]
    #[schemars(skip)]
    pub multi_kueue: Option<KueueMultiKueue>,
}

/// Kueue's `multiKueue` settings gpuctl renders.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KueueMultiKueue {
    /// How the manager picks workers for a workload (absent: Kueue's default, `AllAtOnce`).
    #[serde(default)]
    pub dispatcher: Option<MultiKueueDispatcher>,
}

/// Kueue's MultiKueue dispatchers (Kueue v0.19 `multiKueue.dispatcherName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MultiKueueDispatcher {
    /// Every worker gets a copy; the first to admit wins (Kueue's default).
    AllAtOnce,
    /// Workers are tried a few at a time, in the MultiKueueConfig's order.
    Incremental,
}

impl KueueConfig {
    /// The quota check strategy in force (Kueue's default when unset).
    pub fn quota_check(&self) -> QuotaCheckStrategy {
        self.resources.quota_check_strategy.unwrap_or_default()
    }
}

/// Kueue's `fairSharing`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KueueFairSharing {
    /// Preemption strategies, in order (absent: gpuctl writes `[LessThanOrEqualToFinalShare,
    /// LessThanInitialShare]`, the list Kueue's v1beta1 API defaulted to; Kueue v0.19 requires
    /// one).
    #[serde(default)]
    #[schemars(example = &STRATEGIES_EXAMPLE)]
    pub preemption_strategies: Vec<String>,
}

/// Kueue's `resources`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KueueResources {
    /// `BlockUndeclared` (Kueue's default) keeps a workload pending when it requests a resource
    /// its ClusterQueue does not cover; `IgnoreUndeclared` (Kueue v0.18 and later) checks only
    /// the covered ones.
    #[serde(default)]
    #[schemars(example = &"IgnoreUndeclared")]
    pub quota_check_strategy: Option<QuotaCheckStrategy>,
    /// Resource-name prefixes Kueue ignores at admission, so cluster queues need no quota for
    /// them.
    #[serde(default)]
    #[schemars(example = &EXCLUDE_EXAMPLE)]
    pub exclude_resource_prefixes: Vec<String>,
    /// How requested resources are turned into the resources Kueue charges (for example MIG
    /// slices counted as GPU-equivalents).
    #[serde(default)]
    pub transformations: Vec<ResourceTransformation>,
}

/// One of Kueue's `resources.transformations`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceTransformation {
    /// The requested resource, e.g. `nvidia.com/mig-1g.10gb`.
    #[schemars(example = &"nvidia.com/mig-1g.10gb")]
    pub input: String,
    /// `Retain` (Kueue's default: the input is charged too) or `Replace` (only the outputs are).
    #[serde(default)]
    pub strategy: TransformationStrategy,
    /// Resources charged per unit of the input.
    #[serde(default)]
    #[schemars(example = outputs_example())]
    pub outputs: BTreeMap<String, Quantity>,
}

/// `gpuctl explain --fields` shows this for `transformations[].outputs`.
fn outputs_example() -> serde_json::Value {
    serde_json::json!({ "example.com/gpu-equivalent": "500m" })
}

/// `resources.transformations[].strategy`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
pub enum TransformationStrategy {
    /// The input is charged as well as the outputs.
    #[default]
    Retain,
    /// Only the outputs are charged.
    Replace,
}

/// Kueue's `integrations`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KueueIntegrations {
    /// Framework names, e.g. `batch/job`.
    #[serde(default)]
    #[schemars(example = &FRAMEWORKS_EXAMPLE)]
    pub frameworks: Vec<String>,
}

/// Kueue's `waitForPodsReady`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KueueWaitForPodsReady {
    /// Time for an admitted workload's pods to become ready before it is evicted, e.g. `5m`.
    #[schemars(example = &"10m")]
    pub timeout: String,
    /// Block further admissions in the queue until the admitted workload's pods are ready.
    #[serde(default)]
    #[schemars(example = true)]
    pub block_admission: Option<bool>,
}

/// Kueue's `resources.quotaCheckStrategy`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
pub enum QuotaCheckStrategy {
    /// Every requested resource must be covered by the ClusterQueue (Kueue's default).
    #[default]
    BlockUndeclared,
    /// Resources the ClusterQueue does not cover are not checked.
    IgnoreUndeclared,
}

/// A Kueue Cohort.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cohort {
    /// Name.
    pub name: String,
    /// Parent cohort.
    #[serde(default)]
    #[schemars(example = &"all-gpus")]
    pub parent: Option<String>,
    /// Fair-sharing weight.
    #[serde(default)]
    pub fair_sharing_weight: Option<Quantity>,
}

/// A Kueue ClusterQueue.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterQueue {
    /// Name.
    pub name: String,
    /// Cohort it borrows from and lends to.
    #[serde(default)]
    pub cohort: Option<String>,
    /// Fair-sharing weight.
    #[serde(default)]
    pub fair_sharing_weight: Option<Quantity>,
    /// Preemption policy.
    #[serde(default)]
    pub preemption: Option<Preemption>,
    /// One entry per pool used as a ResourceFlavor.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["pool"]))]
    pub resources: Vec<FlavorQuota>,
}

/// ClusterQueue preemption policy.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Preemption {
    /// Within the ClusterQueue.
    #[serde(default)]
    pub within_cluster_queue: Option<WithinClusterQueue>,
    /// Reclaiming lent quota within the cohort.
    #[serde(default)]
    pub reclaim_within_cohort: Option<ReclaimWithinCohort>,
    /// Preempting while borrowing.
    #[serde(default)]
    pub borrow_within_cohort: Option<BorrowWithinCohort>,
}

/// `preemption.withinClusterQueue`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub enum WithinClusterQueue {
    /// Never preempt.
    Never,
    /// Preempt lower priority.
    LowerPriority,
    /// Preempt lower or newer equal priority.
    LowerOrNewerEqualPriority,
}

/// `preemption.reclaimWithinCohort`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub enum ReclaimWithinCohort {
    /// Never reclaim.
    Never,
    /// Reclaim from lower priority.
    LowerPriority,
    /// Reclaim from any.
    Any,
}

/// `preemption.borrowWithinCohort.policy`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub enum BorrowWithinCohort {
    /// Never preempt while borrowing.
    Never,
    /// Preempt lower priority while borrowing.
    LowerPriority,
}

/// Quota of one ClusterQueue on one pool's flavor.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlavorQuota {
    /// Node pool (its ResourceFlavor).
    pub pool: String,
    /// Nominal quota per resource.
    pub quota: BTreeMap<String, Quantity>,
    /// Most that may be borrowed per resource.
    #[serde(default)]
    pub borrowing_limit: BTreeMap<String, Quantity>,
    /// Most that may be lent per resource.
    #[serde(default)]
    pub lending_limit: BTreeMap<String, Quantity>,
}

/// Volcano configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Volcano {
    /// Volcano release, e.g. `v1.15.1`.
    #[serde(deserialize_with = "version_text")]
    pub version: String,
    /// How Volcano itself is handled: `none` (the default: someone else runs it), `helm` (apply
    /// installs Volcano's chart as release `volcano` in `volcano-system` before the first queue,
    /// upgrades it when its values change, and uninstalls it, keeping the CRDs, once the
    /// blueprint drops Volcano and no Volcano object is left) or `gitops` (gpuctl renders the
    /// chart's values for a GitOps controller).
    #[serde(default = "install_none")]
    #[schemars(example = &"helm")]
    pub install: InstallMode,
    /// Where Volcano's chart comes from with `install: helm` (default: the chart Volcano
    /// publishes, `volcano` in `https://volcano-sh.github.io/helm-charts`), as for
    /// `gpuOperator.chart`.
    #[serde(default)]
    pub chart: ChartSourceSpec,
    /// Chart values for Volcano's release (`install: helm` or `gitops`), passed as given, e.g.
    /// `basic.image_registry` for a registry mirror or `custom.scheduler_replicas`. Only the
    /// chart's own top-level sections (`basic`, `custom`, `service`) are accepted (GPU118).
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    #[schemars(example = volcano_values_example())]
    pub values: serde_json::Map<String, serde_json::Value>,
    /// Queues.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub queues: Vec<VolcanoQueue>,
}

/// `gpuctl explain --fields` shows this for `scheduling.volcano.values`.
fn volcano_values_example() -> serde_json::Value {
    serde_json::json!({ "basic": { "image_registry": "registry.internal.example:5000" } })
}

/// A Volcano Queue.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolcanoQueue {
    /// Name.
    pub name: String,
    /// Parent queue (`root` is implicit).
    #[serde(default)]
    pub parent: Option<String>,
    /// Weight, 1..65535.
    #[serde(default)]
    pub weight: Option<i64>,
    /// Upper bound per resource.
    #[serde(default)]
    pub capability: BTreeMap<String, Quantity>,
    /// Fair share per resource.
    #[serde(default)]
    pub deserved: BTreeMap<String, Quantity>,
    /// Reserved per resource.
    #[serde(default)]
    pub guarantee: BTreeMap<String, Quantity>,
    /// May be reclaimed.
    #[serde(default)]
    pub reclaimable: Option<bool>,
}

/// A team.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tenant {
    /// DNS-1123 label.
    pub name: String,
    /// Namespaces the tenant owns.
    pub namespaces: Vec<String>,
    /// Default PriorityClass of its workloads.
    #[serde(default)]
    pub priority_class: Option<String>,
    /// Kueue ClusterQueue or Volcano queue.
    #[serde(default)]
    pub queue: Option<String>,
    /// ResourceQuota hard limits per namespace.
    #[serde(default)]
    pub quota: BTreeMap<String, Quantity>,
    /// LimitRange container defaults.
    #[serde(default)]
    pub defaults: BTreeMap<String, Quantity>,
    /// CUDA toolkit versions the tenant's images use.
    #[serde(default, deserialize_with = "version_list")]
    pub cuda: Vec<String>,
    /// DRA device shapes (`spec.dra.shapes`) the tenant may claim, with the devices of each its
    /// namespaces may hold at once: a ResourceClaimTemplate per shape in each namespace, and a
    /// ResourceQuota that allows these and no other GPU device class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(example = &claims_example())]
    pub claims: BTreeMap<String, u32>,
    /// ComputeDomains (multi-node NVLink jobs on NVL72 racks) each of the tenant's namespaces
    /// may hold at once: gpuctl lets namespace editors create them (NVIDIA's driver grants no
    /// role for them) and caps them with an object-count quota; other tenants with claims get 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(example = &4)]
    pub compute_domains: u32,
    /// Device taints the tenant's ResourceClaimTemplates tolerate (none by default: a tainted
    /// device, by NVIDIA's driver after an Xid or by `spec.dra.maintenance`, is never allocated
    /// to them). E.g. `{key: gpu.nvidia.com/xid, operator: Exists, effect: NoSchedule}` for a
    /// tenant whose jobs checkpoint and can run on a GPU that reported an Xid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_tolerations: Vec<super::dra::DeviceToleration>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Monitoring.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Monitoring {
    /// Render a ServiceMonitor.
    #[serde(default)]
    pub service_monitor: bool,
    /// Alerts.
    #[serde(default)]
    pub alerts: Alerts,
}

/// Alert rules to render.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Alerts {
    /// Xid error alerts.
    #[serde(default)]
    pub xid: bool,
    /// ECC error alerts.
    #[serde(default)]
    pub ecc_errors: bool,
    /// GPU temperature threshold in Celsius.
    #[serde(default)]
    pub temperature_c: Option<u32>,
}

/// Upgrade strategy.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum UpgradeStrategy {
    /// Batches move to a new colour.
    #[default]
    BlueGreen,
    /// The operator's in-place rolling upgrade.
    Rolling,
}

/// Upgrade policy.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Upgrades {
    /// Strategy.
    #[serde(default)]
    pub strategy: UpgradeStrategy,
    /// Blue-green settings.
    #[serde(default)]
    pub blue_green: Option<BlueGreen>,
}

/// Blue-green settings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlueGreen {
    /// Node label carrying the colour.
    #[serde(default = "default_color_label")]
    pub color_label: String,
    /// Share of a pool moved per step (`25%` or a count).
    #[serde(default = "default_batch")]
    pub batch: IntOrString,
    /// Drain timeout, e.g. `30m`.
    #[serde(default = "default_drain_timeout")]
    pub drain_timeout: String,
    /// Wait for running jobs instead of evicting them.
    #[serde(default)]
    pub wait_for_jobs: bool,
}

/// Node label carrying a pool's colour during a blue-green driver upgrade, unless the blueprint
/// names another (`upgrades.blueGreen.colorLabel`); `names` re-exports it with the other labels.
pub const DEFAULT_COLOR_LABEL: &str = "gpuctl.dev/color";

fn default_color_label() -> String {
    DEFAULT_COLOR_LABEL.to_string()
}

fn default_batch() -> IntOrString {
    BlueGreen::default_batch()
}

impl BlueGreen {
    /// `batch` when the blueprint does not say.
    pub fn default_batch() -> IntOrString {
        IntOrString::String("25%".to_string())
    }
}

fn default_drain_timeout() -> String {
    "30m".to_string()
}

fn claims_example() -> BTreeMap<String, u32> {
    BTreeMap::from([("h100".to_string(), 16), ("mig-1g".to_string(), 14)])
}
