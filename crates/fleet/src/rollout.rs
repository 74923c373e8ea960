//! `fleet apply`'s decisions, without a cluster: each cluster's revision (a hash of what its
//! effective blueprint renders), which wave is next, whether a cluster passes the `converged` and
//! `doctor` gates, and which gate of which cluster of an earlier wave holds a wave back. Everything
//! they read comes from the clusters (the stamp on each one's ApplySet parent, its plan, its doctor
//! findings as plain data), so a CI run keeps no state (docs/fleet.md "Apply in waves").

use jiff::Timestamp;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::model::{Fleet, Gate};
use gpuctl_model::located::Severity;
use gpuctl_pipeline::render::RenderedSet;
use gpuctl_plan::plan::{PlanFinding, Summary};

pub use gpuctl_model::names::{
    FLEET_APPLIED_AT_ANNOTATION as APPLIED_AT_ANNOTATION, FLEET_FIELD_MANAGER as STAMP_MANAGER,
    FLEET_REVISION_ANNOTATION as REVISION_ANNOTATION,
};

/// The revision of a cluster: `sha256:` and the hex digest of what gpuctl applies there (objects,
/// node patches, Helm releases and the stacks left undeclared; the runbooks are not applied and do
/// not count). Deterministic: the same effective blueprint gives the same revision on any machine,
/// and a change of the base changes the revision of exactly the clusters whose output it changes.
pub fn revision(set: &RenderedSet) -> String {
    #[derive(Serialize)]
    struct Applied<'a> {
        blueprint: &'a str,
        objects: &'a [gpuctl_pipeline::render::RenderedObject],
        node_patches: &'a [gpuctl_pipeline::render::NodePatch],
        helm: &'a gpuctl_pipeline::render::HelmRelease,
        releases: &'a [gpuctl_pipeline::render::HelmRelease],
        undeclared: &'a [gpuctl_pipeline::render::Stack],
    }
    let applied = Applied {
        blueprint: &set.blueprint,
        objects: &set.objects,
        node_patches: &set.node_patches,
        helm: &set.helm,
        releases: &set.releases,
        undeclared: &set.undeclared,
    };
    let mut hasher = Sha256::new();
    // Serializing plain data to a Vec cannot fail; an empty hash input would still be stable.
    hasher.update(serde_json::to_vec(&applied).unwrap_or_default());
    let digest = hasher.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The stamp a cluster carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// Its revision annotation.
    pub revision: String,
    /// Its applied-at annotation, when it parses.
    pub applied_at: Option<Timestamp>,
}

/// The outcome of a check that needs the cluster (its plan, its doctor report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Not run (the wave does not ask for it).
    NotRun,
    /// Passed.
    Passed,
    /// Failed: what is wrong, one line.
    Failed(String),
}

/// What was read from one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Cluster name.
    pub name: String,
    /// Its kubeconfig context.
    pub context: Option<String>,
    /// Its blueprint, as a command line names it.
    pub blueprint: String,
    /// The revision the fleet renders for it now.
    pub want: String,
    /// Its stamp (`Ok(None)`: none), or why it could not be read.
    pub stamp: Result<Option<Stamp>, String>,
    /// Its plan is empty.
    pub converged: Check,
    /// `gpuctl doctor` reports no error.
    pub doctor: Check,
}

impl Observed {
    /// Whether the cluster carries the revision the fleet renders for it.
    pub fn at_revision(&self) -> bool {
        matches!(&self.stamp, Ok(Some(s)) if s.revision == self.want)
    }
}

/// What holds a wave back: one gate of one cluster of an earlier wave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The earlier wave.
    pub wave: String,
    /// Its cluster.
    pub cluster: String,
    /// `revision`, `bake`, `converged` or `doctor`.
    pub gate: &'static str,
    /// What is wrong.
    pub why: String,
    /// What to do.
    pub next: String,
}

/// The waves of a fleet as [`super::members`] gives them, with each wave's settings.
pub struct Waves<'a> {
    fleet: &'a Fleet,
    /// `(wave name, its clusters)` in apply order.
    pub members: Vec<(String, Vec<String>)>,
}

