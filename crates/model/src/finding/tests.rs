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
const UNREGISTERED_ON_PURPOSE: &[(&str, &str)] = &[
    (
        "GPU999",
        "tests/offline/cli.rs, finding/tests.rs: an id `gpuctl explain` and the registry must refuse",
    ),
    (
        "GPU0999",
        "finding/tests.rs: not an id (a number below 1000 is written with three digits)",
    ),
    (
        "GPU1050",
        "finding/tests.rs: a four-digit id the id reading is tested on, before one is registered",
    ),
    (
        "GPU5050",
        "finding/tests.rs: a four-digit id the id reading is tested on, before one is registered",
    ),
];

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

/// Every `GPU` + three or four digits in `text`, with whether it is quoted (`"GPU050"`,
/// `"GPU1050"`: a literal in code). The ends of a range (`GPU250–GPU299`, `GPU200-GPU203`,
/// `GPU001..GPU095`, `GPU1000–GPU1999`) are left out: a range names a block of ids, not one.
fn ids_in(text: &str) -> Vec<(String, bool)> {
    let b = text.as_bytes();
    // The length of the id at `i` (`GPU` and its digits), if one starts there.
    let id_at = |i: usize| -> Option<usize> {
        if !b[i..].starts_with(b"GPU") || (i > 0 && b[i - 1].is_ascii_alphanumeric()) {
            return None;
        }
        let digits = b[i + 3..].iter().take_while(|c| c.is_ascii_digit()).count();
        let end = i + 3 + digits;
        ((digits == 3 || digits == 4) && b.get(end).is_none_or(|c| !c.is_ascii_alphanumeric()))
            .then_some(3 + digits)
    };
    let joins = |s: &str| matches!(s.trim(), "–" | "-" | ".." | "to");
    // (start, end, id, quoted)
    let mut found: Vec<(usize, usize, String, bool)> = Vec::new();
    let mut i = 0;
    while i + 6 <= b.len() {
        if let Some(len) = id_at(i) {
            let end = i + len;
            let quoted = i > 0 && b[i - 1] == b'"' && b.get(end) == Some(&b'"');
            found.push((i, end, text[i..end].to_string(), quoted));
            i = end;
        } else {
            i += 1;
        }
    }
    let mut skip = BTreeSet::new();
    for w in found.windows(2) {
        let between = &text[w[0].1..w[1].0];
        if between.len() <= 5 && joins(between) {
            skip.insert(w[0].0);
            skip.insert(w[1].0);
        }
    }
    found
        .into_iter()
        .filter(|(at, ..)| !skip.contains(at))
        .map(|(_, _, id, q)| (id, q))
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
    // Four digits are an id as well (quoted or not), five are not; four-digit ranges, and ranges
    // from three digits to four, are skipped.
    assert_eq!(
        ids_in(
            r#"emit("GPU1050", ..), GPU12345 GPU1000–GPU1999, GPU400-GPU5999, GPU2000..GPU2999 GPU050x GPU5050."#
        ),
        vec![
            ("GPU1050".to_string(), true),
            ("GPU5050".to_string(), false)
        ]
    );
}

/// The number of an id: `GPU` and three digits below 1000, four from 1000 on.
fn number(id: &str) -> u16 {
    id.strip_prefix("GPU")
        .and_then(|d| {
            let n: u16 = d.parse().ok()?;
            (d.bytes().all(|c| c.is_ascii_digit()) && d.len() == if n < 1000 { 3 } else { 4 })
                .then_some(n)
        })
        .unwrap_or_else(|| panic!("{id} is not GPU and three digits (four from 1000 on)"))
}

#[test]
fn number_reads_three_and_four_digits_only() {
    assert_eq!(number("GPU050"), 50);
    assert_eq!(number("GPU1050"), 1050);
    let refused = |id: &'static str| std::panic::catch_unwind(|| number(id)).is_err();
    assert!(refused("GPU50"));
    assert!(refused("GPU0999"));
    assert!(refused("GPU12345"));
    assert!(refused("GPU+50"));
}

#[test]
fn family_ranges_do_not_overlap() {
    let mut all: Vec<(u16, u16, Family)> = Family::ALL
        .into_iter()
        .flat_map(|f| f.ids().map(|(lo, hi)| (lo, hi, f)))
        .collect();
    all.sort();
    for w in all.windows(2) {
        assert!(w[0].1 < w[1].0, "{:?} overlaps {:?}", w[0], w[1]);
    }
    for family in Family::ALL {
        let [(lo, hi), (lo4, hi4)] = family.ids();
        assert!(
            lo >= 1 && hi < 1000,
            "{family}'s first range is three digits"
        );
        assert!(
            lo4 >= 1000 && hi4 <= 9999,
            "{family}'s second range is four digits"
        );
    }
}

#[test]
fn ids_are_unique_sorted_in_their_family_range_and_documented() {
    let all: Vec<&Rule> = rules().collect();
    let ids: BTreeSet<&str> = all.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), all.len(), "an id is registered twice");
    for family in Family::ALL {
        let ranges = family.ids();
        assert!(!family.rules().is_empty(), "{family} has no rules");
        for w in family.rules().windows(2) {
            assert!(
                number(w[0].id) < number(w[1].id),
                "{} before {}",
                w[0].id,
                w[1].id
            );
        }
        for r in family.rules() {
            assert_eq!(r.family, family, "{} is in {family}'s table", r.id);
            let n = number(r.id);
            assert!(
                ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&n)),
                "{} is outside {family}'s ids",
                r.id
            );
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
            Family::Plan => vec!["crates/plan/src/plan"],
            Family::Policy => vec!["crates/policy/src"],
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
    // GPU404 is an error at most, reported as a warning too; it is the plan's, not doctor's.
    debug_check(Family::Plan, "GPU404", Severity::Error);
    debug_check(Family::Plan, "GPU404", Severity::Warning);
    assert!(caught(|| debug_check(
        Family::Doctor,
        "GPU404",
        Severity::Error
    )));
    assert!(caught(|| debug_check(
        Family::Plan,
        "GPU400",
        Severity::Error
    )));
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
