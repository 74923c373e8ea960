//! Compatibility: driver vs CUDA, GPU architecture, kernel modules, MIG, end of life, operator
//! release vs Kubernetes and drivers (GPU020-GPU029). Every version fact comes from the catalog.

use std::collections::BTreeSet;

use crate::validate::Ctx;
use gpuctl_model::blueprint::{KernelModuleType, NodePool, PartitionMode, Queueing};
use gpuctl_model::profiles::{Architecture, CudaSupport, GpuModel, OperatorRelease, Segment};
use gpuctl_model::version::{CudaVersion, DriverVersion, KubeVersion, OperatorVersion};

/// The driver a pool runs, where it is written, and its kernel module flavour.
pub(crate) struct PoolDriver {
    pub version: DriverVersion,
    pub path: String,
    pub kernel_modules: KernelModuleType,
    pub kernel_path: String,
}

/// The driver of each pool (None where the version does not parse; GPU020 reports that).
pub(crate) fn pool_drivers(ctx: &Ctx<'_>) -> Vec<Option<PoolDriver>> {
    let cluster = &ctx.bp.spec.gpu_operator.driver;
    ctx.bp
        .spec
        .node_pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (text, path) = match &p.driver {
                Some(d) => (&d.version, format!("spec.nodePools[{i}].driver.version")),
                None => (
                    &cluster.version,
                    "spec.gpuOperator.driver.version".to_string(),
                ),
            };
            let (kernel_modules, kernel_path) =
                match p.driver.as_ref().and_then(|d| d.kernel_module_type) {
                    Some(k) => (k, format!("spec.nodePools[{i}].driver.kernelModuleType")),
                    None => (
                        cluster.kernel_module_type,
                        "spec.gpuOperator.driver.kernelModuleType".to_string(),
                    ),
                };
            text.parse::<DriverVersion>()
                .ok()
                .map(|version| PoolDriver {
                    version,
                    path,
                    kernel_modules,
                    kernel_path,
                })
        })
        .collect()
}

pub(super) fn check(ctx: &mut Ctx<'_>) {
    driver_versions(ctx);
    let drivers = pool_drivers(ctx);
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        if let Some(d) = &drivers[i] {
            pool_against_driver(ctx, i, pool, d);
        }
    }
    cuda(ctx, &drivers);
    operator(ctx, &drivers);
}

fn driver_versions(ctx: &mut Ctx<'_>) {
    let mut all = vec![(
        "spec.gpuOperator.driver.version".to_string(),
        ctx.bp.spec.gpu_operator.driver.version.clone(),
        true,
    )];
    for (i, p) in ctx.bp.spec.node_pools.iter().enumerate() {
        if let Some(d) = &p.driver {
            all.push((
                format!("spec.nodePools[{i}].driver.version"),
                d.version.clone(),
                true,
            ));
        }
    }
    let mut reported_eol = BTreeSet::new();
    for (path, text, _) in all {
        let v = match text.parse::<DriverVersion>() {
            Ok(v) => v,
            Err(e) => {
                ctx.emit(
                    "GPU020",
                    path,
                    format!("driver version: {e}"),
                    "write a released driver version such as `580.105.08`",
                );
                continue;
            }
        };
        let Some(branch) = ctx.catalog.driver_branch(&v) else {
            let known: Vec<String> = ctx
                .catalog
                .driver_branches()
                .map(|b| format!("R{}", b.branch))
                .collect();
            ctx.emit(
                "GPU020",
                path,
                format!(
                    "driver {v} belongs to branch R{}, which the catalog does not know",
                    v.branch()
                ),
                format!("use a driver from a known branch ({})", known.join(", ")),
            );
            continue;
        };
        if branch.is_end_of_life(ctx.today) == Some(true) && reported_eol.insert(path.clone()) {
            ctx.emit(
                "GPU026",
                path,
                format!(
                    "driver branch R{} ({}) is past its end of life ({})",
                    branch.branch, branch.branch_type, branch.end_of_life
                ),
                "upgrade to a supported production or LTS branch (`gpuctl profiles` lists them)",
            );
        }
    }
}

