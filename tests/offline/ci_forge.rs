//! `gpuctl ci github|gitlab` against a local stand-in of GitHub's and GitLab's REST APIs
//! (tests/support/forge.rs, state in memory): one comment per PR and key, edited on the next
//! push; the check run's conclusion follows the exit code, annotations 50 a request; a 403
//! secondary rate limit and a 502 retried; a PR with 200 findings stays under 65,536 characters;
//! the token reaches no comment, check run or output.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::support::forge::{COMMENT_LIMIT, Forge, Kind, PAGE};
use crate::support::gpuctl::{Gpuctl, TODAY, gpuctl, text};

const TOKEN: &str = "ghs_Sup3rSecretT0kenValue42";
const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const BLUEPRINT: &str = "blueprints/dgx-h100-training.yaml";

/// `gpuctl plan BLUEPRINT --offline -o json` into `dir/plan.json`, with its exit code.
fn offline_plan(dir: &Path) -> (PathBuf, i32) {
    let o = gpuctl(&["plan", BLUEPRINT, "--offline", "-o", "json"]);
    let code = o.status.code().expect("exit code");
    assert!(code == 0, "{}", text(&o));
    let path = dir.join("plan.json");
    std::fs::write(&path, &o.stdout).unwrap();
    (path, code)
}

