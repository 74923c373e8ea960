//! Reads the Day-2 state `gpuctl doctor` and `gpuctl status` decide with into the core's
//! [`Diagnostics`]: one paged LIST per kind of [`DIAGNOSTIC_KINDS`] (never a per-object GET), in
//! one pass, pods before events (events are kept only for the pods kept). A kind the cluster does
//! not serve or the credentials may not list is recorded as such, not an error: doctor says what
//! it could not see.

use futures::StreamExt;
use gpuctl_core::diagnostics::{DIAGNOSTIC_KINDS, DiagKind, Diagnostics, UnreadWhy};
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use crate::client::{ClusterError, Kube, Resolved, retry};

/// Objects per page: a page of 500 pods is a few MB at most, so memory stays bounded however
/// large the cluster is.
pub const PAGE: u32 = 500;

/// Kinds resolved through discovery at once.
const PARALLELISM: usize = 8;

/// What one pass read, and what it cost.
#[derive(Debug, Clone)]
pub struct DiagnosticsReading {
    /// The state read.
    pub diagnostics: Diagnostics,
    /// LIST requests sent (pages included; discovery requests not counted).
    pub list_requests: u64,
}

/// Reads every kind doctor and status use. `operator_namespace`: the GPU Operator's namespace
/// (all of its pods are kept). `read_at`: the time to record (RFC 3339).
pub async fn read(
    k: &Kube,
    operator_namespace: &str,
    read_at: Option<String>,
) -> Result<DiagnosticsReading, ClusterError> {
    let mut d = Diagnostics::new(operator_namespace, read_at);
    // Discovery for every kind at once (cached by the client), then the lists in table order.
    let resolved: Vec<(DiagKind, Result<Option<Resolved>, ClusterError>)> =
        futures::stream::iter(DIAGNOSTIC_KINDS.iter().copied())
            .map(|(kind, group, name, versions)| async move {
                (kind, k.resolve_in(group, name, versions).await)
            })
            .buffered(PARALLELISM)
            .collect()
            .await;
    let mut requests = 0u64;
    for (kind, r) in resolved {
        let r = match r {
            Ok(Some(r)) => r,
            Ok(None) => {
                d.mark_unread(kind, UnreadWhy::NotServed, "");
                continue;
            }
            Err(ClusterError::Forbidden { message, .. }) => {
                d.mark_unread(kind, UnreadWhy::Forbidden, message);
                continue;
            }
            Err(e) => return Err(e),
        };
        let api: Api<DynamicObject> = Api::all_with(k.client(), &r.resource);
        let mut token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().limit(PAGE);
            if let Some(t) = &token {
                lp = lp.continue_token(t);
            }
            requests += 1;
            let page = match retry(|| api.list(&lp)).await {
                Ok(p) => p,
                Err(kube::Error::Api(s)) if s.code == 403 => {
                    d.mark_unread(kind, UnreadWhy::Forbidden, s.message);
                    break;
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    d.mark_unread(kind, UnreadWhy::NotServed, "");
                    break;
                }
                // An expired continue token (410) or anything else: what was read stays, and the
                // kind says it is incomplete.
                Err(e) => {
                    d.mark_unread(kind, UnreadWhy::Failed, e.to_string());
                    break;
                }
            };
            let items: Vec<Value> = page
                .items
                .into_iter()
                .map(|o| {
                    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
                    v["apiVersion"] = Value::from(r.resource.api_version.as_str());
                    v["kind"] = Value::from(r.resource.kind.as_str());
                    v
                })
                .collect();
            d.ingest(kind, items);
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            let cut = kind != DiagKind::Event
                && d.unread(kind)
                    .is_some_and(|u| u.why == UnreadWhy::Truncated);
            if token.is_none() || cut {
                break;
            }
        }
    }
    d.finish();
    Ok(DiagnosticsReading {
        diagnostics: d,
        list_requests: requests,
    })
}
