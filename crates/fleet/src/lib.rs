//! Fleets: many clusters from one repository (docs/fleet.md). A fleet file (`kind: Fleet`) names
//! the clusters, each a blueprint (usually an overlay `extends`-ing a shared base, resolved inside
//! the fleet file's directory), its rollout waves and its MultiKueue wiring; `fleet validate`
//! checks the file's own rules and every cluster's effective blueprint, `fleet render` renders
//! each.

mod check;
pub mod gitops;
mod gitops_model;
mod mk_rules;
pub mod model;
pub mod multikueue;

pub mod plan;
pub mod rollout;

use std::path::{Path, PathBuf};

pub use check::{duration_seconds, members};
pub use model::{Cluster, Fleet};

use gpuctl_model::blueprint::yaml::SourceTree;
use gpuctl_model::blueprint::{Broken, Loaded};
use gpuctl_model::located::{FileReport, Finding, Severity};
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::validate::Options;

/// A fleet file, loaded: where it is and what it says.
#[derive(Debug, Clone)]
pub struct LoadedFleet {
    /// The file as the user named it.
    pub file: String,
    /// The directory every blueprint and parent must stay in (the fleet file's).
    pub root: PathBuf,
    /// The fleet.
    pub fleet: Fleet,
    /// The fleet file's rule findings (empty when it is valid), with its text.
    pub report: FileReport,
    /// Per cluster: whether its blueprint path may be read (GPU186 passed).
    readable: Vec<bool>,
    /// [`LoadedFleet::manager_frameworks`], read once.
    manager_frameworks: std::sync::OnceLock<Vec<String>>,
}

/// Every finding of a fleet: the fleet file's, then each cluster's (in the files that set the
/// values, each message naming the cluster).
#[derive(Debug, Clone)]
pub struct FleetReport {
    /// The fleet file's findings.
    pub fleet: FileReport,
    /// Per cluster, in the fleet's order: its name and reports.
    pub clusters: Vec<(String, Vec<FileReport>)>,
}

impl FleetReport {
    /// Every report, the fleet file's first.
    pub fn reports(self) -> Vec<FileReport> {
        std::iter::once(self.fleet)
            .chain(self.clusters.into_iter().flat_map(|(_, r)| r))
            .collect()
    }
}

/// Parses the fleet file at `path` (its `bytes`, read with [`gpuctl_model::input::read`] under the
/// blueprint limit) and runs the fleet rules. `Err` is a report of a file that is not a fleet
/// (not YAML, wrong kind, wrong fields).
pub fn load(path: &Path, bytes: Vec<u8>, catalog: &Catalog) -> Result<LoadedFleet, FileReport> {
    let file = gpuctl_model::input::name(path);
    let fail = |findings: Vec<Finding>, source: &str| FileReport {
        file: file.clone(),
        source: source.to_string(),
        findings,
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        let f = finding(
            "GPU001",
            "",
            None,
            "the file is not UTF-8 text".into(),
            "a fleet file is YAML text",
        );
        fail(vec![f], "")
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text).to_string();
    let (fleet, tree) = parse(&text).map_err(|f| fail(vec![f], &text))?;
    let root = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let l = catalog.limits();
    let bounds = check::Bounds {
        max_clusters: l.fleet.max_clusters,
        max_workers: l.fleet.multikueue_max_workers,
        name_max: l.kubernetes_names.dns1123_label_max_length,
    };
    let mut out = check::Out::new(&tree);
    let readable = check::run(&fleet, &root, &bounds, &mut out);
    gitops::check(&fleet, &l.kubernetes_names, &mut out);
    let mut findings = out.findings;
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    Ok(LoadedFleet {
        report: fail(findings, &text),
        file,
        root,
        fleet,
        readable,
        manager_frameworks: std::sync::OnceLock::new(),
    })
}

/// The fleet document: YAML, the header, then the strict model; the first problem as a finding.
fn parse(text: &str) -> Result<(Fleet, SourceTree), Finding> {
    let tree = SourceTree::parse(text).map_err(|e| {
        finding(
            "GPU001",
            "",
            Some(e.pos),
            format!("invalid YAML: {}", e.message),
            "fix the YAML syntax at this position",
        )
    })?;
    for (field, want) in [
        ("apiVersion", gpuctl_model::blueprint::API_VERSION),
        ("kind", model::KIND),
    ] {
        if tree.value.get(field).and_then(serde_json::Value::as_str) != Some(want) {
            return Err(finding(
                "GPU005",
                field,
                tree.pos(field),
                format!("a fleet file's {field} must be `{want}`"),
                &format!("set `{field}: {want}`"),
            ));
        }
    }
    let fleet = serde_path_to_error::deserialize::<_, Fleet>(&tree.value).map_err(|e| {
        let path = e.path().to_string().replace(".[", "[");
        let path = if path == "." { String::new() } else { path };
        let message = e.inner().to_string();
        let rule = if message.starts_with("unknown field") {
            "GPU002"
        } else if message.starts_with("missing field") {
            "GPU004"
        } else {
            "GPU003"
        };
        finding(
            rule,
            &path,
            tree.pos(&path),
            message,
            "docs/fleet.md lists the fields of a fleet file; credentials never go in it (name a kubeconfig context)",
        )
    })?;
    Ok((fleet, tree))
}

fn finding(
    rule: &'static str,
    path: &str,
    pos: Option<gpuctl_model::located::Pos>,
    message: String,
    hint: &str,
) -> Finding {
    gpuctl_model::finding::debug_check(
        gpuctl_model::finding::Family::Validation,
        rule,
        Severity::Error,
    );
    Finding {
        rule,
        severity: Severity::Error,
        path: path.to_string(),
        pos,
        message: gpuctl_model::located::bounded(message),
        hint: Some(hint.to_string()),
    }
}

