//! Node pools: the labels and taints gpuctl manages per pool, the MIG Manager (mig-parted) and
//! device-plugin configs each pool selects by label, and the tolerations operands need for the
//! pools' taints.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::RenderError;
use super::{Builder, DEVICE_PLUGIN_CONFIGMAP, MIG_PARTED_CONFIGMAP, NodePatch, NodeTaint, Phase};
use gpuctl_model::blueprint::resources::{GPU, mig_layout_per_gpu};
use gpuctl_model::blueprint::{
    Blueprint, MigStrategy, NodePool, PartitionMode, Taint, TaintEffect,
};
use gpuctl_model::names::{
    DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL, OPERAND_DEPLOY_LABEL_PREFIX,
};
use gpuctl_model::profiles::Catalog;
use gpuctl_model::profiles::chart::ChartRelease;

/// The mig-parted config that turns MIG off (also the operator's default for unlabelled nodes).
pub const MIG_DISABLED: &str = "all-disabled";
/// Device-plugin config key for nodes outside every pool.
pub const DEVICE_PLUGIN_DEFAULT: &str = "cluster-default";

/// A pod toleration, as operands and flavors carry it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// Taint key (empty: every key).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `Exists` or `Equal`.
    #[serde(default = "equal")]
    pub operator: String,
    /// Value for `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Effect (empty: every effect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

fn equal() -> String {
    "Equal".to_string()
}

impl Toleration {
    /// Tolerates taint `key` with `effect` whatever its value (what operands need).
    pub fn exists(key: &str, effect: &str) -> Toleration {
        Toleration {
            key: key.to_string(),
            operator: "Exists".to_string(),
            value: None,
            effect: Some(effect.to_string()),
        }
    }

    /// Tolerates exactly this taint (what a Kueue flavor adds to admitted pods).
    pub fn exact(t: &Taint) -> Toleration {
        match &t.value {
            Some(v) => Toleration {
                key: t.key.clone(),
                operator: "Equal".to_string(),
                value: Some(v.clone()),
                effect: Some(effect_name(t.effect).to_string()),
            },
            None => Toleration::exists(&t.key, effect_name(t.effect)),
        }
    }

    /// Whether this toleration tolerates the taint (Kubernetes' matching rules).
    pub fn tolerates(&self, t: &NodeTaint) -> bool {
        if self.effect.as_deref().is_some_and(|e| e != t.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.operator == "Exists";
        }
        if self.key != t.key {
            return false;
        }
        match self.operator.as_str() {
            "Exists" => true,
            _ => self.value.as_deref().unwrap_or("") == t.value.as_deref().unwrap_or(""),
        }
    }
}

/// The name Kubernetes gives a taint effect.
pub fn effect_name(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// `defaults` plus an `Exists` toleration for every taint in `taints` that `defaults` does not
/// already tolerate; `None` when nothing needs adding (the chart's default list stays).
pub fn tolerations_for(defaults: &[Toleration], taints: &[NodeTaint]) -> Option<Vec<Toleration>> {
    let mut out = defaults.to_vec();
    let mut added = false;
    for t in taints {
        if t.effect == "PreferNoSchedule" || out.iter().any(|tol| tol.tolerates(t)) {
            continue;
        }
        out.push(Toleration::exists(&t.key, &t.effect));
        added = true;
    }
    added.then_some(out)
}

/// One entry of a mig-parted config.
#[derive(Debug, Clone, Serialize)]
pub struct MigEntry {
    /// `None` for `all`, else GPU indices.
    pub devices: Option<Vec<u32>>,
    /// Instances per profile; `None` turns MIG off on these GPUs.
    pub layout: Option<BTreeMap<String, u32>>,
}

/// The device-plugin config of one pool.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DevicePluginConfig {
    /// Config key (the pool name, or [`DEVICE_PLUGIN_DEFAULT`]).
    pub key: String,
    /// `none`, `single` or `mixed`.
    pub mig_strategy: String,
    /// `timeSlicing` or `mps` when the pool shares GPUs.
    pub sharing: Option<String>,
    /// Resource name being shared (`nvidia.com/gpu`).
    pub resource: String,
    /// Replicas per GPU.
    pub replicas: u32,
    /// Advertise `<resource>.shared`.
    pub rename_by_default: bool,
    /// Time-slicing: refuse requests for more than one replica.
    pub fail_requests_greater_than_one: bool,
}

