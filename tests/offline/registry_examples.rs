//! Every validation rule's registry example triggers the rule, and its fixed form does not
//! (issue 38): what `gpuctl explain` and docs/rules.md show is checked, not illustrative.
//!
//! An example is a fragment, so each is made into whole files first, one way per [`Target`]:
//!
//! - a blueprint fragment is merged into the base blueprint, `blueprints/fleet/base/training.yaml`
//!   ([`merge`]: mappings merge key by key; an item of a list updates the base's item of the same
//!   `name`, an unnamed one the item at its position, one level deep, and other items are added;
//!   a list of scalars replaces the base's). A fragment that sets `spec.scheduling.queueing:
//!   volcano` is merged into the base with Volcano in place of its Kueue ([`VOLCANO`], the same
//!   queue names), since a merge cannot remove a section. The result is written as
//!   `blueprint.yaml` beside a copy of the base (`base.yaml`) and checked by
//!   `validate::check_path`, as `gpuctl validate` checks it;
//! - an overlay (GPU180, GPU181) is the whole file, which `extends: base.yaml`;
//! - a fragment that is not YAML cannot be merged: it is the whole file (GPU001 only; its fixed
//!   form parses, and is merged like any other);
//! - a fleet fragment is merged the same way into `blueprints/fleet/fleet.yaml`, in a copy of
//!   `blueprints/fleet/`, and checked by `fleet::check_path`, as `gpuctl fleet validate`
//!   checks it (every cluster's blueprint included);
//! - a cluster fragment (GPU194-GPU196, which compare the MultiKueue manager's blueprint with its
//!   workers') is an overlay of one cluster's blueprint in that copy: written as a file that
//!   `extends` it, which the fleet then names instead.
//!
//! The example must report its rule. The fixed form must not, and must report no id the example
//! does not: a fix only takes findings away, so it cannot pass by breaking the file in a new way
//! (a syntax error, a missing field) that keeps the rule from running.

use std::collections::BTreeSet;
use std::path::Path;

use jiff::civil::date;
use serde_json::Value;

use gpuctl_core::blueprint::yaml::SourceTree;
use gpuctl_core::profiles::Catalog;
use gpuctl_core::validate::Options;
use gpuctl_core::validate::registry::{RULES, Rule};

/// The blueprint every blueprint fragment is merged into (valid: [`the_bases_are_clean`]).
const BASE: &str = include_str!("../../blueprints/fleet/base/training.yaml");

/// What replaces the base's `scheduling` for fragments that set `queueing: volcano`: Volcano queues
/// of the names the base's tenants use.
const VOLCANO: &str = "queueing: volcano
volcano:
  version: v1.15.1
  queues:
    - {name: cq-team-a, parent: root, weight: 2}
    - {name: cq-infer, parent: root, weight: 1}
";

/// The example fleet: the fleet file fleet fragments are merged into, and its clusters.
const FLEET_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/blueprints/fleet");

/// What an example is a fragment of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A blueprint: merged into [`BASE`].
    Blueprint,
    /// A whole blueprint file (an overlay), beside `base.yaml`, which it may extend.
    Document,
    /// A fleet file: merged into the example fleet's.
    Fleet,
    /// An overlay of the named cluster's blueprint in the example fleet.
    Cluster(&'static str),
}

/// Fragments that are not YAML, checked as the whole file (nothing can be merged into them).
const UNPARSEABLE: &[&str] = &["GPU001"];

fn target(rule: &Rule) -> Target {
    match rule.id {
        // Overlays: the file that extends is the example.
        "GPU180" | "GPU181" => Target::Document,
        // The MultiKueue manager (`hub`) against its workers (`us-east`, `eu-onprem`): a fragment
        // of a worker's overlay, or of the manager's.
        "GPU194" => Target::Cluster("us-east"),
        "GPU195" | "GPU196" => Target::Cluster("hub"),
        _ if rule.area == "fleet" => Target::Fleet,
        _ => Target::Blueprint,
    }
}

fn opts() -> Options {
    Options {
        today: date(2026, 11, 30),
    }
}

/// Parses a fragment (or a whole file) into its value.
fn parse(text: &str) -> Result<Value, String> {
    SourceTree::parse(text)
        .map(|t| t.value)
        .map_err(|e| format!("not YAML: {}", e.message))
}

