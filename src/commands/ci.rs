//! `gpuctl ci github|gitlab`: a plan published where the change is reviewed: the plan JSON of
//! `gpuctl plan` or `fleet plan` as gpuctl's own Markdown in one sticky comment (or note), and on
//! GitHub a check run that fails with the plan, annotated at the blueprint's lines (docs/ci.md).

use std::path::Path;

use gpuctl_ci::body::{self, Comment};
use gpuctl_ci::github::{self, Annotation, Check, PullRequest};
use gpuctl_ci::gitlab::{self, MergeRequest};
use gpuctl_ci::{CiError, Client, Retry, Token, Upserted};
use gpuctl_fleet::plan::{ClusterPlan, Outcome, Source};
use gpuctl_model::input;
use gpuctl_model::located::Severity;
use gpuctl_plan::plan::{PLAN_FORMAT_VERSION, Plan, PlanFinding};
use serde_json::Value;

use super::{CommandError, CommandResult, runtime};
use crate::args::{CiCommand, CiCommonArgs, CiGithubArgs, CiGitlabArgs};
use crate::exit::ExitStatus;
use crate::output;

/// How much of the plan command's log the comment shows (its end).
const LOG_TAIL_CHARS: usize = 20_000;

/// Runs `gpuctl ci github` or `gpuctl ci gitlab`.
pub fn run(command: CiCommand) -> CommandResult {
    match command {
        CiCommand::Github(a) => github_run(&a),
        CiCommand::Gitlab(a) => gitlab_run(&a),
    }
}

/// The gate's status: the plan command's verdict once everything was posted.
fn verdict(exit_code: i32) -> ExitStatus {
    if body::passes(exit_code) {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    }
}

impl From<CiError> for CommandError {
    fn from(e: CiError) -> CommandError {
        CommandError::Failed(e.to_string())
    }
}

/// What was planned, read back from the JSON the plan command printed.
enum Planned {
    /// `gpuctl plan -o json`.
    One(Box<Plan>),
    /// `gpuctl fleet plan -o json`: the fleet, its clusters, the fleet-wide policy findings.
    Fleet(String, Vec<ClusterPlan>, Vec<PlanFinding>),
    /// No plan: the command failed before printing one.
    Nothing,
}

fn read_plan(path: Option<&Path>) -> Result<Planned, CommandError> {
    let Some(path) = path else {
        return Ok(Planned::Nothing);
    };
    let bytes = input::read(path, &input::SAVED_PLAN)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Planned::Nothing);
    }
    let bad = |why: String| {
        CommandError::Failed(format!(
            "{}: not the JSON of `gpuctl plan -o json` or `gpuctl fleet plan -o json`: {why}",
            path.display()
        ))
    };
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    if v["kind"] == "FleetPlan" {
        return fleet_from_json(&v).map_err(bad);
    }
    match v["format_version"].as_u64() {
        Some(n) if n == u64::from(PLAN_FORMAT_VERSION) => {}
        other => {
            return Err(bad(format!(
                "format_version {other:?}, this gpuctl reads {PLAN_FORMAT_VERSION}: use the same gpuctl for both steps"
            )));
        }
    }
    let plan: Plan = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
    Ok(Planned::One(Box::new(plan)))
}

fn fleet_from_json(v: &Value) -> Result<Planned, String> {
    let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_owned();
    let mut plans = Vec::new();
    for c in v["clusters"].as_array().ok_or("no `clusters`")? {
        let source = match c["source"].as_str() {
            Some("live") => Source::Live {
                context: c["context"].as_str().map(str::to_owned),
            },
            Some("snapshot") => Source::Snapshot {
                at: c["snapshot_captured_at"].as_str().map(str::to_owned),
            },
            _ => Source::Offline,
        };
        let outcome = match c.get("plan") {
            Some(p) => Outcome::Planned(
                serde_json::from_value(p.clone())
                    .map_err(|e| format!("cluster `{}`: {e}", text(c, "name")))?,
            ),
            None => Outcome::Error(text(c, "error")),
        };
        plans.push(ClusterPlan {
            name: text(c, "name"),
            wave: text(c, "wave"),
            source,
            outcome,
        });
    }
    let policy = match v.get("policy_findings") {
        Some(p) => serde_json::from_value(p.clone()).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    Ok(Planned::Fleet(text(v, "fleet"), plans, policy))
}

/// The end of the plan command's log, ANSI colours removed.
fn log_tail(path: Option<&Path>) -> Result<String, CommandError> {
    let Some(path) = path else {
        return Ok(String::new());
    };
    let bytes = input::read(path, &input::SNAPSHOT)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut clean = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        clean.push(c);
    }
    let count = clean.chars().count();
    Ok(clean
        .chars()
        .skip(count.saturating_sub(LOG_TAIL_CHARS))
        .collect::<String>()
        .trim()
        .to_owned())
}

