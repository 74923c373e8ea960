//! What apply and upgrades report while they run. The binary shows it (bars, lines or NDJSON);
//! the cluster crate only says what happened.

use serde_json::Value;

/// Receives progress events of an apply or an upgrade.
pub trait Reporter: Sync {
    /// A phase starts with `total` steps.
    fn phase(&self, name: &str, total: usize);
    /// One step finished with `outcome` (`created`, `updated`, ...).
    fn step(&self, what: &str, outcome: &str);
    /// A step failed.
    fn failed(&self, what: &str, error: &str);
    /// A bounded wait is in progress.
    fn waiting(&self, what: &str, elapsed_s: u64, timeout_s: u64);
    /// A free-form note.
    fn note(&self, message: &str);
    /// The run finished: a JSON summary and its one-line form.
    fn done(&self, summary: Value, line: String);
}

/// Reports nothing (tests, and callers that print their own summary).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Reporter for Silent {
    fn phase(&self, _: &str, _: usize) {}
    fn step(&self, _: &str, _: &str) {}
    fn failed(&self, _: &str, _: &str) {}
    fn waiting(&self, _: &str, _: u64, _: u64) {}
    fn note(&self, _: &str) {}
    fn done(&self, _: Value, _: String) {}
}
