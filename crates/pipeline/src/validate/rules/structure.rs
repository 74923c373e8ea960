//! Structure: tenants without namespaces, names, duplicates, references, pool selectors, label
//! keys, GPU models, queueing shape, driver CR names. (GPU009-GPU019; GPU001-GPU005 are found by
//! the loader.)

use std::collections::{BTreeMap, BTreeSet};

use super::{is_dns_label, is_dns_subdomain, is_label_key, is_label_value};
use crate::validate::Ctx;
use gpuctl_model::blueprint::{Queueing, UpgradeStrategy};
use gpuctl_model::names::{DRIVER_LABEL, pool_driver_cr_name};
use gpuctl_model::suggest;

pub(super) fn check(ctx: &mut Ctx<'_>) {
    bounds(ctx);
    tenant_namespaces(ctx);
    names(ctx);
    duplicates(ctx);
    references(ctx);
    selectors(ctx);
    labels(ctx);
    gpu_models(ctx);
    queueing(ctx);
    driver_cr_names(ctx);
    operator_chart(ctx);
}

/// Render needs the chart's key tree of the blueprint's operator release and refuses values the
/// chart does not have; validate says so first, with positions (GPU019), so that nothing
/// validate accepts fails in render.
fn operator_chart(ctx: &mut Ctx<'_>) {
    let op = &ctx.bp.spec.gpu_operator;
    let known = op
        .version
        .parse::<gpuctl_model::version::OperatorVersion>()
        .ok()
        .and_then(|v| ctx.catalog.operator_release(&v));
    if known.is_none() {
        return; // GPU027 reports a release the catalog does not know
    }
    let Some(release) = ctx.catalog.chart_release(&op.version) else {
        ctx.emit(
            "GPU019",
            "spec.gpuOperator.version",
            format!(
                "gpuctl cannot render GPU Operator {}: it has the chart's key tree only for {}",
                op.version,
                ctx.catalog.chart_versions().join(", ")
            ),
            "use one of those releases",
        );
        return;
    };
    for problem in release.unknown_paths(&op.values) {
        ctx.emit_at_key(
            "GPU019",
            format!("spec.gpuOperator.values.{}", problem.yaml_path),
            format!(
                "`{}` {} (GPU Operator {} chart)",
                gpuctl_model::blueprint::yaml::shorten(&problem.path),
                problem.message,
                release.version
            ),
            "use a key of the chart (`helm show values nvidia/gpu-operator --version <release>`), or remove it",
        );
    }
}

