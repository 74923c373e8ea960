//! `gpuctl schema`: the blueprint's JSON Schema, for editors.

use std::io::Write;

use gpuctl_model::blueprint::schema;

use super::{CommandResult, emit};
use crate::exit::ExitStatus;

/// Runs the command.
pub fn run(out: &mut dyn Write) -> CommandResult {
    // The same schema the loader and the field reference (`gpuctl explain --fields`) walk.
    let mut s = serde_json::to_string_pretty(&schema::json()).unwrap_or_default();
    s.push('\n');
    emit(out, &s);
    Ok(ExitStatus::Success)
}
