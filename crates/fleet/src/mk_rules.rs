//! MultiKueue rules that need the clusters' effective blueprints (GPU193–GPU196; docs/fleet.md
//! "MultiKueue"): Kueue runs on the manager and every worker and the dispatching ClusterQueues are
//! the manager's; every namespace and LocalQueue that feeds one exists on every worker (Kueue
//! creates the remote Workload in the same namespace and LocalQueue); every framework enabled on
//! the manager is enabled on every worker (else its watch fails and the worker never connects);
//! and the manager's quota against the workers' sum (a warning). Data in (one [`Queues`] per
//! cluster), findings out.

use std::collections::{BTreeMap, BTreeSet};

use super::check::Out;
use super::model::Fleet;
use gpuctl_model::blueprint::{Blueprint, Queueing};
use gpuctl_model::profiles::Catalog;
use gpuctl_model::quantity::Quantity;
use gpuctl_pipeline::render::LOCAL_QUEUE;

/// What the rules read of one cluster's effective blueprint.
#[derive(Debug, Clone, Default)]
pub struct Queues {
    /// `scheduling.queueing` is `kueue` with a `kueue` section.
    pub kueue: bool,
    /// Per ClusterQueue, its nominal quota per resource summed over its flavors.
    pub cluster_queues: BTreeMap<String, BTreeMap<String, Quantity>>,
    /// Per tenant namespace: the tenant and its ClusterQueue (`None`: no queue, no LocalQueue).
    pub namespaces: BTreeMap<String, (String, Option<String>)>,
    /// The frameworks its Kueue manages, and whether the blueprint declares them (else the
    /// chart's default list).
    pub frameworks: (Vec<String>, bool),
}

impl Queues {
    /// Reads `bp` (frameworks not declared are the chart's list in `catalog`).
    pub fn of(bp: &Blueprint, catalog: &Catalog) -> Queues {
        let kueue = match (&bp.spec.scheduling.queueing, &bp.spec.scheduling.kueue) {
            (Queueing::Kueue, Some(k)) => k,
            _ => return Queues::default(),
        };
        let mut cluster_queues = BTreeMap::new();
        for cq in &kueue.cluster_queues {
            let mut sum: BTreeMap<String, Quantity> = BTreeMap::new();
            for r in &cq.resources {
                for (name, q) in &r.quota {
                    // An amount that does not parse is reported by the cluster's own rules.
                    let Ok(q) = gpuctl_model::quantity::parse(&q.0) else {
                        continue;
                    };
                    sum.entry(name.clone())
                        .and_modify(|s| s.nano = s.nano.saturating_add(q.nano))
                        .or_insert(q);
                }
            }
            cluster_queues.insert(cq.name.clone(), sum);
        }
        let mut namespaces = BTreeMap::new();
        for t in &bp.spec.tenants {
            for ns in &t.namespaces {
                namespaces
                    .entry(ns.clone())
                    .or_insert_with(|| (t.name.clone(), t.queue.clone()));
            }
        }
        let frameworks = match &kueue.config.integrations {
            Some(i) => (i.frameworks.clone(), true),
            None => (chart_frameworks(catalog), false),
        };
        Queues {
            kueue: true,
            cluster_queues,
            namespaces,
            frameworks,
        }
    }
}

/// The framework list of Kueue's chart (profiles/queueing.yaml `kueue_configuration.chart_defaults`),
/// what a Kueue runs with when the blueprint declares none.
fn chart_frameworks(catalog: &Catalog) -> Vec<String> {
    let defaults = &catalog.queueing().kueue_configuration.chart_defaults;
    defaults
        .pointer("/integrations/frameworks")
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// GPU193–GPU196 over `clusters` (the queues of the manager and workers whose effective
/// blueprint loaded; a cluster missing here is reported elsewhere).
pub(super) fn run(
    fleet: &Fleet,
    clusters: &BTreeMap<String, Queues>,
    catalog: &Catalog,
    out: &mut Out,
) {
    let Some(mk) = &fleet.spec.multi_kueue else {
        return;
    };
    let Some(manager) = clusters.get(&mk.manager) else {
        return;
    };
    if !manager.kueue {
        out.emit(
            "GPU193",
            "spec.multiKueue.manager".into(),
            format!(
                "the MultiKueue manager `{}` does not use Kueue (`scheduling.queueing: kueue` with a `kueue` section)",
                mk.manager
            ),
            "declare Kueue in the manager's blueprint: MultiKueue is part of Kueue",
        );
        return;
    }
    let mut workers: Vec<(usize, &str, &Queues)> = Vec::new();
    for (j, w) in mk.workers.iter().enumerate() {
        let Some(q) = clusters.get(w) else { continue };
        if *w == mk.manager || workers.iter().any(|(_, n, _)| n == w) {
            continue;
        }
        if q.kueue {
            workers.push((j, w, q));
        } else {
            out.emit(
                "GPU193",
                format!("spec.multiKueue.workers[{j}]"),
                format!("MultiKueue worker `{w}` does not use Kueue (`scheduling.queueing: kueue` with a `kueue` section)"),
                "declare Kueue in the worker's blueprint (or its base): the manager dispatches Kueue Workloads to it",
            );
        }
    }
    let mut dispatching = BTreeSet::new();
    for (i, cq) in mk.cluster_queues.iter().enumerate() {
        if !manager.cluster_queues.contains_key(cq) {
            let known: Vec<&str> = manager.cluster_queues.keys().map(String::as_str).collect();
            out.emit(
                "GPU193",
                format!("spec.multiKueue.clusterQueues[{i}]"),
                format!(
                    "the manager `{}` declares no ClusterQueue `{cq}` (it has: {})",
                    mk.manager,
                    if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(", ")
                    }
                ),
                "name a ClusterQueue of the manager's `scheduling.kueue.clusterQueues`",
            );
        } else if dispatching.insert(cq.as_str()) {
            mirrored(&mk.manager, manager, cq, &workers, out);
            quota(i, cq, manager, &workers, out);
        }
    }
    frameworks(&mk.manager, manager, &workers, catalog, out);
}

