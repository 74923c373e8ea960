//! Snapshots: the live objects a blueprint touches, captured by `gpuctl snapshot` so CI can plan
//! without cluster credentials. A snapshot is a versioned JSON file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use gpuctl_model::applyset::PART_OF;
use gpuctl_model::object::{ObjectRef, TypeRef};
use gpuctl_pipeline::render::RenderedSet;
use gpuctl_plan::live::{LiveView, Reading, Source};

/// Version of the snapshot file format. 2 added `helm_release` and `upgrade_journals`; a version 1
/// snapshot did not capture them, so its plans cannot say what the Helm step changes or see
/// driver upgrades. 3 added `releases` (Kueue's and the Network Operator's Helm releases); plans
/// from an older snapshot say they cannot tell what those steps change. 4 added `diagnostics`
/// (`gpuctl snapshot --diagnostics`); older snapshots still read, without it.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 4;

/// Live state as captured.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    /// Format version; readers refuse newer ones.
    pub format_version: u32,
    /// Cluster fingerprint at capture time.
    #[serde(default)]
    pub fingerprint: Option<String>,
    /// Server URL at capture time.
    #[serde(default)]
    pub server: Option<String>,
    /// When it was captured (RFC 3339, UTC); snapshots made before gpuctl recorded it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_at: Option<String>,
    /// Objects by key (`apiVersion|kind|namespace|name`).
    pub objects: BTreeMap<String, Value>,
    /// Kinds the cluster served at capture time (`apiVersion|kind`).
    #[serde(default)]
    pub served_kinds: Vec<String>,
    /// Nodes (metadata and spec.taints only).
    #[serde(default)]
    pub nodes: Vec<Value>,
    /// The operator's Helm release (chart, status and the values it was given), when the
    /// blueprint installs it with helm and it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_release: Option<gpuctl_plan::live::release::LiveRelease>,
    /// The other stacks' Helm releases the blueprint installs with helm (Kueue's, the Network
    /// Operator's), each with its newest revision or none (format 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<CapturedRelease>,
    /// The blueprint's `gpuctl upgrade` journals, so snapshot plans refuse what live plans refuse
    /// (a pool an upgrade is moving, or moved to a driver the blueprint does not declare yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upgrade_journals: Vec<gpuctl_plan::journal::Journal>,
    /// Set by `gpuctl snapshot --all`: the snapshot holds every object `gpuctl import` reads, not
    /// one blueprint's, and what import needs besides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportCapture>,
    /// Set by `gpuctl snapshot --diagnostics`: the Day-2 state `gpuctl doctor` and `gpuctl
    /// status` read (pods, events, quotas, queues, operator status; masked at capture).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<crate::diagnostics::Diagnostics>,
}

/// One of the other stacks' Helm releases as captured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CapturedRelease {
    /// Release namespace.
    pub namespace: String,
    /// Release name.
    pub release: String,
    /// Its newest revision (absent: Helm stored none when the snapshot was captured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<gpuctl_plan::live::release::LiveRelease>,
}

/// What a `--all` snapshot records for `gpuctl import` besides objects and nodes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ImportCapture {
    /// The namespace of the GPU Operator's Helm release, when one was found.
    #[serde(default)]
    pub operator_namespace: Option<String>,
    /// The API server's version.
    #[serde(default)]
    pub kubernetes_version: Option<String>,
    /// The newest revision of every Helm release of a chart import maps (GPU Operator, Network
    /// Operator, Kueue), found by chart name under any release name (`None`: not looked for, a
    /// snapshot taken before gpuctl did; then `operator_namespace`'s `gpu-operator` release is the
    /// operator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub releases: Option<Vec<gpuctl_plan::live::release::NamedRelease>>,
    /// Helm releases not decoded because the cluster holds more than import reads.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub releases_unread: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Why a snapshot could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Unreadable, not a regular file, or over [`gpuctl_model::input::SNAPSHOT`].
    #[error("snapshot {0}")]
    Read(#[source] gpuctl_model::input::InputError),
    /// Not a snapshot.
    #[error(
        "`{path}` is not a gpuctl snapshot: {message}; capture one with `gpuctl snapshot BLUEPRINT --out FILE`"
    )]
    Parse {
        /// File.
        path: String,
        /// Why.
        message: String,
    },
    /// A valid snapshot without what this command reads (taken without `--diagnostics` or
    /// `--all`): `what` says what it lacks and how to capture it.
    #[error("snapshot `{path}` {what}")]
    Lacks {
        /// File.
        path: String,
        /// What it lacks, and the capture that has it.
        what: String,
    },
    /// A snapshot whose content does not have the shape capture writes (edited or damaged):
    /// planning against it would compare the blueprint with nonsense.
    #[error(
        "snapshot `{path}` is damaged at {at}: {message}; capture it again with `gpuctl snapshot BLUEPRINT --out FILE`"
    )]
    Invalid {
        /// File.
        path: String,
        /// Where, e.g. `objects["v1|Namespace||team-a"]` or `nodes[3]`.
        at: String,
        /// What is wrong.
        message: String,
    },
}