/// The same plan with `n` long policy-style error findings, one of which quotes `secret`.
fn with_findings(plan: &Path, n: usize, secret: &str) -> PathBuf {
    let mut v: Value = serde_json::from_slice(&std::fs::read(plan).unwrap()).unwrap();
    let findings = v["findings"].as_array_mut().unwrap();
    for i in 0..n {
        let quoted = if i == 7 { secret } else { "" };
        findings.push(json!({
            "id": "GPU500",
            "severity": "error",
            "message": format!(
                "tenant team-{i} asks for more H100s than the dev quota allows {quoted} {} (data.main.deny) at {BLUEPRINT}:{}",
                "and this message is long on purpose, as org policies explain themselves at length; ".repeat(6),
                10 + i
            ),
        }));
    }
    let path = plan.with_file_name("plan-findings.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    path
}

fn ci_github(forge: &Forge, plan: &Path, code: i32, extra: &[&str]) -> Output {
    Gpuctl::new(["ci", "github", "--plan"])
        .arg(plan)
        .args([
            "--exit-code",
            &code.to_string(),
            "--key",
            "dgx",
            "--blueprint",
            BLUEPRINT,
        ])
        .args(["--repository", "acme/clusters", "--pr", "7", "--sha", SHA])
        .args([
            "--api-url",
            &forge.url,
            "--artifact-url",
            "https://ci.example/run/1",
        ])
        .args(extra)
        .env("GITHUB_TOKEN", TOKEN)
        .today(TODAY)
        .no_color()
        .output()
}

fn ours(forge: &Forge) -> Vec<crate::support::forge::Comment> {
    let s = forge.state.lock().unwrap();
    s.comments
        .iter()
        .filter(|c| c.body.contains("<!-- gpuctl:plan:dgx -->"))
        .cloned()
        .collect()
}

#[test]
fn github_second_run_edits_the_first_comment_and_the_check_follows_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, code) = offline_plan(dir.path());
    let forge = Forge::start(Kind::Github, TOKEN);
    // 65 comments by people first: the sticky one lands on the third page of 30.
    forge.seed(2 * PAGE + 5, "alice");

    let first = ci_github(&forge, &plan, code, &[]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let mine = ours(&forge);
    assert_eq!(mine.len(), 1, "one comment after the first push");
    assert!(mine[0].body.contains("**gpuctl: passed** (exit 0)"));
    let summary_at = mine[0]
        .body
        .find("| create |")
        .or_else(|| mine[0].body.find("create"));
    assert!(
        summary_at.is_some(),
        "the summary comes with the plan:\n{}",
        mine[0].body
    );

    // The next push fails the gate (a later plan with an error): the same comment is edited.
    let failing = with_findings(&plan, 3, "");
    let second = ci_github(&forge, &failing, 1, &[]);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let again = ours(&forge);
    assert_eq!(again.len(), 1, "the second run edited, not added");
    assert_eq!(again[0].id, mine[0].id);
    assert!(again[0].body.contains("**gpuctl: failed** (exit 1)"));
    let s = forge.state.lock().unwrap();
    assert_eq!(s.comments.len(), 2 * PAGE + 5 + 1);
    let pages = s
        .seen
        .iter()
        .filter(|r| r.method == "GET" && r.target.contains("page=3"))
        .count();
    assert!(pages >= 1, "the client followed the Link header to page 3");
    assert!(
        s.seen.iter().any(|r| r.method == "PATCH"
            && r.target
                .ends_with(&format!("/issues/comments/{}", mine[0].id))),
        "edited with PATCH"
    );
    // Two check runs (one per push) on the PR's head commit: success, then failure.
    let conclusions: Vec<Option<&str>> = s.checks.iter().map(|c| c.conclusion.as_deref()).collect();
    assert_eq!(conclusions, [Some("success"), Some("failure")]);
    assert!(
        s.checks
            .iter()
            .all(|c| c.head_sha == SHA && c.status == "completed")
    );
    let annotated: Vec<(&str, u64)> = s.checks[1]
        .annotations
        .iter()
        .map(|a| {
            (
                a["path"].as_str().unwrap(),
                a["start_line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        annotated,
        [(BLUEPRINT, 10), (BLUEPRINT, 11), (BLUEPRINT, 12)]
    );
    assert!(
        s.checks[1]
            .annotations
            .iter()
            .all(|a| a["annotation_level"] == "failure")
    );
}

#[test]
fn github_retries_a_secondary_rate_limit_and_a_server_error() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, code) = offline_plan(dir.path());
    let forge = Forge::start(Kind::Github, TOKEN);
    forge.fail_once("GET", "/repos/acme/clusters/issues/7/comments", 502);
    forge.fail_once("POST", "/repos/acme/clusters/issues/7/comments", 403);
    let o = ci_github(&forge, &plan, code, &["--no-check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let s = forge.state.lock().unwrap();
    let statuses: Vec<(String, u16)> = s
        .seen
        .iter()
        .map(|r| (r.method.clone(), r.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("GET".to_owned(), 502),
            ("GET".to_owned(), 200),
            ("POST".to_owned(), 403),
            ("POST".to_owned(), 201)
        ]
    );
    assert_eq!(s.comments.len(), 1);
    assert!(s.checks.is_empty(), "--no-check posts no check run");
}

#[test]
fn github_a_pr_with_200_findings_stays_under_the_limit_and_no_secret_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, _) = offline_plan(dir.path());
    let big = with_findings(&plan, 200, TOKEN);
    let log = dir.path().join("plan.log");
    std::fs::write(&log, format!("error: something with {TOKEN} in it\n")).unwrap();
    let forge = Forge::start(Kind::Github, TOKEN);
    let o = ci_github(&forge, &big, 1, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let s = forge.state.lock().unwrap();
    assert_eq!(s.comments.len(), 1, "{}", text(&o));
    let body = &s.comments[0].body;
    let chars = body.chars().count();
    assert!(chars <= COMMENT_LIMIT, "{chars} characters");
    assert!(
        chars > 30_000,
        "the comment holds the findings, not a stub: {chars}"
    );
    assert!(
        body.contains("https://ci.example/run/1"),
        "points to the full plan"
    );
    // 200 annotations, sent 50 a request (the stand-in refuses more), all on the check run.
    assert_eq!(s.checks.len(), 1);
    assert_eq!(s.checks[0].annotations.len(), 200);
    let requests = s
        .seen
        .iter()
        .filter(|r| r.target.contains("/check-runs"))
        .count();
    assert_eq!(
        requests, 5,
        "create with 50, three updates of 50, the conclusion"
    );
    // The token: in no comment, check run, annotation or output; only in the auth header.
    assert!(!body.contains(TOKEN));
    assert!(body.contains("(sensitive)"), "the quoted token was masked");
    assert!(!s.checks[0].summary.contains(TOKEN));
    assert!(
        s.checks[0]
            .annotations
            .iter()
            .all(|a| !a.to_string().contains(TOKEN))
    );
    assert!(
        s.seen
            .iter()
            .all(|r| !r.body.contains(TOKEN) && !r.target.contains(TOKEN))
    );
    assert!(!text(&o).contains(TOKEN));
}

#[test]
fn github_a_wrong_token_fails_without_printing_it() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, code) = offline_plan(dir.path());
    let forge = Forge::start(Kind::Github, "another-token");
    let o = ci_github(&forge, &plan, code, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("HTTP 401") && err.contains("token"), "{err}");
    assert!(!err.contains(TOKEN));
    let unset = Gpuctl::new(["ci", "github", "--plan"])
        .arg(&plan)
        .args([
            "--exit-code",
            "0",
            "--repository",
            "a/b",
            "--pr",
            "1",
            "--sha",
            SHA,
        ])
        .args([
            "--api-url",
            &forge.url,
            "--token-env",
            "GPUCTL_TEST_NO_SUCH_TOKEN",
        ])
        .output();
    assert_eq!(unset.status.code(), Some(64), "{}", text(&unset));
    assert!(String::from_utf8_lossy(&unset.stderr).contains("GPUCTL_TEST_NO_SUCH_TOKEN"));
}

