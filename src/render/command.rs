//! `gpuctl render`: validate, render, then print the objects or write the GitOps tree. Takes
//! resolved settings (never clap types); findings and errors go to stderr, YAML to `out`.

use std::io::Write;
use std::path::Path;

use jiff::civil::Date;

use super::Templates;
use crate::cli::settings::Style;
use crate::exit::ExitStatus;

/// What `gpuctl render` was asked to do.
#[derive(Debug, Clone, Copy)]
pub struct RenderCommand<'a> {
    /// Blueprint file, or `-` for standard input.
    pub blueprint: &'a Path,
    /// `-o DIR`: write the tree there instead of printing YAML.
    pub out_dir: Option<&'a Path>,
    /// `--templates DIR`.
    pub templates: Option<&'a Path>,
    /// "Today" for end-of-life checks.
    pub today: Date,
    /// Style of findings on stderr.
    pub style: Style,
}

/// Runs the command.
pub fn run(cmd: RenderCommand<'_>, out: &mut dyn Write) -> ExitStatus {
    let catalog = crate::profiles::Catalog::embedded();
    let loaded = match crate::blueprint::load_file(cmd.blueprint) {
        Ok(l) => l,
        Err(report) => {
            eprint!("{}", crate::output::human(&[report], cmd.style));
            return ExitStatus::Failure;
        }
    };
    // Warnings are shown with the text already read: the blueprint may have come from stdin.
    let source = loaded.source.clone();
    let opts = crate::validate::Options { today: cmd.today };
    let validated = match crate::validate::validate(loaded, catalog, opts) {
        Ok(v) => v,
        Err(report) => {
            eprint!("{}", crate::output::human(&[report], cmd.style));
            eprintln!(
                "error: fix the findings above before rendering (`gpuctl validate {}`)",
                cmd.blueprint.display()
            );
            return ExitStatus::Failure;
        }
    };
    if !validated.warnings().is_empty() {
        let report = crate::diag::FileReport {
            file: validated.file().to_string(),
            findings: validated.warnings().to_vec(),
            source,
        };
        eprint!("{}", crate::output::human(&[report], cmd.style));
    }
    let templates = match Templates::load(cmd.templates) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitStatus::Failure;
        }
    };
    let set = match super::render(&validated, catalog, &templates) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitStatus::Failure;
        }
    };
    match cmd.out_dir {
        Some(dir) => match set.write_tree(dir) {
            Ok(written) => {
                for note in &written.notes {
                    eprintln!("note: {note}");
                }
                eprintln!(
                    "wrote {} objects, the Helm values, node patches and runbooks to {}",
                    set.objects.len(),
                    dir.display()
                );
                if !written.removed.is_empty() {
                    eprintln!(
                        "removed {} generated files the blueprint no longer renders: {}",
                        written.removed.len(),
                        listing(&written.removed)
                    );
                }
                if !written.kept.is_empty() {
                    eprintln!(
                        "kept {} files gpuctl did not write: {}",
                        written.kept.len(),
                        listing(&written.kept)
                    );
                }
                ExitStatus::Success
            }
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", dir.display());
                ExitStatus::Failure
            }
        },
        None => match out.write_all(set.to_yaml().as_bytes()) {
            Ok(()) => ExitStatus::Success,
            Err(_) => ExitStatus::Failure,
        },
    }
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
