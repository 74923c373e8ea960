//! `gpuctl profiles`: the facts catalog gpuctl validates against, with sources.

use std::io::Write;

use gpuctl_model::profiles::Catalog;

use super::{CommandResult, emit};
use crate::args::ProfilesFormat;
use crate::exit::ExitStatus;
use crate::output;

/// Runs the command.
pub fn run(format: ProfilesFormat, out: &mut dyn Write) -> CommandResult {
    let catalog = Catalog::embedded();
    let text = match format {
        ProfilesFormat::Human => output::profiles::human(catalog),
        ProfilesFormat::Json => output::profiles::json(catalog),
    };
    emit(out, &text);
    Ok(ExitStatus::Success)
}

/// `gpuctl profiles --stale-after DAYS`: the fact rows read more than `days` days before `today`
/// (or never dated), with their sources, and the tables that carry no dates at all.
pub fn stale(
    format: ProfilesFormat,
    days: u32,
    today: jiff::civil::Date,
    out: &mut dyn Write,
) -> CommandResult {
    let catalog = Catalog::embedded();
    let text = match format {
        ProfilesFormat::Human => output::profiles::stale_human(catalog, days, today),
        ProfilesFormat::Json => output::profiles::stale_json(catalog, days, today),
    };
    emit(out, &text);
    Ok(ExitStatus::Success)
}
