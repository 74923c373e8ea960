//! gpuctl's organisation policies: Rego files with conftest's conventions (`deny`, `violation`,
//! `warn` and their `_suffix` forms, package `main` unless namespaces are named, string or
//! `{"msg": ...}` results, `exception` rules), evaluated in-process with regorus over the input
//! `gpuctl validate|plan|fleet plan --policy DIR` documents in docs/policy.md.
//!
//! regorus is laxer than conftest (../shared/reference/ci-gate.md §3); gpuctl refuses at load what
//! conftest refuses ([`check`]), refuses a `deny`/`warn` whose value is not a set of messages
//! (conftest passes a boolean `deny` silently), and turns any evaluation error into a failed run,
//! never a pass.
//!
//! Pure: the files are read through [`load`]'s bounded reader, nothing else touches the system.

pub mod check;
pub mod eval;
pub mod finding;
pub mod input;
pub mod load;
#[cfg(test)]
mod tests;
pub mod verify;

use std::path::PathBuf;

pub use eval::{CheckResult, Kind, Options, PolicyResult, Report};

/// The longest one evaluation (a rule, an exception query, a test) may run: regorus checks its
/// clock as it works and stops with an error past it (measured: `numbers.range(1, 100000000)`
/// in a comprehension took 52 s in a debug build without a limit).
pub const EVAL_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// The most one evaluation of the policies (every rule over one input, or `policy test`) may
/// allocate, its input's conversion included: regorus bounds time, not memory, so the binary's
/// allocator counts it (`gpuctl::memory`) and stops the run past it. A plan of the 4,160-object
/// benchmark blueprint is about 6 MiB of JSON; 1 GiB leaves room for large inputs and stays
/// within what a CI runner can spare.
pub const EVAL_MEMORY_LIMIT: usize = 1 << 30;

/// Why policies could not be loaded or evaluated: every one fails the run (a gate never passes
/// on a policy it could not run), and each names the file (and line, where there is one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A file or directory could not be read, or is over a limit.
    #[error("policy: cannot read `{path}`: {message}")]
    Read {
        /// The file or directory.
        path: String,
        /// Why.
        message: String,
    },
    /// A data file is not a JSON or YAML object, or its keys clash with another's.
    #[error("policy data `{file}`: {message}")]
    Data {
        /// The data file.
        file: String,
        /// Why.
        message: String,
    },
    /// A policy does not parse (regorus' message names the file, line and column).
    #[error("policy does not load: {message}")]
    Parse {
        /// The policy file.
        file: String,
        /// regorus' message.
        message: String,
    },
    /// A policy conftest would refuse (and regorus would load).
    #[error("policy refused: {file}:{line}: {message}")]
    Refused {
        /// The policy file.
        file: String,
        /// Line of the rule or call.
        line: u32,
        /// Why.
        message: String,
    },
    /// Evaluating a rule failed (regorus' message names the file, line and column).
    #[error("policy evaluation failed: {query}: {message}")]
    Eval {
        /// `data.main.deny`.
        query: String,
        /// Why.
        message: String,
    },
}

/// Loaded policies and their data, checked against conftest's load-time rules.
#[derive(Debug, Clone)]
pub struct PolicySet {
    engine: regorus::Engine,
    rules: Vec<check::RuleDef>,
    /// The `.rego` files read, in path order.
    pub files: Vec<String>,
}

impl PolicySet {
    /// Reads every `.rego` file under each of `dirs` (recursively, as conftest's `-p`) and every
    /// `.json`, `.yaml` and `.yml` file under each of `data` (as conftest's `-d`: a file in a
    /// subdirectory `sub/` lands under `data.sub`).
    pub fn load(dirs: &[PathBuf], data: &[PathBuf]) -> Result<PolicySet, PolicyError> {
        let mut budget = load::Budget::default();
        let mut engine = regorus::Engine::new();
        engine.set_rego_v0(false);
        // Gathered, not printed: a policy's print() must not interleave with gpuctl's output.
        engine.set_gather_prints(true);
        // A policy from a pull request must not stall the gate: each evaluation stops (an
        // error, so the run fails) after EVAL_TIME_LIMIT.
        engine.set_execution_timer_config(regorus::utils::limits::ExecutionTimerConfig {
            limit: EVAL_TIME_LIMIT,
            check_interval: std::num::NonZeroU32::MIN.saturating_add(1023),
        });
        let mut files = Vec::new();
        for dir in dirs {
            for f in load::read_dir(dir, &["rego"], &mut budget)? {
                if let Some(line) = load::too_deep(&f.text) {
                    return Err(PolicyError::Refused {
                        file: f.path,
                        line: u32::try_from(line).unwrap_or(u32::MAX),
                        message: format!(
                            "`[` and `{{` nested deeper than {} levels (regorus parses deep nesting in exponential time); build a deep value from smaller ones",
                            load::MAX_NESTING
                        ),
                    });
                }
                engine
                    .add_policy(f.path.clone(), f.text)
                    .map_err(|e| PolicyError::Parse {
                        file: f.path.clone(),
                        message: e.to_string(),
                    })?;
                files.push(f.path);
            }
        }
        if files.is_empty() {
            return Err(PolicyError::Read {
                path: dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                message:
                    "no .rego file found (a policy directory holds Rego files, conftest's layout)"
                        .into(),
            });
        }
        for dir in data {
            for f in load::read_dir(dir, &["json", "yaml", "yml"], &mut budget)? {
                let doc = load::data_document(&f)?;
                engine
                    .add_data(regorus::Value::from(doc))
                    .map_err(|e| PolicyError::Data {
                        file: f.path.clone(),
                        message: e.to_string(),
                    })?;
            }
        }
        let modules = engine.get_modules().clone();
        check::conftest_load_checks(&modules)?;
        let rules = check::rule_defs(&modules);
        Ok(PolicySet {
            engine,
            rules,
            files,
        })
    }

    /// Every package (namespace) the policies declare, sorted.
    pub fn namespaces(&self) -> Vec<String> {
        let set: std::collections::BTreeSet<&str> =
            self.rules.iter().map(|r| r.namespace.as_str()).collect();
        set.into_iter().map(str::to_string).collect()
    }
}
