//! NVIDIA's DRA driver as gpuctl deploys it (`spec.dra.driver`, GPU175-GPU178) and the
//! ComputeDomains tenants may create (GPU179): the operator
//! release, driver release, node drivers and feature gates the GPUCluster deployment needs; pool
//! settings only a ClusterPolicy's device plugin or MIG Manager apply; and device-class quota in
//! the operator's namespace, where the operator's own claims live. Facts: profiles/dra.yaml
//! (`gpu_operator.gpu_cluster`, `driver`).

use crate::validate::Ctx;
use crate::validate::rules::compat::pool_drivers;
use gpuctl_model::blueprint::PartitionMode;
use gpuctl_model::blueprint::dra::{DraDeployment, DraDriver};
use gpuctl_model::version::OperatorVersion;

pub(super) fn check(ctx: &mut Ctx<'_>) {
    compute_domains(ctx);
    super::dra_standalone::pools(ctx);
    let Some(driver) = ctx.bp.spec.dra.as_ref().and_then(|d| d.driver.clone()) else {
        return;
    };
    match driver.deployment {
        DraDeployment::GpuCluster => {
            gpu_cluster(ctx, &driver);
            pools_under_gpu_cluster(ctx, &driver);
            operator_namespace(ctx);
        }
        DraDeployment::Standalone => super::dra_standalone::check(ctx, &driver),
    }
}

/// The driver release gpuctl deploys: the declared one, else the operator's pin.
fn release<'a>(ctx: &Ctx<'a>, driver: &'a DraDriver) -> String {
    driver.version.clone().unwrap_or_else(|| {
        ctx.catalog
            .dra()
            .gpu_operator
            .gpu_cluster
            .dra_driver
            .clone()
    })
}

/// GPU175: what GPUCluster needs: an operator release that has it, a DRA driver release gpuctl
/// knows, NVIDIA drivers of the supported branch on every pool, and feature gates the release has
/// and allows together.
fn gpu_cluster(ctx: &mut Ctx<'_>, driver: &DraDriver) {
    let facts = ctx.catalog.dra().gpu_operator.gpu_cluster.clone();
    let op = ctx.bp.spec.gpu_operator.version.clone();
    if let (Ok(have), Ok(since)) = (
        op.parse::<OperatorVersion>(),
        facts.since.parse::<OperatorVersion>(),
    ) && have < since
    {
        ctx.emit(
            "GPU175",
            "spec.dra.driver.deployment",
            format!("`deployment: gpuCluster` needs the GPU Operator's GPUCluster, which arrived in {}; `spec.gpuOperator.version` is {op}", facts.since),
            format!("upgrade the operator to {} or later (a new cluster: NVIDIA supports no in-place move from a ClusterPolicy), or drop `spec.dra.driver`", facts.since),
        );
        return;
    }
    let version = release(ctx, driver);
    if ctx.catalog.dra().driver.release(&version).is_none() {
        let known: Vec<String> = ctx
            .catalog
            .dra()
            .driver
            .releases
            .iter()
            .map(|r| r.version.clone())
            .collect();
        ctx.emit(
            "GPU175",
            "spec.dra.driver.version",
            format!("`spec.dra.driver.version: {version}` is no release of NVIDIA's DRA driver gpuctl knows"),
            format!("name one of {}", known.join(", ")),
        );
        return;
    }
    for d in pool_drivers(ctx).into_iter().flatten() {
        if d.version.branch() < facts.min_driver_branch {
            ctx.emit(
                "GPU175",
                d.path.clone(),
                format!(
                    "GPUCluster needs NVIDIA driver {}+ on every GPU node; `{}` is {}",
                    facts.min_driver_branch,
                    d.path,
                    d.version.as_str()
                ),
                format!(
                    "upgrade the driver to the {} branch or later",
                    facts.min_driver_branch
                ),
            );
        }
    }
    super::dra_standalone::gates(ctx, driver, &version, "GPU175");
}

