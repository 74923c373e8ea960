//! Import: the blueprint of a running cluster, read from the one live view (an API server read
//! with `gpuctl import`, or a snapshot taken with `gpuctl snapshot --all`).
//!
//! The mapping is the inverse of render: node pools from the nodes (and the ResourceFlavors that
//! already select them), the operator from its Helm release, drivers from NVIDIADriver CRs,
//! partitioning from the MIG Manager and device-plugin ConfigMaps the nodes' labels name,
//! PriorityClasses, tenants from namespaces with GPU quotas, Kueue and Volcano queues, monitoring.
//! Whatever gpuctl cannot express becomes a comment at the place it would belong and a warning.
//!
//! Import then checks its own work: the draft is validated (findings become comments above their
//! field), rendered, and the rendered Helm values are compared with the live release's values;
//! live values render does not produce are kept under `gpuOperator.values`, so the release is
//! adopted as it is. Finally the draft is planned against the same live view, and anything that
//! plan would change is a warning: the import says where it does not round-trip.

pub mod emit;
#[doc(hidden)]
pub mod fixture;
mod karpenter;
mod map;
mod network;
mod pools;
pub mod releases;

use std::collections::BTreeMap;

use jiff::civil::Date;
use serde_json::{Map, Value};

use emit::{Comments, Y};
use gpuctl_model::object::set_in;
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::render::Templates;
use gpuctl_plan::live::LiveView;
use gpuctl_plan::live::release::NamedRelease;
use gpuctl_plan::plan::{ActionKind, HelmAction, PlanOptions};

/// What import reads besides the live view (the operator's namespace, the server's version); a
/// `--all` snapshot records it.
pub use crate::snapshot::ImportCapture as ImportContext;

/// How to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// `metadata.name` of the blueprint (names its ApplySet); `None`: the name gpuctl's objects
    /// in the cluster record, else `imported`.
    pub name: Option<String>,
    /// "Today", for validation.
    pub today: Date,
}

/// Something import could not express, or a choice it made that the user should check.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Note {
    /// Blueprint path it belongs to (`spec.tenants[0].quota`).
    pub path: String,
    /// What.
    pub message: String,
    /// Stable id, registered in the model crate's `finding/import.rs` (`gpuctl explain GPU300`); last, so warnings keep
    /// their order by path.
    pub id: &'static str,
}

/// The result of an import.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The blueprint, as YAML text.
    pub yaml: String,
    /// Warnings (also comments in `yaml`).
    pub warnings: Vec<Note>,
    /// Whether the imported blueprint passes validation.
    pub valid: bool,
    /// How many objects a plan of the blueprint against the same state would adopt, leave alone,
    /// create, and change (updates and conflicts).
    pub plan_counts: PlanCounts,
}

/// Counts of the self-check plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanCounts {
    /// Existing objects gpuctl would adopt.
    pub adopt: usize,
    /// Objects already in the blueprint's set, unchanged.
    pub unchanged: usize,
    /// Objects gpuctl would create.
    pub create: usize,
    /// Objects whose fields would change, or that conflict.
    pub change: usize,
}

/// A draft under construction: the tree, its comments and warnings.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    pub comments: Comments,
    pub warnings: Vec<Note>,
}

impl Draft {
    /// A comment at `path` only (a choice worth reading, not a loss).
    pub fn comment(&mut self, path: &str, text: impl Into<String>) {
        self.comments
            .entry(path.to_string())
            .or_default()
            .push(text.into());
    }

    /// Something gpuctl cannot express: a comment at `path` and a warning (GPU300).
    pub fn warn(&mut self, path: &str, text: impl Into<String>) {
        let text = text.into();
        self.comment(path, format!("import: {text}"));
        self.note("GPU300", path, text);
    }

    /// A warning of rule `id` at `path` (the empty path: the whole blueprint), without a comment.
    pub fn note(&mut self, id: &'static str, path: &str, message: String) {
        gpuctl_model::finding::debug_check(
            gpuctl_model::finding::Family::Import,
            id,
            gpuctl_model::located::Severity::Warning,
        );
        self.warnings.push(Note {
            path: path.to_string(),
            message,
            id,
        });
    }
}

