//! Secret masking of a plan's changes: each change is masked by the trees it was computed from
//! (the value-level masking, shared with doctor and snapshots, is `gpuctl_model::redact`).

pub use gpuctl_model::redact::*;

use serde_json::Value;

use super::diff::Change;

/// Masks each change's values using the trees it was computed from, so a value is masked by its
/// context too: `driver.env[2].value` is a credential when `driver.env[2].name` is `DB_PASSWORD`,
/// which the change alone does not say. `before` and `after` are the whole trees the change paths
/// are relative to (`Value::Null` for a side that does not exist).
pub fn redact_changes(changes: &mut [Change], before: &Value, after: &Value) {
    // Nothing to mask: skip copying both whole objects (a plan calls this for every object, most
    // with no change; it was a sixth of a 5,000-object import).
    if changes.is_empty() {
        return;
    }
    let (rb, ra) = (redacted(before), redacted(after));
    for c in changes {
        for (side, tree) in [(&mut c.before, &rb), (&mut c.after, &ra)] {
            if let Some(v) = side {
                *v = match lookup(tree, &c.path) {
                    Some(found) => found,
                    // Not in the tree (a bug, or a caller's hand-made change): mask by path and
                    // value alone.
                    None => redacted_at(&c.path, v),
                };
            }
        }
    }
}

/// Masks changes by their own path and values only: for changes that did not come from a tree
/// (and as a last pass before printing).
pub fn redact_change_values(changes: &mut [Change]) {
    for c in changes {
        for v in [&mut c.before, &mut c.after].into_iter().flatten() {
            *v = redacted_at(&c.path, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changes_are_masked_by_their_context_on_both_sides() {
        let before = json!({"env": [{"name": "DB_PASSWORD", "value": "old"}],
                            "registry": {"password": "p0"}, "auth": {"user": "u"}});
        let after = json!({"env": [{"name": "DB_PASSWORD", "value": "new"}],
                           "auth": {"user": "v"}});
        let mut changes = super::super::diff::diff(&before, &after);
        redact_changes(&mut changes, &before, &after);
        let shown: Vec<_> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.before.clone(), c.after.clone()))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("auth.user", Some(json!(MASK)), Some(json!(MASK))),
                ("env[0].value", Some(json!(MASK)), Some(json!(MASK))),
                ("registry", Some(json!({"password": MASK})), None),
            ],
            "the change stays visible, its values do not"
        );
    }

    #[test]
    fn change_values_alone_are_masked_by_path_and_shape() {
        let mut changes = vec![
            Change {
                path: "ngc.apiKey".into(),
                before: Some(json!("k1")),
                after: Some(json!("k2")),
            },
            Change {
                path: "registry".into(),
                before: None,
                after: Some(json!({"user": "u", "password": "p", "list": [{"token": "t"}]})),
            },
            Change {
                path: "driver.secretName".into(),
                before: None,
                after: Some(json!("pull-secret")),
            },
            Change {
                path: "args[0]".into(),
                before: Some(json!("--token=abc123")),
                after: None,
            },
        ];
        redact_change_values(&mut changes);
        assert_eq!(changes[0].before, Some(json!(MASK)));
        assert_eq!(changes[0].after, Some(json!(MASK)));
        assert_eq!(
            changes[1].after,
            Some(json!({"user": "u", "password": MASK, "list": [{"token": MASK}]}))
        );
        assert_eq!(changes[2].after, Some(json!("pull-secret")));
        assert_eq!(changes[3].before, Some(json!("--token=(sensitive)")));
    }
}
