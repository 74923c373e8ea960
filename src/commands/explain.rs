//! `gpuctl explain`: what a finding id (a validation rule, a doctor, metric, import or plan finding)
//! checks, why, and how to fix it, from the one registry (`gpuctl_model::finding`).

use std::io::Write;

use gpuctl_model::finding::{self, Family};
use gpuctl_model::suggest;

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
            &gpuctl_pipeline::validate::fields::reference_markdown(EXAMPLES),
        );
        return Ok(ExitStatus::Success);
    }
    if all {
        emit(out, &finding::markdown());
        return Ok(ExitStatus::Success);
    }
    let id = rule.unwrap_or_default();
    let r = finding::rule(id).ok_or_else(|| {
        let ids = finding::rules().map(|r| r.id);
        let ranges: Vec<String> = Family::ALL
            .iter()
            .map(|f| {
                let rules = f.rules();
                format!(
                    "{f} {}..{}",
                    rules.first().map_or("", |r| r.id),
                    rules.last().map_or("", |r| r.id)
                )
            })
            .collect();
        CommandError::Usage(format!(
            "no rule `{id}`; {}ids are {} (`gpuctl explain --all` lists them)",
            suggest::did_you_mean(id, ids),
            ranges.join(", ")
        ))
    })?;
    emit(out, &finding::explain(r));
    Ok(ExitStatus::Success)
}
