//! DRA device shapes and tenant claims (GPU170-GPU174): the Kubernetes release that serves DRA,
//! shapes gpuctl can write selectors for, shapes some pool can satisfy, claims of declared shapes
//! that a queue can admit, and quota keys on device classes that exist. Facts: profiles/dra.yaml,
//! the GPU catalog.

use crate::cel::{device_type, selectors, semver_of};
use crate::validate::Ctx;
use crate::validate::rules::compat::pool_drivers;
use gpuctl_model::blueprint::dra::DeviceShape;
use gpuctl_model::blueprint::{NodePool, Queueing};
use gpuctl_model::names::dra_shape_class;
use gpuctl_model::version::{DriverVersion, KubeVersion};

pub(super) fn check(ctx: &mut Ctx<'_>) {
    if let Some(dra) = &ctx.bp.spec.dra
        && !dra.shapes.is_empty()
    {
        kubernetes(ctx);
        for (i, shape) in dra.shapes.iter().enumerate() {
            let path = format!("spec.dra.shapes[{i}]");
            if shape_is_valid(ctx, &path, shape, &dra.shapes[..i]) && !shape.has_alternatives() {
                satisfiable(ctx, &path, shape);
            }
        }
    }
    claims(ctx);
    quota_keys(ctx);
}

/// GPU170: DRA's prerequisite Kubernetes release.
fn kubernetes(ctx: &mut Ctx<'_>) {
    let need = &ctx.catalog.dra().driver.prerequisites.kubernetes;
    let (Ok(have), Ok(floor)) = (
        ctx.bp.spec.kubernetes.version.parse::<KubeVersion>(),
        need.parse::<KubeVersion>(),
    ) else {
        return;
    };
    if have < floor {
        ctx.emit(
            "GPU170",
            "spec.kubernetes.version",
            format!(
                "DRA device shapes need Kubernetes {need} or newer (NVIDIA's DRA driver prerequisite; resource.k8s.io/{} is served by default from {}); `spec.kubernetes.version` is {}",
                ctx.catalog.dra().kubernetes.api_version.trim_start_matches("resource.k8s.io/"),
                ctx.catalog.dra().kubernetes.v1_from,
                ctx.bp.spec.kubernetes.version
            ),
            format!("upgrade the control plane to {need} or newer, or drop `spec.dra`"),
        );
    }
}

/// GPU171: a shape gpuctl can render. Returns whether it is (only then is it matched to pools).
fn shape_is_valid(
    ctx: &mut Ctx<'_>,
    path: &str,
    shape: &DeviceShape,
    before: &[DeviceShape],
) -> bool {
    let limits = &ctx.catalog.limits().kubernetes_names;
    let class = dra_shape_class(&shape.name);
    let problem = if !gpuctl_model::names::is_dns_label(
        &shape.name,
        limits.dns1123_label_max_length,
    ) || !super::is_dns_subdomain(&class, limits)
    {
        Some((
            format!("{path}.name"),
            format!(
                "shape name `{}` is not a DNS-1123 label (it names the DeviceClass `{class}` and the tenants' ResourceClaimTemplates)",
                gpuctl_model::blueprint::yaml::shorten(&shape.name)
            ),
            "use lower-case letters, digits and `-`".to_string(),
        ))
    } else if before.iter().any(|s| s.name == shape.name) {
        Some((
            format!("{path}.name"),
            format!("shape `{}` is declared twice", shape.name),
            "rename or merge the two shapes".to_string(),
        ))
    } else if shape.has_alternatives() {
        None // its alternatives are shapes of their own; GPU1500 checks the list
    } else if shape.gpu.is_some() == shape.mig.is_some() {
        Some((
            path.to_string(),
            format!(
                "shape `{}` sets {}: a shape claims either whole GPUs (`gpu`) or MIG devices (`mig`), exactly one of them",
                shape.name,
                if shape.gpu.is_some() { "both `gpu` and `mig`" } else { "neither `gpu` nor `mig`" }
            ),
            "write `gpu: {}` (any GPU), `gpu: {model: H100-SXM5-80GB}` or `mig: {profile: 1g.10gb}`".to_string(),
        ))
    } else if shape.count == 0 {
        Some((
            format!("{path}.count"),
            format!(
                "shape `{}` has `count: 0`: a claim of 0 devices holds nothing",
                shape.name
            ),
            "write the devices one claim holds, at least 1".to_string(),
        ))
    } else if let Some(m) = &shape.mig
        && let Err(e) = mig_profile_known(ctx, m)
    {
        Some((
            format!("{path}.mig"),
            format!("shape `{}`: {e}", shape.name),
            "use a profile of the GPU's MIG table (`gpuctl profiles`)".to_string(),
        ))
    } else if let Err(e) = selectors(shape, ctx.catalog) {
        Some((
            path.to_string(),
            format!("shape `{}`: {e}", shape.name),
            "use a GPU model of the catalog, a quantity such as `40Gi`, and versions such as `9.0` or `580.95.05`".to_string(),
        ))
    } else {
        None
    };
    match problem {
        Some((p, message, hint)) => {
            ctx.emit("GPU171", p, message, hint);
            false
        }
        None => true,
    }
}

