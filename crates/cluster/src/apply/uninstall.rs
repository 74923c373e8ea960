//! Apply's uninstalls: `helm uninstall` of a release gpuctl installed for a component the
//! blueprint dropped ([`gpuctl_plan::plan::uninstall`]), refused while objects of the
//! component's API groups exist unless `--force-uninstall`. CRDs are never deleted: helm keeps the
//! CRDs a chart ships in `crds/` by design, and a CRD the chart templates (which helm would
//! delete with the release) is marked `helm.sh/resource-policy: keep` in the release's stored
//! manifest first (where helm looks when it uninstalls), so helm leaves it.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

use gpuctl_plan::live::release::{self, RESOURCE_POLICY};
use gpuctl_plan::plan::uninstall::{UninstallStep, blocked_message};
use gpuctl_plan::plan::{ActionKind, FIELD_MANAGER, Plan};

use super::{ApplyError, ApplyOptions, HelmCtx, HelmFailure};
use crate::client::{ClusterError, Kube, classify};
use crate::wait::{Look, TimedOut, Wait};

/// Before anything changes (under the lock, after the stale check): each uninstall of the plan
/// whose component still has objects is refused, unless `--force-uninstall` (or `--no-helm`,
/// which runs no uninstall); a release that moved since the plan makes the plan stale.
pub(super) async fn refuse_blocked(
    k: &Kube,
    plan: &Plan,
    opts: &ApplyOptions,
) -> Result<(), ApplyError> {
    if !opts.run_helm {
        return Ok(());
    }
    let mut moved = Vec::new();
    let mut blocked = Vec::new();
    for step in &plan.uninstalls {
        match crate::release::read_release(k, &step.namespace, &step.release).await? {
            Some(r) if r.revision != step.revision => moved.push(format!(
                "{}: revision {} when planned, {} now",
                step.id(),
                step.revision,
                r.revision
            )),
            _ => {}
        }
        if opts.force_uninstall {
            continue;
        }
        let objects = gpuctl_plan::plan::uninstall::blocking(
            step.stack,
            crate::release::objects_in_groups(k, &step.api_groups).await?,
        );
        if !objects.is_empty() {
            blocked.push(blocked_message(step, &objects));
        }
    }
    if !moved.is_empty() {
        return Err(ApplyError::Stale(moved));
    }
    if blocked.is_empty() {
        return Ok(());
    }
    Err(ApplyError::UninstallBlocked(format!(
        "nothing was applied: {}",
        blocked.join("\n")
    )))
}

/// Uninstalls one release: checks its objects again (the prune just deleted those that were
/// gpuctl's; with `--force-uninstall` it waits, within `--wait-timeout`, for those to be gone and
/// goes ahead whatever else is left, naming it), keeps its templated CRDs, then runs
/// `helm uninstall`, awaited like every helm run.
pub(super) async fn uninstall(
    ctx: &HelmCtx<'_>,
    plan: &Plan,
    step: &UninstallStep,
    applied: usize,
) -> Result<String, ApplyError> {
    let (k, opts, progress) = (ctx.k, ctx.opts, ctx.progress);
    let what = format!("{} release", step.stack.title());
    let Some(helm) = ctx.helm else {
        let msg = format!(
            "--no-helm: uninstall the {what} yourself once nothing needs it: `{}`",
            step.command()
        );
        progress.note(&msg);
        return Ok(msg);
    };
    match crate::release::read_release(k, &step.namespace, &step.release).await? {
        Some(r) if r.status != "uninstalled" => {}
        _ => {
            let msg = format!("{} is already uninstalled", step.id());
            progress.note(&msg);
            return Ok(msg);
        }
    }
    let left = remaining_objects(k, plan, step, opts).await?;
    if !left.is_empty() && !opts.force_uninstall {
        return Err(ApplyError::UninstallBlocked(format!(
            "{}; everything else of the plan was applied",
            blocked_message(step, &left)
        )));
    }
    if !left.is_empty() {
        progress.note(&format!(
            "--force-uninstall: uninstalling {} while these objects of its kinds remain (without their controller): {}",
            step.id(),
            left.join(", ")
        ));
    }
    let kept = keep_crds(k, &step.namespace, &step.release).await?;
    if !kept.is_empty() {
        progress.note(&format!(
            "{}: {RESOURCE_POLICY}: keep set on CRD(s) {} in the release's stored manifest (helm would delete CRDs a chart templates with the release; gpuctl never deletes CRDs)",
            step.id(),
            kept.join(", ")
        ));
    }
    let mut args: Vec<std::ffi::OsString> = vec![
        "uninstall".into(),
        step.release.clone().into(),
        "--namespace".into(),
        step.namespace.clone().into(),
    ];
    args.extend(crate::helm::cluster_args(k));
    progress.note(&format!(
        "running helm uninstall for the {what} {}/{} (at most {}s)",
        step.namespace,
        step.release,
        opts.wait_timeout.as_secs()
    ));
    let command = step.command();
    match crate::helm::run(helm, &args, opts.wait_timeout).await {
        crate::helm::Outcome::Done(_) => {
            let msg = format!(
                "helm release {}/{} ({} {}) uninstalled; its CRDs stay",
                step.namespace, step.release, step.chart, step.chart_version
            );
            progress.note(&msg);
            Ok(msg)
        }
        other => Err(HelmFailure {
            what: &what,
            namespace: &step.namespace,
            release: &step.release,
            verb: "uninstall",
            phase: "uninstall",
            command: &command,
            applied,
            wait_timeout: opts.wait_timeout,
        }
        .error(other)),
    }
}