/// Everything render derives from the pools.
#[derive(Debug, Clone)]
pub struct PoolPlan {
    /// Per-pool node labels and taints, in pool order.
    pub node_patches: Vec<NodePatch>,
    /// The cluster's `mig.strategy` (`none` without MIG pools).
    pub mig_strategy: String,
    /// mig-parted configs by name (empty without MIG pools).
    pub mig_configs: BTreeMap<String, Vec<MigEntry>>,
    /// Device-plugin configs (empty when no pool shares or partitions GPUs).
    pub device_plugin: Vec<DevicePluginConfig>,
    /// `daemonsets.tolerations` when pool taints need more than the chart's defaults.
    pub daemonset_tolerations: Option<Vec<Toleration>>,
    /// `node-feature-discovery.worker.tolerations`, likewise.
    pub nfd_tolerations: Option<Vec<Toleration>>,
    /// The chart's default operand tolerations (what every driver CR starts from).
    pub default_tolerations: Vec<Toleration>,
    /// NVIDIADriver CR name per pool.
    pub driver_cr: BTreeMap<String, String>,
}

fn release_tolerations(release: &ChartRelease, path: &str) -> Vec<Toleration> {
    release
        .defaults
        .get(path)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

fn node_taints(pool: &NodePool) -> Vec<NodeTaint> {
    pool.taints
        .iter()
        .map(|t| NodeTaint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: effect_name(t.effect).to_string(),
        })
        .collect()
}

/// The mig-parted entries of a MIG pool: GPUs with the same layout grouped, `all` when every GPU
/// has the same one.
pub fn mig_entries(pool: &NodePool) -> Vec<MigEntry> {
    let per_gpu = mig_layout_per_gpu(pool);
    type Layout = Option<BTreeMap<String, u32>>;
    let mut groups: Vec<(Layout, Vec<u32>)> = Vec::new();
    for (i, layout) in per_gpu.into_iter().enumerate() {
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        match groups.iter_mut().find(|(l, _)| *l == layout) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((layout, vec![i])),
        }
    }
    if groups.len() == 1 {
        let (layout, _) = groups.remove(0);
        return vec![MigEntry {
            devices: None,
            layout,
        }];
    }
    groups
        .into_iter()
        .map(|(layout, idx)| MigEntry {
            devices: Some(idx),
            layout,
        })
        .collect()
}

fn strategy_name(s: MigStrategy) -> &'static str {
    match s {
        MigStrategy::Single => "single",
        MigStrategy::Mixed => "mixed",
    }
}

