//! `gpuctl unlock BLUEPRINT`: removes the apply lock a killed `gpuctl apply` left behind, after
//! showing who holds it and asking (as `terraform force-unlock` does). Removal is conditional on
//! the holder the person saw, so a lock another run took meanwhile is left alone.

use std::io::Write;
use std::path::Path;

use gpuctl_cluster::lock::{self, LockRef};
use gpuctl_model::applyset;
use gpuctl_model::blueprint;
use gpuctl_model::input;
use gpuctl_model::names;
use gpuctl_plan::plan::{Plan, is_saved_plan};

use super::{CommandError, CommandResult, connect, interactive, runtime};
use crate::args::ClusterArgs;
use crate::exit::ExitStatus;
use crate::settings;

/// The blueprint a file names (a blueprint, or a plan saved from one) and its operator namespace,
/// where its apply lock lives.
fn target(path: &Path) -> Result<(String, String), CommandError> {
    let name = input::name(path);
    let bytes = input::read(path, &input::BLUEPRINT_OR_PLAN)?;
    if is_saved_plan(&bytes) {
        let plan = Plan::from_json(&String::from_utf8_lossy(&bytes))
            .map_err(|source| CommandError::SavedPlan { file: name, source })?;
        return Ok((plan.blueprint, plan.helm.namespace));
    }
    let loaded = blueprint::load_bytes(&name, bytes).map_err(|report| {
        eprint!(
            "{}",
            crate::output::human(&[report], settings::stderr_style())
        );
        CommandError::Reported
    })?;
    let bp = loaded.blueprint;
    Ok((bp.metadata.name, bp.spec.gpu_operator.namespace))
}

/// Runs the command.
pub fn run(path: &Path, cluster: &ClusterArgs, holder: Option<&str>, yes: bool) -> CommandResult {
    let (blueprint, namespace) = target(path)?;
    let lock = LockRef {
        name: names::apply_lock_name(&blueprint),
        namespace,
        labels: [(applyset::MANAGED_BY.to_string(), "gpuctl".to_string())].into(),
    };
    let rt = runtime()?;
    rt.block_on(async {
        let k = connect(cluster, None).await?;
        let Some(info) = lock::info(&k, &lock.namespace, &lock.name).await? else {
            eprintln!(
                "{} does not exist: blueprint `{}` is not locked.",
                lock.id(),
                blueprint
            );
            return Ok(ExitStatus::Success);
        };
        if info.holder.is_empty() {
            eprintln!(
                "{} was released: blueprint `{}` is not locked.",
                lock.id(),
                blueprint
            );
            return Ok(ExitStatus::Success);
        }
        if let Some(h) = holder
            && h != info.holder
        {
            return Err(CommandError::Failed(format!(
                "{} is held by `{}`, not `{h}`; nothing was removed",
                lock.id(),
                info.holder
            )));
        }
        eprintln!(
            "{} is held by {}\n  holder id: {}",
            lock.id(),
            info.describe(),
            info.holder
        );
        if info.live() {
            eprintln!(
                "  it was renewed {}s ago (lasts {}s): that run is probably still going. Removing the lock lets another apply run beside it; the running one stops before its next phase.",
                info.age_s, info.duration_s
            );
        } else {
            eprintln!("  it expired: the next apply takes it over even without unlock.");
        }
        if !yes {
            if !interactive() {
                return Err(CommandError::Failed(
                    "not removed: confirm with --yes when there is no terminal to ask on".into(),
                ));
            }
            eprint!("Remove this lock? Only 'yes' is accepted: ");
            let _ = std::io::stderr().flush();
            let mut answer = String::new();
            if std::io::stdin().read_line(&mut answer).is_err() || answer.trim() != "yes" {
                eprintln!("Unlock cancelled; nothing was removed.");
                return Err(CommandError::Reported);
            }
        }
        if lock::remove(&k, &lock, &info.holder).await? {
            eprintln!("Removed {}.", lock.id());
            Ok(ExitStatus::Success)
        } else {
            Err(CommandError::Failed(format!(
                "{} changed while asking (another run took or released it); nothing was removed. Run `gpuctl unlock` again to see who holds it now",
                lock.id()
            )))
        }
    })
}
