//! The document policies read as `input` (docs/policy.md, versioned by [`INPUT_FORMAT_VERSION`]):
//! what gpuctl evaluates, and what `--policy-input-out FILE` writes byte for byte, so the same
//! policies can be run on it with `conftest test -p DIR FILE`.
//!
//! Always an object (conftest evaluates a top-level array element by element):
//! `format_version`, `gpuctl_version`, `command`, then `blueprint` (the effective blueprint with the
//! file and line of each value), `findings` (what gpuctl found before the policies ran), `plan`
//! (when planning), and for fleets `fleet` and `clusters` (each with its own `blueprint`, `plan`
//! and `findings`).

use serde_json::{Map, Value, json};

use gpuctl_model::blueprint::Loaded;
use gpuctl_model::located::FileReport;

/// Version of the input document; bumped when a field changes meaning or goes away (new fields
/// do not bump it).
pub const INPUT_FORMAT_VERSION: u32 = 1;

/// A blueprint as policies see it: the file named, the effective document (after `extends`), and
/// every path's file and line (`locations["spec.tenants[0].quota"]` = `{"file", "line", "column"}`),
/// which a result can return as its `_loc` so the finding points at that line.
pub fn blueprint(loaded: &Loaded) -> Value {
    let mut locations = Map::new();
    for (path, pos, file) in loaded.tree.locations() {
        let file = match file {
            0 => loaded.file.as_str(),
            n => loaded
                .layers
                .get(n - 1)
                .map_or(loaded.file.as_str(), |l| l.file.as_str()),
        };
        locations.insert(
            path,
            json!({ "file": file, "line": pos.line, "column": pos.column }),
        );
    }
    json!({
        "file": loaded.file,
        "extends": loaded.layers.iter().map(|l| l.file.as_str()).collect::<Vec<_>>(),
        "document": loaded.tree.value,
        "locations": locations,
    })
}

/// A YAML file other than a blueprint (the fleet file) as policies see it: `file`, `document`
/// (as written: no defaults filled in, so an absent field is absent, never `null`) and
/// `locations`, as for a blueprint.
pub fn yaml_file(file: &str, text: &str) -> Value {
    match gpuctl_model::blueprint::yaml::SourceTree::parse(text) {
        Ok(tree) => {
            let mut locations = Map::new();
            for (path, pos, _) in tree.locations() {
                locations.insert(
                    path,
                    json!({ "file": file, "line": pos.line, "column": pos.column }),
                );
            }
            json!({ "file": file, "document": tree.value, "locations": locations })
        }
        Err(_) => json!({ "file": file }),
    }
}

/// Validation findings as policies see them: one entry per finding.
pub fn findings(reports: &[FileReport]) -> Value {
    let mut out = Vec::new();
    for r in reports {
        for f in &r.findings {
            let mut o = json!({
                "id": f.rule,
                "severity": f.severity.to_string(),
                "file": r.file,
                "path": f.path,
                "message": f.message,
            });
            if let Some(p) = f.pos {
                o["line"] = json!(p.line);
            }
            out.push(o);
        }
    }
    Value::Array(out)
}

/// The whole input: `command` (`validate`, `plan`, `fleet plan`) and the parts it has, each as
/// documented in docs/policy.md (absent parts are left out, never `null`).
pub fn document(command: &str, parts: Vec<(&str, Value)>) -> Value {
    let mut o = Map::new();
    o.insert("format_version".into(), json!(INPUT_FORMAT_VERSION));
    o.insert("gpuctl_version".into(), json!(env!("CARGO_PKG_VERSION")));
    o.insert("command".into(), json!(command));
    for (k, v) in parts {
        o.insert(k.to_string(), v);
    }
    Value::Object(o)
}