/// GPU176 (time-slicing, MPS: an error) and GPU177 (a MIG layout: a warning): GPUCluster deploys
/// no device plugin and no MIG Manager, so a pool's sharing settings are applied by nobody. A MIG
/// layout can still describe instances made on the host (or by the driver's DynamicMIG).
fn pools_under_gpu_cluster(ctx: &mut Ctx<'_>, driver: &DraDriver) {
    let dynamic_mig = driver.feature_gates.get("DynamicMIG").copied() == Some(true);
    for (i, pool) in ctx.bp.spec.node_pools.clone().iter().enumerate() {
        let path = format!("spec.nodePools[{i}].partitioning.mode");
        match pool.partitioning.mode {
            PartitionMode::TimeSlicing | PartitionMode::Mps => ctx.emit(
                "GPU176",
                path,
                format!("pool `{}` shares GPUs through the device plugin's {} (`partitioning.mode: {}`), but under GPUCluster no device plugin runs: the setting does nothing", pool.name, if pool.partitioning.mode == PartitionMode::Mps { "MPS" } else { "time-slicing" }, if pool.partitioning.mode == PartitionMode::Mps { "mps" } else { "time-slicing" }),
                "remove the pool's `partitioning` (NVIDIA's DRA driver shares GPUs through claims: its TimeSlicingSettings and MPSSupport gates are alpha), or keep the ClusterPolicy",
            ),
            PartitionMode::Mig if !dynamic_mig => ctx.emit(
                "GPU177",
                path,
                format!("pool `{}` declares a MIG layout (`partitioning.mode: mig`), but under GPUCluster no MIG Manager runs and the DRA driver's `DynamicMIG` is not on: nothing creates the instances", pool.name),
                "create the layout on the hosts before the DRA driver starts (it publishes the MIG devices it finds), or turn on the driver's alpha `DynamicMIG` gate",
            ),
            _ => {}
        }
    }
}

/// GPU178: no device-class quota in the operator's namespace: the operator's own DCGM, exporter
/// and validator claims ask for all devices with admin access there, and are charged for them.
fn operator_namespace(ctx: &mut Ctx<'_>) {
    if !ctx
        .catalog
        .dra()
        .gpu_operator
        .gpu_cluster
        .admin_claims_in_operator_namespace
    {
        return;
    }
    let ns = ctx.bp.spec.gpu_operator.namespace.clone();
    let suffix = ctx
        .catalog
        .dra()
        .kubernetes
        .quota
        .devices_key_suffix
        .clone();
    for (ti, t) in ctx.bp.spec.tenants.clone().iter().enumerate() {
        if !t.namespaces.iter().any(|n| n == &ns) {
            continue;
        }
        let keyed = t.quota.keys().any(|k| k.ends_with(&suffix));
        if !t.claims.is_empty() || keyed {
            ctx.emit(
                "GPU178",
                format!("spec.tenants[{ti}].namespaces"),
                format!("tenant `{}` puts a device-class quota into `{ns}`, the GPU Operator's namespace: its DCGM, exporter and validator pods claim all devices with admin access there and would be refused", t.name),
                format!("keep `{ns}` out of the tenant's namespaces"),
            );
        }
    }
}

/// GPU179: tenants that may create ComputeDomains can run them: Kubernetes serves DRA, the
/// deployed driver has compute domains on, some pool is an NVLink domain (its topology names the
/// clique label) with a driver new enough, and under Kueue the tenant's ClusterQueue has quota for
/// the channel claims gpuctl maps.
fn compute_domains(ctx: &mut Ctx<'_>) {
    let tenants: Vec<(usize, String, Option<String>)> = ctx
        .bp
        .spec
        .tenants
        .iter()
        .enumerate()
        .filter(|(_, t)| t.compute_domains > 0)
        .map(|(i, t)| (i, t.name.clone(), t.queue.clone()))
        .collect();
    let Some((first, _, _)) = tenants.first().cloned() else {
        return;
    };
    let path = format!("spec.tenants[{first}].computeDomains");
    let facts = ctx.catalog.dra().clone();
    let need_kube = &facts.driver.prerequisites.kubernetes;
    if let (Ok(have), Ok(floor)) = (
        ctx.bp
            .spec
            .kubernetes
            .version
            .parse::<gpuctl_model::version::KubeVersion>(),
        need_kube.parse::<gpuctl_model::version::KubeVersion>(),
    ) && have < floor
    {
        ctx.emit(
            "GPU179",
            path.clone(),
            format!("ComputeDomains need DRA, which NVIDIA's driver supports from Kubernetes {need_kube}; `spec.kubernetes.version` is {}", ctx.bp.spec.kubernetes.version),
            "upgrade the control plane, or drop `computeDomains`",
        );
    }
    if let Some(d) = ctx.bp.spec.dra.as_ref().and_then(|d| d.driver.as_ref())
        && !d.compute_domains
    {
        ctx.emit(
            "GPU179",
            "spec.dra.driver.computeDomains",
            "`spec.dra.driver.computeDomains: false`, but tenants may create ComputeDomains: the DRA driver gpuctl deploys has compute domains off and nothing serves them",
            "set `computeDomains: true`, or drop the tenants' `computeDomains`",
        );
    }
    nvlink_pools(ctx, &path, &facts);
    if ctx.bp.spec.scheduling.queueing == gpuctl_model::blueprint::Queueing::Kueue {
        let resource = facts.kueue.resource_names.compute_domain_channel.clone();
        let cqs = ctx
            .bp
            .spec
            .scheduling
            .kueue
            .as_ref()
            .map(|k| k.cluster_queues.clone())
            .unwrap_or_default();
        for (ti, name, queue) in &tenants {
            let Some(cq) = queue
                .as_ref()
                .and_then(|q| cqs.iter().find(|c| &c.name == q))
            else {
                continue;
            };
            if !cq.resources.iter().any(|r| r.quota.contains_key(&resource)) {
                ctx.emit(
                    "GPU179",
                    format!("spec.tenants[{ti}].computeDomains"),
                    format!("tenant `{name}` may create ComputeDomains, but its ClusterQueue `{}` has no quota for `{resource}`, which Kueue charges each pod's channel claim to: those jobs are never admitted", cq.name),
                    format!("give `{}` a quota for `{resource}` (one per pod of a compute-domain job) on the NVLink pool", cq.name),
                );
            }
        }
    }
}

