//! What rendering produces: ordered, owned objects, node patches, the operator's Helm release and
//! documents. Plan and apply consume exactly this; nothing downstream re-reads the blueprint.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Apply phases, in order. Each phase's objects are applied (and gated) before the next starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Namespaces and PriorityClasses (and the ApplySet parent).
    Foundation,
    /// GPU Operator release values, NVIDIADriver CRs, MIG Manager and device-plugin ConfigMaps;
    /// the Network Operator's NicClusterPolicy and secondary network.
    Operator,
    /// NVIDIA IPAM pools (IPPool, CIDRPool): their CRDs are applied by the Network Operator once
    /// the NicClusterPolicy of the operator phase enables `nvIpam`, so they come after it.
    Network,
    /// ResourceQuotas and LimitRanges.
    Quotas,
    /// Kueue ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, WorkloadPriorityClasses;
    /// Volcano Queues.
    Queues,
    /// dcgm-exporter metrics ConfigMap, ServiceMonitor, PrometheusRule.
    Monitoring,
}

impl Phase {
    /// All phases in apply order.
    pub const ALL: [Phase; 6] = [
        Phase::Foundation,
        Phase::Operator,
        Phase::Network,
        Phase::Quotas,
        Phase::Queues,
        Phase::Monitoring,
    ];
}

/// One Kubernetes object gpuctl owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenderedObject {
    /// When it is applied.
    pub phase: Phase,
    /// `apiVersion`, e.g. `kueue.x-k8s.io/v1beta2`.
    pub api_version: String,
    /// `kind`, e.g. `ClusterQueue`.
    pub kind: String,
    /// Namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// The whole manifest (apiVersion, kind, metadata with gpuctl's labels, spec...).
    pub manifest: Value,
}

impl RenderedObject {
    /// API group (`""` for core).
    pub fn group(&self) -> &str {
        gpuctl_model::object::group_of(&self.api_version)
    }

    /// Its identity.
    pub fn object_ref(&self) -> gpuctl_model::object::ObjectRef {
        gpuctl_model::object::ObjectRef::new(
            &self.api_version,
            &self.kind,
            self.namespace.as_deref(),
            &self.name,
        )
    }

    /// Its API type.
    pub fn type_ref(&self) -> gpuctl_model::object::TypeRef {
        gpuctl_model::object::TypeRef::new(&self.api_version, &self.kind)
    }

    /// API version without the group.
    pub fn version(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or(self.api_version.as_str(), |(_, v)| v)
    }

    /// Sort key: phase, kind, namespace, name.
    pub fn sort_key(&self) -> (Phase, &str, &str, &str) {
        (
            self.phase,
            &self.kind,
            self.namespace.as_deref().unwrap_or(""),
            &self.name,
        )
    }

    /// `Kind/namespace/name` or `Kind/name`, for messages.
    pub fn display_id(&self) -> String {
        self.object_ref().to_string()
    }
}

/// Labels and taints gpuctl manages on the nodes of one pool, per key (never whole lists).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePatch {
    /// Pool name.
    pub pool: String,
    /// Equality selector of the pool's nodes.
    pub selector: BTreeMap<String, String>,
    /// Expected node count (for live checks).
    pub expected_nodes: u32,
    /// A pool a provisioner scales: the fewest and most nodes it may have (the live check takes
    /// any count between them instead of `expected_nodes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_range: Option<[u32; 2]>,
    /// Label key -> value gpuctl sets (pool labels, `nvidia.com/mig.config`,
    /// `nvidia.com/device-plugin.config`, ...).
    pub labels: BTreeMap<String, String>,
    /// Taints gpuctl ensures, by key.
    pub taints: Vec<NodeTaint>,
    /// Expected GFD product labels for the pool's GPU model (any of them), for live checks.
    pub expected_products: Vec<String>,
    /// Expected driver version on the pool.
    pub expected_driver: String,
    /// The blueprint upgrades drivers blue-green (`upgrades.strategy`): moving nodes between
    /// NVIDIADriver CRs is `gpuctl upgrade driver`'s job, never a plain apply's.
    #[serde(default)]
    pub blue_green: bool,
    /// Node labels of the pool's Kueue topology levels (`topology.levels`): plan reports nodes
    /// that lack one, which topology-aware scheduling cannot place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_levels: Vec<String>,
    /// On a pool moving to NVIDIA's DRA driver (`gpuPlugin: dra`, standalone path): the GPU
    /// Operator's per-node device-plugin label. A node whose value of it changes leaves the device
    /// plugin: plan refuses that while pods on it hold device-plugin GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dra_switch: Option<String>,
}

