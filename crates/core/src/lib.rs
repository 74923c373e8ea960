//! gpuctl's pure core, as one facade over its layers (issue 38; docs/architecture.md), each a crate
//! so that Cargo forbids cycles between them:
//!
//! - `gpuctl-model`: blueprint, facts catalog, names, quantities, versions, findings and their
//!   registry, secret masking;
//! - `gpuctl-pipeline`: validate and render;
//! - `gpuctl-plan`: the live view, plans, upgrade planning, journals, the apply lock;
//! - `gpuctl-day2`: diagnostics, doctor, metrics, status, snapshots, import;
//! - `gpuctl-fleet`: fleets.
//!
//! Data flow: blueprint --load--> [`blueprint::Loaded`] --validate (profiles)-->
//! [`validate::ValidatedBlueprint`] --render--> [`render::RenderedSet`] --with a [`live::LiveView`]-->
//! [`plan::Plan`]; an upgrade goes [`upgrade::preflight`] --> [`upgrade::schedule`] --> runbook.
//!
//! The modules keep the paths they had when they were one crate (`gpuctl_core::plan::Plan`), for
//! the tests and benchmarks; the binary and the cluster crate name the layer crates they use.

pub use gpuctl_accounting as accounting;
pub use gpuctl_day2::{diagnostics, doctor, import, metrics, snapshot, status, testgen};
pub use gpuctl_fleet as fleet;
pub use gpuctl_model::{
    applyset, blueprint, finding, input, located, names, object, profiles, promql, quantity,
    redact, suggest, version,
};
pub use gpuctl_pipeline::{cel, render, validate};
pub use gpuctl_plan::{journal, live, lock, plan, upgrade};
