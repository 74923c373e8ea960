//! The crate graph is the architecture (docs/architecture.md), and this test keeps it so:
//!
//! - `gpuctl-core` is pure: nothing in its dependency tree talks to a network, a terminal or an
//!   async runtime (checked with `cargo tree`, so a dependency pulled in two levels down counts);
//! - `gpuctl-cluster` talks to the API server but never to a terminal, and neither library depends
//!   on the binary;
//! - no module imports its way back into itself: inside each crate, the modules under one parent
//!   form no cycle (a parent re-exporting its children, and children using their parent's types,
//!   is how Rust modules are built and is not counted).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every package in `package`'s normal (non-dev) dependency tree, for this machine's platform.
fn dependency_tree(package: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--locked", "-p", package, "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .current_dir(root())
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn assert_free_of(package: &str, forbidden: &[&str]) {
    let tree = dependency_tree(package);
    assert!(
        tree.contains(package),
        "cargo tree did not list {package} itself"
    );
    // `kube` stands for `kube-client` and `kube-core` too, `tokio` for `tokio-rustls`...; the
    // gpuctl crates are matched by their exact names.
    let family =
        |p: &str, f: &str| p == f || (!f.starts_with("gpuctl") && p.starts_with(&format!("{f}-")));
    let found: Vec<&String> = tree
        .iter()
        .filter(|p| forbidden.iter().any(|f| family(p, f)))
        .collect();
    assert!(
        found.is_empty(),
        "{package} must not depend on {found:?} (directly or through another crate); move the code that needs them to the cluster crate or the binary"
    );
}

#[test]
fn the_core_crate_has_no_io_dependencies() {
    assert_free_of(
        "gpuctl-core",
        &[
            "tokio",
            "kube",
            "hyper",
            "rustls",
            "reqwest",
            "clap",
            "indicatif",
            "miette",
            "gpuctl-cluster",
            "gpuctl",
        ],
    );
}

#[test]
fn the_cluster_crate_has_no_terminal_dependencies() {
    assert_free_of("gpuctl-cluster", &["clap", "indicatif", "miette", "gpuctl"]);
}

/// A module path, e.g. `["render", "nodes"]`; the crate root is empty.
type ModPath = Vec<String>;

/// The module each `.rs` file of a crate is, by walking `src`.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, prefix: &ModPath, out: &mut BTreeMap<ModPath, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read src")
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                let mut m = prefix.clone();
                m.push(name);
                walk(&p, &m, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let m = match name.as_str() {
                    "lib" | "main" | "mod" => prefix.clone(),
                    _ => {
                        let mut m = prefix.clone();
                        m.push(name);
                        m
                    }
                };
                out.insert(m, p);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &vec![], &mut out);
    out
}

/// The module paths a source text names with `crate::` and `super::` (groups in braces
/// included), before its tests; comments are skipped.
fn references(text: &str, here: &ModPath) -> Vec<ModPath> {
    let code: String = text
        .lines()
        .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for (start, base) in [("crate::", vec![]), ("super::", parent(here))] {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(start) {
            let before = rest[..i].chars().last();
            rest = &rest[i + start.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            for mut path in paths(rest) {
                let mut full = base.clone();
                // `super::super::x`: one level up per `super`.
                while path.first().is_some_and(|s| s == "super") {
                    path.remove(0);
                    full.pop();
                }
                full.extend(path);
                out.push(full);
            }
        }
    }
    out
}

/// The module a `super::` in `here` refers to: in `render/nodes.rs` (module render::nodes) it is
/// `render`; in `render/mod.rs` (module render), the crate root.
fn parent(here: &ModPath) -> ModPath {
    here[..here.len().saturating_sub(1)].to_vec()
}

/// The paths at the start of `rest`: `a::b::Item` or a `{a, b::c}` group.
fn paths(rest: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> usize {
        s.find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    if let Some(group) = rest.strip_prefix('{') {
        // Split the group's top level at commas.
        let (mut depth, mut item, mut items) = (0usize, String::new(), Vec::new());
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(std::mem::take(&mut item));
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        items.push(item);
        return items.iter().flat_map(|i| paths(i.trim())).collect();
    }
    let mut segs = Vec::new();
    let mut s = rest;
    loop {
        let n = ident(s);
        if n == 0 {
            break;
        }
        segs.push(s[..n].to_string());
        match s[n..].strip_prefix("::") {
            Some(next) if next.starts_with('{') => {
                return paths(next)
                    .into_iter()
                    .map(|p| segs.iter().cloned().chain(p).collect())
                    .collect();
            }
            Some(next) => s = next,
            None => break,
        }
    }
    vec![segs]
}

/// The longest prefix of `path` that is a module.
fn resolve(path: &ModPath, known: &BTreeMap<ModPath, PathBuf>) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| known.contains_key(p))
        .unwrap_or_default()
}

