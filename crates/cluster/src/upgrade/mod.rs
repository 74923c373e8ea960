//! Driver upgrades against the cluster: [`execute`] runs an [`gpuctl_plan::upgrade::schedule::UpgradePlan`]
//! batch by batch, [`journal`] keeps its journal in a ConfigMap and holds the pool's Lease. The
//! model (blue-green CRs, field ownership, resumption) is explained in the core crate's `upgrade`
//! module and in `docs/upgrades.md`.

pub mod execute;
pub mod journal;

use crate::client::ClusterError;

/// Why an upgrade could not be planned or did not finish. Every variant says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The blueprint or the arguments do not allow this upgrade.
    #[error("{0}")]
    Refused(String),
    /// Pre-flight found errors; the plan lists them.
    #[error("pre-flight found {0} error(s); fix them (see the plan above) and plan again")]
    Preflight(usize),
    /// Another run holds the upgrade's Lease.
    #[error(
        "another run is moving pool `{pool}`: Lease {namespace}/{lease} is held by {holder}; wait for it, or stop it and re-run once its lease ({duration_s}s) has expired"
    )]
    Busy {
        /// Pool.
        pool: String,
        /// Lease holder identity.
        holder: String,
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        lease: String,
        /// Seconds since its last renewal.
        age_s: i64,
        /// Its duration.
        duration_s: i64,
    },
    /// This run lost its Lease (network trouble or a pause longer than the lease): it stopped
    /// before touching anything else.
    #[error(
        "lost the upgrade lease of pool `{0}` (another run may have taken over); nothing more was changed. Check `gpuctl upgrade status --pool {0}`, then `gpuctl upgrade driver --resume --pool {0}`"
    )]
    LeaseLost(String),
    /// No journal where one was expected.
    #[error("{0}")]
    NoJournal(String),
    /// The journal was changed by someone else between reads.
    #[error(
        "the upgrade journal of pool `{0}` changed under this run (another gpuctl?); nothing more was changed. Check `gpuctl upgrade status --pool {0}`"
    )]
    JournalConflict(String),
    /// The journal could not be read (written by another gpuctl version?).
    #[error("the upgrade journal {name} cannot be read: {message}")]
    JournalCorrupt {
        /// ConfigMap.
        name: String,
        /// Why.
        message: String,
    },
    /// A batch stopped: some nodes did not reach the target state. The pool is partly moved.
    #[error("{what}\n{state}\nnext: {next}")]
    Stopped {
        /// What went wrong, per node.
        what: String,
        /// Where the pool is now.
        state: String,
        /// What to do.
        next: String,
    },
    /// The run was interrupted (Ctrl-C).
    #[error(
        "interrupted; the journal records where the upgrade of pool `{0}` stopped. Continue with `gpuctl upgrade driver --resume --pool {0}`, or undo with `gpuctl upgrade rollback --pool {0}`"
    )]
    Interrupted(String),
    /// The cluster failed.
    #[error(
        "{source}\nthe journal records how far the upgrade got: `gpuctl upgrade status{pool_flag}` shows it; `gpuctl upgrade driver --resume{pool_flag}` continues once the cluster answers again"
    )]
    Cluster {
        /// The error.
        #[source]
        source: ClusterError,
        /// ` --pool P`, or empty before a pool is known.
        pool_flag: String,
    },
}

impl UpgradeError {
    /// Wraps a cluster error, naming the pool for the hint.
    pub fn cluster(pool: &str, source: ClusterError) -> UpgradeError {
        UpgradeError::Cluster {
            source,
            pool_flag: if pool.is_empty() {
                String::new()
            } else {
                format!(" --pool {pool}")
            },
        }
    }
}