fn pool_against_driver(ctx: &mut Ctx<'_>, i: usize, pool: &NodePool, d: &PoolDriver) {
    let Some(gpu) = ctx.catalog.gpu(&pool.gpu.model) else {
        return;
    };
    let model = &gpu.key;
    if let Some(arch) = ctx.catalog.architecture(&gpu.architecture) {
        let branch = d.version.branch();
        if let Some(min) = &arch.min_driver
            && d.version < *min
        {
            ctx.emit(
                "GPU023",
                d.path.clone(),
                format!("driver {} is older than the first driver supporting {} GPUs ({min}), used by pool `{}` ({model})", d.version, arch.name, pool.name),
                format!("use {min} or newer for this pool"),
            );
        }
        if let Some(last) = arch.last_driver_branch
            && branch > last
        {
            ctx.emit(
                "GPU023",
                d.path.clone(),
                format!("{} GPUs are not supported after R{last}, but pool `{}` ({model}) gets driver {} (R{branch})", arch.name, pool.name, d.version),
                format!("give pool `{}` its own `driver.version` on R{last} or older", pool.name),
            );
        }
        kernel_modules(ctx, pool, d, gpu, arch);
    }
    if let Some(min) = &gpu.min_driver
        && d.version < *min
    {
        ctx.emit(
            "GPU023",
            d.path.clone(),
            format!(
                "{model} needs driver {min} or newer; pool `{}` gets {}",
                pool.name, d.version
            ),
            format!("use {min} or newer for this pool"),
        );
    }
    if pool.partitioning.mode == PartitionMode::Mig
        && let Some(mig) = &gpu.mig
        && d.version < mig.min_driver
    {
        ctx.emit(
            "GPU025",
            d.path.clone(),
            format!(
                "MIG on {model} needs driver {} or newer; pool `{}` gets {}",
                mig.min_driver, pool.name, d.version
            ),
            format!("use {} or newer for this pool", mig.min_driver),
        );
    }
    if gpu.segment == Segment::Consumer && pool.operands.driver != Some(false) {
        ctx.emit(
            "GPU029",
            format!("spec.nodePools[{i}].gpu.model"),
            format!("{model} is a consumer GPU: the GPU Operator's driver containers do not support it"),
            format!("install the driver on these hosts and set `spec.nodePools[{i}].operands: {{driver: false}}` so the operator leaves the driver to them; no MIG, no data center support"),
        );
    }
}

/// GPU024: the pool's `kernelModuleType` exists for its GPU's architecture and driver branch; the
/// hint offers only settings that work.
fn kernel_modules(
    ctx: &mut Ctx<'_>,
    pool: &NodePool,
    d: &PoolDriver,
    gpu: &GpuModel,
    arch: &Architecture,
) {
    let model = &gpu.key;
    let branch = d.version.branch();
    let flavors = ctx.catalog.kernel_module_flavors();
    let auto_min = &ctx
        .catalog
        .operator_facts()
        .kernel_module_type
        .auto_min_driver;
    // The settings that work for this GPU with this driver, so a hint never offers one the
    // next run rejects (Volta has no open modules, R620 no proprietary ones, ...).
    let open_ok = gpu.kernel_modules.open && flavors.open_available(branch);
    let proprietary_ok = gpu.kernel_modules.proprietary && flavors.proprietary_available(branch);
    let auto_ok = d.version >= *auto_min && (open_ok || proprietary_ok);
    let choices = |except: KernelModuleType| -> String {
        let valid: Vec<&str> = [
            (KernelModuleType::Proprietary, proprietary_ok, "proprietary"),
            (KernelModuleType::Open, open_ok, "open"),
            (KernelModuleType::Auto, auto_ok, "auto"),
        ]
        .into_iter()
        .filter(|(t, ok, _)| *ok && *t != except)
        .map(|(_, _, name)| name)
        .collect();
        match valid.as_slice() {
            [] => format!(
                "no `kernelModuleType` works for {model} with driver {}: give pool `{}` a driver that {} GPUs support",
                d.version, pool.name, arch.name
            ),
            [one] => format!("use `kernelModuleType: {one}` for this pool"),
            [first, rest @ ..] => format!(
                "use `kernelModuleType: {first}` (or `{}`) for this pool",
                rest.join("` or `")
            ),
        }
    };
    let message = match d.kernel_modules {
        KernelModuleType::Open if !gpu.kernel_modules.open => Some(format!(
            "open kernel modules do not support {} GPUs (pool `{}`, {model})",
            arch.name, pool.name
        )),
        KernelModuleType::Open if !flavors.open_available(branch) => Some(format!(
            "open kernel modules exist from R{} on; driver {} (pool `{}`) has none",
            flavors.open_available_from_branch, d.version, pool.name
        )),
        KernelModuleType::Proprietary if !flavors.proprietary_available(branch) => Some(format!(
            "driver {} (pool `{}`) ships no proprietary kernel modules",
            d.version, pool.name
        )),
        KernelModuleType::Proprietary if !gpu.kernel_modules.proprietary => Some(format!(
            "{} GPUs require the open kernel modules (pool `{}`, {model})",
            arch.name, pool.name
        )),
        KernelModuleType::Auto if d.version < *auto_min => Some(format!(
            "`kernelModuleType: auto` needs driver {auto_min} or newer; pool `{}` gets {}",
            pool.name, d.version
        )),
        _ => None,
    };
    if let Some(message) = message {
        ctx.emit(
            "GPU024",
            d.kernel_path.clone(),
            message,
            choices(d.kernel_modules),
        );
    }
}

