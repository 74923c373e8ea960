//! `gpuctl schema`: the blueprint's JSON Schema, for editors.

use std::io::Write;

use gpuctl_core::blueprint::Blueprint;

use super::{CommandResult, emit};
use crate::exit::ExitStatus;

/// Runs the command.
pub fn run(out: &mut dyn Write) -> CommandResult {
    let schema = schemars::schema_for!(Blueprint);
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    emit(out, &s);
    Ok(ExitStatus::Success)
}
