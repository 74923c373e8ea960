//! Removing a component: a Helm release gpuctl installed for this blueprint (recorded on the
//! release itself: `helm upgrade --install --labels gpuctl.dev/blueprint=NAME,gpuctl.dev/stack=STACK`)
//! whose stack the blueprint no longer declares is planned for `helm uninstall`. Only such a
//! release: one installed by hand, by another tool or for another blueprint carries no such
//! record and is never touched, nor is a release of a stack the blueprint still declares (with
//! `install: gitops` or `none`, something else installs it now). The uninstall is refused while
//! objects of the stack's API groups exist (a NicClusterPolicy, a ClusterQueue, a Volcano Queue
//! other than Volcano's own `root` and `default`): the plan names
//! them, and `apply --force-uninstall` goes ahead anyway. CRDs are never deleted.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Plan, PlanFinding};
use crate::live::release::OwnedRelease;
use crate::live::{LiveView, Reading};
use gpuctl_model::blueprint::InstallMode;
use gpuctl_pipeline::render::{RenderedSet, Stack};

/// A release the plan uninstalls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UninstallStep {
    /// The stack it installed.
    pub stack: Stack,
    /// Release name.
    pub release: String,
    /// Release namespace.
    pub namespace: String,
    /// Chart name of its newest revision.
    pub chart: String,
    /// Chart version of its newest revision.
    pub chart_version: String,
    /// Its newest revision.
    pub revision: u64,
    /// Its Helm status.
    pub status: String,
    /// Why gpuctl takes it for its own, and why it goes.
    pub reason: String,
    /// The API groups whose objects keep the uninstall from running.
    pub api_groups: Vec<String>,
    /// Objects of those groups found when planning (`Kind/ns/name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<String>,
}

impl UninstallStep {
    /// `HelmRelease/ns/name`.
    pub fn id(&self) -> String {
        format!("HelmRelease/{}/{}", self.namespace, self.release)
    }

    /// `helm uninstall NAME -n NS`.
    pub fn command(&self) -> String {
        format!("helm uninstall {} -n {}", self.release, self.namespace)
    }
}

/// The API groups of a stack's own kinds: objects of these need its controller (and their
/// finalizers its controller's answer), so the release is not uninstalled while one exists.
/// Group names are API identities, not versions or defaults, so they live here, not in profiles/.
pub fn api_groups(stack: Stack) -> &'static [&'static str] {
    match stack {
        Stack::GpuOperator => &["nvidia.com"],
        // NicClusterPolicy and the network CRs, and nv-ipam's pools (a subchart of it).
        Stack::NetworkOperator => &["mellanox.com", "nv-ipam.nvidia.com"],
        Stack::Kueue => &["kueue.x-k8s.io"],
        // ComputeDomains and their cliques.
        Stack::DraDriver => &["resource.nvidia.com"],
        // Every group Volcano's chart serves a CRD of (queues and pod groups, jobs and cron jobs,
        // job flows, bus commands, NUMA topologies, hypernodes, node shards, colocation configs).
        Stack::Volcano => &[
            "scheduling.volcano.sh",
            "batch.volcano.sh",
            "bus.volcano.sh",
            "flow.volcano.sh",
            "nodeinfo.volcano.sh",
            "topology.volcano.sh",
            "shard.volcano.sh",
            "config.volcano.sh",
        ],
    }
}

/// Objects of a stack's groups that the stack itself makes and keeps, which no user can delete:
/// they never block its uninstall. Volcano's controllers create the `root` and `default` queues,
/// and its admission webhook refuses to delete either (volcano-sh/volcano v1.15.1
/// pkg/webhooks/admission/queues/validate/validate_queue.go, validateQueueDeleting).
pub fn own_objects(stack: Stack) -> &'static [&'static str] {
    match stack {
        Stack::Volcano => &["Queue/root", "Queue/default"],
        _ => &[],
    }
}

/// The objects (`Kind/ns/name`) of `stack`'s groups that keep its uninstall from running: all but
/// [`own_objects`].
pub fn blocking(stack: Stack, objects: Vec<String>) -> Vec<String> {
    let own = own_objects(stack);
    objects
        .into_iter()
        .filter(|o| !own.contains(&o.as_str()))
        .collect()
}

