//! GitLab: the merge request from the pipeline's variables and its sticky note (list with
//! pagination, system notes skipped, then PUT the one with the marker, else POST). The gate
//! itself is the job's exit code: a failed pipeline blocks the merge ("Pipelines must succeed").

use http::Method;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use crate::http::{CiError, Client};
use crate::{MAX_PAGES, Upserted};

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
    let mut url = Some(client.url(&format!(
        "{notes}?per_page=100&sort=asc&order_by=created_at"
    )));
    let mut pages = 0;
    while let Some(page) = url.take() {
        pages += 1;
        let resp = client.send(Method::GET, &page, None).await?;
        let list = resp.json.as_array().ok_or_else(|| CiError::Decode {
            url: page.clone(),
            reason: "the note list is not an array".into(),
        })?;
        let found = list.iter().find(|n| {
            n.get("system").and_then(Value::as_bool) != Some(true)
                && n.get("body")
                    .and_then(Value::as_str)
                    .is_some_and(|b| b.contains(marker))
                && author.is_none_or(|a| {
                    n.pointer("/author/username").and_then(Value::as_str) == Some(a)
                })
        });
        if let Some(id) = found.and_then(|n| n.get("id")).and_then(Value::as_u64) {
            let edit = client.url(&format!("{notes}/{id}"));
            client
                .send(Method::PUT, &edit, Some(&json!({ "body": body })))
                .await?;
            return Ok(Upserted::Updated(id));
        }
        if pages < MAX_PAGES {
            url = resp.next;
        }
    }
    let create = client.url(&notes);
    let resp = client
        .send(Method::POST, &create, Some(&json!({ "body": body })))
        .await?;
    let id = resp
        .json
        .get("id")
        .and_then(Value::as_u64)
        .ok_or_else(|| CiError::Decode {
            url: create,
            reason: "the created note has no id".into(),
        })?;
    Ok(Upserted::Created(id))
}
