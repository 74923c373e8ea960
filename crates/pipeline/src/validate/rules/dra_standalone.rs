//! The ClusterPolicy + standalone DRA driver chart path (`spec.dra.driver.deployment:
//! standalone`, `nodePools[].gpuPlugin: dra`), GPU165-GPU168: a pinned driver release gpuctl
//! knows, the Kubernetes and NVIDIA driver floors of the pools DRA serves, feature gates of that
//! release; never the device plugin and the DRA kubelet plugin on one node; device-plugin sharing
//! settings on a DRA pool; a standalone chart no pool uses. Facts: profiles/dra.yaml (`driver`,
//! `standalone`).

use crate::validate::Ctx;
use crate::validate::rules::compat::pool_drivers;
use gpuctl_model::blueprint::dra::{DraDeployment, DraDriver};
use gpuctl_model::blueprint::{GpuPlugin, InstallMode, PartitionMode};
use gpuctl_model::version::KubeVersion;

/// GPU165 and GPU168 for `deployment: standalone`.
pub(super) fn check(ctx: &mut Ctx<'_>, driver: &DraDriver) {
    let facts = ctx.catalog.dra().clone();
    let Some(version) = driver.version.clone() else {
        ctx.emit(
            "GPU165",
            "spec.dra.driver.version",
            "`deployment: standalone` without `spec.dra.driver.version`: the standalone DRA driver chart needs a pinned release (its chart name, home and values follow from it, and upgrades go forward only)",
            format!(
                "set `version` to one of {}",
                known_releases(&facts.driver.releases)
            ),
        );
        return;
    };
    if facts.driver.release(&version).is_none() {
        ctx.emit(
            "GPU165",
            "spec.dra.driver.version",
            format!("`spec.dra.driver.version: {version}` is no release of NVIDIA's DRA driver gpuctl knows"),
            format!("name one of {}", known_releases(&facts.driver.releases)),
        );
        return;
    }
    let need = &facts.driver.prerequisites.kubernetes;
    let declared = ctx.bp.spec.kubernetes.version.clone();
    if let (Ok(have), Ok(floor)) = (declared.parse::<KubeVersion>(), need.parse::<KubeVersion>())
        && have < floor
    {
        ctx.emit(
            "GPU165",
            "spec.kubernetes.version",
            format!("NVIDIA's DRA driver needs Kubernetes {need} or later (resource.k8s.io/v1); `spec.kubernetes.version` is {declared}"),
            "upgrade the control plane first, or keep the pools on the device plugin (drop `spec.dra.driver`)",
        );
    }
    let branch = facts.driver.prerequisites.gpu_driver_branch;
    let drivers = pool_drivers(ctx);
    let mut any = false;
    for (i, pool) in ctx.bp.spec.node_pools.clone().iter().enumerate() {
        if pool.gpu_plugin != GpuPlugin::Dra {
            continue;
        }
        any = true;
        if let Some(d) = &drivers[i]
            && d.version.branch() < branch
        {
            ctx.emit(
                "GPU165",
                d.path.clone(),
                format!(
                    "pool `{}` is served by DRA, which needs NVIDIA driver {branch}+; `{}` is {}",
                    pool.name,
                    d.path,
                    d.version.as_str()
                ),
                format!("upgrade the pool's driver to the {branch} branch or later before moving it to DRA"),
            );
        }
    }
    gates(ctx, driver, &version, "GPU165");
    dynamic_mig_beside_mig_manager(ctx, driver);
    if !any {
        ctx.emit(
            "GPU168",
            "spec.dra.driver.deployment",
            "`spec.dra.driver.deployment: standalone`, but no pool declares `gpuPlugin: dra`: the chart's kubelet plugin runs on no node and every GPU stays with the device plugin",
            "declare `gpuPlugin: dra` on the pools to move (one at a time: docs/dra.md, Migration), or drop `spec.dra.driver` until then",
        );
    }
}

