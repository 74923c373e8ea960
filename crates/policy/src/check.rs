//! What conftest refuses when it loads policies and regorus does not (../shared/reference/ci-gate.md
//! §3): read from the parsed modules before anything is evaluated, so a gate never passes a
//! policy conftest would have refused.
//!
//! - `deny[msg] if { ... }`: under Rego v1 a partial *object*, not a set of messages; conftest
//!   refuses it ("rule is using 'if' keyword without 'contains' keyword"), regorus loads it.
//! - A call of a function that is neither a built-in regorus provides nor a function of the
//!   policies: OPA's type check refuses it at load ("undefined function"); regorus fails only when
//!   the call is reached, so a rule whose body fails earlier would hide it.
//! - A rule name defined as two kinds (a set in one place, a single value in another): OPA refuses
//!   it at compile time ("conflicting rules"); regorus reports it only when evaluated.

use std::collections::{BTreeMap, BTreeSet};

use regorus::Value;
use regorus::unstable::{BUILTINS, Expr, Literal, Module, Query, Ref, Rule, RuleHead};

use crate::PolicyError;

/// The kind of a rule head, as far as conftest's conventions care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadKind {
    /// `name contains x` (or the v0 `name[x]`): a set of results.
    Set,
    /// `name if { ... }` or `name := value`: one value (a boolean `deny` is one).
    Complete,
    /// `name[k] := v`, `name[k] if`: an object.
    Object,
    /// `name(args)`: a function.
    Function,
}

/// One rule definition of a module: its package (without `data.`), name, kind and place.
#[derive(Debug, Clone)]
pub struct RuleDef {
    /// `main`, `k8s.gpu`.
    pub namespace: String,
    /// The head's first name (`deny_quota`).
    pub name: String,
    /// What the head declares.
    pub kind: HeadKind,
    /// The policy file.
    pub file: String,
    /// Line of the head.
    pub line: u32,
    /// Whether the head had no value (`deny[msg] if`, `deny if`: the value is `true`).
    pub valueless: bool,
}

/// A reference as a list of names (`data.lib.f` -> `["data", "lib", "f"]`), when it is one.
pub fn ref_path(expr: &Expr) -> Option<Vec<String>> {
    match expr {
        Expr::Var { value, .. } => Some(vec![value.as_string().ok()?.to_string()]),
        Expr::RefDot { refr, field, .. } => {
            let mut p = ref_path(refr)?;
            p.push(field.1.as_string().ok()?.to_string());
            Some(p)
        }
        Expr::RefBrack { refr, index, .. } => {
            let mut p = ref_path(refr)?;
            match &**index {
                Expr::String { value, .. } | Expr::RawString { value, .. } => {
                    p.push(value.as_string().ok()?.to_string());
                }
                _ => p.push("[_]".into()),
            }
            Some(p)
        }
        _ => None,
    }
}

/// The package of a module, without `data.`.
pub fn namespace(module: &Module) -> String {
    let path = ref_path(&module.package.refr).unwrap_or_default();
    let path = match path.first().map(String::as_str) {
        Some("data") => &path[1..],
        _ => &path[..],
    };
    path.join(".")
}

/// Every rule definition of `modules`, in file order.
pub fn rule_defs(modules: &[Ref<Module>]) -> Vec<RuleDef> {
    let mut out = Vec::new();
    for module in modules {
        let ns = namespace(module);
        for rule in &module.policy {
            let Rule::Spec { head, bodies, .. } = &**rule else {
                continue;
            };
            let (span, refr, kind, valueless) = match head {
                RuleHead::Set { span, refr, .. } => (span, refr, HeadKind::Set, false),
                RuleHead::Func { span, refr, .. } => (span, refr, HeadKind::Function, false),
                RuleHead::Compr { span, refr, assign } => {
                    let valueless = assign.is_none() && bodies.iter().all(|b| b.assign.is_none());
                    let kind = if matches!(&**refr, Expr::RefBrack { .. }) {
                        HeadKind::Object
                    } else {
                        HeadKind::Complete
                    };
                    (span, refr, kind, valueless)
                }
            };
            let Some(name) = ref_path(refr).and_then(|p| p.into_iter().next()) else {
                continue;
            };
            out.push(RuleDef {
                namespace: ns.clone(),
                name,
                kind,
                file: span.source.file().to_string(),
                line: span.line,
                valueless,
            });
        }
    }
    out
}

