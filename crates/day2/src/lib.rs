//! gpuctl's Day-2: what the cluster crate reads for diagnosis ([`diagnostics`]), the doctor's and
//! metric findings, the status picture's numbers, snapshot files and import (the blueprint of a
//! running cluster).
//!
//! Pure; depends on `gpuctl-model`, `gpuctl-pipeline` and `gpuctl-plan`.

pub mod diagnostics;
pub mod doctor;
pub mod import;
pub mod metrics;
pub mod snapshot;
pub mod status;
#[doc(hidden)]
pub mod testgen;
