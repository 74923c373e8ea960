//! A provisioned pool's bounds (`provisioner.minNodes` / `maxNodes`) against the nodes found, and,
//! for a Karpenter pool, its NodeClaims by stage (what `gpuctl status` shows per pool).

use serde::Serialize;
use serde_json::Value;

use gpuctl_model::blueprint::model::NodePool;
use gpuctl_model::blueprint::provisioning::ProvisionerKind;

/// Where a pool's node count stands against its provisioner's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// Fewer nodes than `minNodes`.
    BelowMin,
    /// Between `minNodes` and `maxNodes`, below the maximum.
    Within,
    /// At `maxNodes`: the provisioner adds no node.
    AtMax,
    /// More than `maxNodes`.
    AboveMax,
}

impl Bound {
    /// As the tables print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::BelowMin => "below min",
            Bound::Within => "within",
            Bound::AtMax => "at max",
            Bound::AboveMax => "above max",
        }
    }
}

/// A Karpenter pool's NodeClaims (labelled `karpenter.sh/nodepool: <pool>`, not being deleted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimCounts {
    /// `Launched=True`: the provider made the instance.
    pub launched: u64,
    /// Not launched yet (or failing to: `gpuctl doctor` says why, GPU246).
    pub pending: u64,
}

/// A pool a provisioner scales.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionerStatus {
    /// `karpenter`, `clusterAPI` or `managed`.
    pub kind: String,
    /// `provisioner.minNodes` (0 when not set).
    pub min_nodes: u64,
    /// `provisioner.maxNodes` (the pool's `nodes` when not set).
    pub max_nodes: u64,
    /// The pool's nodes found against the two.
    pub bound: Bound,
    /// Karpenter pools, when NodeClaims were read: its NodeClaims by stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_claims: Option<NodeClaimCounts>,
}

/// `pool`'s provisioner status with `total` nodes found; `None` for a static pool.
/// `claims`: every NodeClaim read (`None`: not read, Karpenter's CRDs absent).
pub fn of(pool: &NodePool, total: u64, claims: Option<&[Value]>) -> Option<ProvisionerStatus> {
    if !pool.provisioner.scales() {
        return None;
    }
    let min = u64::from(pool.provisioner.min_nodes.unwrap_or(0));
    let max = u64::from(pool.max_nodes());
    let bound = if total < min {
        Bound::BelowMin
    } else if total > max {
        Bound::AboveMax
    } else if total == max {
        Bound::AtMax
    } else {
        Bound::Within
    };
    let node_claims = (pool.provisioner.kind == ProvisionerKind::Karpenter)
        .then_some(claims)
        .flatten()
        .map(|claims| {
            let mut c = NodeClaimCounts::default();
            for v in claims.iter().filter(|v| {
                v["metadata"]["labels"]["karpenter.sh/nodepool"] == pool.name.as_str()
                    && v["metadata"]["deletionTimestamp"].is_null()
            }) {
                let launched = v["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Launched" && c["status"] == "True");
                if launched {
                    c.launched += 1;
                } else {
                    c.pending += 1;
                }
            }
            c
        });
    Some(ProvisionerStatus {
        kind: pool.provisioner.kind.as_str().to_string(),
        min_nodes: min,
        max_nodes: max,
        bound,
        node_claims,
    })
}
