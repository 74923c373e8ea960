//! Provisioned pools (GPU1400-GPU1408): readiness keys, scale from zero, DRA at zero, driver
//! ownership, instance types, MIG overlays, capacity at the maximum, consolidation of training
//! pools, and the provisioner's own settings. Facts: `profiles/provisioning.yaml`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::validate::Ctx;
use gpuctl_model::blueprint::provisioning::{DriverOwner, Platform, ProvisionerKind};
use gpuctl_model::blueprint::resources::{GPU, per_node, pool_capacity_at};
use gpuctl_model::blueprint::{GpuPlugin, NodePool, PartitionMode, Role, TaintEffect};
use gpuctl_model::profiles::provisioning::ProvisioningFacts;

pub(super) fn check(ctx: &mut Ctx<'_>) {
    settings(ctx);
    readiness(ctx);
    let facts = ctx.catalog.provisioning();
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let base = format!("spec.nodePools[{i}]");
        instance_types(ctx, facts, &base, pool);
        if !pool.provisioner.scales() {
            continue;
        }
        scale_from_zero(ctx, facts, &base, pool);
        dra_at_zero(ctx, facts, &base, pool);
        driver_ownership(ctx, facts, &base, pool);
        mig_overlay(ctx, &base, pool);
        consolidation(ctx, facts, &base, pool);
    }
    dra_root(ctx, facts);
    capacity_at_max(ctx);
}

/// A Karpenter duration (`30s`, `1h30m`) or `Never`.
fn karpenter_duration(text: &str) -> bool {
    if text == "Never" {
        return true;
    }
    let mut digits = false;
    let mut units = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits = true;
        } else if matches!(c, 's' | 'm' | 'h') && digits {
            digits = false;
            units = true;
        } else {
            return false;
        }
    }
    units && !digits
}

/// GPU1408: the provisioner's own settings hold together.
fn settings(ctx: &mut Ctx<'_>) {
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let base = format!("spec.nodePools[{i}].provisioner");
        if !pool.provisioner.scales() {
            static_settings(ctx, &base, pool);
            continue;
        }
        if !bounds(ctx, i, &base, pool) {
            continue;
        }
        foreign_settings(ctx, &base, pool);
        match pool.provisioner.kind {
            ProvisionerKind::Karpenter => karpenter_settings(ctx, &base, pool),
            ProvisionerKind::ClusterApi => {
                if pool.provisioner.machine_deployment.is_none() {
                    ctx.emit(
                        "GPU1408",
                        format!("{base}.type"),
                        "a `clusterAPI` pool needs `machineDeployment`, the MachineDeployment the Cluster Autoscaler scales",
                        "add `machineDeployment: {name: <name>, namespace: <namespace>}`",
                    );
                }
            }
            ProvisionerKind::Managed => {
                if pool
                    .provisioner
                    .platform
                    .is_none_or(|pl| pl == Platform::Kwok)
                {
                    ctx.emit(
                        "GPU1408",
                        format!("{base}.type"),
                        "a `managed` pool needs `platform: eks`, `gke` or `aks`: its driver ownership and scale-from-zero settings depend on it",
                        "add `platform`",
                    );
                }
            }
            ProvisionerKind::Static => {}
        }
    }
}

/// A static pool sets none of the provisioner's settings.
fn static_settings(ctx: &mut Ctx<'_>, base: &str, pool: &NodePool) {
    let p = &pool.provisioner;
    let set: Vec<&str> = [
        ("minNodes", p.min_nodes.is_some()),
        ("maxNodes", p.max_nodes.is_some()),
        ("instanceTypes", !p.instance_types.is_empty()),
        ("nodeClass", p.node_class.is_some()),
        ("disruption", p.disruption.is_some()),
        ("expireAfter", p.expire_after.is_some()),
        ("nodeOverlay", p.node_overlay.is_some()),
        ("machineDeployment", p.machine_deployment.is_some()),
        ("templateResources", !p.template_resources.is_empty()),
    ]
    .into_iter()
    .filter_map(|(n, on)| on.then_some(n))
    .collect();
    if let Some(first) = set.first() {
        ctx.emit(
            "GPU1408",
            format!("{base}.{first}"),
            format!("a `static` pool does not read {}", set.join(", ")),
            "set `provisioner.type` to the provisioner that makes the pool's nodes, or remove these settings",
        );
    }
}