/// Works out node patches, configs and tolerations for every pool.
pub fn plan(
    bp: &Blueprint,
    catalog: &Catalog,
    release: &ChartRelease,
) -> Result<PoolPlan, RenderError> {
    let pools = &bp.spec.node_pools;
    for p in pools {
        if p.name == MIG_DISABLED || p.name == DEVICE_PLUGIN_DEFAULT {
            return Err(RenderError::ReservedName {
                what: "node pool",
                name: p.name.clone(),
                why: "it names a built-in MIG or device-plugin config",
            });
        }
    }

    let mig_pools: Vec<&NodePool> = pools
        .iter()
        .filter(|p| p.partitioning.mode == PartitionMode::Mig)
        .collect();
    let mig_strategy = mig_strategy(&mig_pools)?;

    let mig_configs: BTreeMap<String, Vec<MigEntry>> = if mig_pools.is_empty() {
        BTreeMap::new()
    } else {
        let mut m = BTreeMap::new();
        m.insert(
            MIG_DISABLED.to_string(),
            vec![MigEntry {
                devices: None,
                layout: None,
            }],
        );
        for p in &mig_pools {
            m.insert(p.name.clone(), mig_entries(p));
        }
        m
    };

    // Only sharing needs per-node device-plugin configs: the MIG strategy is cluster-wide anyway.
    let wants_device_plugin_config = pools.iter().any(|p| {
        matches!(
            p.partitioning.mode,
            PartitionMode::TimeSlicing | PartitionMode::Mps
        )
    });
    let device_plugin = if wants_device_plugin_config {
        device_plugin_configs(pools, &mig_strategy)
    } else {
        Vec::new()
    };

    let default_tolerations = release_tolerations(release, "daemonsets.tolerations");
    let nfd_defaults = release_tolerations(release, "node-feature-discovery.worker.tolerations");
    let mut all_taints: Vec<NodeTaint> = pools.iter().flat_map(node_taints).collect();
    // The operands and NFD must run on a node that still has the readiness taint, or it is never removed.
    if let Some((key, value)) = catalog.provisioning().readiness_taint(bp) {
        all_taints.push(NodeTaint {
            key,
            value: Some(value),
            effect: "NoSchedule".to_string(),
        });
    }

    let mut driver_cr = BTreeMap::new();
    let mut node_patches = Vec::new();
    for p in pools {
        let (cr, patch) = node_patch(bp, catalog, p, wants_device_plugin_config)?;
        driver_cr.insert(p.name.clone(), cr);
        node_patches.push(patch);
    }

    Ok(PoolPlan {
        node_patches,
        mig_strategy,
        mig_configs,
        device_plugin,
        daemonset_tolerations: tolerations_for(&default_tolerations, &all_taints),
        nfd_tolerations: tolerations_for(&nfd_defaults, &all_taints),
        default_tolerations,
        driver_cr,
    })
}

