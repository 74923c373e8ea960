//! The fleet file's own rules (GPU182–GPU189 and GPU193's duplicates in the validation registry): cluster names and
//! contexts, blueprint paths inside the fleet's directory, waves that hold every cluster once,
//! and the MultiKueue rules that need no blueprint.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::model::{Fleet, Wave};
use gpuctl_model::blueprint::yaml::SourceTree;
use gpuctl_model::located::{Finding, Severity};

/// What the rules read besides the fleet.
pub(super) struct Bounds {
    pub max_clusters: usize,
    pub max_workers: usize,
    pub name_max: usize,
}

/// Findings in the fleet file at positions of `tree`.
pub(super) struct Out<'a> {
    tree: &'a SourceTree,
    pub findings: Vec<Finding>,
}

impl<'a> Out<'a> {
    pub fn new(tree: &'a SourceTree) -> Out<'a> {
        Out {
            tree,
            findings: Vec::new(),
        }
    }

    pub fn emit(&mut self, rule: &'static str, path: String, message: String, hint: &str) {
        let severity =
            gpuctl_pipeline::validate::registry::rule(rule).map_or(Severity::Error, |r| r.severity);
        gpuctl_model::finding::debug_check(
            gpuctl_model::finding::Family::Validation,
            rule,
            severity,
        );
        self.findings.push(Finding {
            rule,
            severity,
            pos: self.tree.pos(&path),
            path,
            message: gpuctl_model::located::bounded(message),
            hint: Some(hint.to_string()),
        });
    }
}

/// Every fleet rule; returns the clusters whose blueprint path may be read.
pub(super) fn run(fleet: &Fleet, root: &Path, bounds: &Bounds, out: &mut Out) -> Vec<bool> {
    clusters(fleet, bounds, out);
    let readable = blueprint_paths(fleet, root, out);
    waves(fleet, out);
    multi_kueue(fleet, bounds, out);
    readable
}

fn clusters(fleet: &Fleet, bounds: &Bounds, out: &mut Out) {
    let clusters = &fleet.spec.clusters;
    if clusters.len() > bounds.max_clusters {
        out.emit(
            "GPU182",
            "spec.clusters".into(),
            format!(
                "{} clusters, more than the {} one fleet file may hold",
                clusters.len(),
                bounds.max_clusters
            ),
            "split the fleet into several fleet files (profiles/limits.yaml `fleet.max_clusters`)",
        );
    }
    let mut names = BTreeSet::new();
    let mut contexts: BTreeMap<&str, &str> = BTreeMap::new();
    for (i, c) in clusters.iter().enumerate() {
        if !gpuctl_pipeline::validate::is_dns_label(&c.name, bounds.name_max) {
            out.emit(
                "GPU182",
                format!("spec.clusters[{i}].name"),
                format!("cluster name `{}` is not a DNS-1123 label", c.name),
                "use lower case letters, digits and `-` (at most 63): the name is a directory of `fleet render`",
            );
        } else if !names.insert(c.name.as_str()) {
            out.emit(
                "GPU182",
                format!("spec.clusters[{i}].name"),
                format!("cluster `{}` is declared twice", c.name),
                "rename one of the clusters",
            );
        }
        if let Some(ctx) = c.context.as_deref()
            && let Some(first) = contexts.insert(ctx, &c.name)
        {
            out.emit(
                "GPU183",
                format!("spec.clusters[{i}].context"),
                format!(
                    "clusters `{first}` and `{}` both use the context `{ctx}`",
                    c.name
                ),
                "give each cluster its own kubeconfig context",
            );
        }
    }
}

/// GPU186: each blueprint path is relative and inside `root` once links are resolved.
fn blueprint_paths(fleet: &Fleet, root: &Path, out: &mut Out) -> Vec<bool> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let mut ok = Vec::new();
    for (i, c) in fleet.spec.clusters.iter().enumerate() {
        let path = format!("spec.clusters[{i}].blueprint");
        let rel = Path::new(&c.blueprint);
        let problem = if c.blueprint.is_empty() || rel.is_absolute() {
            Some(format!("`{}` is not a relative path", c.blueprint))
        } else {
            match root.join(rel).canonicalize() {
                Err(e) => Some(format!("cannot read `{}`: {e}", c.blueprint)),
                Ok(p) if !p.starts_with(&root) => Some(format!(
                    "`{}` resolves to `{}`, outside the fleet's directory `{}`",
                    c.blueprint,
                    p.display(),
                    root.display()
                )),
                Ok(_) => None,
            }
        };
        ok.push(problem.is_none());
        if let Some(message) = problem {
            out.emit(
                "GPU186",
                path,
                message,
                "name the cluster's blueprint relative to the fleet file, inside its directory",
            );
        }
    }
    ok
}

