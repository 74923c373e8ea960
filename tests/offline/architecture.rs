//! The crate graph is the architecture (docs/architecture.md), and this test keeps it so:
//!
//! - each crate depends only on what its allow-list names (read with `cargo tree`): the pure
//!   layers (`gpuctl-model` < `gpuctl-pipeline` < `gpuctl-plan` < `gpuctl-day2`, `gpuctl-fleet`,
//!   and the `gpuctl-core` facade over them) each name the layers below them and nothing above,
//!   and their whole dependency tree is listed, so a crate pulled in two levels down counts;
//!   `gpuctl-cluster` talks to the API server but never to a terminal; `gpuctl-policy` (Rego
//!   through regorus) sits beside the core, pure but with regorus' tree listed apart
//!   (`POLICY_TREE`); `gpuctl-ci` talks to GitHub and GitLab with the cluster crate's HTTP stack
//!   and depends on no gpuctl crate; no library depends on the binary. Cargo refuses a cycle between crates, so a layer cannot reach upward at all;
//! - no module imports its way back into itself: inside every crate, the modules under one parent
//!   form no cycle (a parent re-exporting its children, and children using their parent's types,
//!   is how Rust modules are built and is not counted). Every line that is not test code is read:
//!   a `#[cfg(test)] mod tests;` declaration is skipped, not a place to stop reading;
//! - no function of any crate, the binary included, is over 120 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The packages `cargo tree` prints for `package`'s normal (non-dev) dependencies on this
/// machine's platform, `extra` arguments added (`--depth 1`: the direct ones).
fn cargo_tree(package: &str, extra: &[&str]) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--locked", "-p", package, "-e", "normal"])
        .args(extra)
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

/// Every package in `package`'s normal (non-dev) dependency tree, for this machine's platform.
fn dependency_tree(package: &str) -> BTreeSet<String> {
    cargo_tree(package, &[])
}

/// The direct normal dependencies of `package` (itself left out).
fn direct_dependencies(package: &str) -> BTreeSet<String> {
    let mut direct = cargo_tree(package, &["--depth", "1"]);
    direct.remove(package);
    direct
}

/// `have` is exactly `allowed`: what is not allowed, and what is allowed but no longer there (so
/// the list stays the true one), both fail.
fn assert_allowed(what: &str, have: &BTreeSet<String>, allowed: &[&str], advice: &str) {
    let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
    let extra: Vec<&String> = have.difference(&allowed).collect();
    let gone: Vec<&String> = allowed.difference(have).collect();
    assert!(
        extra.is_empty(),
        "{what} has dependencies not on its allow-list: {extra:?}; {advice}"
    );
    assert!(
        gone.is_empty(),
        "{what}'s allow-list names {gone:?}, which it no longer depends on: remove them from the list"
    );
}

/// The pure layers, bottom first, each with what it may depend on directly: data formats, dates,
/// templates, hashing, and the layers below it. Nothing that talks to a network, a terminal or an
/// async runtime, and neither the cluster crate nor the binary. Where new code goes, and why each
/// layer is where it is: docs/architecture.md.
const PURE_LAYERS: &[(&str, &[&str])] = &[
    (
        "gpuctl-model",
        &[
            "base64",              // Helm release payloads
            "jiff",                // dates of the facts catalog
            "saphyr-parser",       // YAML with marks
            "schemars",            // the blueprint's JSON Schema
            "semver",              // release versions
            "serde",               // (de)serialisation
            "serde-saphyr",        // YAML output
            "serde_json",          // JSON
            "serde_path_to_error", // field paths in load errors
            "sha2",                // content digests
            "strsim",              // "did you mean"
            "thiserror",           // error types
        ],
    ),
    (
        "gpuctl-pipeline",
        &[
            "gpuctl-model",
            "ipnet",     // IPv4/IPv6 CIDRs of the nv-ipam pools
            "jiff",      // end-of-life dates
            "minijinja", // templates
            "semver",
            "serde",
            "serde-saphyr",
            "serde_json",
            "strsim",
            "thiserror",
        ],
    ),
    (
        "gpuctl-plan",
        &[
            "base64", // Helm release payloads
            "flate2", // Helm keeps releases gzip-compressed
            "gpuctl-model",
            "gpuctl-pipeline",
            "jiff",        // journals
            "k8s-openapi", // the Kubernetes types (no client): label selectors, pods, nodes
            "serde",
            "serde-saphyr",
            "serde_json",
            "sha2",
            "thiserror",
        ],
    ),
    (
        "gpuctl-day2",
        &[
            "gpuctl-model",
            "gpuctl-pipeline",
            "gpuctl-plan",
            "jiff",
            "k8s-openapi",
            "serde",
            "serde-saphyr",
            "serde_json",
            "thiserror",
        ],
    ),
    (
        "gpuctl-fleet",
        &[
            "gpuctl-model",
            "gpuctl-pipeline",
            "gpuctl-plan",
            "jiff",
            "serde",
            "serde-saphyr",
            "serde_json",
            "serde_path_to_error",
            "sha2",
        ],
    ),
    (
        // GPU-hours accounting (`gpuctl report`): the accounting table and its PromQL come from
        // pipeline's render, the figures are computed here; no IO.
        "gpuctl-accounting",
        &["gpuctl-model", "gpuctl-pipeline", "serde", "serde_json"],
    ),
    (
        "gpuctl-core",
        &[
            "gpuctl-accounting",
            "gpuctl-day2",
            "gpuctl-fleet",
            "gpuctl-model",
            "gpuctl-pipeline",
            "gpuctl-plan",
        ],
    ),
];