/// GPU179: some pool is an NVLink domain (names the clique label in `topology.levels`), and each
/// such pool's driver supports compute domains.
fn nvlink_pools(ctx: &mut Ctx<'_>, path: &str, facts: &gpuctl_model::profiles::dra::DraFacts) {
    let label = &facts.driver.compute_domains.clique_label;
    let floor = &facts.driver.prerequisites.compute_domain_driver;
    let drivers = pool_drivers(ctx);
    let mut any = false;
    for (i, pool) in ctx.bp.spec.node_pools.clone().iter().enumerate() {
        let levels = pool
            .topology
            .as_ref()
            .map(|t| t.levels.clone())
            .unwrap_or_default();
        if !levels.iter().any(|l| l == label) {
            continue;
        }
        if !facts
            .driver
            .compute_domains
            .fabric_attached_models
            .contains(&pool.gpu.model)
        {
            ctx.emit(
                "GPU179",
                format!("spec.nodePools[{i}].topology.levels"),
                format!(
                    "pool `{}` names `{label}` in `topology.levels`, but its GPUs (`{}`, spec.nodePools[{i}].gpu.model) are not on a multi-node NVLink fabric: GPU Feature Discovery sets `{label}` only on fabric-attached GPUs ({}), so the pool is no NVLink domain and a ComputeDomain's pods never find IMEX channels there",
                    pool.name,
                    pool.gpu.model,
                    facts.driver.compute_domains.fabric_attached_models.join(", ")
                ),
                format!("remove `{label}` from the pool's levels, and run ComputeDomain workloads on a {} pool", facts.driver.compute_domains.fabric_attached_models.join(" or ")),
            );
            continue;
        }
        any = true;
        if let (Some(d), Ok(min)) = (
            &drivers[i],
            floor.parse::<gpuctl_model::version::DriverVersion>(),
        ) && d.version < min
        {
            ctx.emit(
                "GPU179",
                d.path.clone(),
                format!(
                    "pool `{}` runs driver {} (`{}`), but ComputeDomains need {floor} or later",
                    pool.name,
                    d.version.as_str(),
                    d.path
                ),
                format!("upgrade the pool's driver to {floor} or later"),
            );
        }
    }
    if !any {
        let declared: Vec<String> = ctx
            .bp
            .spec
            .node_pools
            .iter()
            .map(|p| {
                let levels = p
                    .topology
                    .as_ref()
                    .map(|t| t.levels.join(", "))
                    .unwrap_or_default();
                format!("`{}`: `levels: [{levels}]`", p.name)
            })
            .collect();
        ctx.emit(
            "GPU179",
            path.to_string(),
            format!("tenants may create ComputeDomains, but no pool is an NVLink domain: none names `{label}` in `topology.levels` ({}), the label that places a compute domain's pods on one NVL72 rack", declared.join("; ")),
            format!("add `{label}` to the `topology.levels` of the NVL72 pool (GB200/GB300 racks), or drop `computeDomains`"),
        );
    }
}
