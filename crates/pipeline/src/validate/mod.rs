//! Validation: a loaded blueprint checked against the facts catalog, every finding at once.
//!
//! Rules live in `rules/`, one file per family; each emits findings through [`Ctx`], which fills in
//! severity (from the registry) and position (from the source tree). The engine never stops early.

pub mod fields;
pub use gpuctl_model::finding::validation as registry;
mod rules;

pub use rules::{ip_pool_nodes, is_dns_label, is_dns_subdomain, wants_rdma};

use jiff::civil::Date;

use gpuctl_model::blueprint::{Blueprint, Broken, Loaded, yaml::SourceTree};
use gpuctl_model::located::{FileReport, Finding, Severity};
use gpuctl_model::profiles::Catalog;

/// Settings that change what validation concludes.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// "Today" for end-of-life checks; fixed in tests and golden files so output is reproducible.
    pub today: Date,
}

/// A blueprint with no error findings. Only [`validate`] builds one, so later stages
/// (render, plan) never re-check what validation already proved.
#[derive(Debug, Clone)]
pub struct ValidatedBlueprint {
    loaded: Loaded,
    warnings: Vec<Finding>,
}

impl ValidatedBlueprint {
    /// The blueprint.
    pub fn blueprint(&self) -> &Blueprint {
        &self.loaded.blueprint
    }
    /// The file it came from.
    pub fn file(&self) -> &str {
        &self.loaded.file
    }
    /// Warnings validation found (no errors, by construction).
    pub fn warnings(&self) -> &[Finding] {
        &self.warnings
    }
}

/// A blueprint taken as it is, error findings or not. Only for tests that show what a real cluster
/// does with a blueprint validation refuses (tests/cluster/composition.rs applies such blueprints "anyway"
/// to reproduce the refusal the rule prevents); gpuctl itself only builds one through [`validate`].
#[doc(hidden)]
pub fn unchecked_for_tests(loaded: Loaded) -> ValidatedBlueprint {
    ValidatedBlueprint {
        loaded,
        warnings: Vec::new(),
    }
}

/// Runs every rule and returns all findings in file order. A finding about a value a parent of
/// an overlay set names that parent's file and line in its message ([`check_split`] reports it in
/// the parent's file instead).
pub fn check(loaded: &Loaded, catalog: &Catalog, opts: Options) -> FileReport {
    loaded.annotate(check_raw(loaded, catalog, opts))
}

/// [`check`] as one report per file that set a value a finding is about: the file named, then the
/// parents it `extends` ([`Loaded::split`]).
pub fn check_split(loaded: &Loaded, catalog: &Catalog, opts: Options) -> Vec<FileReport> {
    loaded.split(check_raw(loaded, catalog, opts))
}

/// Every finding at its own position (for an overlay, possibly in a parent).
fn check_raw(loaded: &Loaded, catalog: &Catalog, opts: Options) -> FileReport {
    let mut ctx = Ctx {
        bp: &loaded.blueprint,
        tree: &loaded.tree,
        catalog,
        today: opts.today,
        findings: Vec::new(),
    };
    rules::run_all(&mut ctx);
    let mut findings = ctx.findings;
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    findings.dedup();
    FileReport {
        file: loaded.file.clone(),
        findings,
        source: loaded.source.clone(),
    }
}

/// Every finding of a blueprint that did not load cleanly: its structural findings, and the rules'
/// findings on the parts that did load (none about a part the loader removed or stood in for).
pub fn check_broken(broken: &Broken, catalog: &Catalog, opts: Options) -> FileReport {
    let mut report = broken.report.clone();
    if let Some(partial) = &broken.partial {
        let semantic = check(&partial.loaded, catalog, opts);
        report.findings.extend(
            semantic
                .findings
                .into_iter()
                .filter(|f| !partial.covers(&f.path)),
        );
        report
            .findings
            .sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        report.findings.dedup();
    }
    report
}

/// [`check_broken`] with the rules' findings in the files that set their values (the structural
/// ones stay in the file named, naming a parent's line in their message).
pub fn check_broken_split(broken: &Broken, catalog: &Catalog, opts: Options) -> Vec<FileReport> {
    let Some(partial) = &broken.partial else {
        return vec![broken.report.clone()];
    };
    let mut raw = check_raw(&partial.loaded, catalog, opts);
    raw.findings.retain(|f| !partial.covers(&f.path));
    let mut reports = partial.loaded.split(raw);
    if reports[0].file != broken.report.file {
        reports.insert(
            0,
            FileReport {
                findings: Vec::new(),
                ..broken.report.clone()
            },
        );
    }
    reports[0]
        .findings
        .extend(broken.report.findings.iter().cloned());
    reports[0]
        .findings
        .sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    reports[0].findings.dedup();
    reports
}