/// The comment's Markdown: the plan's own (summary table first, details collapsed), then the
/// log when the gate fails.
fn markdown(planned: &Planned, log: &str, exit_code: i32, now: jiff::Timestamp) -> String {
    let mut md = match planned {
        Planned::One(plan) => output::plan::markdown(plan),
        Planned::Fleet(fleet, plans, policy) => output::fleet_plan::markdown(fleet, plans, policy, now),
        Planned::Nothing => "### gpuctl made no plan\n\nThe plan command stopped before it printed a plan; its log says why.\n".to_owned(),
    };
    if !log.is_empty() && !body::passes(exit_code) {
        let fence = if log.contains("```") { "~~~~" } else { "```" };
        md.push_str(&format!(
            "\n\n<details><summary>gpuctl's log (its end)</summary>\n\n{fence}text\n{log}\n{fence}\n</details>\n"
        ));
    }
    md
}

/// The findings as annotations: validation findings (SARIF) at their file and line; plan and
/// policy findings at the line a policy named (` at FILE:LINE`), else the blueprint's first line.
fn annotations(
    planned: &Planned,
    sarif: Option<&Path>,
    blueprint: Option<&str>,
) -> Result<Vec<Annotation>, CommandError> {
    let mut out = Vec::new();
    if let Some(path) = sarif {
        let bytes = input::read(path, &input::SNAPSHOT)?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
            CommandError::Failed(format!("{}: not SARIF JSON: {e}", path.display()))
        })?;
        out.extend(sarif_annotations(&v));
    }
    let mut push = |prefix: &str, f: &PlanFinding| {
        let (path, line) = match finding_location(&f.message) {
            Some((p, l)) => (p, l),
            None => match blueprint {
                Some(b) => (b.to_owned(), 1),
                None => return,
            },
        };
        out.push(Annotation {
            path,
            start_line: line,
            end_line: line,
            annotation_level: level(f.severity),
            title: f.id.clone(),
            message: format!("{prefix}{}", f.message),
        });
    };
    match planned {
        Planned::One(plan) => plan.findings.iter().for_each(|f| push("", f)),
        Planned::Fleet(_, plans, policy) => {
            policy.iter().for_each(|f| push("", f));
            for c in plans {
                if let Outcome::Planned(p) = &c.outcome {
                    let prefix = format!("cluster {}: ", c.name);
                    p.findings.iter().for_each(|f| push(&prefix, f));
                }
            }
        }
        Planned::Nothing => {}
    }
    Ok(out)
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "failure",
        Severity::Warning => "warning",
        Severity::Info => "notice",
    }
}

/// ` at FILE:LINE` at the end of a policy finding's message, for a relative path inside the
/// repository.
fn finding_location(message: &str) -> Option<(String, u64)> {
    let (_, at) = message.rsplit_once(" at ")?;
    let (file, line) = at.rsplit_once(':')?;
    let line: u64 = line.trim().parse().ok().filter(|l| *l > 0)?;
    let inside = !file.is_empty()
        && !file.starts_with('/')
        && !file.split('/').any(|p| p == "..")
        && !file.contains(char::is_whitespace);
    inside.then(|| (file.to_owned(), line))
}

