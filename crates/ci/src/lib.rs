//! gpuctl's CI gate on a forge (docs/ci.md): one comment per pull request and plan, found again by
//! a hidden marker and edited on every push, and a check run whose conclusion follows the plan's
//! exit code, annotated at the blueprint's lines (GitHub); one note per merge request the same
//! way (GitLab). The only crate that talks to GitHub or GitLab; the comment's text is composed
//! here without the network ([`body`]).

pub mod body;
pub mod github;
pub mod gitlab;
pub mod http;

pub use http::{CiError, Client, Retry, Token};

// The `http` crate, beside this crate's own `http` module.
use ::http as http_crate;

/// What an upsert of the sticky comment did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    /// No comment of this key existed: this one was created (its id).
    Created(u64),
    /// The comment of this key was edited in place (its id).
    Updated(u64),
}

impl Upserted {
    /// The comment's id.
    pub fn id(self) -> u64 {
        match self {
            Upserted::Created(id) | Upserted::Updated(id) => id,
        }
    }
}

/// How many pages of comments are read at most (100 a page): a PR with more than 10,000
/// comments gets a new comment rather than an unbounded walk.
pub const MAX_PAGES: usize = 100;

/// Where a forge keeps its sticky comments and how it edits one.
pub(crate) struct Thread<'a> {
    /// The first page of the list (`?per_page=100...`); later pages come from the answers.
    pub list: String,
    /// What an item is called in messages (`comment`, `note`).
    pub item: &'a str,
    /// The URL that edits item `id`.
    pub edit_url: &'a dyn Fn(u64) -> String,
    /// PATCH (GitHub) or PUT (GitLab).
    pub edit_method: http_crate::Method,
    /// The URL that creates one.
    pub create_url: String,
}

/// The sticky comment's life cycle, the same on every forge: every page of the thread's list
/// (at most [`MAX_PAGES`]), the first item `matches` accepts edited in place, else one created.
pub(crate) async fn upsert(
    client: &Client,
    thread: Thread<'_>,
    matches: impl Fn(&serde_json::Value) -> bool,
    body: &str,
) -> Result<Upserted, CiError> {
    use serde_json::{Value, json};
    let mut url = Some(thread.list);
    let mut pages = 0;
    while let Some(page) = url.take() {
        pages += 1;
        let resp = client.send(http_crate::Method::GET, &page, None).await?;
        let items = resp.json.as_array().ok_or_else(|| CiError::Decode {
            url: page.clone(),
            reason: format!("the {} list is not an array", thread.item),
        })?;
        let found = items.iter().find(|c| matches(c));
        if let Some(id) = found.and_then(|c| c.get("id")).and_then(Value::as_u64) {
            let edit = (thread.edit_url)(id);
            client
                .send(
                    thread.edit_method.clone(),
                    &edit,
                    Some(&json!({ "body": body })),
                )
                .await?;
            return Ok(Upserted::Updated(id));
        }
        if pages < MAX_PAGES {
            url = resp.next;
        }
    }
    let create = thread.create_url;
    let resp = client
        .send(
            http_crate::Method::POST,
            &create,
            Some(&json!({ "body": body })),
        )
        .await?;
    let id = resp
        .json
        .get("id")
        .and_then(Value::as_u64)
        .ok_or_else(|| CiError::Decode {
            url: create,
            reason: format!("the created {} has no id", thread.item),
        })?;
    Ok(Upserted::Created(id))
}