/// A taint gpuctl manages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTaint {
    /// Key.
    pub key: String,
    /// Value.
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// The stack a Helm release installs: which part of the cluster it provides, and so when apply
/// runs it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Stack {
    /// The NVIDIA GPU Operator (plans made before the field existed are the operator's).
    #[default]
    GpuOperator,
    /// The NVIDIA Network Operator.
    NetworkOperator,
    /// Kueue.
    Kueue,
    /// Volcano.
    Volcano,
    /// NVIDIA's DRA driver chart (the standalone path, `spec.dra.driver`).
    DraDriver,
}

impl Stack {
    /// The apply phase whose objects need the release (its CRDs, controllers and admission
    /// webhooks): apply runs the release just before that phase. The GPU Operator provides the
    /// NVIDIADriver CRD, the Network Operator the NicClusterPolicy and network CRDs (both
    /// applied in the operator phase, GPU Operator first: its Node Feature Discovery serves
    /// both); Kueue and Volcano their queue CRDs and webhooks (the queues phase).
    pub fn before(self) -> Phase {
        match self {
            Stack::GpuOperator | Stack::NetworkOperator | Stack::DraDriver => Phase::Operator,
            Stack::Kueue | Stack::Volcano => Phase::Queues,
        }
    }

    /// Name for messages (`GPU Operator`).
    pub fn title(self) -> &'static str {
        match self {
            Stack::GpuOperator => "GPU Operator",
            Stack::NetworkOperator => "Network Operator",
            Stack::Kueue => "Kueue",
            Stack::Volcano => "Volcano",
            Stack::DraDriver => "NVIDIA DRA driver",
        }
    }

    /// The blueprint field that configures it (`spec.gpuOperator`).
    pub fn field(self) -> &'static str {
        match self {
            Stack::GpuOperator => "spec.gpuOperator",
            Stack::NetworkOperator => "spec.networkOperator",
            Stack::Kueue => "spec.scheduling.kueue",
            Stack::Volcano => "spec.scheduling.volcano",
            Stack::DraDriver => "spec.dra.driver",
        }
    }
}

/// A Helm release gpuctl installs or hands to GitOps: the GPU Operator's, Kueue's, Volcano's, the
/// Network Operator's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelmRelease {
    /// What it installs (absent in plans made before gpuctl installed other releases: the GPU
    /// Operator).
    #[serde(default)]
    pub stack: Stack,
    /// Release name.
    pub release: String,
    /// Chart reference, e.g. `nvidia/gpu-operator`.
    pub chart: String,
    /// Chart version, e.g. `v26.7.0`.
    pub version: String,
    /// Target namespace.
    pub namespace: String,
    /// How apply handles the release (from the blueprint).
    pub install: gpuctl_model::blueprint::InstallMode,
    /// Rendered values (deep-merged overrides included).
    pub values: Value,
    /// Where the chart comes from (plans made before this field existed: NVIDIA's repository).
    #[serde(default)]
    pub source: ChartSource,
}

impl HelmRelease {
    /// The chart's name without its repository alias (`gpu-operator` of `nvidia/gpu-operator`).
    pub fn chart_name(&self) -> &str {
        self.chart
            .rsplit_once('/')
            .map_or(self.chart.as_str(), |(_, c)| c)
    }

