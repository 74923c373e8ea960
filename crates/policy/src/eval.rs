//! Evaluating the policies over one input, as `conftest test` does (CT `policy/engine.go` `check`):
//! per namespace, each `deny`/`violation`/`warn` rule name once, its `exception` first; results are
//! strings or objects with a string `msg` (`_loc` lifted to `loc`, the rest metadata with
//! `query`); successes counted as conftest counts them.

use serde::Serialize;
use serde_json::{Map, Value as Json};

use crate::check::{self, HeadKind, RuleDef};
use crate::{PolicyError, PolicySet};

/// Whether a result blocks (`deny`, `violation`) or advises (`warn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A `deny` or `violation` rule: an error finding.
    Failure,
    /// A `warn` rule: a warning finding.
    Warning,
}

/// Which namespaces to test (conftest's `--namespace`, `--all-namespaces`).
#[derive(Debug, Clone)]
pub struct Options {
    /// Packages without `data.`; `*` (which crosses dots) and `?` are globs. Default `["main"]`.
    pub namespaces: Vec<String>,
    /// Every package the policies declare.
    pub all_namespaces: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            namespaces: vec!["main".into()],
            all_namespaces: false,
        }
    }
}

/// Where a result points (`_loc` of an object result).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loc {
    /// A file (for gpuctl's input: a blueprint file, `input.blueprint.locations`).
    pub file: String,
    /// Its line, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// One failure or warning.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyResult {
    /// Failure or warning.
    pub kind: Kind,
    /// The message.
    pub msg: String,
    /// `_loc`, when the result gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loc: Option<Loc>,
    /// Every other key of an object result, and `query` (`data.main.deny_quota`), as conftest.
    pub metadata: Map<String, Json>,
}

impl PolicyResult {
    /// The query that produced it (`data.main.deny_quota`).
    pub fn query(&self) -> &str {
        self.metadata
            .get("query")
            .and_then(Json::as_str)
            .unwrap_or_default()
    }
}

/// The results of one namespace, shaped as conftest's `CheckResult`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    /// The package, without `data.`.
    pub namespace: String,
    /// Rules that produced no failure or warning, counted as conftest counts them.
    pub successes: usize,
    /// `deny`/`violation` results.
    pub failures: Vec<PolicyResult>,
    /// `warn` results.
    pub warnings: Vec<PolicyResult>,
    /// The exception queries that dropped a rule's results.
    pub exceptions: Vec<String>,
}

/// Every namespace's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// One per namespace tested, in name order.
    pub checks: Vec<CheckResult>,
}

impl Report {
    /// Every failure and warning, namespace by namespace.
    pub fn results(&self) -> impl Iterator<Item = &PolicyResult> {
        self.checks
            .iter()
            .flat_map(|c| c.failures.iter().chain(&c.warnings))
    }

    /// The report as `conftest test --output json` writes it for one input file `filename`: what
    /// the differential tests compare.
    pub fn conftest_json(&self, filename: &str) -> Json {
        let result = |r: &PolicyResult| {
            let mut o = Map::new();
            o.insert("msg".into(), Json::String(r.msg.clone()));
            if let Some(loc) = &r.loc {
                o.insert("loc".into(), serde_json::to_value(loc).unwrap_or_default());
            }
            o.insert("metadata".into(), Json::Object(r.metadata.clone()));
            Json::Object(o)
        };
        let checks = self
            .checks
            .iter()
            .map(|c| {
                let mut o = Map::new();
                o.insert("filename".into(), filename.into());
                o.insert("namespace".into(), c.namespace.clone().into());
                o.insert("successes".into(), c.successes.into());
                let list = |rs: &[PolicyResult]| Json::Array(rs.iter().map(result).collect());
                if !c.warnings.is_empty() {
                    o.insert("warnings".into(), list(&c.warnings));
                }
                if !c.failures.is_empty() {
                    o.insert("failures".into(), list(&c.failures));
                }
                if !c.exceptions.is_empty() {
                    let ex = c
                        .exceptions
                        .iter()
                        .map(|q| serde_json::json!({ "msg": q }))
                        .collect();
                    o.insert("exceptions".into(), Json::Array(ex));
                }
                Json::Object(o)
            })
            .collect();
        Json::Array(checks)
    }
}

