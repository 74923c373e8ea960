//! How a pool's nodes come to exist (`nodePools[].provisioner`) and how a new GPU node is kept
//! from work until its GPU stack is up (`spec.nodeReadiness`): Karpenter NodePools, Cluster API
//! MachineDeployments, managed node groups (EKS, GKE, AKS), or nodes that are simply there
//! (`static`, the default). docs/node-pools.md says what each renders and which rules check it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What makes a pool's nodes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Provisioner {
    /// `static` (the nodes exist; gpuctl finds them by `selector`), `karpenter` (gpuctl renders a
    /// Karpenter NodePool and the NodeOverlay that declares the pool's MIG or shared resources),
    /// `clusterAPI` (gpuctl renders the Cluster Autoscaler's scale-from-zero annotations for a
    /// MachineDeployment) or `managed` (an EKS, GKE or AKS node group: gpuctl renders nothing for
    /// the group itself and prints the settings it must have).
    #[serde(rename = "type", default)]
    #[schemars(example = &"karpenter")]
    pub kind: ProvisionerKind,
    /// Fewest nodes the provisioner keeps (0: the pool scales to zero). Not for `static`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = 0)]
    pub min_nodes: Option<u32>,
    /// Most nodes the provisioner may make; capacity checks (quotas, queues) use it. Required
    /// unless `static`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = 4)]
    pub max_nodes: Option<u32>,
    /// Instance types the pool may use: names of the catalog `profiles/provisioning.yaml`
    /// (`p5.48xlarge`), each checked against the pool's `gpu` (model and count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(example = instance_types_example())]
    pub instance_types: Vec<String>,
    /// The cloud platform: `eks`, `gke` or `aks` (needed for `managed`; for `karpenter` it picks
    /// the NodeClass kind: EC2NodeClass on eks, AKSNodeClass on aks; `kwok` is Karpenter's test
    /// provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"eks")]
    pub platform: Option<Platform>,
    /// Who installs the GPU driver and container toolkit on the pool's nodes: `host` (the node
    /// image brings them: EKS AL2023/Bottlerocket NVIDIA AMIs, AKS's default driver, GKE's
    /// installer) or `operator` (the GPU Operator's driver and toolkit containers). Default: the
    /// platform's (profiles/provisioning.yaml), `operator` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"host")]
    pub driver: Option<DriverOwner>,
    /// Karpenter: the NodeClass the NodePool references by name (its kind follows `platform`);
    /// gpuctl does not render the NodeClass itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"gpu")]
    pub node_class: Option<String>,
    /// Karpenter: when nodes may be taken away. Default for `role: training`: only empty nodes
    /// (`WhenEmpty`), after one hour, never an underutilized one (a budget of 0 for reason
    /// `Underutilized`), and drift (a driver upgrade) `upgrades.blueGreen.batch` nodes at a time;
    /// for other roles Karpenter's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    /// Karpenter: how long a node lives before it is replaced (`720h`, `Never`). Default for
    /// `role: training`: `Never` (an expiring node ends a running job whatever `do-not-disrupt` says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"Never")]
    pub expire_after: Option<String>,
    /// Karpenter: render a NodeOverlay declaring the MIG or shared resources the pool's nodes will
    /// advertise (default `true`; needs Karpenter's `NodeOverlay` feature gate). Without it a pool at
    /// zero is never chosen for a pod asking for such a resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = true)]
    pub node_overlay: Option<bool>,
    /// Cluster API: the MachineDeployment whose scale-from-zero annotations gpuctl renders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_deployment: Option<MachineDeploymentRef>,
    /// `managed`: the resources the node group's template declares for scale from zero (ASG/VMSS
    /// `node-template/resources` tags, GKE `gpu-partition-size`), resource name -> per node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(example = template_resources_example())]
    pub template_resources: BTreeMap<String, u64>,
}

fn instance_types_example() -> Vec<String> {
    vec!["p5.48xlarge".to_string()]
}

fn template_resources_example() -> BTreeMap<String, u64> {
    BTreeMap::from([("nvidia.com/mig-1g.10gb".to_string(), 56)])
}

impl Provisioner {
    /// Whether this is the default (`static` with nothing else set), left out when serialising.
    pub fn is_static_default(&self) -> bool {
        *self == Provisioner::default()
    }
    /// Whether something other than the blueprint decides the node count.
    pub fn scales(&self) -> bool {
        self.kind != ProvisionerKind::Static
    }
    /// Whether the pool may have no node at all.
    pub fn can_reach_zero(&self) -> bool {
        self.scales() && self.min_nodes.unwrap_or(0) == 0
    }
}

