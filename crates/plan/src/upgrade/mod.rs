//! Driver upgrades: a pool's NVIDIA driver moved blue-green, batch by batch, from the NVIDIADriver
//! CR that owns its nodes today (blue) to a CR carrying the target version (green).
//!
//! The stages follow the rest of gpuctl: [`preflight`] checks the target against the catalog (by
//! running validation on a copy of the blueprint with the pool's driver changed); the cluster
//! crate reads what the cluster has into a [`crate::live::LiveView`] (nodes, GPU pods,
//! PodDisruptionBudgets, driver CRs); [`schedule`] turns both into an [`schedule::UpgradePlan`]
//! without any IO; [`runbook`] writes it for humans (Markdown and an SVG timeline); the cluster
//! crate's `upgrade` module runs it with a [`journal::Journal`] kept in a ConfigMap and a Lease, so a
//! crash or Ctrl-C resumes exactly where it stopped and `status` / `rollback` work from any
//! machine; [`verdict`] says whether a moved node is done. `docs/upgrades.md` explains the model
//! and its limits.
//!
//! Field ownership (so `gpuctl apply` and an upgrade never fight): the upgrade writes with field
//! manager [`FIELD_MANAGER`] (`gpuctl-upgrade`). It alone declares the colour label (server-side
//! apply). It takes over `gpuctl.dev/driver` on the nodes it moves (server-side apply, forced), which
//! `gpuctl apply` owns otherwise: once the blueprint names the new driver, apply writes the same
//! value and the two managers share the field. Cordons, the steering taint and the restore of
//! recorded labels are plain patches (no ownership claims on keys apply declares).

pub mod device_taints;
pub mod preflight;
mod record;
pub mod runbook;
pub mod schedule;
pub mod verdict;

use std::time::Duration;

pub use crate::journal;
pub use gpuctl_model::names::{
    DRAIN_SKIP_LABEL, DRIVER_OWNER_LABEL, DRIVER_VERSION_LABEL, KUEUE_QUEUE_LABEL,
    MIG_CAPABLE_LABEL, MIG_CONFIG_STATE_LABEL, PENDING_TAINT_EFFECT, PENDING_TAINT_KEY,
    PENDING_TAINT_VALUE, UPGRADE_DONE, UPGRADE_FAILED, UPGRADE_POOL_LABEL, UPGRADE_STATE_LABEL,
    VALIDATOR_DEPLOY_LABEL, VALIDATOR_SELECTOR,
};

pub use gpuctl_model::names::UPGRADE_FIELD_MANAGER as FIELD_MANAGER;
/// Colour values used when a pool's nodes carry no colour yet.
pub const BLUE: &str = "blue";
/// See [`BLUE`].
pub const GREEN: &str = "green";

/// How long things take and how often state is polled; planning estimates included.
#[derive(Debug, Clone)]
pub struct Timing {
    /// Poll interval of every wait.
    pub poll: Duration,
    /// Longest wait for a moved node to validate on the new driver.
    pub validate_timeout: Duration,
    /// Lease duration; another run may take over this long after the last renewal.
    pub lease_duration: Duration,
    /// Planning estimate of one node's driver swap (pod restart, build or download, validation).
    pub node_upgrade_estimate: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            poll: Duration::from_secs(2),
            validate_timeout: Duration::from_secs(30 * 60),
            lease_duration: Duration::from_secs(30),
            node_upgrade_estimate: Duration::from_secs(10 * 60),
        }
    }
}

/// `1h 30m`, `5m`, `45s`: a short human duration (whole seconds).
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut parts = Vec::new();
    if h > 0 {
        parts.push(format!("{h}h"));
    }
    if m > 0 {
        parts.push(format!("{m}m"));
    }
    if sec > 0 || parts.is_empty() {
        if s == 0 && d.as_millis() > 0 {
            return format!("{}ms", d.as_millis());
        }
        parts.push(format!("{sec}s"));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_a_person_writes_them() {
        assert_eq!(human_duration(Duration::from_secs(5400)), "1h 30m");
        assert_eq!(human_duration(Duration::from_secs(300)), "5m");
        assert_eq!(human_duration(Duration::from_secs(45)), "45s");
        assert_eq!(human_duration(Duration::from_millis(100)), "100ms");
        assert_eq!(human_duration(Duration::ZERO), "0s");
    }
}