fn sarif_annotations(v: &Value) -> Vec<Annotation> {
    let results = v
        .pointer("/runs/0/results")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    results
        .iter()
        .filter_map(|r| {
            let loc = r.pointer("/locations/0/physicalLocation")?;
            let path = loc.pointer("/artifactLocation/uri")?.as_str()?.to_owned();
            let line = loc
                .pointer("/region/startLine")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            let level = match r["level"].as_str() {
                Some("error") | None => "failure",
                Some("warning") => "warning",
                _ => "notice",
            };
            Some(Annotation {
                path,
                start_line: line,
                end_line: line,
                annotation_level: level,
                title: r["ruleId"].as_str().unwrap_or_default().to_owned(),
                message: r.pointer("/message/text")?.as_str()?.to_owned(),
            })
        })
        .collect()
}

/// The token from the environment variable `name`: set and non-empty, or an error naming the
/// variable (never its value).
fn token(name: &str) -> Result<Token, CommandError> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(Token::new(&v)),
        _ => Err(CommandError::Usage(format!(
            "the API token is read from the environment variable {name}, which is not set or empty (--token-env names another)"
        ))),
    }
}

/// What both forges do first: read the plan and the log, compose the comment.
struct Prepared {
    planned: Planned,
    markdown: String,
}

fn prepare(c: &CiCommonArgs) -> Result<Prepared, CommandError> {
    let planned = read_plan(c.plan.as_deref())?;
    let log = log_tail(c.log.as_deref())?;
    let now = match c.now.as_deref() {
        None => jiff::Timestamp::now(),
        Some(t) => t.parse().map_err(|e| {
            CommandError::Usage(format!("--now `{t}` is not an RFC 3339 time: {e}"))
        })?,
    };
    let markdown = markdown(&planned, &log, c.exit_code, now);
    Ok(Prepared { planned, markdown })
}

fn compose(
    c: &CiCommonArgs,
    markdown: &str,
    commit: Option<&str>,
    secret: &str,
    limit: usize,
) -> String {
    body::compose(
        &Comment {
            key: &c.key,
            markdown,
            exit_code: c.exit_code,
            artifact_url: c.artifact_url.as_deref(),
            commit,
            secrets: &[secret],
        },
        limit,
    )
}

fn dry_run(path: &Path, text: &str) -> Result<(), CommandError> {
    std::fs::write(path, text)
        .map_err(|e| CommandError::Failed(format!("cannot write `{}`: {e}", path.display())))
}

fn said(what: &str, u: Upserted) {
    match u {
        Upserted::Created(id) => eprintln!("gpuctl ci: created the {what} (id {id})"),
        Upserted::Updated(id) => eprintln!("gpuctl ci: updated the {what} in place (id {id})"),
    }
}

fn github_target(a: &CiGithubArgs) -> Result<PullRequest, CommandError> {
    let repository = a.repository.as_deref().ok_or_else(|| {
        CommandError::Usage(
            "no repository: set GITHUB_REPOSITORY or --repository owner/name".into(),
        )
    })?;
    let pr = match (a.pr, a.sha.as_deref(), a.event.as_deref()) {
        (Some(n), Some(sha), _) => PullRequest::new(repository, n, sha)?,
        (_, _, Some(event)) => {
            let bytes = input::read(event, &input::SNAPSHOT)?;
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                CommandError::Failed(format!("{}: not an event JSON: {e}", event.display()))
            })?;
            PullRequest::from_event(repository, &v)?
        }
        _ => {
            return Err(CommandError::Usage(
                "no pull request: run on a `pull_request` event (GITHUB_EVENT_PATH) or give --pr N --sha COMMIT".into(),
            ));
        }
    };
    Ok(pr)
}

