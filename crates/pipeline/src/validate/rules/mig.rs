//! MIG: capable GPU, known profiles, layouts that fit, strategy and config shape (GPU030-GPU034).

use std::collections::{BTreeMap, BTreeSet};

use crate::validate::Ctx;
use gpuctl_model::blueprint::{Mig, MigDevices, MigStrategy, NodePool, PartitionMode};
use gpuctl_model::profiles::{GpuModel, MigFitError, MigSupport};

pub(super) fn check(ctx: &mut Ctx<'_>) {
    cluster_wide_strategy(ctx);
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let base = format!("spec.nodePools[{i}].partitioning");
        let p = &pool.partitioning;
        if p.mode != PartitionMode::Mig {
            if p.mig.is_some() {
                ctx.emit(
                    "GPU034",
                    format!("{base}.mig"),
                    "a `mig` section is only read with `mode: mig`",
                    "set `mode: mig` or remove the section",
                );
            }
            continue;
        }
        let Some(mig) = &p.mig else {
            ctx.emit(
                "GPU034",
                format!("{base}.mode"),
                "`mode: mig` needs a `mig` section with a layout",
                "add `mig: {strategy: mixed, layout: {...}}`",
            );
            continue;
        };
        // Layouts to check, each with the path it came from.
        let mut layouts: Vec<(String, &BTreeMap<String, u32>)> = Vec::new();
        match (&mig.layout, &mig.devices) {
            (Some(_), Some(_)) => {
                ctx.emit(
                    "GPU034",
                    format!("{base}.mig.devices"),
                    "`layout` and `devices` are exclusive",
                    "keep `layout` (same on every GPU) or `devices` (per GPU group)",
                );
            }
            (None, None) => {
                ctx.emit(
                    "GPU034",
                    format!("{base}.mig"),
                    "the `mig` section has neither `layout` nor `devices`",
                    "add `layout: {\"3g.40gb\": 2}` or per-GPU `devices`",
                );
            }
            (Some(l), None) => layouts.push((format!("{base}.mig.layout"), l)),
            (None, Some(groups)) => device_groups(ctx, &base, pool, mig, groups, &mut layouts),
        }
        if mig.strategy == MigStrategy::Single {
            let profiles: BTreeSet<&str> = layouts
                .iter()
                .flat_map(|(_, l)| l.iter().filter(|(_, n)| **n > 0).map(|(k, _)| k.as_str()))
                .collect();
            if profiles.len() > 1 {
                let list: Vec<&str> = profiles.into_iter().collect();
                ctx.emit(
                    "GPU033",
                    format!("{base}.mig.strategy"),
                    format!("`single` strategy allows one MIG profile per node, but the layout uses {}", list.join(", ")),
                    "use `strategy: mixed` (resources `nvidia.com/mig-<profile>`) or a single profile",
                );
            }
        }
        let Some(gpu) = ctx.catalog.gpu(&pool.gpu.model) else {
            continue;
        };
        let Some(support) = &gpu.mig else {
            let capable: Vec<&str> = ctx
                .catalog
                .gpus()
                .filter(|g| g.mig.is_some())
                .map(|g| g.key.as_str())
                .collect();
            ctx.emit(
                "GPU030",
                format!("{base}.mode"),
                format!("{} does not support MIG (pool `{}`)", gpu.key, pool.name),
                format!(
                    "use `time-slicing` or `mps` here; MIG-capable models: {}",
                    capable.join(", ")
                ),
            );
            continue;
        };
        for (path, layout) in layouts {
            fits(ctx, path, layout, gpu, support);
        }
    }
}

/// GPU033 and GPU034 for per-GPU `devices`: each GPU index exists and appears once, each group
/// lists GPUs, and `single` covers every GPU; each group's layout goes to `layouts`.
fn device_groups<'a>(
    ctx: &mut Ctx<'_>,
    base: &str,
    pool: &NodePool,
    mig: &Mig,
    groups: &'a [MigDevices],
    layouts: &mut Vec<(String, &'a BTreeMap<String, u32>)>,
) {
    let mut seen = BTreeSet::new();
    for (g, group) in groups.iter().enumerate() {
        for (k, idx) in group.gpus.iter().enumerate() {
            let path = format!("{base}.mig.devices[{g}].gpus[{k}]");
            if *idx >= pool.gpu.count {
                ctx.emit(
                    "GPU034",
                    path,
                    format!(
                        "GPU index {idx} does not exist on a node with {} GPUs",
                        pool.gpu.count
                    ),
                    format!("use indices 0..{}", pool.gpu.count.saturating_sub(1)),
                );
            } else if !seen.insert(*idx) {
                ctx.emit(
                    "GPU034",
                    path,
                    format!("GPU index {idx} appears in two device groups"),
                    "list each GPU index once",
                );
            }
        }
        if group.gpus.is_empty() {
            ctx.emit(
                "GPU034",
                format!("{base}.mig.devices[{g}].gpus"),
                "device group lists no GPUs",
                "list the GPU indices this layout applies to",
            );
        }
        layouts.push((format!("{base}.mig.devices[{g}].layout"), &group.layout));
    }
    if mig.strategy == MigStrategy::Single && (seen.len() as u32) < pool.gpu.count {
        ctx.emit(
            "GPU033",
            format!("{base}.mig.devices"),
            format!(
                "`single` strategy needs MIG on every GPU, but {} of {} GPUs have no layout",
                pool.gpu.count - seen.len() as u32,
                pool.gpu.count
            ),
            "cover every GPU index, or use `strategy: mixed`",
        );
    }
}