fn known_releases(releases: &[gpuctl_model::profiles::dra::DriverRelease]) -> String {
    releases
        .iter()
        .map(|r| r.version.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// GPU165 (`gpuPlugin: dra` off the standalone path; chart settings under GPUCluster), GPU166
/// (a node with both plugins), GPU167 (device-plugin sharing on a DRA pool).
pub(super) fn pools(ctx: &mut Ctx<'_>) {
    let driver = ctx.bp.spec.dra.as_ref().and_then(|d| d.driver.clone());
    let deployment = driver.as_ref().map(|d| d.deployment);
    if let Some(d) = &driver
        && d.deployment == DraDeployment::GpuCluster
        && (d.install != InstallMode::None || !d.values.is_empty() || d.chart != Default::default())
    {
        ctx.emit(
            "GPU165",
            "spec.dra.driver",
            format!(
                "`spec.dra.driver` sets {} under `deployment: gpuCluster`: they configure the standalone DRA driver chart; under `gpuCluster` the GPU Operator deploys the driver and they do nothing",
                [
                    (d.install != InstallMode::None).then(|| format!("`install: {}`", d.install)),
                    (d.chart != Default::default()).then(|| "`chart`".to_string()),
                    (!d.values.is_empty()).then(|| format!("`values` ({})", d.values.keys().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "))),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ")
            ),
            "remove them, or set `deployment: standalone`",
        );
    }
    let facts = ctx.catalog.dra().standalone.clone();
    for (i, pool) in ctx.bp.spec.node_pools.clone().iter().enumerate() {
        let dra = pool.gpu_plugin == GpuPlugin::Dra;
        if deployment != Some(DraDeployment::Standalone) {
            if dra {
                ctx.emit(
                    "GPU165",
                    format!("spec.nodePools[{i}].gpuPlugin"),
                    format!("pool `{}` declares `gpuPlugin: dra`, but pools move to DRA one by one only on the standalone path: {}", pool.name, if deployment.is_some() { "under `gpuCluster` every GPU node is served by DRA" } else { "nothing deploys NVIDIA's DRA driver" }),
                    "set `spec.dra.driver.deployment: standalone` with a pinned `version`, or remove `gpuPlugin`",
                );
            }
            continue;
        }
        let label = |ctx: &mut Ctx<'_>, key: &str, want: &str, why: &str| {
            if let Some(v) = pool.labels.get(key)
                && v != want
            {
                ctx.emit_at_key(
                    "GPU166",
                    gpuctl_model::blueprint::yaml::join(
                        &format!("spec.nodePools[{i}].labels"),
                        key,
                    ),
                    format!("pool `{}` sets `{key}: {v}`, {why}", pool.name),
                    "remove the label: gpuctl sets it from `gpuPlugin`",
                );
            }
        };
        if dra {
            if pool.operands.device_plugin == Some(true) {
                ctx.emit(
                    "GPU166",
                    format!("spec.nodePools[{i}].operands.devicePlugin"),
                    format!("pool `{}` is served by DRA (`gpuPlugin: dra`) and keeps the device plugin on (`operands.devicePlugin: true`): both plugins would hand out the same GPUs on its nodes (the DRA chart refuses that without its override, which gpuctl sets only because it switches the device plugin off there)", pool.name),
                    "remove `operands.devicePlugin` (gpuctl switches it off on DRA pools)",
                );
            }
            label(
                ctx,
                &facts.device_plugin_label,
                "false",
                "but the pool is served by DRA: the device plugin would run next to the DRA kubelet plugin",
            );
            label(
                ctx,
                &facts.pool_label,
                "true",
                "but the pool is served by DRA: the DRA kubelet plugin would not run there",
            );
            if matches!(
                pool.partitioning.mode,
                PartitionMode::TimeSlicing | PartitionMode::Mps
            ) {
                ctx.emit(
                    "GPU167",
                    format!("spec.nodePools[{i}].partitioning.mode"),
                    format!("pool `{}` is served by DRA, but shares GPUs through the device plugin's {} (`partitioning.mode: {}`): the device plugin is off on its nodes and the setting does nothing", pool.name, if pool.partitioning.mode == PartitionMode::Mps { "MPS" } else { "time-slicing" }, if pool.partitioning.mode == PartitionMode::Mps { "mps" } else { "time-slicing" }),
                    "remove the pool's `partitioning` (claims share GPUs through the DRA driver's alpha TimeSlicingSettings and MPSSupport gates), or keep the pool on the device plugin",
                );
            }
        } else {
            label(
                ctx,
                &facts.pool_label,
                "false",
                "but the pool stays on the device plugin: the DRA kubelet plugin would run next to it",
            );
        }
    }
}

/// GPU175 (GPUCluster) and GPU165 (standalone): feature gates the release has, none excluding
/// another, each one's requirements on.
pub(super) fn gates(ctx: &mut Ctx<'_>, driver: &DraDriver, version: &str, rule: &'static str) {
    let Some(known) = ctx.catalog.dra().driver.gates_at(version) else {
        return;
    };
    let known: Vec<gpuctl_model::profiles::dra::DriverGate> = known.into_iter().cloned().collect();
    let on = |name: &str| -> bool {
        driver.feature_gates.get(name).copied().unwrap_or_else(|| {
            known
                .iter()
                .find(|g| g.name == name)
                .is_some_and(|g| g.stage.on_by_default())
        })
    };
    for name in driver.feature_gates.keys() {
        let path = gpuctl_model::blueprint::yaml::join("spec.dra.driver.featureGates", name);
        let Some(gate) = known.iter().find(|g| &g.name == name) else {
            let hint =
                match gpuctl_model::suggest::closest(name, known.iter().map(|g| g.name.as_str())) {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => format!(
                        "name a gate of {version}: {}",
                        known
                            .iter()
                            .map(|g| g.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
            ctx.emit_at_key(
                rule,
                path,
                format!("NVIDIA's DRA driver {version} has no feature gate `{name}`: the driver refuses to start with it"),
                hint,
            );
            continue;
        };
        if !on(name) {
            continue;
        }
        for other in gate.excludes.iter().filter(|o| on(o)) {
            ctx.emit_at_key(
                rule,
                path.clone(),
                format!("feature gates `{name}` and `{other}` of NVIDIA's DRA driver may not be on together"),
                format!("turn one of them off (`{other}: false`)"),
            );
        }
        for need in gate.requires.iter().filter(|r| !on(r)) {
            ctx.emit_at_key(
                rule,
                path.clone(),
                format!("feature gate `{name}` of NVIDIA's DRA driver needs `{need}` on"),
                format!("set `{need}: true`, or turn `{name}` off"),
            );
        }
        kubernetes_gates(ctx, gate, &path);
    }
}

/// GPU157 (a warning): a driver gate that needs a Kubernetes feature gate which is off by default
/// on the declared Kubernetes minor (DynamicMIG needs DRAPartitionableDevices, alpha on 1.34 and
/// 1.35). The blueprint does not declare the control plane's gates, so gpuctl cannot know they are
/// on: it says which to turn on where, since the API server drops the fields they guard silently.
fn kubernetes_gates(ctx: &mut Ctx<'_>, gate: &gpuctl_model::profiles::dra::DriverGate, path: &str) {
    let version = ctx.bp.spec.kubernetes.version.clone();
    for need in &gate.kubernetes_gates {
        let Some(stage) = ctx.catalog.dra().kubernetes.gate(need, &version) else {
            continue;
        };
        if stage.on_by_default() {
            continue;
        }
        ctx.emit_at_key(
            "GPU157",
            path.to_string(),
            format!(
                "feature gate `{}` of NVIDIA's DRA driver needs the Kubernetes feature gate `{need}`, which is {} on Kubernetes {version}: without it the API server drops the ResourceSlices' counters silently and no partition is ever allocated",
                gate.name,
                stage_words(stage)
            ),
            format!(
                "turn `{need}=true` on in kube-apiserver, kube-scheduler, kube-controller-manager and the kubelets (`--feature-gates`), or use a Kubernetes release where it is on by default"
            ),
        );
    }
}

pub(super) fn stage_words(stage: gpuctl_model::profiles::dra::GateStage) -> &'static str {
    use gpuctl_model::profiles::dra::GateStage;
    match stage {
        GateStage::Alpha => "alpha and off by default",
        GateStage::BetaOff => "beta and off by default",
        GateStage::BetaOn | GateStage::Ga | GateStage::GaLocked => "on by default",
    }
}

/// GPU165: DynamicMIG on a pool whose MIG layout the ClusterPolicy's MIG Manager applies. On the
/// standalone path MIG Manager still runs on DRA pools; with DynamicMIG the DRA driver creates MIG
/// devices per claim and destroys the ones it did not create, so the two undo each other.
fn dynamic_mig_beside_mig_manager(ctx: &mut Ctx<'_>, driver: &DraDriver) {
    if driver.feature_gates.get("DynamicMIG").copied() != Some(true) {
        return;
    }
    for (i, pool) in ctx.bp.spec.node_pools.clone().iter().enumerate() {
        if pool.gpu_plugin != GpuPlugin::Dra || pool.partitioning.mode != PartitionMode::Mig {
            continue;
        }
        ctx.emit(
            "GPU165",
            format!("spec.nodePools[{i}].partitioning.mode"),
            format!(
                "pool `{}` declares a MIG layout (`partitioning.mode: mig`), which the ClusterPolicy's MIG Manager applies, while `spec.dra.driver.featureGates.DynamicMIG` is `true`: the DRA driver then creates MIG devices per claim and destroys those it did not create, so the two tear down each other's instances",
                pool.name
            ),
            "drop the pool's MIG layout and let DynamicMIG partition its GPUs, or set `DynamicMIG: false` and keep the pre-created layout",
        );
    }
}
