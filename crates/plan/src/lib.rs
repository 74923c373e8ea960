//! gpuctl's Day-1 decisions: the live view the cluster crate fills ([`live::LiveView`]), plans
//! ([`plan::Plan`]: rendered set + live view --> actions, findings, stale checks), upgrade planning
//! ([`upgrade::preflight`] --> [`upgrade::schedule`] --> runbook), the upgrade journal and the
//! apply lock's Lease.
//!
//! Pure; depends on `gpuctl-model` and `gpuctl-pipeline`.

pub mod journal;
pub mod live;
pub mod lock;
pub mod plan;
pub mod upgrade;
