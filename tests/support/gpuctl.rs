//! The one way the integration tests run the `gpuctl` binary (`CARGO_BIN_EXE_gpuctl`): a builder
//! over [`std::process::Command`] for the arguments, standard input, environment and working
//! directory, whose [`Gpuctl::output`] returns the exit status, stdout and stderr.
//!
//! ```ignore
//! let o = Gpuctl::new(["plan", "blueprints/dgx-h100-training.yaml", "--offline"])
//!     .today(TODAY)
//!     .stdin(b"...")
//!     .output();
//! ```
//!
//! A run starts in the repository root (where `cargo test` runs the tests, and what the example
//! paths are relative to) with the test process's environment; each test says what it pins
//! (`GPUCTL_TODAY` through [`Gpuctl::today`], `NO_COLOR`, a `PATH`, a directory). [`gpuctl`] and
//! [`in_dir`] are the two settings most tests share. Output is always piped, never a terminal, so
//! gpuctl prints plain text whether `NO_COLOR` is set or not (`src/settings.rs`).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_gpuctl");
/// The day most tests pin the facts catalog to (`GPUCTL_TODAY`): support windows and end-of-life
/// dates read the same on every run.
pub const TODAY: &str = "2026-11-30";

/// One run of the binary, built up before it starts.
pub struct Gpuctl {
    command: Command,
    stdin: Option<Vec<u8>>,
    deadline: Option<Duration>,
}

impl Gpuctl {
    /// `gpuctl ARGS` in the repository root, with the test's environment.
    pub fn new<I, S>(args: I) -> Gpuctl
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new(BIN);
        command.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
        Gpuctl {
            command,
            stdin: None,
            deadline: None,
        }
    }

    /// More arguments, after those given so far.
    pub fn args<I, S>(mut self, args: I) -> Gpuctl
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Gpuctl {
        self.command.arg(arg);
        self
    }

    /// Runs in `dir` instead of the repository root.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Gpuctl {
        self.command.current_dir(dir);
        self
    }

    /// Sets one environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Gpuctl {
        self.command.env(key, value);
        self
    }

    /// Sets several environment variables.
    pub fn envs<I, K, V>(mut self, vars: I) -> Gpuctl
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.command.envs(vars);
        self
    }

    /// Leaves a variable of the test's environment out.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Gpuctl {
        self.command.env_remove(key);
        self
    }

    /// Pins the catalog's day (`GPUCTL_TODAY`).
    pub fn today(self, day: &str) -> Gpuctl {
        self.env("GPUCTL_TODAY", day)
    }

    /// Sets `NO_COLOR=1`.
    pub fn no_color(self) -> Gpuctl {
        self.env("NO_COLOR", "1")
    }

    /// Feeds `bytes` to standard input (written from a thread of its own: gpuctl may stop reading
    /// early, a refusal, which is not an error here). Without it, standard input is empty.
    pub fn stdin(mut self, bytes: &[u8]) -> Gpuctl {
        self.stdin = Some(bytes.to_vec());
        self
    }

    /// Kills the run and fails the test when it is still going after `limit` (a run that blocks
    /// is the bug, and must not hang the suite).
    pub fn deadline(mut self, limit: Duration) -> Gpuctl {
        self.deadline = Some(limit);
        self
    }

    /// Runs it to the end: exit status, stdout and stderr.
    pub fn output(mut self) -> Output {
        let shown = format!("{:?}", self.command);
        let mut child = self
            .command
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("gpuctl runs: {e}: {shown}"));
        if let Some(bytes) = self.stdin.take() {
            let mut pipe = child.stdin.take().expect("stdin");
            std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            });
        }
        // Both pipes drained while it runs, so a full pipe never blocks it past its deadline.
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = pipe.read_to_end(&mut buf);
                buf
            })
        };
        let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
        let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
        let status = match self.deadline {
            None => child.wait().expect("wait for gpuctl"),
            Some(limit) => wait_until(&mut child, limit, &shown),
        };
        Output {
            status,
            stdout: stdout.join().expect("stdout reader"),
            stderr: stderr.join().expect("stderr reader"),
        }
    }

    /// Starts it with `stdout` and `stderr` as given (standard input empty), for a test that
    /// signals or kills it mid-run.
    pub fn spawn(self, stdout: Stdio, stderr: Stdio) -> Child {
        let shown = format!("{:?}", self.command);
        let mut command = self.command();
        command
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("gpuctl runs: {e}: {shown}"))
    }

    /// The command as built, for a test that drives the process itself.
    pub fn command(self) -> Command {
        assert!(
            self.stdin.is_none() && self.deadline.is_none(),
            "stdin and deadline are only kept by Gpuctl::output"
        );
        self.command
    }
}

fn wait_until(child: &mut Child, limit: Duration, shown: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for gpuctl") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{shown} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `gpuctl ARGS` in the repository root on [`TODAY`], `NO_COLOR=1`.
pub fn gpuctl(args: &[&str]) -> Output {
    Gpuctl::new(args).today(TODAY).no_color().output()
}

/// `gpuctl ARGS` in `dir` (a fleet's repository) on [`TODAY`], `NO_COLOR=1`.
pub fn in_dir(args: &[&str], dir: &Path) -> Output {
    Gpuctl::new(args)
        .current_dir(dir)
        .today(TODAY)
        .no_color()
        .output()
}

/// Exit code, stdout and stderr of a run, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
