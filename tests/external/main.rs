//! Integration tests that run real programs besides gpuctl: Prometheus and promtool from Debian's
//! `prometheus` package (`#[needs_prometheus]`) and headless Chromium (`#[needs_chromium]`; both
//! from tests/skip/src/lib.rs). Ignored locally where those are missing, run
//! (and failing without them) in CI.
//!
//! One test binary for all of them (see `tests/offline/main.rs` for the grouping); each file here
//! is a module.

#[path = "../render_common/mod.rs"]
mod render_common;
#[path = "../support/mod.rs"]
mod support;

mod accounting_rules;
mod doctor_metrics;
mod prometheus_rules;
mod prometheus_tls;
mod report;
mod status_svg;
