//! Shared helpers for the integration test binaries (each group's `main.rs` declares it once;
//! its modules `use crate::support;`): every run of the gpuctl binary goes through
//! `support::gpuctl`, fleets in a temporary directory are built by `support::fleet`; cluster tests
//! use `support::cluster`, those that plan and apply `support::fixture`, the operator's stand-in is
//! `support::operator_driver`, MIG Manager's `support::mig_manager`, NVIDIA's DRA driver's is
//! `support::dra`, the real Prometheus `support::prometheus`. The offline binary declares only
//! `gpuctl` and `fleet` (it needs no cluster).
pub mod cluster;
pub mod doctor;
pub mod dra;
pub mod fixture;
pub mod fleet;
pub mod fresh;
pub mod gpuctl;
pub mod mig_manager;
pub mod operator_driver;
pub mod prometheus;
pub mod releases;