/// Everything in the pure layers' dependency tree (a crate pulled in two levels down counts): the
/// crates above and what they need. A new name here is a new crate in the pure core: check that it
/// does no IO before adding it.
const CORE_TREE: &[&str] = &[
    "adler2",
    "annotate-snippets",
    "anstyle",
    "arraydeque",
    "base64",
    "block-buffer",
    "cfg-if",
    "const-oid",
    "core_detect",
    "cpufeatures",
    "crc32fast",
    "crypto-common",
    "digest",
    "dyn-clone",
    "encoding_rs",
    "encoding_rs_io",
    "equivalent",
    "flate2",
    "foldhash",
    "gpuctl-accounting",
    "gpuctl-day2",
    "gpuctl-fleet",
    "gpuctl-model",
    "gpuctl-pipeline",
    "gpuctl-plan",
    "granit-parser",
    "hashbrown",
    "hybrid-array",
    "indexmap",
    "ipnet",
    "itoa",
    "jiff",
    "jiff-core",
    "k8s-openapi",
    "memchr",
    "minijinja",
    "miniz_oxide",
    "multiversion_no_op",
    "nohash-hasher",
    "num-traits",
    "proc-macro2",
    "quote",
    "ref-cast",
    "ref-cast-impl",
    "saphyr-parser",
    "schemars",
    "schemars_derive",
    "scopeguard",
    "semver",
    "serde",
    "serde-saphyr",
    "serde_core",
    "serde_derive",
    "serde_derive_internals",
    "serde_json",
    "serde_path_to_error",
    "sha2",
    "simd-adler32",
    "simdutf8",
    "smallvec",
    "strsim",
    "syn",
    "thiserror",
    "thiserror-impl",
    "typenum",
    "unicode-ident",
    "unicode-width",
    "zmij",
];

/// What the cluster crate may depend on directly: the core, the Kubernetes client and its HTTP and
/// TLS stack (Prometheus's client uses the same), the async runtime. No terminal crate, not the
/// binary.
const CLUSTER_DIRECT: &[&str] = &[
    "base64",
    "form_urlencoded",
    "futures",
    "gpuctl-accounting", // `gpuctl report`: the figures of the range queries it runs
    "gpuctl-day2",
    "gpuctl-fleet", // fleet revision stamps and MultiKueue names on the clusters
    "gpuctl-model",
    "gpuctl-pipeline",
    "gpuctl-plan",
    "http",
    "http-body-util",
    "hyper",
    "hyper-rustls",
    "hyper-util",
    "k8s-openapi",
    "kube",
    "percent-encoding",
    "rustls",
    "rustls-native-certs",
    "rustix", // SIGTERM to a helm run that outlives --wait-timeout (tokio only sends SIGKILL)
    "serde",
    "serde_json",
    "sha2",
    "thiserror",
    "tokio",
];

/// What the policy crate may depend on directly: model and plan (findings), data formats, and
/// regorus, the Rego interpreter (docs/policy.md). It is not a layer of the core facade: regorus'
/// tree is larger than the core's, so it is listed apart in [`POLICY_TREE`].
const POLICY_DIRECT: &[&str] = &[
    "gpuctl-model",
    "gpuctl-plan", // a policy result as a plan finding
    "regorus",     // Rego, in-process
    "serde",
    "serde-saphyr", // YAML data files
    "serde_json",
    "thiserror",
];