/// `maxNodes` is there and `minNodes` <= `nodes` <= `maxNodes`; false when the bounds are missing.
fn bounds(ctx: &mut Ctx<'_>, i: usize, base: &str, pool: &NodePool) -> bool {
    let p = &pool.provisioner;
    let Some(max) = p.max_nodes else {
        ctx.emit(
            "GPU1408",
            format!("{base}.type"),
            format!(
                "a `{}` pool needs `maxNodes`: it is the pool's capacity for every quota and queue check",
                p.kind.as_str()
            ),
            "add `maxNodes` (and `minNodes`, 0 to scale to zero)",
        );
        return false;
    };
    let min = p.min_nodes.unwrap_or(0);
    if min > max {
        ctx.emit(
            "GPU1408",
            format!("{base}.minNodes"),
            format!("`minNodes` {min} is above `maxNodes` {max}"),
            "make `minNodes` at most `maxNodes`",
        );
    } else if pool.nodes > max || pool.nodes < min {
        ctx.emit(
            "GPU1408",
            format!("spec.nodePools[{i}].nodes"),
            format!(
                "`nodes` {} (the count expected now) is outside the provisioner's {min}..{max}",
                pool.nodes
            ),
            format!("set `nodes` between {min} and {max}"),
        );
    }
    true
}

/// Settings of another provisioner type.
fn foreign_settings(ctx: &mut Ctx<'_>, base: &str, pool: &NodePool) {
    let p = &pool.provisioner;
    let foreign: &[(&str, bool)] = match p.kind {
        ProvisionerKind::Karpenter => &[
            ("machineDeployment", p.machine_deployment.is_some()),
            ("templateResources", !p.template_resources.is_empty()),
        ],
        ProvisionerKind::ClusterApi => &[
            ("nodeClass", p.node_class.is_some()),
            ("disruption", p.disruption.is_some()),
            ("expireAfter", p.expire_after.is_some()),
            ("nodeOverlay", p.node_overlay.is_some()),
            ("templateResources", !p.template_resources.is_empty()),
        ],
        _ => &[
            ("nodeClass", p.node_class.is_some()),
            ("disruption", p.disruption.is_some()),
            ("expireAfter", p.expire_after.is_some()),
            ("nodeOverlay", p.node_overlay.is_some()),
            ("machineDeployment", p.machine_deployment.is_some()),
        ],
    };
    for (name, set) in foreign {
        if *set {
            ctx.emit(
                "GPU1408",
                format!("{base}.{name}"),
                format!("a `{}` pool does not read `{name}`", p.kind.as_str()),
                "remove it, or set the `type` that reads it",
            );
        }
    }
}

