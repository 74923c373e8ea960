//! `gpuctl render`: validate, render, then print the objects or write the GitOps tree. Findings
//! and notes go to stderr, YAML to standard output.

use std::io::Write;
use std::path::Path;

use super::pipeline::render_file;
use super::{CommandError, CommandResult};
use crate::exit::ExitStatus;
use crate::output::tree::{TreeWritten, write_tree};
use crate::{output, settings};

/// Runs the command: `out_dir` writes the tree there instead of printing YAML; `templates`
/// overrides the embedded templates.
pub fn run(
    blueprint: &Path,
    out_dir: Option<&Path>,
    templates: Option<&Path>,
    today: Option<&str>,
    out: &mut dyn Write,
) -> CommandResult {
    let today = settings::today(today)?;
    let rendered = render_file(blueprint, today, templates, "rendering")?;
    if let Some(report) = rendered.warnings {
        eprint!("{}", output::human(&[report], settings::Style::Plain));
    }
    let set = rendered.set;
    let Some(dir) = out_dir else {
        // A closed pipe fails the command without a message (the reader is gone).
        out.write_all(set.to_yaml().as_bytes())
            .map_err(|_| CommandError::Reported)?;
        return Ok(ExitStatus::Success);
    };
    let written = write_tree(&set, dir).map_err(|source| CommandError::Tree {
        dir: dir.display().to_string(),
        source,
    })?;
    eprint!("{}", summary(&written, set.objects.len(), dir));
    Ok(ExitStatus::Success)
}

/// What the tree write did, for stderr.
fn summary(written: &TreeWritten, objects: usize, dir: &Path) -> String {
    let mut s = String::new();
    for note in &written.notes {
        s.push_str(&format!("note: {note}\n"));
    }
    s.push_str(&format!(
        "wrote {objects} objects, the Helm values, node patches and runbooks to {}\n",
        dir.display()
    ));
    if !written.removed.is_empty() {
        s.push_str(&format!(
            "removed {} generated files the blueprint no longer renders: {}\n",
            written.removed.len(),
            listing(&written.removed)
        ));
    }
    if !written.kept.is_empty() {
        s.push_str(&format!(
            "kept {} files gpuctl did not write: {}\n",
            written.kept.len(),
            listing(&written.kept)
        ));
    }
    s
}

/// Up to ten paths, then how many more.
fn listing(paths: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = paths
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        text.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    text
}