/// The [`gpuctl_model::names::STACK_LABEL`] value of `stack` (its plan spelling: `network-operator`).
pub fn stack_label(stack: Stack) -> String {
    match serde_json::to_value(stack) {
        Ok(Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The stack a [`gpuctl_model::names::STACK_LABEL`] value names.
pub fn stack_of_label(value: &str) -> Option<Stack> {
    serde_json::from_value(Value::String(value.to_string())).ok()
}

/// The releases gpuctl installed for `set`'s blueprint whose stack the blueprint no longer
/// declares: the ones to uninstall (and whose objects the cluster crate reads).
pub fn candidates<'a>(set: &RenderedSet, owned: &'a [OwnedRelease]) -> Vec<&'a OwnedRelease> {
    owned
        .iter()
        .filter(|r| set.undeclared.contains(&r.stack) && r.stack != Stack::GpuOperator)
        .filter(|r| r.named.release.status != "uninstalled")
        .collect()
}

/// The uninstall steps of `set` against `live`, with findings: a blocked uninstall (objects of
/// its kinds exist), a release of a declared stack gpuctl installed under another name or no
/// longer installs (left alone), and a cluster whose releases could not be read.
pub fn plan_uninstalls(
    set: &RenderedSet,
    live: &LiveView,
) -> (Vec<UninstallStep>, Vec<PlanFinding>) {
    let owned = match &live.owned_releases {
        Reading::Read(o) => o,
        Reading::NotRead => return (vec![], vec![]),
        Reading::Failed(e) => {
            return (
                vec![],
                vec![PlanFinding::warning(
                    "GPU450",
                    format!(
                        "cannot read which Helm releases gpuctl installed for blueprint `{}` ({e}); the plan cannot say whether a release of a component the blueprint dropped should be uninstalled",
                        set.blueprint
                    ),
                )],
            );
        }
    };
    let mut findings = left_alone(set, owned);
    let mut steps = Vec::new();
    for r in candidates(set, owned) {
        let step = step(set, r);
        match &r.objects {
            Reading::Failed(e) => findings.push(PlanFinding::warning("GPU451", format!(
                "cannot list the objects of {} ({e}); apply checks again before it uninstalls {}",
                step.api_groups.join(", "),
                step.id()
            ))),
            _ if !step.blockers.is_empty() => {
                findings.push(PlanFinding::warning("GPU452", blocked_message(&step, &step.blockers)))
            }
            _ => {}
        }
        steps.push(step);
    }
    (steps, findings)
}

fn step(set: &RenderedSet, r: &OwnedRelease) -> UninstallStep {
    let label = format!(
        "{}={}, {}={}",
        gpuctl_model::applyset::BLUEPRINT_LABEL,
        set.blueprint,
        gpuctl_model::names::STACK_LABEL,
        stack_label(r.stack)
    );
    UninstallStep {
        stack: r.stack,
        release: r.named.name.clone(),
        namespace: r.named.namespace.clone(),
        chart: r.named.release.chart.clone(),
        chart_version: r.named.release.chart_version.clone(),
        revision: r.named.release.revision,
        status: r.named.release.status.clone(),
        reason: format!(
            "installed by gpuctl for blueprint `{}` (its Helm release records {label}), and the blueprint no longer declares {}; its CRDs stay",
            set.blueprint,
            r.stack.field()
        ),
        api_groups: api_groups(r.stack).iter().map(|g| g.to_string()).collect(),
        blockers: match &r.objects {
            Reading::Read(o) => o.clone(),
            _ => vec![],
        },
    }
}

/// Why an uninstall does not run while `objects` exist, and what to do.
pub fn blocked_message(step: &UninstallStep, objects: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut names: Vec<&str> = objects.iter().take(SHOWN).map(String::as_str).collect();
    let more = objects.len().saturating_sub(SHOWN);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    names.sort_unstable();
    format!(
        "{} ({} release) is not uninstalled while objects of its kinds exist: {}{more}. Without their controller they would stay behind, and their finalizers never be answered: delete them first (or apply a blueprint that still declares {} but not them), then apply again; or apply with --force-uninstall to uninstall anyway",
        step.id(),
        step.stack.title(),
        names.join(", "),
        step.stack.field()
    )
}

/// Releases gpuctl installed for this blueprint for a stack it still declares, but which it no
/// longer installs under that name (renamed, moved, or now `gitops`/`none`): never uninstalled,
/// but said.
fn left_alone(set: &RenderedSet, owned: &[OwnedRelease]) -> Vec<PlanFinding> {
    owned
        .iter()
        .filter(|r| !set.undeclared.contains(&r.stack) || r.stack == Stack::GpuOperator)
        .filter(|r| r.named.release.status != "uninstalled")
        .filter(|r| {
            !set.all_releases().any(|h| {
                h.stack == r.stack
                    && h.install == InstallMode::Helm
                    && h.namespace == r.named.namespace
                    && h.release == r.named.name
            })
        })
        .map(|r| {
            PlanFinding::warning("GPU453", format!(
                "Helm release {}/{} ({} chart {}) was installed by gpuctl for this blueprint, which still declares {} but does not have gpuctl install that release now: gpuctl leaves it alone (`helm uninstall {} -n {}` removes it, once nothing needs it)",
                r.named.namespace,
                r.named.name,
                r.named.release.chart,
                r.named.release.chart_version,
                r.stack.field(),
                r.named.name,
                r.named.namespace
            ))
        })
        .collect()
}

/// One helm run a plan's apply makes: `(what, HelmRelease/ns/name, install|upgrade|uninstall)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelmRun {
    /// `GPU Operator release`.
    pub what: String,
    /// `HelmRelease/ns/name`.
    pub id: String,
    /// `install`, `upgrade` (or `install or upgrade`, when the live release is unknown) or
    /// `uninstall`.
    pub verb: &'static str,
}