/// What regorus (with the features crates/policy/Cargo.toml names) adds to the core's tree:
/// checked to be pure when added (no network, terminal or async runtime; `getrandom`/`rand` for
/// `rand.intn`, `parking_lot`/`spin` for its interning and limits, `verus_*`/`vstd` are its
/// proof annotations, compile-time only).
const POLICY_TREE: &[&str] = &[
    "aho-corasick",
    "anyhow",
    "bstr",
    "chacha20",
    "convert_case",
    "data-encoding",
    "getrandom",
    "globset",
    "gpuctl-policy",
    "lazy_static",
    "libc",
    "lock_api",
    "msvc_spectre_libs",
    "num-bigint",
    "num-integer",
    "parking_lot",
    "parking_lot_core",
    "rand",
    "rand_core",
    "regex",
    "regex-automata",
    "regex-syntax",
    "regorus",
    "spin",
    "synstructure",
    "verus_builtin",
    "verus_builtin_macros",
    "verus_prettyplease",
    "verus_state_machines_macros",
    "verus_syn",
    "vstd",
];

/// What the CI crate may depend on directly: GitHub's and GitLab's REST APIs through the HTTP and
/// TLS stack the cluster crate already links (no second HTTP client), JSON, the runtime. No gpuctl
/// crate: the binary hands it the comment's Markdown and the annotations.
const CI_DIRECT: &[&str] = &[
    "http",
    "http-body-util",
    "hyper",
    "hyper-rustls",
    "hyper-util",
    "percent-encoding", // a GitLab project path in a URL
    "rustls",
    "rustls-native-certs",
    "serde",
    "serde_json",
    "thiserror",
    "tokio",
];

/// What the binary may depend on directly: both libraries, arguments, terminal output, the runtime.
const BINARY_DIRECT: &[&str] = &[
    "clap",
    "clap_complete",
    "gpuctl-accounting",
    "gpuctl-ci", // gpuctl ci github|gitlab: the PR comment and the check run
    "gpuctl-cluster",
    "gpuctl-day2",
    "gpuctl-fleet",
    "gpuctl-model",
    "gpuctl-pipeline",
    "gpuctl-plan",
    "gpuctl-policy", // --policy DIR, gpuctl policy test
    "indicatif",
    "jiff",
    "miette",
    "mimalloc", // the allocator: glibc's malloc/free were a third of a large plan's CPU
    "rustix",   // Linux: `render -o` swaps directories with renameat2 and locks with flock
    "serde",
    "serde-saphyr",
    "serde_json",
    "thiserror",
    "tokio",
];

#[test]
fn the_pure_layers_depend_only_on_what_their_allow_lists_name() {
    let advice = "the core is pure (no network, terminal or async runtime) and each layer uses only the layers below it: move the code that needs more to the layer, crate or binary that has it, or add a pure crate to the list with why";
    for (package, allowed) in PURE_LAYERS {
        assert_allowed(package, &direct_dependencies(package), allowed, advice);
        let mut tree = dependency_tree(package);
        assert!(
            tree.remove(*package),
            "cargo tree did not list {package} itself"
        );
        let outside: Vec<&String> = tree
            .iter()
            .filter(|p| !CORE_TREE.contains(&p.as_str()))
            .collect();
        assert!(
            outside.is_empty(),
            "{package}'s dependency tree has {outside:?}, not on the pure tree's list; {advice}"
        );
    }
    // The facade's tree is every pure layer's: exactly the list, so the list stays the true one.
    let mut tree = dependency_tree("gpuctl-core");
    tree.remove("gpuctl-core");
    assert_allowed("gpuctl-core's dependency tree", &tree, CORE_TREE, advice);
}

#[test]
fn the_cluster_crate_and_the_binary_depend_only_on_what_their_allow_lists_name() {
    assert_allowed(
        "gpuctl-cluster",
        &direct_dependencies("gpuctl-cluster"),
        CLUSTER_DIRECT,
        "the cluster crate talks to the API server, never to a terminal: put terminal code in the binary, or add a crate to the list with why",
    );
    assert_allowed(
        "gpuctl",
        &direct_dependencies("gpuctl"),
        BINARY_DIRECT,
        "add it to the list with why",
    );
    assert_allowed(
        "gpuctl-ci",
        &direct_dependencies("gpuctl-ci"),
        CI_DIRECT,
        "the CI crate talks to GitHub and GitLab with the HTTP stack kube already links: add a crate to the list with why",
    );
}