/// Imports the cluster `live` shows.
pub fn import(
    live: &LiveView,
    ctx: &ImportContext,
    catalog: &Catalog,
    opts: &ImportOptions,
) -> Imported {
    let mut draft = Draft::default();
    let found = found_releases(live, ctx);
    let chosen = releases::choose(&found, catalog);
    for (path, message) in &chosen.notes {
        draft.warn(path, message.clone());
    }
    if ctx.releases_unread > 0 {
        draft.warn(
            "spec.gpuOperator",
            format!(
                "the cluster holds more Helm releases than import reads; {} were not looked at, so a release of the GPU Operator, Network Operator or Kueue may have been missed",
                ctx.releases_unread
            ),
        );
    }
    let mut tree = map::blueprint(live, ctx, catalog, opts, &chosen, &mut draft);
    let templates = Templates::embedded();

    // Live Helm values render does not produce are kept under `gpuOperator.values` (and
    // `networkOperator.values`), so the releases are adopted as they are.
    // The draft is rendered once for that; when nothing is kept, the same result is the final
    // check below (rendering 5,000 objects is most of an import's time).
    let network_release = chosen
        .network_operator
        .filter(|r| r.name == releases::Chart::NetworkOperator.release_name())
        .filter(|_| tree_text(&tree, &["spec", "networkOperator", "install"]) == Some("helm"));
    let gpu_release = chosen
        .gpu_operator
        .filter(|r| r.name == releases::Chart::GpuOperator.release_name())
        .map(|r| &r.release);
    let first = (network_release.is_some() || gpu_release.is_some())
        .then(|| render(&tree, &draft, opts, catalog, &templates));
    let mut changed = false;
    if let Some(Ok(Some(set))) = &first
        && let Some(no) = network_release
    {
        changed |= keep_network_values(&mut tree, &mut draft, no, set);
    }
    if let Some(release) = gpu_release
        && let Some(Ok(Some(set))) = &first
    {
        changed |= keep_operator_values(&mut tree, &mut draft, release, set, catalog);
    }

    // Validate and self-plan the final draft.
    let mut valid = false;
    let mut plan_counts = PlanCounts::default();
    let result = match first {
        Some(r) if !changed => r,
        _ => render(&tree, &draft, opts, catalog, &templates),
    };
    match result {
        Ok(Some(set)) => {
            valid = true;
            plan_counts = self_plan(live, &set, &mut draft);
        }
        Ok(None) => {}
        Err(findings) => {
            for f in findings {
                draft.comment(&f.0, format!("validate: {}", f.1));
            }
        }
    }
    if !valid {
        // Findings were attached as comments by `render`.
        draft.note(
            "GPU302",
            "",
            "the imported blueprint does not pass `gpuctl validate`: each finding is a comment above its field".into(),
        );
    }
    let yaml = text(&tree, &draft, live, plan_counts, valid);
    draft.warnings.sort();
    draft.warnings.dedup();
    Imported {
        yaml,
        warnings: draft.warnings,
        valid,
        plan_counts,
    }
}

/// The releases by chart; a snapshot taken before import looked for them has the operator's
/// release (named `gpu-operator`) only.
fn found_releases(live: &LiveView, ctx: &ImportContext) -> Vec<NamedRelease> {
    match &ctx.releases {
        Some(r) => r.clone(),
        None => live_release(live)
            .map(|r| NamedRelease {
                name: releases::Chart::GpuOperator.release_name().to_string(),
                namespace: ctx
                    .operator_namespace
                    .clone()
                    .unwrap_or_else(|| "gpu-operator".into()),
                release: r.clone(),
            })
            .into_iter()
            .collect(),
    }
}

