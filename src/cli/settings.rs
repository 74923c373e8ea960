//! Flags and environment resolved into plain settings the commands use.

use std::io::IsTerminal;

use jiff::civil::Date;

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

/// Resolves `--today` / `GPUCTL_TODAY`, or the system date.
pub fn today(flag: Option<&str>) -> Result<Date, String> {
    match flag {
        Some(s) => s
            .parse::<Date>()
            .map_err(|e| format!("--today `{s}` is not a date (YYYY-MM-DD): {e}")),
        None => Ok(jiff::ZonedDateTime::now().date()),
    }
}

/// Human style for stderr (diagnostics and progress).
pub fn stderr_style() -> Style {
    style_for(std::io::stderr().is_terminal())
}

/// Parses a duration flag (`10m`, `90s`).
pub fn duration(flag: &str, text: &str) -> Result<std::time::Duration, String> {
    crate::quantity::parse_duration_ms(text)
        .map(std::time::Duration::from_millis)
        .map_err(|e| format!("--{flag}: {e}"))
}