/// The lookup key of an object.
pub fn key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!("{api_version}|{kind}|{}|{name}", namespace.unwrap_or(""))
}

impl Snapshot {
    /// Reads a snapshot file (or standard input for `-`) under [`gpuctl_model::input::SNAPSHOT`], and
    /// refuses one whose objects, nodes or Helm release do not have the shape capture writes.
    pub fn read(path: &Path) -> Result<Snapshot, SnapshotError> {
        let p = gpuctl_model::input::name(path);
        let bytes = gpuctl_model::input::read(path, &gpuctl_model::input::SNAPSHOT)
            .map_err(SnapshotError::Read)?;
        let snap: Snapshot = serde_json::from_slice(&bytes).map_err(|e| SnapshotError::Parse {
            path: p.clone(),
            message: e.to_string(),
        })?;
        drop(bytes);
        if snap.format_version > SNAPSHOT_FORMAT_VERSION {
            return Err(SnapshotError::Parse {
                path: p,
                message: format!(
                    "format version {} is newer than this gpuctl understands ({SNAPSHOT_FORMAT_VERSION})",
                    snap.format_version
                ),
            });
        }
        snap.check()
            .map_err(|(at, message)| SnapshotError::Invalid {
                path: p,
                at,
                message,
            })?;
        Ok(snap)
    }

    /// The shape plans rely on: every object a JSON object with string `apiVersion`, `kind` and
    /// `metadata.name` (and `metadata.namespace` when present) filed under its own key; every node
    /// an object with a string `metadata.name`, string labels and a list of taints; Helm values an
    /// object. Returns where the first problem is and what it is.
    fn check(&self) -> Result<(), (String, String)> {
        for (key, o) in &self.objects {
            let at = || format!("objects[{}]", serde_json::Value::from(key.as_str()));
            let id = identity(o).map_err(|m| (at(), m))?;
            let expected = self::key(id.0, id.1, id.2, id.3);
            if *key != expected {
                return Err((
                    at(),
                    format!("it holds `{expected}`, not the object its key names"),
                ));
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let at = || format!("nodes[{i}]");
            let Some(meta) = n.get("metadata") else {
                return Err((at(), format!("{}, not a node with metadata", shape(n))));
            };
            if !meta["name"].is_string() {
                return Err((at(), "metadata.name is not a string".into()));
            }
            match meta.get("labels") {
                None | Some(Value::Null) => {}
                Some(Value::Object(labels)) => {
                    if let Some((k, v)) = labels.iter().find(|(_, v)| !v.is_string()) {
                        return Err((at(), format!("label `{k}` is {}, not a string", shape(v))));
                    }
                }
                Some(v) => return Err((at(), format!("metadata.labels is {}", shape(v)))),
            }
            match n.get("spec").and_then(|s| s.get("taints")) {
                None | Some(Value::Null) => {}
                Some(Value::Array(t)) if t.iter().all(Value::is_object) => {}
                Some(v) => {
                    return Err((
                        at(),
                        format!("spec.taints is {}, not a list of taints", shape(v)),
                    ));
                }
            }
        }
        if let Some(r) = &self.helm_release
            && !r.values.is_object()
        {
            return Err((
                "helm_release.values".into(),
                format!("{}, not an object of values", shape(&r.values)),
            ));
        }
        for (i, c) in self.releases.iter().enumerate() {
            if let Some(r) = &c.live
                && !r.values.is_object()
            {
                return Err((
                    format!("releases[{i}].live.values"),
                    format!("{}, not an object of values", shape(&r.values)),
                ));
            }
        }
        Ok(())
    }

    /// JSON text (pretty, trailing newline), deterministic.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Why a live view cannot be kept as a snapshot: a snapshot that silently lacked the journals or
/// the Helm release would let CI plans miss what live plans refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    /// The driver upgrade journals could not be read.
    #[error(
        "cannot read the driver upgrade journals: {message}; a snapshot records them so CI plans see driver upgrades: gpuctl needs to list ConfigMaps labelled `{label}` in namespace {namespace}"
    )]
    Journals {
        /// Why.
        message: String,
        /// The journals' label.
        label: &'static str,
        /// The operator namespace.
        namespace: String,
    },
    /// The operator's Helm release could not be read.
    #[error("{0}")]
    HelmRelease(String),
}

