//! The REST client both forges share: one token header (never shown), JSON in and out, bounded
//! in time and size, retries of what GitHub and GitLab say to retry, and `Link` pagination that
//! never leaves the API's origin.
//!
//! Retried, with bounded backoff: any 5xx, 429, and a 403 that is a rate limit (GitHub's
//! secondary rate limit answers 403 with `Retry-After` or a "rate limit" message). `Retry-After`
//! is honoured up to [`Retry::max_delay`]; otherwise the delay doubles from [`Retry::base`].

use std::time::Duration;

use http::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, USER_AGENT};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// The largest response read (a page of 100 comments of 65,536 characters each fits).
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// An API token: never shown (`Debug` is redacted, the header is marked sensitive).
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token (surrounding whitespace, such as a file's final newline, is dropped).
    pub fn new(text: &str) -> Token {
        Token(text.trim().to_owned())
    }

    /// The token's text, for masking it out of what gpuctl posts or prints.
    pub fn text(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// What went wrong talking to a forge. URLs are shown without their query; the token never is.
#[derive(Debug, thiserror::Error)]
pub enum CiError {
    /// The API could not be reached (connect, TLS, timeout).
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The API answered with an error status (after the retries it deserves).
    #[error("{method} {url} answered HTTP {status}: {message}{hint}")]
    Status {
        /// The request method.
        method: String,
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
        /// The API's message (an excerpt).
        message: String,
        /// What to do (the permission a token lacks, for example).
        hint: String,
    },
    /// The API's answer is not what its documentation says.
    #[error("{url}: unexpected answer: {reason}")]
    Decode {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A setting is missing or wrong (base URL, repository, event file, token).
    #[error("{0}")]
    Config(String),
}

/// How requests are retried.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Attempts in all (the first included).
    pub attempts: u32,
    /// The first delay without `Retry-After`; it doubles on each retry.
    pub base: Duration,
    /// No delay is longer, `Retry-After` included.
    pub max_delay: Duration,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry {
            attempts: 4,
            base: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
        }
    }
}

/// An answer: status, the next page's URL (`Link: <...>; rel="next"`, or GitLab's
/// `X-Next-Page`), the JSON body.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// The next page, on the API's own origin.
    pub next: Option<String>,
    /// The body, parsed.
    pub json: serde_json::Value,
}

/// A forge's REST API at one base URL, with one token.
pub struct Client {
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    base: String,
    origin: String,
    auth: (HeaderName, HeaderValue),
    accept: HeaderValue,
    timeout: Duration,
    retry: Retry,
}

/// Scheme and authority of a URL (`https://api.github.com`), where pagination may go.
fn origin(url: &str) -> Option<String> {
    let uri: Uri = url.parse().ok()?;
    Some(format!("{}://{}", uri.scheme_str()?, uri.authority()?))
}

/// A URL without its query, as errors show it.
fn shown(url: &str) -> String {
    url.split('?').next().unwrap_or(url).to_owned()
}

/// The `rel="next"` URL of a `Link` header.
pub fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        let next = params
            .split(';')
            .any(|p| p.trim().replace(' ', "") == "rel=\"next\"");
        let url = url.trim().strip_prefix('<')?.strip_suffix('>')?;
        next.then(|| url.to_owned())
    })
}

