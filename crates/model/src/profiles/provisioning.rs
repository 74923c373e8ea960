//! Provisioned node pools (`profiles/provisioning.yaml`): cloud GPU instance types, Karpenter's and
//! the Cluster Autoscaler's names, GPU readiness gating and driver ownership per platform.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::PROVISIONING_FILE;
use super::common::{PartialDate, TextList, text_list};
use super::{FactRow, GpuModel, ProfileError, RowLog, inconsistent, sourced};
use crate::blueprint::provisioning::DriverOwner;
use crate::blueprint::{Blueprint, GpuPlugin, NodePool};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProvisioningFile {
    source: TextList,
    read: Option<PartialDate>,
    instance_types: BTreeMap<String, InstanceType>,
    driver_ownership: DriverOwnership,
    karpenter: KarpenterFacts,
    cluster_api: ClusterApiFacts,
    readiness: ReadinessFacts,
}

/// All provisioning facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProvisioningFacts {
    /// Cloud GPU instance types by name.
    pub instance_types: BTreeMap<String, InstanceType>,
    /// Driver ownership per platform.
    pub driver_ownership: DriverOwnership,
    /// Karpenter's API names and defaults.
    pub karpenter: KarpenterFacts,
    /// The Cluster Autoscaler's Cluster API annotations.
    pub cluster_api: ClusterApiFacts,
    /// GPU readiness gating.
    pub readiness: ReadinessFacts,
}

/// One cloud GPU instance type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceType {
    /// `eks`, `aks` or `gke`.
    pub platform: String,
    /// GPU catalog key (profiles/gpus.yaml).
    pub gpu: String,
    /// GPUs per instance.
    pub gpus: u32,
    /// Memory per GPU in MiB, as the cloud reports it.
    #[serde(default)]
    pub gpu_memory_mib: Option<u64>,
    /// The GPU interconnect, when the source states it.
    #[serde(default)]
    pub nvlink: Option<String>,
    /// RDMA-capable NICs (EFA devices on AWS).
    pub rdma_nics: u32,
    /// vCPUs.
    #[serde(default)]
    pub vcpu: Option<u32>,
    /// Memory in MiB.
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// On-demand USD per hour, where a source gives it.
    #[serde(default)]
    pub price: Option<f64>,
    /// Where the row comes from.
    pub source: String,
}

/// Driver ownership facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverOwnership {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// The DRA driver's `nvidiaDriverRoot` per owner (`host`, `operator`).
    pub roots: BTreeMap<String, String>,
    /// The DRA chart's value that holds the root.
    pub dra_root_value: String,
    /// Per platform (`eks`, `aks`, `gke`, `kwok`).
    pub platforms: BTreeMap<String, PlatformDriver>,
}

/// Driver ownership on one platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformDriver {
    /// `host` or `operator`.
    pub default: String,
    /// Whether the operator may install the driver there.
    pub operator_allowed: bool,
    /// Why, with the source.
    pub why: String,
}

/// A NodeClass group and kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeClassKind {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
}