impl LoadedFleet {
    /// The effective blueprint of cluster `i` (its `extends` chain resolved inside the root);
    /// `None` when its path failed GPU186 (the fleet's report says why).
    pub fn load_cluster(&self, i: usize) -> Option<Result<Loaded, Broken>> {
        let cluster = self.fleet.spec.clusters.get(i)?;
        if !self.readable.get(i).copied().unwrap_or(false) {
            return None;
        }
        let path = self.root.join(&cluster.blueprint);
        let mut loaded = gpuctl_model::blueprint::load_file_in(&path, Some(&self.root));
        if let Ok(l) = &mut loaded {
            self.manager_settings(&cluster.name, &mut l.blueprint);
        }
        Some(loaded)
    }

    /// The frameworks the MultiKueue manager's Kueue enables (declared, else the chart's list);
    /// empty without MultiKueue or when the manager's blueprint cannot be read (reported by
    /// `fleet validate`). Workers' ClusterRoles are rendered from it.
    pub fn manager_frameworks(&self) -> &[String] {
        self.manager_frameworks.get_or_init(|| {
            let Some(mk) = &self.fleet.spec.multi_kueue else {
                return Vec::new();
            };
            let Ok(i) = self.cluster_index(&mk.manager) else {
                return Vec::new();
            };
            match self.load_cluster(i) {
                Some(Ok(l)) => {
                    mk_rules::Queues::of(&l.blueprint, Catalog::embedded())
                        .frameworks
                        .0
                }
                _ => Vec::new(),
            }
        })
    }

    /// What the fleet says of cluster `name`'s own Kueue: the MultiKueue manager gets the
    /// fleet's dispatcher in its Kueue configuration (rendered into the chart's `managerConfig`,
    /// or compared with the running Kueue's under `install: none`).
    fn manager_settings(&self, name: &str, bp: &mut gpuctl_model::blueprint::Blueprint) {
        let Some(mk) = &self.fleet.spec.multi_kueue else {
            return;
        };
        let (true, Some(dispatcher), Some(kueue)) = (
            mk.manager == name,
            mk.dispatcher,
            bp.spec.scheduling.kueue.as_mut(),
        ) else {
            return;
        };
        kueue.config.multi_kueue = Some(gpuctl_model::blueprint::KueueMultiKueue {
            dispatcher: Some(dispatcher),
        });
    }

    /// The index of the cluster named `name`; `Err` says which clusters the fleet has (and the
    /// closest name).
    pub fn cluster_index(&self, name: &str) -> Result<usize, String> {
        let clusters = &self.fleet.spec.clusters;
        if let Some(i) = clusters.iter().position(|c| c.name == name) {
            return Ok(i);
        }
        let names = clusters.iter().map(|c| c.name.as_str());
        let guess = gpuctl_model::suggest::closest(name, names.clone())
            .map_or_else(String::new, |c| format!("did you mean `{c}`? "));
        let listed: Vec<&str> = names.take(20).collect();
        let more = clusters.len().saturating_sub(listed.len());
        Err(format!(
            "fleet `{}` has no cluster `{}`; {guess}its clusters: {}{}",
            self.fleet.metadata.name,
            gpuctl_model::blueprint::yaml::shorten(name),
            listed.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ))
    }

    /// Every finding of the fleet: its own rules, then each readable cluster's effective blueprint
    /// (loaded, checked and dropped one at a time, so memory stays that of one cluster).
    pub fn check(&self, catalog: &Catalog, opts: Options) -> FleetReport {
        let mut clusters = Vec::new();
        let mut queues = std::collections::BTreeMap::new();
        for (i, c) in self.fleet.spec.clusters.iter().enumerate() {
            let Some(loaded) = self.load_cluster(i) else {
                continue;
            };
            let mut reports = match loaded {
                Ok(l) => {
                    if multikueue::role(&self.fleet, &c.name) != multikueue::Role::None {
                        queues.insert(c.name.clone(), mk_rules::Queues::of(&l.blueprint, catalog));
                    }
                    gpuctl_pipeline::validate::check_split(&l, catalog, opts)
                }
                Err(b) => gpuctl_pipeline::validate::check_broken_split(&b, catalog, opts),
            };
            for r in &mut reports {
                for f in &mut r.findings {
                    f.message = format!("cluster `{}`: {}", c.name, f.message);
                }
            }
            clusters.push((c.name.clone(), reports));
        }
        let mut fleet = self.report.clone();
        if let Ok(tree) = SourceTree::parse(&fleet.source) {
            let mut out = check::Out::new(&tree);
            mk_rules::run(&self.fleet, &queues, catalog, &mut out);
            fleet.findings.extend(out.findings);
            fleet
                .findings
                .sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        }
        FleetReport { fleet, clusters }
    }
}

/// `fleet validate`: the fleet file's findings, or every finding of the fleet. An unreadable
/// fleet file is an input error (as for a blueprint).
pub fn check_path(
    path: &Path,
    catalog: &Catalog,
    opts: Options,
) -> Result<FleetReport, gpuctl_model::input::InputError> {
    let bytes = gpuctl_model::input::read(path, &gpuctl_model::input::BLUEPRINT)?;
    Ok(match load(path, bytes, catalog) {
        Ok(fleet) => fleet.check(catalog, opts),
        Err(report) => FleetReport {
            fleet: report,
            clusters: Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests;
