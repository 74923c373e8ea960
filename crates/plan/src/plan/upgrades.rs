//! What `gpuctl upgrade` journals of this blueprint's pools (in the operator namespace) forbid: an
//! unfinished upgrade owns its pool's driver labels, colours and taints, so an apply would fight
//! it; a completed one moved the pool to a driver the blueprint must now declare, or an apply
//! would move every node back. Both are errors, so `apply` refuses and says what to do.

use super::PlanFinding;
use crate::journal::{Journal, JournalPhase};
use crate::live::{LiveView, Reading};
use gpuctl_model::names::journal_name as object_name;
use gpuctl_model::version::DriverVersion;
use gpuctl_pipeline::render::NodePatch;

/// Findings with the pool each is about (`None`: about every pool).
pub type PoolFindings = Vec<(Option<String>, PlanFinding)>;

/// The journals' findings for `live` (none when journals were not read: offline).
pub fn findings(
    live: &LiveView,
    blueprint: &str,
    namespace: &str,
    patches: &[NodePatch],
) -> PoolFindings {
    match &live.journals {
        Reading::NotRead => vec![],
        Reading::Failed(e) => vec![(
            None,
            PlanFinding::error(
                "GPU440",
                format!(
                    "cannot read the driver upgrade journals in namespace {namespace} ({e}); gpuctl does not apply while it cannot tell whether an upgrade is moving a pool"
                ),
            ),
        )],
        Reading::Read(journals) => journal_findings(journals, blueprint, namespace, patches),
    }
}

/// [`findings`] for journals already read.
pub fn journal_findings(
    journals: &[Journal],
    blueprint: &str,
    namespace: &str,
    patches: &[NodePatch],
) -> PoolFindings {
    let mut out = Vec::new();
    for j in journals.iter().filter(|j| j.blueprint == blueprint) {
        let journal = format!("ConfigMap {namespace}/{}", object_name(&j.pool));
        if !j.phase.is_final() {
            out.push((Some(j.pool.clone()), PlanFinding::error("GPU441", format!(
                "pool `{}` has a driver upgrade {} ({} -> {}, journal {journal}); applying now would move the labels it manages. Finish it with `gpuctl upgrade driver --resume --pool {0}`, or undo it with `gpuctl upgrade rollback --pool {0}`, then plan again",
                j.pool,
                j.phase.describe(),
                j.from_version,
                j.to_version,
            ))));
            continue;
        }
        if j.phase != JournalPhase::Completed {
            continue;
        }
        let Some(p) = patches.iter().find(|p| p.pool == j.pool) else {
            continue;
        };
        if !same_driver(&p.expected_driver, &j.to_version) {
            out.push((Some(j.pool.clone()), PlanFinding::error("GPU442", format!(
                "pool `{}` was upgraded to driver {} by `gpuctl upgrade` (journal {journal}), but the blueprint declares {}: applying it would move every node back. Make the edit the upgrade asked for ({}), then plan again",
                j.pool, j.to_version, p.expected_driver, j.blueprint_change
            ))));
        }
    }
    out
}

/// Driver versions compare as versions (`580.95.05` and `580.95.5` are one driver) when both
/// parse, else as text.
fn same_driver(a: &str, b: &str) -> bool {
    match (a.parse::<DriverVersion>(), b.parse::<DriverVersion>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}
