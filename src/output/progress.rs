//! Apply progress: a bar per phase on a terminal, plain lines in logs, NDJSON events for CI.

use std::io::Write;
use std::sync::Mutex;

use gpuctl_cluster::Reporter;

use crate::args::ApplyOutput;
use crate::settings::{self, Style};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// indicatif bars (stderr is a terminal).
    Bars,
    /// One line per event on stderr.
    Lines,
    /// One JSON object per event on stdout (`--output json`).
    Json,
    /// Nothing (tests).
    Quiet,
}

impl ProgressMode {
    /// How progress is shown: NDJSON on stdout for `--output json`, bars on a terminal, lines in
    /// logs.
    pub fn for_output(output: ApplyOutput) -> ProgressMode {
        match output {
            ApplyOutput::Json => ProgressMode::Json,
            ApplyOutput::Human => match settings::stderr_style() {
                Style::Rich => ProgressMode::Bars,
                Style::Plain => ProgressMode::Lines,
            },
        }
    }
}

/// Receives apply events.
pub struct Progress {
    mode: ProgressMode,
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress {
    /// A reporter in `mode`.
    pub fn new(mode: ProgressMode) -> Progress {
        Progress {
            mode,
            bar: Mutex::new(None),
        }
    }

    fn emit(&self, event: serde_json::Value, line: String) {
        match self.mode {
            ProgressMode::Json => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{event}");
            }
            ProgressMode::Lines => eprintln!("{line}"),
            ProgressMode::Bars => {
                if let Ok(b) = self.bar.lock()
                    && let Some(bar) = b.as_ref()
                {
                    bar.println(line);
                    return;
                }
                eprintln!("{line}");
            }
            ProgressMode::Quiet => {}
        }
    }
}

impl Reporter for Progress {
    /// A phase starts with `total` steps.
    fn phase(&self, name: &str, total: usize) {
        if self.mode == ProgressMode::Bars
            && let Ok(mut b) = self.bar.lock()
        {
            if let Some(old) = b.take() {
                old.finish_and_clear();
            }
            let bar = ProgressBar::new(total as u64).with_message(name.to_string());
            bar.set_style(
                ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            *b = Some(bar);
        }
        self.emit(
            json!({"event": "phase", "phase": name, "total": total}),
            format!("phase {name}: {total} step(s)"),
        );
    }

    /// One step finished.
    fn step(&self, what: &str, outcome: &str) {
        if let Ok(b) = self.bar.lock()
            && let Some(bar) = b.as_ref()
        {
            bar.inc(1);
        }
        let line = format!("  {outcome:<9} {what}");
        match self.mode {
            ProgressMode::Bars => {}
            _ => self.emit(
                json!({"event": "step", "object": what, "outcome": outcome}),
                line,
            ),
        }
    }

    /// A step failed.
    fn failed(&self, what: &str, error: &str) {
        self.emit(
            json!({"event": "error", "object": what, "error": error}),
            format!("  failed    {what}: {error}"),
        );
    }

    /// A bounded wait is in progress.
    fn waiting(&self, what: &str, elapsed_s: u64, timeout_s: u64) {
        self.emit(
            json!({"event": "wait", "for": what, "elapsed_s": elapsed_s, "timeout_s": timeout_s}),
            format!("  waiting for {what} ({elapsed_s}s of {timeout_s}s)"),
        );
    }

    /// A free-form note.
    fn note(&self, message: &str) {
        self.emit(
            json!({"event": "note", "message": message}),
            message.to_string(),
        );
    }

    /// Apply finished.
    fn done(&self, summary: serde_json::Value, line: String) {
        if let Ok(mut b) = self.bar.lock()
            && let Some(bar) = b.take()
        {
            bar.finish_and_clear();
        }
        let mut event = summary;
        event["event"] = json!("done");
        self.emit(event, line);
    }
}
