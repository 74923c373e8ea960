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
        let t = crate::object::TypeRef::new(&a.api_version, &a.kind);
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
        let planned: std::collections::BTreeSet<crate::object::ObjectRef> =
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
/// an object whose spec, data, labels and annotations are the same give the same digest.
pub fn content_digest(obj: &Value) -> String {
    use sha2::{Digest, Sha256};
    fn canonical(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), canonical(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
            other => other.clone(),
        }
    }
    let mut v = obj.clone();
    if let Value::Object(m) = &mut v {
        m.remove("status");
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            for k in ["resourceVersion", "managedFields", "generation"] {
                meta.remove(k);
            }
        }
    }
    let bytes = serde_json::to_vec(&canonical(&v)).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}
