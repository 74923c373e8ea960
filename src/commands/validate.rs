//! `gpuctl validate`: every finding of every blueprint, as text, JSON or SARIF.

use std::io::Write;
use std::path::PathBuf;

use gpuctl_model::input;
use gpuctl_pipeline::validate;

use super::{CommandError, CommandResult, emit};
use crate::args::Format;
use crate::exit::ExitStatus;
use crate::{output, settings};

/// Runs the command.
pub fn run(
    files: &[PathBuf],
    format: Format,
    strict: bool,
    today: Option<&str>,
    out: &mut dyn Write,
) -> CommandResult {
    if files.iter().filter(|f| input::is_stdin(f)).count() > 1 {
        return Err(CommandError::Usage(
            "`-` (standard input) can be given once; name the other blueprints as files".into(),
        ));
    }
    let today = settings::today(today)?;
    // Every file is read before any is reported on: a path that cannot be read is an input error
    // (as for every other command), and the output never mixes reports with it.
    let reports = files
        .iter()
        .map(|f| super::pipeline::validate_layered(f, validate::Options { today }))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
    let text = match format {
        Format::Human => output::human(&reports, settings::stdout_style()),
        Format::Json => output::json(&reports),
        Format::Sarif => output::sarif(&reports),
    };
    emit(out, &text);
    let s = output::summary(&reports);
    Ok(if s.errors > 0 || (strict && s.warnings > 0) {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
