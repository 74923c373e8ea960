//! `gpuctl policy test DIR`: the policies' own unit tests, conftest's `verify` convention (OPA's
//! test runner): every rule named `test_*` in any package is a test that passes when it is
//! `true`; `todo_test_*` rules are skipped; an error evaluating a test fails it.

use serde::Serialize;

use crate::PolicySet;
use crate::check::HeadKind;

/// One test's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It evaluated to `true`.
    Pass,
    /// It was undefined, not `true`, or failed to evaluate (the message says which).
    Fail(String),
    /// A `todo_test_*` rule.
    Skip,
}

/// One test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestResult {
    /// `data.main.test_quota_over_64_denied`.
    pub query: String,
    /// The policy file that defines it.
    pub file: String,
    /// Line of its (first) definition.
    pub line: u32,
    /// What happened.
    pub outcome: Outcome,
}

impl PolicySet {
    /// Runs every test of every namespace, in file order.
    pub fn run_tests(&self) -> Vec<TestResult> {
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for def in &self.rules {
            let skip = def.name.starts_with("todo_test_");
            if !(def.name.starts_with("test_") || skip) || def.kind == HeadKind::Function {
                continue;
            }
            let query = format!("data.{}.{}", def.namespace, def.name);
            if !seen.insert(query.clone()) {
                continue;
            }
            let outcome = if skip {
                Outcome::Skip
            } else {
                let mut engine = self.engine.clone();
                match engine.eval_rule(query.clone()) {
                    Ok(regorus::Value::Bool(true)) => Outcome::Pass,
                    Ok(regorus::Value::Undefined) => Outcome::Fail("undefined".into()),
                    Ok(other) => Outcome::Fail(format!(
                        "evaluated to {}, not true",
                        crate::check::to_json(&other)
                    )),
                    Err(e) => Outcome::Fail(format!("error: {e}")),
                }
            };
            out.push(TestResult {
                query,
                file: def.file.clone(),
                line: def.line,
                outcome,
            });
        }
        out
    }
}
