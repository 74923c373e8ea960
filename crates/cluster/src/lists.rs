//! The one way this crate reads kinds in bulk, shared by every command: plan and apply (through
//! [`Kube::list`]), `gpuctl doctor`, `status` and `snapshot --diagnostics`
//! ([`crate::diagnostics`]) and `import` and `snapshot --all` ([`crate::import`]).
//!
//! A command names the kinds it needs in a table ([`Want`] rows). They are resolved with one
//! aggregated discovery of their groups ([`resolve`]: two requests at most, however many kinds),
//! then listed at once ([`each_page`]): a bounded number of kinds at a time, each in pages
//! (`limit` and `continue`) of at most [`PAGE`] objects, decoded straight from the response into
//! JSON values (never through kube's `DynamicObject`, which decoded every item and then converted
//! it again) on the runtime's blocking threads, so decoding one page overlaps fetching the next.
//! Pages are handed to the reader in the table's order (all of one kind before the next), and at
//! most one page per kind waits to be taken, so memory stays bounded however large the cluster
//! is. A kind the cluster does not serve, or the credentials may not list, stops with the reason
//! ([`Stopped`]) instead of reading as empty.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use gpuctl_day2::diagnostics::UnreadWhy;
use kube::api::{DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope};
use serde_json::Value;

use crate::client::{ClusterError, Kube, Resolved, classify, retry};

/// Objects per page: at most this many of a kind are decoded at once, and at most two pages of a
/// kind are in flight (one fetched, one waiting to be taken), so a reading's memory stays bounded
/// however large the cluster is. Measured with `tools/bench-day2-live` (1,000 nodes, 21,000 pods,
/// 5,000 events, docs/testing.md): with pages of 500, `gpuctl doctor` sent 67 LISTs; with these,
/// 16. A page of 2,500 pods is about 10 MB of JSON.
pub const PAGE: u32 = 2_500;

/// Objects per page of core Events, a fifth of a Pod's size.
pub const EVENT_PAGE: u32 = 5_000;

/// Kinds listed at once.
pub const PARALLELISM: usize = 8;

/// One kind a command reads: its group (`""`: the core group), kind, the versions gpuctl reads
/// (tried in order; otherwise the group's preferred version that serves the kind: a group can
/// serve kinds in different versions, nvidia.com has ClusterPolicy in v1 and NVIDIADriver in
/// v1alpha1) and a field selector (`""`: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want<'a> {
    /// API group.
    pub group: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Versions tried first, in order.
    pub versions: &'a [&'a str],
    /// Field selector sent with the LIST.
    pub fields: &'a str,
}

/// How one resolved kind is listed.
#[derive(Debug, Clone)]
pub struct Query {
    /// The kind as the cluster serves it.
    pub resolved: Resolved,
    /// Only this namespace (namespaced kinds); `None`: every namespace.
    pub namespace: Option<String>,
    /// Label selector (`""`: none).
    pub labels: String,
    /// Field selector (`""`: none).
    pub fields: String,
    /// Objects per page ([`PAGE`], [`EVENT_PAGE`]).
    pub limit: u32,
}

impl Query {
    /// Every object of `resolved`, in every namespace, matching `fields`.
    pub fn all(resolved: Resolved, fields: &str) -> Query {
        let limit = match (
            resolved.resource.group.as_str(),
            resolved.resource.kind.as_str(),
        ) {
            ("", "Event") => EVENT_PAGE,
            _ => PAGE,
        };
        Query {
            resolved,
            namespace: None,
            labels: String::new(),
            fields: fields.to_string(),
            limit,
        }
    }
}

/// Why a kind's listing stopped before its last page: what was read before stays.
#[derive(Debug)]
pub struct Stopped {
    /// Not served (404), forbidden (403) or failed (anything else, after retries).
    pub why: UnreadWhy,
    /// The error.
    pub error: ClusterError,
}

impl Stopped {
    /// The server's words (a 403 names the identity and the verb), else the error.
    pub fn message(&self) -> String {
        match &self.error {
            ClusterError::Forbidden { message, .. } => message.clone(),
            ClusterError::Api { source, .. } => source.to_string(),
            ClusterError::KindNotServed { .. } => String::new(),
            other => other.to_string(),
        }
    }
}

/// One step of a kind's listing.
#[derive(Debug)]
pub enum Listing {
    /// One page of objects (items as the server lists them: without apiVersion and kind).
    Page(Vec<Value>),
    /// The listing stopped early.
    Stopped(Stopped),
}

