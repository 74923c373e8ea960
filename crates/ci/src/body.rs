//! The comment itself: a hidden marker that finds it again on the next push, the verdict, the
//! plan's Markdown (its summary table first), and a cut under the forge's length limit that says
//! so and points to the full plan artifact. Pure: no network.

/// GitHub refuses a comment body over 65,536 characters (`Body is too long (maximum is 65536
/// characters)`, ../shared/reference/ci-gate.md §4).
pub const GITHUB_COMMENT_LIMIT: usize = 65_536;
/// A check run's `output.summary` and `output.text`: at most 65,535 characters each.
pub const GITHUB_CHECK_SUMMARY_LIMIT: usize = 65_535;
/// GitLab's note limit is 1,000,000 characters (sources say 1,000,000 or 1 MiB; the lower one).
pub const GITLAB_NOTE_LIMIT: usize = 1_000_000;
/// Room kept below a limit (the limit counts characters as the forge does; kept well clear).
const MARGIN: usize = 512;

/// What a `key` may hold in the marker: letters, digits and `._/-`; anything else becomes `-`.
pub fn marker(key: &str) -> String {
    let key: String = key
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("<!-- gpuctl:plan:{key} -->")
}

/// The gate's verdict from the exit code of `gpuctl plan` / `fleet plan`: 0 passes, 2 (changes,
/// with `--detailed-exitcode`) passes, anything else fails.
pub fn passes(exit_code: i32) -> bool {
    matches!(exit_code, 0 | 2)
}

/// What goes into one comment.
pub struct Comment<'a> {
    /// Which plan this is (one comment per PR and key): the job, the blueprint or the fleet.
    pub key: &'a str,
    /// The plan's Markdown (gpuctl's own, summary table first).
    pub markdown: &'a str,
    /// The exit code of the plan command.
    pub exit_code: i32,
    /// Where the full plan is (the job's artifact or run page).
    pub artifact_url: Option<&'a str>,
    /// The commit the plan is for.
    pub commit: Option<&'a str>,
    /// Replaced by `(sensitive)` wherever they occur (the API token, any other secret).
    pub secrets: &'a [&'a str],
}

/// Replaces every secret of four or more characters by `(sensitive)`.
pub fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        if out.contains(*s) {
            out = out.replace(*s, "(sensitive)");
        }
    }
    out
}

fn verdict(exit_code: i32) -> String {
    if passes(exit_code) {
        format!("**gpuctl: passed** (exit {exit_code})")
    } else {
        format!(
            "**gpuctl: failed** (exit {exit_code}): the check fails until the findings below are fixed"
        )
    }
}

fn artifact_line(url: Option<&str>) -> String {
    match url {
        Some(u) => format!("the full plan is in the job's artifact: {u}"),
        None => "the full plan is in the job's artifact (`gpuctl plan -o json`)".to_owned(),
    }
}

/// The comment, at most `limit` characters: marker, verdict, the plan's Markdown (cut at a line
/// when it does not fit, open `<details>` and code fences closed, a note naming the cut and the
/// artifact), footer.
pub fn compose(c: &Comment<'_>, limit: usize) -> String {
    let head = format!("{}\n{}\n\n", marker(c.key), verdict(c.exit_code));
    let mut foot = format!("\n\n<sub>{}", artifact_line(c.artifact_url));
    if let Some(sha) = c.commit {
        let short: String = sha.chars().take(12).collect();
        foot.push_str(&format!("; planned at commit `{short}`"));
    }
    foot.push_str(concat!(
        " by gpuctl ",
        env!("CARGO_PKG_VERSION"),
        ".</sub>\n"
    ));
    let markdown = scrub(c.markdown, c.secrets);
    let fixed = head.chars().count() + foot.chars().count();
    let budget = limit.saturating_sub(fixed + MARGIN);
    let total = markdown.chars().count();
    let middle = if total <= budget {
        markdown
    } else {
        let note = format!(
            "\n\n> [!WARNING]\n> Truncated: this comment shows {{shown}} of {total} characters of the plan, to stay under the forge's limit of {limit}; {}.\n",
            artifact_line(c.artifact_url)
        );
        let keep = budget.saturating_sub(note.chars().count() + 200);
        let mut cut = cut_at_line(&markdown, keep);
        close_open_blocks(&mut cut);
        let shown = cut.chars().count();
        cut.push_str(&note.replace("{shown}", &shown.to_string()));
        cut
    };
    let body = format!("{head}{}{foot}", middle.trim_end());
    scrub(&body, c.secrets)
}