/// Merges `fragment` into `base`: mappings key by key, a list of mappings item by item
/// ([`merge_items`]), anything else (a list of scalars too) replaces the base's value.
fn merge(base: &mut Value, fragment: Value) {
    match (base, fragment) {
        (Value::Object(b), Value::Object(f)) => {
            for (key, value) in f {
                match b.get_mut(&key) {
                    Some(old) => merge(old, value),
                    None => {
                        b.insert(key, value);
                    }
                }
            }
        }
        (Value::Array(b), Value::Array(items)) if items.iter().all(Value::is_object) => {
            merge_items(b, items);
        }
        (b, f) => *b = f,
    }
}

/// A fragment's list items into the base's list: an item updates the base's item of the same
/// `name` (an unnamed one: the item at the same position) field by field, one level deep, so a
/// field it gives (a selector, a `gpu`, a list) replaces that item's whole; an item whose name the
/// base lacks (or an earlier item of the fragment already updated) is added as written. The base's
/// other items stay.
fn merge_items(base: &mut Vec<Value>, items: Vec<Value>) {
    let mut updated = vec![false; base.len()];
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(fields) = item else {
            unreachable!("only lists of mappings are merged item by item")
        };
        let at = match fields.get("name") {
            Some(name) => base.iter().position(|b| b.get("name") == Some(name)),
            None => (i < base.len()).then_some(i),
        };
        match at.filter(|&at| !updated[at]) {
            Some(at) => {
                updated[at] = true;
                if let Value::Object(old) = &mut base[at] {
                    old.extend(fields);
                } else {
                    base[at] = Value::Object(fields);
                }
            }
            None => base.push(Value::Object(fields)),
        }
    }
}

/// `fragment` merged into `base` (a file's text), as YAML (JSON is YAML, and unambiguous).
fn merged(base: &str, fragment: &str) -> Result<String, String> {
    let mut doc = parse(base).expect("the base parses");
    let fragment = parse(fragment)?;
    if !fragment.is_object() {
        return Err("not a mapping, so nothing can be merged".into());
    }
    if fragment["spec"]["scheduling"]["queueing"] == "volcano" {
        doc["spec"]["scheduling"] = parse(VOLCANO).expect("VOLCANO parses");
    }
    merge(&mut doc, fragment);
    Ok(serde_json::to_string_pretty(&doc).expect("a value serialises"))
}

/// Copies the example fleet (its fleet files and every blueprint it names) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creates the directory");
    for entry in std::fs::read_dir(from).expect("reads blueprints/fleet") {
        let entry = entry.expect("a directory entry");
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).expect("copies a file");
        }
    }
}

/// The ids every finding of `text` (an example or a fixed form of `rule`) reports, through the
/// command's own path; `Err` when the text cannot be made into files.
fn ids(rule: &Rule, text: &str) -> Result<BTreeSet<&'static str>, String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("writes a file");
        path
    };
    let catalog = Catalog::embedded();
    let reports = match target(rule) {
        Target::Blueprint | Target::Document => {
            write("base.yaml", BASE);
            let file = match target(rule) {
                Target::Document => text.to_string(),
                _ if UNPARSEABLE.contains(&rule.id) && parse(text).is_err() => text.to_string(),
                _ => merged(BASE, text)?,
            };
            let path = write("blueprint.yaml", &file);
            gpuctl_core::validate::check_path(&path, None, catalog, opts())
                .map_err(|e| e.to_string())?
        }
        Target::Fleet | Target::Cluster(_) => {
            copy_dir(Path::new(FLEET_DIR), dir.path());
            let fleet = std::fs::read_to_string(dir.path().join("fleet.yaml")).expect("fleet.yaml");
            let fleet = match target(rule) {
                Target::Cluster(name) => {
                    let overlay = format!(
                        "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: {name}.yaml\n"
                    );
                    write("clusters/example.yaml", &merged(&overlay, text)?);
                    let mut doc = parse(&fleet).expect("fleet.yaml parses");
                    let clusters = doc["spec"]["clusters"].as_array_mut().expect("clusters");
                    let cluster = clusters
                        .iter_mut()
                        .find(|c| c["name"] == name)
                        .expect("the example fleet has the cluster");
                    cluster["blueprint"] = "clusters/example.yaml".into();
                    serde_json::to_string_pretty(&doc).expect("a value serialises")
                }
                _ => merged(&fleet, text)?,
            };
            let path = write("fleet.yaml", &fleet);
            gpuctl_core::fleet::check_path(&path, catalog, opts())
                .map_err(|e| e.to_string())?
                .reports()
        }
    };
    Ok(reports
        .iter()
        .flat_map(|r| r.findings.iter().map(|f| f.rule))
        .collect())
}