impl Snapshot {
    /// The snapshot of what `set` touches in `live` (read from a cluster): the rendered objects
    /// that exist, the ApplySet's members, the pools' nodes without their status (plans read
    /// labels and taints; heartbeats would make every capture differ), the kinds served, this
    /// blueprint's upgrade journals and the operator's Helm release.
    pub fn capture(live: &LiveView, set: &RenderedSet) -> Result<Snapshot, CaptureError> {
        let (server, fingerprint) = live.source.server_and_fingerprint();
        let mut snap = Snapshot {
            format_version: SNAPSHOT_FORMAT_VERSION,
            fingerprint,
            server,
            ..Snapshot::default()
        };
        for o in &set.objects {
            let t = o.type_ref();
            let served = format!("{}|{}", t.api_version, t.kind);
            if live.serves(&t) && !snap.served_kinds.contains(&served) {
                snap.served_kinds.push(served);
            }
            if let Some(v) = live.get(&o.object_ref()) {
                let k = key(&o.api_version, &o.kind, o.namespace.as_deref(), &o.name);
                snap.objects.insert(k, v.clone());
            }
        }
        for (id, v) in live.members.iter().flatten() {
            let api_version = v["apiVersion"].as_str().unwrap_or_default();
            let k = key(api_version, &id.kind, id.namespace.as_deref(), &id.name);
            snap.objects.insert(k, v.clone());
        }
        snap.upgrade_journals = match &live.journals {
            Reading::Failed(message) => {
                return Err(CaptureError::Journals {
                    message: message.clone(),
                    label: gpuctl_model::names::UPGRADE_POOL_LABEL,
                    namespace: set.helm.namespace.clone(),
                });
            }
            Reading::NotRead => vec![],
            Reading::Read(j) => j
                .iter()
                .filter(|j| j.blueprint == set.blueprint)
                .cloned()
                .collect(),
        };
        snap.helm_release = match &live.helm_release {
            Reading::Failed(message) => return Err(CaptureError::HelmRelease(message.clone())),
            Reading::NotRead => None,
            Reading::Read(r) => r.clone(),
        };
        for r in &set.releases {
            match live.release(r) {
                Reading::Failed(message) => return Err(CaptureError::HelmRelease(message.clone())),
                Reading::NotRead => {}
                Reading::Read(found) => snap.releases.push(CapturedRelease {
                    namespace: r.namespace.clone(),
                    release: r.release.clone(),
                    live: found.clone(),
                }),
            }
        }
        snap.nodes = live
            .nodes
            .iter()
            .flatten()
            .map(|n| {
                let mut n = n.clone();
                if let Some(m) = n.as_object_mut() {
                    m.remove("status");
                }
                n
            })
            .collect();
        snap.nodes.sort_by(|a, b| {
            a["metadata"]["name"]
                .as_str()
                .cmp(&b["metadata"]["name"].as_str())
        });
        snap.nodes.dedup();
        Ok(snap)
    }
}