/// A tenant is its namespaces: without one gpuctl renders nothing for it (GPU009).
fn tenant_namespaces(ctx: &mut Ctx<'_>) {
    for (i, t) in ctx.bp.spec.tenants.iter().enumerate() {
        if !t.namespaces.is_empty() {
            continue;
        }
        let declared: Vec<&str> = [
            (!t.quota.is_empty()).then_some("quota"),
            (!t.defaults.is_empty()).then_some("defaults"),
            t.queue.as_ref().map(|_| "queue"),
            t.priority_class.as_ref().map(|_| "priorityClass"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let what = if declared.is_empty() {
            String::new()
        } else {
            format!(
                ": its {} {} declared but nothing enforces or uses them",
                declared.join(", "),
                if declared.len() == 1 { "is" } else { "are" }
            )
        };
        ctx.emit(
            "GPU009",
            format!("spec.tenants[{i}].namespaces"),
            format!(
                "tenant `{}` has no namespaces, so gpuctl renders nothing for it (no namespace, ResourceQuota, LimitRange or LocalQueue){what}",
                gpuctl_model::blueprint::yaml::shorten(&t.name)
            ),
            "list the namespaces the tenant's workloads run in, or remove the tenant",
        );
    }
}

fn names(ctx: &mut Ctx<'_>) {
    let bp = ctx.bp;
    let label_max = ctx
        .catalog
        .limits()
        .kubernetes_names
        .dns1123_label_max_length;
    let name_limits = &ctx.catalog.limits().kubernetes_names;
    let mut labels: Vec<(String, &str, &str)> = vec![
        ("metadata.name".into(), &bp.metadata.name, "blueprint name"),
        (
            "spec.gpuOperator.namespace".into(),
            &bp.spec.gpu_operator.namespace,
            "operator namespace",
        ),
    ];
    for (i, p) in bp.spec.node_pools.iter().enumerate() {
        labels.push((format!("spec.nodePools[{i}].name"), &p.name, "pool name"));
    }
    for (i, t) in bp.spec.tenants.iter().enumerate() {
        labels.push((format!("spec.tenants[{i}].name"), &t.name, "tenant name"));
        for (j, ns) in t.namespaces.iter().enumerate() {
            labels.push((
                format!("spec.tenants[{i}].namespaces[{j}]"),
                ns,
                "namespace",
            ));
        }
    }
    if let Some(k) = &bp.spec.scheduling.kueue {
        for (i, c) in k.cohorts.iter().enumerate() {
            labels.push((
                format!("spec.scheduling.kueue.cohorts[{i}].name"),
                &c.name,
                "cohort name",
            ));
        }
        for (i, q) in k.cluster_queues.iter().enumerate() {
            labels.push((
                format!("spec.scheduling.kueue.clusterQueues[{i}].name"),
                &q.name,
                "cluster queue name",
            ));
        }
    }
    if let Some(v) = &bp.spec.scheduling.volcano {
        for (i, q) in v.queues.iter().enumerate() {
            labels.push((
                format!("spec.scheduling.volcano.queues[{i}].name"),
                &q.name,
                "queue name",
            ));
        }
    }
    for (path, name, what) in labels {
        if !is_dns_label(name, label_max) {
            ctx.emit(
                "GPU010",
                path,
                format!(
                    "{what} `{}` is not a DNS-1123 label",
                    gpuctl_model::blueprint::yaml::shorten(name)
                ),
                format!(
                    "use at most {label_max} lower-case letters, digits and `-`, starting and ending with a letter or digit{}",
                    suggestion_for(name)
                ),
            );
        }
    }
    for (i, pc) in bp.spec.priority_classes.iter().enumerate() {
        if !is_dns_subdomain(&pc.name, name_limits) {
            ctx.emit(
                "GPU010",
                format!("spec.priorityClasses[{i}].name"),
                format!(
                    "priority class name `{}` is not a DNS-1123 subdomain",
                    gpuctl_model::blueprint::yaml::shorten(&pc.name)
                ),
                format!(
                    "use lower-case letters, digits, `-` and `.`{}",
                    suggestion_for(&pc.name)
                ),
            );
        }
    }
}

fn suggestion_for(name: &str) -> String {
    let fixed: String = name
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let fixed = fixed.trim_matches('-');
    if fixed.is_empty() || fixed == name {
        String::new()
    } else {
        format!(", e.g. `{fixed}`")
    }
}

/// `(path, name)` of each item of a list at `path` (`spec.tenants` gives `spec.tenants[0].name`...).
fn named<T>(path: &str, items: &[T], name: impl Fn(&T) -> String) -> Vec<(String, String)> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| (format!("{path}[{i}].name"), name(item)))
        .collect()
}