    /// The chart as `helm upgrade --install RELEASE <this>` names it: `nvidia/gpu-operator` for
    /// NVIDIA's repository, `gpu-operator --repo URL` for another, the OCI reference or the path.
    pub fn chart_reference(&self) -> String {
        match &self.source {
            ChartSource::Repository { url } if url == super::helm::CHART_REPOSITORY => {
                self.chart.clone()
            }
            ChartSource::Repository { url } => format!("{} --repo {url}", self.chart_name()),
            ChartSource::Oci { reference } => reference.clone(),
            ChartSource::Path { path, .. } => path.clone(),
        }
    }
}

/// Where a release's chart comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "lowercase")]
pub enum ChartSource {
    /// A Helm repository: `helm upgrade --install RELEASE gpu-operator --repo URL`.
    Repository {
        /// Repository URL.
        url: String,
    },
    /// An OCI reference, `oci://registry/path/gpu-operator`.
    Oci {
        /// The reference.
        reference: String,
    },
    /// A chart archive or directory next to the blueprint.
    Path {
        /// As the blueprint writes it (relative to the blueprint file).
        path: String,
        /// Where it was found when the plan was made (absolute).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolved: Option<String>,
        /// `sha256:<hex>` of the archive when the plan was made; apply refuses another archive.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        digest: Option<String>,
    },
}

impl ChartSource {
    /// The chart source a blueprint names (validation has checked there is at most one), `default`
    /// when it names none.
    pub(crate) fn from_spec(
        spec: &gpuctl_model::blueprint::ChartSourceSpec,
        default: ChartSource,
    ) -> ChartSource {
        if let Some(path) = &spec.path {
            return ChartSource::Path {
                path: path.clone(),
                resolved: None,
                digest: None,
            };
        }
        if let Some(reference) = &spec.oci {
            return ChartSource::Oci {
                reference: reference.clone(),
            };
        }
        match &spec.repository {
            Some(url) => ChartSource::Repository { url: url.clone() },
            None => default,
        }
    }
}

impl Default for ChartSource {
    fn default() -> Self {
        ChartSource::Repository {
            url: super::helm::CHART_REPOSITORY.to_string(),
        }
    }
}

impl std::fmt::Display for ChartSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChartSource::Repository { url } => write!(f, "repository {url}"),
            ChartSource::Oci { reference } => write!(f, "{reference}"),
            ChartSource::Path {
                path,
                digest: Some(d),
                ..
            } => write!(f, "{path} ({d})"),
            ChartSource::Path { path, .. } => write!(f, "{path}"),
        }
    }
}

impl RenderedSet {
    /// Every Helm release: the GPU Operator's, then the other stacks'.
    pub fn all_releases(&self) -> impl Iterator<Item = &HelmRelease> {
        std::iter::once(&self.helm).chain(&self.releases)
    }
}

/// Everything a blueprint implies, deterministic and sorted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenderedSet {
    /// Blueprint name.
    pub blueprint: String,
    /// Objects sorted by (phase, kind, namespace, name).
    pub objects: Vec<RenderedObject>,
    /// Per-pool node labels and taints.
    pub node_patches: Vec<NodePatch>,
    /// The GPU Operator's Helm release.
    pub helm: HelmRelease,
    /// The other stacks' Helm releases the blueprint has gpuctl install or hand to GitOps
    /// (the Network Operator, Kueue, Volcano), in [`Stack`] order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<HelmRelease>,
    /// The stacks the blueprint does not declare at all (`install: none` and `gitops` count as
    /// declared: something else installs them): a release gpuctl installed for one of these is
    /// planned for uninstall. Empty when unknown, which plans no uninstall.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undeclared: Vec<Stack>,
    /// Documents (runbooks) by relative path, e.g. `runbooks/troubleshooting.md`.
    pub documents: BTreeMap<String, String>,
}