/// Karpenter's names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KarpenterFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// The release the names were read from.
    pub version: String,
    /// NodePool apiVersion.
    pub nodepool_api: String,
    /// NodeOverlay apiVersion.
    pub nodeoverlay_api: String,
    /// The feature gate NodeOverlays need.
    pub nodeoverlay_gate: String,
    /// Label Karpenter puts the NodePool's name in.
    pub nodepool_label: String,
    /// The instance-type label.
    pub instance_type_label: String,
    /// The capacity-type label and its on-demand value.
    pub capacity_type: CapacityType,
    /// The do-not-disrupt annotation.
    pub do_not_disrupt: String,
    /// Resource names a NodeOverlay may not set.
    pub overlay_forbidden_resources: Vec<String>,
    /// NodeClass group/kind per platform.
    pub node_classes: BTreeMap<String, NodeClassKind>,
    /// Consolidation policies that may remove a busy node.
    pub evicting_policies: Vec<String>,
    /// The budget reason of busy-node consolidation.
    pub underutilized_reason: String,
    /// The budget reason of drift (a NodeClaim whose NodePool template changed).
    pub drifted_reason: String,
    /// The budget a NodePool gets when it declares none.
    pub default_budget: String,
    /// The annotation on a NodeClaim holding the hash of the NodePool template it was made from.
    pub nodepool_hash_annotation: String,
    /// The taint Karpenter puts on a node it is taking away.
    pub disrupted_taint: String,
    /// What gpuctl renders for training pools.
    pub training_defaults: TrainingDefaults,
    /// Whether any provider templates DRA slices for GPU instance types.
    pub dra_slice_templates: bool,
    /// A NodeClaim's lifecycle conditions, in order (`Launched`, `Registered`, `Initialized`).
    pub nodeclaim_conditions: Vec<String>,
    /// Reasons of an `Unknown` lifecycle condition that mean "in progress"; any other reason is
    /// a failure.
    pub nodeclaim_progress_reasons: Vec<String>,
    /// Text of the provisioner's error when a NodePool's limits leave no room.
    pub limit_message: String,
    /// The event reason on a NodeClaim deleted for lack of provider capacity.
    pub insufficient_capacity_reason: String,
    /// The event reason of a pod Karpenter expects on an existing node or NodeClaim.
    pub nominated_reason: String,
}

/// Karpenter's capacity-type label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityType {
    /// The label.
    pub label: String,
    /// The on-demand value.
    pub on_demand: String,
}

/// Disruption defaults for training pools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingDefaults {
    /// Consolidation policy.
    pub consolidation_policy: String,
    /// consolidateAfter.
    pub consolidate_after: String,
    /// expireAfter.
    pub expire_after: String,
}

/// The Cluster Autoscaler's Cluster API names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterApiFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// Min-size annotation.
    pub min_size: String,
    /// Max-size annotation.
    pub max_size: String,
    /// Prefix of the capacity annotations.
    pub capacity_prefix: String,
    /// The GPU label CA reads.
    pub gpu_label: String,
    /// Whether the DRA template slice holds whole GPUs only.
    pub dra_template_whole_gpus_only: bool,
}

/// GPU readiness gating.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadinessFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// The prefix NodeReadinessRule taint keys must have.
    pub key_prefix: String,
    /// NodeReadinessRule apiVersion.
    pub rule_api: String,
    /// Node Problem Detector's GPU condition.
    pub condition: String,
    /// The taint's value.
    pub taint_value: String,
    /// The rule's enforcement mode.
    pub enforcement_mode: String,
    /// The only prefix managed autoscalers honour.
    pub managed_autoscaler_prefix: String,
    /// Platforms whose managed autoscaler ignores the readiness prefix.
    pub managed_without_readiness_prefix: Vec<String>,
    /// Minutes a node may be Ready while still carrying the readiness taint before `gpuctl doctor`
    /// reports it (GPU245): the provisioners' own patience for a new node.
    pub startup_taint_grace_minutes: u32,
}

impl ProvisioningFacts {
    /// The instance type of this name.
    pub fn instance_type(&self, name: &str) -> Option<&InstanceType> {
        self.instance_types.get(name)
    }
    /// Driver ownership on a platform.
    pub fn platform_driver(&self, platform: &str) -> Option<&PlatformDriver> {
        self.driver_ownership.platforms.get(platform)
    }
    /// The DRA driver root for an owner (`host`, `operator`).
    pub fn driver_root(&self, owner: &str) -> Option<&str> {
        self.driver_ownership.roots.get(owner).map(String::as_str)
    }

    /// Who installs the driver on a pool's nodes: its `provisioner.driver`, else its platform's
    /// default, else the operator.
    pub fn driver_owner(&self, pool: &NodePool) -> DriverOwner {
        if let Some(d) = pool.provisioner.driver {
            return d;
        }
        match pool
            .provisioner
            .platform
            .and_then(|p| self.platform_driver(p.as_str()))
        {
            Some(row) if row.default == DriverOwner::Host.as_str() => DriverOwner::Host,
            _ => DriverOwner::Operator,
        }
    }

