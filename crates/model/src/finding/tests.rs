//! The registry is whole: every id any code, test, doc or profile names is registered (so
//! `gpuctl explain` works for it), every registered id is emitted by its family's code, and the
//! tables are well formed. Together with [`super::debug_check`], which every emitter's findings
//! pass through in debug builds (each doctor, metric, import and validation test, and the CLI the
//! integration tests run), this is the enumeration of issue 28: an id a test observes cannot be
//! one `gpuctl explain` refuses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::*;

/// Ids named on purpose without being registered, with where and why.
const UNREGISTERED_ON_PURPOSE: &[(&str, &str)] = &[(
    "GPU999",
    "tests/offline/cli.rs, finding/tests.rs: an id `gpuctl explain` and the registry must refuse",
)];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Files under `dir` (recursively) whose names end with one of `exts`.
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target" || n == ".git") {
                continue;
            }
            files(&p, exts, out);
        } else if exts
            .iter()
            .any(|x| p.to_string_lossy().ends_with(&format!(".{x}")))
        {
            out.push(p);
        }
    }
}

/// Every `GPU` + three digits in `text`, with whether it is quoted (`"GPU050"`: a literal in
/// code). The ends of a range (`GPU250–GPU299`, `GPU200-GPU203`, `GPU001..GPU095`) are left out:
/// a range names a block of ids, not one.
fn ids_in(text: &str) -> Vec<(String, bool)> {
    let b = text.as_bytes();
    let is_id = |i: usize| {
        b.len() >= i + 6
            && &b[i..i + 3] == b"GPU"
            && b[i + 3..i + 6].iter().all(u8::is_ascii_digit)
            && b.get(i + 6).is_none_or(|c| !c.is_ascii_alphanumeric())
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
    };
    let joins = |s: &str| matches!(s.trim(), "–" | "-" | ".." | "to");
    let mut found: Vec<(usize, String, bool)> = Vec::new();
    let mut i = 0;
    while i + 6 <= b.len() {
        if is_id(i) {
            let quoted = i > 0 && b[i - 1] == b'"' && b.get(i + 6) == Some(&b'"');
            found.push((i, text[i..i + 6].to_string(), quoted));
            i += 6;
        } else {
            i += 1;
        }
    }
    let mut skip = BTreeSet::new();
    for w in found.windows(2) {
        let between = &text[w[0].0 + 6..w[1].0];
        if between.len() <= 5 && joins(between) {
            skip.insert(w[0].0);
            skip.insert(w[1].0);
        }
    }
    found
        .into_iter()
        .filter(|(at, _, _)| !skip.contains(at))
        .map(|(_, id, q)| (id, q))
        .collect()
}

#[test]
fn ids_in_reads_literals_mentions_and_skips_ranges() {
    assert_eq!(
        ids_in(
            r#"emit("GPU050", ..) and GPU201; GPU250–GPU299, GPU200-GPU203, GPU001..GPU095 XGPU1234"#
        ),
        vec![("GPU050".to_string(), true), ("GPU201".to_string(), false)]
    );
}

#[test]
fn ids_are_unique_sorted_in_their_family_range_and_documented() {
    let all: Vec<&Rule> = rules().collect();
    for w in all.windows(2) {
        assert!(w[0].id < w[1].id, "{} before {}", w[0].id, w[1].id);
    }
    for family in Family::ALL {
        let (lo, hi) = family.ids();
        assert!(!family.rules().is_empty(), "{family} has no rules");
        for r in family.rules() {
            assert_eq!(r.family, family, "{} is in {family}'s table", r.id);
            let n: u16 =
                r.id.strip_prefix("GPU")
                    .filter(|d| d.len() == 3)
                    .and_then(|d| d.parse().ok())
                    .unwrap_or_else(|| panic!("{} is not GPU and three digits", r.id));
            assert!((lo..=hi).contains(&n), "{} is outside {family}'s ids", r.id);
            assert!(
                !r.name.is_empty()
                    && r.name
                        .bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'),
                "{}: name `{}` is not kebab-case",
                r.id,
                r.name
            );
            for (what, text) in [
                ("area", r.area),
                ("title", r.title),
                ("why", r.why),
                ("fix", r.fix),
                ("source", r.source),
                ("example", r.example),
            ] {
                assert!(!text.trim().is_empty(), "{}: empty {what}", r.id);
            }
            assert_eq!(rule(&r.id.to_ascii_lowercase()).map(|x| x.id), Some(r.id));
            let text = explain(r);
            assert!(text.starts_with(&format!("## {}\n", r.id)), "{text}");
        }
    }
    let doc = markdown();
    for r in &all {
        assert!(
            doc.contains(&format!("\n### {}\n", r.id)),
            "{} not in docs",
            r.id
        );
    }
}