/// Resolves `wants` with one aggregated discovery of their groups (`/api` for the core group,
/// `/apis` for the others); a server without aggregated discovery (before Kubernetes 1.26) is
/// asked kind by kind. `Ok(None)`: not served. Per kind, so one forbidden discovery does not hide
/// the others.
pub async fn resolve(k: &Kube, wants: &[Want<'_>]) -> Vec<Result<Option<Resolved>, ClusterError>> {
    let groups: BTreeSet<&str> = wants.iter().map(|w| w.group).collect();
    let groups: Vec<&str> = groups.into_iter().collect();
    let found = retry(|| Discovery::new(k.client()).filter(&groups).run_aggregated()).await;
    match found {
        Ok(d) => wants.iter().map(|w| Ok(pick(&d, w))).collect(),
        Err(_) => {
            futures::stream::iter(wants)
                .map(|w| k.resolve_in(w.group, w.kind, w.versions))
                .buffered(PARALLELISM)
                .collect()
                .await
        }
    }
}

/// The first of `w.versions` that serves the kind, else the group's preferred version, else any.
fn pick(d: &Discovery, w: &Want<'_>) -> Option<Resolved> {
    let g = d.get(w.group)?;
    let in_version = |v: &str| {
        g.versioned_resources(v)
            .into_iter()
            .find(|(r, _)| r.kind == w.kind)
    };
    let (resource, caps) = w
        .versions
        .iter()
        .find_map(|v| in_version(v))
        .or_else(|| g.recommended_kind(w.kind))
        .or_else(|| g.versions().find_map(&in_version))?;
    Some(Resolved {
        resource,
        namespaced: caps.scope == Scope::Namespaced,
    })
}

/// Lists every query at once (at most [`PARALLELISM`] kinds at a time) and hands `take` each
/// kind's pages, in the order of `queries` and each kind's pages in order; `take(i, listing)`
/// returns false to read no more of query `i` (its remaining pages are not requested). Returns the
/// LIST requests sent.
pub async fn each_page(
    k: &Kube,
    queries: &[Query],
    mut take: impl FnMut(usize, Listing) -> bool,
) -> u64 {
    let sent = AtomicU64::new(0);
    let (senders, receivers): (Vec<_>, Vec<_>) =
        queries.iter().map(|_| mpsc::channel::<Listing>(0)).unzip();
    // Kinds start in table order and the reader takes them in that order, so the kind it waits
    // for has always started: a bounded number in flight cannot stall it.
    let producers = futures::stream::iter(queries.iter().zip(senders))
        .map(|(q, tx)| produce(k, q, tx, &sent))
        .buffer_unordered(PARALLELISM)
        .for_each(|()| async {});
    let reader = async {
        for (i, mut rx) in receivers.into_iter().enumerate() {
            while let Some(listing) = rx.next().await {
                if !take(i, listing) {
                    // Dropping the receiver stops the kind's producer at its next page.
                    break;
                }
            }
        }
    };
    futures::join!(producers, reader);
    sent.into_inner()
}

impl Kube {
    /// Lists objects of a kind carrying `label_selector`, in every namespace (plan and apply's
    /// reads): the same paged LIST as every other command's, decoded straight into JSON values.
    pub async fn list(
        &self,
        r: &Resolved,
        label_selector: &str,
    ) -> Result<Vec<Value>, ClusterError> {
        let mut query = Query::all(r.clone(), "");
        query.labels = label_selector.to_string();
        all_pages(self, &query).await
    }
}

/// Every object `query` lists, all pages (items carry no apiVersion or kind).
pub async fn all_pages(k: &Kube, query: &Query) -> Result<Vec<Value>, ClusterError> {
    let mut items = Vec::new();
    let mut stopped = None;
    each_page(k, std::slice::from_ref(query), |_, listing| match listing {
        Listing::Page(page) => {
            items.extend(page);
            true
        }
        Listing::Stopped(s) => {
            stopped = Some(s.error);
            false
        }
    })
    .await;
    match stopped {
        Some(e) => Err(e),
        None => Ok(items),
    }
}

/// Sends `query`'s pages down `tx` until the last, an error, or the reader has gone.
async fn produce(k: &Kube, query: &Query, mut tx: mpsc::Sender<Listing>, sent: &AtomicU64) {
    let mut token: Option<String> = None;
    loop {
        sent.fetch_add(1, Ordering::Relaxed);
        let listing = match page(k, query, token.as_deref()).await {
            Ok((items, next)) => {
                token = next;
                Listing::Page(items)
            }
            Err(e) => {
                token = None;
                Listing::Stopped(stopped(&query.resolved, e))
            }
        };
        if tx.send(listing).await.is_err() || token.is_none() {
            return;
        }
    }
}

/// A failed LIST as a reason a kind was not read (whole).
fn stopped(r: &Resolved, e: kube::Error) -> Stopped {
    let why = match &e {
        kube::Error::Api(s) if s.code == 403 => UnreadWhy::Forbidden,
        kube::Error::Api(s) if s.code == 404 => UnreadWhy::NotServed,
        // An expired continue token (410) or anything else.
        _ => UnreadWhy::Failed,
    };
    let error = match why {
        UnreadWhy::NotServed => ClusterError::KindNotServed {
            api_version: r.resource.api_version.clone(),
            kind: r.resource.kind.clone(),
        },
        _ => classify(&format!("list {}", r.resource.kind), e),
    };
    Stopped { why, error }
}

/// One page of `query` from `token` (`None`: the first): its items and the next page's token.
async fn page(
    k: &Kube,
    query: &Query,
    token: Option<&str>,
) -> Result<(Vec<Value>, Option<String>), kube::Error> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default, rename = "continue")]
        continue_: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Page {
        #[serde(default)]
        items: Vec<Value>,
        #[serde(default)]
        metadata: Option<Meta>,
    }
    let r = &query.resolved;
    let namespace = query.namespace.as_deref().filter(|_| r.namespaced);
    let path = <DynamicObject as kube::Resource>::url_path(&r.resource, namespace);
    let mut lp = ListParams::default().limit(query.limit.max(1));
    if !query.labels.is_empty() {
        lp = lp.labels(&query.labels);
    }
    if !query.fields.is_empty() {
        lp = lp.fields(&query.fields);
    }
    if let Some(t) = token {
        lp = lp.continue_token(t);
    }
    let text = retry(|| async {
        let mut req = kube::core::Request::new(path.as_str())
            .list(&lp)
            .map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("list");
        k.client().request_text(req).await
    })
    .await?;
    // Decoding a page of 2,000 pods takes tens of milliseconds: off the runtime's thread, so the
    // next page is fetched (and the last one taken) meanwhile.
    let page: Page = tokio::task::spawn_blocking(move || serde_json::from_str(&text))
        .await
        .map_err(|e| kube::Error::Service(Box::new(e)))?
        .map_err(kube::Error::SerdeError)?;
    let next = page
        .metadata
        .and_then(|m| m.continue_)
        .filter(|t| !t.is_empty());
    Ok((page.items, next))
}
