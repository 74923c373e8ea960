//! The organisation's Rego policies (docs/policy.md): `--policy DIR` of `validate`, `plan` and
//! `fleet plan` (load, write the input with `--policy-input-out`, evaluate: any error fails the
//! run), and `gpuctl policy test DIR` (the policies' own unit tests).

use std::io::Write;
use std::path::{Path, PathBuf};

use gpuctl_policy::verify::Outcome;
use gpuctl_policy::{Options, PolicySet, Report};

use super::files::write_owner_only;
use super::{CommandError, CommandResult, emit};
use crate::args::{PolicyArgs, PolicyTestFormat};
use crate::exit::ExitStatus;

/// Version of `gpuctl policy test -o json`.
pub const POLICY_TEST_FORMAT_VERSION: u32 = 1;

/// The policies `args` name, loaded and checked once (none without `--policy`).
pub fn load(args: &PolicyArgs) -> Result<Option<PolicySet>, CommandError> {
    if args.dirs.is_empty() {
        return Ok(None);
    }
    PolicySet::load(&args.dirs, &args.data)
        .map(Some)
        .map_err(|e| CommandError::Failed(failed(&e)))
}

fn failed(e: &gpuctl_policy::PolicyError) -> String {
    format!(
        "{e}\n(a policy that cannot run fails the gate; `gpuctl policy test DIR` runs the policies' own tests)"
    )
}

/// The namespaces `args` select.
pub fn options(args: &PolicyArgs) -> Options {
    if args.all_namespaces {
        return Options {
            namespaces: Vec::new(),
            all_namespaces: true,
        };
    }
    if args.namespaces.is_empty() {
        return Options::default();
    }
    Options {
        namespaces: args.namespaces.clone(),
        all_namespaces: false,
    }
}

/// Writes the input when asked, then evaluates `set` over it (`None` without policies).
pub fn evaluate(
    args: &PolicyArgs,
    set: Option<&PolicySet>,
    input: &serde_json::Value,
) -> Result<Option<Report>, CommandError> {
    if let Some(path) = &args.policy_input_out {
        write_input(path, input)?;
    }
    let Some(set) = set else {
        return Ok(None);
    };
    crate::memory::with_budget(
        "policy evaluation (--policy)",
        gpuctl_policy::EVAL_MEMORY_LIMIT,
        || set.evaluate(input, &options(args)),
    )
    .map(Some)
    .map_err(|e| CommandError::Failed(failed(&e)))
}

/// The input as `--policy-input-out` writes it: pretty JSON with a trailing newline, mode 0600
/// (it holds the effective blueprint and, when planning, the masked plan).
fn write_input(path: &Path, input: &serde_json::Value) -> Result<(), CommandError> {
    let mut text = serde_json::to_string_pretty(input).unwrap_or_default();
    text.push('\n');
    write_owner_only(path, text.as_bytes()).map_err(|source| CommandError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// `gpuctl policy test DIR...`.
pub fn run_test(
    dirs: &[PathBuf],
    data: &[PathBuf],
    format: PolicyTestFormat,
    out: &mut dyn Write,
) -> CommandResult {
    let set = PolicySet::load(dirs, data).map_err(|e| CommandError::Failed(e.to_string()))?;
    let results = crate::memory::with_budget(
        "the policies' tests (gpuctl policy test)",
        gpuctl_policy::EVAL_MEMORY_LIMIT,
        || set.run_tests(),
    );
    let failed = results
        .iter()
        .filter(|t| matches!(t.outcome, Outcome::Fail(_)))
        .count();
    let skipped = results
        .iter()
        .filter(|t| t.outcome == Outcome::Skip)
        .count();
    let passed = results.len() - failed - skipped;
    let text = match format {
        PolicyTestFormat::Json => {
            let doc = serde_json::json!({
                "format_version": POLICY_TEST_FORMAT_VERSION,
                "tests": results,
                "summary": {"passed": passed, "failed": failed, "skipped": skipped},
            });
            let mut t = serde_json::to_string_pretty(&doc).unwrap_or_default();
            t.push('\n');
            t
        }
        PolicyTestFormat::Human => {
            let mut t = String::new();
            for r in &results {
                if let Outcome::Fail(why) = &r.outcome {
                    t.push_str(&format!("FAIL {}:{}: {}: {why}\n", r.file, r.line, r.query));
                }
            }
            t.push_str(&format!(
                "{} tests, {passed} passed, {failed} failed, {skipped} skipped\n",
                results.len()
            ));
            t
        }
    };
    emit(out, &text);
    Ok(if failed > 0 || results.is_empty() {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