/// conftest's rule names: `deny`, `violation` and their `_suffix` forms fail, `warn` and its forms
/// warn (`^(deny|violation)(_[a-zA-Z0-9]+)*$`, `^warn(_[a-zA-Z0-9]+)*$`).
pub fn rule_class(name: &str) -> Option<crate::Kind> {
    let suffix_ok = |rest: &str| {
        rest.is_empty()
            || (rest.starts_with('_')
                && rest[1..]
                    .split('_')
                    .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_alphanumeric())))
    };
    for (prefix, kind) in [
        ("deny", crate::Kind::Failure),
        ("violation", crate::Kind::Failure),
        ("warn", crate::Kind::Warning),
    ] {
        if let Some(rest) = name.strip_prefix(prefix)
            && suffix_ok(rest)
        {
            return Some(kind);
        }
    }
    None
}

/// Refuses what conftest refuses at load: `deny[msg] if` without `contains`, one name defined as
/// two kinds in a package, and calls of undefined functions.
pub fn conftest_load_checks(modules: &[Ref<Module>]) -> Result<(), PolicyError> {
    let defs = rule_defs(modules);
    for d in &defs {
        if d.kind == HeadKind::Object && d.valueless && rule_class(&d.name).is_some() {
            return Err(PolicyError::Refused {
                file: d.file.clone(),
                line: d.line,
                message: format!(
                    "rule is using 'if' keyword without 'contains' keyword: `{name}[...] if` is an object under Rego v1, not a set of messages (conftest refuses it too); write `{name} contains msg if`",
                    name = d.name
                ),
            });
        }
    }
    let mut kinds: BTreeMap<(&str, &str), (HeadKind, &RuleDef)> = BTreeMap::new();
    for d in &defs {
        let key = (d.namespace.as_str(), d.name.as_str());
        match kinds.get(&key) {
            Some((kind, first)) if *kind != d.kind => {
                return Err(PolicyError::Refused {
                    file: d.file.clone(),
                    line: d.line,
                    message: format!(
                        "conflicting rules: `{}` is defined as another kind of rule at {}:{} (OPA refuses this when it compiles)",
                        d.name, first.file, first.line
                    ),
                });
            }
            Some(_) => {}
            None => {
                kinds.insert(key, (d.kind, d));
            }
        }
    }
    let names: BTreeSet<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    for module in modules {
        let aliases = import_aliases(module);
        for rule in &module.policy {
            check_rule_calls(rule, &names, &aliases)?;
        }
    }
    Ok(())
}

/// The first names imports bind (`import data.lib` binds `lib`; `import data.lib as l`, `l`).
fn import_aliases(module: &Module) -> BTreeSet<String> {
    module
        .imports
        .iter()
        .filter_map(|i| match &i.r#as {
            Some(span) => Some(span.text().to_string()),
            None => ref_path(&i.refr).and_then(|p| p.last().cloned()),
        })
        .collect()
}

fn check_rule_calls(
    rule: &Rule,
    names: &BTreeSet<&str>,
    aliases: &BTreeSet<String>,
) -> Result<(), PolicyError> {
    let mut exprs: Vec<&Expr> = Vec::new();
    match rule {
        Rule::Spec { head, bodies, .. } => {
            match head {
                RuleHead::Compr { refr, assign, .. } => {
                    exprs.push(refr);
                    exprs.extend(assign.iter().map(|a| &*a.value));
                }
                RuleHead::Set { refr, key, .. } => {
                    exprs.push(refr);
                    exprs.extend(key.iter().map(|k| &**k));
                }
                RuleHead::Func {
                    refr, args, assign, ..
                } => {
                    exprs.push(refr);
                    exprs.extend(args.iter().map(|a| &**a));
                    exprs.extend(assign.iter().map(|a| &*a.value));
                }
            }
            for body in bodies {
                exprs.extend(body.assign.iter().map(|a| &*a.value));
                query_exprs(&body.query, &mut exprs);
            }
        }
        Rule::Default { value, .. } => exprs.push(value),
    }
    while let Some(e) = exprs.pop() {
        if let Expr::Call { fcn, span, .. } = e {
            check_call(fcn, span, names, aliases)?;
        }
        children(e, &mut exprs);
    }
    Ok(())
}

