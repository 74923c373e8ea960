//! `gpuctl explain`: what a validation rule checks, why, and how to fix it.

use std::io::Write;

use gpuctl_core::suggest;
use gpuctl_core::validate::registry;

use super::{CommandError, CommandResult, emit};
use crate::exit::ExitStatus;

/// Runs the command.
pub fn run(rule: Option<&str>, all: bool, out: &mut dyn Write) -> CommandResult {
    if all {
        emit(out, &registry::markdown());
        return Ok(ExitStatus::Success);
    }
    let id = rule.unwrap_or_default();
    let r = registry::rule(id).ok_or_else(|| {
        let ids = registry::RULES.iter().map(|r| r.id);
        CommandError::Usage(format!(
            "no rule `{id}`; {}rules are GPU001..GPU095 (`gpuctl explain --all` lists them)",
            suggest::did_you_mean(id, ids)
        ))
    })?;
    emit(out, &registry::explain(r));
    Ok(ExitStatus::Success)
}
