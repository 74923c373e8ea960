//! Policy results as gpuctl findings, with the ids of the policy family
//! (`gpuctl_model::finding::policy`): a `deny`/`violation` result is an error, a `warn` result a
//! warning. The message keeps the rule's query, so a reader knows which policy spoke.

use gpuctl_model::finding::{self, Family};
use gpuctl_model::located::{self, Pos, Severity};
use gpuctl_plan::plan::PlanFinding;

use crate::eval::{Kind, PolicyResult};

/// A `deny` or `violation` result.
pub const DENY: &str = "GPU500";
/// A `warn` result.
pub const WARN: &str = "GPU501";

/// The id and severity of a result.
pub fn id_of(r: &PolicyResult) -> (&'static str, Severity) {
    let (id, severity) = match r.kind {
        Kind::Failure => (DENY, Severity::Error),
        Kind::Warning => (WARN, Severity::Warning),
    };
    finding::debug_check(Family::Policy, id, severity);
    (id, severity)
}

/// The text every output prints: the message, then the rule that produced it.
pub fn message(r: &PolicyResult) -> String {
    format!("{} ({})", r.msg, r.query())
}

/// A result as a finding located in a blueprint file (`gpuctl validate`'s reports): at the
/// line of its `_loc`, else at the top of the file.
pub fn located(r: &PolicyResult) -> located::Finding {
    let (rule, severity) = id_of(r);
    located::Finding {
        rule,
        severity,
        path: r
            .metadata
            .get("path")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
        pos: r
            .loc
            .as_ref()
            .and_then(|l| l.line)
            .and_then(|l| usize::try_from(l).ok())
            .filter(|l| *l > 0)
            .map(|line| Pos { line, column: 1 }),
        message: message(r),
        hint: Some(format!("organisation policy {}", r.query())),
    }
}

/// A result as a plan finding (`gpuctl plan`, `fleet plan`): in the plan's findings, every
/// output (text, Markdown, JSON) prints it.
pub fn plan(r: &PolicyResult) -> PlanFinding {
    let (id, severity) = id_of(r);
    let at = r
        .loc
        .as_ref()
        .map(|l| match l.line {
            Some(line) => format!(" at {}:{line}", l.file),
            None => format!(" at {}", l.file),
        })
        .unwrap_or_default();
    PlanFinding::policy(id, severity, format!("{}{at}", message(r)))
}
