//! Load -> validate -> render, written once for every command that needs a rendered set.

use std::path::{Path, PathBuf};

use gpuctl_model::blueprint::{self, Loaded};
use gpuctl_model::input::{self, InputError};
use gpuctl_model::located::{FileReport, Severity};
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::render::{self, ChartSource, RenderedSet, Templates};
use gpuctl_pipeline::validate;
use jiff::civil::Date;

use super::CommandError;
use crate::settings;

/// How Kueue is installed, its declared configuration and the DRA device-class mappings.
pub type DeclaredKueue = (
    gpuctl_model::blueprint::InstallMode,
    gpuctl_model::blueprint::KueueConfig,
    Vec<(String, Vec<String>)>,
);

/// A rendered blueprint, with the warnings validation found.
pub struct Rendered {
    /// Everything the blueprint implies.
    pub set: RenderedSet,
    /// Warning findings (with the source text, for snippets), when there are any.
    pub warnings: Option<FileReport>,
    /// How Kueue is installed, its configuration as the blueprint declares it and the DRA
    /// device-class mappings its shapes need, under Kueue: with `install: none` a live plan
    /// compares the running Kueue's with them.
    pub kueue: Option<DeclaredKueue>,
}

/// Loads, validates and renders the blueprint at `path` (standard input for `-`). Findings that
/// stop it are printed to stderr with `next` (what the command was about to do) in the hint;
/// `templates` overrides the embedded templates.
pub fn render_file(
    path: &Path,
    today: Date,
    templates: Option<&Path>,
    next: &str,
) -> Result<Rendered, CommandError> {
    // An unreadable blueprint is an input error (like an unreadable snapshot), not a finding.
    let bytes = input::read(path, &input::BLUEPRINT)?;
    let loaded = blueprint::load_bytes(&input::name(path), bytes);
    render_loaded(loaded, path, today, templates, next)
}

/// [`render_file`] of a blueprint already read; `path` is what the user named, for the hint.
pub fn render_loaded(
    loaded: Result<Loaded, FileReport>,
    path: &Path,
    today: Date,
    templates: Option<&Path>,
    next: &str,
) -> Result<Rendered, CommandError> {
    let catalog = Catalog::embedded();
    let loaded = loaded.map_err(|report| {
        eprint!(
            "{}",
            crate::output::human(&[report], settings::stderr_style())
        );
        CommandError::Reported
    })?;
    // Warnings are shown with the text already read: the blueprint may have come from stdin.
    let source = loaded.source.clone();
    let validated =
        validate::validate(loaded, catalog, validate::Options { today }).map_err(|report| {
            eprint!(
                "{}",
                crate::output::human(&[report], settings::stderr_style())
            );
            CommandError::Failed(format!(
                "fix the findings above before {next} (`gpuctl validate {}`)",
                path.display()
            ))
        })?;
    let warnings = (!validated.warnings().is_empty()).then(|| FileReport {
        file: validated.file().to_string(),
        findings: validated.warnings().to_vec(),
        source,
    });
    let templates = Templates::load(templates)?;
    let set = render::render(&validated, catalog, &templates)?;
    let bp = validated.blueprint();
    let kueue = bp
        .spec
        .scheduling
        .kueue
        .as_ref()
        .filter(|_| bp.spec.scheduling.queueing == gpuctl_model::blueprint::Queueing::Kueue)
        .map(|k| {
            (
                k.install,
                k.config.clone(),
                render::kueue_config::dra_mappings(bp, catalog),
            )
        });
    Ok(Rendered {
        set,
        warnings,
        kueue,
    })
}

/// Finds the charts a blueprint names by `chart.path` (the GPU Operator's, Kueue's, the Network
/// Operator's; relative to the blueprint's directory, the working directory for standard input) and
/// pins them: the absolute path and, for an archive, its digest, which a saved plan carries and
/// apply checks. Plans and applies need it; `render` does not.
pub fn resolve_chart(set: &mut RenderedSet, blueprint: &Path) -> Result<(), CommandError> {
    let base = if input::is_stdin(blueprint) {
        PathBuf::from(".")
    } else {
        match blueprint.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    };
    for release in std::iter::once(&mut set.helm).chain(set.releases.iter_mut()) {
        let ChartSource::Path {
            path,
            resolved,
            digest,
        } = &mut release.source
        else {
            continue;
        };
        let chart = input::chart(&base, path).map_err(|e| {
            CommandError::Failed(format!(
                "{}: {}.chart.path: {e}; put the chart archive (`helm pull` writes one) or chart directory next to the blueprint, or name another source",
                input::name(blueprint),
                release.stack.field()
            ))
        })?;
        *resolved = Some(chart.path.display().to_string());
        *digest = chart.digest;
    }
    Ok(())
}

/// Reads and validates one file (standard input for `-`) into a report of every finding: every
/// structural problem, and the rules' findings on every part that loaded. A file that cannot be
/// read is an input error, not a finding.
pub fn validate_file(path: &Path, opts: validate::Options) -> Result<FileReport, InputError> {
    let bytes = input::read(path, &input::BLUEPRINT)?;
    Ok(validate::check_bytes(
        &input::name(path),
        bytes,
        Catalog::embedded(),
        opts,
    ))
}

/// [`validate_file`] for a blueprint that may `extends` parents (inside its directory): one report
/// per file that set a value a finding is about, the file named first.
pub fn validate_layered(
    path: &Path,
    opts: validate::Options,
) -> Result<Vec<FileReport>, InputError> {
    validate::check_path(path, None, Catalog::embedded(), opts)
}

/// True when a report has error findings.
pub fn has_errors(report: &FileReport) -> bool {
    report.count(Severity::Error) > 0
}
