//! DRA claim shapes beyond one kind of whole device (GPU1500-GPU1502): ordered alternatives
//! (`firstAvailable`), shares of a GPU's memory (`memoryShare`, consumable capacity), and what
//! quota and the queue backend charge for them. Facts: profiles/dra.yaml `shapes`,
//! `kubernetes.gates`, `kueue.refused`.

use super::dra_standalone::stage_words;
use crate::validate::Ctx;
use gpuctl_model::blueprint::Queueing;
use gpuctl_model::blueprint::dra::DeviceShape;
use gpuctl_model::blueprint::yaml::{join, shorten};
use gpuctl_model::names::dra_shape_class;

pub(super) fn check(ctx: &mut Ctx<'_>) {
    let Some(dra) = ctx.bp.spec.dra.clone() else {
        return;
    };
    for (i, shape) in dra.shapes.iter().enumerate() {
        let path = format!("spec.dra.shapes[{i}]");
        if shape.has_alternatives() {
            alternatives(ctx, &path, shape, &dra.shapes);
        }
        if shape.memory_share.is_some() {
            memory_share(ctx, &path, shape);
        }
    }
    queues(ctx, &dra.shapes);
}

/// A gate of `kubernetes.gates` that is not on by default on the declared Kubernetes: why, in words.
fn gate_off(ctx: &Ctx<'_>, gate: &str) -> Option<String> {
    let version = &ctx.bp.spec.kubernetes.version;
    let stage = ctx.catalog.dra().kubernetes.gate(gate, version)?;
    (!stage.on_by_default()).then(|| stage_words(stage).to_string())
}

