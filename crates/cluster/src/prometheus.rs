//! Prometheus's HTTP API (`POST /api/v1/query`, and `query_range` for `gpuctl report`), for
//! doctor's metric findings: runs the core's [`gpuctl_day2::metrics::plan`] at one evaluation time and hands the samples to
//! [`gpuctl_day2::metrics::findings`].
//!
//! Bounded: every request has a connect and a total timeout, and a response is read up to
//! [`PrometheusConfig::max_response_bytes`]. Errors name the URL (without credentials); the bearer
//! token is never printed (its `Debug` is redacted, its header marked sensitive) and never follows
//! a redirect (redirects are refused).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::stream::{self, StreamExt, TryStreamExt};
use gpuctl_day2::metrics::{self, Finding, MetricSettings, Query, Results, Sample};
use gpuctl_model::profiles::dcgm::DcgmFacts;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, USER_AGENT};
use http::{Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde::Deserialize;

/// Default total time one query may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default largest response read: a 1h window over a few thousand GPUs fits well inside.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 << 20;
/// How many queries run at once.
const PARALLEL_QUERIES: usize = 4;

/// A bearer token: never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token (surrounding whitespace, such as a file's final newline, is dropped).
    pub fn new(text: &str) -> Token {
        Token(text.trim().to_owned())
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Where Prometheus is and how to talk to it. Its `Debug` masks the URL's user info and the token.
#[derive(Clone)]
pub struct PrometheusConfig {
    /// Base URL (`https://prometheus.monitoring:9090`, a path prefix allowed).
    pub url: String,
    /// Bearer token, if the server wants one.
    pub token: Option<Token>,
    /// PEM file of CA certificates trusted besides the system's.
    pub ca_file: Option<PathBuf>,
    /// Total time per query (connect included).
    pub timeout: Duration,
    /// Largest response body read.
    pub max_response_bytes: usize,
}

impl std::fmt::Debug for PrometheusConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusConfig")
            .field("url", &mask_raw(&self.url))
            .field("token", &self.token)
            .field("ca_file", &self.ca_file)
            .field("timeout", &self.timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl PrometheusConfig {
    /// A config with the default timeout and response bound.
    pub fn new(url: impl Into<String>) -> PrometheusConfig {
        PrometheusConfig {
            url: url.into(),
            token: None,
            ca_file: None,
            timeout: DEFAULT_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// Why Prometheus could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    /// The URL does not parse or is not http(s).
    #[error(
        "--prometheus `{url}` is not a usable URL: {reason} (example: http://prometheus.monitoring:9090)"
    )]
    BadUrl {
        /// The URL as given (credentials masked).
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The CA file cannot be read or holds no certificate.
    #[error("cannot use the CA file `{path}`: {reason}")]
    CaFile {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The HTTP client cannot be built.
    #[error("cannot set up the HTTP client for {url}: {reason}")]
    Client {
        /// The URL (credentials masked).
        url: String,
        /// What failed.
        reason: String,
    },
    /// No answer: connection refused, TLS failure, timeout.
    #[error("cannot reach Prometheus at {url}: {reason}")]
    Unreachable {
        /// The URL (credentials masked).
        url: String,
        /// What failed.
        reason: String,
    },
    /// An HTTP status other than 200.
    #[error("Prometheus at {url} answered HTTP {status}{hint}: {body}")]
    Status {
        /// The URL (credentials masked).
        url: String,
        /// The status code.
        status: u16,
        /// What to do for 401/403/3xx.
        hint: &'static str,
        /// The start of the body.
        body: String,
    },
    /// The body is larger than the bound.
    #[error(
        "Prometheus at {url} sent more than {limit} bytes for one query; narrow the window (--idle-window) or raise the limit"
    )]
    TooLarge {
        /// The URL (credentials masked).
        url: String,
        /// The bound in bytes.
        limit: usize,
    },
    /// The query was refused (`status: error`).
    #[error("Prometheus at {url} refused the query `{query}`: {error_type}: {error}")]
    Api {
        /// The URL (credentials masked).
        url: String,
        /// The PromQL.
        query: String,
        /// `bad_data`, `execution`, ...
        error_type: String,
        /// The message.
        error: String,
    },
    /// The body is not Prometheus's JSON.
    #[error("the answer of {url} is not a Prometheus API response: {reason}")]
    Decode {
        /// The URL (credentials masked).
        url: String,
        /// What is wrong.
        reason: String,
    },
}

/// A connected client (nothing is sent until a query).
///
/// Built on the HTTP stack kube already links (hyper, hyper-util's client, hyper-rustls with ring),
/// so gpuctl carries one HTTP client and one TLS stack (issue 27: reqwest brought a second client
/// and the url/IDNA/ICU crates for a POST to one fixed path).
pub struct Prometheus {
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: Uri,
    range_endpoint: Uri,
    shown: String,
    auth: Option<HeaderValue>,
    timeout: Duration,
    max_response_bytes: usize,
}

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prometheus")
            .field("url", &self.shown)
            .field("token", &self.auth.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

fn mask_raw(url: &str) -> String {
    match url.split_once('@') {
        Some((before, after)) if before.contains("://") => {
            let scheme = before.split("://").next().unwrap_or("");
            format!("{scheme}://***@{after}")
        }
        _ => url.to_owned(),
    }
}

/// A checked base URL: `scheme://host[:port]/path/`, the user info (if any) apart.
struct BaseUrl {
    scheme: String,
    /// `host[:port]`, without user info.
    host_port: String,
    /// Ends with `/`.
    path: String,
    /// `user:password` from the URL, sent as HTTP basic authentication when no token is given.
    userinfo: Option<String>,
}

impl BaseUrl {
    fn parse(raw: &str) -> Result<BaseUrl, String> {
        let raw = raw.trim();
        if raw.contains('#') {
            return Err("it must not have a query or a fragment".to_owned());
        }
        let uri: Uri = raw
            .parse()
            .map_err(|e: http::uri::InvalidUri| e.to_string())?;
        let scheme = match uri.scheme_str() {
            Some(s @ ("http" | "https")) => s.to_owned(),
            _ => return Err("the scheme must be http or https".to_owned()),
        };
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
        let (userinfo, host_port) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_owned()), h.to_owned()),
            None => (None, authority.to_owned()),
        };
        if uri.host().is_none_or(str::is_empty) || host_port.is_empty() {
            return Err("no host".to_owned());
        }
        if uri.query().is_some() {
            return Err("it must not have a query or a fragment".to_owned());
        }
        let mut path = uri.path().to_owned();
        if !path.ends_with('/') {
            path.push('/');
        }
        Ok(BaseUrl {
            scheme,
            host_port,
            path,
            userinfo,
        })
    }

    /// How messages show it: user info masked, no trailing slash.
    fn shown(&self) -> String {
        let who = if self.userinfo.is_some() { "***@" } else { "" };
        let url = format!("{}://{who}{}{}", self.scheme, self.host_port, self.path);
        url.trim_end_matches('/').to_owned()
    }

    fn join(&self, rel: &str) -> Result<Uri, String> {
        format!("{}://{}{}{rel}", self.scheme, self.host_port, self.path)
            .parse()
            .map_err(|e: http::uri::InvalidUri| e.to_string())
    }
}

/// The system's trusted roots plus the PEM certificates of `ca_file`.
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, PrometheusError> {
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are skipped: a private CA can still come from the file.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = ca_file {
        let ca_err = |reason: String| PrometheusError::CaFile {
            path: path.display().to_string(),
            reason,
        };
        let pem = read_bounded(path, 1 << 20).map_err(ca_err)?;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .map_err(|e| ca_err(format!("not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(ca_err("it holds no certificate".to_owned()));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| ca_err(format!("not a usable CA certificate: {e}")))?;
        }
    }
    // ring: the provider kube already links (one TLS stack, no aws-lc).
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| PrometheusError::Client {
            url: String::new(),
            reason: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

impl Prometheus {
    /// Checks the config and builds the client.
    pub fn new(cfg: &PrometheusConfig) -> Result<Prometheus, PrometheusError> {
        let bad = |reason: String| PrometheusError::BadUrl {
            url: mask_raw(&cfg.url),
            reason,
        };
        let base = BaseUrl::parse(&cfg.url).map_err(bad)?;
        let endpoint = base.join("api/v1/query").map_err(bad)?;
        let range_endpoint = base.join("api/v1/query_range").map_err(bad)?;
        let shown_url = base.shown();

        let tls = tls_config(cfg.ca_file.as_deref()).map_err(|e| match e {
            PrometheusError::Client { reason, .. } => PrometheusError::Client {
                url: shown_url.clone(),
                reason,
            },
            other => other,
        })?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(cfg.timeout.min(Duration::from_secs(10))));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        // Redirects are never followed (the client has no such policy): a token must not travel on.
        let client = Client::builder(TokioExecutor::new()).build(connector);

        let header = |value: String| {
            let mut v = HeaderValue::from_str(&value).map_err(|_| PrometheusError::Client {
                url: shown_url.clone(),
                reason: "the credentials hold characters an HTTP header cannot carry".to_owned(),
            })?;
            v.set_sensitive(true);
            Ok::<_, PrometheusError>(v)
        };
        let auth = match (&cfg.token, &base.userinfo) {
            (Some(Token(t)), _) => Some(header(format!("Bearer {t}"))?),
            (None, Some(userinfo)) => {
                use base64::Engine as _;
                let user_pass = percent_decoded(userinfo);
                let encoded = base64::engine::general_purpose::STANDARD.encode(user_pass);
                Some(header(format!("Basic {encoded}"))?)
            }
            (None, None) => None,
        };
        Ok(Prometheus {
            http: client,
            endpoint,
            range_endpoint,
            shown: shown_url,
            auth,
            timeout: cfg.timeout,
            max_response_bytes: cfg.max_response_bytes,
        })
    }

    /// The base URL as messages show it.
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// One instant query at `time` (unix seconds).
    pub async fn query(&self, promql: &str, time: f64) -> Result<Vec<Sample>, PrometheusError> {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", promql)
            .append_pair("time", &format!("{time:.3}"))
            .finish();
        let (status, bytes) = self.post(&self.endpoint, body).await?;
        parse_response(&bytes, promql).map_err(|e| self.parse_error(e, promql, status, &bytes))
    }

    /// One range query: points at `start`, `start + step`, ... up to `end` (unix seconds), as
    /// Prometheus's `query_range` answers it (a matrix; `NaN`, `+Inf` kept as floats).
    pub async fn query_range(
        &self,
        promql: &str,
        start: i64,
        end: i64,
        step: i64,
    ) -> Result<Vec<RangeSeries>, PrometheusError> {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", promql)
            .append_pair("start", &start.to_string())
            .append_pair("end", &end.to_string())
            .append_pair("step", &step.to_string())
            .finish();
        let (status, bytes) = self.post(&self.range_endpoint, body).await?;
        parse_range_response(&bytes).map_err(|e| self.parse_error(e, promql, status, &bytes))
    }

    fn parse_error(
        &self,
        e: ParseError,
        promql: &str,
        status: http::StatusCode,
        bytes: &[u8],
    ) -> PrometheusError {
        match e {
            ParseError::Api { error_type, error } => PrometheusError::Api {
                url: self.shown.clone(),
                query: promql.to_owned(),
                error_type,
                error,
            },
            ParseError::Decode(reason) => PrometheusError::Decode {
                url: self.shown.clone(),
                reason: if status.is_success() {
                    reason
                } else {
                    format!("HTTP {}: {}", status.as_u16(), excerpt(bytes))
                },
            },
        }
    }

    /// POSTs a form to `endpoint`: bounded in time and size, credentials attached, and any status
    /// but Prometheus's own answers (200, 400, 422, 503) turned into an error.
    async fn post(
        &self,
        endpoint: &Uri,
        body: String,
    ) -> Result<(http::StatusCode, Vec<u8>), PrometheusError> {
        let mut req = Request::post(endpoint.clone())
            .header(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-www-form-urlencoded"),
            )
            .header(
                USER_AGENT,
                HeaderValue::from_static(concat!("gpuctl/", env!("CARGO_PKG_VERSION"))),
            );
        if let Some(auth) = &self.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| PrometheusError::Client {
                url: self.shown.clone(),
                reason: e.to_string(),
            })?;
        let unreachable = |reason: String| PrometheusError::Unreachable {
            url: self.shown.clone(),
            reason,
        };
        let exchange = async {
            let resp = self
                .http
                .request(req)
                .await
                .map_err(|e| unreachable(error_chain(&e)))?;
            let status = resp.status();
            let mut body = resp.into_body();
            let mut bytes = Vec::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| unreachable(error_chain(&e)))?;
                if let Some(chunk) = frame.data_ref() {
                    if bytes.len() + chunk.len() > self.max_response_bytes {
                        return Err(PrometheusError::TooLarge {
                            url: self.shown.clone(),
                            limit: self.max_response_bytes,
                        });
                    }
                    bytes.extend_from_slice(chunk);
                }
            }
            Ok((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| unreachable("timed out".to_owned()))??;
        // Prometheus answers 400/422/503 with its JSON error body; anything else non-200 is not it.
        if !status.is_success() && !matches!(status.as_u16(), 400 | 422 | 503) {
            let hint = match status.as_u16() {
                401 | 403 => {
                    " (check the bearer token: --prometheus-token-file or GPUCTL_PROMETHEUS_TOKEN)"
                }
                300..=399 => " (a redirect: give the final URL to --prometheus)",
                404 => " (is this Prometheus's base URL? gpuctl adds /api/v1/query)",
                _ => "",
            };
            return Err(PrometheusError::Status {
                url: self.shown.clone(),
                status: status.as_u16(),
                hint,
                body: excerpt(&bytes),
            });
        }
        Ok((status, bytes))
    }

    /// Runs every query of the plan at `time` (a few at once) and collects the answers.
    pub async fn run(&self, queries: &[Query], time: f64) -> Result<Results, PrometheusError> {
        let answers: Vec<(usize, Vec<Sample>)> = stream::iter(queries.iter().enumerate())
            .map(|(i, q)| async move { self.query(&q.promql, time).await.map(|s| (i, s)) })
            .buffer_unordered(PARALLEL_QUERIES)
            .try_collect()
            .await?;
        let mut results = Results {
            at: time,
            samples: BTreeMap::new(),
        };
        for (i, samples) in answers {
            let q = &queries[i];
            results.samples.insert((q.check, q.part), samples);
        }
        Ok(results)
    }
}

/// What [`metric_findings`] did, for the caller's report.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRun {
    /// The findings, sorted.
    pub findings: Vec<Finding>,
    /// Evaluation time, unix seconds.
    pub at: f64,
    /// How many queries were sent.
    pub queries: usize,
    /// How many samples came back.
    pub samples: usize,
}

/// Doctor's metric findings: plans the queries, runs them against Prometheus at `at` (now when
/// `None`), and judges the answers.
pub async fn metric_findings(
    cfg: &PrometheusConfig,
    facts: &DcgmFacts,
    settings: &MetricSettings,
    at: Option<f64>,
) -> Result<MetricRun, PrometheusError> {
    let prom = Prometheus::new(cfg)?;
    let time = at.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    });
    let queries = metrics::plan(facts, settings);
    let results = prom.run(&queries, time).await?;
    let samples = results.samples.values().map(Vec::len).sum();
    Ok(MetricRun {
        findings: metrics::findings(facts, settings, &results),
        at: time,
        queries: queries.len(),
        samples,
    })
}

