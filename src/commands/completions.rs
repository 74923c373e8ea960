//! `gpuctl completions`: shell completion scripts.

use std::io::Write;

use clap::CommandFactory;

use super::CommandResult;
use crate::args::Cli;
use crate::exit::ExitStatus;

/// Runs the command.
pub fn run(shell: clap_complete::Shell, out: &mut dyn Write) -> CommandResult {
    let mut out = out;
    clap_complete::generate(shell, &mut Cli::command(), "gpuctl", &mut out);
    Ok(ExitStatus::Success)
}