/// Every id named anywhere in the repository's code, tests, docs, profiles and templates is
/// registered (or deliberately not, [`UNREGISTERED_ON_PURPOSE`]).
#[test]
fn every_id_the_repository_names_is_registered() {
    let root = root();
    let mut paths = Vec::new();
    for dir in [
        "crates",
        "src",
        "tests",
        "docs",
        "profiles",
        "templates",
        "tools",
    ] {
        files(
            &root.join(dir),
            &["rs", "md", "yaml", "j2", "py", "sh"],
            &mut paths,
        );
    }
    for e in std::fs::read_dir(&root).expect("repository root").flatten() {
        if e.path().extension().is_some_and(|x| x == "md") {
            paths.push(e.path());
        }
    }
    // A proposal (docs/proposal-*.md) names the ids its design would add, before they exist.
    paths.retain(|p| {
        !p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("proposal-"))
    });
    paths.sort();
    paths.dedup();
    assert!(
        paths.len() > 100,
        "found only {} files under {}",
        paths.len(),
        root.display()
    );
    let mut unknown: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut seen = 0;
    for p in &paths {
        let Ok(text) = std::fs::read_to_string(p) else {
            continue;
        };
        for (id, _) in ids_in(&text) {
            seen += 1;
            if rule(&id).is_none() && !UNREGISTERED_ON_PURPOSE.iter().any(|(u, _)| *u == id) {
                let rel = p.strip_prefix(&root).unwrap_or(p).display().to_string();
                unknown.entry(id).or_default().insert(rel);
            }
        }
    }
    assert!(seen > 1000, "only {seen} ids seen");
    assert!(
        unknown.is_empty(),
        "ids named but not registered (add them to their family's table, crate::finding): {unknown:#?}"
    );
}

/// Every registered id is emitted: its quoted literal appears in its family's code outside the
/// rule table and the tests.
#[test]
fn every_registered_id_is_emitted_by_its_family() {
    // The tables are data here; the code that emits each family's findings lives in the layers
    // above (repository-relative folders).
    let emitters = |family: Family| -> Vec<&str> {
        match family {
            Family::Validation => vec![
                "crates/pipeline/src/validate",
                "crates/model/src/blueprint",
                "crates/fleet/src",
            ],
            Family::Doctor => vec!["crates/day2/src/doctor"],
            Family::Metrics => vec!["crates/day2/src/metrics"],
            Family::Import => vec!["crates/day2/src/import"],
        }
    };
    let root = root();
    for family in Family::ALL {
        let mut paths = Vec::new();
        for dir in emitters(family) {
            assert!(root.join(dir).is_dir(), "{dir} is not a folder");
            files(&root.join(dir), &["rs"], &mut paths);
        }
        let mut emitted = BTreeSet::new();
        for p in &paths {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            let in_tests = p.components().any(|c| c.as_os_str() == "tests");
            if in_tests
                || matches!(
                    &*name,
                    "registry.rs" | "rules.rs" | "fields.rs" | "tests.rs"
                )
            {
                continue;
            }
            let text = std::fs::read_to_string(p).expect("source file");
            emitted.extend(ids_in(&text).into_iter().filter(|x| x.1).map(|x| x.0));
        }
        let never: Vec<&str> = family
            .rules()
            .iter()
            .map(|r| r.id)
            .filter(|id| !emitted.contains(*id))
            .collect();
        assert!(
            never.is_empty(),
            "{family}: registered but never emitted: {never:?}"
        );
    }
}

#[cfg(debug_assertions)]
#[test]
fn an_unregistered_or_too_severe_finding_is_caught() {
    let caught = |f: fn()| std::panic::catch_unwind(f).is_err();
    assert!(caught(|| debug_check(
        Family::Doctor,
        "GPU999",
        Severity::Error
    )));
    assert!(caught(|| debug_check(
        Family::Metrics,
        "GPU200",
        Severity::Error
    )));
    // GPU213 is a warning at most.
    assert!(caught(|| debug_check(
        Family::Doctor,
        "GPU213",
        Severity::Error
    )));
    debug_check(Family::Doctor, "GPU213", Severity::Warning);
    debug_check(Family::Doctor, "GPU235", Severity::Warning);
    debug_check(Family::Import, "GPU300", Severity::Warning);
    // GPU230 is in the container-start layer; GPU252 in either of two.
    assert!(caught(|| debug_check_cluster(
        Family::Doctor,
        "GPU230",
        Severity::Error,
        Layer::Scheduling
    )));
    debug_check_cluster(
        Family::Doctor,
        "GPU230",
        Severity::Error,
        Layer::ContainerStart,
    );
    debug_check_cluster(Family::Metrics, "GPU252", Severity::Warning, Layer::Runtime);
    debug_check_cluster(
        Family::Metrics,
        "GPU252",
        Severity::Warning,
        Layer::NodeHardware,
    );
}
