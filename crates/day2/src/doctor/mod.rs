//! `gpuctl doctor`: why is GPU work stuck or failing? A pure function of the blueprint (the
//! intended cluster), the facts catalog and a [`Diagnostics`] reading (the real one), answering in
//! findings grouped by the four layers of the rendered troubleshooting runbook: scheduling,
//! container start, runtime, nodes and hardware. Each [`Finding`] names the objects it concerns,
//! the evidence (event text, condition, label, metric value and time), the cause in one sentence and
//! the next step as a concrete command.
//!
//! Ids GPU200–GPU249 are this module's, registered in the model crate's `finding/doctor.rs`
//! (`gpuctl explain GPU200`, docs/rules.md; `docs/doctor.md` lists them with an example each);
//! GPU250–GPU299 are the metric
//! findings (runtime and hardware from DCGM through Prometheus), which have the same [`Finding`]
//! shape ([`gpuctl_model::finding`]) and are merged into the same [`Report`] with [`Report::extend`].
//! A new finding: its id and texts in the model crate's `finding/doctor.rs`, its check in the
//! layer's file, built with `finding()` (which checks, in tests, that the id is registered), a scenario in `tests.rs`.

mod fit;
mod provisioning;
mod scheduling;
mod stack;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::diagnostics::{DiagKind, Diagnostics, Unread, UnreadWhy};
use gpuctl_model::blueprint::Blueprint;
use gpuctl_model::located::Severity;
use gpuctl_model::profiles::Catalog;

/// Version of the `gpuctl doctor -o json` document. Readers must check it: fields are only added
/// within a version.
pub const DOCTOR_FORMAT_VERSION: u32 = 1;

/// Most evidence items kept per finding (the newest first); the rest are counted.
pub const MAX_EVIDENCE: usize = 4;

pub use gpuctl_model::finding::{Evidence, Finding, Layer};

/// Findings by severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Errors.
    pub errors: usize,
    /// Warnings.
    pub warnings: usize,
    /// Infos.
    pub infos: usize,
}

/// What one pool could place now: per accelerator resource, the free units on its Ready,
/// schedulable nodes, and the largest single-pod request that fits on one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRoom {
    /// Pool name.
    pub pool: String,
    /// Nodes of the pool found, and how many of them are Ready and schedulable.
    pub nodes: usize,
    /// Ready and schedulable nodes.
    pub ready: usize,
    /// Per resource: (free units in the pool, largest request one node can take now).
    pub free: BTreeMap<String, (u64, u64)>,
}

/// `s` bounded to [`gpuctl_model::located::MAX_MESSAGE`], with line breaks and tabs as spaces and any other
/// control character (an ANSI escape from an event message) as `?`.
fn tidy(s: &mut String) {
    if s.len() > gpuctl_model::located::MAX_MESSAGE || s.chars().any(char::is_control) {
        let clean: String = s
            .chars()
            .map(|c| match c {
                '\n' | '\r' | '\t' => ' ',
                c if c.is_control() => '?',
                c => c,
            })
            .collect();
        *s = gpuctl_model::located::bounded(clean);
    }
}

/// The doctor's answer (`gpuctl doctor -o json` prints it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`DOCTOR_FORMAT_VERSION`].
    pub format_version: u32,
    /// The blueprint's `metadata.name`.
    pub blueprint: String,
    /// When the cluster was read (RFC 3339), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<String>,
    /// Counts by severity.
    pub summary: Summary,
    /// Findings, by layer, severity, id and first subject.
    pub findings: Vec<Finding>,
    /// Per pool, what it could place now.
    pub pools: Vec<PoolRoom>,
    /// Kinds that could not be read (or not whole): findings about them may be missing.
    pub unread: Vec<Unread>,
    /// What reading the cluster live cost (absent when read from a snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<ReadCost>,
}

/// What a live reading of the cluster cost: the API requests it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCost {
    /// LIST requests sent, pages included (discovery not counted).
    pub list_requests: u64,
}

impl Report {
    /// Whether any finding is an error (exit 1).
    pub fn has_errors(&self) -> bool {
        self.summary.errors > 0
    }

    /// Adds findings from elsewhere (the metric findings), keeping the order and counts.
    pub fn extend(&mut self, findings: impl IntoIterator<Item = Finding>) {
        self.findings.extend(findings);
        self.finish();
    }

