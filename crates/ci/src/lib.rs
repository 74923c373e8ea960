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
