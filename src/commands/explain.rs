//! `gpuctl explain`: what a validation rule checks, why, and how to fix it.

use std::io::Write;

use gpuctl_core::suggest;
use gpuctl_core::validate::registry;

use super::{CommandError, CommandResult, emit};
use crate::exit::ExitStatus;

/// Shipped example blueprints: the field reference shows a field's first value in them.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "dgx-h100-training.yaml",
        include_str!("../../blueprints/dgx-h100-training.yaml"),
    ),
    (
        "inference-mig.yaml",
        include_str!("../../blueprints/inference-mig.yaml"),
    ),
];

/// Runs the command.
pub fn run(rule: Option<&str>, all: bool, fields: bool, out: &mut dyn Write) -> CommandResult {
    if fields {
        emit(
            out,
            &gpuctl_core::validate::fields::reference_markdown(EXAMPLES),
        );
        return Ok(ExitStatus::Success);
    }
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