/// The first `keep` characters of `text`, ending at the last line break within them.
fn cut_at_line(text: &str, keep: usize) -> String {
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let head = &text[..end];
    match head.rfind('\n') {
        Some(i) if i > 0 => head[..i].to_owned(),
        _ => head.to_owned(),
    }
}

/// Closes a code fence and any `<details>` a cut left open, so the rest of the comment renders.
fn close_open_blocks(text: &mut String) {
    let fences = text
        .lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count();
    if fences % 2 == 1 {
        text.push_str("\n```");
    }
    let opened = text.matches("<details").count();
    let closed = text.matches("</details>").count();
    for _ in closed..opened {
        text.push_str("\n</details>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment<'a>(markdown: &'a str, secrets: &'a [&'a str]) -> Comment<'a> {
        Comment {
            key: "plan/dgx h100",
            markdown,
            exit_code: 1,
            artifact_url: Some("https://example.test/run/1"),
            commit: Some("0123456789abcdef0123"),
            secrets,
        }
    }

    #[test]
    fn the_marker_is_hidden_and_its_key_is_tamed() {
        assert_eq!(
            marker("plan/dgx h100"),
            "<!-- gpuctl:plan:plan/dgx-h100 -->"
        );
        // `>` cannot end the comment early.
        assert_eq!(marker("a-->b"), "<!-- gpuctl:plan:a---b -->");
    }

    #[test]
    fn a_short_plan_is_whole_with_verdict_and_footer() {
        let body = compose(
            &comment("### plan\n\n| a | b |\n", &[]),
            GITHUB_COMMENT_LIMIT,
        );
        assert!(
            body.starts_with("<!-- gpuctl:plan:plan/dgx-h100 -->\n**gpuctl: failed** (exit 1)")
        );
        assert!(body.contains("| a | b |"));
        assert!(body.contains("commit `0123456789ab`"));
        assert!(!body.contains("Truncated"));
    }

    #[test]
    fn a_long_plan_is_cut_under_the_limit_with_blocks_closed() {
        let mut md = String::from("### plan\n\n<details><summary>x</summary>\n\n```diff\n");
        for i in 0..20_000 {
            md.push_str(&format!("+ line {i} with ünïcödé\n"));
        }
        let body = compose(&comment(&md, &[]), GITHUB_COMMENT_LIMIT);
        assert!(body.chars().count() <= GITHUB_COMMENT_LIMIT);
        assert!(body.contains("> [!WARNING]\n> Truncated: this comment shows"));
        assert!(body.contains("https://example.test/run/1"));
        let fences = body.lines().filter(|l| l.starts_with("```")).count();
        assert_eq!(fences % 2, 0, "a cut code fence is closed");
        assert_eq!(
            body.matches("<details").count(),
            body.matches("</details>").count()
        );
    }

    #[test]
    fn secrets_are_masked_everywhere() {
        let body = compose(
            &comment("token ghs_abcdef in a message\n", &["ghs_abcdef"]),
            GITHUB_COMMENT_LIMIT,
        );
        assert!(!body.contains("ghs_abcdef"));
        assert!(body.contains("token (sensitive) in a message"));
    }

    #[test]
    fn exit_codes_zero_and_two_pass() {
        assert!(passes(0) && passes(2));
        assert!(!passes(1) && !passes(64) && !passes(-1));
    }
}