    fn finish(&mut self) {
        // Findings quote the cluster (event and condition messages, names): from a snapshot in a
        // pull request they are hostile. Every printed string is bounded like validation's
        // messages and carries no control character a terminal would act on.
        for f in &mut self.findings {
            for s in [&mut f.title, &mut f.cause, &mut f.fix]
                .into_iter()
                .chain(f.subjects.iter_mut())
            {
                tidy(s);
            }
            for e in &mut f.evidence {
                tidy(&mut e.source);
                tidy(&mut e.text);
            }
        }
        self.findings.sort_by(|a, b| {
            (a.layer, a.severity, &a.id, &a.subjects, &a.title).cmp(&(
                b.layer,
                b.severity,
                &b.id,
                &b.subjects,
                &b.title,
            ))
        });
        self.findings.dedup();
        let mut s = Summary::default();
        for f in &self.findings {
            match f.severity {
                Severity::Error => s.errors += 1,
                Severity::Warning => s.warnings += 1,
                Severity::Info => s.infos += 1,
            }
        }
        self.summary = s;
    }
}

/// Findings being collected: one per (id, key), so forty pods pending for one reason are one
/// finding with forty subjects.
#[derive(Default)]
pub(crate) struct Findings {
    by_key: BTreeMap<(String, String), Finding>,
}

impl Findings {
    /// Adds `f` under `key`, or merges its subjects and evidence into the finding already there.
    pub(crate) fn add(&mut self, key: impl Into<String>, f: Finding) {
        let k = (f.id.clone(), key.into());
        match self.by_key.get_mut(&k) {
            None => {
                self.by_key.insert(k, f);
            }
            Some(have) => {
                for s in f.subjects {
                    if !have.subjects.contains(&s) {
                        have.subjects.push(s);
                    }
                }
                for e in f.evidence {
                    if !have.evidence.contains(&e) {
                        have.evidence.push(e);
                    }
                }
                have.severity = have.severity.min(f.severity);
            }
        }
    }

    fn into_vec(self) -> Vec<Finding> {
        self.by_key
            .into_values()
            .map(|mut f| {
                f.evidence
                    .sort_by(|a, b| b.time.cmp(&a.time).then_with(|| a.cmp(b)));
                f.evidence.dedup();
                f.evidence.truncate(MAX_EVIDENCE);
                f
            })
            .collect()
    }
}

/// Builds a finding (the title is filled in by the caller's format). `id` must be registered in
/// `finding/doctor.rs` at this severity or a more severe one (checked in debug builds).
#[allow(clippy::too_many_arguments)]
pub(crate) fn finding(
    id: &'static str,
    layer: Layer,
    severity: Severity,
    title: String,
    subjects: Vec<String>,
    evidence: Vec<Evidence>,
    cause: String,
    fix: String,
) -> Finding {
    gpuctl_model::finding::debug_check_cluster(
        gpuctl_model::finding::Family::Doctor,
        id,
        severity,
        layer,
    );
    Finding {
        id: id.to_string(),
        layer,
        severity,
        title,
        subjects,
        evidence,
        cause,
        fix,
    }
}

/// Everything the checks share: the blueprint, the catalog, the reading and the cluster's nodes
/// mapped to the blueprint's pools with what each has free.
pub(crate) struct Ctx<'a> {
    pub bp: &'a Blueprint,
    pub catalog: &'a Catalog,
    pub d: &'a Diagnostics,
    /// The blueprint's file name as the user gave it, for fixes (`gpuctl apply FILE`).
    pub file: &'a str,
    pub nodes: Vec<fit::NodeRoom<'a>>,
}

impl Ctx<'_> {
    /// The pool a node belongs to (by the blueprint's selectors), by name.
    pub fn pool_of(&self, node: &str) -> Option<usize> {
        self.nodes
            .iter()
            .find(|n| n.name == node)
            .and_then(|n| n.pool)
    }

    pub fn pool_name(&self, i: usize) -> &str {
        &self.bp.spec.node_pools[i].name
    }
}

/// The doctor: every check over `d` against `bp`. `file` is the blueprint as the user named it
/// (fixes quote it).
pub fn diagnose(bp: &Blueprint, catalog: &Catalog, d: &Diagnostics, file: &str) -> Report {
    let ctx = Ctx {
        bp,
        catalog,
        d,
        file,
        nodes: fit::node_rooms(bp, catalog, d),
    };
    let mut out = Findings::default();
    scheduling::check(&ctx, &mut out);
    stack::check(&ctx, &mut out);
    provisioning::check(&ctx, &mut out);
    unread(&ctx, &mut out);
    let mut report = Report {
        format_version: DOCTOR_FORMAT_VERSION,
        blueprint: bp.metadata.name.clone(),
        read_at: d.read_at.clone(),
        summary: Summary::default(),
        findings: out.into_vec(),
        pools: fit::pool_rooms(&ctx),
        unread: d.unread.clone(),
        read: None,
    };
    report.finish();
    report
}