impl<'a> Waves<'a> {
    /// The waves of `fleet` (one wave `all` when it declares none).
    pub fn of(fleet: &'a Fleet) -> Waves<'a> {
        Waves {
            fleet,
            members: super::members(fleet),
        }
    }

    /// The index of the wave named `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.members.iter().position(|(w, _)| w == name)
    }

    /// The bake time of wave `i` in seconds (0 without one, or when it does not parse: GPU189
    /// refuses such a fleet before anything is applied).
    pub fn bake_seconds(&self, i: usize) -> u64 {
        self.fleet
            .spec
            .waves
            .get(i)
            .and_then(|w| w.bake.as_deref())
            .and_then(super::duration_seconds)
            .unwrap_or(0)
    }

    /// How many clusters of wave `i` are applied at once: its `maxParallel` (at least 1; 1
    /// without one).
    pub fn max_parallel(&self, i: usize) -> usize {
        self.fleet
            .spec
            .waves
            .get(i)
            .and_then(|w| w.max_parallel)
            .map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX).max(1))
    }

    /// The gates wave `i` asks of the clusters of earlier waves: its `gates`, or both when it
    /// lists none. The revision and the bake time are always required.
    pub fn gates(&self, i: usize) -> Vec<Gate> {
        let listed = self
            .fleet
            .spec
            .waves
            .get(i)
            .map(|w| w.gates.clone())
            .unwrap_or_default();
        if listed.is_empty() {
            vec![Gate::Converged, Gate::Doctor]
        } else {
            listed
        }
    }

    /// The first wave with a cluster that does not carry its revision (`None`: every cluster
    /// does). A cluster missing from `observed` counts as not at its revision.
    pub fn next(&self, observed: &[Observed]) -> Option<usize> {
        self.members.iter().position(|(_, clusters)| {
            clusters
                .iter()
                .any(|c| !observed.iter().any(|o| &o.name == c && o.at_revision()))
        })
    }
}

/// Every gate that holds wave `target` back, in wave and cluster order: for each cluster of each
/// earlier wave, its revision (it carries the one the fleet renders for it), its wave's bake time
/// (elapsed since the revision was applied, at `now`), and the gates `target` asks for (an empty
/// plan, no doctor error). `fleet_file` is how the hints name the fleet file. Empty: the wave
/// may start.
pub fn blocks(
    waves: &Waves<'_>,
    target: usize,
    observed: &[Observed],
    now: Timestamp,
    fleet_file: &str,
) -> Vec<Block> {
    let gates = waves.gates(target);
    let mut out = Vec::new();
    for (i, (wave, clusters)) in waves.members.iter().enumerate().take(target) {
        let again = format!("`gpuctl fleet apply {fleet_file} --wave {wave}`");
        let bake = waves.bake_seconds(i);
        for name in clusters {
            let mut block = |gate: &'static str, why: String, next: String| {
                out.push(Block {
                    wave: wave.clone(),
                    cluster: name.clone(),
                    gate,
                    why,
                    next,
                });
            };
            let Some(o) = observed.iter().find(|o| &o.name == name) else {
                block("revision", "not read".into(), again.clone());
                continue;
            };
            match &o.stamp {
                Err(e) => block(
                    "revision",
                    format!("its stamp cannot be read: {e}"),
                    format!("check the context `{}`", context(o)),
                ),
                Ok(None) => block(
                    "revision",
                    "carries no fleet revision (not applied by `gpuctl fleet apply` yet, or a run stopped before it finished)".into(),
                    again.clone(),
                ),
                Ok(Some(s)) if s.revision != o.want => block(
                    "revision",
                    format!(
                        "carries revision {}, the fleet renders {}",
                        short(&s.revision),
                        short(&o.want)
                    ),
                    again.clone(),
                ),
                Ok(Some(s)) => {
                    if let Some(why) = baking(s, bake, now) {
                        block("bake", why.0, why.1);
                    }
                }
            }
            let doctor = format!(
                "`gpuctl doctor {}{}` says what is wrong; fix it, then run this again",
                o.blueprint,
                o.context
                    .as_deref()
                    .map(|c| format!(" --context {c}"))
                    .unwrap_or_default()
            );
            for (gate, check, next) in [
                (
                    Gate::Converged,
                    &o.converged,
                    format!("`gpuctl fleet plan {fleet_file}` shows it; {again} applies it"),
                ),
                (Gate::Doctor, &o.doctor, doctor),
            ] {
                if !gates.contains(&gate) {
                    continue;
                }
                let gate_name = match gate {
                    Gate::Converged => "converged",
                    Gate::Doctor => "doctor",
                };
                match check {
                    Check::Passed => {}
                    Check::NotRun => block(gate_name, "not checked".into(), next),
                    Check::Failed(why) => block(gate_name, why.clone(), next),
                }
            }
        }
    }
    out
}