fn tls_config() -> Result<rustls::ClientConfig, CiError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    // ring: the provider kube already links (one TLS stack, no aws-lc).
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CiError::Config(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl Client {
    /// A client of the API at `base` (`https://api.github.com`, `$CI_API_V4_URL`) sending `token`
    /// in the header `auth_header` as `auth_prefix` + token (`authorization: Bearer ...`,
    /// `private-token: ...`).
    pub fn new(
        base: &str,
        auth_header: &'static str,
        auth_prefix: &str,
        token: &Token,
        accept: &'static str,
        retry: Retry,
    ) -> Result<Client, CiError> {
        let base = base.trim_end_matches('/').to_owned();
        let origin = origin(&base).ok_or_else(|| {
            CiError::Config(format!(
                "the API URL `{base}` is not an absolute http(s) URL"
            ))
        })?;
        if token.text().is_empty() {
            return Err(CiError::Config("the API token is empty".into()));
        }
        let mut value =
            HeaderValue::from_str(&format!("{auth_prefix}{}", token.text())).map_err(|_| {
                CiError::Config("the token holds characters an HTTP header cannot carry".into())
            })?;
        value.set_sensitive(true);
        let mut connector = HttpConnector::new();
        connector.enforce_http(false);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config()?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        // Redirects are never followed (the client has no such policy): the token must not travel on.
        let http = HyperClient::builder(TokioExecutor::new()).build(connector);
        Ok(Client {
            http,
            base,
            origin,
            auth: (HeaderName::from_static(auth_header), value),
            accept: HeaderValue::from_static(accept),
            timeout: Duration::from_secs(30),
            retry,
        })
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends `body` (JSON) to `url` with `method`, retrying what deserves it; an error status
    /// after the retries is an error.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response, CiError> {
        if origin(url).as_deref() != Some(self.origin.as_str()) {
            // A `Link` header pointing elsewhere must not receive the token.
            return Err(CiError::Decode {
                url: shown(url),
                reason: format!("a link outside the API's origin {}", self.origin),
            });
        }
        let payload = body.map(|b| Bytes::from(b.to_string()));
        let mut attempt = 1;
        loop {
            let (status, headers, bytes) = self.exchange(&method, url, payload.clone()).await?;
            let retryable = status >= 500
                || status == 429
                || (status == 403
                    && (headers.contains_key("retry-after")
                        || String::from_utf8_lossy(&bytes)
                            .to_ascii_lowercase()
                            .contains("rate limit")));
            if retryable && attempt < self.retry.attempts {
                tokio::time::sleep(self.delay(attempt, &headers)).await;
                attempt += 1;
                continue;
            }
            if !(200..300).contains(&status) {
                return Err(status_error(&method, url, status, &bytes));
            }
            let json = if bytes.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::from_slice(&bytes).map_err(|e| CiError::Decode {
                    url: shown(url),
                    reason: format!("not JSON: {e}"),
                })?
            };
            let next = self.next_page(url, &headers);
            return Ok(Response { status, next, json });
        }
    }

    /// The delay before retry number `attempt` (1 = the first retry).
    fn delay(&self, attempt: u32, headers: &http::HeaderMap) -> Duration {
        let after = headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let doubled = self.retry.base.saturating_mul(1 << (attempt - 1).min(16));
        after.unwrap_or(doubled).min(self.retry.max_delay)
    }

    /// The next page: GitHub's and GitLab's `Link` header, else GitLab's `X-Next-Page` number.
    fn next_page(&self, url: &str, headers: &http::HeaderMap) -> Option<String> {
        if let Some(link) = headers.get("link").and_then(|v| v.to_str().ok()) {
            return next_link(link);
        }
        let page = headers
            .get("x-next-page")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?;
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let mut params: Vec<String> = query
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("page="))
            .map(str::to_owned)
            .collect();
        params.push(format!("page={page}"));
        Some(format!("{path}?{}", params.join("&")))
    }

    async fn exchange(
        &self,
        method: &Method,
        url: &str,
        payload: Option<Bytes>,
    ) -> Result<(u16, http::HeaderMap, Vec<u8>), CiError> {
        let unreachable = |reason: String| CiError::Unreachable {
            url: shown(url),
            reason,
        };
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| unreachable(e.to_string()))?;
        let mut req = Request::builder()
            .method(method.clone())
            .uri(uri)
            .header(ACCEPT, self.accept.clone())
            .header(
                USER_AGENT,
                HeaderValue::from_static(concat!("gpuctl/", env!("CARGO_PKG_VERSION"))),
            )
            .header(self.auth.0.clone(), self.auth.1.clone());
        if payload.is_some() {
            req = req.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let req = req
            .body(Full::new(payload.unwrap_or_default()))
            .map_err(|e| unreachable(e.to_string()))?;
        let exchange = async {
            let resp = self
                .http
                .request(req)
                .await
                .map_err(|e| unreachable(error_chain(&e)))?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let mut body = resp.into_body();
            let mut bytes = Vec::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| unreachable(error_chain(&e)))?;
                if let Some(chunk) = frame.data_ref() {
                    if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                        return Err(unreachable(format!(
                            "the answer is over {MAX_RESPONSE_BYTES} bytes"
                        )));
                    }
                    bytes.extend_from_slice(chunk);
                }
            }
            Ok((status, headers, bytes))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| unreachable("timed out".to_owned()))?
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The error of a non-2xx answer: the API's own message and, for the statuses a missing
/// permission gives, which one.
fn status_error(method: &Method, url: &str, status: u16, bytes: &[u8]) -> CiError {
    let message = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| {
            v.get("message")
                .or_else(|| v.get("error"))
                .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
        })
        .unwrap_or_else(|| String::from_utf8_lossy(bytes).chars().take(300).collect());
    let hint = match status {
        401 => "; the token is missing, expired or wrong",
        403 | 404 if url.contains("/check-runs") => {
            "; the workflow needs `permissions: checks: write` (a fork's pull request gets a read-only token)"
        }
        403 | 404 if url.contains("/comments") => {
            "; the workflow needs `permissions: pull-requests: write` (a fork's pull request gets a read-only token)"
        }
        403 | 404 if url.contains("/notes") => {
            "; the token needs the `api` scope and the Reporter role or more (CI_JOB_TOKEN cannot write notes)"
        }
        _ => "",
    };
    CiError::Status {
        method: method.to_string(),
        url: shown(url),
        status,
        message,
        hint: hint.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_link_reads_the_next_relation_only() {
        let link = r#"<https://api.github.com/repositories/1/issues/2/comments?page=3>; rel="next", <https://api.github.com/repositories/1/issues/2/comments?page=9>; rel="last""#;
        assert_eq!(
            next_link(link).as_deref(),
            Some("https://api.github.com/repositories/1/issues/2/comments?page=3")
        );
        assert_eq!(
            next_link(r#"<https://x/a?page=1>; rel="prev", <https://x/a?page=1>; rel="first""#),
            None
        );
        assert_eq!(next_link("garbage"), None);
    }

    #[test]
    fn the_token_is_not_in_debug_output() {
        let t = Token::new("ghp_secretvalue\n");
        assert_eq!(t.text(), "ghp_secretvalue");
        assert!(!format!("{t:?}").contains("secret"));
    }

    #[test]
    fn origins_and_shown_urls() {
        assert_eq!(
            origin("https://api.github.com/repos/a/b").as_deref(),
            Some("https://api.github.com")
        );
        assert_eq!(
            origin("http://127.0.0.1:8080/x").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(origin("/relative"), None);
        assert_eq!(shown("https://h/p?per_page=100"), "https://h/p");
    }
}