/// Whether `ns` matches the pattern (`*` any run of characters, dots included; `?` one).
pub fn glob_match(pattern: &str, ns: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some(('?', rest)) => !s.is_empty() && go(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = ns.chars().collect();
    // Patterns and names are short; the recursion is bounded by their lengths.
    p.len() <= 256 && s.len() <= 256 && go(&p, &s)
}

impl PolicySet {
    /// Evaluates every selected namespace over `input` (a JSON object: conftest splits a top-level
    /// array, gpuctl's input never is one).
    pub fn evaluate(&self, input: &Json, opts: &Options) -> Result<Report, PolicyError> {
        let mut engine = self.engine.clone();
        engine.set_input(regorus::Value::from(input.clone()));
        let mut checks = Vec::new();
        for ns in self.namespaces() {
            let selected =
                opts.all_namespaces || opts.namespaces.iter().any(|p| glob_match(p, &ns));
            if selected {
                checks.push(self.check_namespace(&mut engine, &ns)?);
            }
        }
        Ok(Report { checks })
    }

    fn check_namespace(
        &self,
        engine: &mut regorus::Engine,
        ns: &str,
    ) -> Result<CheckResult, PolicyError> {
        let defs: Vec<&RuleDef> = self
            .rules
            .iter()
            .filter(|r| r.namespace == ns && check::rule_class(&r.name).is_some())
            .collect();
        let mut names: Vec<&str> = Vec::new();
        for d in &defs {
            if !names.contains(&d.name.as_str()) {
                names.push(&d.name);
            }
        }
        let mut check = CheckResult {
            namespace: ns.to_string(),
            successes: 0,
            failures: Vec::new(),
            warnings: Vec::new(),
            exceptions: Vec::new(),
        };
        let mut passed = 0;
        for name in names {
            let def = defs.iter().find(|d| d.name == name).copied();
            let kind = check::rule_class(name).unwrap_or(Kind::Failure);
            let exception = exception_query(ns, name);
            if self.exception_matches(engine, ns, &exception)? {
                check.exceptions.push(exception);
                continue;
            }
            let query = format!("data.{ns}.{name}");
            let value = engine
                .eval_rule(query.clone())
                .map_err(|e| PolicyError::Eval {
                    query: query.clone(),
                    message: e.to_string(),
                })?;
            let results = results_of(&query, &value, def)?;
            if results.is_empty() {
                passed += 1;
            }
            for r in results {
                if r.msg.is_empty() {
                    passed += 1;
                    continue;
                }
                match kind {
                    Kind::Failure => check.failures.push(PolicyResult { kind, ..r }),
                    Kind::Warning => check.warnings.push(PolicyResult { kind, ..r }),
                }
            }
        }
        // conftest: one success per rule that passed; rules defined more than once count each
        // definition, "the difference were successful results".
        let counted = check.failures.len() + check.warnings.len() + check.exceptions.len() + passed;
        check.successes = passed + defs.len().saturating_sub(counted);
        Ok(check)
    }

    /// Whether `data.<ns>.exception[_][_] == "<name>"` holds (conftest's query, verbatim).
    fn exception_matches(
        &self,
        engine: &mut regorus::Engine,
        ns: &str,
        query: &str,
    ) -> Result<bool, PolicyError> {
        if !self
            .rules
            .iter()
            .any(|r| r.namespace == ns && r.name == "exception")
        {
            return Ok(false);
        }
        let results =
            engine
                .eval_query(query.to_string(), false)
                .map_err(|e| PolicyError::Eval {
                    query: query.to_string(),
                    message: e.to_string(),
                })?;
        Ok(results.result.iter().any(|r| {
            r.expressions
                .iter()
                .any(|e| e.value == regorus::Value::Bool(true))
        }))
    }
}

/// conftest's exception query for a rule: the rule name without its `deny_`/`violation_`/`warn_`
/// prefix (`""` for the bare names).
fn exception_query(ns: &str, rule: &str) -> String {
    let bare = if matches!(rule, "deny" | "violation" | "warn") {
        ""
    } else {
        ["violation_", "deny_", "warn_"]
            .iter()
            .fold(rule, |r, p| r.strip_prefix(p).unwrap_or(r))
    };
    format!(
        "data.{ns}.exception[_][_] == {}",
        serde_json::Value::from(bare)
    )
}

/// A rule's value as results: a set (or array) of strings and `{"msg": ...}` objects. Undefined
/// is no result. gpuctl refuses what conftest would pass silently: a boolean or single value
/// (`deny if { ... }` is `true` under regorus and a pass under conftest whatever its body says),
/// and members that are neither strings nor objects.
fn results_of(
    query: &str,
    value: &regorus::Value,
    def: Option<&RuleDef>,
) -> Result<Vec<PolicyResult>, PolicyError> {
    let place = def.map_or_else(String::new, |d| format!("{}:{}: ", d.file, d.line));
    let refuse = |message: String| PolicyError::Eval {
        query: query.to_string(),
        message: format!("{place}{message}"),
    };
    let items: Vec<Json> = match value {
        regorus::Value::Undefined => return Ok(Vec::new()),
        regorus::Value::Set(_) | regorus::Value::Array(_) => match check::to_json(value) {
            Json::Array(items) => items,
            _ => Vec::new(),
        },
        other => {
            let boolean = def.is_some_and(|d| d.kind == HeadKind::Complete && d.valueless);
            return Err(refuse(if boolean {
                "a boolean rule (`name if { ... }`): conftest counts it as passed whatever its body says, gpuctl refuses it; write `name contains msg if { ... }`".into()
            } else {
                format!(
                    "the rule's value is {}, not a set of messages; write `name contains msg if {{ ... }}`",
                    check::to_json(other)
                )
            }));
        }
    };
    let mut out = Vec::new();
    for item in items {
        let mut metadata = Map::new();
        let (msg, loc) = match item {
            Json::String(s) => (s, None),
            Json::Object(mut o) => {
                let Some(Json::String(msg)) = o.remove("msg") else {
                    return Err(refuse("`msg` field must be present and a string".into()));
                };
                let loc = o.remove("_loc").and_then(|l| parse_loc(&l));
                metadata = o;
                (msg, loc)
            }
            other => {
                return Err(refuse(format!(
                    "a result is {other}: results are strings or objects with a string `msg`"
                )));
            }
        };
        metadata.insert("query".into(), query.into());
        out.push(PolicyResult {
            kind: Kind::Failure,
            msg,
            loc,
            metadata,
        });
    }
    Ok(out)
}

fn parse_loc(v: &Json) -> Option<Loc> {
    let o = v.as_object()?;
    Some(Loc {
        file: o
            .get("file")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_string(),
        line: o.get("line").and_then(Json::as_u64),
    })
}