/// Each wave's clusters, in apply order: the clusters it names, then those its selector matches
/// that no earlier wave took and no wave names. Without waves, one wave `all` holds every cluster.
pub fn members(fleet: &Fleet) -> Vec<(String, Vec<String>)> {
    let clusters = &fleet.spec.clusters;
    if fleet.spec.waves.is_empty() {
        return vec![(
            "all".into(),
            clusters.iter().map(|c| c.name.clone()).collect(),
        )];
    }
    let named: BTreeSet<&str> = fleet
        .spec
        .waves
        .iter()
        .flat_map(|w| w.clusters.iter().map(String::as_str))
        .collect();
    let mut taken: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for w in &fleet.spec.waves {
        let mut m: Vec<String> = Vec::new();
        for c in &w.clusters {
            if !m.contains(c) {
                m.push(c.clone());
            }
            taken.insert(c);
        }
        if let Some(sel) = &w.selector {
            for c in clusters {
                let free = !taken.contains(c.name.as_str()) && !named.contains(c.name.as_str());
                if free && sel.matches(&c.labels) {
                    taken.insert(&c.name);
                    m.push(c.name.clone());
                }
            }
        }
        out.push((w.name.clone(), m));
    }
    out
}

fn waves(fleet: &Fleet, out: &mut Out) {
    let known: BTreeSet<&str> = fleet
        .spec
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let mut names = BTreeSet::new();
    let mut named_in: BTreeMap<&str, &str> = BTreeMap::new();
    for (i, w) in fleet.spec.waves.iter().enumerate() {
        wave_shape(i, w, &mut names, out);
        for (j, c) in w.clusters.iter().enumerate() {
            let path = format!("spec.waves[{i}].clusters[{j}]");
            if !known.contains(c.as_str()) {
                out.emit(
                    "GPU185",
                    path,
                    format!(
                        "wave `{}` names `{c}`, which is not a cluster of the fleet",
                        w.name
                    ),
                    "use a name from `spec.clusters`",
                );
            } else if let Some(first) = named_in.insert(c, &w.name) {
                out.emit(
                    "GPU184",
                    path,
                    format!(
                        "cluster `{c}` is in wave `{first}` and in wave `{}`",
                        w.name
                    ),
                    "name each cluster in one wave",
                );
            }
        }
    }
    if fleet.spec.waves.is_empty() {
        return;
    }
    let placed: BTreeSet<String> = members(fleet).into_iter().flat_map(|(_, m)| m).collect();
    for (i, c) in fleet.spec.clusters.iter().enumerate() {
        if !placed.contains(&c.name) {
            out.emit(
                "GPU184",
                format!("spec.clusters[{i}].name"),
                format!("cluster `{}` is in no wave: it would never be rolled out", c.name),
                "name it in a wave, or end the waves with `selector: {}` (every cluster no earlier wave took)",
            );
        }
    }
}

