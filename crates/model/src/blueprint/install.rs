//! How `apply` handles a Helm release (the GPU Operator's and the Network Operator's).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How `apply` handles an operator's Helm release.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum InstallMode {
    /// `helm upgrade --install` with the rendered values.
    #[default]
    Helm,
    /// Rendered values are committed and synced by a GitOps controller.
    Gitops,
    /// The operator is managed elsewhere.
    None,
}

impl std::fmt::Display for InstallMode {
    /// The blueprint spelling: `helm`, `gitops`, `none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InstallMode::Helm => "helm",
            InstallMode::Gitops => "gitops",
            InstallMode::None => "none",
        })
    }
}