/// The one MIG strategy of the MIG pools (`none` without them); pools that disagree are an error.
fn mig_strategy(mig_pools: &[&NodePool]) -> Result<String, RenderError> {
    let strategies: BTreeMap<&str, Vec<&str>> =
        mig_pools.iter().fold(BTreeMap::new(), |mut acc, p| {
            let s = strategy_name(
                p.partitioning
                    .mig
                    .as_ref()
                    .map(|m| m.strategy)
                    .unwrap_or_default(),
            );
            acc.entry(s).or_default().push(p.name.as_str());
            acc
        });
    if strategies.len() > 1 {
        let detail = strategies
            .iter()
            .map(|(s, ps)| format!("{s}: {}", ps.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(RenderError::ConflictingMigStrategies { detail });
    }
    let mig_strategy = strategies
        .keys()
        .next()
        .copied()
        .unwrap_or("none")
        .to_string();
    Ok(mig_strategy)
}

/// The device plugin's configs: the default one and one per pool (its sharing, if any).
fn device_plugin_configs(pools: &[NodePool], mig_strategy: &str) -> Vec<DevicePluginConfig> {
    let mig_strategy = mig_strategy.to_string();
    let mut device_plugin = Vec::new();
    device_plugin.push(DevicePluginConfig {
        key: DEVICE_PLUGIN_DEFAULT.to_string(),
        mig_strategy: mig_strategy.clone(),
        sharing: None,
        resource: GPU.to_string(),
        replicas: 1,
        rename_by_default: false,
        fail_requests_greater_than_one: false,
    });
    for p in pools {
        let part = &p.partitioning;
        let (sharing, replicas, rename, fail) = match part.mode {
            PartitionMode::TimeSlicing => {
                part.time_slicing
                    .as_ref()
                    .map_or((None, 1, false, false), |t| {
                        (
                            Some("timeSlicing"),
                            t.replicas,
                            t.rename_by_default,
                            t.fail_requests_greater_than_one,
                        )
                    })
            }
            PartitionMode::Mps => part.mps.as_ref().map_or((None, 1, false, false), |m| {
                (Some("mps"), m.replicas, m.rename_by_default, false)
            }),
            _ => (None, 1, false, false),
        };
        device_plugin.push(DevicePluginConfig {
            key: p.name.clone(),
            mig_strategy: mig_strategy.clone(),
            sharing: sharing.map(str::to_string),
            resource: GPU.to_string(),
            replicas,
            rename_by_default: rename,
            fail_requests_greater_than_one: fail,
        });
    }
    device_plugin
}

/// Pool `p`'s driver CR name and node patch: its labels (driver CR, MIG and device-plugin config,
/// operand switches), taints and what its nodes are expected to report.
fn node_patch(
    bp: &Blueprint,
    catalog: &Catalog,
    p: &NodePool,
    wants_device_plugin_config: bool,
) -> Result<(String, NodePatch), RenderError> {
    let gpu = catalog
        .gpu(&p.gpu.model)
        .ok_or_else(|| RenderError::UnknownGpu {
            pool: p.name.clone(),
            model: p.gpu.model.clone(),
        })?;
    let cr = match &p.driver {
        Some(d) => {
            gpuctl_model::names::pool_driver_cr_name(&p.name, &d.version, bp.spec.upgrades.strategy)
        }
        None => gpuctl_model::names::DEFAULT_DRIVER_CR.to_string(),
    };
    let mut labels = p.labels.clone();
    labels.insert(DRIVER_LABEL.to_string(), cr.clone());
    if p.partitioning.mode == PartitionMode::Mig {
        labels.insert(MIG_CONFIG_LABEL.to_string(), p.name.clone());
    } else if gpu.mig.is_some() {
        labels.insert(MIG_CONFIG_LABEL.to_string(), MIG_DISABLED.to_string());
    }
    if wants_device_plugin_config {
        labels.insert(DEVICE_PLUGIN_CONFIG_LABEL.to_string(), p.name.clone());
    }
    let mut switches = p.operands.switches();
    switches.extend(catalog.provisioning().owner_switches(p));
    if bp.spec.node_readiness.is_some() && p.provisioner.scales() {
        labels.insert(
            gpuctl_model::names::READINESS_GATED_LABEL.to_string(),
            "gated".to_string(),
        );
    }
    for (operand, on) in switches {
        labels.insert(
            format!("{OPERAND_DEPLOY_LABEL_PREFIX}{operand}"),
            on.to_string(),
        );
    }
    let standalone = &catalog.dra().standalone;
    labels.extend(super::dra_chart::pool_labels(bp, standalone, p));
    let dra_switch = (super::dra_chart::standalone(bp).is_some()
        && p.gpu_plugin == gpuctl_model::blueprint::GpuPlugin::Dra)
        .then(|| standalone.device_plugin_label.clone());
    let expected_driver = p
        .driver
        .as_ref()
        .map_or(&bp.spec.gpu_operator.driver.version, |d| &d.version)
        .clone();
    let patch = NodePatch {
        pool: p.name.clone(),
        selector: p.selector.clone(),
        expected_nodes: p.nodes,
        node_range: p
            .provisioner
            .scales()
            .then(|| [p.provisioner.min_nodes.unwrap_or(0), p.max_nodes()]),
        labels,
        taints: node_taints(p),
        expected_products: gpu.gfd_products.clone(),
        expected_driver,
        blue_green: bp.spec.upgrades.strategy
            == gpuctl_model::blueprint::UpgradeStrategy::BlueGreen,
        topology_levels: p
            .topology
            .as_ref()
            .map(|t| t.levels.clone())
            .unwrap_or_default(),
        dra_switch,
    };
    Ok((cr, patch))
}

/// Taints of the pools owned by driver CR `cr`.
pub fn taints_of_cr(bp: &Blueprint, plan: &PoolPlan, cr: &str) -> Vec<NodeTaint> {
    bp.spec
        .node_pools
        .iter()
        .filter(|p| plan.driver_cr.get(&p.name).is_some_and(|c| c == cr))
        .flat_map(node_taints)
        .collect()
}

/// Renders the MIG Manager and device-plugin ConfigMaps.
pub fn config_maps(
    bp: &Blueprint,
    plan: &PoolPlan,
    out: &mut Builder<'_>,
) -> Result<(), RenderError> {
    let ns = &bp.spec.gpu_operator.namespace;
    if !plan.mig_configs.is_empty() {
        let text = out.templates().render(
            "config/mig-parted.yaml.j2",
            serde_json::json!({ "configs": plan.mig_configs }),
        )?;
        let config = canonical_yaml("config/mig-parted.yaml.j2", &text)?;
        let data = BTreeMap::from([("config.yaml".to_string(), config)]);
        out.object(
            Phase::Operator,
            "objects/configmap.yaml.j2",
            "spec.nodePools[].partitioning.mig".to_string(),
            serde_json::json!({
                "name": MIG_PARTED_CONFIGMAP,
                "namespace": ns,
                "component": "mig-manager",
                "data": data,
            }),
        )?;
    }
    if !plan.device_plugin.is_empty() {
        let mut data = BTreeMap::new();
        for cfg in &plan.device_plugin {
            let text = out.templates().render(
                "config/device-plugin.yaml.j2",
                serde_json::json!({ "config": cfg }),
            )?;
            data.insert(
                cfg.key.clone(),
                canonical_yaml("config/device-plugin.yaml.j2", &text)?,
            );
        }
        out.object(
            Phase::Operator,
            "objects/configmap.yaml.j2",
            "spec.nodePools[].partitioning".to_string(),
            serde_json::json!({
                "name": DEVICE_PLUGIN_CONFIGMAP,
                "namespace": ns,
                "component": "device-plugin",
                "data": data,
            }),
        )?;
    }
    Ok(())
}

/// A config file's text, parsed and written back canonically (stable formatting, checked YAML).
pub fn canonical_yaml(template: &str, text: &str) -> Result<String, RenderError> {
    let value: Value = serde_saphyr::from_str(text).map_err(|e| RenderError::TemplateOutput {
        template: template.to_string(),
        message: format!("not YAML: {e}"),
    })?;
    Ok(super::text::yaml(&value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> NodeTaint {
        NodeTaint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
        }
    }

    #[test]
    fn toleration_matching_follows_kubernetes() {
        let gpu = Toleration::exists("nvidia.com/gpu", "NoSchedule");
        assert!(gpu.tolerates(&taint("nvidia.com/gpu", Some("present"), "NoSchedule")));
        assert!(!gpu.tolerates(&taint("nvidia.com/gpu", None, "NoExecute")));
        assert!(!gpu.tolerates(&taint("dedicated", Some("x"), "NoSchedule")));
        let eq = Toleration {
            key: "a".into(),
            operator: "Equal".into(),
            value: Some("1".into()),
            effect: None,
        };
        assert!(eq.tolerates(&taint("a", Some("1"), "NoExecute")));
        assert!(!eq.tolerates(&taint("a", Some("2"), "NoExecute")));
    }

    #[test]
    fn tolerations_are_added_only_when_needed() {
        let defaults = vec![Toleration::exists("nvidia.com/gpu", "NoSchedule")];
        assert_eq!(
            tolerations_for(
                &defaults,
                &[taint("nvidia.com/gpu", Some("present"), "NoSchedule")]
            ),
            None
        );
        let more =
            tolerations_for(&defaults, &[taint("dedicated", Some("ml"), "NoExecute")]).unwrap();
        assert_eq!(more.len(), 2);
        assert_eq!(more[1], Toleration::exists("dedicated", "NoExecute"));
    }
}
