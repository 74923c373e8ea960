//! The Helm releases' decisions (the GPU Operator's, Kueue's, the Network Operator's): the live
//! release (from Helm's storage, or a snapshot) against the rendered chart version and values.

use serde_json::Value;

use super::ReleaseStep;
use super::objects::flatten_create;
use super::{HelmAction, HelmPlan, PlanFinding, diff, redact};
use crate::live::release::LiveRelease;
use crate::live::{LiveView, Reading, Source};
use gpuctl_model::blueprint::InstallMode;
use gpuctl_pipeline::render::{HelmRelease, Stack};

/// Each other stack's release step (Kueue, the Network Operator), with its findings.
pub fn plan_releases(
    live: &LiveView,
    releases: &[HelmRelease],
) -> (Vec<ReleaseStep>, Vec<PlanFinding>) {
    let mut steps = Vec::new();
    let mut findings = Vec::new();
    for r in releases.iter().filter(|r| r.install == InstallMode::Helm) {
        let (plan, f) = plan_helm(live, r);
        findings.extend(f);
        steps.push(ReleaseStep {
            release: r.clone(),
            plan,
        });
    }
    (steps, findings)
}

/// The release step of a plan (`install: helm` only, and only when the release was read). A
/// release that could not be read is a warning: the step still runs `helm upgrade --install`,
/// which is right whatever the live state.
pub fn plan_helm(live: &LiveView, helm: &HelmRelease) -> (Option<HelmPlan>, Vec<PlanFinding>) {
    if helm.install != InstallMode::Helm {
        return (None, vec![]);
    }
    match live.release(helm) {
        // A snapshot older than the other stacks' releases (format 2) did not record them.
        Reading::NotRead
            if helm.stack != Stack::GpuOperator
                && matches!(live.source, Source::Snapshot { .. }) =>
        {
            (
                None,
                vec![PlanFinding::warning(
                    "GPU410",
                    format!(
                        "the snapshot does not record the {} Helm release {}/{} (captured by an older gpuctl, or before the blueprint installed it with helm): the plan cannot say whether `helm upgrade --install` changes it; capture the snapshot again",
                        helm.stack.title(),
                        helm.namespace,
                        helm.release
                    ),
                )],
            )
        }
        Reading::NotRead => (None, vec![]),
        Reading::Failed(e) => (
            None,
            vec![PlanFinding::warning(
                "GPU411",
                format!(
                    "cannot read the live Helm release {}/{} ({e}); the plan cannot say whether `helm upgrade --install` changes it",
                    helm.namespace, helm.release
                ),
            )],
        ),
        Reading::Read(current) => helm_plan(helm, current.as_ref()),
    }
}

/// Whether the GPU Operator release's values deploy the GPUCluster (DRA) instead of the
/// ClusterPolicy.
fn deploys_gpu_cluster(values: &Value) -> bool {
    values["gpuCluster"]["deployCR"] == Value::Bool(true)
}

/// An error when an installed GPU Operator release would switch between its ClusterPolicy and its
/// GPUCluster: NVIDIA supports no in-place migration either way (a new cluster is the way), and
/// the upgrade would remove the device plugin from every node that runs GPU pods, or the DRA
/// driver from every node with claims.
fn stack_switch(helm: &HelmRelease, cur: &LiveRelease) -> Option<PlanFinding> {
    if helm.stack != Stack::GpuOperator {
        return None;
    }
    let (from, to) = (
        deploys_gpu_cluster(&cur.values),
        deploys_gpu_cluster(&helm.values),
    );
    let name = |dra: bool| {
        if dra {
            "GPUCluster (DRA)"
        } else {
            "ClusterPolicy (device plugin)"
        }
    };
    (from != to).then(|| {
        PlanFinding::error("GPU412", format!(
            "the installed GPU Operator release {}/{} (revision {}) deploys the {}, the blueprint the {}: NVIDIA supports no in-place migration between them, and the upgrade would take the GPU stack away from every running GPU workload; build a new cluster from this blueprint and move workloads, or keep `spec.dra.driver` as the cluster has it (docs/dra.md, Migration)",
            helm.namespace,
            helm.release,
            cur.revision,
            name(from),
            name(to)
        ))
    })
}