/// The objects of the step's API groups still there. Those this apply pruned may still be
/// finishing (their controller answers their finalizers): with `--force-uninstall` they are
/// waited for, within `--wait-timeout`, so the controller is not removed under them.
async fn remaining_objects(
    k: &Kube,
    plan: &Plan,
    step: &UninstallStep,
    opts: &ApplyOptions,
) -> Result<Vec<String>, ApplyError> {
    let pruned: BTreeSet<String> = plan
        .actions
        .iter()
        .filter(|a| a.action == ActionKind::Delete)
        .map(|a| a.id())
        .collect();
    let pruned = &pruned;
    // Past `--wait-timeout` the objects still there are the answer, as when nothing is waited for.
    let left = Wait::new(opts.wait_timeout, opts.poll)
        .until(
            &mut (),
            |_, _| {
                Box::pin(async move {
                    let left = gpuctl_plan::plan::uninstall::blocking(
                        step.stack,
                        crate::release::objects_in_groups(k, &step.api_groups).await?,
                    );
                    let finishing = left.iter().any(|o| pruned.contains(o));
                    Ok::<_, ApplyError>(if !opts.force_uninstall || !finishing {
                        Look::Done(left)
                    } else {
                        Look::Pending(left)
                    })
                })
            },
            |_, _| {},
        )
        .await?;
    Ok(left.unwrap_or_else(|TimedOut(left)| left))
}

/// Makes `helm uninstall` leave the CRDs a chart ships as templates (which helm would delete with
/// the release; those in its `crds/` folder it never deletes): the release's newest stored
/// revision gets `helm.sh/resource-policy: keep` on each CRD of its manifest, which is where helm
/// looks when it uninstalls ([`gpuctl_plan::live::release::keep_crds`]). The Secret is replaced
/// under its resourceVersion. Returns the CRDs marked.
async fn keep_crds(k: &Kube, namespace: &str, name: &str) -> Result<Vec<String>, ClusterError> {
    let Some((_, mut secret)) = crate::release::newest_revision(k, namespace, name).await? else {
        return Ok(vec![]);
    };
    let secret_name = secret.metadata.name.clone().unwrap_or_default();
    let object = format!("Secret/{namespace}/{secret_name}");
    let unreadable = |message: String| ClusterError::Unreadable {
        object: object.clone(),
        message,
    };
    let data = secret
        .data
        .as_mut()
        .and_then(|d| d.get_mut("release"))
        .ok_or_else(|| unreadable("it has no `release` key".into()))?;
    let mut stored = release::decode(&data.0).map_err(unreadable)?;
    let marked = release::keep_crds(&mut stored);
    if marked.is_empty() {
        return Ok(marked);
    }
    data.0 = release::encode(&stored);
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    // Guarded by the resourceVersion just read: a helm run in between makes this fail, not race.
    let api: Api<Secret> = Api::namespaced(k.client(), namespace);
    api.replace(&secret_name, &pp, &secret)
        .await
        .map_err(|e| classify(&object, e))?;
    Ok(marked)
}
