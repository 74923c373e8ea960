//! NVIDIADriver CRs (`nvidia.com/v1alpha1`): one cluster default for the blueprint's driver and one
//! per pool that overrides it.
//!
//! Selectors are disjoint by construction: each pool's nodes carry [`DRIVER_LABEL`] naming their CR,
//! and each per-pool CR selects exactly its value. On releases whose CRD has `spec.default` (v26.7.0
//! on) the default CR has no selector and owns every GPU node no other CR selects (the operator
//! forbids a selector on it); on older releases it selects `gpuctl.dev/driver=cluster-default`,
//! so GPU nodes outside every pool get no driver from gpuctl there.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::nodes::{PoolPlan, Toleration, taints_of_cr, tolerations_for};
use super::{Builder, Phase, RenderError, Templates};
use gpuctl_model::blueprint::{Blueprint, KernelModuleType, UpgradePolicy};
use gpuctl_model::names::{DEFAULT_DRIVER_CR, DRIVER_LABEL, pool_driver_cr_name};
use gpuctl_model::profiles::chart::ChartRelease;
use gpuctl_model::version::DriverVersion;

/// The k8s-driver-manager init container image of a driver CR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriverManager {
    /// Registry path.
    pub repository: String,
    /// Image name.
    pub image: String,
    /// Tag.
    pub version: String,
}

/// Everything one NVIDIADriver CR says; [`nvidia_driver_cr`] writes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriverCr {
    /// `metadata.name`.
    pub name: String,
    /// `spec.default`, on releases whose CRD has it (`None`: field left out).
    pub default: Option<bool>,
    /// `spec.version`: the full driver version, or its branch with precompiled drivers.
    pub version: String,
    /// `auto`, `open` or `proprietary`.
    pub kernel_module_type: String,
    /// Precompiled driver containers.
    pub use_precompiled: bool,
    /// Image registry path (`nvcr.io/nvidia`).
    pub repository: String,
    /// Image name (`driver`).
    pub image: String,
    /// Driver manager image, when the chart defines one.
    pub manager: Option<DriverManager>,
    /// `spec.imagePullSecrets`: the chart's `driver.imagePullSecrets` (an image mirror's secrets).
    pub image_pull_secrets: Vec<String>,
    /// Equality node selector (empty for a default CR).
    pub node_selector: BTreeMap<String, String>,
    /// Driver pod tolerations.
    pub tolerations: Vec<Toleration>,
    /// `spec.upgradePolicy` in the CR's own shape, on releases that have it.
    pub upgrade_policy: Option<Value>,
    /// Pools whose nodes this CR owns (for labels and messages).
    pub pools: Vec<String>,
    /// `spec.rdma` (`{enabled, useHostMofed}`) when the cluster loads nvidia-peermem for
    /// GPUDirect RDMA (`None`: left out, the operator's default of no peermem).
    pub rdma: Option<Value>,
}

/// The manifest of one NVIDIADriver CR (without ApplySet labels: see [`super::add_labels`]).
/// Driver upgrades build the CRs of new driver versions with this.
pub fn nvidia_driver_cr(templates: &Templates, cr: &DriverCr) -> Result<Value, RenderError> {
    let name = "objects/nvidiadriver.yaml.j2";
    let text = templates.render(name, json!({ "driver": cr }))?;
    super::parse_manifest(name, &text)
}

fn kmt(k: KernelModuleType) -> &'static str {
    match k {
        KernelModuleType::Auto => "auto",
        KernelModuleType::Open => "open",
        KernelModuleType::Proprietary => "proprietary",
    }
}

/// The operator's upgrade policy as the chart values and NVIDIADriver CRs write it (the two shapes
/// agree on every field gpuctl sets).
pub fn upgrade_policy_value(p: &UpgradePolicy) -> Value {
    let mut m = Map::new();
    if let Some(n) = p.max_parallel_upgrades {
        m.insert("maxParallelUpgrades".into(), json!(n));
    }
    if let Some(u) = &p.max_unavailable {
        m.insert("maxUnavailable".into(), json!(u));
    }
    if let Some(w) = &p.wait_for_completion {
        m.insert(
            "waitForCompletion".into(),
            json!({ "podSelector": w.pod_selector, "timeoutSeconds": w.timeout_seconds }),
        );
    }
    if let Some(d) = &p.drain {
        let mut drain = Map::new();
        drain.insert("enable".into(), json!(d.enable));
        if let Some(t) = d.timeout_seconds {
            drain.insert("timeoutSeconds".into(), json!(t));
        }
        m.insert("drain".into(), Value::Object(drain));
    }
    Value::Object(m)
}