/// GPU031, GPU032 and GPU034 for one layout: it has instances, its profiles exist on the GPU and
/// they fit one GPU.
fn fits(
    ctx: &mut Ctx<'_>,
    path: String,
    layout: &BTreeMap<String, u32>,
    gpu: &GpuModel,
    support: &MigSupport,
) {
    if layout.values().all(|n| *n == 0) {
        ctx.emit(
            "GPU034",
            path,
            "the layout has no instances",
            "give at least one profile a count above zero",
        );
        return;
    }
    let request: Vec<(String, u32)> = layout
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    match support.fit(&request) {
        Ok(_) => {}
        Err(MigFitError::UnknownProfile { profile, .. }) => {
            let names: Vec<&str> = support.profiles.iter().map(|p| p.name.as_str()).collect();
            let hint = match gpuctl_model::suggest::closest(&profile, names.iter().copied()) {
                Some(c) => format!(
                    "did you mean `{c}`? {} profiles: {}",
                    gpu.key,
                    names.join(", ")
                ),
                None => format!("{} profiles: {}", gpu.key, names.join(", ")),
            };
            let key_path = gpuctl_model::blueprint::yaml::join(&path, &profile);
            ctx.emit_at_key(
                "GPU031",
                key_path,
                format!("MIG profile `{profile}` does not exist on {}", gpu.key),
                hint,
            );
        }
        Err(e) => ctx.emit(
            "GPU032",
            path,
            format!("this layout does not fit one {} GPU: {e}", gpu.key),
            "reduce the instances or use smaller profiles",
        ),
    }
}

/// The operator configures one MIG strategy for the whole cluster (GPU035).
fn cluster_wide_strategy(ctx: &mut Ctx<'_>) {
    let pools = &ctx.bp.spec.node_pools;
    let mig: Vec<(usize, MigStrategy)> = pools
        .iter()
        .enumerate()
        .filter(|(_, p)| p.partitioning.mode == PartitionMode::Mig)
        .map(|(i, p)| {
            (
                i,
                p.partitioning
                    .mig
                    .as_ref()
                    .map(|m| m.strategy)
                    .unwrap_or_default(),
            )
        })
        .collect();
    if let Some((first, strategy)) = mig.first().copied() {
        for &(i, s) in &mig[1..] {
            if s != strategy {
                ctx.emit(
                    "GPU035",
                    format!("spec.nodePools[{i}].partitioning.mig.strategy"),
                    format!(
                        "pool `{}` uses the `{}` MIG strategy but pool `{}` uses `{}`; the operator sets one strategy for the cluster",
                        pools[i].name,
                        strategy_name(s),
                        pools[first].name,
                        strategy_name(strategy)
                    ),
                    "use one MIG strategy in every pool",
                );
            }
        }
    }
    if let Some(&(mixed, _)) = mig.iter().find(|(_, s)| *s == MigStrategy::Mixed) {
        for (i, p) in pools.iter().enumerate() {
            if p.partitioning.mode == PartitionMode::Mps {
                ctx.emit(
                    "GPU035",
                    format!("spec.nodePools[{i}].partitioning.mode"),
                    format!(
                        "MPS on pool `{}` does not work while pool `{}` makes the cluster's MIG strategy `mixed`: the device plugin refuses MPS under it",
                        p.name, pools[mixed].name
                    ),
                    "use time-slicing on this pool, or the `single` MIG strategy (one profile per node)",
                );
            }
        }
    }
}

fn strategy_name(s: MigStrategy) -> &'static str {
    match s {
        MigStrategy::Single => "single",
        MigStrategy::Mixed => "mixed",
    }
}