impl Snapshot {
    /// The snapshot of everything `gpuctl import` reads (`gpuctl snapshot --all`): every object
    /// of the view, the nodes with their labels, taints, node info and capacity (not their
    /// conditions, which would make every capture differ), the Helm release.
    pub fn capture_all(live: &LiveView, ctx: &ImportCapture) -> Snapshot {
        let (server, fingerprint) = live.source.server_and_fingerprint();
        let mut snap = Snapshot {
            format_version: SNAPSHOT_FORMAT_VERSION,
            fingerprint,
            server,
            import: Some(ctx.clone()),
            ..Snapshot::default()
        };
        for v in live.objects.values() {
            let (Some(api_version), Some(id)) = (v["apiVersion"].as_str(), ObjectRef::of(v)) else {
                continue;
            };
            let mut v = v.clone();
            keep_own_managed_fields(&mut v);
            snap.objects.insert(
                key(api_version, &id.kind, id.namespace.as_deref(), &id.name),
                v,
            );
        }
        snap.served_kinds = live
            .served
            .iter()
            .flatten()
            .map(|t| format!("{}|{}", t.api_version, t.kind))
            .collect();
        snap.nodes = live
            .nodes
            .iter()
            .flatten()
            .map(|n| {
                let mut out = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": n["metadata"].clone(),
                });
                if let Some(m) = out["metadata"].as_object_mut() {
                    m.remove("managedFields");
                }
                if !n["spec"]["taints"].is_null() {
                    out["spec"] = serde_json::json!({ "taints": n["spec"]["taints"].clone() });
                }
                let status = &n["status"];
                if !status["nodeInfo"].is_null() || !status["capacity"].is_null() {
                    out["status"] = serde_json::json!({
                        "nodeInfo": status["nodeInfo"].clone(),
                        "capacity": status["capacity"].clone(),
                    });
                }
                out
            })
            .collect();
        snap.nodes.sort_by(|a, b| {
            a["metadata"]["name"]
                .as_str()
                .cmp(&b["metadata"]["name"].as_str())
        });
        snap.helm_release = match &live.helm_release {
            Reading::Read(r) => r.clone(),
            _ => None,
        };
        snap
    }

    /// The live view and context `gpuctl import` reads from a `--all` snapshot (`None`: the
    /// snapshot was captured for one blueprint and lacks most of what import maps).
    pub fn import_view(&self) -> Option<(LiveView, ImportCapture)> {
        self.import.as_ref()?;
        self.clone().into_import_view()
    }

    /// [`Self::import_view`] without copying the objects (what `gpuctl import --snapshot` uses).
    pub fn into_import_view(mut self) -> Option<(LiveView, ImportCapture)> {
        let capture = self.import.take()?;
        let mut view = self.into_live_view("");
        view.members = Some(BTreeMap::new());
        Some((view, capture))
    }
}

/// Keeps the `managedFields` entries of gpuctl's own field managers (`gpuctl`, `gpuctl-upgrade`)
/// and drops the rest: plans read only those (adoption, fields gpuctl owns, removals), and the
/// other managers' entries were about half of a `--all` snapshot and of the time to read it.
fn keep_own_managed_fields(v: &mut Value) {
    let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(Value::Array(entries)) = meta.get_mut("managedFields") else {
        return;
    };
    entries.retain(|e| {
        e["manager"] == gpuctl_model::names::FIELD_MANAGER
            || e["manager"] == gpuctl_model::names::UPGRADE_FIELD_MANAGER
    });
    if entries.is_empty() {
        meta.remove("managedFields");
    }
}

/// A snapshot as the live view a plan reads: the snapshot file is the capture of every read
/// (Day-1 and Day-2), so turning it into the plan's [`LiveView`] is the snapshot's to do.
impl Snapshot {
    /// The state a snapshot recorded, as a plan of ApplySet `applyset_id` reads it. A version 1
    /// snapshot did not record the Helm release, so the plan cannot say what Helm changes.
    pub fn live_view(&self, applyset_id: &str) -> LiveView {
        let s = self;
        let s = Snapshot {
            objects: s.objects.clone(),
            served_kinds: s.served_kinds.clone(),
            nodes: s.nodes.clone(),
            helm_release: s.helm_release.clone(),
            releases: s.releases.clone(),
            upgrade_journals: s.upgrade_journals.clone(),
            server: s.server.clone(),
            fingerprint: s.fingerprint.clone(),
            captured_at: s.captured_at.clone(),
            format_version: s.format_version,
            import: None,
            diagnostics: None,
        };
        s.into_live_view(applyset_id)
    }

