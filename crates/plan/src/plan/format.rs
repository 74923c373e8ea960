//! The plan file: versioned JSON, masked when printed, raw when saved for `apply`, and recognised
//! by its header.

use serde_json::Value;

use super::{PLAN_FORMAT_VERSION, Plan, redact};

/// Whether `text` is a gpuctl plan file, as opposed to a blueprint: a JSON object whose first
/// member is `"format_version"`, which every plan gpuctl writes starts with (`Plan`'s first
/// field). Whitespace (pretty or compact JSON) and a byte-order mark are allowed; a blueprint
/// that merely mentions `format_version` somewhere is still a blueprint.
pub fn is_saved_plan(text: &[u8]) -> bool {
    let text = text.strip_prefix("\u{feff}".as_bytes()).unwrap_or(text);
    let member = text
        .trim_ascii_start()
        .strip_prefix(b"{")
        .map(<[u8]>::trim_ascii_start)
        .and_then(|t| t.strip_prefix(b"\"format_version\""));
    member.is_some_and(|t| t.trim_ascii_start().starts_with(b":"))
}

/// Why a saved plan cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SavedPlanError {
    /// Not JSON, or not a plan.
    #[error(
        "not a gpuctl plan ({0}); save one with `gpuctl plan BLUEPRINT --out FILE`, or apply the blueprint"
    )]
    NotAPlan(String),
    /// Another format version.
    #[error(
        "plan format version {0} is not {PLAN_FORMAT_VERSION}; re-run `gpuctl plan` with this gpuctl"
    )]
    Version(u64),
    /// Printed with credentials masked.
    #[error(
        "this plan was printed with its credentials masked (`-o json`) and cannot be applied; save one with `gpuctl plan --out FILE`"
    )]
    Redacted,
}

impl Plan {
    /// Versioned JSON for people and CI logs (`-o json`; pretty, trailing newline):
    /// credentials in Helm values, manifests and changes are masked, and `redacted` is true, so
    /// `apply` refuses it.
    pub fn to_json(&self) -> String {
        let mut shown = self.clone();
        shown.redact();
        to_pretty(&shown)
    }

    /// Versioned JSON for `apply` (`--out`): the Helm values and manifests as rendered, which
    /// apply sends, so credentials in them are in the clear (changes stay masked). Written with
    /// owner-only permissions; never printed.
    pub fn to_saved_json(&self) -> String {
        to_pretty(self)
    }

    /// Masks credentials everywhere in the plan (changes are masked when planned; this also
    /// covers the values and manifests apply needs, and hand-made plans).
    pub fn redact(&mut self) {
        redact::redact_value(&mut self.helm.values);
        for a in &mut self.actions {
            if let Some(m) = &mut a.manifest {
                redact::redact_value(m);
            }
            redact::redact_change_values(&mut a.changes);
        }
        if let Some(h) = &mut self.helm_release {
            redact::redact_change_values(&mut h.changes);
        }
        for r in &mut self.releases {
            redact::redact_value(&mut r.release.values);
            if let Some(h) = &mut r.plan {
                redact::redact_change_values(&mut h.changes);
            }
        }
        self.redacted = true;
    }

    /// Reads a saved plan, refusing unknown format versions and masked plans.
    pub fn from_json(text: &str) -> Result<Plan, SavedPlanError> {
        let not_a_plan = |e: &dyn std::fmt::Display| SavedPlanError::NotAPlan(e.to_string());
        let v: Value = serde_json::from_str(text).map_err(|e| not_a_plan(&e))?;
        match v["format_version"].as_u64() {
            Some(n) if n == u64::from(PLAN_FORMAT_VERSION) => {}
            Some(n) => return Err(SavedPlanError::Version(n)),
            None => return Err(not_a_plan(&"no `format_version`")),
        }
        if v["redacted"] == true {
            return Err(SavedPlanError::Redacted);
        }
        serde_json::from_value(v).map_err(|e| not_a_plan(&e))
    }
}

fn to_pretty(plan: &Plan) -> String {
    let mut s = serde_json::to_string_pretty(plan).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_recognised_by_their_header_only() {
        assert!(is_saved_plan(
            b"{\n  \"format_version\": 2,\n  \"applyset\": \"x\"}"
        ));
        assert!(is_saved_plan(b"\xef\xbb\xbf  {\"format_version\" :1}"));
        // A blueprint (YAML or JSON) mentioning the words is not a plan.
        assert!(!is_saved_plan(
            b"# \"format_version\" \"applyset\"\napiVersion: gpuctl.dev/v1alpha1\n"
        ));
        assert!(!is_saved_plan(
            b"{\"apiVersion\": \"gpuctl.dev/v1alpha1\", \"format_version\": 2, \"applyset\": 1}"
        ));
        assert!(!is_saved_plan(b""));
    }
}
