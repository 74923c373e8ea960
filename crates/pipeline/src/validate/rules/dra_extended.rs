//! Kubernetes 1.36's DRA features gpuctl renders (GPU158, GPU159): extended resources served by
//! DRA (`spec.dra.extendedResources`, the zero-edit move of a pool from the device plugin), and
//! device taints (`spec.dra.maintenance` DeviceTaintRules, `tenants[].deviceTolerations`). Each
//! needs a Kubernetes gate on by default on the declared minor: the API server drops a field whose
//! gate is off on write, silently. Facts: profiles/dra.yaml (`kubernetes.gates`,
//! `extended_resource_gate`, `device_taints`, `kueue.extended_resource`).

use crate::validate::Ctx;
use gpuctl_model::profiles::dra::GateStage;

pub(super) fn check(ctx: &mut Ctx<'_>) {
    extended_resources(ctx);
    device_taints(ctx);
}

/// The stage of Kubernetes gate `gate` on the declared version, in words.
fn stage_words(stage: Option<GateStage>) -> &'static str {
    match stage {
        None => "not in this release",
        Some(GateStage::Alpha) => "alpha, off by default",
        Some(GateStage::BetaOff) => "beta, off by default",
        Some(GateStage::BetaOn) => "beta, on",
        Some(GateStage::Ga) | Some(GateStage::GaLocked) => "GA, on",
    }
}

/// GPU158: `spec.dra.extendedResources` where it can work.
fn extended_resources(ctx: &mut Ctx<'_>) {
    let Some(dra) = ctx.bp.spec.dra.clone() else {
        return;
    };
    if !dra.extended_resources {
        return;
    }
    let facts = ctx.catalog.dra().clone();
    let gate = &facts.kubernetes.extended_resource_gate;
    let version = ctx.bp.spec.kubernetes.version.clone();
    let stage = facts.kubernetes.gate(gate, &version);
    if !stage.is_some_and(|s| s.on_by_default()) {
        let from = facts
            .kubernetes
            .gates
            .iter()
            .find(|g| &g.name == gate)
            .and_then(|g| {
                g.stages
                    .iter()
                    .find(|(_, s)| s.on_by_default())
                    .map(|(m, _)| m.clone())
            })
            .unwrap_or_else(|| "a later release".to_string());
        ctx.emit(
            "GPU158",
            "spec.dra.extendedResources",
            format!(
                "`extendedResources: true` needs Kubernetes' {gate} gate, which is {} on the declared Kubernetes {version} (spec.kubernetes.version): the API server drops DeviceClass `spec.extendedResourceName` on write, so no pod asking `{}` would ever be served by DRA and a quota on it would not count claims",
                stage_words(stage),
                facts.kueue.resource_names.gpu
            ),
            format!("declare Kubernetes {from} or later (where {gate} is on by default), or remove `extendedResources` and move pods to the shapes' claim templates"),
        );
        return;
    }
    if dra.driver.is_none() {
        ctx.emit(
            "GPU158",
            "spec.dra.extendedResources",
            "`extendedResources: true` without `spec.dra.driver`: gpuctl cannot tell whether NVIDIA's chart already serves `nvidia.com/gpu` through its `gpu.nvidia.com` class (from v25.12.0 it does), and a name must not be served by two classes",
            "declare `spec.dra.driver` (deployment and version) so gpuctl renders a class only for the names no chart class serves",
        );
        return;
    }
    let any_pool = (0..ctx.bp.spec.node_pools.len()).any(|i| crate::extended::dra_pool(ctx.bp, i));
    if !any_pool {
        ctx.emit(
            "GPU158",
            "spec.dra.extendedResources",
            "`extendedResources: true`, but no pool is served by DRA (`gpuPlugin: dra`): the classes would serve nothing",
            "declare `gpuPlugin: dra` on the pools to move, or remove `extendedResources`",
        );
    }
    if let Some(kueue) = ctx.bp.spec.scheduling.kueue.clone() {
        let ext = &facts.kueue.extended_resource;
        if !gpuctl_model::profiles::QueueSystem::at_least(&kueue.version, &ext.since) {
            ctx.emit(
                "GPU158",
                "spec.dra.extendedResources",
                format!(
                    "`extendedResources: true` under Kueue {} (spec.scheduling.kueue.version): its {} integration is off by default before {}, so a pod's `{}` served by DRA is not charged to the ClusterQueue resource the device plugin's GPUs are",
                    kueue.version, ext.gate, ext.since, facts.kueue.resource_names.gpu
                ),
                format!("upgrade Kueue to {} or later", ext.since),
            );
        }
    }
}

