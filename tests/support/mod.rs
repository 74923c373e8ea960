//! Shared helpers for the integration test binaries (each group's `main.rs` declares it once;
//! its modules `use crate::support;`): cluster tests use `support::cluster`, those that plan and
//! apply `support::fixture`, the operator's stand-in is `support::operator_driver`, NVIDIA's DRA
//! driver's is `support::dra`, the real Prometheus `support::prometheus`.
pub mod cluster;
pub mod doctor;
pub mod dra;
pub mod fixture;
pub mod fresh;
pub mod operator_driver;
pub mod prometheus;
pub mod releases;