/// Every group of names that must be unique, with each name's path.
fn unique_names(
    bp: &gpuctl_model::blueprint::Blueprint,
) -> Vec<(&'static str, Vec<(String, String)>)> {
    let spec = &bp.spec;
    let namespaces = std::iter::once((
        "spec.gpuOperator.namespace".to_string(),
        spec.gpu_operator.namespace.clone(),
    ))
    .chain(spec.tenants.iter().enumerate().flat_map(|(i, t)| {
        t.namespaces
            .iter()
            .enumerate()
            .map(move |(j, ns)| (format!("spec.tenants[{i}].namespaces[{j}]"), ns.clone()))
    }))
    .collect();
    let mut groups = vec![
        (
            "pool",
            named("spec.nodePools", &spec.node_pools, |p| p.name.clone()),
        ),
        (
            "tenant",
            named("spec.tenants", &spec.tenants, |t| t.name.clone()),
        ),
        (
            "priority class",
            named("spec.priorityClasses", &spec.priority_classes, |p| {
                p.name.clone()
            }),
        ),
        ("namespace", namespaces),
    ];
    for (i, p) in spec.node_pools.iter().enumerate() {
        let taints = p.taints.iter().enumerate();
        groups.push((
            "taint",
            taints
                .map(|(j, t)| {
                    (
                        format!("spec.nodePools[{i}].taints[{j}]"),
                        format!("{}:{:?}", t.key, t.effect),
                    )
                })
                .collect(),
        ));
    }
    if let Some(k) = &spec.scheduling.kueue {
        let cohorts = named("spec.scheduling.kueue.cohorts", &k.cohorts, |c| {
            c.name.clone()
        });
        let queues = named(
            "spec.scheduling.kueue.clusterQueues",
            &k.cluster_queues,
            |c| c.name.clone(),
        );
        groups.push(("cohort", cohorts));
        groups.push(("cluster queue", queues));
    }
    if let Some(v) = &spec.scheduling.volcano {
        groups.push((
            "queue",
            named("spec.scheduling.volcano.queues", &v.queues, |q| {
                q.name.clone()
            }),
        ));
    }
    groups
}

fn duplicates(ctx: &mut Ctx<'_>) {
    let groups = unique_names(ctx.bp);
    for (what, items) in groups {
        let mut first: BTreeMap<&str, &str> = BTreeMap::new();
        for (path, name) in &items {
            match first.get(name.as_str()) {
                Some(first_path) => {
                    let line = ctx
                        .tree
                        .pos(first_path)
                        .map(|p| format!(" (line {})", p.line))
                        .unwrap_or_default();
                    let name = gpuctl_model::blueprint::yaml::shorten(name);
                    let msg = if what == "namespace" && first_path.starts_with("spec.gpuOperator") {
                        format!(
                            "namespace `{name}` is the GPU Operator's namespace ({first_path}{line}); a tenant cannot share it"
                        )
                    } else if what == "namespace" {
                        format!(
                            "namespace `{name}` belongs to two tenants; first at {first_path}{line}"
                        )
                    } else if what == "taint" {
                        format!(
                            "taint `{name}` is declared twice on this pool; first at {first_path}{line}"
                        )
                    } else {
                        format!("{what} `{name}` is declared twice; first at {first_path}{line}")
                    };
                    ctx.emit(
                        "GPU011",
                        path.clone(),
                        msg,
                        "rename or merge the two declarations",
                    );
                }
                None => {
                    first.insert(name, path);
                }
            }
        }
    }
}

