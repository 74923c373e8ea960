//! Where regorus is laxer than conftest (../shared/reference/ci-gate.md §3), gpuctl refuses what
//! conftest refuses and fails on every evaluation error: one test each. And conftest's
//! conventions: rule names, namespaces, object messages, exceptions, data files, unit tests.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::verify::Outcome;
use crate::{Kind, Options, PolicyError, PolicySet};

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

fn load(files: &[(&str, &str)]) -> Result<PolicySet, PolicyError> {
    let dir = dir_with(files);
    PolicySet::load(&[dir.path().to_path_buf()], &[])
}

fn msgs(set: &PolicySet, input: serde_json::Value, opts: &Options) -> Vec<(Kind, String)> {
    let report = set.evaluate(&input, opts).unwrap();
    report.results().map(|r| (r.kind, r.msg.clone())).collect()
}

#[test]
fn deny_violation_warn_and_suffixes_are_queried_others_are_not() {
    let set = load(&[(
        "p.rego",
        r#"package main
deny contains "d" if input.x
violation contains {"msg": "v"} if input.x
warn_big contains "w" if input.x
deny_a_b1 contains "s" if input.x
denyX contains "not a rule" if input.x
warning contains "not a rule either" if input.x
helper := 1
"#,
    )])
    .unwrap();
    let got = msgs(&set, json!({"x": true}), &Options::default());
    assert_eq!(
        got,
        vec![
            (Kind::Failure, "d".into()),
            (Kind::Failure, "v".into()),
            (Kind::Failure, "s".into()),
            (Kind::Warning, "w".into()),
        ]
    );
    // Nothing holds: every rule passes, counted as conftest counts (one per definition).
    let report = set
        .evaluate(&json!({"x": false}), &Options::default())
        .unwrap();
    assert_eq!(report.checks[0].successes, 4);
}

#[test]
fn deny_msg_if_without_contains_is_refused_as_conftest_refuses_it() {
    // regorus loads it as a partial object; conftest: "rule is using 'if' keyword without
    // 'contains' keyword".
    let err = load(&[(
        "p.rego",
        "package main\n\ndeny[msg] if {\n  msg := \"x\"\n}\n",
    )])
    .unwrap_err();
    let PolicyError::Refused {
        file,
        line,
        message,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(file.ends_with("p.rego"), "{file}");
    assert_eq!(*line, 3);
    assert!(message.contains("without 'contains'"), "{message}");
}

#[test]
fn a_boolean_deny_is_refused_where_conftest_would_pass_it_silently() {
    let set = load(&[("p.rego", "package main\n\ndeny if {\n  input.x\n}\n")]).unwrap();
    let err = set
        .evaluate(&json!({"x": true}), &Options::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("boolean rule") && err.to_string().contains("p.rego:3"),
        "{err}"
    );
    // Undefined (the body does not hold) is no result, as for a set.
    assert!(
        set.evaluate(&json!({"x": false}), &Options::default())
            .is_ok()
    );
}

#[test]
fn an_unknown_builtin_is_refused_at_load_even_where_no_input_reaches_it() {
    // regorus: "could not find function" only when the call is evaluated; this body fails before it.
    let err = load(&[(
        "lib/p.rego",
        "package main\n\ndeny contains msg if {\n  input.never\n  msg := strings.split_n(\"a.b\", \".\", 1)[0]\n}\n",
    )])
    .unwrap_err();
    let PolicyError::Refused { line, message, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*line, 5);
    assert!(
        message.contains("undefined function strings.split_n"),
        "{message}"
    );
    // User functions, imported packages and built-ins are defined.
    load(&[
        (
            "a.rego",
            "package main\nimport data.lib\nimport data.lib as l2\ndeny contains msg if {\n  msg := lib.fmt(l2.fmt(upper(input.x)))\n  f(1)\n}\nf(x) if x > 0\n",
        ),
        ("b.rego", "package lib\nfmt(s) := sprintf(\"%s!\", [s])\n"),
    ])
    .unwrap();
}

#[test]
fn conflicting_rules_fail_the_run_at_load_or_evaluation() {
    // Two kinds of one name: OPA refuses at compile time, so does gpuctl.
    let err = load(&[(
        "p.rego",
        "package main\ndeny contains \"a\" if true\ndeny := {\"b\"}\n",
    )])
    .unwrap_err();
    assert!(err.to_string().contains("conflicting rules"), "{err}");
    // Two values of one complete rule: an evaluation error in OPA too; never a pass.
    let set = load(&[(
        "p.rego",
        "package main\nlimit := 1 if input.x\nlimit := 2 if input.x\ndeny contains \"over\" if limit > 0\n",
    )])
    .unwrap();
    let err = set
        .evaluate(&json!({"x": true}), &Options::default())
        .unwrap_err();
    assert!(matches!(err, PolicyError::Eval { .. }), "{err:?}");
}

#[test]
fn runtime_errors_fail_the_run_naming_file_and_line() {
    let set = load(&[(
        "p.rego",
        "package main\n\ndeny contains msg if {\n  msg := sprintf(\"%d\", [1 / input.zero])\n}\n",
    )])
    .unwrap();
    let err = set
        .evaluate(&json!({"zero": 0}), &Options::default())
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("data.main.deny") && text.contains("p.rego:4"),
        "{text}"
    );
}