    /// Operand switches a pool's driver owner implies (`host`: the operator's driver and toolkit
    /// off on its nodes), for pools a provisioner makes; explicit `operands` win.
    pub fn owner_switches(&self, pool: &NodePool) -> Vec<(&'static str, bool)> {
        if !pool.provisioner.scales() || self.driver_owner(pool) != DriverOwner::Host {
            return Vec::new();
        }
        let mut out = Vec::new();
        if pool.operands.driver.is_none() {
            out.push(("driver", false));
        }
        if pool.operands.container_toolkit.is_none() {
            out.push(("container-toolkit", false));
        }
        out
    }

    /// The DRA driver's root for the DRA pools a provisioner makes (validation keeps them on one
    /// owner, GPU1403), if there are any.
    pub fn dra_driver_root(&self, bp: &Blueprint) -> Option<String> {
        bp.spec
            .node_pools
            .iter()
            .find(|p| p.provisioner.scales() && p.gpu_plugin == GpuPlugin::Dra)
            .and_then(|p| self.driver_root(self.driver_owner(p).as_str()))
            .map(str::to_string)
    }

    /// The readiness taint (key, value) every gated pool's nodes start with.
    pub fn readiness_taint(&self, bp: &Blueprint) -> Option<(String, String)> {
        let r = bp.spec.node_readiness.as_ref()?;
        Some((r.taint_key.clone(), self.readiness.taint_value.clone()))
    }
}

pub(super) fn load_provisioning(
    file: ProvisioningFile,
    gpus: &BTreeMap<String, GpuModel>,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<ProvisioningFacts, ProfileError> {
    const F: &str = PROVISIONING_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let d = &file.driver_ownership;
    sourced(sources, F, Some("driver_ownership"), &d.source)?;
    sourced(sources, F, Some("karpenter"), &file.karpenter.source)?;
    sourced(sources, F, Some("cluster_api"), &file.cluster_api.source)?;
    sourced(sources, F, Some("readiness"), &file.readiness.source)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    for (name, t) in &file.instance_types {
        if t.source.trim().is_empty() {
            return Err(inconsistent(
                F,
                format!("instance type `{name}` has no source"),
            ));
        }
        if !gpus.contains_key(&t.gpu) {
            return Err(inconsistent(
                F,
                format!(
                    "instance type `{name}` names GPU `{}`, not in profiles/gpus.yaml",
                    t.gpu
                ),
            ));
        }
        if t.gpus == 0 {
            return Err(inconsistent(
                F,
                format!("instance type `{name}` has no GPU"),
            ));
        }
        if !d.platforms.contains_key(&t.platform) {
            return Err(inconsistent(
                F,
                format!(
                    "instance type `{name}`: platform `{}` has no driver_ownership row",
                    t.platform
                ),
            ));
        }
        log.row(
            format!("instance_types.{name}"),
            std::slice::from_ref(&t.source),
            None,
        );
    }
    for (p, row) in &d.platforms {
        if !d.roots.contains_key(&row.default) {
            return Err(inconsistent(
                F,
                format!(
                    "driver_ownership.platforms.{p}: default `{}` is not `host` or `operator`",
                    row.default
                ),
            ));
        }
        log.row(format!("driver_ownership.platforms.{p}"), &d.source, None);
    }
    log.row("karpenter", &file.karpenter.source, None);
    log.row("cluster_api", &file.cluster_api.source, None);
    log.row("readiness", &file.readiness.source, None);
    Ok(ProvisioningFacts {
        instance_types: file.instance_types,
        driver_ownership: file.driver_ownership,
        karpenter: file.karpenter,
        cluster_api: file.cluster_api,
        readiness: file.readiness,
    })
}
