//! ApplySet (KEP-3659) identity: the parent object of a blueprint's applied set and the labels that
//! make every rendered object a member, so `kubectl` recognises the set and prune touches only members.

use base64::Engine;
use sha2::{Digest, Sha256};

/// Label on members naming the set they belong to.
pub const PART_OF: &str = "applyset.kubernetes.io/part-of";
/// Label on the parent carrying the set's id.
pub const ID: &str = "applyset.kubernetes.io/id";
/// Annotation on the parent naming the tool that manages the set (`gpuctl/v<version>`).
pub const TOOLING: &str = "applyset.kubernetes.io/tooling";
/// Annotation on the parent listing the group-kinds of members (`Kind.group,...`).
pub const CONTAINS_GROUP_KINDS: &str = "applyset.kubernetes.io/contains-group-kinds";
/// Annotation on the parent listing namespaces that hold members.
pub const ADDITIONAL_NAMESPACES: &str = "applyset.kubernetes.io/additional-namespaces";
/// Label gpuctl puts on everything it renders, naming the blueprint.
pub const BLUEPRINT_LABEL: &str = "gpuctl.dev/blueprint";
/// Standard managed-by label.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The parent of a blueprint's ApplySet: a ConfigMap in the GPU Operator's namespace
/// (kubectl supports ConfigMap and Secret parents; a ConfigMap keeps the set readable to reviewers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplySetParent {
    /// ConfigMap name.
    pub name: String,
    /// ConfigMap namespace.
    pub namespace: String,
}

impl ApplySetParent {
    /// The parent for a blueprint named `blueprint` whose operator lives in `namespace`.
    pub fn for_blueprint(blueprint: &str, namespace: &str) -> ApplySetParent {
        ApplySetParent {
            name: format!("gpuctl-applyset-{blueprint}"),
            namespace: namespace.to_string(),
        }
    }

    /// The set id per KEP-3659: `applyset-<base64url(sha256(<name>.<namespace>.<kind>.<group>))>-v1`,
    /// with an empty group for core kinds.
    pub fn id(&self) -> String {
        let digest = Sha256::digest(format!("{}.{}.ConfigMap.", self.name, self.namespace));
        format!(
            "applyset-{}-v1",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_follows_kep_3659() {
        let p = ApplySetParent::for_blueprint("train-prod", "gpu-operator");
        let id = p.id();
        assert!(id.starts_with("applyset-") && id.ends_with("-v1"), "{id}");
        // 32 bytes of SHA-256 in unpadded base64url are 43 characters.
        assert_eq!(id.len(), "applyset-".len() + 43 + "-v1".len());
        assert!(!id.contains('='));
        assert_ne!(
            id,
            ApplySetParent::for_blueprint("other", "gpu-operator").id()
        );
        // Label values are at most 63 characters.
        assert!(id.len() <= 63);
    }
}
