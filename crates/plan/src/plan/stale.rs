//! Whether a saved plan still describes the cluster: what moved between `gpuctl plan --out` and
//! `gpuctl apply PLAN`, decided from the planned objects, nodes and Helm release read again.

use serde_json::Value;

use super::{ActionKind, Plan};
use crate::live::{LiveView, Reading};

/// What changed since `plan` was made, one line per object (empty: nothing). `now` holds the
/// planned objects as they are now (absent: they do not exist), the kinds served, the planned
/// nodes and the Helm releases.
pub fn changes_since(plan: &Plan, now: &LiveView) -> Vec<String> {
    let mut moved = Vec::new();
    for a in plan
        .actions
        .iter()
        .filter(|a| a.action != ActionKind::CreateAfterCrd)
    {
        let t = gpuctl_model::object::TypeRef::new(&a.api_version, &a.kind);
        if !now.serves(&t) {
            moved.push(format!("{}: its kind is no longer served", a.id()));
            continue;
        }
        let now_rv = now
            .get(&a.object_ref())
            .and_then(|v| v["metadata"]["resourceVersion"].as_str());
        match (a.resource_version.as_deref(), now_rv) {
            (None, Some(_)) => moved.push(format!(
                "{}: created by someone else since the plan",
                a.id()
            )),
            (Some(_), None) => moved.push(format!("{}: deleted since the plan", a.id())),
            (Some(p), Some(n)) if p != n => {
                // Only a status or bookkeeping write since the plan: what the plan was made
                // against is unchanged.
                let same = a.content_digest.as_deref().is_some_and(|d| {
                    now.get(&a.object_ref()).map(content_digest).as_deref() == Some(d)
                });
                if !same {
                    moved.push(format!("{}: resourceVersion {p} -> {n}", a.id()));
                }
            }
            _ => {}
        }
    }
    // A member that joined the set since the plan (another apply added it) is a change the plan
    // did not see. Protected kinds are left out: a plan keeps those it does not declare (with a
    // warning, not an action), so their absence from the actions says nothing.
    if let Some(members) = &now.members {
        let planned: std::collections::BTreeSet<gpuctl_model::object::ObjectRef> =
            plan.actions.iter().map(super::Action::object_ref).collect();
        moved.extend(
            members
                .keys()
                .filter(|m| !planned.contains(*m))
                .filter(|m| !super::PROTECTED_KINDS.contains(&m.kind.as_str()))
                .map(|m| format!("{m}: joined the blueprint's ApplySet since the plan")),
        );
    }
    moved.extend(node_changes(plan, now));
    let steps = std::iter::once((&plan.helm, plan.helm_release.as_ref()))
        .chain(plan.releases.iter().map(|r| (&r.release, r.plan.as_ref())));
    for (release, hp) in steps {
        if let Some(hp) = hp
            && let Reading::Read(live) = now.release(release)
        {
            let revision = live.as_ref().map(|r| r.revision);
            if revision != hp.revision {
                let show = |r: Option<u64>| r.map_or("none".to_string(), |r| r.to_string());
                moved.push(format!(
                    "HelmRelease/{}/{}: revision {} -> {}",
                    release.namespace,
                    release.release,
                    show(hp.revision),
                    show(revision)
                ));
            }
        }
    }
    moved
}

/// Nodes change constantly (heartbeats do not bump metadata, but labels do): only the labels the
/// plan would change are compared, and only on nodes whose resourceVersion moved.
fn node_changes(plan: &Plan, now: &LiveView) -> Vec<String> {
    let nodes = now.nodes.as_deref().unwrap_or_default();
    let mut moved = Vec::new();
    for n in plan.nodes.iter().filter(|n| !n.labels.is_empty()) {
        let current = nodes
            .iter()
            .find(|v| v["metadata"]["name"] == n.node.as_str())
            .unwrap_or(&Value::Null);
        if current["metadata"]["resourceVersion"].as_str() == n.resource_version.as_deref() {
            continue;
        }
        for c in &n.labels {
            let key = c.path.trim_start_matches("labels.").trim_matches('"');
            if current["metadata"]["labels"].get(key) != c.before.as_ref() {
                moved.push(format!(
                    "Node/{}: label {key} changed since the plan",
                    n.node
                ));
            }
        }
    }
    moved
}

/// `sha256:<hex>` of a live object without `status` and without the metadata the server changes
/// on every write (`resourceVersion`, `managedFields`, `generation`), keys sorted, so two reads of
/// an object whose spec, data, labels and annotations are the same give the same digest. Written
/// straight into the hash (a plan takes one per live object: copying each twice first was a tenth
/// of a 64-pool plan's CPU time); the bytes hashed are the compact JSON of that sorted object.
pub fn content_digest(obj: &Value) -> String {
    use sha2::{Digest, Sha256};
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new());
    // Writing into a hash cannot fail, nor can serialising a JSON value.
    let _ = serde_json::to_writer(&mut h, &Sorted(obj, Level::Root));
    let hex: String = h.0.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Where in the object [`Sorted`] is: what it leaves out depends on it.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Metadata,
    Inner,
}

/// A JSON value serialised with its keys sorted, without `status` at the top and without the
/// server's bookkeeping in `metadata`.
struct Sorted<'a>(&'a Value, Level);

impl serde::Serialize for Sorted<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Object(m) => {
                let skip: &[&str] = match self.1 {
                    Level::Root => &["status"],
                    Level::Metadata => &["resourceVersion", "managedFields", "generation"],
                    Level::Inner => &[],
                };
                let mut keys: Vec<&String> =
                    m.keys().filter(|k| !skip.contains(&k.as_str())).collect();
                keys.sort();
                let mut map = s.serialize_map(Some(keys.len()))?;
                for k in keys {
                    let level = if self.1 == Level::Root && k == "metadata" {
                        Level::Metadata
                    } else {
                        Level::Inner
                    };
                    map.serialize_entry(k, &Sorted(&m[k], level))?;
                }
                map.end()
            }
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for x in a {
                    seq.serialize_element(&Sorted(x, Level::Inner))?;
                }
                seq.end()
            }
            other => other.serialize(s),
        }
    }
}
