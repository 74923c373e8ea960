//! The GPU Operator Helm release: values rendered from the blueprint through
//! `templates/helm/gpu-operator-values.yaml.j2`, every key checked against the release's chart key
//! tree, then `gpuOperator.values` checked the same way and deep-merged last.

use serde_json::{Map, Value, json};

use super::ChartSource;
use super::driver::{upgrade_policy_value, written_version};
use super::nodes::{DEVICE_PLUGIN_DEFAULT, MIG_DISABLED, PoolPlan};
use super::{
    DCGM_METRICS_CONFIGMAP, DEVICE_PLUGIN_CONFIGMAP, HelmRelease, MIG_PARTED_CONFIGMAP,
    RenderError, Templates,
};
use gpuctl_model::blueprint::{Blueprint, Images, KernelModuleType};
use gpuctl_model::object::set_path;
use gpuctl_model::profiles::chart::ChartRelease;
use gpuctl_model::quantity::parse_duration_ms;

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
            "rdma": super::network::helm_rdma(bp),
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
        "gpuCluster": gpu_cluster(bp),
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
    gpuctl_model::profiles::chart::deep_merge(map, &op.values);
    if let Some(images) = &op.images {
        mirror(map, chart, images);
    }
    Ok(HelmRelease {
        stack: super::Stack::GpuOperator,
        release: RELEASE_NAME.to_string(),
        chart: CHART.to_string(),
        version: op.version.clone(),
        namespace: op.namespace.clone(),
        install: op.install,
        values,
        source: ChartSource::from_spec(&op.chart, ChartSource::default()),
    })
}

/// The GPUCluster settings when NVIDIA's DRA driver is deployed through the operator's GPUCluster
/// (`spec.dra.driver.deployment: gpuCluster`): the driver release when declared (else the chart's
/// pin), compute domains, feature gates.
fn gpu_cluster(bp: &Blueprint) -> Option<Value> {
    let d = bp.spec.dra.as_ref()?.driver.as_ref()?;
    match d.deployment {
        gpuctl_model::blueprint::dra::DraDeployment::GpuCluster => Some(json!({
            "version": d.version,
            "computeDomains": d.compute_domains,
            "featureGates": (!d.feature_gates.is_empty()).then(|| json!(d.feature_gates)),
        })),
        // The ClusterPolicy stays; the DRA driver is a chart of its own (render/dra_chart.rs).
        gpuctl_model::blueprint::dra::DraDeployment::Standalone => None,
    }
}

/// `repository` with its registry replaced by `mirror`: `nvcr.io/nvidia/k8s` through
/// `registry.internal/mirror` is `registry.internal/mirror/nvidia/k8s`. A first path part with a
/// `.` or `:`, or `localhost`, is a registry host (the rule container tools use); without one the
/// image is on Docker Hub and keeps its whole path.
pub fn mirrored(repository: &str, mirror: &str) -> String {
    let path = match repository.split_once('/') {
        Some((host, rest)) if host.contains('.') || host.contains(':') || host == "localhost" => {
            rest
        }
        _ => repository,
    };
    format!("{}/{path}", mirror.trim_end_matches('/'))
}

/// Rewrites every image repository of the chart (the blueprint's value where it sets one, the
/// chart's default otherwise) to the mirror, and gives every operand the pull secrets.
fn mirror(values: &mut Map<String, Value>, chart: &ChartRelease, images: &Images) {
    for (path, default) in chart.image_repositories() {
        let current = value_at(values, path)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(default)
            .to_string();
        if current.is_empty() {
            continue;
        }
        set_path(values, path, json!(mirrored(&current, &images.registry)));
    }
    if images.pull_secrets.is_empty() {
        return;
    }
    let objects = &chart.facts.subchart_pull_secrets;
    let paths = chart
        .pull_secret_paths()
        .into_iter()
        .chain(objects.iter().cloned());
    for path in paths {
        let object_form = objects.contains(&path);
        let mut list: Vec<Value> = value_at(values, &path)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for name in &images.pull_secrets {
            let entry = if object_form {
                json!({ "name": name })
            } else {
                json!(name)
            };
            if !list.contains(&entry) {
                list.push(entry);
            }
        }
        set_path(values, &path, Value::Array(list));
    }
}

fn value_at<'a>(values: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut node = values.get(parts.next()?)?;
    for part in parts {
        node = node.as_object()?.get(part)?;
    }
    Some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_replaces_the_registry_and_keeps_the_path() {
        let m = "registry.internal:5000/mirror/";
        for (repo, want) in [
            ("nvcr.io/nvidia", "registry.internal:5000/mirror/nvidia"),
            (
                "nvcr.io/nvidia/cloud-native",
                "registry.internal:5000/mirror/nvidia/cloud-native",
            ),
            (
                "registry.k8s.io/nfd/node-feature-discovery",
                "registry.internal:5000/mirror/nfd/node-feature-discovery",
            ),
            ("localhost/x", "registry.internal:5000/mirror/x"),
            (
                "library/busybox",
                "registry.internal:5000/mirror/library/busybox",
            ),
            ("busybox", "registry.internal:5000/mirror/busybox"),
        ] {
            assert_eq!(mirrored(repo, m), want, "{repo}");
        }
    }

    #[test]
    fn durations_are_prometheus_durations() {
        assert_eq!(prometheus_duration(30_000), "30s");
        assert_eq!(prometheus_duration(500), "500ms");
    }
}
