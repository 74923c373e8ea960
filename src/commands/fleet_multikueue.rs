//! `fleet apply`'s MultiKueue credentials step (docs/fleet.md "MultiKueue"): after a wave, for
//! each worker whose ServiceAccount token exists (its wave was applied), the manager gets the
//! Secret `kueue-system/multikueue-<worker>` (key `kubeconfig`): the worker's server URL and CA
//! from its kubeconfig context and the token of `kueue-system/gpuctl-multikueue-token`. The
//! Secret is built here, in memory, and written with server-side apply under its own field
//! manager: it is never rendered, planned or printed (output names it and shows the token as
//! `***`), and it is no member of the ApplySet, so a prune leaves it alone.

use std::io::Write;
use std::path::PathBuf;

use gpuctl_cluster::multikueue::{
    NoToken, TOKEN_WAIT, endpoint, kubeconfig_text, manager_ready, unserved, worker_token,
    write_secret,
};
use gpuctl_fleet::LoadedFleet;
use gpuctl_fleet::multikueue::{TOKEN_SECRET, kueue_namespace, secret_name};

use super::{CommandError, connect, emit};
use crate::args::ClusterArgs;

/// Writes every ready worker's kubeconfig Secret on the manager; a worker without its token yet
/// is named and skipped (a later `fleet apply` writes it). A worker that does not serve a kind
/// the manager's Kueue enables is named too (GPU195, live).
pub fn credentials(
    kubeconfig: Option<&PathBuf>,
    loaded: &LoadedFleet,
    rt: &tokio::runtime::Runtime,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let fleet = &loaded.fleet;
    let Some(mk) = &fleet.spec.multi_kueue else {
        return Ok(());
    };
    let args = |cluster: &str| -> Result<ClusterArgs, CommandError> {
        let context = fleet
            .spec
            .clusters
            .iter()
            .find(|c| c.name == cluster)
            .and_then(|c| c.context.clone())
            .ok_or_else(|| {
                CommandError::Failed(format!(
                    "MultiKueue: cluster `{cluster}` has no `context` in the fleet file"
                ))
            })?;
        Ok(ClusterArgs {
            kubeconfig: kubeconfig.cloned(),
            context: Some(context),
        })
    };
    let manager = rt.block_on(connect(&args(&mk.manager)?, None))?.client();
    let ready = rt.block_on(manager_ready(&manager)).map_err(|e| {
        CommandError::Failed(format!("MultiKueue: cannot read `{}`: {e}", mk.manager))
    })?;
    if !ready {
        emit(
            out,
            &format!(
                "  MultiKueue: `{}` has no namespace {} yet (its wave is not applied, or its Kueue is not installed); the workers' kubeconfig Secrets are written by the `fleet apply` that applies it\n",
                mk.manager,
                kueue_namespace()
            ),
        );
        return Ok(());
    }
    let kinds = framework_kinds(loaded.manager_frameworks());
    for w in &mk.workers {
        let wargs = args(w)?;
        let worker = rt.block_on(connect(&wargs, None))?.client();
        match rt.block_on(unserved(&worker, &kinds)) {
            Ok(missing) if missing.is_empty() => {}
            Ok(missing) => emit(
                out,
                &format!(
                    "  warning: MultiKueue: worker `{w}` does not serve {} (CRDs missing), which the manager's Kueue enables: Kueue will not connect it (its MultiKueueCluster stays inactive, ClientConnectionFailed); install them there, or take the frameworks out of the manager's `config.integrations.frameworks` (GPU195)\n",
                    missing.join(", ")
                ),
            ),
            Err(e) => emit(
                out,
                &format!(
                    "  warning: MultiKueue: could not check which frameworks worker `{w}` serves ({e}); the next `gpuctl fleet apply` checks again, or list them with `kubectl api-resources` on its context\n"
                ),
            ),
        }
        let (token, secret_ca) = match rt.block_on(worker_token(&worker)) {
            Ok(t) => t,
            Err(why) => {
                let why = match why {
                    NoToken::NoSecret => format!(
                        "has no ServiceAccount token Secret {}/{TOKEN_SECRET} (its wave is not applied yet)",
                        kueue_namespace()
                    ),
                    NoToken::Empty => format!(
                        "has an empty token Secret {}/{TOKEN_SECRET}: its token controller did not fill it within {}s (is kube-controller-manager running?)",
                        kueue_namespace(),
                        TOKEN_WAIT.as_secs()
                    ),
                    NoToken::Unreadable(e) => {
                        format!("could not be read for {}s: {e}", TOKEN_WAIT.as_secs())
                    }
                };
                emit(
                    out,
                    &format!(
                        "  MultiKueue: worker `{w}` {why}; its MultiKueueCluster stays inactive until a later `fleet apply` writes its kubeconfig\n"
                    ),
                );
                continue;
            }
        };
        let (server, ca) = endpoint(
            wargs.kubeconfig.as_deref(),
            wargs.context.as_deref().unwrap_or_default(),
        )
        .map_err(|e| CommandError::Failed(format!("MultiKueue: {e}")))?;
        let ca = ca.unwrap_or(secret_ca);
        let text = kubeconfig_text(w, &server, &ca, &token);
        rt.block_on(write_secret(&manager, &secret_name(w), &text))
            .map_err(|e| {
                CommandError::Failed(format!(
                    "MultiKueue: cannot write Secret {}/{} on `{}`: {e}",
                    kueue_namespace(),
                    secret_name(w),
                    mk.manager
                ))
            })?;
        emit(
            out,
            &format!(
                "  MultiKueue: kubeconfig of `{w}` ({server}, token ***) in Secret {}/{} on `{}`\n",
                kueue_namespace(),
                secret_name(w),
                mk.manager
            ),
        );
    }
    Ok(())
}

/// The API group and resource of each framework `frameworks` names (profiles/queueing.yaml
/// `multikueue.framework_resources`); a name without an entry is left out (validation refuses
/// unknown framework names).
fn framework_kinds(frameworks: &[String]) -> Vec<(String, String)> {
    let facts = &gpuctl_model::profiles::Catalog::embedded()
        .queueing()
        .multikueue
        .framework_resources;
    frameworks
        .iter()
        .filter_map(|f| facts.get(f))
        .map(|k| (k.group.clone(), k.resource.clone()))
        .collect()
}
