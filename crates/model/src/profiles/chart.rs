//! GPU Operator chart values: the key tree of each supported chart release (generated from the
//! chart's own `values.yaml` into `profiles/gpu-operator-values/<version>.yaml`), Helm's deep merge,
//! and the check that every key path gpuctl or the user writes exists in that release's chart.
//!
//! A key tree maps each key to a sub-tree or to a leaf kind: `scalar`, `list`, `map` (a free-form
//! map such as `daemonsets.labels: {}` or `operator.nodeSelector`, whose keys are the user's) or
//! `any` (a key values.yaml leaves empty).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::object::set_path;
use crate::version::OperatorVersion;

/// Leaf kinds of a key tree.
const SCALAR: &str = "scalar";
const LIST: &str = "list";
const MAP: &str = "map";
const ANY: &str = "any";

/// Chart value paths whose defaults render needs: the image fields the NVIDIADriver CRs copy (as the
/// chart's own default-CR template does) and the operand toleration lists that pool taints extend.
pub const DEFAULT_PATHS: [&str; 7] = [
    "driver.repository",
    "driver.image",
    "driver.manager.repository",
    "driver.manager.image",
    "driver.manager.version",
    "daemonsets.tolerations",
    "node-feature-discovery.worker.tolerations",
];

/// The generated key trees, one per supported chart release.
const KEY_TREE_FILES: [&str; 2] = [
    include_str!("../../../../profiles/gpu-operator-values/v25.10.1.yaml"),
    include_str!("../../../../profiles/gpu-operator-values/v26.7.0.yaml"),
];

/// Hand-maintained per-release facts (`profiles/gpu-operator-values/releases.yaml`).
const RELEASES_FILE: &str = include_str!("../../../../profiles/gpu-operator-values/releases.yaml");

/// `profiles/gpu-operator-values/<version>.yaml` as written by [`key_tree_file`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyTreeFile {
    source: String,
    version: String,
    defaults: BTreeMap<String, Value>,
    keys: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleasesFile {
    #[allow(dead_code)]
    source: Vec<String>,
    releases: BTreeMap<String, ReleaseFacts>,
}

/// What render needs to know about a release beyond its key tree.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseFacts {
    /// NVIDIADriver has `spec.default` (a fallback CR without node selector).
    pub nvidia_driver_default_field: bool,
    /// NVIDIADriver has a per-CR `spec.upgradePolicy`.
    pub nvidia_driver_upgrade_policy: bool,
    /// Keys the chart reads that values.yaml shows only in comments, with their leaf kind.
    #[serde(default)]
    pub commented_keys: BTreeMap<String, String>,
    /// Subtrees whose keys values.yaml does not list in full.
    #[serde(default)]
    pub open: Vec<String>,
    /// Image repositories of dependency charts (path in the parent's values -> the dependency's
    /// default), which the parent's values.yaml does not show.
    #[serde(default)]
    pub subchart_images: BTreeMap<String, String>,
    /// Dependency charts' pull-secret lists, written as `[{name: ...}]` (a PodSpec's form) rather
    /// than the operator's plain names.
    #[serde(default)]
    pub subchart_pull_secrets: Vec<String>,
}

/// One supported chart release: its key tree, defaults and facts.
#[derive(Debug, Clone)]
pub struct ChartRelease {
    /// Chart version as the key tree file names it (`v26.7.0`).
    pub version: String,
    /// Key tree with commented keys added and open subtrees marked.
    pub keys: Map<String, Value>,
    /// Values of [`DEFAULT_PATHS`] in the chart.
    pub defaults: BTreeMap<String, Value>,
    /// Facts from `releases.yaml`.
    pub facts: ReleaseFacts,
}