/// GPU159: device taints and DeviceTaintRules where the declared Kubernetes keeps them.
fn device_taints(ctx: &mut Ctx<'_>) {
    let facts = ctx.catalog.dra().kubernetes.clone();
    let taints = &facts.device_taints;
    let version = ctx.bp.spec.kubernetes.version.clone();
    let gate_stage = facts.gate(&taints.gate, &version);
    let gate_ok = gate_stage.is_some_and(|s| s.on_by_default());
    let maintenance = ctx
        .bp
        .spec
        .dra
        .as_ref()
        .map(|d| d.maintenance.clone())
        .unwrap_or_default();
    if !maintenance.is_empty() {
        let rule_stage = facts.gate(&taints.rule_gate, &version);
        match taints.rule_api_version(&version) {
            Some(_) if gate_ok => {}
            _ => ctx.emit(
                "GPU159",
                "spec.dra.maintenance",
                format!(
                    "`spec.dra.maintenance` ({}) becomes DeviceTaintRules, which need Kubernetes' {} gate ({} on the declared Kubernetes {version}) and {} ({}): the API server would drop or refuse the rule and the devices stay in service",
                    maintenance.iter().map(|m| format!("`{}`", m.name)).collect::<Vec<_>>().join(", "),
                    taints.gate,
                    stage_words(gate_stage),
                    taints.rule_gate,
                    stage_words(rule_stage)
                ),
                "declare Kubernetes 1.36 or later, and turn on DRADeviceTaintRules with its API there (below), or take the node out with `kubectl cordon`",
            ),
        }
        let max = ctx
            .catalog
            .limits()
            .kubernetes_names
            .dns1123_label_max_length;
        let mut seen = std::collections::BTreeSet::new();
        for (i, m) in maintenance.iter().enumerate() {
            let path = format!("spec.dra.maintenance[{i}]");
            if !gpuctl_model::names::is_dns_label(&m.name, max) {
                ctx.emit(
                    "GPU159",
                    format!("{path}.name"),
                    format!("maintenance name `{}` is not a DNS-1123 label (it names the DeviceTaintRule and is the taint's value)", m.name),
                    "use lower-case letters, digits and `-`, at most 63 characters",
                );
            }
            if !seen.insert(m.name.clone()) {
                ctx.emit(
                    "GPU159",
                    format!("{path}.name"),
                    format!("maintenance name `{}` is declared twice", m.name),
                    "give each entry its own name",
                );
            }
            if !m
                .node
                .split('.')
                .all(|part| gpuctl_model::names::is_dns_label(part, max))
            {
                ctx.emit(
                    "GPU159",
                    format!("{path}.node"),
                    format!("node `{}` is not a node name (NVIDIA's driver names each node's pool after the node)", m.node),
                    "write the node's name as `kubectl get nodes` shows it",
                );
            }
        }
    }
    for (ti, t) in ctx.bp.spec.tenants.clone().iter().enumerate() {
        for (i, tol) in t.device_tolerations.iter().enumerate() {
            let path = format!("spec.tenants[{ti}].deviceTolerations[{i}]");
            if !gate_ok {
                ctx.emit(
                    "GPU159",
                    path.clone(),
                    format!(
                        "tenant `{}` tolerates device taint `{}`, but Kubernetes' {} gate is {} on the declared Kubernetes {version}: the API server drops claim tolerations on write",
                        t.name, tol.key, taints.gate, stage_words(gate_stage)
                    ),
                    "declare Kubernetes 1.36 or later, or remove the toleration",
                );
            }
            use gpuctl_model::blueprint::dra::TolerationOperator;
            match (tol.operator, &tol.value) {
                (TolerationOperator::Exists, Some(v)) => ctx.emit(
                    "GPU159",
                    format!("{path}.value"),
                    format!("toleration of `{}` with operator `Exists` has value `{v}`: the API server refuses a value with `Exists`", tol.key),
                    "drop `value`, or use `operator: Equal`",
                ),
                (TolerationOperator::Equal, None) if tol.key.is_empty() => ctx.emit(
                    "GPU159",
                    format!("{path}.key"),
                    "`key: \"\"` with `operator: Equal`: a toleration with an empty key must use `operator: Exists` (it then tolerates every taint)",
                    "set `operator: Exists`, or name the key",
                ),
                _ => {}
            }
        }
    }
}
