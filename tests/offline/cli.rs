//! The real `gpuctl` binary: exit codes, formats, usage errors.

use std::process::Output;

use crate::support::gpuctl::{Gpuctl, TODAY};

fn gpuctl(args: &[&str]) -> Output {
    Gpuctl::new(args)
        .today(TODAY)
        .env_remove("NO_COLOR")
        .output()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

#[test]
fn valid_blueprint_exits_zero() {
    let o = gpuctl(&["validate", "blueprints/dgx-h100-training.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("0 errors"), "{}", stdout(&o));
}

#[test]
fn errors_exit_one_and_strict_fails_on_warnings() {
    let o = gpuctl(&["validate", "blueprints/mixed-lab.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    // The fixed file switches the operator's driver off on its RTX 4090 pool: no warning left,
    // valid even under --strict.
    let o = gpuctl(&["validate", "blueprints/mixed-lab-fixed.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("0 warnings"), "{}", stdout(&o));
    let o = gpuctl(&["validate", "--strict", "blueprints/mixed-lab-fixed.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    // Without that switch the consumer-GPU warning (GPU029) comes back: fine normally, fatal
    // under --strict.
    let fixed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/blueprints/mixed-lab-fixed.yaml"
    ))
    .expect("fixed example");
    let line =
        "      operands: { driver: false }   # GeForce: the host brings its driver (GPU029)\n";
    assert!(fixed.contains(line), "the example switches the driver off");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mixed-lab-driver-on.yaml");
    std::fs::write(&path, fixed.replace(line, "")).expect("write");
    let path = path.to_str().expect("utf-8 path");
    let o = gpuctl(&["validate", path]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("GPU029"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("operands: {driver: false}"),
        "{}",
        stdout(&o)
    );
    let o = gpuctl(&["validate", "--strict", path]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn usage_errors_exit_64() {
    assert_eq!(gpuctl(&["validate"]).status.code(), Some(64));
    assert_eq!(gpuctl(&["frobnicate"]).status.code(), Some(64));
    assert_eq!(
        gpuctl(&["validate", "-o", "xml", "x.yaml"]).status.code(),
        Some(64)
    );
    assert_eq!(gpuctl(&["explain", "GPU999"]).status.code(), Some(64));
    assert_eq!(gpuctl(&["--help"]).status.code(), Some(0));
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `text` to a blueprint file in a fresh directory (kept alive by the returned guard).
fn blueprint_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bp.yaml");
    std::fs::write(&path, text).expect("write");
    let path = path.to_str().expect("utf-8 path").to_string();
    (dir, path)
}

/// Issue 12: a blueprint that is not there is an input error (as an unreadable snapshot is), not
/// a YAML syntax finding, for every command that reads one.
#[test]
fn missing_blueprint_is_an_input_error_like_any_other() {
    let snapshot = gpuctl(&[
        "plan",
        "blueprints/dgx-h100-training.yaml",
        "--snapshot",
        "does/not/exist.json",
    ]);
    assert!(
        stderr(&snapshot)
            .starts_with("error: snapshot `does/not/exist.json`: cannot read the file"),
        "{}",
        stderr(&snapshot)
    );
    for args in [
        vec!["validate", "does/not/exist.yaml"],
        vec!["validate", "-o", "json", "does/not/exist.yaml"],
        vec![
            "validate",
            "blueprints/dgx-h100-training.yaml",
            "does/not/exist.yaml",
        ],
        vec!["render", "does/not/exist.yaml"],
        vec!["plan", "does/not/exist.yaml", "--offline"],
        vec![
            "upgrade",
            "driver",
            "does/not/exist.yaml",
            "--pool",
            "a",
            "--to",
            "580.1.1",
        ],
    ] {
        let o = gpuctl(&args);
        assert_eq!(
            o.status.code(),
            snapshot.status.code(),
            "{args:?}: {}",
            stderr(&o)
        );
        let err = stderr(&o);
        assert!(
            err.starts_with("error: blueprint `does/not/exist.yaml`: cannot read the file")
                && err.contains("check the path and permissions"),
            "{args:?}: {err}"
        );
        assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
        assert!(
            !err.contains("GPU001") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}

/// Issue 12: the message says what the value must be, then what the file has.
#[test]
fn api_version_message_says_what_it_must_be() {
    let text = std::fs::read_to_string("blueprints/dgx-h100-training.yaml")
        .expect("example")
        .replace(
            "apiVersion: gpuctl.dev/v1alpha1",
            "apiVersion: gpuctl.dev/v1",
        );
    let (_dir, path) = blueprint_file(&text);
    let o = gpuctl(&["validate", "-o", "json", &path]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let messages: Vec<&str> = v["files"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["message"].as_str())
        .collect();
    assert_eq!(
        messages,
        ["apiVersion must be `gpuctl.dev/v1alpha1`, not `gpuctl.dev/v1`"],
        "{}",
        stdout(&o)
    );
}

/// Issue 12: the kubeconfig path is printed once, in one pair of quotes.
#[test]
fn kubeconfig_path_is_quoted_once() {
    let o = gpuctl(&[
        "plan",
        "blueprints/dgx-h100-training.yaml",
        "--kubeconfig",
        "/does/not/exist/kubeconfig",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("cannot load the kubeconfig `/does/not/exist/kubeconfig`: No such file"),
        "{err}"
    );
    assert_eq!(
        err.matches("/does/not/exist/kubeconfig").count(),
        1,
        "{err}"
    );
    assert!(!err.contains("'\""), "{err}");
}

/// Issue 12: an unclosed `[` names the line it was opened on as well as where parsing stopped.
#[test]
fn unclosed_bracket_names_the_line_it_was_opened_on() {
    let text = std::fs::read_to_string("blueprints/dgx-h100-training.yaml").expect("example");
    // The first tenant's namespace list loses its `]`.
    let start = text.find("namespaces: [").expect("a namespace list");
    let line = text[..start].matches('\n').count() + 1;
    let column = start - text[..start].rfind('\n').map_or(0, |i| i + 1) + 1 + "namespaces: ".len();
    let end = start + text[start..].find(']').expect("closing bracket");
    let broken = format!("{}{}", &text[..end], &text[end + 1..]);
    let (_dir, path) = blueprint_file(&broken);
    let o = gpuctl(&["validate", "-o", "json", &path]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let f = &v["files"][0]["findings"][0];
    assert_eq!(f["rule"], "GPU001", "{out}");
    let opened =
        format!("inside the `[` opened at line {line}, column {column}: is its `]` missing?");
    assert!(
        f["message"].as_str().unwrap_or_default().contains(&opened),
        "want {opened:?} in {out}"
    );
    // And the place the parser gave up, a later line.
    let gave_up = f["pos"]["line"].as_u64().expect("a line") as usize;
    assert!(
        gave_up > line,
        "gave up at {gave_up}, opened at {line}: {out}"
    );
}

#[test]
fn json_is_versioned_and_counts_findings() {
    let o = gpuctl(&["validate", "-o", "json", "blueprints/mixed-lab.yaml"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["format_version"], 1);
    let findings = v["files"][0]["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    assert_eq!(
        v["summary"]["errors"].as_u64().unwrap() as usize,
        findings.iter().filter(|f| f["severity"] == "error").count()
    );
    for f in findings {
        assert!(f["pos"]["line"].as_u64().unwrap() > 0, "{f}");
    }
}

#[test]
fn sarif_is_2_1_0_with_rules_and_regions() {
    let o = gpuctl(&["validate", "-o", "sarif", "blueprints/mixed-lab.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["version"], "2.1.0");
    let run = &v["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let results = run["results"].as_array().unwrap();
    assert!(!results.is_empty());
    for r in results {
        let idx = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[idx]["id"], r["ruleId"]);
        assert!(
            r["locations"][0]["physicalLocation"]["region"]["startLine"]
                .as_u64()
                .unwrap()
                > 0
        );
        assert_eq!(
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "blueprints/mixed-lab.yaml"
        );
    }
}

#[test]
fn explain_schema_profiles_and_completions() {
    let o = gpuctl(&["explain", "gpu050"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("requests.<name>"), "{}", stdout(&o));

    let o = gpuctl(&["schema"]);
    let schema: serde_json::Value = serde_json::from_slice(&o.stdout).expect("schema is json");
    assert!(schema["properties"]["spec"].is_object(), "{schema}");
    // nodePools[].operands is in the schema, with every operand switch and nothing else.
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .expect("schema definitions");
    assert!(
        defs["NodePool"]["properties"]["operands"].is_object(),
        "{}",
        defs["NodePool"]
    );
    let operands: Vec<&str> = defs["Operands"]["properties"]
        .as_object()
        .expect("Operands properties")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        operands,
        [
            "driver",
            "containerToolkit",
            "devicePlugin",
            "gpuFeatureDiscovery",
            "dcgm",
            "dcgmExporter",
            "migManager",
            "nodeStatusExporter",
            "operatorValidator"
        ]
    );
    assert_eq!(defs["Operands"]["additionalProperties"], false);

    let o = gpuctl(&["profiles"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("H100-SXM5-80GB"));
    // The GPUs a late-2026 cluster has, each on its own row with its MIG summary.
    for (key, mig) in [
        // GB300's MIG floor is the DGX Station's 595.58.03 (the 2026-12 facts audit, D1): the NVL72
        // GB300 shares its PCI id, so the stricter floor applies to the one key.
        ("GB300", "7 profiles, driver >= 595.58.03"),
        ("GH200-144GB", "7 profiles, driver >= 550.90.07"),
        // The MIG user guide's RTX PRO 5000 and 4500 Blackwell tables (issue 26).
        ("RTX-PRO-5000-BLACKWELL", "7 profiles, driver >= 575.57.08"),
        ("RTX-PRO-4500-BLACKWELL", "6 profiles, driver >= 575.64"),
        ("H100-SXM5-94GB", "7 profiles, driver >= 525.85.12"),
        ("A800-SXM4-80GB", "no"),
        ("H800-SXM5-80GB", "no"),
        // GPUs the GPU Operator lists (issue 26); `-` where memory is unpublished, `*` where weak.
        ("L40", "no"),
        ("A2", "no"),
        ("GB10", "no"),
        ("RTX-PRO-6000D", "no"),
    ] {
        let text = stdout(&o);
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("`gpuctl profiles` lists {key}:\n{text}"));
        assert!(row.contains(mig), "{row}");
    }
    let o = gpuctl(&["profiles", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("profiles json");
    let gpu = |key: &str| {
        doc["gpus"]
            .as_array()
            .and_then(|g| g.iter().find(|g| g["key"] == key))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(gpu("GB300")["operator_since"], "v25.10.0");
    assert_eq!(
        gpu("RTX-PRO-6000-BLACKWELL")["mig"]["operator_since"],
        "v25.3.4"
    );
    let v2532 = doc["operator_releases"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["version"] == "v25.3.2"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(v2532["default_driver"], "570.148.08");
    assert_eq!(v2532["docs_default_driver"], "570.172.08");

    let o = gpuctl(&["completions", "bash"]);
    assert!(stdout(&o).contains("gpuctl"));
}

/// Issue 28: `gpuctl explain` knows every family's ids (a doctor finding was refused before), and
/// every id doctor reports on the shipped Day-2 example explains; an unknown id is refused with
/// each family's range.
#[test]
fn explain_knows_every_family_and_every_id_doctor_reports() {
    for (id, family) in [
        ("GPU050", "validation"),
        ("GPU200", "doctor"),
        ("gpu251", "metrics"),
        ("GPU300", "import"),
    ] {
        let o = gpuctl(&["explain", id]);
        assert_eq!(o.status.code(), Some(0), "explain {id}");
        let text = stdout(&o);
        assert!(
            text.starts_with(&format!("## {}\n", id.to_ascii_uppercase()))
                && text.contains(&format!("({family}, "))
                && text.contains("- **Fix:** ")
                && text.contains("- **Facts:** "),
            "{text}"
        );
    }
    let o = gpuctl(&[
        "doctor",
        "blueprints/dgx-h100-training.yaml",
        "--snapshot",
        "blueprints/snapshots/dgx-h100-training-day2.json",
        "-o",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("doctor json");
    let ids: std::collections::BTreeSet<String> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["id"].as_str().expect("id").to_string())
        .collect();
    assert!(ids.len() >= 8, "{ids:?}");
    for id in &ids {
        let o = gpuctl(&["explain", id]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "doctor reports {id}, explain refuses it"
        );
    }
    let o = gpuctl(&["explain", "GPU999"]);
    assert_eq!(o.status.code(), Some(64));
    let err = String::from_utf8_lossy(&o.stderr);
    for range in [
        "validation GPU001..",
        "doctor GPU200..GPU249",
        "metrics GPU250..",
        "import GPU300..",
    ] {
        assert!(err.contains(range), "{err}");
    }
}

#[test]
fn docs_rules_md_is_current() {
    let o = gpuctl(&["explain", "--all"]);
    let on_disk = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/rules.md"))
        .expect("docs/rules.md");
    assert!(
        on_disk == stdout(&o),
        "docs/rules.md is stale: run `cargo run -- explain --all > docs/rules.md`"
    );
}

/// Issue 12: each `upgrade` subcommand's `-o/--output` help says what that subcommand prints; the
/// status help no longer mentions a plan, nor the driver help journals.
#[test]
fn upgrade_format_help_fits_each_subcommand() {
    let section = |args: &[&str]| {
        let o = gpuctl(args);
        assert_eq!(o.status.code(), Some(0));
        let help = stdout(&o);
        let start = help.find("--output <OUTPUT>").expect("a -o/--output flag");
        let rest = &help[start..];
        let end = rest.find("[default: human]").expect("its default");
        rest[..end].split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let status = section(&["upgrade", "status", "--help"]);
    assert_eq!(
        status,
        "--output <OUTPUT> How the recorded upgrades are printed: `human` text, or `json` (each \
         pool's journal and lease as data) Possible values: - human: Text for people - json: JSON \
         for scripts"
    );
    let driver = section(&["upgrade", "driver", "--help"]);
    assert!(
        driver.contains("the plan as data") && !driver.contains("journal"),
        "{driver}"
    );
}

/// Issue 12: the field reference is generated from the blueprint's JSON Schema (the one
/// `gpuctl schema` prints) and must match it.
#[test]
fn docs_blueprint_reference_is_current() {
    let o = gpuctl(&["explain", "--fields"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let generated = stdout(&o);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/blueprint-reference.md");
    if std::env::var_os("GPUCTL_UPDATE_DOCS").is_some() {
        std::fs::write(path, &generated).expect("write docs/blueprint-reference.md");
    }
    let on_disk = std::fs::read_to_string(path).expect("docs/blueprint-reference.md");
    assert!(
        on_disk == generated,
        "docs/blueprint-reference.md is stale: run `cargo run -- explain --fields > docs/blueprint-reference.md` \
         (or this test with GPUCTL_UPDATE_DOCS=1)"
    );
    // Every field that holds a value (not a section) has an example.
    for row in generated.lines().filter(|l| l.starts_with("| `")) {
        assert!(
            row.contains("fields below") || !row.trim_end().ends_with("|  |"),
            "no example: {row}"
        );
    }
    // Every property of the schema `gpuctl schema` prints has a row.
    let schema: serde_json::Value =
        serde_json::from_slice(&gpuctl(&["schema"]).stdout).expect("schema json");
    let mut names = Vec::new();
    collect_property_names(&schema, &mut names);
    for name in names {
        assert!(
            generated.contains(&format!("| `{name}` |"))
                || generated.contains(&format!(".{name}` |")),
            "field `{name}` of the schema is missing from the reference"
        );
    }
}

fn collect_property_names(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::Object(props)) = m.get("properties") {
                out.extend(props.keys().cloned());
            }
            m.values().for_each(|c| collect_property_names(c, out));
        }
        serde_json::Value::Array(items) => {
            items.iter().for_each(|c| collect_property_names(c, out))
        }
        _ => {}
    }
}

#[test]
fn same_input_same_bytes() {
    let a = gpuctl(&[
        "validate",
        "-o",
        "json",
        "blueprints/mixed-lab.yaml",
        "blueprints/inference-mig.yaml",
    ]);
    let b = gpuctl(&[
        "validate",
        "-o",
        "json",
        "blueprints/mixed-lab.yaml",
        "blueprints/inference-mig.yaml",
    ]);
    assert_eq!(a.stdout, b.stdout);
}

/// What users read (help, `explain`, the facts catalog with its sources, the findings on the
/// example blueprints, the README and docs) cites public sources and names cases by what they
/// are: never a problem-statement number or a path outside the repository.
#[test]
fn user_facing_text_cites_no_seeds_or_paths_outside_the_repository() {
    let forbidden = ["shared/", "seeds/", "reference/", ".md §", "[S1", "[S2"];
    // "seed 004", "seed000", "Seed 12": a problem-statement number.
    let cites_seed = |line: &str| {
        let l = line.to_ascii_lowercase();
        l.match_indices("seed").any(|(i, _)| {
            let rest = l[i + 4..].trim_start_matches([' ', '-', '_', '#']);
            rest.starts_with(|c: char| c.is_ascii_digit())
        })
    };
    assert!(cites_seed("the case of seed 004") && cites_seed("seed000-mixed-lab"));
    assert!(!cites_seed("a seeded generator") && !cites_seed("seed: 42 blueprints"));
    let check_seeds = |what: &str, text: &str| {
        let hit = text.lines().find(|l| cites_seed(l));
        assert!(hit.is_none(), "{what} cites a seed: {hit:?}");
    };
    let check = |what: &str, text: &str| {
        for f in forbidden {
            let hit = text.lines().find(|l| l.contains(f));
            assert!(hit.is_none(), "{what} prints `{f}`: {hit:?}");
        }
        let hit = text.lines().find(|l| cites_seed(l));
        assert!(hit.is_none(), "{what} cites a seed: {hit:?}");
    };
    let mut runs: Vec<Vec<String>> = [
        &["--help"][..],
        &["validate", "--help"],
        &["explain", "--help"],
        &["schema"],
        &["profiles", "--help"],
        &["plan", "--help"],
        &["apply", "--help"],
        &["snapshot", "--help"],
        &["render", "--help"],
        &["upgrade", "--help"],
        &["upgrade", "driver", "--help"],
        &["upgrade", "status", "--help"],
        &["upgrade", "rollback", "--help"],
        &["explain", "--all"],
        &["profiles"],
        &["profiles", "-o", "json"],
    ]
    .iter()
    .map(|a| a.iter().map(|s| s.to_string()).collect())
    .collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut examples: Vec<_> = std::fs::read_dir(root.join("blueprints"))
        .expect("blueprints/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 4, "{examples:?}");
    for p in &examples {
        let rel = format!("blueprints/{}", p.file_name().unwrap().to_string_lossy());
        runs.push(vec!["validate".into(), rel.clone()]);
        runs.push(vec!["validate".into(), rel, "-o".into(), "json".into()]);
        check(
            &p.display().to_string(),
            &std::fs::read_to_string(p).unwrap(),
        );
    }
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = gpuctl(&args);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "gpuctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        check(
            &format!("gpuctl {args:?}"),
            &String::from_utf8_lossy(&out.stdout),
        );
        check(
            &format!("gpuctl {args:?} (stderr)"),
            &String::from_utf8_lossy(&out.stderr),
        );
    }
    let mut docs = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).expect("docs/") {
        docs.push(e.expect("entry").path());
    }
    // The developer docs may name the test harness's CRD directory beside the repository.
    for p in docs {
        check_seeds(
            &p.display().to_string(),
            &std::fs::read_to_string(&p).unwrap(),
        );
    }
}

/// One flag vocabulary: `-o/--output` picks the output format on every command; files and
/// directories have their own flags (`--out FILE`, `--output-dir DIR`, `--runbook FILE`). The old
/// spellings still work for one release and say so on stderr.
#[test]
fn one_output_flag_and_the_old_spellings_still_work_with_a_deprecation_note() {
    let bp = "blueprints/dgx-h100-training.yaml";
    let snap = "blueprints/snapshots/dgx-h100-training.json";
    for (new, old) in [
        (
            vec!["validate", bp, "-o", "json"],
            vec!["validate", bp, "--format", "json"],
        ),
        (
            vec!["profiles", "--output", "json"],
            vec!["profiles", "--format", "json"],
        ),
        (
            vec!["plan", bp, "--snapshot", snap, "-o", "json"],
            vec!["plan", bp, "--snapshot", snap, "--format", "json"],
        ),
    ] {
        let n = gpuctl(&new);
        let o = gpuctl(&old);
        assert_eq!(n.status.code(), o.status.code(), "{new:?}");
        assert!(
            serde_json::from_slice::<serde_json::Value>(&n.stdout).is_ok(),
            "{new:?} prints JSON"
        );
        assert_eq!(n.stdout, o.stdout, "{old:?} means the same as {new:?}");
        assert!(
            !String::from_utf8_lossy(&n.stderr).contains("deprecated"),
            "{new:?}: {}",
            String::from_utf8_lossy(&n.stderr)
        );
        assert!(
            String::from_utf8_lossy(&o.stderr)
                .contains("warning: --format is deprecated and will be removed in the next release; use -o/--output"),
            "{old:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // render: the tree directory moved to --output-dir; `-o DIR` still writes it, with a note.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let n = gpuctl(&["render", bp, "--output-dir", a.to_str().unwrap()]);
    let o = gpuctl(&["render", bp, "-o", b.to_str().unwrap()]);
    assert_eq!((n.status.code(), o.status.code()), (Some(0), Some(0)));
    assert!(a.join("kustomization.yaml").is_file() && b.join("kustomization.yaml").is_file());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("use --output-dir DIR"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Every command's help names -o/--output for its format, none shows --format.
    for cmd in [
        &["validate", "--help"][..],
        &["profiles", "--help"],
        &["plan", "--help"],
        &["apply", "--help"],
        &["upgrade", "driver", "--help"],
        &["upgrade", "status", "--help"],
        &["upgrade", "rollback", "--help"],
    ] {
        let help = stdout(&gpuctl(cmd));
        assert!(help.contains("-o, --output <"), "{cmd:?}:\n{help}");
        assert!(!help.contains("--format"), "{cmd:?}:\n{help}");
    }
}

/// Issue 26: `gpuctl validate` passes a blueprint with an RTX PRO 5000 Blackwell MIG layout, a
/// GB300 NVL72 MIG layout on the 25.10 line that added GB300, and an L40 pool; an invented
/// profile on any of the three pools fails it.
#[test]
fn operator_listed_gpus_validate_and_invented_profiles_fail() {
    let fixture = "tests/fixtures/catalog/operator-listed-gpus.yaml";
    let o = gpuctl(&["validate", "--strict", fixture]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let text =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture))
            .expect("fixture");
    for (from, to, rule) in [
        (
            "layout: { \"1g.24gb\": 2 }",
            "layout: { \"1g.12gb\": 4 }",
            "GPU031",
        ),
        (
            "layout: { \"3g.139gb\": 2 }",
            "layout: { \"3g.140gb\": 2 }",
            "GPU031",
        ),
        (
            "gpu: { model: L40, count: 8 }\n",
            "gpu: { model: L40, count: 8 }\n      partitioning: { mode: mig, mig: { strategy: mixed, layout: { \"1g.12gb\": 4 } } }\n",
            "GPU030",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let (_dir, path) = blueprint_file(&text.replacen(from, to, 1));
        let o = gpuctl(&["validate", &path]);
        assert_eq!(o.status.code(), Some(1), "{to}: {}", stdout(&o));
        assert!(stdout(&o).contains(rule), "{to}: {}", stdout(&o));
    }
}

/// Issue 26: `gpuctl profiles --stale-after DAYS` lists the fact rows read longer ago than that,
/// with their sources; every table carries dates; a shorter window lists more.
#[test]
fn profiles_stale_after_lists_old_rows() {
    let o = gpuctl(&["profiles", "--stale-after", "30", "--today", "2026-12-03"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.starts_with("Fact rows read more than 30 days before 2026-12-03: "),
        "{text}"
    );
    // Rows the 2026-11 audit last checked are 32 days old counted from 2026-11-01.
    assert!(
        text.contains("profiles/gpus.yaml  gpus.V100-SXM2-16GB  (read 2026-11, 32 days)"),
        "{text}"
    );
    assert!(text.contains("      source: "), "{text}");
    assert!(
        !text.contains("releases.v25.10.1"),
        "read 2026-12-03: {text}"
    );
    assert!(!text.contains("carry no read date yet"), "{text}");
    let o = gpuctl(&[
        "profiles",
        "--stale-after",
        "365",
        "--today",
        "2026-12-03",
        "-o",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(doc["stale"].as_array().map(Vec::len), Some(0));
    assert!(doc["rows_checked"].as_u64().unwrap_or(0) > 100);
    assert_eq!(doc["undated_files"], serde_json::json!([]));
    // Sections of limits.yaml, queueing.yaml and dcgm.yaml are rows of their own.
    let stale = gpuctl(&["profiles", "--stale-after", "0", "--today", "2027-01-01"]);
    assert!(
        stdout(&stale).contains("profiles/queueing.yaml  scheduling_messages  (read "),
        "{}",
        stdout(&stale)
    );
    let o = gpuctl(&[
        "profiles",
        "--stale-after",
        "0",
        "--today",
        "2027-01-01",
        "-o",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(
        doc["stale"].as_array().map(Vec::len),
        doc["rows_checked"].as_u64().map(|n| n as usize)
    );
    let o = gpuctl(&["profiles", "--stale-after", "soon"]);
    assert_eq!(o.status.code(), Some(64));
    let o = gpuctl(&["profiles", "--stale-after", "30", "--today", "yesterday"]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
}

/// A snapshot taken for one blueprint is a valid snapshot, just not the one import and status
/// read: the error says what it lacks and the one capture that has it, once (it used to call it
/// "not a gpuctl snapshot" and name two different captures).
#[test]
fn a_snapshot_without_what_the_command_reads_names_the_capture_that_has_it_once() {
    let snap = "blueprints/snapshots/dgx-h100-training.json";
    let o = gpuctl(&["import", "--snapshot", snap]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("snapshot `{snap}` was captured for one blueprint and lacks most of what import reads; capture one with `gpuctl snapshot --all --out FILE`")),
        "{err}"
    );
    assert_eq!(err.matches("capture one with").count(), 1, "{err}");
    assert!(!err.contains("not a gpuctl snapshot"), "{err}");

    let o = gpuctl(&[
        "status",
        "blueprints/dgx-h100-training.yaml",
        "--snapshot",
        snap,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("snapshot `{snap}` holds no Day-2 diagnostics; capture them with `gpuctl snapshot BLUEPRINT --diagnostics --out FILE`")),
        "{err}"
    );
    assert!(!err.contains("not a gpuctl snapshot"), "{err}");
}

/// `gpuctl report` refuses, before any query, a blueprint without `accounting` and a step that
/// does not divide a day (usage, 64), and fails (1) naming the URL when Prometheus cannot be
/// reached.
#[test]
fn report_refuses_what_it_cannot_report_and_names_an_unreachable_prometheus() {
    let o = gpuctl(&[
        "report",
        "blueprints/dgx-h100-training.yaml",
        "--prometheus",
        "http://127.0.0.1:9",
    ]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("has no `spec.accounting`"),
        "{}",
        stderr(&o)
    );
    let acc = "tests/fixtures/accounting/blueprint.yaml";
    // An accounting section that does not validate is refused with its findings (exit 1).
    let bad = std::fs::read_to_string(acc).unwrap().replace(
        "{ pool: l4, perGpuHour: 0.5 }",
        "{ pool: l40, perGpuHour: 0.5 }",
    );
    let o = Gpuctl::new(["report", "-", "--prometheus", "http://127.0.0.1:9"])
        .stdin(bad.as_bytes())
        .output();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("GPU197"), "{}", stderr(&o));
    let o = gpuctl(&[
        "report",
        acc,
        "--prometheus",
        "http://127.0.0.1:9",
        "--step",
        "7m",
    ]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("does not divide a day"),
        "{}",
        stderr(&o)
    );
    let o = gpuctl(&[
        "report",
        acc,
        "--prometheus",
        "http://127.0.0.1:9",
        "--since",
        "1d",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot reach Prometheus at http://127.0.0.1:9"),
        "{}",
        stderr(&o)
    );
}