/// GPU1500: a shape of alternatives names declared shapes of one kind of device each, at most
/// as many as a request may list, has nothing of its own, and its gate is on.
fn alternatives(ctx: &mut Ctx<'_>, path: &str, shape: &DeviceShape, all: &[DeviceShape]) {
    let facts = ctx.catalog.dra().shapes.first_available.clone();
    let field = format!("{path}.firstAvailable");
    let own: Vec<&str> = [
        ("gpu", shape.gpu.is_some()),
        ("mig", shape.mig.is_some()),
        ("minMemory", shape.min_memory.is_some()),
        (
            "minComputeCapability",
            shape.min_compute_capability.is_some(),
        ),
        ("minDriver", shape.min_driver.is_some()),
        ("memoryShare", shape.memory_share.is_some()),
        ("count", shape.count != 1),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    if !own.is_empty() {
        ctx.emit(
            "GPU1500",
            path.to_string(),
            format!(
                "shape `{}` lists `firstAvailable: [{}]` and also sets `{}`: a shape of alternatives takes its devices, floors and count from the shapes it names",
                shape.name,
                shape.first_available.join(", "),
                own.join("`, `")
            ),
            "move those fields into the alternatives' own shapes, or drop `firstAvailable`",
        );
    }
    if shape.first_available.len() > facts.max_alternatives as usize {
        ctx.emit(
            "GPU1500",
            field.clone(),
            format!(
                "shape `{}` lists {} alternatives, `firstAvailable: [{}]`; a request may list at most {} (the API server refuses the template)",
                shape.name,
                shape.first_available.len(),
                shape.first_available.join(", "),
                facts.max_alternatives
            ),
            format!("keep the {} most wanted", facts.max_alternatives),
        );
    }
    for (j, alt) in shape.first_available.iter().enumerate() {
        let at = format!("{field}[{j}]");
        let problem = if *alt == shape.name {
            Some(format!(
                "shape `{}` names itself as alternative `{alt}`",
                shape.name
            ))
        } else if shape.first_available[..j].contains(alt) {
            Some(format!(
                "alternative `{alt}` of shape `{}` is listed twice",
                shape.name
            ))
        } else {
            match all.iter().find(|s| &s.name == alt) {
                None => Some(format!(
                    "alternative `{}` of shape `{}` is not a shape of `spec.dra.shapes`{}",
                    shorten(alt),
                    shape.name,
                    match gpuctl_model::suggest::closest(alt, all.iter().map(|s| s.name.as_str())) {
                        Some(c) => format!(" (did you mean `{c}`?)"),
                        None => String::new(),
                    }
                )),
                Some(s) if s.has_alternatives() => Some(format!(
                    "alternative `{alt}` of shape `{}` is itself a shape of alternatives (`firstAvailable: [{}]`); subrequests do not nest",
                    shape.name,
                    s.first_available.join(", ")
                )),
                Some(_) => None,
            }
        };
        if let Some(message) = problem {
            ctx.emit(
                "GPU1500",
                at,
                message,
                "name shapes of `spec.dra.shapes` that claim whole GPUs or MIG devices, each once",
            );
        }
    }
    if let Some(why) = gate_off(ctx, &facts.gate) {
        ctx.emit(
            "GPU1500",
            field,
            format!(
                "shape `{}` lists `firstAvailable: [{}]`, which needs the Kubernetes feature gate `{}`, {why} on Kubernetes {} the blueprint declares: the API server drops the alternatives silently",
                shape.name,
                shape.first_available.join(", "),
                facts.gate,
                ctx.bp.spec.kubernetes.version
            ),
            format!(
                "use a Kubernetes release where `{}` is on by default (`gpuctl profiles`), or one shape per tenant instead of alternatives",
                facts.gate
            ),
        );
    }
}

/// GPU1501: a share of a GPU's memory is a quantity above zero and at most the GPU's memory, on
/// a whole-GPU shape, and its gate is on.
fn memory_share(ctx: &mut Ctx<'_>, path: &str, shape: &DeviceShape) {
    let facts = ctx.catalog.dra().shapes.consumable_capacity.clone();
    let field = format!("{path}.memoryShare");
    let Some(share) = &shape.memory_share else {
        return;
    };
    let written = shorten(&share.0);
    if shape.mig.is_some() {
        ctx.emit(
            "GPU1501",
            field.clone(),
            format!(
                "shape `{}` asks `memoryShare: {written}` of MIG devices (`mig: {{profile: {}}}`): a MIG device is already a fixed share of a GPU and is allocated whole",
                shape.name,
                shape.mig.as_ref().map(|m| m.profile.as_str()).unwrap_or_default()
            ),
            "drop `memoryShare`, or claim whole GPUs (`gpu: {...}`) with it",
        );
        return;
    }
    let nano = match gpuctl_model::quantity::parse(&share.0) {
        Ok(q) if q.nano > 0 => q.nano,
        Ok(_) => {
            ctx.emit(
                "GPU1501",
                field,
                format!(
                    "shape `{}` asks `memoryShare: {written}`: a share must be more than 0",
                    shape.name
                ),
                "write the GPU memory one claim uses, such as `20Gi`",
            );
            return;
        }
        Err(e) => {
            ctx.emit(
                "GPU1501",
                field,
                format!(
                    "shape `{}` asks `memoryShare: {written}`, which is not a quantity ({e})",
                    shape.name
                ),
                "write a quantity such as `20Gi`",
            );
            return;
        }
    };
    if let Some(model) = shape.gpu.as_ref().and_then(|g| g.model.as_deref())
        && let Some(gib) = ctx.catalog.gpu(model).and_then(|g| g.memory_gb)
        && nano > i128::from(gib) * (1i128 << 30) * 1_000_000_000
    {
        ctx.emit(
            "GPU1501",
            field.clone(),
            format!(
                "shape `{}` asks `memoryShare: {written}` of a {model}, whose memory is at most {gib}Gi: no device can give it",
                shape.name
            ),
            format!("ask for less than {gib}Gi, or claim the whole GPU without `memoryShare`"),
        );
    }
    if let Some(why) = gate_off(ctx, &facts.gate) {
        ctx.emit(
            "GPU1501",
            field,
            format!(
                "shape `{}` asks `memoryShare: {written}`, which needs the Kubernetes feature gate `{}`, {why} on Kubernetes {} the blueprint declares: the API server drops the capacity request silently and every claim takes a whole GPU",
                shape.name,
                facts.gate,
                ctx.bp.spec.kubernetes.version
            ),
            format!(
                "use a Kubernetes release where `{}` is on by default (1.36+, `gpuctl profiles`), or drop `memoryShare`",
                facts.gate
            ),
        );
    }
}

/// GPU1500 (Kueue refuses alternatives) and GPU1502 (what quota and the queue backend charge
/// for shares and alternatives, where it is not what the tenant's `claims` say).
fn queues(ctx: &mut Ctx<'_>, shapes: &[DeviceShape]) {
    let queueing = ctx.bp.spec.scheduling.queueing;
    let facts = ctx.catalog.dra().clone();
    let kueue_version = ctx
        .bp
        .spec
        .scheduling
        .kueue
        .as_ref()
        .map(|k| k.version.clone())
        .unwrap_or_default();
    let devices_key = |s: &DeviceShape| {
        facts
            .kubernetes
            .quota
            .key_for_class(&dra_shape_class(&s.name))
    };
    for (ti, t) in ctx.bp.spec.tenants.clone().iter().enumerate() {
        for (name, &amount) in &t.claims {
            let Some(shape) = shapes.iter().find(|s| &s.name == name) else {
                continue; // GPU173
            };
            let path = join(&format!("spec.tenants[{ti}].claims"), name);
            let queued = t.queue.as_deref();
            if shape.has_alternatives() && queueing == Queueing::Kueue {
                if let Some(queue) = queued {
                    let said = facts
                        .kueue
                        .refused
                        .iter()
                        .find(|r| r.form == "first_available")
                        .map(|r| r.message.clone())
                        .unwrap_or_default();
                    ctx.emit_at_key(
                        "GPU1500",
                        path.clone(),
                        format!(
                            "tenant `{}` claims shape `{name}` (`firstAvailable: [{}]`) through Kueue {kueue_version} queue `{queue}`: Kueue leaves every workload with such a claim inadmissible (\"{said}\", sigs.k8s.io/kueue v0.19.2 pkg/dra/claims.go)",
                            t.name,
                            shape.first_available.join(", ")
                        ),
                        format!(
                            "claim one of `{}` instead (each has its own template), or run these workloads without a Kueue queue",
                            shape.first_available.join("`, `")
                        ),
                    );
                }
                continue;
            }
            if shape.has_alternatives() && queueing == Queueing::Volcano && queued.is_some() {
                ctx.emit_at_key(
                    "GPU1502",
                    path.clone(),
                    format!(
                        "tenant `{}` claims shape `{name}` (`firstAvailable: [{}]`) through a Volcano queue: Volcano v1.15.1 {} (pkg/scheduler/cache/cache.go), so its queue's DRA quota does not cap them; the namespace's ResourceQuota still does ({})",
                        t.name,
                        shape.first_available.join(", "),
                        facts.shapes.first_available.volcano,
                        facts.shapes.first_available.quota_charge
                    ),
                    format!("cap the tenant with its `claims: {{{name}: {amount}}}` (rendered into the ResourceQuota), or claim one of `{}` instead", shape.first_available.join("`, `")),
                );
            }
            if let Some(share) = &shape.memory_share {
                let kueue = if queueing == Queueing::Kueue && queued.is_some() {
                    format!(
                        "; Kueue {kueue_version} charges each as a whole device to `{}` ({} is {}, and gpuctl renders no capacity source)",
                        crate::cel::kueue_resource(shape, ctx.catalog),
                        facts.shapes.consumable_capacity.kueue_gate,
                        if facts.shapes.consumable_capacity.kueue_gate_on {
                            "on"
                        } else {
                            "alpha and off"
                        }
                    )
                } else {
                    String::new()
                };
                ctx.emit_at_key(
                    "GPU1502",
                    path,
                    format!(
                        "tenant `{}` may hold {amount} devices of shape `{name}` (`memoryShare: {}`): ResourceQuota's `{}` counts each share as one device, and no quota key charges `{}`, so {amount} shares are capped, not {amount} x {} of GPU memory{kueue}",
                        t.name,
                        shorten(&share.0),
                        devices_key(shape),
                        facts.shapes.consumable_capacity.capacity,
                        shorten(&share.0)
                    ),
                    "size `claims` as a number of shares; docs/dra.md, Shapes on 1.36, says what charges what",
                );
            }
        }
    }
}