/// The `converged` gate of one cluster of an earlier wave, from its plan (made as `gpuctl fleet
/// plan` makes it): its `findings` and its `summary`. It passes when the plan has no error finding
/// and nothing to change; otherwise it says what the plan holds.
pub fn converged_check(findings: &[PlanFinding], summary: &Summary) -> Check {
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let s = summary;
    if errors > 0 {
        Check::Failed(format!("its plan has {errors} error finding(s)"))
    } else if s.has_changes() {
        Check::Failed(format!(
            "its plan is not empty: {} to create, {} to update, {} to delete, {} node(s), {} release(s), {} conflict(s)",
            s.create + s.adopt,
            s.update,
            s.delete + s.uninstall,
            s.nodes,
            s.helm,
            s.conflict
        ))
    } else {
        Check::Passed
    }
}

/// The `doctor` gate of one cluster of an earlier wave, from the findings `gpuctl doctor` reports
/// on it, each as `(severity, id, title)`. It passes without an error finding; otherwise it names
/// the first three errors (and counts the rest).
pub fn doctor_check<'a>(findings: impl IntoIterator<Item = (Severity, &'a str, &'a str)>) -> Check {
    let errors: Vec<String> = findings
        .into_iter()
        .filter(|(severity, _, _)| *severity == Severity::Error)
        .map(|(_, id, title)| format!("{id} {title}"))
        .collect();
    if errors.is_empty() {
        return Check::Passed;
    }
    let more = if errors.len() > 3 {
        format!("; {} more", errors.len() - 3)
    } else {
        String::new()
    };
    Check::Failed(format!(
        "doctor reports {} error(s): {}{more}",
        errors.len(),
        errors
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

/// Why a cluster still bakes and what to do, or `None` once `bake` seconds have passed since its
/// stamp's applied-at time.
fn baking(s: &Stamp, bake: u64, now: Timestamp) -> Option<(String, String)> {
    if bake == 0 {
        return None;
    }
    let Some(at) = s.applied_at else {
        return Some((
            format!(
                "its applied-at time is missing or unreadable, so its bake time of {} cannot be measured",
                human(bake)
            ),
            "apply its wave again (that writes a new time)".into(),
        ));
    };
    // A stamp ahead of this machine's clock (written by one whose clock runs fast) counts as
    // applied now: the wait is never longer than the bake time itself.
    let elapsed = now.as_second().saturating_sub(at.as_second()).max(0);
    let left = i64::try_from(bake)
        .unwrap_or(i64::MAX)
        .saturating_sub(elapsed);
    if left <= 0 {
        return None;
    }
    let until = Timestamp::from_second(
        at.as_second()
            .saturating_add(i64::try_from(bake).unwrap_or(0)),
    )
    .map_or_else(|_| String::new(), |t| format!(" (until {t})"));
    Some((
        format!(
            "applied at {at}, bakes {}: {} left",
            human(bake),
            human(left.unsigned_abs())
        ),
        format!("wait {} for bake{until}", human(left.unsigned_abs())),
    ))
}

fn context(o: &Observed) -> &str {
    o.context.as_deref().unwrap_or("(none)")
}

/// The first 12 hex digits of a revision, for messages.
pub fn short(revision: &str) -> &str {
    let end = revision
        .strip_prefix("sha256:")
        .map_or(revision.len(), |_| "sha256:".len() + 12)
        .min(revision.len());
    revision.get(..end).unwrap_or(revision)
}

/// `9m`, `1h30m`, `45s`: a duration for people, rounded up to the minute above one minute.
pub fn human(seconds: u64) -> String {
    if seconds < 60 {
        return format!("{seconds}s");
    }
    let minutes = seconds.div_ceil(60);
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