/// Karpenter: instance types, platform, NodeClass, durations, policy and budgets.
fn karpenter_settings(ctx: &mut Ctx<'_>, base: &str, pool: &NodePool) {
    let facts = ctx.catalog.provisioning();
    let p = &pool.provisioner;
    if p.instance_types.is_empty() {
        ctx.emit(
            "GPU1408",
            format!("{base}.type"),
            "a `karpenter` pool needs `instanceTypes`: they become the NodePool's instance-type requirement",
            "list the catalog's instance types the pool may launch (profiles/provisioning.yaml)",
        );
    }
    let known = p
        .platform
        .is_some_and(|pl| facts.karpenter.node_classes.contains_key(pl.as_str()));
    if !known {
        ctx.emit(
            "GPU1408",
            format!("{base}.platform"),
            format!(
                "a `karpenter` pool needs a `platform` whose NodeClass gpuctl knows ({})",
                facts
                    .karpenter
                    .node_classes
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "set `platform` to the cloud Karpenter runs on",
        );
    }
    if p.node_class.is_none() {
        ctx.emit(
            "GPU1408",
            format!("{base}.type"),
            "a `karpenter` pool needs `nodeClass`, the name of the NodeClass its NodePool references",
            "add `nodeClass: <name>`",
        );
    }
    if let Some(e) = &p.expire_after
        && !karpenter_duration(e)
    {
        ctx.emit(
            "GPU1408",
            format!("{base}.expireAfter"),
            format!("`{e}` is not a duration Karpenter accepts"),
            "write a number and a unit (`720h`, `30m`) or `Never`",
        );
    }
    if let Some(d) = &p.disruption {
        disruption_settings(ctx, base, d);
    }
}

/// Karpenter's disruption block: duration, policy, budgets.
fn disruption_settings(
    ctx: &mut Ctx<'_>,
    base: &str,
    d: &gpuctl_model::blueprint::provisioning::Disruption,
) {
    let k = &ctx.catalog.provisioning().karpenter;
    if let Some(a) = &d.consolidate_after
        && !karpenter_duration(a)
    {
        ctx.emit(
            "GPU1408",
            format!("{base}.disruption.consolidateAfter"),
            format!("`{a}` is not a duration Karpenter accepts"),
            "write a number and a unit (`1h`) or `Never`",
        );
    }
    if let Some(policy) = &d.consolidation_policy {
        let ok = policy == &k.training_defaults.consolidation_policy
            || k.evicting_policies.contains(policy);
        if !ok {
            ctx.emit(
                "GPU1408",
                format!("{base}.disruption.consolidationPolicy"),
                format!(
                    "`{policy}` is not a consolidation policy of Karpenter {}",
                    k.version
                ),
                format!(
                    "use {} or {}",
                    k.training_defaults.consolidation_policy,
                    k.evicting_policies.join(", ")
                ),
            );
        }
    }
    for (b, budget) in d.budgets.iter().enumerate() {
        if !budget_nodes(&budget.nodes) || budget.schedule.is_some() != budget.duration.is_some() {
            ctx.emit(
                "GPU1408",
                format!("{base}.disruption.budgets[{b}]"),
                format!("budget `{}` is not one Karpenter accepts (a count or a percentage, `schedule` and `duration` together)", budget.nodes),
                "write `nodes: \"0\"` or `\"10%\"`; give both `schedule` and `duration` or neither",
            );
        }
    }
}

/// Karpenter's budget `nodes` pattern: `^((100|[0-9]{1,2})%|[0-9]+)$`.
fn budget_nodes(s: &str) -> bool {
    match s.strip_suffix('%') {
        Some(p) => {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() < 3 || p == "100")
        }
        None => !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// GPU1400: one readiness key, accepted by what removes it and tolerated where it must be.
fn readiness(ctx: &mut Ctx<'_>) {
    let Some(r) = &ctx.bp.spec.node_readiness else {
        return;
    };
    let facts = &ctx.catalog.provisioning().readiness;
    let key = r.taint_key.clone();
    if !key.starts_with(&facts.key_prefix) || key.matches('/').count() != 1 || key.len() > 253 {
        ctx.emit(
            "GPU1400",
            "spec.nodeReadiness.taintKey",
            format!(
                "`{key}` is not a key the Node Readiness Controller accepts: it takes one `/`, under `{}`, and Karpenter treats only that prefix as a readiness taint",
                facts.key_prefix
            ),
            format!("use `{}nvidia-gpu-not-ready`", facts.key_prefix),
        );
    }
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        for (t, taint) in pool.taints.iter().enumerate() {
            if taint.key.starts_with(&facts.key_prefix) && taint.key != key {
                ctx.emit(
                    "GPU1400",
                    format!("spec.nodePools[{i}].taints[{t}].key"),
                    format!(
                        "pool `{}` has readiness taint `{}` while `nodeReadiness.taintKey` is `{key}`: nothing removes the other key",
                        pool.name, taint.key
                    ),
                    "use the one key of `nodeReadiness`; gpuctl adds it to the pool's startup taints itself",
                );
            }
        }
        if let Some(pl) = pool.provisioner.platform
            && pool.provisioner.kind == ProvisionerKind::Managed
            && facts
                .managed_without_readiness_prefix
                .iter()
                .any(|p| p == pl.as_str())
        {
            ctx.emit(
                "GPU1400",
                format!("spec.nodePools[{i}].provisioner.platform"),
                format!(
                    "the managed {} autoscaler honours only `{}` startup taints, which the Node Readiness Controller refuses: it would count `{key}` as permanent and scale up again",
                    pl.as_str(),
                    facts.managed_autoscaler_prefix
                ),
                "gate this pool with Karpenter or a self-managed Cluster Autoscaler (`--startup-taint-prefix`), or leave `nodeReadiness` out",
            );
        }
    }
    // Raw chart values replace the lists gpuctl renders: they must still tolerate the key.
    for path in [
        "daemonsets.tolerations",
        "node-feature-discovery.worker.tolerations",
    ] {
        let mut v: Option<&Value> = None;
        let mut map = Some(&ctx.bp.spec.gpu_operator.values);
        for part in path.split('.') {
            v = map.and_then(|m| m.get(part));
            map = v.and_then(Value::as_object);
        }
        let Some(list) = v.and_then(Value::as_array) else {
            continue;
        };
        let tolerated = list.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let op = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
            (k == key || (k.is_empty() && op == "Exists"))
                && t.get("effect")
                    .and_then(Value::as_str)
                    .is_none_or(|e| e == "NoSchedule")
        });
        if !tolerated {
            ctx.emit(
                "GPU1400",
                format!("spec.gpuOperator.values.{path}"),
                format!(
                    "`{path}` replaces the tolerations gpuctl renders and does not tolerate `{key}`: the operands would never start on a new node, so the taint is never removed"
                ),
                format!("add `{{key: {key}, operator: Exists, effect: NoSchedule}}`, or leave the list to gpuctl"),
            );
        }
    }
}