/// The `spec.version` to write for `version`: the branch with precompiled drivers (the operator
/// picks the newest precompiled build of that branch for the node's kernel).
pub fn written_version(version: &str, precompiled: bool) -> String {
    if !precompiled {
        return version.to_string();
    }
    version
        .parse::<DriverVersion>()
        .map_or_else(|_| version.to_string(), |v| v.branch().to_string())
}

fn string_at<'a>(values: &'a Value, path: &str) -> Option<&'a str> {
    values
        .pointer(&format!("/{}", path.replace('.', "/")))
        .and_then(Value::as_str)
}

/// The CRs of a blueprint: the cluster default first, then each overriding pool in pool order.
/// `values` are the merged chart values (a user's `driver.repository` override reaches the CRs).
pub fn driver_crs(
    bp: &Blueprint,
    plan: &PoolPlan,
    release: &ChartRelease,
    values: &Value,
) -> Vec<DriverCr> {
    let d = &bp.spec.gpu_operator.driver;
    let pick = |path: &str| {
        string_at(values, path)
            .or_else(|| release.default_of(path))
            .unwrap_or_default()
            .to_string()
    };
    let repository = pick("driver.repository");
    let image = pick("driver.image");
    let manager = {
        let (r, i, v) = (
            pick("driver.manager.repository"),
            pick("driver.manager.image"),
            pick("driver.manager.version"),
        );
        (!i.is_empty()).then_some(DriverManager {
            repository: r,
            image: i,
            version: v,
        })
    };
    let image_pull_secrets: Vec<String> = values
        .pointer("/driver/imagePullSecrets")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let has_default = release.facts.nvidia_driver_default_field;
    let policy = release
        .facts
        .nvidia_driver_upgrade_policy
        .then(|| d.upgrade_policy.as_ref().map(upgrade_policy_value))
        .flatten();
    let tolerations = |cr: &str| {
        let taints = taints_of_cr(bp, plan, cr);
        tolerations_for(&plan.default_tolerations, &taints)
            .unwrap_or_else(|| plan.default_tolerations.clone())
    };
    let base = |name: &str| DriverCr {
        name: name.to_string(),
        default: has_default.then_some(false),
        version: written_version(&d.version, d.use_precompiled),
        kernel_module_type: kmt(d.kernel_module_type).to_string(),
        use_precompiled: d.use_precompiled,
        repository: repository.clone(),
        image: image.clone(),
        manager: manager.clone(),
        image_pull_secrets: image_pull_secrets.clone(),
        node_selector: BTreeMap::from([(DRIVER_LABEL.to_string(), name.to_string())]),
        tolerations: tolerations(name),
        upgrade_policy: policy.clone(),
        pools: bp
            .spec
            .node_pools
            .iter()
            .filter(|p| plan.driver_cr.get(&p.name).is_some_and(|c| c == name))
            .map(|p| p.name.clone())
            .collect(),
        rdma: super::network::driver_rdma(bp),
    };
    let mut default = base(DEFAULT_DRIVER_CR);
    if has_default {
        default.default = Some(true);
        default.node_selector.clear();
    }
    let mut out = vec![default];
    for p in &bp.spec.node_pools {
        let Some(pd) = &p.driver else { continue };
        let mut cr = base(&pool_driver_cr_name(
            &p.name,
            &pd.version,
            bp.spec.upgrades.strategy,
        ));
        cr.version = written_version(&pd.version, d.use_precompiled);
        cr.kernel_module_type =
            kmt(pd.kernel_module_type.unwrap_or(d.kernel_module_type)).to_string();
        out.push(cr);
    }
    out
}

/// Renders every driver CR into `out`.
pub fn objects(
    bp: &Blueprint,
    plan: &PoolPlan,
    release: &ChartRelease,
    values: &Value,
    out: &mut Builder<'_>,
) -> Result<(), RenderError> {
    for cr in driver_crs(bp, plan, release, values) {
        let origin = if cr.name == DEFAULT_DRIVER_CR {
            "spec.gpuOperator.driver".to_string()
        } else {
            format!("spec.nodePools[{}].driver", cr.pools.join(","))
        };
        let manifest = nvidia_driver_cr(out.templates(), &cr)?;
        out.push(
            Phase::Operator,
            "objects/nvidiadriver.yaml.j2",
            origin,
            manifest,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precompiled_drivers_are_named_by_branch() {
        assert_eq!(written_version("580.105.08", true), "580");
        assert_eq!(written_version("580.105.08", false), "580.105.08");
    }
}