/// `user:password` from a URL, percent-decoded as RFC 3986 writes it (`p%40ss` is `p@ss`).
fn percent_decoded(userinfo: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(userinfo).collect()
}

fn read_bounded(path: &std::path::Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_owned());
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!("larger than {limit} bytes"));
    }
    Ok(bytes)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]);
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    one_line.trim().to_owned()
}

#[derive(Debug, PartialEq)]
enum ParseError {
    Api { error_type: String, error: String },
    Decode(String),
}

#[derive(Deserialize)]
struct ApiResponse {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum ApiData {
    Vector(Vec<VectorSample>),
    Scalar((f64, String)),
    // Read only to name them in the error: instant queries never return them.
    Matrix(#[allow(dead_code)] serde::de::IgnoredAny),
    String(#[allow(dead_code)] serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct VectorSample {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// One series of a range query's answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RangeSeries {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// (unix seconds, value) in time order.
    pub points: Vec<(f64, f64)>,
}

#[derive(Deserialize)]
struct MatrixSeries {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum RangeData {
    Matrix(Vec<MatrixSeries>),
    // Read only to name them in the error: range queries of vectors give matrices.
    Vector(#[allow(dead_code)] serde::de::IgnoredAny),
    Scalar(#[allow(dead_code)] serde::de::IgnoredAny),
    String(#[allow(dead_code)] serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct RangeResponse {
    status: String,
    #[serde(default)]
    data: Option<RangeData>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

/// Prometheus's JSON for a range query -> series.
fn parse_range_response(bytes: &[u8]) -> Result<Vec<RangeSeries>, ParseError> {
    let resp: RangeResponse =
        serde_json::from_slice(bytes).map_err(|e| ParseError::Decode(e.to_string()))?;
    if resp.status != "success" {
        return Err(ParseError::Api {
            error_type: resp.error_type.unwrap_or_else(|| "error".to_owned()),
            error: resp.error.unwrap_or_else(|| "no message".to_owned()),
        });
    }
    match resp.data {
        Some(RangeData::Matrix(m)) => m
            .into_iter()
            .map(|s| {
                let points = s
                    .values
                    .into_iter()
                    .map(|(t, v)| {
                        v.parse::<f64>().map(|v| (t, v)).map_err(|_| {
                            ParseError::Decode(format!("sample value `{v}` is not a number"))
                        })
                    })
                    .collect::<Result<_, _>>()?;
                Ok(RangeSeries {
                    labels: s.metric,
                    points,
                })
            })
            .collect(),
        Some(_) => Err(ParseError::Decode(
            "a range query did not give a matrix".to_owned(),
        )),
        None => Err(ParseError::Decode("no `data`".to_owned())),
    }
}

/// Prometheus's JSON for an instant query -> samples (`NaN`, `+Inf` are kept as floats).
fn parse_response(bytes: &[u8], query: &str) -> Result<Vec<Sample>, ParseError> {
    let resp: ApiResponse =
        serde_json::from_slice(bytes).map_err(|e| ParseError::Decode(e.to_string()))?;
    if resp.status != "success" {
        return Err(ParseError::Api {
            error_type: resp.error_type.unwrap_or_else(|| "error".to_owned()),
            error: resp.error.unwrap_or_else(|| "no message".to_owned()),
        });
    }
    let value = |s: &str| -> Result<f64, ParseError> {
        s.parse::<f64>()
            .map_err(|_| ParseError::Decode(format!("sample value `{s}` is not a number")))
    };
    match resp.data {
        Some(ApiData::Vector(v)) => v
            .into_iter()
            .map(|s| {
                Ok(Sample {
                    labels: s.metric,
                    value: value(&s.value.1)?,
                    timestamp: s.value.0,
                })
            })
            .collect(),
        Some(ApiData::Scalar((t, v))) => Ok(vec![Sample {
            labels: BTreeMap::new(),
            value: value(&v)?,
            timestamp: t,
        }]),
        Some(ApiData::Matrix(_) | ApiData::String(_)) => Err(ParseError::Decode(format!(
            "`{query}` did not give an instant vector"
        ))),
        None => Err(ParseError::Decode("no `data`".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_scalar_and_errors() {
        let v = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"gpu":"0","UUID":"GPU-1"},"value":[1796112000.5,"79"]},
            {"metric":{},"value":[1796112000,"NaN"]}]}}"#;
        let s = parse_response(v, "q").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].labels["UUID"], "GPU-1");
        assert_eq!(s[0].value, 79.0);
        assert_eq!(s[0].timestamp, 1796112000.5);
        assert!(s[1].value.is_nan());
        let sc = br#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#;
        assert_eq!(parse_response(sc, "q").unwrap()[0].value, 2.0);
        let err = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(
            parse_response(err, "q").unwrap_err(),
            ParseError::Api {
                error_type: "bad_data".into(),
                error: "parse error".into()
            }
        );
        for bad in [
            &b"<html>"[..],
            br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#,
            br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
        ] {
            assert!(matches!(parse_response(bad, "q"), Err(ParseError::Decode(_))));
        }
    }

    #[test]
    fn range_answers_are_matrices() {
        let m = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"namespace":"a","pod":"p"},"values":[[1796112000,"1"],[1796115600,"0.5"]]},
            {"metric":{},"values":[]}]}}"#;
        let s = parse_range_response(m).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].labels["pod"], "p");
        assert_eq!(s[0].points, vec![(1796112000.0, 1.0), (1796115600.0, 0.5)]);
        let err = br#"{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points per timeseries"}"#;
        assert!(matches!(
            parse_range_response(err),
            Err(ParseError::Api { .. })
        ));
        for bad in [
            &b"<html>"[..],
            br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
            br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"x"]]}]}}"#,
        ] {
            assert!(matches!(parse_range_response(bad), Err(ParseError::Decode(_))));
        }
    }

    #[test]
    fn urls_are_checked_and_credentials_never_shown() {
        for bad in ["", "prometheus:9090", "ftp://x", "http://", "http://h/?a=b"] {
            assert!(
                matches!(
                    Prometheus::new(&PrometheusConfig::new(bad)),
                    Err(PrometheusError::BadUrl { .. })
                ),
                "{bad}"
            );
        }
        let p = Prometheus::new(&PrometheusConfig::new("http://user:s3cret@h:9090/prom")).unwrap();
        assert_eq!(p.url(), "http://***@h:9090/prom");
        assert_eq!(p.endpoint.path(), "/prom/api/v1/query");
        assert_eq!(p.range_endpoint.path(), "/prom/api/v1/query_range");
        let e = Prometheus::new(&PrometheusConfig::new("gopher://user:s3cret@h")).unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let mut cfg = PrometheusConfig::new("http://h");
        cfg.token = Some(Token::new("s3cret\n"));
        assert!(!format!("{cfg:?}").contains("s3cret"));
        let cfg = PrometheusConfig::new("https://user:s3cret@h:9090");
        assert!(!format!("{cfg:?}").contains("s3cret"), "{cfg:?}");
    }

    #[test]
    fn ca_file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ca.pem");
        std::fs::write(&f, "not a certificate").unwrap();
        let mut cfg = PrometheusConfig::new("https://h");
        cfg.ca_file = Some(f.clone());
        let e = Prometheus::new(&cfg).expect_err("refused");
        assert!(e.to_string().contains("ca.pem"), "{e}");
        cfg.ca_file = Some(dir.path().to_path_buf());
        assert!(matches!(
            Prometheus::new(&cfg),
            Err(PrometheusError::CaFile { .. })
        ));
    }
}
