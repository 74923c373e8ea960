//! The GPU Operator Helm release: values rendered from the blueprint through
//! `templates/helm/gpu-operator-values.yaml.j2`, every key checked against the release's chart key
//! tree, then `gpuOperator.values` checked the same way and deep-merged last.

use serde_json::json;

use super::driver::{upgrade_policy_value, written_version};
use super::nodes::{DEVICE_PLUGIN_DEFAULT, MIG_DISABLED, PoolPlan};
use super::{
    DCGM_METRICS_CONFIGMAP, DEVICE_PLUGIN_CONFIGMAP, HelmRelease, MIG_PARTED_CONFIGMAP,
    RenderError, Templates,
};
use crate::blueprint::{Blueprint, KernelModuleType};
use crate::profiles::chart::ChartRelease;
use crate::quantity::parse_duration_ms;

/// Helm release name gpuctl installs the operator as.
pub const RELEASE_NAME: &str = "gpu-operator";
/// Chart reference (`helm repo add nvidia <CHART_REPOSITORY>`).
pub const CHART: &str = "nvidia/gpu-operator";
/// NVIDIA's Helm repository that serves [`CHART`].
pub const CHART_REPOSITORY: &str = "https://helm.ngc.nvidia.com/nvidia";

/// dcgm-exporter's collection interval in milliseconds (what `DCGM_EXPORTER_INTERVAL` takes).
pub fn dcgm_interval_ms(bp: &Blueprint) -> u64 {
    parse_duration_ms(&bp.spec.gpu_operator.dcgm_exporter.interval).unwrap_or(30_000)
}

/// A Prometheus duration for `ms`.
pub fn prometheus_duration(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Renders, checks and merges the release's values.
pub fn release(
    bp: &Blueprint,
    plan: &PoolPlan,
    chart: &ChartRelease,
    templates: &Templates,
) -> Result<HelmRelease, RenderError> {
    let op = &bp.spec.gpu_operator;
    let d = &op.driver;
    let dcgm = &op.dcgm_exporter;
    let ctx = json!({
        "driver": {
            "version": written_version(&d.version, d.use_precompiled),
            "kernelModuleType": match d.kernel_module_type {
                KernelModuleType::Auto => "auto",
                KernelModuleType::Open => "open",
                KernelModuleType::Proprietary => "proprietary",
            },
            "usePrecompiled": d.use_precompiled,
            "upgradePolicy": d.upgrade_policy.as_ref().map(upgrade_policy_value),
        },
        "migStrategy": plan.mig_strategy,
        "migManagerConfig": (!plan.mig_configs.is_empty()).then(|| json!({
            "name": MIG_PARTED_CONFIGMAP,
            "default": MIG_DISABLED,
        })),
        "devicePluginConfig": (!plan.device_plugin.is_empty()).then(|| json!({
            "name": DEVICE_PLUGIN_CONFIGMAP,
            "default": DEVICE_PLUGIN_DEFAULT,
        })),
        "dcgmExporter": {
            "enabled": dcgm.enabled,
            "intervalMs": dcgm_interval_ms(bp).to_string(),
            "config": DCGM_METRICS_CONFIGMAP,
        },
        "daemonsetTolerations": plan.daemonset_tolerations,
        "nfdTolerations": plan.nfd_tolerations,
    });
    let name = "helm/gpu-operator-values.yaml.j2";
    let text = templates.render(name, ctx)?;
    let mut values = super::parse_manifest(name, &text)?;
    let map = values
        .as_object_mut()
        .expect("parse_manifest returns a mapping");
    let problems = chart.unknown_paths(map);
    if !problems.is_empty() {
        return Err(RenderError::RenderedChartKeys {
            version: chart.version.clone(),
            problems,
        });
    }
    let problems = chart.unknown_paths(&op.values);
    if !problems.is_empty() {
        return Err(RenderError::UnknownChartKeys {
            version: chart.version.clone(),
            problems,
        });
    }
    crate::profiles::chart::deep_merge(map, &op.values);
    Ok(HelmRelease {
        release: RELEASE_NAME.to_string(),
        chart: CHART.to_string(),
        version: op.version.clone(),
        namespace: op.namespace.clone(),
        install: op.install,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_prometheus_durations() {
        assert_eq!(prometheus_duration(30_000), "30s");
        assert_eq!(prometheus_duration(500), "500ms");
    }
}
