//! Sharing: time-slicing and MPS settings (GPU040-GPU042).

use crate::validate::Ctx;
use gpuctl_model::blueprint::{PartitionMode, Role};

pub(super) fn check(ctx: &mut Ctx<'_>) {
    let min = ctx.catalog.limits().device_plugin.min_sharing_replicas;
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let base = format!("spec.nodePools[{i}].partitioning");
        let p = &pool.partitioning;
        if p.time_slicing.is_some() && p.mode != PartitionMode::TimeSlicing {
            ctx.emit(
                "GPU042",
                format!("{base}.timeSlicing"),
                "a `timeSlicing` section is only read with `mode: time-slicing`",
                "set the mode or remove the section",
            );
        }
        if p.mps.is_some() && p.mode != PartitionMode::Mps {
            ctx.emit(
                "GPU042",
                format!("{base}.mps"),
                "an `mps` section is only read with `mode: mps`",
                "set the mode or remove the section",
            );
        }
        let (replicas, field) = match p.mode {
            PartitionMode::TimeSlicing => {
                (p.time_slicing.as_ref().map(|t| t.replicas), "timeSlicing")
            }
            PartitionMode::Mps => (p.mps.as_ref().map(|m| m.replicas), "mps"),
            _ => continue,
        };
        match replicas {
            None => ctx.emit(
                "GPU040",
                format!("{base}.mode"),
                format!(
                    "`mode: {}` needs a `{field}` section with `replicas`",
                    if field == "mps" {
                        "mps"
                    } else {
                        "time-slicing"
                    }
                ),
                format!("add `{field}: {{replicas: 4}}`"),
            ),
            Some(r) if r < min => ctx.emit(
                "GPU040",
                format!("{base}.{field}.replicas"),
                format!(
                    "{r} replica(s) do not share a GPU; the device plugin requires at least {min}"
                ),
                format!("set `replicas` to {min} or more, or use `mode: none`"),
            ),
            _ => {}
        }
        if p.mode == PartitionMode::TimeSlicing && pool.role == Role::Inference {
            ctx.emit(
                "GPU041",
                format!("{base}.mode"),
                format!("pool `{}` serves latency-sensitive inference on time-sliced GPUs (no memory or fault isolation)", pool.name),
                "use MIG on MIG-capable GPUs, or MPS, for inference pools",
            );
        }
    }
}