/// Every helm run applying `plan` makes: each `install: helm` release the plan does not find up
/// to date, then each uninstall.
pub fn helm_runs(plan: &Plan) -> Vec<HelmRun> {
    let releases = std::iter::once((&plan.helm, plan.helm_release.as_ref()))
        .chain(plan.releases.iter().map(|r| (&r.release, r.plan.as_ref())));
    let mut out: Vec<HelmRun> = releases
        .filter(|(h, _)| h.install == InstallMode::Helm)
        .filter_map(|(h, hp)| {
            let verb = match hp.map(|p| p.action) {
                Some(super::HelmAction::NoOp) => return None,
                Some(super::HelmAction::Install) => "install",
                Some(super::HelmAction::Upgrade) => "upgrade",
                None => "install or upgrade",
            };
            Some(HelmRun {
                what: format!("{} release", h.stack.title()),
                id: format!("HelmRelease/{}/{}", h.namespace, h.release),
                verb,
            })
        })
        .collect();
    out.extend(plan.uninstalls.iter().map(|u| HelmRun {
        what: format!("{} release", u.stack.title()),
        id: u.id(),
        verb: "uninstall",
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Volcano's own `root` and `default` queues never block its uninstall; every other object of
    /// its groups does, and other stacks keep every object.
    #[test]
    fn blocking_objects_leave_out_the_stacks_own() {
        let objects = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for (stack, found, want) in [
            (
                Stack::Volcano,
                &["Queue/default", "Queue/root"][..],
                &[][..],
            ),
            (
                Stack::Volcano,
                &[
                    "Job/team/train",
                    "Queue/default",
                    "Queue/root",
                    "Queue/team-a",
                ][..],
                &["Job/team/train", "Queue/team-a"][..],
            ),
            (
                Stack::Kueue,
                &["ClusterQueue/default"][..],
                &["ClusterQueue/default"][..],
            ),
            (
                Stack::NetworkOperator,
                &["Queue/root"][..],
                &["Queue/root"][..],
            ),
        ] {
            assert_eq!(blocking(stack, objects(found)), objects(want), "{stack:?}");
        }
        assert!(api_groups(Stack::Volcano).contains(&"scheduling.volcano.sh"));
        assert!(api_groups(Stack::Volcano).contains(&"batch.volcano.sh"));
    }
}