/// Resources of a node that no provider infers from the instance type (MIG profiles, renamed
/// shared GPUs): everything but whole `nvidia.com/gpu`.
fn inferred_missing(pool: &NodePool) -> BTreeMap<String, u64> {
    let mut r = per_node(pool);
    r.remove(GPU);
    r
}

/// GPU1401: a MIG or shared pool that can reach zero declares the resources its nodes will have.
fn scale_from_zero(ctx: &mut Ctx<'_>, facts: &ProvisioningFacts, base: &str, pool: &NodePool) {
    let p = &pool.provisioner;
    if !p.can_reach_zero() || pool.partitioning.mode == PartitionMode::None {
        return;
    }
    let needed = inferred_missing(pool);
    if needed.is_empty() {
        return;
    }
    let names = needed.keys().cloned().collect::<Vec<_>>().join(", ");
    match p.kind {
        ProvisionerKind::Karpenter if p.node_overlay == Some(false) => ctx.emit(
            "GPU1401",
            format!("{base}.provisioner.nodeOverlay"),
            format!(
                "pool `{}` scales to zero but declares no {names}: Karpenter infers none of them from the instance type, so a pod asking for one never gets a node",
                pool.name
            ),
            format!(
                "leave `nodeOverlay` on (Karpenter's `{}` feature gate) or keep `minNodes` at 1 or more",
                facts.karpenter.nodeoverlay_gate
            ),
        ),
        ProvisionerKind::ClusterApi if needed.len() > 1 => ctx.emit(
            "GPU1401",
            format!("{base}.partitioning"),
            format!(
                "pool `{}` scales to zero with {names}, but the Cluster Autoscaler's scale-from-zero annotations declare one GPU resource (`gpu-type`, `gpu-count`)",
                pool.name
            ),
            "give the pool one MIG profile (or `strategy: single`), or keep `minNodes` at 1 or more",
        ),
        ProvisionerKind::Managed => {
            let missing: Vec<String> = needed
                .iter()
                .filter(|(k, v)| p.template_resources.get(*k) != Some(v))
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            if !missing.is_empty() {
                ctx.emit(
                    "GPU1401",
                    format!("{base}.provisioner.minNodes"),
                    format!(
                        "pool `{}` scales to zero but its node group template does not declare {}: no provider infers them, so the autoscaler never scales it up for them",
                        pool.name,
                        missing.join(", ")
                    ),
                    "tag the node group (`k8s.io/cluster-autoscaler/node-template/resources/<name>`) and list the same under `templateResources`, or keep `minNodes` at 1 or more",
                );
            }
        }
        _ => {}
    }
}