/// The MIG profile exists on the shape's model (or, without one, on some GPU of the catalog).
fn mig_profile_known(
    ctx: &Ctx<'_>,
    m: &gpuctl_model::blueprint::dra::MigShape,
) -> Result<(), String> {
    let offers = |g: &gpuctl_model::profiles::GpuModel| {
        g.mig
            .as_ref()
            .is_some_and(|s| s.profile(&m.profile).is_some())
    };
    match &m.model {
        Some(model) => match ctx.catalog.gpu(model) {
            None => Err(format!("GPU model `{model}` is not in the catalog")),
            Some(g) if !offers(g) => {
                Err(format!("`{model}` offers no MIG profile `{}`", m.profile))
            }
            Some(_) => Ok(()),
        },
        None if ctx.catalog.gpus().any(offers) => Ok(()),
        None => Err(format!(
            "no GPU of the catalog offers MIG profile `{}`",
            m.profile
        )),
    }
}

/// Devices of `shape` one node of `pool` has, or why the pool cannot serve the shape.
fn devices_per_node(
    ctx: &Ctx<'_>,
    pool: &NodePool,
    driver: Option<&DriverVersion>,
    shape: &DeviceShape,
) -> Result<u32, String> {
    // Per-GPU layouts are built below: a count beyond what a node can hold is GPU018's finding,
    // and must not size an allocation (a hostile `gpu.count: 4294967295`).
    let max = ctx.catalog.limits().node_pools.max_gpus_per_node;
    if pool.gpu.count > max {
        return Err(format!(
            "its gpu.count {} is beyond the {max} GPUs a node can hold",
            pool.gpu.count
        ));
    }
    let gpu = ctx
        .catalog
        .gpu(&pool.gpu.model)
        .ok_or_else(|| format!("its GPU `{}` is not in the catalog", pool.gpu.model))?;
    let model = shape
        .gpu
        .as_ref()
        .and_then(|g| g.model.as_deref())
        .or(shape.mig.as_ref().and_then(|m| m.model.as_deref()));
    if model.is_some_and(|m| m != gpu.key) {
        return Err(format!(
            "its GPUs are {}, not the shape's model `{}`",
            gpu.key,
            model.unwrap_or_default()
        ));
    }
    if let Some(cc) = &shape.min_compute_capability
        && let Ok(floor) = semver_of(cc)
        && version_less(
            &semver_of(&gpu.compute_capability.to_string()).unwrap_or_default(),
            &floor,
        )
    {
        return Err(format!(
            "{} has compute capability {}, below the shape's `minComputeCapability: \"{cc}\"`",
            gpu.key, gpu.compute_capability
        ));
    }
    if let (Some(floor), Some(d)) = (&shape.min_driver, driver)
        && let Ok(floor) = floor.parse::<DriverVersion>()
        && *d < floor
    {
        return Err(format!(
            "its driver is {d}, below the shape's `minDriver: \"{}\"`",
            shape.min_driver.as_deref().unwrap_or_default()
        ));
    }
    let layouts = gpuctl_model::blueprint::resources::mig_layout_per_gpu(pool);
    let (n, mem_gib) = match &shape.mig {
        None => (
            layouts.iter().filter(|l| l.is_none()).count() as u32,
            gpu.memory_gb.map(u64::from),
        ),
        // Partitionable devices: with DynamicMIG the driver publishes every MIG device a GPU
        // without a pre-created layout could hold (their counters on the GPU's), and creates the
        // one allocated; a node holds up to the profile's instance limit per such GPU.
        Some(m) if dynamic_mig(ctx, pool) => (
            layouts
                .iter()
                .filter(|l| l.is_none())
                .map(|_| {
                    gpu.mig
                        .as_ref()
                        .and_then(|s| s.profile(&m.profile))
                        .map_or(0, |p| p.max_instances)
                })
                .sum::<u32>(),
            mig_memory_gb(&m.profile),
        ),
        Some(m) => (
            layouts
                .iter()
                .flatten()
                .map(|l| l.get(&m.profile).copied().unwrap_or(0))
                .sum(),
            mig_memory_gb(&m.profile),
        ),
    };
    if let (Some(min), Some(gib)) = (&shape.min_memory, mem_gib)
        && let Ok(q) = gpuctl_model::quantity::parse(&min.0)
        && q.nano > i128::from(gib) * (1i128 << 30) * 1_000_000_000
    {
        return Err(format!(
            "its {} devices hold at most {gib}Gi, less than the shape's `minMemory: {}`",
            device_type(shape),
            min.0
        ));
    }
    if n == 0 {
        return Err(match &shape.mig {
            None => "all its GPUs are partitioned into MIG devices".to_string(),
            Some(m) => format!("its MIG layout has no `{}` instance", m.profile),
        });
    }
    Ok(n)
}

