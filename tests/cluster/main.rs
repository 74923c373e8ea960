//! Integration tests against the real test cluster (kube-apiserver + etcd, kube-controller-manager,
//! Kueue and Volcano's admission from `tools/kube-harness`; docs/testing.md). Each test is marked
//! `#[needs_test_cluster]` (tests/skip/src/lib.rs), so without a configured cluster a local
//! `cargo test` lists it as ignored; in CI a missing cluster fails it.
//!
//! One test binary for all of them (see `tests/offline/main.rs` for the grouping); each file here
//! is a module.

#[path = "../render_common/mod.rs"]
mod render_common;
#[path = "../support/mod.rs"]
mod support;

mod accounting_cluster;
mod apply_helm;
mod cli_cluster;
mod cluster_harness;
mod composition;
mod doctor_cluster;
mod doctor_scheduling;
mod doctor_stack;
mod dra_apply;
mod dra_extended;
mod dra_harness;
mod dra_kueue;
mod dra_kueue_extended;
mod dra_migration;
mod dra_operator;
mod dra_shapes;
mod fleet_apply;
mod fleet_cluster;
mod flux_apply;
mod gitops_crds;
mod import_cluster;
mod kueue_release;
mod lists_cluster;
mod multikueue;
mod network_cluster;
mod plan_apply;
mod provisioning;
mod provisioning_day2;
mod releases_cluster;
mod status_cluster;
mod upgrade;
mod upgrade_dra;
mod upgrade_karpenter;
mod volcano_release;