/// GPU1402: a DRA pool at zero needs a provisioner that templates its ResourceSlices.
fn dra_at_zero(ctx: &mut Ctx<'_>, facts: &ProvisioningFacts, base: &str, pool: &NodePool) {
    let p = &pool.provisioner;
    if pool.gpu_plugin != GpuPlugin::Dra || !p.can_reach_zero() {
        return;
    }
    let why = match (p.kind, p.platform) {
        (ProvisionerKind::Karpenter, _) if !facts.karpenter.dra_slice_templates => Some(
            "Karpenter skips pods with claims by default (`ignoreDRARequests`), and no provider templates GPU ResourceSlices per instance type",
        ),
        (ProvisionerKind::ClusterApi, _)
            if facts.cluster_api.dra_template_whole_gpus_only
                && pool.partitioning.mode == PartitionMode::Mig =>
        {
            Some(
                "the Cluster Autoscaler's template slice from the `dra-driver` annotation has whole GPUs only, so MIG claims never fit it",
            )
        }
        (ProvisionerKind::Managed, Some(Platform::Eks | Platform::Aks)) => Some(
            "the managed autoscaler cannot template the DRA driver's slices for a node group at zero",
        ),
        _ => None,
    };
    if let Some(why) = why {
        ctx.emit(
            "GPU1402",
            format!("{base}.provisioner.minNodes"),
            format!("DRA pool `{}` can scale to zero: {why}; its claims would wait forever", pool.name),
            "keep `minNodes` at 1 or more (the pool's real nodes publish the slices), or use the device plugin on this pool",
        );
    }
}

/// GPU1403: the driver's owner fits the platform and the pool's operands.
fn driver_ownership(ctx: &mut Ctx<'_>, facts: &ProvisioningFacts, base: &str, pool: &NodePool) {
    let owner = facts.driver_owner(pool);
    if let Some(pl) = pool.provisioner.platform
        && let Some(row) = facts.platform_driver(pl.as_str())
        && owner == DriverOwner::Operator
        && !row.operator_allowed
    {
        ctx.emit(
            "GPU1403",
            format!("{base}.provisioner.driver"),
            format!(
                "pool `{}` on {} gets the GPU Operator's driver, but the node image already has one: {}",
                pool.name,
                pl.as_str(),
                row.why
            ),
            "set `driver: host` (gpuctl turns the operator's driver and toolkit off on the pool)",
        );
    }
    let o = &pool.operands;
    if owner == DriverOwner::Host && o.driver == Some(true) {
        ctx.emit(
            "GPU1403",
            format!("{base}.operands.driver"),
            format!(
                "pool `{}` has a host driver (`provisioner.driver: host` or its platform's default) but `operands.driver: true`",
                pool.name
            ),
            "remove `operands.driver` (gpuctl sets it from the owner) or set `provisioner.driver: operator`",
        );
    }
    if owner == DriverOwner::Operator && o.container_toolkit == Some(false) {
        ctx.emit(
            "GPU1403",
            format!("{base}.operands.containerToolkit"),
            format!(
                "pool `{}` gets the operator's driver with the toolkit off: a broken hybrid no node image satisfies (the host toolkit would point at the wrong driver root)",
                pool.name
            ),
            "turn the toolkit on, or set `provisioner.driver: host` (both off together)",
        );
    }
}

/// GPU1403: the DRA driver has one `nvidiaDriverRoot`; its pools must agree on the owner.
fn dra_root(ctx: &mut Ctx<'_>, facts: &ProvisioningFacts) {
    let mut first: Option<(&str, DriverOwner)> = None;
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        if pool.gpu_plugin != GpuPlugin::Dra || !pool.provisioner.scales() {
            continue;
        }
        let owner = facts.driver_owner(pool);
        match first {
            None => first = Some((&pool.name, owner)),
            Some((name, o)) if o != owner => {
                ctx.emit(
                    "GPU1403",
                    format!("spec.nodePools[{i}].provisioner.driver"),
                    format!(
                        "DRA pools `{name}` ({} driver, root `{}`) and `{}` ({} driver, root `{}`) need different `nvidiaDriverRoot`s, but the DRA driver has one",
                        o.as_str(),
                        facts.driver_root(o.as_str()).unwrap_or("?"),
                        pool.name,
                        owner.as_str(),
                        facts.driver_root(owner.as_str()).unwrap_or("?"),
                    ),
                    "give the DRA pools one driver owner",
                );
            }
            _ => {}
        }
    }
}