/// Whether NVIDIA's DRA driver makes MIG devices on demand on `pool` (its DynamicMIG gate on, and
/// the pool served by DRA: every pool under GPUCluster, the `gpuPlugin: dra` pools standalone).
fn dynamic_mig(ctx: &Ctx<'_>, pool: &NodePool) -> bool {
    let gate = &ctx.catalog.dra().shapes.partitionable.driver_gate;
    ctx.bp.spec.dra.as_ref().is_some_and(|d| {
        d.driver.as_ref().is_some_and(|drv| {
            drv.feature_gates.get(gate).copied() == Some(true)
                && (drv.deployment == gpuctl_model::blueprint::dra::DraDeployment::GpuCluster
                    || pool.gpu_plugin == gpuctl_model::blueprint::GpuPlugin::Dra)
        })
    })
}

/// The memory in GB a MIG profile name states (`3g.40gb` -> 40).
fn mig_memory_gb(profile: &str) -> Option<u64> {
    let size = profile.split('.').nth(1)?.split('+').next()?;
    size.strip_suffix("gb")?.parse().ok()
}

/// `a < b` for `x.y.z` versions of numbers.
fn version_less(a: &str, b: &str) -> bool {
    let parse = |s: &str| -> Vec<u64> { s.split('.').filter_map(|p| p.parse().ok()).collect() };
    parse(a) < parse(b)
}

/// GPU172: some pool has nodes with at least `count` devices of the shape. GPU169: on the
/// standalone path, one of those pools is served by DRA.
fn satisfiable(ctx: &mut Ctx<'_>, path: &str, shape: &DeviceShape) {
    let drivers = pool_drivers(ctx);
    let mut reasons = Vec::new();
    let mut best = 0;
    let mut holders: Vec<&NodePool> = Vec::new();
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let driver = drivers.get(i).and_then(|d| d.as_ref()).map(|d| &d.version);
        match devices_per_node(ctx, pool, driver, shape) {
            Ok(n) if n >= shape.count => holders.push(pool),
            Ok(n) => {
                best = best.max(n);
                reasons.push(format!("pool `{}`: {n} per node", pool.name));
            }
            Err(e) => reasons.push(format!("pool `{}`: {e}", pool.name)),
        }
    }
    if !holders.is_empty() {
        let standalone = ctx
            .bp
            .spec
            .dra
            .as_ref()
            .is_some_and(|d| d.standalone().is_some());
        if standalone
            && !holders
                .iter()
                .any(|p| p.gpu_plugin == gpuctl_model::blueprint::GpuPlugin::Dra)
        {
            let names: Vec<String> = holders.iter().map(|p| format!("`{}`", p.name)).collect();
            let message = format!(
                "only pools on the device plugin have devices of shape `{}` ({}): on the standalone path the DRA driver publishes the devices of pools declared `gpuPlugin: dra` only, so claims of it are not allocated until one of them moves",
                shape.name,
                names.join(", ")
            );
            ctx.emit(
                "GPU169",
                path.to_string(),
                message,
                "move one of those pools to DRA (`gpuPlugin: dra`, docs/dra.md, Migration), or keep the shape unclaimed until then",
            );
        }
        return;
    }
    let message = if best > 0 {
        format!(
            "shape `{}` asks for {} devices in one claim, but no node has that many (a claim's devices come from one node): {}",
            shape.name,
            shape.count,
            reasons.join("; ")
        )
    } else {
        format!(
            "no pool has devices of shape `{}`, so its claims never allocate and their pods stay Pending: {}",
            shape.name,
            if reasons.is_empty() {
                "the blueprint has no pools".to_string()
            } else {
                reasons.join("; ")
            }
        )
    };
    ctx.emit(
        "GPU172",
        path.to_string(),
        message,
        "relax the shape (model, floors, count) or add a pool that has such devices",
    );
}

