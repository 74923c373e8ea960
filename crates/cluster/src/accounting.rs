//! `gpuctl report`'s queries against Prometheus: runs the accounting crate's [`plan`] over every
//! chunk of the window (each within Prometheus's points limit) and folds the answers, chunk by
//! chunk, into the accounting crate's [`Accumulator`], so memory follows days x keys, not points.
//! Connection, TLS, bearer token and bounds are those of `doctor --prometheus`
//! ([`crate::prometheus`]).

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt, TryStreamExt};
use gpuctl_accounting::{Accumulator, By, Query, QueryKind, Report, Series, Window, plan};
use gpuctl_pipeline::render::accounting::AccountingTable;

use crate::prometheus::{Prometheus, PrometheusConfig, PrometheusError, RangeSeries};

/// How many range queries run at once.
const PARALLEL_QUERIES: usize = 4;

/// What [`report`] did, beside the report.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRun {
    /// The figures.
    pub report: Report,
    /// Range queries sent.
    pub queries: usize,
    /// Points received.
    pub points: usize,
}

fn series(r: RangeSeries) -> Series {
    Series {
        labels: r.labels,
        // Range points are on whole seconds (start and step are whole seconds).
        points: r
            .points
            .into_iter()
            .map(|(t, v)| (t.round() as i64, v))
            .collect(),
    }
}

/// Runs the report's queries over `window` and computes the figures per `by`.
pub async fn report(
    cfg: &PrometheusConfig,
    table: &AccountingTable,
    window: Window,
    by: By,
) -> Result<ReportRun, PrometheusError> {
    let prom = Prometheus::new(cfg)?;
    let queries: Vec<Query> = plan(table);
    let mut acc = Accumulator::new(table, window, by);
    let mut sent = 0;
    let mut points = 0;
    for chunk in window.chunks() {
        let answers: Vec<(QueryKind, Vec<RangeSeries>)> = stream::iter(queries.iter())
            .map(|q| {
                let prom = &prom;
                async move {
                    prom.query_range(&q.promql, chunk.start, chunk.end, window.step)
                        .await
                        .map(|s| (q.kind, s))
                }
            })
            .buffer_unordered(PARALLEL_QUERIES)
            .try_collect()
            .await?;
        sent += queries.len();
        let mut by_kind: BTreeMap<QueryKind, Vec<Series>> = BTreeMap::new();
        for (kind, list) in answers {
            points += list.iter().map(|s| s.points.len()).sum::<usize>();
            by_kind
                .entry(kind)
                .or_default()
                .extend(list.into_iter().map(series));
        }
        acc.add_chunk(chunk, &by_kind);
    }
    Ok(ReportRun {
        report: acc.finish(),
        queries: sent,
        points,
    })
}
