//! GitLab: the merge request from the pipeline's variables and its sticky note (list with
//! pagination, system notes skipped, then PUT the one with the marker, else POST). The gate
//! itself is the job's exit code: a failed pipeline blocks the merge ("Pipelines must succeed").

use http::Method;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

use crate::Upserted;
use crate::http::{CiError, Client};

/// A merge request: the project (numeric id or `group/project` path) and its iid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeRequest {
    /// `CI_PROJECT_ID` (or a path, encoded for the URL here).
    pub project: String,
    /// `CI_MERGE_REQUEST_IID`.
    pub iid: u64,
}

impl MergeRequest {
    fn notes(&self) -> String {
        format!(
            "/projects/{}/merge_requests/{}/notes",
            utf8_percent_encode(&self.project, NON_ALPHANUMERIC),
            self.iid
        )
    }
}

/// Finds this key's note (not a system note, the marker in its body and, when `author` is
/// given, by that username), edits it, or creates it.
pub async fn upsert_note(
    client: &Client,
    mr: &MergeRequest,
    marker: &str,
    author: Option<&str>,
    body: &str,
) -> Result<Upserted, CiError> {
    let notes = mr.notes();
    let edit_url = |id: u64| client.url(&format!("{notes}/{id}"));
    let thread = crate::Thread {
        list: client.url(&format!(
            "{notes}?per_page=100&sort=asc&order_by=created_at"
        )),
        item: "note",
        edit_url: &edit_url,
        edit_method: Method::PUT,
        create_url: client.url(&notes),
    };
    let matches = |n: &Value| {
        n.get("system").and_then(Value::as_bool) != Some(true)
            && n.get("body")
                .and_then(Value::as_str)
                .is_some_and(|b| b.contains(marker))
            && author
                .is_none_or(|a| n.pointer("/author/username").and_then(Value::as_str) == Some(a))
    };
    crate::upsert(client, thread, matches, body).await
}
