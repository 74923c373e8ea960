//! A local stand-in of the parts of GitHub's and GitLab's REST APIs `gpuctl ci` uses, state in
//! memory: issue comments (list with `Link` pagination, create, update), check runs (create,
//! update, annotations appended), merge-request notes (list with `X-Next-Page` and `Link`
//! pagination, create, update). It enforces what the real ones refuse (GitHub's 65,536-character
//! comment body, 65,535-character check summary, 50 annotations per request; a wrong token) and
//! can answer one request of a kind with a 403 secondary rate limit or a 502 first.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One stored comment or note.
#[derive(Debug, Clone)]
pub struct Comment {
    /// Id.
    pub id: u64,
    /// Body.
    pub body: String,
    /// Author login.
    pub author: String,
    /// A GitLab system note.
    pub system: bool,
}

/// One check run.
#[derive(Debug, Clone, Default)]
pub struct CheckRun {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Commit.
    pub head_sha: String,
    /// Status.
    pub status: String,
    /// Conclusion.
    pub conclusion: Option<String>,
    /// Output title.
    pub title: String,
    /// Output summary.
    pub summary: String,
    /// Every annotation sent, in order.
    pub annotations: Vec<Value>,
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Method.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Every header line, lower-cased names.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: String,
    /// The status answered.
    pub status: u16,
}

/// The server's state.
#[derive(Debug, Default)]
pub struct State {
    /// Comments (GitHub) or notes (GitLab), in creation order.
    pub comments: Vec<Comment>,
    /// Check runs.
    pub checks: Vec<CheckRun>,
    /// Every request.
    pub seen: Vec<Seen>,
    /// Answer the next request whose method and path start with these with this status once.
    pub faults: Vec<(String, String, u16)>,
    next_id: u64,
}

/// Which API the server plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// GitHub: `authorization: Bearer TOKEN`, `/repos/o/r/...`.
    Github,
    /// GitLab: `private-token: TOKEN`, `/projects/ID/merge_requests/IID/notes`.
    Gitlab,
}

/// The running server.
pub struct Forge {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its state.
    pub state: Arc<Mutex<State>>,
}

/// How many comments a page holds (the server's choice, so a client must follow the links).
pub const PAGE: usize = 30;
/// GitHub's limits.
pub const COMMENT_LIMIT: usize = 65_536;
const SUMMARY_LIMIT: usize = 65_535;
const ANNOTATIONS_PER_REQUEST: usize = 50;

impl Forge {
    /// Starts a server answering as `kind`, accepting `token` only.
    pub fn start(kind: Kind, token: &str) -> Forge {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            next_id: 1000,
            ..State::default()
        }));
        let (st, base, token) = (state.clone(), url.clone(), token.to_owned());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (st, base, token) = (st.clone(), base.clone(), token.clone());
                std::thread::spawn(move || serve(stream, kind, &st, &base, &token));
            }
        });
        Forge { url, state }
    }

    /// Seeds `n` comments by someone else, and system notes on GitLab.
    pub fn seed(&self, n: usize, author: &str) {
        let mut s = self.state.lock().unwrap();
        for i in 0..n {
            let id = s.next();
            s.comments.push(Comment {
                id,
                body: format!("an unrelated comment {i}"),
                author: author.to_owned(),
                system: i % 7 == 3,
            });
        }
    }

    /// Answers the next request of `method` on a path starting with `prefix` with `status` once.
    pub fn fail_once(&self, method: &str, prefix: &str, status: u16) {
        self.state
            .lock()
            .unwrap()
            .faults
            .push((method.to_owned(), prefix.to_owned(), status));
    }
}

impl State {
    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

fn serve(stream: TcpStream, kind: Kind, state: &Mutex<State>, base: &str, token: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or_default().to_owned(),
            parts.next().unwrap_or_default().to_owned(),
        );
        let mut headers = Vec::new();
        let mut length = 0;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_owned());
                if k == "content-length" {
                    length = v.parse().unwrap_or(0);
                }
                headers.push((k, v));
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        let (status, extra, answer) = {
            let mut s = state.lock().unwrap();
            let r = answer(kind, &mut s, base, token, &method, &target, &headers, &body);
            s.seen.push(Seen {
                method: method.clone(),
                target: target.clone(),
                headers: headers.clone(),
                body,
                status: r.0,
            });
            r
        };
        let text = answer.to_string();
        let mut head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            text.len()
        );
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        if out.write_all(head.as_bytes()).is_err() || out.write_all(text.as_bytes()).is_err() {
            return;
        }
    }
}

type Answer = (u16, Vec<(String, String)>, Value);

fn error(status: u16, message: &str) -> Answer {
    (status, vec![], json!({ "message": message }))
}