    /// [`Self::live_view`], taking the snapshot's objects and nodes instead of copying them.
    pub fn into_live_view(self, applyset_id: &str) -> LiveView {
        let s = self;
        let objects: BTreeMap<ObjectRef, Value> = s
            .objects
            .into_values()
            .filter_map(|o| Some((ObjectRef::of(&o)?, o)))
            .collect();
        let members = objects
            .iter()
            .filter(|(_, o)| o["metadata"]["labels"][PART_OF] == applyset_id)
            .map(|(id, o)| (id.clone(), o.clone()))
            .collect();
        let served = (!s.served_kinds.is_empty()).then(|| {
            s.served_kinds
                .iter()
                .filter_map(|k| k.split_once('|'))
                .map(|(api_version, kind)| TypeRef::new(api_version, kind))
                .collect()
        });
        LiveView {
            source: Source::Snapshot {
                server: s.server.clone(),
                fingerprint: s.fingerprint.clone(),
                captured_at: s.captured_at.clone(),
            },
            served,
            objects,
            members: Some(members),
            nodes: Some(s.nodes),
            journals: Reading::Read(s.upgrade_journals),
            helm_release: if s.format_version < 2 {
                Reading::NotRead
            } else {
                Reading::Read(s.helm_release.clone())
            },
            // Older snapshots did not record these: not read, and plans say so.
            releases: s
                .releases
                .iter()
                .filter(|_| s.format_version >= 3)
                .map(|c| {
                    (
                        (c.namespace.clone(), c.release.clone()),
                        Reading::Read(c.live.clone()),
                    )
                })
                .collect(),
            // Snapshots do not record which releases gpuctl installed: no uninstall is planned.
            owned_releases: Reading::NotRead,
            dry_run: BTreeMap::new(),
            workloads: None,
            // Snapshots hold no pods: a move to DRA is planned with a warning.
            migrating_pods: None,
        }
    }
}

/// `(apiVersion, kind, namespace, name)` of a captured object, or what is wrong with it.
fn identity(o: &Value) -> Result<(&str, &str, Option<&str>, &str), String> {
    if !o.is_object() {
        return Err(format!("{}, not a Kubernetes object", shape(o)));
    }
    let field = |v: Option<&Value>, name: &str| -> Result<(), String> {
        match v {
            Some(Value::String(_)) => Ok(()),
            None => Err(format!("`{name}` is missing")),
            Some(v) => Err(format!("`{name}` is {}, not a string", shape(v))),
        }
    };
    field(o.get("apiVersion"), "apiVersion")?;
    field(o.get("kind"), "kind")?;
    let meta = match o.get("metadata") {
        Some(m @ Value::Object(_)) => m,
        None => return Err("`metadata` is missing".into()),
        Some(m) => return Err(format!("`metadata` is {}, not an object", shape(m))),
    };
    field(meta.get("name"), "metadata.name")?;
    let namespace = match meta.get("namespace") {
        None => None,
        Some(ns) => {
            field(Some(ns), "metadata.namespace")?;
            ns.as_str()
        }
    };
    Ok((
        o["apiVersion"].as_str().unwrap_or_default(),
        o["kind"].as_str().unwrap_or_default(),
        namespace,
        meta["name"].as_str().unwrap_or_default(),
    ))
}