#[test]
fn a_parse_error_names_file_and_line() {
    let err = load(&[(
        "bad.rego",
        "package main\n\ndeny contains msg if {\n  msg := \n",
    )])
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("bad.rego:"), "{text}");
}

#[test]
fn object_messages_lift_loc_and_keep_metadata() {
    let set = load(&[(
        "p.rego",
        r#"package main
deny contains {"msg": "m", "_loc": {"file": "bp.yaml", "line": 7}, "rule": "R1"} if true
"#,
    )])
    .unwrap();
    let report = set.evaluate(&json!({}), &Options::default()).unwrap();
    let r = report.results().next().unwrap();
    assert_eq!(r.loc.as_ref().unwrap().line, Some(7));
    assert_eq!(r.metadata["rule"], "R1");
    assert_eq!(r.metadata["query"], "data.main.deny");
    let located = crate::finding::located(r);
    assert_eq!(located.rule, "GPU500");
    assert_eq!(located.pos.unwrap().line, 7);
    // An object without a string msg is an error, as in conftest.
    let set = load(&[("p.rego", "package main\ndeny contains {\"m\": 1} if true\n")]).unwrap();
    let err = set.evaluate(&json!({}), &Options::default()).unwrap_err();
    assert!(err.to_string().contains("`msg` field"), "{err}");
}

#[test]
fn namespaces_default_to_main_and_match_globs() {
    let set = load(&[
        ("a.rego", "package main\ndeny contains \"main\" if true\n"),
        (
            "b.rego",
            "package k8s.gpu.quota\ndeny contains \"quota\" if true\n",
        ),
        ("c.rego", "package other\nwarn contains \"other\" if true\n"),
    ])
    .unwrap();
    let only = |opts: Options| -> Vec<String> {
        msgs(&set, json!({}), &opts)
            .into_iter()
            .map(|(_, m)| m)
            .collect()
    };
    assert_eq!(only(Options::default()), ["main"]);
    let ns = |n: &[&str]| Options {
        namespaces: n.iter().map(|s| s.to_string()).collect(),
        all_namespaces: false,
    };
    assert_eq!(only(ns(&["k8s.*"])), ["quota"]);
    assert_eq!(only(ns(&["othe?", "main"])), ["main", "other"]);
    let all = Options {
        namespaces: vec![],
        all_namespaces: true,
    };
    assert_eq!(only(all), ["quota", "main", "other"]);
}