/// GPU036: the operator release is at least the first one that supports each pool's GPU, and, on a
/// MIG pool, MIG on it.
fn operator_gpu_support(ctx: &mut Ctx<'_>, version: &OperatorVersion) {
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let Some(gpu) = ctx.catalog.gpu(&pool.gpu.model) else {
            continue;
        };
        let model = &pool.gpu.model;
        if let Some(since) = gpu.operator_since.as_ref().filter(|s| *s > version) {
            ctx.emit(
                "GPU036",
                "spec.gpuOperator.version",
                format!(
                    "GPU Operator {version} predates {model} (pool `{}`): the first release that supports it is {since}",
                    pool.name
                ),
                format!("use GPU Operator {since} or newer"),
            );
            continue;
        }
        let mig_since = gpu.mig.as_ref().and_then(|m| m.operator_since.as_ref());
        if pool.partitioning.mode == PartitionMode::Mig
            && let Some(since) = mig_since.filter(|s| *s > version)
        {
            ctx.emit(
                "GPU036",
                format!("spec.nodePools[{i}].partitioning.mode"),
                format!(
                    "GPU Operator {version} does not support MIG on {model} (pool `{}`): MIG Manager supports it from {since}",
                    pool.name
                ),
                format!("use GPU Operator {since} or newer, or no MIG on this pool"),
            );
        }
    }
}

/// GPU037 and GPU038: each pool's declared `os` is one the operator release's platform page lists,
/// and its kernel one the page lists for that system (or, with precompiled drivers, one with a
/// precompiled container of the pool's driver branch).
fn operator_os(ctx: &mut Ctx<'_>, version: &OperatorVersion, drivers: &[Option<PoolDriver>]) {
    let Some(support) = ctx.catalog.operator_facts().os_support(version).cloned() else {
        return;
    };
    let precompiled = ctx.bp.spec.gpu_operator.driver.use_precompiled;
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let Some(os) = &pool.os else { continue };
        let Some(system) = support.system(&os.id, &os.version) else {
            let ids: BTreeSet<&str> = support.systems.iter().map(|s| s.id.as_str()).collect();
            let what = if ids.contains(os.id.as_str()) {
                format!("{} {}", os.id, os.version)
            } else {
                format!("`{}`", gpuctl_model::blueprint::yaml::shorten(&os.id))
            };
            ctx.emit(
                "GPU037",
                format!("spec.nodePools[{i}].os"),
                format!(
                    "GPU Operator {version} does not support {what} (pool `{}`): its platform page lists {}",
                    pool.name,
                    support.known().join(", ")
                ),
                "run the pool on one of those systems (`os.id` and `os.version` as /etc/os-release's ID and VERSION_ID; Red Hat CoreOS: its OpenShift minor), or choose an operator release that supports this one",
            );
            continue;
        };
        // The kernel matters to the operator's driver container only.
        if pool.operands.driver == Some(false) {
            continue;
        }
        let Some(kernel_text) = os.kernel.as_deref() else {
            continue;
        };
        let Some(kernel) = gpuctl_model::profiles::network::kernel_major_minor(kernel_text) else {
            continue;
        };
        let path = format!("spec.nodePools[{i}].os.kernel");
        if precompiled {
            let Some(d) = &drivers[i] else { continue };
            let branch = d.version.branch();
            let ok = support
                .precompiled(&os.id, &os.version, kernel)
                .is_some_and(|p| p.branches.contains(&branch));
            if !ok {
                let offered: Vec<String> = support
                    .precompiled
                    .iter()
                    .filter(|p| p.branches.contains(&branch))
                    .map(|p| format!("{} {} kernel {}", p.id, p.version, p.kernel))
                    .collect();
                ctx.emit(
                    "GPU038",
                    path,
                    format!(
                        "GPU Operator {version} has no precompiled R{branch} driver container for {} kernel {}.{} (pool `{}`): the driver pod cannot start",
                        system.label(),
                        kernel.0,
                        kernel.1,
                        pool.name
                    ),
                    if offered.is_empty() {
                        format!("set `gpuOperator.driver.usePrecompiled: false`: this release publishes no precompiled R{branch} containers")
                    } else {
                        format!(
                            "use a system and kernel with precompiled R{branch} containers ({}), or `usePrecompiled: false`",
                            offered.join(", ")
                        )
                    },
                );
            }
        } else if !system.kernels.is_empty() && !system.lists_kernel(kernel) {
            ctx.emit(
                "GPU038",
                path,
                format!(
                    "kernel {} of pool `{}` is not one GPU Operator {version} lists for {} ({})",
                    gpuctl_model::blueprint::yaml::shorten(kernel_text),
                    pool.name,
                    system.name,
                    system.kernels.join(", ")
                ),
                "run one of the listed kernel series (the driver container builds against the node's kernel, and unlisted ones are untested), or confirm the build works on this kernel",
            );
        }
    }
}