fn check_call(
    fcn: &Expr,
    span: &regorus::unstable::Span,
    names: &BTreeSet<&str>,
    aliases: &BTreeSet<String>,
) -> Result<(), PolicyError> {
    let Some(path) = ref_path(fcn) else {
        return Ok(());
    };
    let dotted = path.join(".");
    if dotted == "print" || BUILTINS.contains_key(dotted.as_str()) {
        return Ok(());
    }
    let first = path.first().map(String::as_str).unwrap_or_default();
    let last = path.last().map(String::as_str).unwrap_or_default();
    let user = if path.len() == 1 {
        names.contains(first)
    } else {
        (first == "data" || aliases.contains(first)) && names.contains(last)
    };
    if user {
        return Ok(());
    }
    Err(PolicyError::Refused {
        file: span.source.file().to_string(),
        line: span.line,
        message: format!(
            "undefined function {dotted}: neither a built-in gpuctl's Rego engine provides nor a function of the policies (OPA refuses it at load; built-ins gpuctl leaves out are listed in docs/policy.md)"
        ),
    })
}

fn query_exprs<'a>(query: &'a Query, out: &mut Vec<&'a Expr>) {
    for stmt in &query.stmts {
        match &stmt.literal {
            Literal::SomeVars { .. } => {}
            Literal::SomeIn {
                key,
                value,
                collection,
                ..
            } => {
                out.extend(key.iter().map(|k| &**k));
                out.push(value);
                out.push(collection);
            }
            Literal::Expr { expr, .. } | Literal::NotExpr { expr, .. } => out.push(expr),
            Literal::Every { domain, query, .. } => {
                out.push(domain);
                query_exprs(query, out);
            }
        }
        for w in &stmt.with_mods {
            out.push(&w.refr);
            out.push(&w.r#as);
        }
    }
}

fn children<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Array { items, .. } | Expr::Set { items, .. } => {
            out.extend(items.iter().map(|i| &**i));
        }
        Expr::Object { fields, .. } => {
            for (_, k, v) in fields {
                out.push(k);
                out.push(v);
            }
        }
        Expr::ArrayCompr { term, query, .. } | Expr::SetCompr { term, query, .. } => {
            out.push(term);
            query_exprs(query, out);
        }
        Expr::ObjectCompr {
            key, value, query, ..
        } => {
            out.push(key);
            out.push(value);
            query_exprs(query, out);
        }
        Expr::Call { params, .. } => out.extend(params.iter().map(|p| &**p)),
        Expr::UnaryExpr { expr, .. } => out.push(expr),
        Expr::RefDot { refr, .. } => out.push(refr),
        Expr::RefBrack { refr, index, .. } => {
            out.push(refr);
            out.push(index);
        }
        Expr::BinExpr { lhs, rhs, .. }
        | Expr::BoolExpr { lhs, rhs, .. }
        | Expr::ArithExpr { lhs, rhs, .. }
        | Expr::AssignExpr { lhs, rhs, .. } => {
            out.push(lhs);
            out.push(rhs);
        }
        Expr::Membership {
            key,
            value,
            collection,
            ..
        } => {
            out.extend(key.iter().map(|k| &**k));
            out.push(value);
            out.push(collection);
        }
        _ => {}
    }
}

/// A regorus value as JSON (a set becomes an array, as OPA writes one).
pub fn to_json(v: &Value) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}