/// gpuctl's bound on the keys of all DRA quotas together (each namespace of a tenant with claims
/// gets one key per shape): 64 shapes in 1,000 tenant namespaces is 64,000, beyond any cluster
/// gpuctl is tested with (`testgen::large_blueprint` has 1,000 namespaces), while a hostile
/// blueprint of many shapes and many namespaces cannot make render quadratic in memory.
const MAX_DRA_QUOTA_KEYS: usize = 100_000;

/// GPU173: tenants claim declared shapes, in amounts a claim fits in, and not through a queue
/// that cannot admit claims.
fn claims(ctx: &mut Ctx<'_>) {
    let shapes = ctx
        .bp
        .spec
        .dra
        .as_ref()
        .map(|d| d.shapes.clone())
        .unwrap_or_default();
    let kueue = ctx.bp.spec.scheduling.queueing == Queueing::Kueue;
    let mut claimed_namespaces = 0usize;
    for (ti, t) in ctx.bp.spec.tenants.clone().iter().enumerate() {
        for (name, &amount) in &t.claims {
            let path =
                gpuctl_model::blueprint::yaml::join(&format!("spec.tenants[{ti}].claims"), name);
            match shapes.iter().find(|s| &s.name == name) {
                None => ctx.emit_at_key(
                    "GPU173",
                    path,
                    format!("tenant `{}` claims shape `{name}`, which `spec.dra.shapes` does not declare", t.name),
                    match gpuctl_model::suggest::closest(name, shapes.iter().map(|s| s.name.as_str())) {
                        Some(c) => format!("did you mean `{c}`?"),
                        None => "declare the shape under `spec.dra.shapes`".to_string(),
                    },
                ),
                Some(s) if s.has_alternatives() && amount == 0 => ctx.emit(
                    "GPU173",
                    path,
                    format!("tenant `{}` may hold `{name}: 0` claims of shape `{name}` (`firstAvailable: [{}]`): the quota refuses every claim", t.name, s.first_available.join(", ")),
                    "allow at least 1 (for a shape of alternatives the amount counts claims)".to_string(),
                ),
                Some(s) if s.has_alternatives() => {}
                Some(s) if amount < s.count => ctx.emit(
                    "GPU173",
                    path,
                    format!("tenant `{}` may hold {amount} devices of shape `{name}`, but one claim of it takes {}: the quota refuses every claim", t.name, s.count),
                    format!("allow at least {} (a multiple of it)", s.count),
                ),
                Some(_) => {}
            }
        }
        if !t.claims.is_empty() {
            claimed_namespaces += t.namespaces.len();
        }
        if kueue && !t.claims.is_empty() {
            kueue_admits(ctx, ti, &shapes);
        }
    }
    if kueue {
        // Counted on the mappings gpuctl renders, which also hold the classes that serve extended
        // resources (`spec.dra.extendedResources`).
        let max = ctx.catalog.dra().kueue.max_classes_per_mapping as usize;
        for (resource, classes) in crate::extended::kueue_class_mappings(ctx.bp, ctx.catalog) {
            if classes.len() > max {
                let shaped = classes
                    .iter()
                    .filter(|c| {
                        shapes
                            .iter()
                            .any(|s| gpuctl_model::names::dra_shape_class(&s.name) == **c)
                    })
                    .count();
                let others = classes.len() - shaped;
                ctx.emit(
                    "GPU173",
                    "spec.dra.shapes",
                    format!(
                        "{} device classes are charged to Kueue resource `{resource}` ({shaped} shapes{}), but one of Kueue's `deviceClassMappings` names at most {max} device classes: Kueue refuses the configuration and does not start",
                        classes.len(),
                        if others > 0 {
                            format!(" and {}", classes.iter().filter(|c| shapes.iter().all(|s| gpuctl_model::names::dra_shape_class(&s.name) != **c)).map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", "))
                        } else {
                            String::new()
                        }
                    ),
                    format!("merge shapes so that at most {} are of the same kind (whole GPUs, or one MIG profile)", max.saturating_sub(others)),
                );
            }
        }
    }
    let classes = shapes.len() + ctx.catalog.dra().driver.device_classes.len();
    let keys = claimed_namespaces.saturating_mul(classes);
    if keys > MAX_DRA_QUOTA_KEYS {
        ctx.emit(
            "GPU173",
            "spec.dra.shapes",
            format!("{} shapes in {claimed_namespaces} tenant namespaces with claims make {keys} quota keys (every namespace's DRA quota names every shape), more than gpuctl renders ({MAX_DRA_QUOTA_KEYS})", shapes.len()),
            "use fewer shapes, or split the cluster into several blueprints",
        );
    }
}