/// GPU1404: every instance type is in the catalog and has the pool's GPU.
fn instance_types(ctx: &mut Ctx<'_>, facts: &ProvisioningFacts, base: &str, pool: &NodePool) {
    for (j, name) in pool.provisioner.instance_types.iter().enumerate() {
        let path = format!("{base}.provisioner.instanceTypes[{j}]");
        let Some(t) = facts.instance_type(name) else {
            let near = gpuctl_model::suggest::did_you_mean(
                name,
                facts.instance_types.keys().map(String::as_str),
            );
            ctx.emit(
                "GPU1404",
                path,
                format!("instance type `{name}` is not in the catalog (profiles/provisioning.yaml)"),
                format!("{near}use a catalogued type, or add a sourced row to profiles/provisioning.yaml"),
            );
            continue;
        };
        if t.gpu != pool.gpu.model || t.gpus != pool.gpu.count {
            ctx.emit(
                "GPU1404",
                path,
                format!(
                    "`{name}` has {} x {}, the pool declares {} x {}",
                    t.gpus, t.gpu, pool.gpu.count, pool.gpu.model
                ),
                "list only instance types with the pool's GPU model and count, or make another pool for them",
            );
        } else if let Some(pl) = pool.provisioner.platform
            && pl != Platform::Kwok
            && t.platform != pl.as_str()
        {
            ctx.emit(
                "GPU1404",
                path,
                format!(
                    "`{name}` is an {} instance type, the pool is on {}",
                    t.platform,
                    pl.as_str()
                ),
                "list instance types of the pool's platform",
            );
        }
    }
}

/// GPU1405: a MIG pool with an overlay is kept apart from whole-GPU pods by a taint of its own.
fn mig_overlay(ctx: &mut Ctx<'_>, base: &str, pool: &NodePool) {
    let p = &pool.provisioner;
    if p.kind != ProvisionerKind::Karpenter
        || pool.partitioning.mode != PartitionMode::Mig
        || p.node_overlay == Some(false)
    {
        return;
    }
    let others: Vec<&NodePool> = ctx
        .bp
        .spec
        .node_pools
        .iter()
        .filter(|o| o.name != pool.name && o.partitioning.mode != PartitionMode::Mig)
        .collect();
    let own = pool.taints.iter().any(|t| {
        t.effect != TaintEffect::PreferNoSchedule
            && t.key != GPU
            && !others.iter().any(|o| o.taints.contains(t))
    });
    if !own {
        ctx.emit(
            "GPU1405",
            format!("{base}.taints"),
            format!(
                "MIG pool `{}`'s NodeOverlay only adds MIG resources: Karpenter still counts {} whole `{GPU}` per node, so whole-GPU pods can be placed on its nodes, where the device plugin offers none",
                pool.name, pool.gpu.count
            ),
            "give the pool a NoSchedule taint of its own (e.g. `{key: gpuctl.dev/mig, value: <pool>, effect: NoSchedule}`) that only MIG workloads tolerate",
        );
    }
}

