//! `gpuctl validate`: every finding of every blueprint, as text, JSON or SARIF; with `--policy
//! DIR`, the organisation's policies' results too (docs/policy.md).

use std::io::Write;
use std::path::PathBuf;

use gpuctl_model::blueprint::{self, Loaded};
use gpuctl_model::input;
use gpuctl_model::located::FileReport;
use gpuctl_pipeline::validate;
use gpuctl_policy::PolicySet;

use super::{CommandError, CommandResult, emit};
use crate::args::{Format, PolicyArgs};
use crate::exit::ExitStatus;
use crate::{output, settings};

/// Runs the command.
pub fn run(
    files: &[PathBuf],
    format: Format,
    strict: bool,
    today: Option<&str>,
    policy: &PolicyArgs,
    out: &mut dyn Write,
) -> CommandResult {
    if files.iter().filter(|f| input::is_stdin(f)).count() > 1 {
        return Err(CommandError::Usage(
            "`-` (standard input) can be given once; name the other blueprints as files".into(),
        ));
    }
    let with_policy = !policy.dirs.is_empty() || policy.policy_input_out.is_some();
    if with_policy && files.iter().any(|f| input::is_stdin(f)) {
        return Err(CommandError::Usage(
            "--policy and --policy-input-out read the blueprint as a file: name it instead of `-`"
                .into(),
        ));
    }
    if policy.policy_input_out.is_some() && files.len() > 1 {
        return Err(CommandError::Usage(
            "--policy-input-out writes the input of one blueprint: validate one file with it"
                .into(),
        ));
    }
    let today = settings::today(today)?;
    let set = super::policy::load(policy)?;
    // Every file is read before any is reported on: a path that cannot be read is an input error
    // (as for every other command), and the output never mixes reports with it.
    let mut reports = Vec::new();
    for f in files {
        let mut file_reports = super::pipeline::validate_layered(f, validate::Options { today })?;
        if with_policy {
            // A blueprint that does not load has its findings already; there is no document
            // for the policies (the run fails on those findings).
            if let Ok(loaded) = blueprint::load_file(f) {
                apply_policies(&loaded, &mut file_reports, set.as_ref(), policy)?;
            }
        }
        reports.extend(file_reports);
    }
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

/// Evaluates the policies over one blueprint and its findings, and adds their results to the
/// report of the file each points at (`_loc.file`: the blueprint or a parent it `extends`; the
/// blueprint when it names none or another file).
fn apply_policies(
    loaded: &Loaded,
    reports: &mut Vec<FileReport>,
    set: Option<&PolicySet>,
    policy: &PolicyArgs,
) -> Result<(), CommandError> {
    let input = gpuctl_policy::input::document(
        "validate",
        vec![
            ("blueprint", gpuctl_policy::input::blueprint(loaded)),
            ("findings", gpuctl_policy::input::findings(reports)),
        ],
    );
    let Some(report) = super::policy::evaluate(policy, set, &input)? else {
        return Ok(());
    };
    for r in report.results() {
        let named = r.loc.as_ref().map(|l| l.file.as_str());
        let (file, source) = match loaded
            .layers
            .iter()
            .find(|l| Some(l.file.as_str()) == named)
        {
            Some(layer) => (layer.file.as_str(), layer.source.as_str()),
            None => (loaded.file.as_str(), loaded.source.as_str()),
        };
        let finding = gpuctl_policy::finding::located(r);
        let finding = if file == loaded.file && named.is_some_and(|n| n != file) {
            // A `_loc` in a file gpuctl did not read (the fleet file, say): no line to show here.
            gpuctl_model::located::Finding {
                pos: None,
                ..finding
            }
        } else {
            finding
        };
        match reports.iter_mut().find(|rep| rep.file == file) {
            Some(rep) => rep.findings.push(finding),
            None => reports.push(FileReport {
                file: file.to_string(),
                findings: vec![finding],
                source: source.to_string(),
            }),
        }
    }
    for rep in reports.iter_mut() {
        rep.findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    }
    Ok(())
}