/// A chart key path that does not fit the release's key tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyProblem {
    /// Dotted path, e.g. `driver.verison`.
    pub path: String,
    /// The same path as blueprint diagnostics write it (keys with dots quoted), for positions.
    pub yaml_path: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl std::fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` {}", self.path, self.message)
    }
}

impl ChartRelease {
    /// Every key path in `values` that this release's chart does not have.
    pub fn unknown_paths(&self, values: &Map<String, Value>) -> Vec<KeyProblem> {
        let mut out = Vec::new();
        check_tree(values, &self.keys, "", "", &mut out);
        out
    }

    /// The chart's default for one of [`DEFAULT_PATHS`] or an image repository, when it is a
    /// string.
    pub fn default_of(&self, path: &str) -> Option<&str> {
        self.defaults.get(path).and_then(Value::as_str)
    }

    /// Every image repository path the chart (and its dependencies) has, with its default.
    pub fn image_repositories(&self) -> impl Iterator<Item = (&str, &str)> {
        self.defaults.iter().filter_map(|(k, v)| {
            (k == "repository" || k.ends_with(".repository"))
                .then(|| Some((k.as_str(), v.as_str()?)))
                .flatten()
        })
    }

    /// Every `imagePullSecrets` list of the chart's operands (plain names), by path.
    pub fn pull_secret_paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        collect_leaves(&self.keys, "", "imagePullSecrets", &mut out);
        out
    }
}

fn collect_leaves(tree: &Map<String, Value>, prefix: &str, name: &str, out: &mut Vec<String>) {
    for (k, v) in tree {
        let path = join(prefix, k);
        match v {
            Value::Object(sub) => collect_leaves(sub, &path, name, out),
            Value::String(kind) if k == name && kind == LIST => out.push(path),
            _ => {}
        }
    }
}

/// Every path in `values` whose last key is `repository` and whose value is a string.
fn repository_paths(values: &Map<String, Value>, prefix: &str, out: &mut BTreeMap<String, Value>) {
    for (k, v) in values {
        let path = join(prefix, k);
        match v {
            Value::Object(sub) => repository_paths(sub, &path, out),
            Value::String(_) if k == "repository" => {
                out.insert(path, v.clone());
            }
            _ => {}
        }
    }
}

/// The supported release matching `version` (`v26.7` matches `v26.7.0`), or `None`.
pub fn chart_release(version: &str) -> Option<&'static ChartRelease> {
    let wanted: OperatorVersion = version.parse().ok()?;
    releases()
        .iter()
        .find(|r| r.version.parse::<OperatorVersion>().ok().as_ref() == Some(&wanted))
}

/// The NVIDIA Network Operator chart key trees
/// (`profiles/network-operator-values/<version>.yaml`, generated by the same
/// [`key_tree_file`] from that chart's `values.yaml`).
const NETWORK_KEY_TREE_FILES: [&str; 1] = [include_str!(
    "../../../../profiles/network-operator-values/v26.4.1.yaml"
)];

/// The Network Operator chart release matching `version` (`v26.4.1` or `26.4.1`), or `None`.
pub fn network_operator_release(version: &str) -> Option<&'static ChartRelease> {
    static RELEASES: OnceLock<Vec<ChartRelease>> = OnceLock::new();
    let want = version.strip_prefix('v').unwrap_or(version);
    RELEASES
        .get_or_init(|| {
            NETWORK_KEY_TREE_FILES
                .iter()
                .map(|text| {
                    let file: KeyTreeFile = serde_saphyr::from_str(text).expect(
                        "embedded network-operator key trees parse (render_schemas checks them)",
                    );
                    ChartRelease {
                        version: file.version,
                        keys: file.keys,
                        defaults: file.defaults,
                        facts: ReleaseFacts {
                            nvidia_driver_default_field: false,
                            nvidia_driver_upgrade_policy: false,
                            commented_keys: BTreeMap::new(),
                            open: Vec::new(),
                            subchart_images: BTreeMap::new(),
                            subchart_pull_secrets: Vec::new(),
                        },
                    }
                })
                .collect()
        })
        .iter()
        .find(|r| r.version.strip_prefix('v').unwrap_or(&r.version) == want)
}

/// Versions that have a key tree, oldest first.
pub fn known_releases() -> Vec<&'static str> {
    releases().iter().map(|r| r.version.as_str()).collect()
}

fn releases() -> &'static [ChartRelease] {
    static RELEASES: OnceLock<Vec<ChartRelease>> = OnceLock::new();
    RELEASES.get_or_init(|| {
        load(&KEY_TREE_FILES, RELEASES_FILE)
            .expect("embedded key trees are valid (checked by render::chart::tests)")
    })
}

fn load(trees: &[&str], releases: &str) -> Result<Vec<ChartRelease>, String> {
    let facts: ReleasesFile = serde_saphyr::from_str(releases)
        .map_err(|e| format!("profiles/gpu-operator-values/releases.yaml: {e}"))?;
    let mut out = Vec::new();
    for text in trees {
        let file: KeyTreeFile = serde_saphyr::from_str(text)
            .map_err(|e| format!("profiles/gpu-operator-values key tree: {e}"))?;
        let facts = facts
            .releases
            .get(&file.version)
            .ok_or_else(|| format!("releases.yaml has no entry for {}", file.version))?
            .clone();
        let mut keys = file.keys;
        for (path, kind) in &facts.commented_keys {
            set_path(&mut keys, path, Value::String(kind.clone()));
        }
        for path in &facts.open {
            set_path(&mut keys, path, Value::String(MAP.to_string()));
        }
        let mut defaults = file.defaults;
        for (path, repo) in &facts.subchart_images {
            defaults.insert(path.clone(), Value::String(repo.clone()));
        }
        out.push(ChartRelease {
            version: file.version,
            keys,
            defaults,
            facts,
        });
    }
    out.sort_by_key(|r| r.version.parse::<OperatorVersion>().ok());
    Ok(out)
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn check_tree(
    values: &Map<String, Value>,
    tree: &Map<String, Value>,
    prefix: &str,
    yaml_prefix: &str,
    out: &mut Vec<KeyProblem>,
) {
    for (key, value) in values {
        let path = join(prefix, key);
        let yaml_path = crate::blueprint::yaml::join(yaml_prefix, key);
        let Some(node) = tree.get(key) else {
            let hint = crate::suggest::did_you_mean(key, tree.keys().map(String::as_str));
            let hint = if hint.is_empty() {
                match prefix {
                    "" => "is not a key of the chart".to_string(),
                    p => format!("is not a key of `{p}` in the chart"),
                }
            } else {
                format!("is not a key of the chart; {}", hint.trim_end())
            };
            out.push(KeyProblem {
                path,
                yaml_path,
                message: hint,
            });
            continue;
        };
        match (node, value) {
            // `null` removes a key in Helm: allowed anywhere the key exists.
            (_, Value::Null) => {}
            (Value::Object(sub), Value::Object(v)) => check_tree(v, sub, &path, &yaml_path, out),
            (Value::Object(_), _) => out.push(KeyProblem {
                path,
                yaml_path,
                message: "is a mapping in the chart; give it keys".to_string(),
            }),
            (Value::String(kind), v) => match kind.as_str() {
                MAP | ANY => {}
                LIST if v.is_array() => {}
                LIST => out.push(KeyProblem {
                    path,
                    yaml_path,
                    message: "is a list in the chart".to_string(),
                }),
                _ if v.is_object() || v.is_array() => out.push(KeyProblem {
                    path,
                    yaml_path,
                    message: "is a single value in the chart, not a mapping or list".to_string(),
                }),
                _ => {}
            },
            _ => {}
        }
    }
}

/// Helm's merge of a values overlay: mappings merge key by key, everything else (lists, scalars,
/// `null`) replaces what was there.
pub fn deep_merge(base: &mut Map<String, Value>, overlay: &Map<String, Value>) {
    for (key, value) in overlay {
        match (base.get_mut(key), value) {
            (Some(Value::Object(b)), Value::Object(o)) => deep_merge(b, o),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The key tree of a chart's parsed `values.yaml`: sub-trees for mappings, leaf kinds otherwise. A
/// mapping that is empty, or whose keys look like label or annotation keys (contain `/`), is a
/// free-form `map`.
pub fn key_tree(values: &Map<String, Value>) -> Map<String, Value> {
    values
        .iter()
        .map(|(k, v)| {
            let node = match v {
                Value::Object(m) if m.is_empty() || m.keys().any(|k| k.contains('/')) => {
                    Value::String(MAP.to_string())
                }
                Value::Object(m) => Value::Object(key_tree(m)),
                Value::Array(_) => Value::String(LIST.to_string()),
                Value::Null => Value::String(ANY.to_string()),
                _ => Value::String(SCALAR.to_string()),
            };
            (k.clone(), node)
        })
        .collect()
}

/// The text of `profiles/gpu-operator-values/<version>.yaml` for a chart's parsed `values.yaml`.
pub fn key_tree_file(version: &str, source: &str, values: &Map<String, Value>) -> String {
    let mut defaults = BTreeMap::new();
    for path in DEFAULT_PATHS {
        let pointer = format!("/{}", path.replace('.', "/"));
        if let Some(v) = Value::Object(values.clone()).pointer(&pointer) {
            defaults.insert(path.to_string(), v.clone());
        }
    }
    // Every image repository, so an image mirror can rewrite the ones the blueprint leaves alone.
    repository_paths(values, "", &mut defaults);
    let file = KeyTreeFile {
        source: source.to_string(),
        version: version.to_string(),
        defaults,
        keys: key_tree(values),
    };
    let body = serde_saphyr::to_string(&file).expect("key trees serialise");
    format!(
        "# GPU Operator {version} chart: every key of its values.yaml (leaf kinds: scalar, list, map = free-form,\n\
         # any = left empty) and the defaults render copies into NVIDIADriver CRs or rewrites for an image mirror. Generated; do not edit.\n\
         # Regenerate: GPUCTL_UPDATE_KEYTREES=1 cargo test --test offline render_schemas::key_trees_match_upstream_values\n\
         {body}"
    )
}

/// The text of `profiles/network-operator-values/<version>.yaml` for the NVIDIA Network Operator
/// chart's parsed `values.yaml`: the same key tree as [`key_tree_file`], under its own header.
pub fn network_key_tree_file(version: &str, source: &str, values: &Map<String, Value>) -> String {
    let text = key_tree_file(version, source, values);
    let body = text
        .split_once("\nsource:")
        .map(|(_, rest)| format!("source:{rest}"))
        .unwrap_or(text.clone());
    format!(
        "# NVIDIA Network Operator {version} chart: every key of its values.yaml (leaf kinds: scalar, list, map = free-form,\n\
         # any = left empty), for checking the values gpuctl writes and `networkOperator.values`. Generated; do not edit.\n\
         # Regenerate: GPUCTL_UPDATE_KEYTREES=1 cargo test --test offline render_schemas::key_trees_match_upstream_values\n\
         {body}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn embedded_trees_load_and_know_both_releases() {
        assert_eq!(known_releases(), vec!["v25.10.1", "v26.7.0"]);
        let r = chart_release("v26.7.0").unwrap();
        assert!(r.facts.nvidia_driver_default_field);
        assert_eq!(r.default_of("driver.image"), Some("driver"));
        assert!(chart_release("v26.7").is_some());
        assert!(chart_release("v26.3.3").is_none());
    }

    #[test]
    fn unknown_paths_name_the_path_and_suggest() {
        let r = chart_release("v26.7.0").unwrap();
        let bad = obj(json!({
            "driver": {"verison": "1", "version": "595.91.07", "upgradePolicy": {"drain": {"enable": true}}},
            "daemonsets": {"labels": {"any/key": "x"}, "tolerations": {"a": 1}},
            "nosuch": 1,
            "mig": "single",
            "node-feature-discovery": {"worker": {"nodeSelector": {"a": "b"}}},
            "dcgmExporter": {"config": {"name": "x"}},
        }));
        let problems = r.unknown_paths(&bad);
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            vec!["driver.verison", "daemonsets.tolerations", "nosuch", "mig"]
        );
        assert!(
            problems[0].message.contains("did you mean `version`"),
            "{problems:?}"
        );
    }

    #[test]
    fn deep_merge_merges_maps_and_replaces_the_rest() {
        let mut base = obj(json!({"a": {"b": 1, "c": [1]}, "d": 1}));
        deep_merge(
            &mut base,
            &obj(json!({"a": {"c": [2], "e": null}, "d": {"x": 1}})),
        );
        assert_eq!(
            Value::Object(base),
            json!({"a": {"b": 1, "c": [2], "e": null}, "d": {"x": 1}})
        );
    }

    #[test]
    fn key_tree_marks_free_form_maps() {
        let t = key_tree(&obj(json!({
            "a": {"b": {}, "c": [], "d": null, "e": "x", "f": {"kubernetes.io/os": "linux"}}
        })));
        assert_eq!(
            Value::Object(t),
            json!({"a": {"b": "map", "c": "list", "d": "any", "e": "scalar", "f": "map"}})
        );
    }
}
