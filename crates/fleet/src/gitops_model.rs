//! The `spec.gitops` section of a fleet file (docs/fleet.md "GitOps"): which engine, the
//! repository, revision and path, and each engine's settings; names only, never credentials.
//! A leaf of the fleet model; `fleet/gitops.rs` checks it and builds the engine's objects.

use serde::{Deserialize, Serialize};

/// `spec.gitops`: how a GitOps engine syncs the rendered trees from a repository.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitOps {
    /// Which engine gets objects.
    pub engine: Engine,
    /// The repository holding the rendered trees (Argo CD; Flux reads its `sourceRef`). A URL
    /// without credentials: Argo CD's repository Secrets hold them.
    #[serde(default, rename = "repoURL")]
    pub repo_url: Option<String>,
    /// The branch, tag or commit Argo CD syncs (default `HEAD`).
    #[serde(default)]
    pub revision: Option<String>,
    /// The `fleet render -o` directory inside the repository (`""`: its root).
    pub path: String,
    /// Argo CD settings.
    #[serde(default)]
    pub argocd: Option<ArgoCd>,
    /// Flux settings.
    #[serde(default)]
    pub flux: Option<Flux>,
}

/// The GitOps engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Argo CD: one ApplicationSet.
    Argocd,
    /// Flux: one Kustomization per cluster.
    Flux,
}

impl Engine {
    /// The directory of `fleet render -o DIR` its objects go to.
    pub fn dir(self) -> &'static str {
        match self {
            Engine::Argocd => "argocd",
            Engine::Flux => "flux",
        }
    }
}

/// Argo CD settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArgoCd {
    /// The AppProject of the Applications (default `default`).
    #[serde(default)]
    pub project: Option<String>,
    /// Argo CD's namespace, the ApplicationSet's (default `argocd`).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Flux settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Flux {
    /// The Kustomizations' namespace, where each `<cluster>-kubeconfig` Secret lives (default
    /// `flux-system`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The source holding the rendered trees (required).
    #[serde(default)]
    pub source_ref: Option<SourceRef>,
    /// How often Flux reconciles (default `10m`; a Go duration: `30s`, `5m`, `1h`).
    #[serde(default)]
    pub interval: Option<String>,
}

/// A Flux source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceRef {
    /// `GitRepository` (default), `OCIRepository`, `Bucket` or `ExternalArtifact`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Its name, in the Kustomizations' namespace.
    pub name: String,
}