#[test]
fn the_policy_crate_depends_only_on_what_its_allow_lists_name() {
    assert_allowed(
        "gpuctl-policy",
        &direct_dependencies("gpuctl-policy"),
        POLICY_DIRECT,
        "the policy crate evaluates Rego over data gpuctl built: add a pure crate to the list with why",
    );
    let tree = dependency_tree("gpuctl-policy");
    let outside: Vec<&String> = tree
        .iter()
        .filter(|p| !CORE_TREE.contains(&p.as_str()) && !POLICY_TREE.contains(&p.as_str()))
        .collect();
    assert!(
        outside.is_empty(),
        "gpuctl-policy's dependency tree has {outside:?}, on neither the core's list nor POLICY_TREE: check that it is pure and add it with why"
    );
    let listed: Vec<&&str> = POLICY_TREE.iter().filter(|p| !tree.contains(**p)).collect();
    assert!(
        listed.is_empty(),
        "POLICY_TREE names {listed:?}, which gpuctl-policy's tree no longer has: remove them"
    );
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
/// included), in every line that is not test code ([`non_test_code`]).
fn references(text: &str, here: &ModPath) -> Vec<ModPath> {
    let code = non_test_code(text);
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

/// The source folder of every crate of the workspace, repository-relative: each `crates/*/src`
/// and the binary's `src`.
fn crate_sources() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join("crates"))
        .expect("read crates/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| format!("crates/{}/src", p.file_name().unwrap().to_string_lossy()))
        .collect();
    out.sort();
    out.push("src".into());
    assert!(
        out.len() >= 8,
        "expected the seven library crates and the binary: {out:?}"
    );
    out
}

#[test]
fn no_module_imports_its_way_back_into_itself() {
    let mut all = Vec::new();
    for src in crate_sources() {
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

/// Issue 38: `finding.rs` declared `#[cfg(test)] mod tests;` above its code, and the check stopped
/// reading there, so the imports below it (into four modules that import `finding` back) were
/// never seen. Those imports count; an inline test module's do not.
#[test]
fn the_cycle_check_reads_past_a_test_module_declaration() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "pub mod finding;\npub mod validate;\n").unwrap();
    std::fs::write(
        src.join("finding.rs"),
        "//! The registry.\n\n#[cfg(test)]\nmod tests;\n\nuse serde::Serialize;\n\npub fn rules() -> &'static [Rule] {\n    crate::validate::registry::RULES\n}\n",
    )
    .unwrap();
    std::fs::create_dir(src.join("validate")).unwrap();
    std::fs::write(src.join("validate/mod.rs"), "pub mod registry;\n").unwrap();
    std::fs::write(
        src.join("validate/registry.rs"),
        "use crate::finding::{Family, Rule};\npub static RULES: &[Rule] = &[];\n",
    )
    .unwrap();
    let found = cycles(src);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found
            .iter()
            .any(|f| f.starts_with("under the crate root: finding -> validate")),
        "{found:?}"
    );
    // The same import inside an inline test module is test code: no cycle.
    std::fs::write(
        src.join("finding.rs"),
        "#[cfg(test)]\nmod tests {\n    use crate::validate::registry::RULES;\n}\n\npub fn rules() {}\n",
    )
    .unwrap();
    assert!(cycles(src).is_empty(), "{:?}", cycles(src));
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

/// The longest a function of any crate (the binary included) may be, in lines from `fn` to its closing
/// brace (issue 28: a function that does not fit on a screen or two does several things; name
/// them).
const MAX_FUNCTION_LINES: usize = 120;

/// Functions still over [`MAX_FUNCTION_LINES`], each to be split into named steps: `(file, fn)`.
/// An entry that is no longer too long (or no longer exists) fails the test too, so this list only
/// shrinks.
const LONG_FUNCTIONS_TO_SPLIT: &[(&str, &str)] = &[];

/// A function found in a source file: its name, first line and length in lines.
#[derive(Debug, PartialEq)]
struct FunctionSpan {
    name: String,
    line: usize,
    lines: usize,
}

/// `text` with comments and the contents of string and character literals blanked (newlines
/// kept), so that braces and `fn` can be found by looking at characters.
///
/// Why a scanner and not the `syn` crate: syn is in Cargo.lock only as the proc-macros' build
/// dependency, without the `full` feature that parses function bodies, and its line numbers need
/// proc-macro2's `span-locations`; making it a dev-dependency would build a second syn for this
/// test binary. Rust's lexical structure is enough for "where does each `fn` body end": comments
/// (nested block comments included), strings, raw strings, byte strings and character literals
/// are the only places a brace does not count, and lifetimes (`'a`) are not literals.
fn blank_literals(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (rest.starts_with(b"r#") || rest.starts_with(b"r\"") || rest.starts_with(b"br"))
            && (i == 0 || !ident(b[i - 1]))
            && {
                let s = if rest[0] == b'b' {
                    &rest[2..]
                } else {
                    &rest[1..]
                };
                let hashes = s.iter().take_while(|&&c| c == b'#').count();
                s.get(hashes) == Some(&b'"')
            }
        {
            let start = if rest[0] == b'b' { i + 2 } else { i + 1 };
            let hashes = b[start..].iter().take_while(|&&c| c == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = start + hashes + 1;
            let end = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |n| body + n + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j.min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}', '{'); otherwise a lifetime or label.
            let end = if rest.get(1) == Some(&b'\\') {
                rest.iter()
                    .skip(2)
                    .position(|&c| c == b'\'')
                    .map(|n| i + n + 3)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + ch) == Some(&b'\'')).then_some(i + ch + 2)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("only ASCII was written over")
}

/// The index of the `}` that closes the `{` at `open` in `code` (literals and comments blanked).
fn closing(code: &str, open: usize) -> usize {
    let mut depth = 0usize;
    for (j, c) in code.bytes().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    code.len().saturating_sub(1)
}

/// `w` stands at `at` in `code` as a whole word followed by white space.
fn word_at(code: &str, at: usize, w: &str) -> bool {
    let b = code.as_bytes();
    code[at..].starts_with(w)
        && (at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_'))
        && b.get(at + w.len()).is_some_and(|c| c.is_ascii_whitespace())
}

/// The spans (from `mod` to its closing brace) of the inline test modules in `code` (literals
/// and comments blanked): `#[cfg(test)]` then, after other attributes, `mod name {`. A
/// `#[cfg(test)] mod tests;` declaration has no body here and is no span: the code after it is
/// not test code.
fn test_modules(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(n) = code[from..].find("#[cfg(test)]") {
        let at = from + n + "#[cfg(test)]".len();
        from = at;
        let rest = code[at..].trim_start();
        let mut k = code.len() - rest.len();
        while code[k..].starts_with("#[") {
            k = code[k..].find(']').map_or(code.len(), |e| k + e + 1);
            k = code.len() - code[k..].trim_start().len();
        }
        for vis in ["pub(crate) ", "pub "] {
            if code[k..].starts_with(vis) {
                k += vis.len();
            }
        }
        if word_at(code, k, "mod")
            && let Some(open) = code[k..].find(['{', ';'])
            && b[k + open] == b'{'
        {
            spans.push((k, closing(code, k + open)));
        }
    }
    spans
}

/// `text` as the compiler builds it outside tests: comments, literals and inline test modules
/// blanked (newlines kept), everything else as written.
fn non_test_code(text: &str) -> String {
    let code = blank_literals(text);
    let mut bytes = code.clone().into_bytes();
    for (start, end) in test_modules(&code) {
        for c in &mut bytes[start..=end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    String::from_utf8(bytes).expect("only ASCII was written over")
}

/// The functions with a body in `text` that are not test code (a `#[cfg(test)]` module's
/// contents are left out; a whole test file is left out by its caller).
fn functions(text: &str) -> Vec<FunctionSpan> {
    let code = blank_literals(text);
    let b = code.as_bytes();
    let line_of = |at: usize| code[..at].bytes().filter(|&c| c == b'\n').count() + 1;
    let test_code = test_modules(&code);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(n) = code[from..].find("fn") {
        let at = from + n;
        from = at + 2;
        if !word_at(&code, at, "fn") || test_code.iter().any(|&(s, e)| s <= at && at <= e) {
            continue;
        }
        let name: String = code[at + 2..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body starts at the first `{` outside the signature's parentheses and generics;
        // a `;` first is a declaration without a body (a trait's, an extern one).
        let Some(open) = code[at..].find(['{', ';']).map(|o| at + o) else {
            continue;
        };
        if b[open] == b';' || name.is_empty() {
            continue;
        }
        let end = closing(&code, open);
        out.push(FunctionSpan {
            name,
            line: line_of(at),
            lines: line_of(end) - line_of(at) + 1,
        });
    }
    out
}

/// Every non-test `.rs` file under `dir`, repository-relative (a `tests.rs` or a file under a
/// `tests/` folder is test code).
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() && name != "tests" {
            source_files(&p, out);
        } else if p.is_file() && name.ends_with(".rs") && name != "tests.rs" {
            out.push(p);
        }
    }
}

#[test]
fn no_function_of_any_crate_is_over_120_lines() {
    let mut too_long = Vec::new();
    let mut allowed_and_long = BTreeSet::new();
    for dir in crate_sources() {
        let mut files = Vec::new();
        source_files(&root().join(dir), &mut files);
        for file in files {
            let rel = file
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&file).expect("read source");
            for f in functions(&text) {
                if f.lines <= MAX_FUNCTION_LINES {
                    continue;
                }
                if LONG_FUNCTIONS_TO_SPLIT.contains(&(rel.as_str(), f.name.as_str())) {
                    allowed_and_long.insert((rel.clone(), f.name.clone()));
                } else {
                    too_long.push(format!(
                        "{rel}:{} fn {} is {} lines",
                        f.line, f.name, f.lines
                    ));
                }
            }
        }
    }
    let done: Vec<String> = LONG_FUNCTIONS_TO_SPLIT
        .iter()
        .filter(|(file, name)| !allowed_and_long.contains(&(file.to_string(), name.to_string())))
        .map(|(file, name)| format!("{file} fn {name}"))
        .collect();
    assert!(
        too_long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines: split each into named steps (what it does, one function a step):\n{}",
        too_long.join("\n")
    );
    assert!(
        done.is_empty(),
        "no longer over {MAX_FUNCTION_LINES} lines (or gone): remove from LONG_FUNCTIONS_TO_SPLIT:\n{}",
        done.join("\n")
    );
}

#[test]
fn the_function_scanner_sees_through_literals_comments_and_tests() {
    let text = r##"
/// A doc comment with a } brace.
pub fn short(x: &str) -> char {
    let s = "a } string { with braces";
    let r = r#"raw } " string"#;
    let c = '}';
    let l: &'static str = "x";
    /* a { block /* nested } */ comment */
    match x { _ => '{' }
}

trait T {
    fn declared(&self);
}

fn where_clause<T>(t: T) -> usize
where
    T: Clone,
{
    1
}

#[cfg(test)]
mod tests {
    fn a_test_helper() {
    }
}
"##;
    let found = functions(text);
    assert_eq!(
        found,
        vec![
            FunctionSpan {
                name: "short".into(),
                line: 3,
                lines: 8,
            },
            FunctionSpan {
                name: "where_clause".into(),
                line: 16,
                lines: 6,
            },
        ]
    );
}

/// `docs/architecture.md` lists every module of the three crates in its "Every module" tables
/// (the crate's heading, then a row per module: `plan/diff.rs`, `plan/` for `plan/mod.rs`), so
/// the map a newcomer reads is whole; a module added without its row fails here. Test modules
/// (`tests.rs`, `tests/`) are left out.
#[test]
fn docs_architecture_lists_every_module() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("readable");
    let map = doc
        .split("## Every module")
        .nth(1)
        .expect("docs/architecture.md has a section `## Every module`");
    let mut missing = Vec::new();
    for src in crate_sources() {
        let heading = format!("(`{src}/`)");
        let table = map
            .split("\n### ")
            .find(|section| section.lines().next().is_some_and(|h| h.contains(&heading)))
            .unwrap_or_else(|| panic!("no `### ... {heading}` table in `## Every module`"));
        let mut files = Vec::new();
        source_files(&root().join(&src), &mut files);
        for f in files {
            let rel = f
                .strip_prefix(root().join(&src))
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            if rel.ends_with("tests.rs") || rel.contains("tests/") {
                continue;
            }
            let name = rel.strip_suffix("mod.rs").unwrap_or(&rel).to_string();
            if !table.contains(&format!("| `{name}` |")) {
                missing.push(format!("{src}/{rel} (row `{name}`)"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules without a row in docs/architecture.md's `## Every module` tables:\n{}",
        missing.join("\n")
    );
}
