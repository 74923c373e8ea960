//! The `gpuctl` binary's library: command-line arguments ([`args`]), their resolution into plain
//! settings ([`settings`]), one module per command ([`commands`]) and every printer ([`output`]).
//! The work is done by the `gpuctl-core` crate (pure: blueprint, catalog, validate, render, plan
//! decisions, upgrade planning) and the `gpuctl-cluster` crate (the only one that talks to an API
//! server); `docs/architecture.md` draws how they fit.

pub mod args;
pub mod commands;
pub mod exit;
pub mod memory;
pub mod output;
pub mod panic_report;
pub mod settings;

pub use commands::{has_errors, run, validate_file};
