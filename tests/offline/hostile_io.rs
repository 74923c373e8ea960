//! Issue 10 (items 5, 6, 8): what a pull request can hand gpuctl in CI. Every input is bounded and
//! refused fast when it is not a regular file; `-` reads the blueprint from standard input.
//!
//! Every run here has a deadline: a regression that blocks (a FIFO) or reads for ever (/dev/zero)
//! fails the test instead of hanging the suite.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::gpuctl::{Gpuctl, TODAY};

/// Far above what any of these runs takes; a run still going then is the bug.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs gpuctl with `stdin` piped in (or none), killing it at the deadline.
fn gpuctl(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let run = Gpuctl::new(args)
        .today(TODAY)
        .no_color()
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .deadline(DEADLINE);
    match stdin {
        Some(bytes) => run.stdin(bytes),
        None => run,
    }
    .output()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn example(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("blueprints")
            .join(name),
    )
    .expect("example")
}

#[test]
fn dev_zero_as_a_blueprint_is_refused_at_once() {
    let o = gpuctl(&["validate", "/dev/zero", "-o", "json"], None);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // An input error (issue 12), not a finding: said on stderr, nothing on stdout.
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let out = stderr(&o);
    assert!(out.starts_with("error: blueprint `/dev/zero`: "), "{out}");
    assert!(
        out.contains("it is a character device, not a regular file"),
        "{out}"
    );
    assert!(
        out.contains("or as `-` to read it from standard input"),
        "{out}"
    );
}

#[test]
fn a_fifo_as_a_blueprint_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("bp.yaml");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // Nobody ever writes to it: opening it for reading would block for ever.
    let fifo = fifo.to_str().unwrap();
    for args in [
        vec!["validate", fifo, "-o", "json"],
        vec!["render", fifo],
        vec!["plan", fifo, "--offline"],
    ] {
        let o = gpuctl(&args, None);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let all = stdout(&o) + &stderr(&o);
        assert!(
            all.contains("it is a FIFO (named pipe), not a regular file"),
            "{all}"
        );
    }
    let o = gpuctl(
        &[
            "plan",
            "blueprints/dgx-h100-training.yaml",
            "--snapshot",
            fifo,
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("it is a FIFO (named pipe)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_5_gb_blueprint_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.yaml");
    // Sparse: no disk space is used, and reading it whole would take 5 GB of memory.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(5 << 30)
        .unwrap();
    let start = Instant::now();
    let o = gpuctl(&["validate", big.to_str().unwrap(), "-o", "json"], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let out = stderr(&o);
    assert!(
        out.contains(
            "the blueprint is 5368709120 bytes; a blueprint over 4194304 bytes is refused"
        ),
        "{out}"
    );
    assert!(
        out.contains("split the cluster into several blueprints"),
        "{out}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn an_endless_stdin_is_cut_at_the_limit() {
    let o = gpuctl(
        &["validate", "-", "-o", "json"],
        Some(&vec![b'#'; 5 * 1024 * 1024]),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let out = stderr(&o);
    assert!(out.starts_with("error: blueprint `<stdin>`: "), "{out}");
    assert!(
        out.contains("the blueprint is more than 4194304 bytes"),
        "{out}"
    );
}

#[test]
fn a_snapshot_with_objects_that_are_not_objects_is_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.json");
    std::fs::write(
        &snap,
        r#"{"format_version": 2, "objects": {"a": null, "b": 5, "c": [1]}}"#,
    )
    .unwrap();
    let o = gpuctl(
        &[
            "plan",
            "blueprints/dgx-h100-training.yaml",
            "--snapshot",
            snap.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains(r#"is damaged at objects["a"]: null, not a Kubernetes object"#),
        "{err}"
    );
    assert!(
        err.contains("capture it again with `gpuctl snapshot BLUEPRINT --out FILE`"),
        "{err}"
    );
    assert!(stdout(&o).is_empty(), "no plan: {}", stdout(&o));
}

#[test]
fn a_template_override_that_never_ends_runs_out_of_fuel() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("objects")).unwrap();
    std::fs::write(
        dir.path().join("objects/operator-namespace.yaml.j2"),
        "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}",
    )
    .unwrap();
    let o = gpuctl(
        &[
            "render",
            "blueprints/dgx-h100-training.yaml",
            "--templates",
            dir.path().to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("template `objects/operator-namespace.yaml.j2` ran out of fuel"),
        "{err}"
    );
}

#[test]
fn validate_dash_reads_stdin_and_names_it() {
    let o = gpuctl(
        &["validate", "-", "-o", "json"],
        Some(&example("mixed-lab.yaml")),
    );
    assert_eq!(o.status.code(), Some(1), "the example has errors");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let text = report.to_string();
    assert!(text.contains(r#""file":"<stdin>""#), "{text}");
    let o = gpuctl(&["validate", "-"], Some(&example("dgx-h100-training.yaml")));
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    // One stdin per command.
    let o = gpuctl(&["validate", "-", "-"], Some(b""));
    assert_eq!(o.status.code(), Some(64));
    assert!(
        stderr(&o).contains("`-` (standard input) can be given once"),
        "{}",
        stderr(&o)
    );
    let o = gpuctl(
        &["plan", "-", "--snapshot", "-"],
        Some(&example("dgx-h100-training.yaml")),
    );
    assert_eq!(o.status.code(), Some(64));
}

#[test]
fn render_plan_and_apply_take_the_blueprint_from_stdin() {
    let bp = example("dgx-h100-training.yaml");
    let from_file = gpuctl(&["render", "blueprints/dgx-h100-training.yaml"], None);
    let o = gpuctl(&["render", "-"], Some(&bp));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), stdout(&from_file));
    let o = gpuctl(&["plan", "-", "--offline"], Some(&bp));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("to create"), "{}", stdout(&o));
    // Findings of a blueprint on stdin name it; apply stops there, before any cluster.
    let o = gpuctl(&["apply", "-"], Some(&example("mixed-lab.yaml")));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("<stdin>"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("(`gpuctl validate -`)"),
        "{}",
        stderr(&o)
    );
    // A damaged saved plan on stdin is refused before connecting.
    let o = gpuctl(
        &["apply", "-"],
        Some(br#"{"format_version": 1, "applyset": 5}"#),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("saved plan `<stdin>`: "),
        "{}",
        stderr(&o)
    );
}