fn references(ctx: &mut Ctx<'_>) {
    let bp = ctx.bp;
    let pools: Vec<&str> = bp.spec.node_pools.iter().map(|p| p.name.as_str()).collect();
    let pcs: Vec<&str> = bp
        .spec
        .priority_classes
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let kueue = bp.spec.scheduling.kueue.as_ref();
    let cohorts: Vec<&str> = kueue
        .map(|k| k.cohorts.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    let cqs: Vec<&str> = kueue
        .map(|k| k.cluster_queues.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    let vqs: Vec<&str> = bp
        .spec
        .scheduling
        .volcano
        .as_ref()
        .map(|v| v.queues.iter().map(|q| q.name.as_str()).collect())
        .unwrap_or_default();
    let mut missing: Vec<(String, String, &str, Vec<&str>)> = Vec::new();
    for (i, t) in bp.spec.tenants.iter().enumerate() {
        if let Some(pc) = &t.priority_class
            && !pcs.contains(&pc.as_str())
        {
            missing.push((
                format!("spec.tenants[{i}].priorityClass"),
                pc.clone(),
                "priority class",
                pcs.clone(),
            ));
        }
        if let Some(q) = &t.queue {
            match bp.spec.scheduling.queueing {
                Queueing::Kueue if !cqs.contains(&q.as_str()) => missing.push((
                    format!("spec.tenants[{i}].queue"),
                    q.clone(),
                    "cluster queue",
                    cqs.clone(),
                )),
                Queueing::Volcano if !vqs.contains(&q.as_str()) => missing.push((
                    format!("spec.tenants[{i}].queue"),
                    q.clone(),
                    "Volcano queue",
                    vqs.clone(),
                )),
                _ => {}
            }
        }
    }
    if let Some(k) = kueue {
        for (i, c) in k.cohorts.iter().enumerate() {
            if let Some(p) = &c.parent
                && !cohorts.contains(&p.as_str())
            {
                missing.push((
                    format!("spec.scheduling.kueue.cohorts[{i}].parent"),
                    p.clone(),
                    "cohort",
                    cohorts.clone(),
                ));
            }
        }
        for (i, q) in k.cluster_queues.iter().enumerate() {
            if let Some(c) = &q.cohort
                && !cohorts.contains(&c.as_str())
            {
                // Kueue creates implicit cohorts, but gpuctl renders only declared ones: a typo
                // here silently splits the queue from its intended cohort.
                missing.push((
                    format!("spec.scheduling.kueue.clusterQueues[{i}].cohort"),
                    c.clone(),
                    "cohort",
                    cohorts.clone(),
                ));
            }
            for (j, r) in q.resources.iter().enumerate() {
                if !pools.contains(&r.pool.as_str()) {
                    missing.push((
                        format!("spec.scheduling.kueue.clusterQueues[{i}].resources[{j}].pool"),
                        r.pool.clone(),
                        "node pool",
                        pools.clone(),
                    ));
                }
            }
        }
    }
    if let Some(v) = &bp.spec.scheduling.volcano {
        for (i, q) in v.queues.iter().enumerate() {
            if let Some(p) = &q.parent
                && p != "root"
                && !vqs.contains(&p.as_str())
            {
                missing.push((
                    format!("spec.scheduling.volcano.queues[{i}].parent"),
                    p.clone(),
                    "Volcano queue",
                    vqs.clone(),
                ));
            }
        }
    }
    for (path, name, what, candidates) in missing {
        let hint = match suggest::closest(&name, candidates.iter().copied()) {
            Some(c) => format!("did you mean `{c}`?"),
            None if candidates.is_empty() => format!("declare the {what} first"),
            None => format!("declare it, or use one of: {}", candidates.join(", ")),
        };
        ctx.emit(
            "GPU012",
            path,
            format!("{what} `{name}` is not declared"),
            hint,
        );
    }
}

fn selectors(ctx: &mut Ctx<'_>) {
    let pools = &ctx.bp.spec.node_pools;
    for (i, p) in pools.iter().enumerate() {
        if p.selector.is_empty() {
            ctx.emit(
                "GPU013",
                format!("spec.nodePools[{i}].selector"),
                format!("pool `{}` has an empty selector and would select every node", p.name),
                "add a label only this pool's nodes carry, e.g. `node.kubernetes.io/instance-type: p5.48xlarge`",
            );
        }
    }
    // One finding per pool, naming the first earlier pool it overlaps and how many others: a
    // finding per pair grows with the square of the pools (2,000 pools gave 2,000,000 findings).
    for (j, b) in pools.iter().enumerate() {
        if b.selector.is_empty() {
            continue;
        }
        let overlapping: Vec<&str> = pools[..j]
            .iter()
            .filter(|a| !a.selector.is_empty())
            // A node can match both when the selectors agree on every shared key.
            .filter(|a| {
                !a.selector
                    .iter()
                    .any(|(k, v)| b.selector.get(k).is_some_and(|w| w != v))
            })
            .map(|a| a.name.as_str())
            .collect();
        let Some(first) = overlapping.first() else {
            continue;
        };
        let others = match overlapping.len() - 1 {
            0 => String::new(),
            1 => " and 1 other pool".to_string(),
            n => format!(" and {n} other pools"),
        };
        ctx.emit(
            "GPU013",
            format!("spec.nodePools[{j}].selector"),
            format!(
                "a node labelled for pool `{}` can also match pool `{first}`{others} (no selector key tells them apart)",
                b.name
            ),
            format!(
                "give `{first}` and `{}` a shared label key with different values, e.g. `gpuctl.dev/pool`",
                b.name
            ),
        );
    }
}

fn labels(ctx: &mut Ctx<'_>) {
    let n = &ctx.catalog.limits().kubernetes_names;
    let owned = ctx
        .catalog
        .limits()
        .node_labels
        .operator_owned_prefixes
        .clone();
    for (i, p) in ctx.bp.spec.node_pools.iter().enumerate() {
        let mut keys: Vec<(String, &str, Option<&str>, bool)> = Vec::new();
        for (k, v) in &p.selector {
            keys.push((
                gpuctl_model::blueprint::yaml::join(&format!("spec.nodePools[{i}].selector"), k),
                k,
                Some(v),
                false,
            ));
        }
        for (k, v) in &p.labels {
            keys.push((
                gpuctl_model::blueprint::yaml::join(&format!("spec.nodePools[{i}].labels"), k),
                k,
                Some(v),
                true,
            ));
        }
        for (j, t) in p.taints.iter().enumerate() {
            keys.push((
                format!("spec.nodePools[{i}].taints[{j}].key"),
                &t.key,
                t.value.as_deref(),
                false,
            ));
        }
        for (path, key, value, written) in keys {
            if !is_label_key(key, n) {
                ctx.emit_at_key("GPU014", path.clone(), format!("`{key}` is not a valid label or taint key"), format!("use `[prefix/]name` with a DNS subdomain prefix and a name of at most {} characters", n.label_name_max_length));
            }
            if let Some(v) = value
                && !is_label_value(v, n)
            {
                ctx.emit("GPU014", path.clone(), format!("`{v}` is not a valid label value for `{key}`"), format!("use at most {} alphanumerics, `-`, `_` or `.`, starting and ending with an alphanumeric", n.label_value_max_length));
            }
            if written && let Some(prefix) = owned.iter().find(|p| key.starts_with(p.as_str())) {
                ctx.emit_at_key(
                    "GPU014",
                    path,
                    format!("`{key}` is owned by the GPU Operator or Node Feature Discovery (`{prefix}*`); gpuctl never writes it"),
                    "select on it under `selector` instead, or use your own prefix such as `gpu.example.com/`",
                );
            }
        }
    }
    let bg_label = ctx
        .bp
        .spec
        .upgrades
        .blue_green
        .as_ref()
        .map(|b| b.color_label.clone());
    if let Some(l) = bg_label
        && !is_label_key(&l, &ctx.catalog.limits().kubernetes_names)
    {
        ctx.emit(
            "GPU095",
            "spec.upgrades.blueGreen.colorLabel",
            format!("`{l}` is not a valid label key"),
            "use e.g. `gpuctl.dev/color`",
        );
    }
}

/// Counts stay within what can exist (GPUs per node, nodes per cluster, sharing replicas) before
/// any rule or render step allocates or multiplies by them (GPU018).
fn bounds(ctx: &mut Ctx<'_>) {
    let l = &ctx.catalog.limits().node_pools;
    let (max_gpus, max_nodes, max_replicas) = (
        l.max_gpus_per_node,
        l.max_nodes_per_cluster,
        l.max_sharing_replicas,
    );
    let mut total: u64 = 0;
    for (i, p) in ctx.bp.spec.node_pools.iter().enumerate() {
        total = total.saturating_add(u64::from(p.nodes));
        if p.gpu.count > max_gpus {
            ctx.emit(
                "GPU018",
                format!("spec.nodePools[{i}].gpu.count"),
                format!(
                    "{} GPUs per node; the NVIDIA driver supports at most {max_gpus} in one system",
                    p.gpu.count
                ),
                "set `gpu.count` to the GPUs one node of the pool has",
            );
        }
        if p.nodes > max_nodes {
            ctx.emit(
                "GPU018",
                format!("spec.nodePools[{i}].nodes"),
                format!(
                    "{} nodes; Kubernetes supports at most {max_nodes} nodes in one cluster",
                    p.nodes
                ),
                "set `nodes` to the pool's node count, or split the fleet into several clusters",
            );
        }
        let part = &p.partitioning;
        for (field, replicas) in [
            (
                "timeSlicing",
                part.time_slicing.as_ref().map(|t| t.replicas),
            ),
            ("mps", part.mps.as_ref().map(|m| m.replicas)),
        ] {
            if let Some(r) = replicas
                && r > max_replicas
            {
                ctx.emit(
                    "GPU018",
                    format!("spec.nodePools[{i}].partitioning.{field}.replicas"),
                    format!("{r} replicas per GPU; gpuctl accepts at most {max_replicas}"),
                    "use fewer replicas: each is one device the plugin advertises and kubelet tracks",
                );
            }
        }
    }
    if total > u64::from(max_nodes) && ctx.bp.spec.node_pools.iter().all(|p| p.nodes <= max_nodes) {
        ctx.emit(
            "GPU018",
            "spec.nodePools",
            format!("the pools have {total} nodes together; Kubernetes supports at most {max_nodes} nodes in one cluster"),
            "split the fleet into several clusters, one blueprint each",
        );
    }
}

fn gpu_models(ctx: &mut Ctx<'_>) {
    let keys: Vec<String> = ctx.catalog.gpus().map(|g| g.key.clone()).collect();
    for (i, p) in ctx.bp.spec.node_pools.iter().enumerate() {
        if ctx.catalog.gpu(&p.gpu.model).is_none() {
            // Also accept the GFD product label as a hint to the right key.
            let by_product = ctx
                .catalog
                .gpu_by_product(&p.gpu.model)
                .map(|g| g.key.clone());
            // A model named after an architecture the catalog has no GPU of (Rubin, in preview):
            // say what NVIDIA has not published rather than suggest an unrelated key.
            let lower = p.gpu.model.to_ascii_lowercase();
            let unlisted_arch = ctx.catalog.architectures().find(|a| {
                lower.contains(&a.name.to_ascii_lowercase())
                    && !ctx.catalog.gpus().any(|g| g.architecture == a.name)
            });
            let hint = match (
                unlisted_arch,
                by_product.or_else(|| {
                    suggest::closest(&p.gpu.model, keys.iter().map(String::as_str))
                        .map(str::to_string)
                }),
            ) {
                (Some(a), _) => format!(
                    "no {} GPU is in the catalog{}: NVIDIA has not published {}; `gpuctl profiles` shows what is known",
                    a.name,
                    if a.preview {
                        " (the architecture is in preview)"
                    } else {
                        ""
                    },
                    if a.unpublished.is_empty() {
                        "its products".to_string()
                    } else {
                        a.unpublished.join(", ")
                    }
                ),
                (None, Some(k)) => {
                    format!("did you mean `{k}`? (`gpuctl profiles` lists every model)")
                }
                (None, None) => "use a key from `gpuctl profiles`".to_string(),
            };
            ctx.emit(
                "GPU015",
                format!("spec.nodePools[{i}].gpu.model"),
                format!("GPU model `{}` is not in the catalog", p.gpu.model),
                hint,
            );
        }
        if p.gpu.count == 0 {
            ctx.emit(
                "GPU003",
                format!("spec.nodePools[{i}].gpu.count"),
                "a GPU pool needs at least one GPU per node",
                "set `gpu.count` to the GPUs per node",
            );
        }
    }
}

fn queueing(ctx: &mut Ctx<'_>) {
    let s = &ctx.bp.spec.scheduling;
    match s.queueing {
        Queueing::Kueue if s.kueue.is_none() => ctx.emit(
            "GPU016",
            "spec.scheduling.queueing",
            "`queueing: kueue` but there is no `scheduling.kueue` section",
            "add `scheduling.kueue` with its version, cohorts and cluster queues",
        ),
        Queueing::Volcano if s.volcano.is_none() => ctx.emit(
            "GPU016",
            "spec.scheduling.queueing",
            "`queueing: volcano` but there is no `scheduling.volcano` section",
            "add `scheduling.volcano` with its version and queues",
        ),
        _ => {}
    }
    let unused: Vec<(&str, bool)> = vec![
        ("kueue", s.kueue.is_some() && s.queueing != Queueing::Kueue),
        (
            "volcano",
            s.volcano.is_some() && s.queueing != Queueing::Volcano,
        ),
    ];
    for (name, bad) in unused {
        if bad {
            ctx.emit(
                "GPU016",
                format!("spec.scheduling.{name}"),
                format!("`scheduling.{name}` is declared but `queueing` is not `{name}`, so none of it is rendered"),
                format!("set `queueing: {name}` or remove the section"),
            );
        }
    }
    if s.queueing == Queueing::None {
        let seen: BTreeSet<usize> = ctx
            .bp
            .spec
            .tenants
            .iter()
            .enumerate()
            .filter(|(_, t)| t.queue.is_some())
            .map(|(i, _)| i)
            .collect();
        for i in seen {
            ctx.emit(
                "GPU016",
                format!("spec.tenants[{i}].queue"),
                "tenant names a queue but `scheduling.queueing` is `none`",
                "set `scheduling.queueing` to `kueue` or `volcano`, or remove the queue",
            );
        }
    }
}

/// A pool with its own driver gets an NVIDIADriver CR named by render's `pool_driver_cr_name`
/// (`pool-<pool>-<version>` with blue-green upgrades, `pool-<pool>` with rolling ones), and its
/// nodes carry that name as the value of `gpuctl.dev/driver`: it must be a label value, so a
/// DNS-1123 label of at most 63 characters. Pools whose name (GPU010) or driver version (GPU020)
/// is invalid are left to those rules.
fn driver_cr_names(ctx: &mut Ctx<'_>) {
    // The name is a label value, and a DNS-1123 label (lower case) as an object name.
    let n = &ctx.catalog.limits().kubernetes_names;
    let label_max = n.label_value_max_length.min(n.dns1123_label_max_length);
    let strategy = ctx.bp.spec.upgrades.strategy;
    for (i, p) in ctx.bp.spec.node_pools.iter().enumerate() {
        let Some(d) = &p.driver else { continue };
        if !is_dns_label(&p.name, label_max)
            || d.version
                .parse::<gpuctl_model::version::DriverVersion>()
                .is_err()
        {
            continue;
        }
        let name = pool_driver_cr_name(&p.name, &d.version, strategy);
        if is_dns_label(&name, label_max) {
            continue;
        }
        let added = name.len() - p.name.len();
        let what = match strategy {
            UpgradeStrategy::BlueGreen => {
                "`pool-` before it and, with `upgrades.strategy: blue-green`, `-<driver version>` after it"
            }
            UpgradeStrategy::Rolling => "`pool-` before it",
        };
        ctx.emit(
            "GPU017",
            format!("spec.nodePools[{i}].name"),
            format!(
                "pool `{}`'s NVIDIADriver CR would be `{name}` ({} characters), which its nodes carry as `{DRIVER_LABEL}`; a label value has at most {label_max}",
                p.name,
                name.len()
            ),
            format!(
                "shorten the pool name to at most {} characters (the CR name adds {what})",
                label_max.saturating_sub(added)
            ),
        );
    }
}
