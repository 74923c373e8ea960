//! Integration tests that run real programs besides gpuctl: Prometheus and promtool from Debian's
//! `prometheus` package (`#[needs_prometheus]`), headless Chromium (`#[needs_chromium]`) and
//! conftest v0.71.1 from the harness's cache (`#[needs_conftest]`; all from tests/skip/src/lib.rs).
//! Ignored locally where those are missing, run (and failing without them) in CI.
//!
//! One test binary for all of them (see `tests/offline/main.rs` for the grouping); each file here
//! is a module.

#[path = "../render_common/mod.rs"]
mod render_common;
#[path = "../support/mod.rs"]
mod support;

mod accounting_rules;
mod doctor_metrics;
mod policy_conftest;
mod prometheus_rules;
mod prometheus_tls;
mod report;
mod status_svg;