/// GPU249: a kind the doctor reads that could not be read (forbidden, failed, cut: a warning, as
/// findings about it may be missing), or a queueing system the blueprint declares whose kinds the
/// cluster does not serve (an error: its queued work is never admitted). A kind that is not served
/// and that the blueprint does not rely on is no finding.
fn unread(ctx: &Ctx<'_>, out: &mut Findings) {
    use gpuctl_model::blueprint::Queueing;
    let q = ctx.bp.spec.scheduling.queueing;
    for u in &ctx.d.unread {
        let needed_kind = |k: DiagKind| u.kind == k.name();
        let kueue = [
            DiagKind::Workload,
            DiagKind::ClusterQueue,
            DiagKind::LocalQueue,
        ]
        .into_iter()
        .any(needed_kind);
        let volcano = [DiagKind::PodGroup, DiagKind::VolcanoQueue]
            .into_iter()
            .any(needed_kind);
        let (severity, cause) = match u.why {
            UnreadWhy::NotServed if kueue && q == Queueing::Kueue => (
                Severity::Error,
                format!(
                    "the blueprint queues work with Kueue, but the cluster does not serve {}: Kueue is not installed, so no Job in a tenant's LocalQueue is ever admitted",
                    u.kind
                ),
            ),
            UnreadWhy::NotServed if volcano && q == Queueing::Volcano => (
                Severity::Error,
                format!(
                    "the blueprint queues work with Volcano, but the cluster does not serve {}: Volcano is not installed",
                    u.kind
                ),
            ),
            UnreadWhy::NotServed => continue,
            UnreadWhy::Forbidden => (
                Severity::Warning,
                format!(
                    "the credentials may not list {}, so findings about it are missing",
                    u.kind
                ),
            ),
            UnreadWhy::Failed | UnreadWhy::Truncated => (
                Severity::Warning,
                format!(
                    "{} was not read whole ({}), so findings about it may be missing",
                    u.kind, u.message
                ),
            ),
        };
        let fix = match u.why {
            UnreadWhy::Forbidden => format!(
                "grant list on {} to the identity gpuctl runs as (`kubectl auth can-i list {} --all-namespaces`)",
                u.kind,
                u.kind.to_lowercase()
            ),
            UnreadWhy::NotServed => format!(
                "install it as the blueprint declares (`gpuctl apply {}`), then `kubectl api-resources | grep -i {}`",
                ctx.file,
                u.kind.split('.').next().unwrap_or_default().to_lowercase()
            ),
            _ => "run `gpuctl doctor` again; if it repeats, read the kind with `kubectl get` and report the message".into(),
        };
        out.add(
            u.kind.clone(),
            finding(
                "GPU249",
                Layer::Scheduling,
                severity,
                format!("{} could not be read: {}", u.kind, why_text(u.why)),
                vec![format!("kind/{}", u.kind)],
                (!u.message.is_empty())
                    .then(|| Evidence {
                        source: format!("list {}", u.kind),
                        text: u.message.clone(),
                        time: None,
                    })
                    .into_iter()
                    .collect(),
                cause,
                fix,
            ),
        );
    }
}

fn why_text(w: UnreadWhy) -> &'static str {
    match w {
        UnreadWhy::NotServed => "not served",
        UnreadWhy::Forbidden => "forbidden",
        UnreadWhy::Failed => "failed",
        UnreadWhy::Truncated => "cut at its bound",
    }
}

/// `kind/namespace/name` (or `kind/name`), as subjects are written.
pub(crate) fn subject(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace.filter(|n| !n.is_empty()) {
        Some(ns) => format!("{}/{ns}/{name}", kind.to_lowercase()),
        None => format!("{}/{name}", kind.to_lowercase()),
    }
}

/// Masks credentials in text taken from the cluster (event and condition messages) before it is
/// shown.
pub(crate) fn clean(text: &str) -> String {
    let t = gpuctl_model::redact::redact_str(text).unwrap_or_else(|| text.to_string());
    // Keep a finding readable: long messages (a scheduler message over 200 nodes) are cut.
    const MAX: usize = 600;
    if t.len() > MAX {
        let mut end = MAX;
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &t[..end])
    } else {
        t
    }
}