/// Pools a tenant's workloads can land on: those of its ClusterQueue under Kueue, otherwise all.
fn tenant_pools(ctx: &Ctx<'_>, tenant: usize) -> Vec<usize> {
    let bp = ctx.bp;
    let t = &bp.spec.tenants[tenant];
    let all: Vec<usize> = (0..bp.spec.node_pools.len()).collect();
    if bp.spec.scheduling.queueing != Queueing::Kueue {
        return all;
    }
    let Some(cq) = bp.spec.scheduling.kueue.as_ref().and_then(|k| {
        k.cluster_queues
            .iter()
            .find(|q| Some(&q.name) == t.queue.as_ref())
    }) else {
        return all;
    };
    let names: BTreeSet<&str> = cq.resources.iter().map(|r| r.pool.as_str()).collect();
    all.into_iter()
        .filter(|i| names.contains(bp.spec.node_pools[*i].name.as_str()))
        .collect()
}

fn cuda(ctx: &mut Ctx<'_>, drivers: &[Option<PoolDriver>]) {
    for (ti, t) in ctx.bp.spec.tenants.iter().enumerate() {
        let pools = tenant_pools(ctx, ti);
        for (ci, text) in t.cuda.iter().enumerate() {
            let path = format!("spec.tenants[{ti}].cuda[{ci}]");
            let cuda = match text.parse::<CudaVersion>() {
                Ok(c) => c,
                Err(e) => {
                    ctx.emit(
                        "GPU021",
                        path,
                        format!("CUDA version: {e}"),
                        "write the toolkit version the images use, e.g. \"12.4\"",
                    );
                    continue;
                }
            };
            let Some(req) = ctx.catalog.cuda(&cuda) else {
                ctx.emit(
                    "GPU021",
                    path,
                    format!("CUDA {cuda} is not in the catalog"),
                    "use a released CUDA toolkit version (`gpuctl profiles`)",
                );
                continue;
            };
            for &pi in &pools {
                let Some(d) = &drivers[pi] else { continue };
                let pool = &ctx.bp.spec.node_pools[pi].name;
                let mvc = req.minor_version_compat.as_ref();
                match req.support(&d.version) {
                    CudaSupport::Full => {}
                    CudaSupport::MinorVersionCompatibility => ctx.emit(
                        "GPU022",
                        path.clone(),
                        format!(
                            "CUDA {cuda} on pool `{pool}` (driver {}) runs only through minor-version compatibility (toolkit driver {}): {}",
                            d.version,
                            req.min_driver,
                            mvc.map(|m| m.limits.join("; ")).unwrap_or_default()
                        ),
                        format!("raise pool `{pool}` to driver {} or newer, or confirm the images need no PTX JIT", req.min_driver),
                    ),
                    CudaSupport::Unsupported => ctx.emit(
                        "GPU021",
                        path.clone(),
                        format!(
                            "tenant `{}` builds for CUDA {cuda}, which needs driver {} or newer{}; pool `{pool}` runs {}",
                            t.name,
                            req.min_driver,
                            mvc.map(|m| format!(" ({} with minor-version compatibility)", m.min_driver)).unwrap_or_default(),
                            d.version
                        ),
                        format!("raise the driver of pool `{pool}` (see `{}`), or rebuild the images for an older CUDA", d.path),
                    ),
                }
            }
        }
    }
}