fn github_run(a: &CiGithubArgs) -> CommandResult {
    let c = &a.common;
    let prepared = prepare(c)?;
    let notes = annotations(
        &prepared.planned,
        c.sarif.as_deref(),
        c.blueprint.as_deref(),
    )?;
    if let Some(path) = &c.dry_run {
        let commit = a.sha.as_deref();
        dry_run(
            path,
            &compose(
                c,
                &prepared.markdown,
                commit,
                "",
                body::GITHUB_COMMENT_LIMIT,
            ),
        )?;
        return Ok(verdict(c.exit_code));
    }
    let token = token(c.token_env.as_deref().unwrap_or("GITHUB_TOKEN"))?;
    let pr = github_target(a)?;
    let secret = token.text();
    let comment = compose(
        c,
        &prepared.markdown,
        Some(&pr.head_sha),
        secret,
        body::GITHUB_COMMENT_LIMIT,
    );
    let summary = compose(
        c,
        &prepared.markdown,
        Some(&pr.head_sha),
        secret,
        body::GITHUB_CHECK_SUMMARY_LIMIT,
    );
    let notes: Vec<Annotation> = notes
        .into_iter()
        .map(|mut n| {
            n.message = body::scrub(&n.message, &[secret]);
            n
        })
        .collect();
    let client = Client::new(
        &a.api_url,
        "authorization",
        "Bearer ",
        &token,
        github::ACCEPT,
        Retry::default(),
    )?;
    let marker = body::marker(&c.key);
    runtime()?.block_on(async {
        let u =
            github::upsert_comment(&client, &pr, &marker, c.comment_author.as_deref(), &comment)
                .await?;
        said("pull request comment", u);
        if !a.no_check {
            let passed = body::passes(c.exit_code);
            let title = if passed {
                "gpuctl: the plan passes"
            } else {
                "gpuctl: the plan fails"
            };
            let check = Check {
                name: &a.check_name,
                passed,
                title,
                summary: &summary,
                details_url: c.artifact_url.as_deref(),
            };
            let id = github::check_run(&client, &pr, &check, &notes).await?;
            eprintln!(
                "gpuctl ci: check run `{}` (id {id}): {}, {} annotations",
                a.check_name,
                if passed { "success" } else { "failure" },
                notes.len()
            );
        }
        Ok::<_, CommandError>(())
    })?;
    Ok(verdict(c.exit_code))
}

fn gitlab_run(a: &CiGitlabArgs) -> CommandResult {
    let c = &a.common;
    let prepared = prepare(c)?;
    if let Some(path) = &c.dry_run {
        dry_run(
            path,
            &compose(
                c,
                &prepared.markdown,
                a.sha.as_deref(),
                "",
                body::GITLAB_NOTE_LIMIT,
            ),
        )?;
        return Ok(verdict(c.exit_code));
    }
    let token = token(c.token_env.as_deref().unwrap_or("GPUCTL_GITLAB_TOKEN"))?;
    let missing = |what: &str| {
        CommandError::Usage(format!(
            "no {what}: run in a merge request pipeline (`rules: - if: $CI_MERGE_REQUEST_IID`) or give it as a flag"
        ))
    };
    let api = a
        .api_url
        .as_deref()
        .ok_or_else(|| missing("API URL (CI_API_V4_URL)"))?;
    let mr = MergeRequest {
        project: a
            .project
            .clone()
            .ok_or_else(|| missing("project (CI_PROJECT_ID)"))?,
        iid: a
            .merge_request
            .ok_or_else(|| missing("merge request (CI_MERGE_REQUEST_IID)"))?,
    };
    let note = compose(
        c,
        &prepared.markdown,
        a.sha.as_deref(),
        token.text(),
        body::GITLAB_NOTE_LIMIT,
    );
    let client = Client::new(
        api,
        "private-token",
        "",
        &token,
        "application/json",
        Retry::default(),
    )?;
    let marker = body::marker(&c.key);
    let u = runtime()?.block_on(gitlab::upsert_note(
        &client,
        &mr,
        &marker,
        c.comment_author.as_deref(),
        &note,
    ))?;
    said("merge request note", u);
    Ok(verdict(c.exit_code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_location_is_read_from_the_message_end() {
        assert_eq!(
            finding_location("too many GPUs (data.main.deny) at blueprints/a.yaml:41"),
            Some(("blueprints/a.yaml".to_owned(), 41))
        );
        assert_eq!(finding_location("no location here"), None);
        assert_eq!(finding_location("x at /etc/passwd:1"), None);
        assert_eq!(finding_location("x at ../up.yaml:3"), None);
        assert_eq!(finding_location("x at a.yaml:0"), None);
    }
}