/// Keeps the live operator release's values that render does not produce under
/// `gpuOperator.values` (those its chart key tree has), and warns about the values gpuctl writes
/// that the release does not set. Whether anything was kept.
fn keep_operator_values(
    tree: &mut Y,
    draft: &mut Draft,
    release: &gpuctl_plan::live::release::LiveRelease,
    set: &gpuctl_pipeline::render::RenderedSet,
    catalog: &Catalog,
) -> bool {
    let mut changed = false;
    let chart = catalog.chart_release(&set.helm.version);
    let (residual, missing) = residual(&release.values, &set.helm.values);
    let mut kept = Map::new();
    for (path, v) in flatten_paths(&residual) {
        let fits = chart.is_none_or(|c| {
            let mut one = Map::new();
            set_in(&mut one, path.iter().map(String::as_str), v.clone());
            c.unknown_paths(&one).is_empty()
        });
        if fits {
            set_in(&mut kept, path.iter().map(String::as_str), v);
        } else {
            draft.warn(
                "spec.gpuOperator.values",
                format!(
                    "the live release sets `{}`, which the GPU Operator {} chart key tree does not have; it is left out",
                    path.join("."),
                    set.helm.version
                ),
            );
        }
    }
    for path in missing {
        draft.warn(
            "spec.gpuOperator",
            format!(
                "gpuctl writes `{path}` into the operator's values and the live release does not set it; the first apply upgrades the release with it"
            ),
        );
    }
    if !kept.is_empty() {
        changed = true;
        draft.comment(
            "spec.gpuOperator.values",
            "values of the live release that no blueprint field expresses, kept as they are",
        );
        if let Some(op) = tree.get_mut("spec").and_then(|s| s.get_mut("gpuOperator")) {
            op.set("values", Y::from_json(&Value::Object(kept)));
        }
    }
    changed
}

/// The counts of a plan of the imported blueprint's `set` against the cluster; each change or
/// conflict it would make, and an upgrade of the operator's release, is a warning.
fn self_plan(
    live: &LiveView,
    set: &gpuctl_pipeline::render::RenderedSet,
    draft: &mut Draft,
) -> PlanCounts {
    let mut plan_counts = PlanCounts::default();
    let view = with_members(live, &gpuctl_plan::plan::parent_of(set).id());
    if let Ok(plan) = gpuctl_plan::plan::plan(set, &view, PlanOptions::default()) {
        for a in &plan.actions {
            match a.action {
                ActionKind::Adopt => plan_counts.adopt += 1,
                ActionKind::NoOp => plan_counts.unchanged += 1,
                ActionKind::Create | ActionKind::CreateAfterCrd | ActionKind::CreateAfterParent => {
                    plan_counts.create += 1;
                }
                // Without a server to normalise them, `112` and `"112"` (or `1Gi` and
                // `1024Mi`) differ only in how they are written: a live plan's dry-run
                // finds them equal.
                ActionKind::Update if a.changes.iter().all(same_quantity) => {
                    plan_counts.adopt += 1;
                }
                ActionKind::Update | ActionKind::Conflict => {
                    plan_counts.change += 1;
                    let fields: Vec<&str> = a.changes.iter().map(|c| c.path.as_str()).collect();
                    draft.note(
                        "GPU301",
                        "",
                        format!(
                            "a plan of this blueprint would {} {}{}",
                            if a.action == ActionKind::Update {
                                "change"
                            } else {
                                "conflict on"
                            },
                            a.id(),
                            if fields.is_empty() {
                                a.reason
                                    .clone()
                                    .map(|r| format!(": {r}"))
                                    .unwrap_or_default()
                            } else {
                                format!(" ({})", fields.join(", "))
                            }
                        ),
                    );
                }
                ActionKind::Delete => {}
            }
        }
        if let Some(h) = &plan.helm_release
            && h.action != HelmAction::NoOp
            && live_release(live).is_some()
        {
            let fields: Vec<&str> = h.changes.iter().map(|c| c.path.as_str()).collect();
            draft.note(
                "GPU301",
                "spec.gpuOperator",
                format!(
                    "a plan of this blueprint would upgrade the operator's Helm release ({})",
                    if fields.is_empty() {
                        "chart version or status".to_string()
                    } else {
                        fields.join(", ")
                    }
                ),
            );
        }
    }
    plan_counts
}