/// What makes a pool's nodes (`provisioner.type`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ProvisionerKind {
    /// The nodes exist; nothing scales them.
    #[default]
    Static,
    /// Karpenter (NodePool).
    Karpenter,
    /// The Cluster Autoscaler over a Cluster API MachineDeployment.
    #[serde(rename = "clusterAPI")]
    ClusterApi,
    /// A cloud's managed node group.
    Managed,
}

impl ProvisionerKind {
    /// The name the blueprint uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ProvisionerKind::Static => "static",
            ProvisionerKind::Karpenter => "karpenter",
            ProvisionerKind::ClusterApi => "clusterAPI",
            ProvisionerKind::Managed => "managed",
        }
    }
}

/// A cloud platform (or Karpenter's KWOK test provider).
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord,
)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Amazon EKS.
    Eks,
    /// Google GKE.
    Gke,
    /// Azure AKS.
    Aks,
    /// Karpenter's KWOK provider (tests; no real machines).
    Kwok,
}

impl Platform {
    /// The name the blueprint and profiles use.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Eks => "eks",
            Platform::Gke => "gke",
            Platform::Aks => "aks",
            Platform::Kwok => "kwok",
        }
    }
}

/// Who installs the driver and toolkit.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DriverOwner {
    /// The node image.
    Host,
    /// The GPU Operator.
    Operator,
}

impl DriverOwner {
    /// The name the blueprint and profiles use.
    pub fn as_str(self) -> &'static str {
        match self {
            DriverOwner::Host => "host",
            DriverOwner::Operator => "operator",
        }
    }
}

/// Karpenter's disruption settings for a pool.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Disruption {
    /// `WhenEmpty`, `WhenEmptyOrUnderutilized` or `Balanced` (Karpenter's names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"WhenEmpty")]
    pub consolidation_policy: Option<String>,
    /// How long a node must be consolidatable first (`1h`, `Never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"1h")]
    pub consolidate_after: Option<String>,
    /// Disruption budgets, as Karpenter takes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<Budget>,
}

/// One Karpenter disruption budget.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// Nodes that may be disrupted at once: a count or a percentage (`"0"`, `"10%"`).
    #[schemars(example = &"0")]
    pub nodes: String,
    /// The reasons it applies to (`Underutilized`, `Empty`, `Drifted`, `Unhealthy`); all when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(example = reasons_example())]
    pub reasons: Vec<String>,
    /// Cron schedule when it is active (with `duration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"0 9 * * mon-fri")]
    pub schedule: Option<String>,
    /// How long it is active from each `schedule` start (`8h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"8h")]
    pub duration: Option<String>,
}

/// A Cluster API MachineDeployment.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineDeploymentRef {
    /// Its name.
    #[schemars(example = &"gpu-md-0")]
    pub name: String,
    /// Its namespace.
    #[serde(default = "default_capi_namespace")]
    #[schemars(example = &"default")]
    pub namespace: String,
}

fn reasons_example() -> Vec<String> {
    vec!["Underutilized".to_string()]
}

fn default_capi_namespace() -> String {
    "default".to_string()
}

/// How a new GPU node is kept free of work until its driver, toolkit and device plugin are up
/// (`spec.nodeReadiness`): one startup taint key rendered everywhere it must match, and the
/// signal that removes it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeReadiness {
    /// The startup taint's key (NVIDIA's example uses `readiness.k8s.io/nvidia-gpu-not-ready`);
    /// the Node Readiness Controller accepts only keys under `readiness.k8s.io/` (GPU1400).
    #[schemars(example = &"readiness.k8s.io/nvidia-gpu-not-ready")]
    pub taint_key: String,
    /// What removes the taint: `nodeReadinessController` (gpuctl renders the NodeReadinessRule
    /// that waits for Node Problem Detector's GPU condition) or `external` (something else does;
    /// gpuctl renders only the taint and the tolerations).
    #[serde(default)]
    #[schemars(example = &"nodeReadinessController")]
    pub signal: ReadinessSignal,
}

/// What removes the readiness taint.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ReadinessSignal {
    /// The Node Readiness Controller, from Node Problem Detector's condition.
    #[default]
    NodeReadinessController,
    /// Something gpuctl does not render.
    External,
}