#[test]
fn exceptions_drop_every_result_of_the_named_rule() {
    let set = load(&[(
        "p.rego",
        r#"package main
deny_quota contains "q" if true
deny contains "d" if true
exception contains rules if {
  input.allow
  rules := ["quota"]
}
"#,
    )])
    .unwrap();
    let report = set
        .evaluate(&json!({"allow": true}), &Options::default())
        .unwrap();
    assert_eq!(
        report.results().map(|r| r.msg.as_str()).collect::<Vec<_>>(),
        ["d"]
    );
    assert_eq!(
        report.checks[0].exceptions,
        ["data.main.exception[_][_] == \"quota\""]
    );
}

#[test]
fn data_files_land_under_their_directories() {
    let policy = dir_with(&[(
        "p.rego",
        "package main\ndeny contains sprintf(\"%v %v\", [data.limits.max, data.sub.team.name]) if true\n",
    )]);
    let data = dir_with(&[
        ("root.json", "{\"limits\": {\"max\": 64}}"),
        ("sub/team.yaml", "team:\n  name: dev\n"),
    ]);
    let set =
        PolicySet::load(&[policy.path().to_path_buf()], &[data.path().to_path_buf()]).unwrap();
    assert_eq!(
        msgs(&set, json!({}), &Options::default()),
        [(Kind::Failure, "64 dev".to_string())]
    );
}

#[test]
fn unit_tests_pass_fail_and_skip() {
    let set = load(&[(
        "p_test.rego",
        r#"package main
deny contains "big" if input.n > 64
test_big_denied if { deny["big"] with input as {"n": 65} }
test_wrong if { count(deny) == 1 with input as {"n": 1} }
todo_test_later if false
"#,
    )])
    .unwrap();
    let got: Vec<(String, Outcome)> = set
        .run_tests()
        .into_iter()
        .map(|t| (t.query, t.outcome))
        .collect();
    assert_eq!(got[0], ("data.main.test_big_denied".into(), Outcome::Pass));
    assert!(matches!(got[1].1, Outcome::Fail(_)), "{got:?}");
    assert_eq!(got[2].1, Outcome::Skip);
}

#[test]
fn hostile_directories_are_refused_with_their_path() {
    let big = "#".repeat(crate::load::MAX_FILE_BYTES as usize + 1);
    let err = load(&[("big.rego", &big)]).unwrap_err();
    assert!(err.to_string().contains("big.rego"), "{err}");
    let err = load(&[("x.txt", "hello")]).unwrap_err();
    assert!(err.to_string().contains("no .rego file"), "{err}");
    let err = PolicySet::load(&[PathBuf::from("/nonexistent/policies")], &[]).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/policies"), "{err}");
}

#[test]
fn deep_nesting_is_refused_before_regorus_parses_it() {
    // regorus' parser is exponential in the nesting of `[` and `{`: 500 levels would never end.
    let deep = format!(
        "package main\n\nx := {}{}\n",
        "[".repeat(500),
        "]".repeat(500)
    );
    let err = load(&[("deep.rego", &deep)]).unwrap_err();
    assert!(
        err.to_string().contains("deep.rego:3") && err.to_string().contains("nested deeper"),
        "{err}"
    );
    // Brackets in strings and comments do not count; twelve levels load.
    let fine = format!(
        "package main\n# {}\ny := \"{}\"\nx := {}{}\n",
        "[".repeat(50),
        "{".repeat(50),
        "[".repeat(12),
        "]".repeat(12)
    );
    load(&[("fine.rego", &fine)]).unwrap();
}

#[test]
fn the_example_policies_load_and_their_tests_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies");
    let set = PolicySet::load(std::slice::from_ref(&dir), &[dir.join("data")]).unwrap();
    let failed: Vec<_> = set
        .run_tests()
        .into_iter()
        .filter(|t| t.outcome != Outcome::Pass)
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}
