//! What a pool offers the scheduler: extended resource names and amounts that follow its partitioning
//! (docs/blueprint.md, "Resource names follow the partitioning").

use std::collections::BTreeMap;

use super::model::{MigStrategy, NodePool, PartitionMode};

/// The whole-GPU resource.
pub const GPU: &str = "nvidia.com/gpu";
/// The shared-GPU resource under `renameByDefault`.
pub const GPU_SHARED: &str = "nvidia.com/gpu.shared";

/// The device plugin's resource name for a MIG profile under the `mixed` strategy. `+` is not valid
/// in a resource name; the device plugin writes it as `.` (as MIG Manager does in config names).
pub fn mig_resource(profile: &str) -> String {
    format!("nvidia.com/mig-{}", profile.replace('+', "."))
}

/// True for resources the device plugin advertises (GPU-like, whole numbers only).
pub fn is_gpu_resource(name: &str) -> bool {
    name == GPU || name == GPU_SHARED || name.starts_with("nvidia.com/mig-")
}

/// True for extended resources (a prefix other than `kubernetes.io`), which ResourceQuota
/// enforces only as `requests.<name>`. As in Kubernetes (`IsExtendedResourceName`), the prefix need
/// not contain a dot: the RDMA shared device plugin advertises `rdma/<name>`.
pub fn is_extended_resource(name: &str) -> bool {
    match name.split_once('/') {
        Some((domain, _)) => {
            !domain.is_empty() && domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io")
        }
        None => false,
    }
}

/// MIG instances per GPU index, for GPUs `0..count`; `None` for GPUs with MIG off.
pub fn mig_layout_per_gpu(pool: &NodePool) -> Vec<Option<BTreeMap<String, u32>>> {
    let count = pool.gpu.count as usize;
    let mut out = vec![None; count];
    let Some(mig) = pool.partitioning.mig.as_ref() else {
        return out;
    };
    if let Some(layout) = &mig.layout {
        out.iter_mut().for_each(|g| *g = Some(layout.clone()));
    } else if let Some(groups) = &mig.devices {
        for group in groups {
            for &i in &group.gpus {
                if let Some(slot) = out.get_mut(i as usize) {
                    *slot = Some(group.layout.clone());
                }
            }
        }
    }
    out
}

/// Resources one node of the pool advertises, by name.
pub fn per_node(pool: &NodePool) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let count = u64::from(pool.gpu.count);
    let p = &pool.partitioning;
    match p.mode {
        PartitionMode::None => {
            out.insert(GPU.to_string(), count);
        }
        PartitionMode::TimeSlicing | PartitionMode::Mps => {
            let (replicas, rename) = match (p.mode, &p.time_slicing, &p.mps) {
                (PartitionMode::TimeSlicing, Some(t), _) => (t.replicas, t.rename_by_default),
                (PartitionMode::Mps, _, Some(m)) => (m.replicas, m.rename_by_default),
                _ => (1, false),
            };
            let name = if rename { GPU_SHARED } else { GPU };
            out.insert(
                name.to_string(),
                count.saturating_mul(u64::from(replicas.max(1))),
            );
        }
        PartitionMode::Mig => {
            let strategy = p.mig.as_ref().map(|m| m.strategy).unwrap_or_default();
            for gpu in mig_layout_per_gpu(pool) {
                match gpu {
                    None => {
                        let n = out.entry(GPU.to_string()).or_insert(0);
                        *n = n.saturating_add(1);
                    }
                    Some(layout) => {
                        for (profile, n) in layout {
                            let name = match strategy {
                                MigStrategy::Single => GPU.to_string(),
                                MigStrategy::Mixed => mig_resource(&profile),
                            };
                            let e = out.entry(name).or_insert(0);
                            *e = e.saturating_add(u64::from(n));
                        }
                    }
                }
            }
        }
    }
    out.retain(|_, v| *v > 0);
    out
}

/// Resources the whole pool can advertise: per node x its most nodes (`nodes`, or
/// `provisioner.maxNodes` for a pool a provisioner scales).
pub fn pool_capacity(pool: &NodePool) -> BTreeMap<String, u64> {
    pool_capacity_at(pool, pool.max_nodes())
}

/// Resources the pool advertises with `nodes` nodes.
pub fn pool_capacity_at(pool: &NodePool, nodes: u32) -> BTreeMap<String, u64> {
    per_node(pool)
        .into_iter()
        .map(|(k, v)| (k, v.saturating_mul(u64::from(nodes))))
        .collect()
}