/// The scalar text at `path` of the tree.
fn tree_text<'a>(tree: &'a Y, path: &[&str]) -> Option<&'a str> {
    let mut cur = tree;
    for k in path {
        cur = match cur {
            Y::Map(m) => &m.iter().find(|(key, _)| key == k)?.1,
            _ => return None,
        };
    }
    match cur {
        Y::Scalar(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// The Network Operator release's values that the rendered values lack, under
/// `networkOperator.values` (each checked against the chart's key tree); rendered values the
/// release does not set are warnings.
fn keep_network_values(
    tree: &mut Y,
    draft: &mut Draft,
    release: &NamedRelease,
    set: &gpuctl_pipeline::render::RenderedSet,
) -> bool {
    let p = "spec.networkOperator";
    let rendered: Value = set
        .documents
        .get(gpuctl_pipeline::render::network::NETWORK_OPERATOR_VALUES)
        .and_then(|t| serde_saphyr::from_str(t).ok())
        .unwrap_or(Value::Object(Map::new()));
    let version = tree_text(tree, &["spec", "networkOperator", "version"])
        .unwrap_or_default()
        .to_string();
    let chart = gpuctl_model::profiles::chart::network_operator_release(&version);
    let (residual, missing) = residual(&release.release.values, &rendered);
    let mut kept = Map::new();
    for (path, v) in flatten_paths(&residual) {
        let mut one = Map::new();
        set_in(&mut one, path.iter().map(String::as_str), v.clone());
        if chart.is_none_or(|c| c.unknown_paths(&one).is_empty()) {
            set_in(&mut kept, path.iter().map(String::as_str), v);
        } else {
            draft.warn(
                &format!("{p}.values"),
                format!(
                    "the live release sets `{}`, which the Network Operator {version} chart key tree does not have; it is left out",
                    path.join(".")
                ),
            );
        }
    }
    for path in missing {
        draft.warn(
            p,
            format!(
                "gpuctl writes `{path}` into the Network Operator's values and the live release does not set it; a gpuctl that installs the release would upgrade it with it"
            ),
        );
    }
    if !kept.is_empty() {
        draft.comment(
            &format!("{p}.values"),
            "values of the live release that no blueprint field expresses, kept as they are",
        );
        if let Some(no) = tree
            .get_mut("spec")
            .and_then(|s| s.get_mut("networkOperator"))
        {
            no.set("values", Y::from_json(&Value::Object(kept)));
        }
        return true;
    }
    false
}

/// A change between two spellings of one quantity.
fn same_quantity(c: &gpuctl_plan::plan::diff::Change) -> bool {
    match (&c.before, &c.after) {
        (Some(a), Some(b)) => gpuctl_model::quantity::same_value(a, b),
        _ => false,
    }
}

/// `live` with the members of ApplySet `id` among its objects (import reads every object of
/// the kinds it maps, so the members are among them).
fn with_members(live: &LiveView, id: &str) -> LiveView {
    let mut view = live.clone();
    view.members = Some(
        live.objects
            .iter()
            .filter(|(_, o)| o["metadata"]["labels"][gpuctl_model::applyset::PART_OF] == id)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    view
}

fn live_release(live: &LiveView) -> Option<&gpuctl_plan::live::release::LiveRelease> {
    match &live.helm_release {
        gpuctl_plan::live::Reading::Read(Some(r)) => Some(r),
        _ => None,
    }
}

fn text(tree: &Y, draft: &Draft, live: &LiveView, counts: PlanCounts, valid: bool) -> String {
    let source = match &live.source {
        gpuctl_plan::live::Source::Cluster { server, .. } => format!("the cluster at {server}"),
        gpuctl_plan::live::Source::Snapshot { captured_at, .. } => format!(
            "a snapshot{}",
            captured_at
                .as_ref()
                .map(|t| format!(" captured at {t}"))
                .unwrap_or_default()
        ),
        gpuctl_plan::live::Source::Offline => "no cluster".into(),
    };
    let mut header = vec![
        format!("Imported by `gpuctl import` from {source}."),
        "Lines starting with `import:` name what gpuctl cannot express or had to guess; read them"
            .to_string(),
        "before the first `gpuctl apply --adopt`.".to_string(),
    ];
    if valid {
        header.push(format!(
            "A plan of this blueprint against the same state adopts {} object(s), leaves {} unchanged, creates {} and changes {}.",
            counts.adopt, counts.unchanged, counts.create, counts.change
        ));
    } else {
        header.push(
            "It does not pass `gpuctl validate` yet: each finding is a comment above its field."
                .to_string(),
        );
    }
    emit::document(&header, tree, &draft.comments)
}

/// Validates and renders the draft: `Ok(Some(set))`, `Ok(None)` when it validates but does not
/// render (the reason is a warning), `Err` with (path, message) findings when it does not validate.
fn render(
    tree: &Y,
    draft: &Draft,
    opts: &ImportOptions,
    catalog: &Catalog,
    templates: &Templates,
) -> Result<Option<gpuctl_pipeline::render::RenderedSet>, Vec<(String, String)>> {
    let yaml = emit::document(&[], tree, &draft.comments);
    let loaded = match gpuctl_model::blueprint::load_str("imported.yaml", &yaml) {
        Ok(l) => l,
        Err(report) => {
            return Err(report
                .findings
                .into_iter()
                .map(|f| (f.path, format!("{} {}", f.rule, f.message)))
                .collect());
        }
    };
    let validated = gpuctl_pipeline::validate::validate(
        loaded,
        catalog,
        gpuctl_pipeline::validate::Options { today: opts.today },
    )
    .map_err(|report| {
        report
            .findings
            .into_iter()
            .filter(|f| f.severity == gpuctl_model::located::Severity::Error)
            .map(|f| (f.path, format!("{} {}", f.rule, f.message)))
            .collect::<Vec<_>>()
    })?;
    Ok(gpuctl_pipeline::render::render(&validated, catalog, templates).ok())
}

/// What `live` has that `rendered` lacks or has otherwise (the values to keep), and the paths
/// `rendered` sets that `live` does not (which values cannot remove).
pub fn residual(live: &Value, rendered: &Value) -> (Value, Vec<String>) {
    let mut missing = Vec::new();
    let r = residual_at("", live, rendered, &mut missing);
    (r.unwrap_or(Value::Object(Map::new())), missing)
}

fn residual_at(
    path: &str,
    live: &Value,
    rendered: &Value,
    missing: &mut Vec<String>,
) -> Option<Value> {
    match (live, rendered) {
        (Value::Object(l), Value::Object(r)) => {
            let mut out = Map::new();
            for (k, lv) in l {
                let p = gpuctl_plan::plan::diff::join(path, k);
                match r.get(k) {
                    None => {
                        out.insert(k.clone(), lv.clone());
                    }
                    Some(rv) => {
                        if let Some(d) = residual_at(&p, lv, rv, missing) {
                            out.insert(k.clone(), d);
                        }
                    }
                }
            }
            for k in r.keys().filter(|k| !l.contains_key(*k)) {
                missing.push(gpuctl_plan::plan::diff::join(path, k));
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        (l, r) if l == r => None,
        (l, _) => Some(l.clone()),
    }
}

/// Leaf paths of a values tree (objects are walked; lists and scalars are leaves).
fn flatten_paths(v: &Value) -> Vec<(Vec<String>, Value)> {
    fn walk(prefix: &mut Vec<String>, v: &Value, out: &mut Vec<(Vec<String>, Value)>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, x) in m {
                    prefix.push(k.clone());
                    walk(prefix, x, out);
                    prefix.pop();
                }
            }
            _ => out.push((prefix.clone(), v.clone())),
        }
    }
    let mut out = Vec::new();
    walk(&mut Vec::new(), v, &mut out);
    out.into_iter().filter(|(p, _)| !p.is_empty()).collect()
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Labels of an object as a map.
pub(crate) fn labels(o: &Value) -> BTreeMap<String, String> {
    o["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