/// GPU189: a wave's name is unique, it says which clusters it holds, its bake time parses.
fn wave_shape<'a>(i: usize, w: &'a Wave, names: &mut BTreeSet<&'a str>, out: &mut Out) {
    if !names.insert(&w.name) {
        out.emit(
            "GPU189",
            format!("spec.waves[{i}].name"),
            format!("wave `{}` is declared twice", w.name),
            "name each wave once",
        );
    }
    if w.clusters.is_empty() && w.selector.is_none() {
        out.emit(
            "GPU189",
            format!("spec.waves[{i}]"),
            format!("wave `{}` names no clusters and has no selector", w.name),
            "give the wave `clusters: [...]` or a `selector` (`selector: {}` takes every cluster left)",
        );
    }
    if let Some(bake) = &w.bake
        && duration_seconds(bake).is_none()
    {
        out.emit(
            "GPU189",
            format!("spec.waves[{i}].bake"),
            format!("bake time `{bake}` is not a duration"),
            "write a number and a unit, e.g. `30m`, `24h` or `1h30m`",
        );
    }
}

/// `1h30m`, `45s`, `24h` in seconds; `None` for anything else.
pub fn duration_seconds(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut digits = String::new();
    for ch in text.chars() {
        match ch {
            '0'..='9' => digits.push(ch),
            's' | 'm' | 'h' | 'd' if !digits.is_empty() => {
                let n: u64 = digits.parse().ok()?;
                let unit = match ch {
                    's' => 1,
                    'm' => 60,
                    'h' => 3600,
                    _ => 86_400,
                };
                total = total.checked_add(n.checked_mul(unit)?)?;
                digits.clear();
            }
            _ => return None,
        }
    }
    (digits.is_empty() && !text.is_empty()).then_some(total)
}

fn multi_kueue(fleet: &Fleet, bounds: &Bounds, out: &mut Out) {
    let Some(mk) = &fleet.spec.multi_kueue else {
        return;
    };
    let known: BTreeSet<&str> = fleet
        .spec
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    if !known.contains(mk.manager.as_str()) {
        out.emit(
            "GPU185",
            "spec.multiKueue.manager".into(),
            format!(
                "the MultiKueue manager `{}` is not a cluster of the fleet",
                mk.manager
            ),
            "use a name from `spec.clusters`",
        );
    }
    if mk.workers.is_empty() || mk.workers.len() > bounds.max_workers {
        out.emit(
            "GPU188",
            "spec.multiKueue.workers".into(),
            format!(
                "{} workers: a MultiKueueConfig takes 1 to {}",
                mk.workers.len(),
                bounds.max_workers
            ),
            "list at least one worker and at most 20; split a larger fleet over several managers",
        );
    }
    let mut queues = BTreeSet::new();
    for (i, cq) in mk.cluster_queues.iter().enumerate() {
        if !queues.insert(cq.as_str()) {
            out.emit(
                "GPU193",
                format!("spec.multiKueue.clusterQueues[{i}]"),
                format!("ClusterQueue `{cq}` is listed twice"),
                "list each dispatching ClusterQueue once: it gets one MultiKueue check either way",
            );
        }
    }
    let mut seen = BTreeSet::new();
    for (i, w) in mk.workers.iter().enumerate() {
        let path = format!("spec.multiKueue.workers[{i}]");
        if *w == mk.manager {
            out.emit(
                "GPU187",
                path,
                format!("the manager `{w}` is also one of its workers"),
                "remove it from `workers`: Kueue does not support a manager that is its own worker",
            );
        } else if !known.contains(w.as_str()) {
            out.emit(
                "GPU185",
                path,
                format!("MultiKueue worker `{w}` is not a cluster of the fleet"),
                "use a name from `spec.clusters`",
            );
        } else if !seen.insert(w.as_str()) {
            out.emit(
                "GPU188",
                path,
                format!("worker `{w}` is listed twice"),
                "list each worker once (Kueue refuses duplicates in a MultiKueueConfig)",
            );
        }
    }
}