/// GPU173, under Kueue: a queued tenant's claims can be admitted. Kueue charges a claim to the
/// resource its class is mapped to (gpuctl maps each shape, [`crate::cel::kueue_resource`]); the
/// tenant's ClusterQueue must cover that resource, on a Kueue release whose DRA integration is
/// on, or every such job stays inadmissible.
fn kueue_admits(ctx: &mut Ctx<'_>, ti: usize, shapes: &[DeviceShape]) {
    let t = ctx.bp.spec.tenants[ti].clone();
    let Some(queue) = t.queue.as_deref() else {
        return;
    };
    let Some(kueue) = ctx.bp.spec.scheduling.kueue.clone() else {
        return;
    };
    let facts = &ctx.catalog.dra().kueue;
    let path = format!("spec.tenants[{ti}].claims");
    if !gpuctl_model::profiles::QueueSystem::at_least(&kueue.version, &facts.dra_since) {
        ctx.emit(
            "GPU173",
            path,
            format!("tenant `{}` claims DRA devices through Kueue {}, whose DRA integration is off by default (on from {})", t.name, kueue.version, facts.dra_since),
            format!("upgrade Kueue to {} or later, or run the tenant's DRA workloads without a queue", facts.dra_since),
        );
        return;
    }
    let Some(cq) = kueue.cluster_queues.iter().find(|c| c.name == queue) else {
        return; // an unknown queue is another rule's finding
    };
    for name in t.claims.keys() {
        let Some(shape) = shapes.iter().find(|s| &s.name == name) else {
            continue;
        };
        if shape.has_alternatives() {
            continue; // Kueue admits no such claim: GPU1500
        }
        let resource = crate::cel::kueue_resource(shape, ctx.catalog);
        if !cq.resources.iter().any(|r| r.quota.contains_key(&resource)) {
            ctx.emit_at_key(
                "GPU173",
                gpuctl_model::blueprint::yaml::join(&path, name),
                format!("tenant `{}` claims shape `{name}` through ClusterQueue `{queue}`, which has no quota for `{resource}` (Kueue charges the shape's claims to it): its jobs are never admitted", t.name),
                format!("give `{queue}` a quota for `{resource}` on the pool whose devices the shape selects"),
            );
        }
    }
}

/// GPU174: a quota key on a device class names a class that exists (a shape's, or one of NVIDIA's
/// driver classes); any other counts nothing.
fn quota_keys(ctx: &mut Ctx<'_>) {
    let facts = ctx.catalog.dra();
    let mut known: Vec<String> = facts
        .driver
        .device_classes
        .iter()
        .map(|c| c.name.clone())
        .collect();
    if let Some(d) = &ctx.bp.spec.dra {
        known.extend(
            d.shapes
                .iter()
                .filter(|s| !s.has_alternatives())
                .map(|s| dra_shape_class(&s.name)),
        );
    }
    let mut found = Vec::new();
    for (ti, t) in ctx.bp.spec.tenants.iter().enumerate() {
        for key in t.quota.keys() {
            let bare = key.strip_prefix("requests.").unwrap_or(key);
            if let Some(class) = facts.kubernetes.quota.class_of_key(bare)
                && (bare != key || !known.iter().any(|k| k == class))
            {
                found.push((ti, key.clone(), class.to_string(), bare != key));
            }
        }
    }
    for (ti, key, class, prefixed) in found {
        let path = gpuctl_model::blueprint::yaml::join(&format!("spec.tenants[{ti}].quota"), &key);
        let (message, hint) = if prefixed {
            (
                format!(
                    "`{key}` is accepted by the API server but never enforced: device-class quota keys have no `requests.` form"
                ),
                format!("write `{}`", key.trim_start_matches("requests.")),
            )
        } else {
            (
                format!("`{key}` names device class `{class}`, which neither a shape nor NVIDIA's DRA driver defines: the API server accepts the key and it counts nothing"),
                match gpuctl_model::suggest::closest(&class, known.iter().map(String::as_str)) {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => "name a class of `spec.dra.shapes` (`<shape>.shapes.gpuctl.dev`) or of the driver (`gpu.nvidia.com`)".to_string(),
                },
            )
        };
        ctx.emit_at_key("GPU174", path, message, hint);
    }
}