/// Loads and checks a blueprint already read: every structural and semantic finding in one report.
pub fn check_bytes(file: &str, bytes: Vec<u8>, catalog: &Catalog, opts: Options) -> FileReport {
    match gpuctl_model::blueprint::load_bytes_partial(file, bytes) {
        Ok(loaded) => check(&loaded, catalog, opts),
        Err(broken) => check_broken(&broken, catalog, opts),
    }
}

/// Loads and checks the blueprint at `path` (`-`: standard input) with the root its `extends`
/// chain must stay in (`None`: its directory): every finding, in the file that set the value
/// (the file named first, then its parents). An unreadable file is an input error.
pub fn check_path(
    path: &std::path::Path,
    root: Option<&std::path::Path>,
    catalog: &Catalog,
    opts: Options,
) -> Result<Vec<FileReport>, gpuctl_model::input::InputError> {
    let bytes = gpuctl_model::input::read(path, &gpuctl_model::input::BLUEPRINT)?;
    let file = gpuctl_model::input::name(path);
    Ok(
        match gpuctl_model::blueprint::load_bytes_in(&file, bytes, root) {
            Ok(loaded) => check_split(&loaded, catalog, opts),
            Err(broken) => check_broken_split(&broken, catalog, opts),
        },
    )
}

/// Validates; `Ok` when there are no error findings.
pub fn validate(
    loaded: Loaded,
    catalog: &Catalog,
    opts: Options,
) -> Result<ValidatedBlueprint, FileReport> {
    let report = check(&loaded, catalog, opts);
    if report.count(Severity::Error) > 0 {
        return Err(report);
    }
    Ok(ValidatedBlueprint {
        loaded,
        warnings: report.findings,
    })
}

/// What a rule sees and where it reports.
pub(crate) struct Ctx<'a> {
    pub bp: &'a Blueprint,
    pub tree: &'a SourceTree,
    pub catalog: &'a Catalog,
    pub today: Date,
    findings: Vec<Finding>,
}

impl Ctx<'_> {
    /// Whether the pool's counts are within the catalog's bounds (GPU018): only then may a rule
    /// compute its capacity, which allocates per GPU and multiplies counts.
    pub fn pool_in_bounds(&self, pool: &gpuctl_model::blueprint::NodePool) -> bool {
        let l = &self.catalog.limits().node_pools;
        let replicas_ok = |r: Option<u32>| r.is_none_or(|r| r <= l.max_sharing_replicas);
        pool.gpu.count <= l.max_gpus_per_node
            && pool.nodes <= l.max_nodes_per_cluster
            && pool.max_nodes() <= l.max_nodes_per_cluster
            && replicas_ok(pool.partitioning.time_slicing.as_ref().map(|t| t.replicas))
            && replicas_ok(pool.partitioning.mps.as_ref().map(|m| m.replicas))
    }

    /// Reports a finding of `rule` at `path` (the value's position), with a hint saying what to do.
    pub fn emit(
        &mut self,
        rule: &'static str,
        path: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        let path = path.into();
        let severity = registry::rule(rule).map_or(Severity::Error, |r| r.severity);
        gpuctl_model::finding::debug_check(
            gpuctl_model::finding::Family::Validation,
            rule,
            severity,
        );
        let hint = gpuctl_model::located::bounded(hint.into());
        self.findings.push(Finding {
            rule,
            severity,
            pos: self.tree.pos(&path),
            path,
            message: gpuctl_model::located::bounded(message.into()),
            hint: (!hint.is_empty()).then_some(hint),
        });
    }

    /// Like [`Ctx::emit`] but positioned at the key of a mapping entry (for "this key is wrong").
    pub fn emit_at_key(
        &mut self,
        rule: &'static str,
        path: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        let path = path.into();
        let pos = self.tree.key_pos(&path);
        self.emit(rule, path, message, hint);
        if let Some(last) = self.findings.last_mut() {
            last.pos = pos;
        }
    }
}

#[cfg(test)]
mod tests;