/// A JSON value's shape, for messages: `null`, `a number`, `a list`, ...
fn shape(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(dir: &tempfile::TempDir, snap: &Value) -> std::path::PathBuf {
        let p = dir.path().join("snap.json");
        std::fs::write(&p, serde_json::to_string(snap).unwrap()).unwrap();
        p
    }

    fn err(snap: Value) -> String {
        let dir = tempfile::tempdir().unwrap();
        Snapshot::read(&write(&dir, &snap)).unwrap_err().to_string()
    }

    fn ns(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    }

    #[test]
    fn the_shipped_example_snapshot_reads() {
        let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("blueprints/snapshots/dgx-h100-training.json");
        let snap = Snapshot::read(&p).expect("reads");
        assert!(!snap.objects.is_empty() && !snap.nodes.is_empty());
    }

    // Issue 10 item 6: these were planned as updates with an empty path.
    #[test]
    fn objects_that_are_not_kubernetes_objects_are_refused_with_their_key() {
        for (bad, what) in [
            (json!(null), "null, not a Kubernetes object"),
            (json!(5), "a number, not a Kubernetes object"),
            (json!([1]), "a list, not a Kubernetes object"),
            (
                json!({"kind": "Namespace", "metadata": {"name": "a"}}),
                "`apiVersion` is missing",
            ),
            (
                json!({"apiVersion": "v1", "kind": 7, "metadata": {"name": "a"}}),
                "`kind` is a number",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Namespace"}),
                "`metadata` is missing",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": 1}),
                "`metadata` is a number",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {}}),
                "`metadata.name` is missing",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": ["x"]}}),
                "`metadata.namespace` is a list",
            ),
        ] {
            let e = err(json!({
                "format_version": 2,
                "objects": {"v1|Namespace||a": ns("a"), "v1|Namespace||b": bad},
            }));
            assert!(
                e.contains(r#"damaged at objects["v1|Namespace||b"]: "#),
                "{e}"
            );
            assert!(e.contains(what), "{what}: {e}");
            assert!(
                e.ends_with("capture it again with `gpuctl snapshot BLUEPRINT --out FILE`"),
                "{e}"
            );
        }
    }

    #[test]
    fn an_object_under_another_objects_key_is_refused() {
        let e = err(json!({"format_version": 2, "objects": {"v1|Namespace||a": ns("b")}}));
        assert!(
            e.contains("it holds `v1|Namespace||b`, not the object its key names"),
            "{e}"
        );
    }

    #[test]
    fn nodes_and_helm_values_of_the_wrong_shape_are_refused() {
        let base = |nodes: Value| json!({"format_version": 2, "objects": {}, "nodes": nodes});
        let e = err(base(json!([{"metadata": {"name": "n0"}}, 5])));
        assert!(
            e.contains("damaged at nodes[1]: a number, not a node with metadata"),
            "{e}"
        );
        let e = err(base(
            json!([{"metadata": {"name": "n0", "labels": {"a": 1}}}]),
        ));
        assert!(
            e.contains("nodes[0]: label `a` is a number, not a string"),
            "{e}"
        );
        let e = err(base(
            json!([{"metadata": {"name": "n0"}, "spec": {"taints": "x"}}]),
        ));
        assert!(
            e.contains("nodes[0]: spec.taints is a string, not a list of taints"),
            "{e}"
        );
        let release = json!({"revision": 1, "status": "deployed", "chart": "gpu-operator", "chart_version": "v1", "values": [1]});
        let e = err(json!({"format_version": 2, "objects": {}, "helm_release": release}));
        assert!(
            e.contains("damaged at helm_release.values: a list, not an object of values"),
            "{e}"
        );
        let e = err(json!({"format_version": 2, "objects": {}, "helm_release": 5}));
        assert!(
            e.contains("is not a gpuctl snapshot: invalid type: integer `5`"),
            "{e}"
        );
    }

    #[test]
    fn an_all_snapshot_keeps_only_gpuctls_managed_fields() {
        let mut live = LiveView::offline();
        let entry =
            |m: &str| json!({"manager": m, "operation": "Apply", "fieldsV1": {"f:data": {}}});
        let mut theirs = ns("theirs");
        theirs["metadata"]["managedFields"] = json!([entry("kubectl"), entry("helm")]);
        let mut ours = ns("ours");
        ours["metadata"]["managedFields"] =
            json!([entry("kubectl"), entry("gpuctl"), entry("gpuctl-upgrade")]);
        for o in [&theirs, &ours] {
            live.objects.insert(ObjectRef::of(o).unwrap(), o.clone());
        }
        let snap = Snapshot::capture_all(&live, &ImportCapture::default());
        assert!(
            snap.objects["v1|Namespace||theirs"]["metadata"]
                .get("managedFields")
                .is_none()
        );
        assert_eq!(
            snap.objects["v1|Namespace||ours"]["metadata"]["managedFields"],
            json!([entry("gpuctl"), entry("gpuctl-upgrade")])
        );
        // What plans read of them is unchanged: the view keeps gpuctl's entries.
        let (view, _) = snap.into_import_view().unwrap();
        assert_eq!(view.objects.len(), 2);
    }

    #[test]
    fn a_fifo_or_an_oversized_snapshot_is_refused_before_reading() {
        let e = Snapshot::read(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("snapshot `/dev/zero`: it is a character device"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.json");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(gpuctl_model::input::SNAPSHOT.bytes + 1).unwrap();
        let e = Snapshot::read(&p).unwrap_err().to_string();
        assert!(
            e.contains("a snapshot over 67108864 bytes is refused"),
            "{e}"
        );
    }
}

/// Snapshots as plans read them: the plan crate's fixture set, captured, written, read back (also
/// in older formats) and planned.
#[cfg(test)]
mod plan_tests {
    use gpuctl_plan::live::Reading;
    use gpuctl_plan::plan::fixture::*;
    use gpuctl_plan::plan::{ActionKind, HelmAction, Mode, PlanOptions, plan};
    use serde_json::json;

    use super::*;

    #[test]
    fn snapshots_carry_each_release_and_old_ones_still_read() {
        let mut s = set();
        s.releases = vec![kueue_release("{}\n")];
        let mut live = snapshot_view();
        live.helm_release = Reading::Read(Some(release("v26.7.0", "deployed", json!({}))));
        live.releases.insert(
            ("kueue-system".into(), "kueue".into()),
            Reading::Read(Some(kueue_live(3, "{}\n"))),
        );
        let snap = Snapshot::capture(&live, &s).unwrap();
        assert_eq!(snap.format_version, SNAPSHOT_FORMAT_VERSION);
        assert_eq!(snap.releases.len(), 1);
        let text = snap.to_json();
        let back: Snapshot = serde_json::from_str(&text).unwrap();
        let v = back.live_view(&set_id());
        assert_eq!(v.release(&s.releases[0]), live.release(&s.releases[0]));
        assert_eq!(v.helm_release, live.helm_release);
        let p = plan(&s, &v, PlanOptions::default()).unwrap();
        assert_eq!(
            p.releases[0].plan.as_ref().unwrap().action,
            HelmAction::NoOp
        );

        // A format 2 snapshot: the operator's release as before, the others not recorded.
        let mut old: serde_json::Value = serde_json::from_str(&text).unwrap();
        old["format_version"] = json!(2);
        old.as_object_mut().unwrap().remove("releases");
        let old: Snapshot = serde_json::from_value(old).unwrap();
        let v = old.live_view(&set_id());
        assert_eq!(v.helm_release, live.helm_release);
        assert_eq!(*v.release(&s.releases[0]), Reading::NotRead);

        // A release that cannot be read is no snapshot at all.
        live.releases.insert(
            ("kueue-system".into(), "kueue".into()),
            Reading::Failed("forbidden".into()),
        );
        assert!(Snapshot::capture(&live, &s).is_err());
    }

    #[test]
    fn a_snapshot_view_reads_as_a_live_one_would() {
        let mut snap = Snapshot {
            format_version: SNAPSHOT_FORMAT_VERSION,
            served_kinds: vec!["v1|Namespace".into(), "v1|ResourceQuota".into()],
            nodes: vec![node("n1", json!({"pool": "train"}), json!([]))],
            ..Snapshot::default()
        };
        let ns = stored(&namespace());
        snap.objects
            .insert(key("v1", "Namespace", None, "team-a"), ns);
        let v = snap.live_view(&set_id());
        assert_eq!(v.members.as_ref().unwrap().len(), 1);
        let p = plan_of(&v);
        assert_eq!(p.mode, Mode::Snapshot);
        assert_eq!(
            kinds(&p),
            [
                ("Namespace/team-a".into(), ActionKind::NoOp),
                (
                    "ResourceQuota/team-a/team-a-quota".into(),
                    ActionKind::Create
                ),
                ("ClusterQueue/train".into(), ActionKind::CreateAfterCrd),
            ]
        );
        assert_eq!(p.nodes.len(), 1);
    }
}