#[test]
fn github_the_pull_request_comes_from_the_event_file() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, code) = offline_plan(dir.path());
    let event = dir.path().join("event.json");
    let payload = json!({"pull_request": {"number": 12, "head": {"sha": SHA}}});
    std::fs::write(&event, payload.to_string()).unwrap();
    let forge = Forge::start(Kind::Github, TOKEN);
    let o = Gpuctl::new(["ci", "github", "--plan"])
        .arg(&plan)
        .args([
            "--exit-code",
            &code.to_string(),
            "--repository",
            "acme/clusters",
        ])
        .args(["--api-url", &forge.url, "--event"])
        .arg(&event)
        .env("GITHUB_TOKEN", TOKEN)
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let s = forge.state.lock().unwrap();
    assert!(s.seen.iter().any(|r| {
        r.target
            .starts_with("/repos/acme/clusters/issues/12/comments")
    }));
    assert_eq!(s.checks[0].head_sha, SHA);
}

#[test]
fn a_failed_plan_without_json_still_gets_a_comment_with_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("plan.json");
    std::fs::write(&empty, "").unwrap();
    let log = dir.path().join("plan.log");
    std::fs::write(
        &log,
        "\u{1b}[31merror\u{1b}[0m: GPU012 at spec.tenants[0].quota (line 41:9)\n",
    )
    .unwrap();
    let out = dir.path().join("comment.md");
    let o = Gpuctl::new(["ci", "github", "--plan"])
        .arg(&empty)
        .args(["--exit-code", "1", "--log"])
        .arg(&log)
        .arg("--dry-run")
        .arg(&out)
        .output();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let body = std::fs::read_to_string(&out).unwrap();
    assert!(body.contains("gpuctl made no plan"), "{body}");
    assert!(
        body.contains("error: GPU012 at spec.tenants[0].quota (line 41:9)"),
        "{body}"
    );
    assert!(!body.contains('\u{1b}'), "colours removed");
}

#[test]
fn fleet_plan_json_gives_a_summary_table_first() {
    let dir = tempfile::tempdir().unwrap();
    let o = Gpuctl::new([
        "fleet",
        "plan",
        "blueprints/fleet/fleet.yaml",
        "--offline",
        "-o",
        "json",
    ])
    .today(TODAY)
    .output();
    let code = o.status.code().unwrap();
    let plan = dir.path().join("fleet.json");
    std::fs::write(&plan, &o.stdout).unwrap();
    let out = dir.path().join("comment.md");
    let run = Gpuctl::new(["ci", "github", "--plan"])
        .arg(&plan)
        .args([
            "--exit-code",
            &code.to_string(),
            "--key",
            "fleet",
            "--dry-run",
        ])
        .arg(&out)
        .output();
    assert!(run.status.code().is_some(), "{}", text(&run));
    let body = std::fs::read_to_string(&out).unwrap();
    let table = body
        .find("| cluster | wave | source |")
        .expect("summary table");
    let details = body.find("<details>").expect("per-cluster details");
    assert!(table < details, "the table comes first");
    assert!(body.contains("offline (no cluster state: every object is a create)"));
    assert!(body.starts_with("<!-- gpuctl:plan:fleet -->"));
}

fn ci_gitlab(forge: &Forge, plan: &Path, code: i32) -> Output {
    Gpuctl::new(["ci", "gitlab", "--plan"])
        .arg(plan)
        .args(["--exit-code", &code.to_string(), "--key", "dgx"])
        .args([
            "--api-url",
            &forge.url,
            "--project",
            "acme/clusters",
            "--merge-request",
            "5",
        ])
        .env("GPUCTL_GITLAB_TOKEN", TOKEN)
        .output()
}

#[test]
fn gitlab_second_run_edits_the_first_note() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, code) = offline_plan(dir.path());
    let forge = Forge::start(Kind::Gitlab, TOKEN);
    forge.seed(PAGE + 3, "bob");
    forge.fail_once(
        "GET",
        "/projects/acme%2Fclusters/merge_requests/5/notes",
        503,
    );
    let first = ci_gitlab(&forge, &plan, code);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let failing = with_findings(&plan, 2, TOKEN);
    let second = ci_gitlab(&forge, &failing, 1);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let mine = ours(&forge);
    assert_eq!(mine.len(), 1, "one note, edited");
    assert!(mine[0].body.contains("**gpuctl: failed** (exit 1)"));
    assert!(!mine[0].body.contains(TOKEN));
    let s = forge.state.lock().unwrap();
    assert!(s.seen.iter().any(|r| r.method == "PUT"));
    assert!(
        s.seen.iter().any(|r| r.target.contains("page=2")),
        "followed X-Next-Page"
    );
    assert_eq!(s.seen[0].status, 503, "the 503 was retried");
    assert!(s.seen.iter().all(|r| !r.body.contains(TOKEN)));
}
