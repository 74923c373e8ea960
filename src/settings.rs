//! Flags and environment resolved into plain settings the commands use.

use std::io::IsTerminal;

use std::time::Duration;

use gpuctl_plan::upgrade::Timing;
use jiff::civil::Date;

use crate::args::UpgradeTimingArgs;

/// How human output is styled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Colour and unicode (a terminal without NO_COLOR).
    Rich,
    /// Plain text (pipes, files, CI logs, NO_COLOR).
    Plain,
}

/// Human style for stdout: rich only on a terminal and when `NO_COLOR` is unset or empty.
pub fn stdout_style() -> Style {
    style_for(std::io::stdout().is_terminal())
}

/// Rich only on a terminal and when `NO_COLOR` is unset or empty (no-color.org).
fn style_for(is_terminal: bool) -> Style {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    if is_terminal && !no_color {
        Style::Rich
    } else {
        Style::Plain
    }
}

/// A flag whose value cannot be used: what is wrong and what is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagError(pub String);

/// Resolves `--today` / `GPUCTL_TODAY`, or the system date.
pub fn today(flag: Option<&str>) -> Result<Date, FlagError> {
    match flag {
        Some(s) => s
            .parse::<Date>()
            .map_err(|e| FlagError(format!("--today `{s}` is not a date (YYYY-MM-DD): {e}"))),
        None => Ok(jiff::Zoned::now().date()),
    }
}

/// Human style for stderr (diagnostics and progress).
pub fn stderr_style() -> Style {
    style_for(std::io::stderr().is_terminal())
}

/// Parses a duration flag (`10m`, `90s`).
pub fn duration(flag: &str, text: &str) -> Result<Duration, FlagError> {
    gpuctl_model::quantity::parse_duration_ms(text)
        .map(Duration::from_millis)
        .map_err(|e| FlagError(format!("--{flag}: {e}")))
}

/// A duration flag that must be at least `min` (whole seconds).
pub fn at_least(flag: &str, text: &str, min: Duration) -> Result<Duration, FlagError> {
    let d = duration(flag, text)?;
    if d < min {
        return Err(FlagError(format!(
            "--{flag} must be at least {}s",
            min.as_secs()
        )));
    }
    Ok(d)
}

/// An upgrade's waits and estimates.
pub fn timing(a: &UpgradeTimingArgs) -> Result<Timing, FlagError> {
    let poll = duration("poll-interval", &a.poll_interval)?;
    let validate_timeout = duration("validate-timeout", &a.validate_timeout)?;
    let lease_duration = at_least("lease-duration", &a.lease_duration, Duration::from_secs(1))?;
    let node_upgrade_estimate = duration("node-upgrade-estimate", &a.node_upgrade_estimate)?;
    Ok(Timing {
        poll: poll.max(Duration::from_millis(10)),
        validate_timeout,
        lease_duration,
        node_upgrade_estimate,
    })
}

/// The value of a flag given under its deprecated spelling `old`, else `current`; says so on
/// stderr (once per run) so scripts can move to `new` before the old spelling goes.
pub fn deprecated<T>(old: &str, new: &str, given: Option<T>, current: T) -> T {
    match given {
        Some(v) => {
            eprintln!(
                "warning: {old} is deprecated and will be removed in the next release; use {new}"
            );
            v
        }
        None => current,
    }
}
