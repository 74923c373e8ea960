//! gpuctl's GPU-hours accounting (`gpuctl report`, docs/report.md): the queries a report asks
//! Prometheus ([`plan`]), split so no query exceeds Prometheus's points limit ([`window`]), and the
//! figures computed from the answers ([`compute`]): GPU-hours allocated, used, idle, unknown,
//! borrowed and their cost, per day and per tenant, pool, GPU model or queue. Pure: no network,
//! no clock; the cluster crate runs the queries.

pub mod compute;
pub mod window;

pub use compute::{Accumulator, By, Report, Row};
pub use window::{Chunk, Window, WindowError};

use gpuctl_pipeline::render::accounting::AccountingTable;

/// What a query's answer is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueryKind {
    /// Weighted GPUs held per running pod (namespace, pod, pool).
    Allocated,
    /// Weighted engine activity per pod.
    Active,
    /// kube-state-metrics present (one series when it is).
    Coverage,
    /// dcgm-exporter activity series per pool (present when the pool's exporter answered).
    PoolCoverage,
    /// Kueue quota reserved above nominal (cluster_queue, flavor, resource).
    Borrowed,
    /// Kueue quota lent to the cohort (cohort, cluster_queue, flavor, resource).
    Lent,
    /// Nodes per pool in kube-state-metrics' node labels (present when the pool's nodes are).
    NodeCoverage,
}

/// One range query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// Its use.
    pub kind: QueryKind,
    /// PromQL.
    pub promql: String,
}

/// The queries a report runs, each over every chunk of the window. They are the expressions of
/// the recording rules render writes (`render::accounting`), so a report needs no rule history.
pub fn plan(table: &AccountingTable) -> Vec<Query> {
    let mut out = vec![
        Query {
            kind: QueryKind::Allocated,
            promql: table.pod_allocated_expr(),
        },
        Query {
            kind: QueryKind::Active,
            promql: table.pod_active_expr(),
        },
        Query {
            kind: QueryKind::Coverage,
            promql: table.coverage_expr(),
        },
        Query {
            kind: QueryKind::PoolCoverage,
            promql: table.pool_coverage_expr(),
        },
        Query {
            kind: QueryKind::NodeCoverage,
            promql: table.node_coverage_expr(),
        },
    ];
    if let Some(b) = table.borrowed_expr() {
        out.push(Query {
            kind: QueryKind::Borrowed,
            promql: b,
        });
    }
    if let Some(l) = table.lent_expr() {
        out.push(Query {
            kind: QueryKind::Lent,
            promql: l,
        });
    }
    out
}

/// One series of a range query's answer: its labels and its (unix seconds, value) points.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    /// Labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Points in time order.
    pub points: Vec<(i64, f64)>,
}