fn listed(ids: &BTreeSet<&'static str>) -> String {
    if ids.is_empty() {
        "nothing".into()
    } else {
        ids.iter().copied().collect::<Vec<_>>().join(", ")
    }
}

/// What is wrong with one rule's example and fixed form (empty: nothing).
fn problems(rule: &Rule) -> Vec<String> {
    let id = rule.id;
    let mut out = Vec::new();
    let example = match ids(rule, rule.example) {
        Ok(ids) => ids,
        Err(e) => {
            out.push(format!("{id}: the example cannot be checked: {e}"));
            return out;
        }
    };
    if !example.contains(id) {
        out.push(format!(
            "{id}: the example does not trigger {id} (it reports {})",
            listed(&example)
        ));
    }
    if rule.fixed.trim().is_empty() {
        out.push(format!("{id}: no fixed form"));
        return out;
    }
    if rule.fixed == rule.example {
        out.push(format!("{id}: the fixed form is the example"));
    }
    match ids(rule, rule.fixed) {
        Err(e) => out.push(format!("{id}: the fixed form cannot be checked: {e}")),
        Ok(fixed) => {
            if fixed.contains(id) {
                out.push(format!("{id}: the fixed form still triggers {id}"));
            }
            let new: BTreeSet<_> = fixed
                .difference(&example)
                .copied()
                .filter(|&other| other != id)
                .collect();
            if !new.is_empty() {
                out.push(format!(
                    "{id}: the fixed form reports {}, which the example does not",
                    listed(&new)
                ));
            }
        }
    }
    out
}

#[test]
fn every_example_triggers_its_rule_and_its_fixed_form_does_not() {
    let problems: Vec<String> = RULES.iter().flat_map(problems).collect();
    assert!(
        problems.is_empty(),
        "{} problems with the registry's examples (crates/model/src/finding/validation.rs; \
         regenerate docs/rules.md after changing them):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_rule_has_a_fixed_form() {
    let missing: Vec<&str> = RULES
        .iter()
        .filter(|r| r.fixed.trim().is_empty())
        .map(|r| r.id)
        .collect();
    assert!(missing.is_empty(), "no fixed form: {missing:?}");
}

#[test]
fn the_bases_are_clean() {
    let any = RULES
        .iter()
        .find(|r| target(r) == Target::Blueprint)
        .unwrap();
    assert_eq!(ids(any, "{}\n"), Ok(BTreeSet::new()), "the base blueprint");
    let volcano = "spec: {scheduling: {queueing: volcano}}\n";
    assert_eq!(
        ids(any, volcano),
        Ok(BTreeSet::new()),
        "the base with Volcano"
    );
    let any = RULES.iter().find(|r| target(r) == Target::Fleet).unwrap();
    assert_eq!(ids(any, "{}\n"), Ok(BTreeSet::new()), "the example fleet");
    let any = RULES
        .iter()
        .find(|r| target(r) == Target::Cluster("hub"))
        .unwrap();
    assert_eq!(
        ids(any, "{}\n"),
        Ok(BTreeSet::new()),
        "an overlay of the hub"
    );
}

#[test]
fn merging_updates_list_items_by_name_or_position_and_adds_the_others() {
    let base =
        "a: {b: 1, c: 2}\nl:\n  - {name: x, v: 1, w: {k: 1}}\n  - {name: y, v: 2}\ns: [1, 2]\n";
    let fragment =
        "a: {c: 3}\nl:\n  - {w: {j: 2}}\n  - {name: y, w: 5}\n  - {name: y, v: 3}\ns: [3]\n";
    let want = serde_json::json!({
        "a": {"b": 1, "c": 3},
        "l": [
            {"name": "x", "v": 1, "w": {"j": 2}},
            {"name": "y", "v": 2, "w": 5},
            {"name": "y", "v": 3},
        ],
        "s": [3],
    });
    let out = merged(base, fragment).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), want);
}