#[allow(clippy::too_many_arguments)]
fn answer(
    kind: Kind,
    s: &mut State,
    base: &str,
    token: &str,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: &str,
) -> Answer {
    let (header, want) = match kind {
        Kind::Github => ("authorization", format!("Bearer {token}")),
        Kind::Gitlab => ("private-token", token.to_owned()),
    };
    if !headers.iter().any(|(k, v)| *k == header && *v == want) {
        return error(401, "Bad credentials");
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if let Some(i) = s
        .faults
        .iter()
        .position(|(m, p, _)| m == method && path.starts_with(p.as_str()))
    {
        let (_, _, status) = s.faults.remove(i);
        return match status {
            403 => (
                403,
                vec![("retry-after".into(), "1".into())],
                json!({"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}),
            ),
            st => error(st, "Server Error"),
        };
    }
    let input: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (kind, method, segs.as_slice()) {
        (Kind::Github, "GET", ["repos", _, _, "issues", _, "comments"])
        | (Kind::Gitlab, "GET", ["projects", _, "merge_requests", _, "notes"]) => {
            list(kind, s, base, path, query)
        }
        (Kind::Github, "POST", ["repos", _, _, "issues", _, "comments"])
        | (Kind::Gitlab, "POST", ["projects", _, "merge_requests", _, "notes"]) => {
            let Some(text) = input["body"].as_str() else {
                return error(422, "body is missing");
            };
            if kind == Kind::Github && text.chars().count() > COMMENT_LIMIT {
                return error(422, "Body is too long (maximum is 65536 characters)");
            }
            let id = s.next();
            s.comments.push(Comment {
                id,
                body: text.to_owned(),
                author: "gpuctl-bot".into(),
                system: false,
            });
            (201, vec![], json!({"id": id, "body": text}))
        }
        (Kind::Github, "PATCH", ["repos", _, _, "issues", "comments", id])
        | (Kind::Gitlab, "PUT", ["projects", _, "merge_requests", _, "notes", id]) => {
            let Some(text) = input["body"].as_str() else {
                return error(422, "body is missing");
            };
            if kind == Kind::Github && text.chars().count() > COMMENT_LIMIT {
                return error(422, "Body is too long (maximum is 65536 characters)");
            }
            let id: u64 = id.parse().unwrap_or(0);
            match s.comments.iter_mut().find(|c| c.id == id) {
                Some(c) if c.system => error(403, "system notes cannot be edited"),
                Some(c) => {
                    c.body = text.to_owned();
                    (200, vec![], json!({"id": id, "body": text}))
                }
                None => error(404, "Not Found"),
            }
        }
        (Kind::Github, "POST", ["repos", _, _, "check-runs"]) => {
            let id = s.next();
            let mut run = CheckRun {
                id,
                name: input["name"].as_str().unwrap_or_default().into(),
                head_sha: input["head_sha"].as_str().unwrap_or_default().into(),
                ..CheckRun::default()
            };
            if run.name.is_empty() || run.head_sha.is_empty() {
                return error(422, "name and head_sha are required");
            }
            if let Err(e) = update_run(&mut run, &input) {
                return e;
            }
            s.checks.push(run);
            (201, vec![], json!({"id": id}))
        }
        (Kind::Github, "PATCH", ["repos", _, _, "check-runs", id]) => {
            let id: u64 = id.parse().unwrap_or(0);
            let Some(run) = s.checks.iter_mut().find(|c| c.id == id) else {
                return error(404, "Not Found");
            };
            match update_run(run, &input) {
                Ok(()) => (200, vec![], json!({"id": id})),
                Err(e) => e,
            }
        }
        _ => error(404, "Not Found"),
    }
}

fn list(kind: Kind, s: &State, base: &str, path: &str, query: &str) -> Answer {
    let page: usize = query
        .split('&')
        .find_map(|p| p.strip_prefix("page="))
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
        .max(1);
    let items: Vec<Value> = s
        .comments
        .iter()
        .skip((page - 1) * PAGE)
        .take(PAGE)
        .map(|c| match kind {
            Kind::Github => json!({"id": c.id, "body": c.body, "user": {"login": c.author}}),
            Kind::Gitlab => json!({"id": c.id, "body": c.body, "system": c.system, "author": {"username": c.author}}),
        })
        .collect();
    let mut extra = Vec::new();
    if page * PAGE < s.comments.len() {
        let rest: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("page="))
            .collect();
        let next = format!("{base}{path}?{}&page={}", rest.join("&"), page + 1);
        match kind {
            // GitHub: Link only; GitLab: X-Next-Page (the client must handle it without Link).
            Kind::Github => extra.push(("link".into(), format!("<{next}>; rel=\"next\""))),
            Kind::Gitlab => extra.push(("x-next-page".into(), (page + 1).to_string())),
        }
    }
    (200, extra, Value::Array(items))
}

fn update_run(run: &mut CheckRun, input: &Value) -> Result<(), Answer> {
    if let Some(status) = input["status"].as_str() {
        run.status = status.to_owned();
    }
    if let Some(c) = input["conclusion"].as_str() {
        run.conclusion = Some(c.to_owned());
        run.status = "completed".into();
    }
    let output = &input["output"];
    if let Some(summary) = output["summary"].as_str() {
        if summary.chars().count() > SUMMARY_LIMIT {
            return Err(error(
                422,
                "output.summary is too long (maximum is 65535 characters)",
            ));
        }
        run.summary = summary.to_owned();
    }
    if let Some(title) = output["title"].as_str() {
        run.title = title.to_owned();
    }
    if let Some(a) = output["annotations"].as_array() {
        if a.len() > ANNOTATIONS_PER_REQUEST {
            return Err(error(422, "Only 50 annotations are allowed per request"));
        }
        for n in a {
            for k in [
                "path",
                "start_line",
                "end_line",
                "annotation_level",
                "message",
            ] {
                if n.get(k).is_none() {
                    return Err(error(422, &format!("annotation without {k}")));
                }
            }
        }
        run.annotations.extend(a.iter().cloned());
    }
    Ok(())
}
