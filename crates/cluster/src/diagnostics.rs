//! Reads the Day-2 state `gpuctl doctor`, `gpuctl status` and `gpuctl snapshot --diagnostics`
//! decide with into the core's [`Diagnostics`]: exactly the kinds the command needs
//! ([`gpuctl_day2::diagnostics::DOCTOR_READS`], [`gpuctl_day2::diagnostics::STATUS_READS`]), listed
//! at once through the crate's one bulk read ([`crate::lists`]: one aggregated discovery, paged
//! LISTs, never a per-object GET), pods before events (events are kept only for the pods kept),
//! Pods without those that have `Succeeded` (the table's field selector). A kind the cluster does
//! not serve or the credentials may not list is recorded as such, not an error: doctor says what
//! it could not see.

use gpuctl_day2::diagnostics::{DIAGNOSTIC_KINDS, DiagKind, Diagnostics, UnreadWhy};
use serde_json::Value;

use crate::client::{ClusterError, Kube};
use crate::lists::{self, Listing, Query, Want};

/// What one pass read, and what it cost.
#[derive(Debug, Clone)]
pub struct DiagnosticsReading {
    /// The state read.
    pub diagnostics: Diagnostics,
    /// LIST requests sent (pages included; discovery not counted).
    pub list_requests: u64,
}

/// Reads the kinds of `needs` (in the order of [`DIAGNOSTIC_KINDS`], whatever the order of
/// `needs`). `operator_namespace`: the GPU Operator's namespace (all of its pods are kept).
/// `read_at`: the time to record (RFC 3339).
pub async fn read(
    k: &Kube,
    needs: &[DiagKind],
    operator_namespace: &str,
    read_at: Option<String>,
) -> Result<DiagnosticsReading, ClusterError> {
    let mut d = Diagnostics::new(operator_namespace, read_at);
    let rows: Vec<_> = DIAGNOSTIC_KINDS
        .iter()
        .filter(|row| needs.contains(&row.0))
        .collect();
    let wants: Vec<Want<'_>> = rows
        .iter()
        .map(|row| Want {
            group: row.1,
            kind: row.2,
            versions: row.3,
            fields: row.4,
        })
        .collect();
    let mut kinds = Vec::new();
    let mut queries = Vec::new();
    for (row, resolved) in rows.iter().zip(lists::resolve(k, &wants).await) {
        match resolved {
            Ok(Some(r)) => {
                kinds.push(row.0);
                queries.push(Query::all(r, row.4));
            }
            Ok(None) => d.mark_unread(row.0, UnreadWhy::NotServed, ""),
            Err(ClusterError::Forbidden { message, .. }) => {
                d.mark_unread(row.0, UnreadWhy::Forbidden, message);
            }
            Err(e) => return Err(e),
        }
    }
    let list_requests = lists::each_page(k, &queries, |i, listing| {
        let kind = kinds[i];
        match listing {
            Listing::Page(mut items) => {
                let r = &queries[i].resolved.resource;
                for v in &mut items {
                    v["apiVersion"] = Value::from(r.api_version.as_str());
                    v["kind"] = Value::from(r.kind.as_str());
                }
                d.ingest(kind, items);
                // Past a kind's bound the rest is not read (events keep the newest, so they are
                // read whole).
                kind == DiagKind::Event
                    || d.unread(kind).is_none_or(|u| u.why != UnreadWhy::Truncated)
            }
            Listing::Stopped(s) => {
                d.mark_unread(kind, s.why, s.message());
                false
            }
        }
    })
    .await;
    d.finish();
    Ok(DiagnosticsReading {
        diagnostics: d,
        list_requests,
    })
}