/// The DRA driver chart's release (standalone path) between driver releases: a downgrade is an
/// error (the kubelet plugin's checkpoint cannot be read by an older release); the first upgrade
/// across the chart's rename (v0.4.0) is an error unless the values set the documented
/// `nameOverride`, and a warning with it (its CRDs must be applied by hand first).
fn dra_driver_upgrade(helm: &HelmRelease, cur: &LiveRelease) -> Option<PlanFinding> {
    if helm.stack != Stack::DraDriver {
        return None;
    }
    let facts = gpuctl_model::profiles::Catalog::embedded().dra();
    let (from, to) = (cur.chart_version.as_str(), helm.version.as_str());
    let id = format!("{}/{}", helm.namespace, helm.release);
    match facts.driver.upgrade(from, to)? {
        gpuctl_model::profiles::dra::Upgrade::Backward => Some(PlanFinding::error(
            "GPU413",
            format!(
                "the installed NVIDIA DRA driver release {id} is {from}, the blueprint's {to} is older: the driver supports no downgrade (its kubelet plugin's checkpoint cannot be read by an older release); keep `spec.dra.driver.version` at {from} or later"
            ),
        )),
        gpuctl_model::profiles::dra::Upgrade::Same
        | gpuctl_model::profiles::dra::Upgrade::Forward
            if !facts.driver.crosses(from, to, &facts.standalone.renamed_in) =>
        {
            None
        }
        _ => {
            let s = &facts.standalone;
            let set = helm.values[s.values.name_override.as_str()].as_str()
                == Some(s.name_override.as_str());
            let what = format!(
                "the NVIDIA DRA driver release {id} moves from {from} to {to}, across {} where the chart was renamed (`{}`, OCI registry)",
                s.renamed_in,
                helm.chart_name()
            );
            Some(if set {
                PlanFinding::warning(
                    "GPU414",
                    format!(
                        "{what}: apply the CRDs of {to} by hand before this apply (runbooks/dra-migration.md, Upgrading the DRA driver)"
                    ),
                )
            } else {
                PlanFinding::error(
                    "GPU414",
                    format!(
                        "{what}: the first upgrade needs `nameOverride: {}` (set `spec.dra.driver.values.nameOverride`) and the new CRDs applied by hand first (runbooks/dra-migration.md)",
                        s.name_override
                    ),
                )
            })
        }
    }
}

/// [`plan_helm`] once the live release is known (`None`: not installed).
pub fn helm_plan(
    helm: &HelmRelease,
    current: Option<&LiveRelease>,
) -> (Option<HelmPlan>, Vec<PlanFinding>) {
    let mut findings = Vec::new();
    let Some(cur) = current else {
        let mut changes = flatten_create(diff::diff(&Value::Null, &helm.values));
        redact::redact_changes(&mut changes, &Value::Null, &helm.values);
        return (
            Some(HelmPlan {
                action: HelmAction::Install,
                revision: None,
                status: None,
                chart_version_before: None,
                changes,
            }),
            findings,
        );
    };
    let chart = helm.chart_name();
    if !cur.chart.is_empty() && cur.chart != chart {
        findings.push(PlanFinding::warning("GPU415", format!(
            "Helm release {}/{} is chart `{}`, the blueprint installs `{chart}` under that name: the upgrade replaces one chart with the other",
            helm.namespace, helm.release, cur.chart
        )));
    }
    if let Some(f) = stack_switch(helm, cur) {
        findings.push(f);
    }
    findings.extend(dra_driver_upgrade(helm, cur));
    let version_changes =
        cur.chart_version.trim_start_matches('v') != helm.version.trim_start_matches('v');
    // Diffed raw, masked after: two different passwords must still make an upgrade.
    let mut changes = diff::diff(&cur.values, &helm.values);
    redact::redact_changes(&mut changes, &cur.values, &helm.values);
    let deployed = cur.status == "deployed";
    if !deployed {
        findings.push(PlanFinding::warning("GPU416", format!(
            "Helm release {}/{} revision {} is `{}`, not `deployed`: apply runs `helm upgrade --install` again; if a helm operation is still running, wait for it (`helm history {} -n {}`)",
            helm.namespace, helm.release, cur.revision, cur.status, helm.release, helm.namespace
        )));
    }
    let action = if version_changes || !changes.is_empty() || !deployed {
        HelmAction::Upgrade
    } else {
        HelmAction::NoOp
    };
    (
        Some(HelmPlan {
            action,
            revision: Some(cur.revision),
            status: Some(cur.status.clone()),
            chart_version_before: version_changes.then(|| cur.chart_version.clone()),
            changes,
        }),
        findings,
    )
}
