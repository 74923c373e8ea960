//! Integration tests that need nothing outside the repository: the built `gpuctl` binary, the
//! example blueprints, golden files, the facts catalog and the docs.
//!
//! The integration tests are grouped into a few test binaries by what they need (this one; the
//! test cluster in `tests/cluster/`; Prometheus and a browser in `tests/external/`; the hostile
//! corpus alone in `tests/hostile_corpus.rs`, whose counting allocator and panic hook are
//! process-wide), so kube, tokio and the library are linked a few times instead of once per file.
//! Each file here is a module; `offline::architecture::` checks that every file is declared.

#[path = "../render_common/mod.rs"]
mod render_common;
/// The shared helpers this binary needs (the rest of `tests/support/` talks to a cluster).
#[path = "../support"]
mod support {
    pub mod fleet;
    pub mod forge;
    pub mod gpuctl;
}

mod architecture;
mod ci_forge;
mod cli;
mod day2_golden;
mod doctor_example;
mod fleet;
mod fleet_gitops;
mod fleet_plan;
mod hostile_blueprints;
mod hostile_io;
mod plan_secrets;
mod plan_snapshot;
mod policy;
mod provisioning;
mod registry_examples;
mod render_cli;
mod render_dependencies;
mod render_examples;
mod render_network;
mod render_schemas;
mod upgrade_karpenter;
mod upgrade_runbook;
mod validate_examples;