/// The manager's namespaces whose LocalQueue feeds `cq`, with their tenant.
fn feeding<'a>(manager: &'a Queues, cq: &str) -> Vec<(&'a str, &'a str)> {
    manager
        .namespaces
        .iter()
        .filter(|(_, (_, q))| q.as_deref() == Some(cq))
        .map(|(ns, (t, _))| (ns.as_str(), t.as_str()))
        .collect()
}

/// GPU194: every namespace and LocalQueue feeding `cq` on the manager exists on every worker.
fn mirrored(
    name: &str,
    manager: &Queues,
    cq: &str,
    workers: &[(usize, &str, &Queues)],
    out: &mut Out,
) {
    for (ns, tenant) in feeding(manager, cq) {
        for (j, w, q) in workers {
            let problem = match q.namespaces.get(ns) {
                None => format!("has no namespace `{ns}`"),
                Some((t, None)) => format!(
                    "has namespace `{ns}` (tenant `{t}`) without a queue, so no LocalQueue `{LOCAL_QUEUE}` in it"
                ),
                Some((_, Some(_))) => continue,
            };
            out.emit(
                "GPU194",
                format!("spec.multiKueue.workers[{j}]"),
                format!(
                    "worker `{w}` {problem}: the manager `{name}` dispatches ClusterQueue `{cq}` from LocalQueue `{ns}/{LOCAL_QUEUE}` (tenant `{tenant}`), and Kueue creates the remote Workload in the same namespace and LocalQueue, so it is never admitted there"
                ),
                &format!(
                    "declare tenant `{tenant}` with namespace `{ns}` and a `queue` (a ClusterQueue of the worker) in the shared base or in `{w}`'s overlay"
                ),
            );
        }
    }
}

/// GPU196: per resource, the manager's nominal quota of `cq` is at most the workers' quota of the
/// ClusterQueues their mirrored LocalQueues point to.
fn quota(i: usize, cq: &str, manager: &Queues, workers: &[(usize, &str, &Queues)], out: &mut Out) {
    let Some(want) = manager.cluster_queues.get(cq) else {
        return;
    };
    let namespaces = feeding(manager, cq);
    let mut have: BTreeMap<&str, i128> = BTreeMap::new();
    let mut parts: Vec<String> = Vec::new();
    for (_, w, q) in workers {
        let targets: BTreeSet<&str> = namespaces
            .iter()
            .filter_map(|(ns, _)| q.namespaces.get(*ns)?.1.as_deref())
            .collect();
        parts.push(format!(
            "`{w}`: {}",
            if targets.is_empty() {
                "none".into()
            } else {
                targets.iter().copied().collect::<Vec<_>>().join(", ")
            }
        ));
        for t in targets {
            for (res, amount) in q.cluster_queues.get(t).into_iter().flatten() {
                let s = have.entry(res.as_str()).or_insert(0);
                *s = s.saturating_add(amount.nano);
            }
        }
    }
    for (res, amount) in want {
        let sum = have.get(res.as_str()).copied().unwrap_or(0);
        if amount.nano > sum {
            let shown = Quantity {
                nano: sum,
                format: amount.format,
            }
            .canonical();
            out.emit(
                "GPU196",
                format!("spec.multiKueue.clusterQueues[{i}]"),
                format!(
                    "ClusterQueue `{cq}` admits up to {} of `{res}` on the manager, but the workers' ClusterQueues its LocalQueues point to ({}) hold {shown} in all: jobs admitted on the manager would wait on the workers",
                    amount.canonical(),
                    parts.join("; ")
                ),
                "lower the manager's quota to the workers' total, or raise the workers' (Kueue's docs: ideally the manager's quota equals the total of the workers')",
            );
        }
    }
}

/// GPU195: every framework enabled on the manager that is not a kind of Kubernetes itself is
/// enabled on every worker.
fn frameworks(
    name: &str,
    manager: &Queues,
    workers: &[(usize, &str, &Queues)],
    catalog: &Catalog,
    out: &mut Out,
) {
    let builtin = &catalog.queueing().multikueue.builtin_frameworks;
    let (list, declared) = &manager.frameworks;
    let whose = |d: bool| {
        if d {
            "declared in `scheduling.kueue.config.integrations.frameworks`"
        } else {
            "Kueue's chart default list: the blueprint declares no `integrations.frameworks`"
        }
    };
    for (j, w, q) in workers {
        let missing: Vec<&str> = list
            .iter()
            .filter(|f| !builtin.contains(f) && !q.frameworks.0.contains(f))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            continue;
        }
        out.emit(
            "GPU195",
            format!("spec.multiKueue.workers[{j}]"),
            format!(
                "the manager `{name}` enables {} ({}), which worker `{w}` does not ({}): Kueue watches each enabled framework's kind on every worker and does not connect a worker where a watch fails (its CRD is missing), so `{w}`'s MultiKueueCluster stays inactive",
                missing.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", "),
                whose(*declared),
                whose(q.frameworks.1)
            ),
            &format!(
                "enable (and install) them on `{w}` too, or declare on the manager only the frameworks every worker runs (`scheduling.kueue.config.integrations.frameworks`; {} need no CRD)",
                builtin.join(", ")
            ),
        );
    }
}

#[cfg(test)]
#[path = "mk_rules_tests.rs"]
mod tests;