fn operator(ctx: &mut Ctx<'_>, drivers: &[Option<PoolDriver>]) {
    let op = &ctx.bp.spec.gpu_operator;
    let version = match op.version.parse::<OperatorVersion>() {
        Ok(v) => v,
        Err(e) => {
            ctx.emit(
                "GPU027",
                "spec.gpuOperator.version",
                format!("GPU Operator version: {e}"),
                "write a release such as `v26.7.0`",
            );
            return;
        }
    };
    let Some(release) = ctx.catalog.operator_release(&version) else {
        let known: Vec<String> = ctx
            .catalog
            .operator_releases()
            .map(|r| r.version.to_string())
            .collect();
        let why = ctx
            .catalog
            .operator_facts()
            .not_captured(&version)
            .map(|n| format!(" ({})", n.notes.join(" ")))
            .unwrap_or_default();
        ctx.emit(
            "GPU027",
            "spec.gpuOperator.version",
            format!("GPU Operator {version} is not in the catalog{why}"),
            format!("use one of: {}", known.join(", ")),
        );
        return;
    };
    match ctx.bp.spec.kubernetes.version.parse::<KubeVersion>() {
        Err(e) => ctx.emit(
            "GPU027",
            "spec.kubernetes.version",
            format!("Kubernetes version: {e}"),
            "write the control-plane version, e.g. \"1.34.2\"",
        ),
        Ok(k) => {
            if !release.supports_kubernetes(&k) {
                ctx.emit(
                    "GPU027",
                    "spec.kubernetes.version",
                    format!(
                        "GPU Operator {} supports Kubernetes {} to {}, not {k}",
                        release.version, release.kubernetes.min, release.kubernetes.max
                    ),
                    "choose an operator release whose range includes this Kubernetes version (`gpuctl profiles`)",
                );
            }
        }
    }
    operator_gpu_support(ctx, &version);
    operator_os(ctx, &version, drivers);
    let mut seen = BTreeSet::new();
    for d in drivers.iter().flatten() {
        if !seen.insert(d.path.clone()) {
            continue;
        }
        if !release.supports_driver(&d.version) {
            unvalidated_driver(ctx, release, d, drivers);
        }
    }
}

/// GPU028: driver `d` is not one the operator `release` was validated with; the hint offers the
/// validated drivers every pool on it can run.
fn unvalidated_driver(
    ctx: &mut Ctx<'_>,
    release: &OperatorRelease,
    d: &PoolDriver,
    drivers: &[Option<PoolDriver>],
) {
    // Offer only validated drivers every pool on this driver can run.
    let pools: Vec<&NodePool> = ctx
        .bp
        .spec
        .node_pools
        .iter()
        .zip(drivers)
        .filter(|(_, pd)| pd.as_ref().is_some_and(|pd| pd.path == d.path))
        .map(|(p, _)| p)
        .collect();
    let fits = |v: &DriverVersion| {
        pools.iter().all(|p| {
            let Some(gpu) = ctx.catalog.gpu(&p.gpu.model) else {
                return true;
            };
            let arch = ctx.catalog.architecture(&gpu.architecture);
            gpu.min_driver.as_ref().is_none_or(|m| v >= m)
                && arch.is_none_or(|a| {
                    a.min_driver.as_ref().is_none_or(|m| v >= m)
                        && a.last_driver_branch.is_none_or(|l| v.branch() <= l)
                })
        })
    };
    let usable: Vec<String> = release
        .drivers()
        .into_iter()
        .filter(|v| fits(v))
        .map(ToString::to_string)
        .collect();
    let names = format!(
        "pool{} {}",
        if pools.len() == 1 { "" } else { "s" },
        pools
            .iter()
            .map(|p| format!("`{}`", p.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let hint = if usable.is_empty() {
        format!(
            "none of the drivers GPU Operator {} validates runs on {}: choose another operator release (`gpuctl profiles` lists each release's validated drivers)",
            release.version, names
        )
    } else {
        format!(
            "use one GPU Operator {} validates that {} can run: {} (`gpuctl profiles` lists each release's validated drivers)",
            release.version,
            names,
            usable.join(", ")
        )
    };
    // A driver the final matrix may list without a source confirming it: say so rather
    // than call it unvalidated outright.
    let maybe = if release.maybe_supports_driver(&d.version) {
        "; the release's final matrix may list it, but that page could not be read (`gpuctl profiles` shows the unconfirmed drivers)"
    } else {
        ""
    };
    ctx.emit(
        "GPU028",
        d.path.clone(),
        format!(
            "driver {} is not one GPU Operator {} was validated with (default {}){maybe}",
            d.version, release.version, release.default_driver
        ),
        hint,
    );
}