/// Cycles among sibling modules: each dependency `a::x -> b::y` counts as `a -> b` under their
/// common parent; dependencies between a module and its own ancestors are not counted.
fn cycles(src: &Path) -> Vec<String> {
    let known = modules(src);
    let mut edges: BTreeMap<ModPath, BTreeSet<(String, String)>> = BTreeMap::new();
    let mut witness: BTreeMap<(ModPath, String, String), String> = BTreeMap::new();
    for (here, file) in &known {
        if here.last().is_some_and(|n| n == "tests") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read source");
        for r in references(&text, here) {
            let target = resolve(&r, &known);
            let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == here.len() || common == target.len() {
                continue; // an ancestor or a descendant
            }
            let parent = here[..common].to_vec();
            let pair = (here[common].clone(), target[common].clone());
            witness
                .entry((parent.clone(), pair.0.clone(), pair.1.clone()))
                .or_insert_with(|| format!("{} uses {}", file.display(), r.join("::")));
            edges.entry(parent).or_default().insert(pair);
        }
    }
    let mut found = Vec::new();
    for (parent, pairs) in &edges {
        let graph: BTreeMap<&str, Vec<&str>> =
            pairs.iter().fold(BTreeMap::new(), |mut g, (a, b)| {
                g.entry(a.as_str()).or_default().push(b.as_str());
                g
            });
        for (a, b) in pairs {
            // a -> b closes a cycle when b reaches a.
            let mut seen = BTreeSet::new();
            let mut todo = vec![b.as_str()];
            while let Some(n) = todo.pop() {
                if n == a {
                    let at = if parent.is_empty() {
                        "the crate root".to_string()
                    } else {
                        parent.join("::")
                    };
                    found.push(format!(
                        "under {at}: {a} -> {b} -> ... -> {a} ({})",
                        witness[&(parent.clone(), a.clone(), b.clone())]
                    ));
                    break;
                }
                if seen.insert(n) {
                    todo.extend(graph.get(n).into_iter().flatten());
                }
            }
        }
    }
    found
}

#[test]
fn no_module_imports_its_way_back_into_itself() {
    let mut all = Vec::new();
    for src in ["crates/core/src", "crates/cluster/src", "src"] {
        all.extend(cycles(&root().join(src)));
    }
    assert!(all.is_empty(), "import cycles:\n{}", all.join("\n"));
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::create_dir(src.join("a")).unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod x;\nuse super::b::Thing;\n").unwrap();
    std::fs::write(src.join("a/x.rs"), "use super::super::b;\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::{a::x::Other, b};\n").unwrap();
    let found = cycles(src);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("under the crate root: a -> b"),
        "{found:?}"
    );
    // Without b's import, nothing.
    std::fs::write(src.join("b.rs"), "// uses crate::a in a comment only\n").unwrap();
    assert!(cycles(src).is_empty());
}

/// The integration tests are a few test binaries grouped by what they need (`tests/offline/`,
/// `tests/cluster/`, `tests/external/`, each a `main.rs` with one module per file), plus
/// `tests/hostile_corpus.rs` alone (its counting allocator and panic hook are process-wide). A
/// file in a group's folder that its `main.rs` does not declare would never be compiled, so its
/// tests would be lost silently; a new top-level file would link kube, tokio and the library once
/// more. Both fail here.
#[test]
fn every_test_file_is_compiled_in_one_of_the_grouped_binaries() {
    let tests = root().join("tests");
    let mut problems = Vec::new();
    let mut groups = 0;
    for entry in std::fs::read_dir(&tests).expect("read tests/") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_file() && name.ends_with(".rs") && name != "hostile_corpus.rs" {
            problems.push(format!(
                "tests/{name} is a test binary of its own: move it into tests/offline/, tests/cluster/ \
                 or tests/external/ (by what it needs) and declare it in that folder's main.rs"
            ));
        }
        let main = path.join("main.rs");
        if !main.is_file() {
            continue;
        }
        groups += 1;
        let text = std::fs::read_to_string(&main).expect("read main.rs");
        for file in std::fs::read_dir(&path).expect("read group") {
            let file = file.expect("dir entry").path();
            let stem = file.file_stem().unwrap().to_string_lossy().to_string();
            if file.extension().is_some_and(|e| e == "rs")
                && stem != "main"
                && !text.lines().any(|l| l.trim() == format!("mod {stem};"))
            {
                problems.push(format!(
                    "tests/{name}/{stem}.rs is not compiled: add `mod {stem};` to tests/{name}/main.rs"
                ));
            }
        }
    }
    assert_eq!(
        groups, 3,
        "expected the offline, cluster and external test binaries"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