/// GPU1407: a training pool's busy nodes are never consolidated and never expire.
fn consolidation(ctx: &mut Ctx<'_>, facts: &ProvisioningFacts, base: &str, pool: &NodePool) {
    let p = &pool.provisioner;
    if p.kind != ProvisionerKind::Karpenter || pool.role != Role::Training {
        return;
    }
    let k = &facts.karpenter;
    if let Some(d) = &p.disruption {
        // Unset policy = Karpenter's default (WhenEmptyOrUnderutilized) once a disruption block is written.
        let policy = d
            .consolidation_policy
            .clone()
            .unwrap_or_else(|| k.evicting_policies[0].clone());
        let blocked = d.budgets.iter().any(|b| {
            b.nodes == "0"
                && b.schedule.is_none()
                && (b.reasons.is_empty() || b.reasons.contains(&k.underutilized_reason))
        });
        if k.evicting_policies.contains(&policy) && !blocked {
            ctx.emit(
                "GPU1407",
                format!("{base}.provisioner.disruption"),
                format!(
                    "training pool `{}` lets Karpenter consolidate busy nodes (`{policy}`) and no budget stops it: a multi-day job on an underutilized node is evicted",
                    pool.name
                ),
                format!(
                    "use `consolidationPolicy: {}`, or add a budget `{{nodes: \"0\", reasons: [{}]}}`",
                    k.training_defaults.consolidation_policy, k.underutilized_reason
                ),
            );
        }
    }
    if let Some(e) = &p.expire_after
        && e != &k.training_defaults.expire_after
    {
        ctx.emit(
            "GPU1407",
            format!("{base}.provisioner.expireAfter"),
            format!(
                "training pool `{}` expires nodes after {e}: expiry ends running jobs whatever `{}` says",
                pool.name, k.do_not_disrupt
            ),
            format!("set `expireAfter: {}` and replace nodes through drift between jobs", k.training_defaults.expire_after),
        );
    }
}

/// One queue's share of a pool's sum: (its quota's field path, the queue, the amount).
type QuotaPart = (String, String, u64);

/// GPU1406: the ClusterQueues that draw on one scaling pool promise, together, more of a resource
/// than the pool has with `nodes` now, but no more than at `maxNodes` (above that is GPU055). The
/// queues' nominal quotas on a pool (its flavor) are summed: each may fit alone while all of them
/// together admit jobs that wait for the scale-up.
fn capacity_at_max(ctx: &mut Ctx<'_>) {
    use std::collections::BTreeMap;
    let mut warned = Vec::new();
    let queues = ctx
        .bp
        .spec
        .scheduling
        .kueue
        .as_ref()
        .map(|k| k.cluster_queues.as_slice())
        .unwrap_or_default();
    // (pool index, resource) -> (sum, [(path, queue, amount)]), in blueprint order.
    let mut sums: BTreeMap<(usize, String), (u64, Vec<QuotaPart>)> = BTreeMap::new();
    for (qi, q) in queues.iter().enumerate() {
        for (ri, r) in q.resources.iter().enumerate() {
            let Some(pi) = ctx.bp.spec.node_pools.iter().position(|p| p.name == r.pool) else {
                continue;
            };
            for (res, amount) in &r.quota {
                let Ok(n) = gpuctl_model::quantity::parse_count(&amount.0) else {
                    continue;
                };
                let e = sums.entry((pi, res.clone())).or_default();
                e.0 += n;
                e.1.push((
                    format!(
                        "spec.scheduling.kueue.clusterQueues[{qi}].resources[{ri}].quota.{res}"
                    ),
                    q.name.clone(),
                    n,
                ));
            }
        }
    }
    for ((pi, res), (n, parts)) in sums {
        let pool = &ctx.bp.spec.node_pools[pi];
        if !pool.provisioner.scales() || !ctx.pool_in_bounds(pool) {
            continue;
        }
        let now = pool_capacity_at(pool, pool.nodes);
        let max = pool_capacity_at(pool, pool.max_nodes());
        let (Some(at_max), cur) = (max.get(&res), now.get(&res).copied().unwrap_or(0)) else {
            continue;
        };
        if n > cur && n <= *at_max {
            let who = if parts.len() == 1 {
                format!("ClusterQueue `{}` promises {n}", parts[0].1)
            } else {
                format!(
                    "ClusterQueues {} promise {n} together",
                    parts
                        .iter()
                        .map(|(_, q, a)| format!("`{q}` ({a})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            warned.push((
                parts[0].0.clone(),
                format!(
                    "{who} `{res}` on pool `{}`, which has {cur} with its {} node(s) now and reaches {at_max} only at `maxNodes` {}: admitted jobs wait for the scale-up",
                    pool.name,
                    pool.nodes,
                    pool.max_nodes()
                ),
            ));
        }
    }
    for (path, message) in warned {
        ctx.emit(
            "GPU1406",
            path,
            message,
            "fine for an elastic pool; lower the quota or raise `nodes`/`minNodes` when jobs must start at once",
        );
    }
}
