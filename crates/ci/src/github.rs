//! GitHub: the pull request from the Actions event, the sticky issue comment (list with
//! pagination, then PATCH the one with the marker, else POST), and a check run on the PR's head
//! commit whose conclusion follows the exit code, with annotations sent 50 a request.

use http::Method;
use serde_json::{Value, json};

use crate::Upserted;
use crate::http::{CiError, Client};

/// The Checks API takes at most 50 annotations per request; more go in further updates.
pub const ANNOTATIONS_PER_REQUEST: usize = 50;
/// GitHub's media type for its REST API.
pub const ACCEPT: &str = "application/vnd.github+json";

/// The pull request a run is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// `owner/name`.
    pub repository: String,
    /// The PR's number.
    pub number: u64,
    /// The PR's head commit (not `GITHUB_SHA`, the merge commit of a `pull_request` run).
    pub head_sha: String,
}

impl PullRequest {
    /// From the webhook payload of a `pull_request` or `pull_request_target` run
    /// (`$GITHUB_EVENT_PATH`).
    pub fn from_event(repository: &str, event: &Value) -> Result<PullRequest, CiError> {
        let pr = event.get("pull_request").ok_or_else(|| {
            CiError::Config(
                "the event has no `pull_request`: run on `pull_request` events (or give --pr and --sha)".into(),
            )
        })?;
        let number = pr
            .get("number")
            .and_then(Value::as_u64)
            .ok_or_else(|| CiError::Config("the event's pull_request has no number".into()))?;
        let head_sha = pr
            .pointer("/head/sha")
            .and_then(Value::as_str)
            .ok_or_else(|| CiError::Config("the event's pull_request has no head.sha".into()))?;
        PullRequest::new(repository, number, head_sha)
    }

    /// Checked: `owner/name`, a hex commit.
    pub fn new(repository: &str, number: u64, head_sha: &str) -> Result<PullRequest, CiError> {
        let ok_part = |p: &str| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        match repository.split_once('/') {
            Some((o, n)) if ok_part(o) && ok_part(n) => {}
            _ => {
                return Err(CiError::Config(format!(
                    "the repository `{repository}` is not `owner/name` (GITHUB_REPOSITORY)"
                )));
            }
        }
        if head_sha.len() < 7 || !head_sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(CiError::Config(format!(
                "the commit `{head_sha}` is not a hex commit id"
            )));
        }
        Ok(PullRequest {
            repository: repository.to_owned(),
            number,
            head_sha: head_sha.to_owned(),
        })
    }
}

/// Finds this key's comment (the marker in its body and, when `author` is given, written by
/// that login) through every page of the PR's comments, edits it, or creates it.
pub async fn upsert_comment(
    client: &Client,
    pr: &PullRequest,
    marker: &str,
    author: Option<&str>,
    body: &str,
) -> Result<Upserted, CiError> {
    let edit_url = |id: u64| client.url(&format!("/repos/{}/issues/comments/{id}", pr.repository));
    let thread = crate::Thread {
        list: client.url(&format!(
            "/repos/{}/issues/{}/comments?per_page=100",
            pr.repository, pr.number
        )),
        item: "comment",
        edit_url: &edit_url,
        edit_method: Method::PATCH,
        create_url: client.url(&format!(
            "/repos/{}/issues/{}/comments",
            pr.repository, pr.number
        )),
    };
    let matches = |c: &Value| {
        c.get("body")
            .and_then(Value::as_str)
            .is_some_and(|b| b.contains(marker))
            && author.is_none_or(|a| c.pointer("/user/login").and_then(Value::as_str) == Some(a))
    };
    crate::upsert(client, thread, matches, body).await
}

/// One annotation of a check run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Annotation {
    /// File, relative to the repository root.
    pub path: String,
    /// Line (1-based).
    pub start_line: u64,
    /// Last line.
    pub end_line: u64,
    /// `failure`, `warning` or `notice`.
    pub annotation_level: &'static str,
    /// The finding id.
    pub title: String,
    /// The finding.
    pub message: String,
}

/// What the check run says.
pub struct Check<'a> {
    /// Its name (stable per job: a required check names it).
    pub name: &'a str,
    /// `success` or `failure` (never `neutral`: GitHub counts it as passing).
    pub passed: bool,
    /// One line.
    pub title: &'a str,
    /// Markdown, at most 65,535 characters.
    pub summary: &'a str,
    /// Where the run is.
    pub details_url: Option<&'a str>,
}

/// Creates the check run on the PR's head commit with the first 50 annotations, adds the rest
/// 50 a request, then completes it with the conclusion. Returns its id.
pub async fn check_run(
    client: &Client,
    pr: &PullRequest,
    check: &Check<'_>,
    annotations: &[Annotation],
) -> Result<u64, CiError> {
    let mut batches = annotations.chunks(ANNOTATIONS_PER_REQUEST);
    let output = |batch: &[Annotation]| json!({ "title": check.title, "summary": check.summary, "annotations": batch });
    let mut create = json!({
        "name": check.name,
        "head_sha": pr.head_sha,
        "status": "in_progress",
        "output": output(batches.next().unwrap_or_default()),
    });
    if let Some(url) = check.details_url {
        create["details_url"] = json!(url);
    }
    let url = client.url(&format!("/repos/{}/check-runs", pr.repository));
    let resp = client.send(Method::POST, &url, Some(&create)).await?;
    let id = resp
        .json
        .get("id")
        .and_then(Value::as_u64)
        .ok_or_else(|| CiError::Decode {
            url: url.clone(),
            reason: "the created check run has no id".into(),
        })?;
    let update = client.url(&format!("/repos/{}/check-runs/{id}", pr.repository));
    for batch in batches {
        client
            .send(
                Method::PATCH,
                &update,
                Some(&json!({ "output": output(batch) })),
            )
            .await?;
    }
    let done = json!({
        "status": "completed",
        "conclusion": if check.passed { "success" } else { "failure" },
        "output": { "title": check.title, "summary": check.summary },
    });
    client.send(Method::PATCH, &update, Some(&done)).await?;
    Ok(id)
}
