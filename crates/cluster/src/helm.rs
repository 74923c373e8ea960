//! Running helm for apply's release steps: child processes awaited on the runtime, never a
//! blocking call (the runtime has one thread, and the apply lock's Lease renews on it while helm
//! runs), each bounded (a run that outlives `--wait-timeout` is stopped: SIGTERM, which helm
//! answers by cancelling and marking the release `failed`, then SIGKILL after a grace period);
//! and the check, before an apply changes anything, that the helm on PATH runs at all.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::client::Kube;

/// How long a helm that was sent SIGTERM gets to record the cancelled release before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// How long `helm version` may take before helm counts as not runnable.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// How one helm run ended.
#[derive(Debug)]
pub enum Outcome {
    /// Exit 0; what it printed on standard output.
    Done(String),
    /// A non-zero exit (or a signal); the end of what it printed on standard error.
    Failed(String),
    /// It ran longer than its bound and was stopped; what it printed on standard error so far.
    TimedOut(String),
    /// It could not be started.
    NotStarted(String),
}

/// The `helm` on PATH, as the shell would find it (an executable file).
pub fn on_path() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("helm"))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
}

/// Whether `helm` runs: `helm version --short` exits 0 within [`CHECK_TIMEOUT`]. Returns what it
/// printed (`v3.22.0+g...`), or why not.
pub async fn check(helm: &Path) -> Result<String, String> {
    let args = [OsString::from("version"), OsString::from("--short")];
    match run(helm, &args, CHECK_TIMEOUT).await {
        Outcome::Done(out) => Ok(out.trim().to_string()),
        Outcome::Failed(err) => Err(format!("`{} version` failed: {err}", helm.display())),
        Outcome::TimedOut(_) => Err(format!(
            "`{} version` did not answer within {}s",
            helm.display(),
            CHECK_TIMEOUT.as_secs()
        )),
        Outcome::NotStarted(e) => Err(format!("{} could not be started: {e}", helm.display())),
    }
}

/// `--kubeconfig` and `--kube-context` for the cluster gpuctl talks to (not whatever helm's own
/// defaults would pick).
pub fn cluster_args(k: &Kube) -> Vec<OsString> {
    let mut out = Vec::new();
    if let Some(p) = &k.kubeconfig {
        out.push("--kubeconfig".into());
        out.push(p.as_os_str().to_os_string());
    }
    if let Some(c) = &k.context {
        out.push("--kube-context".into());
        out.push(c.into());
    }
    out
}

/// The last characters of what a process printed (helm's errors are at the end).
fn tail(bytes: &[u8]) -> String {
    const KEEP: usize = 4000;
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match text.char_indices().rev().nth(KEEP) {
        Some((i, _)) => format!("...{}", &text[i..]),
        None => text.to_string(),
    }
}

/// Runs `helm args...` without blocking the runtime, for at most `limit`. Standard input is
/// closed; standard output and error are collected. A run past `limit` is sent SIGTERM and given
/// [`STOP_GRACE`] to end; then it is killed (as it is when the future is dropped).
pub async fn run(helm: &Path, args: &[OsString], limit: Duration) -> Outcome {
    let child = match tokio::process::Command::new(helm)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Outcome::NotStarted(e.to_string()),
    };
    let pid = child.id();
    let output = child.wait_with_output();
    tokio::pin!(output);
    tokio::select! {
        done = &mut output => return match done {
            Ok(o) if o.status.success() => Outcome::Done(String::from_utf8_lossy(&o.stdout).into()),
            Ok(o) => {
                let err = tail(&o.stderr);
                Outcome::Failed(if err.is_empty() {
                    format!("helm exited with {} and printed no error", o.status)
                } else {
                    err
                })
            }
            Err(e) => Outcome::Failed(format!("waiting for helm failed: {e}")),
        },
        () = tokio::time::sleep(limit) => {}
    }
    // Still running (so not reaped: its pid is still its own). helm cancels on SIGTERM and
    // records the release `failed`; what it printed by then is kept.
    if let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    match tokio::time::timeout(STOP_GRACE, &mut output).await {
        Ok(Ok(o)) => Outcome::TimedOut(tail(&o.stderr)),
        // Dropping `output` kills it (kill_on_drop); tokio reaps it in the background.
        _ => Outcome::TimedOut(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An executable `helm` script in `dir`. It is written as `helm.src` and copied into place
    /// by `install(1)`, so this process never holds a write descriptor to the file it executes:
    /// a test thread forking meanwhile would inherit one until its exec, and the exec of the
    /// script would then fail with ETXTBSY ("Text file busy"; it failed a CI run so).
    fn script(dir: &Path, body: &str) -> PathBuf {
        let src = dir.join("helm.src");
        std::fs::write(&src, format!("#!/bin/sh\n{body}\n")).unwrap();
        let path = dir.join("helm");
        let status = std::process::Command::new("install")
            .args(["-m", "755"])
            .arg(&src)
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success(), "install {}: {status}", path.display());
        path
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_run_reports_its_output_its_failure_and_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let helm = script(
            dir.path(),
            "case \"$1\" in\n  ok) echo fine ;;\n  fail) echo 'Error: no chart' >&2; exit 1 ;;\n  slow) echo started >&2; exec sleep 30 ;;\nesac",
        );
        let arg = |a: &str| [OsString::from(a)];
        match run(&helm, &arg("ok"), Duration::from_secs(10)).await {
            Outcome::Done(out) => assert_eq!(out.trim(), "fine"),
            other => panic!("{other:?}"),
        }
        match run(&helm, &arg("fail"), Duration::from_secs(10)).await {
            Outcome::Failed(err) => assert_eq!(err, "Error: no chart"),
            other => panic!("{other:?}"),
        }
        // What it printed comes back only when SIGTERM ended it within the grace period (past
        // the grace it is killed and nothing is kept), so this proves the stop without timing it.
        match run(&helm, &arg("slow"), Duration::from_millis(500)).await {
            Outcome::TimedOut(err) => assert_eq!(err, "started"),
            other => panic!("{other:?}"),
        }
        match run(&dir.path().join("none"), &arg("ok"), Duration::from_secs(1)).await {
            Outcome::NotStarted(_) => {}
            other => panic!("{other:?}"),
        }
        assert!(check(&script(dir.path(), "exit 3")).await.is_err());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn other_tasks_run_while_helm_runs() {
        // The apply lock's renewal is such a task, on the same one-thread runtime.
        let dir = tempfile::tempdir().unwrap();
        let helm = script(dir.path(), "sleep 1");
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let outcome = run(&helm, &[], Duration::from_secs(10)).await;
        ticker.abort();
        assert!(matches!(outcome, Outcome::Done(_)), "{outcome:?}");
        let n = ticks.load(std::sync::atomic::Ordering::SeqCst);
        assert!(n >= 5, "only {n} ticks while helm ran for 1s");
    }
}
