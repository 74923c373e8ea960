//! Issue 10: a generated corpus of hostile input, fed in-process through load, validate, the
//! findings renderers, render and plan.
//!
//! 2,000 mutated blueprints (seeded from `blueprints/*.yaml`, `tests/fixtures/dra/*.yaml` and `tests/fixtures/accounting/*.yaml`, 1-3 mutations each: wrong types,
//! deletions, duplicates, huge numbers, long and hostile strings, tags, directives, aliases, deep
//! nesting, many items, explicit keys, multi-documents, truncation, byte flips...) plus a few fixed
//! edge cases, and 100 corrupted copies of `blueprints/snapshots/dgx-h100-training.json`. For each:
//!
//! - nothing panics (each stage runs under `catch_unwind`; an abort kills the test, which fails it);
//! - memory stays bounded: a counting global allocator measures the peak above the baseline of each
//!   input, which must stay under 256 MiB + 64 x the input size. 64x leaves room for the several
//!   copies the pipeline legitimately keeps (text, tree, JSON value, path index, typed blueprint,
//!   rendered objects, plan) while an alias bomb or a quadratic copy blows through it; 256 MiB is
//!   the floor for the catalog, templates and a rendered set of a realistic size;
//! - time stays bounded: every input finishes within 20 s (the slowest is reported; a hang past 60 s
//!   trips a watchdog that names the input and exits);
//! - every rejected input has an error finding, and every error finding has a position inside the
//!   file (only whole-file problems, such as the size limit, have none);
//! - whatever validate accepts, render renders, plan plans (offline, and against the shipped
//!   snapshot for blueprints of that cluster), the plan reads back from its JSON, and the rendered
//!   names, namespaces and labels are ones the API server accepts;
//! - plan against every corrupted snapshot either works or returns an error.
//!
//! Failures are collected, grouped by kind, shrunk to a small reproducer (written to
//! `target/tmp/hostile-corpus/`) and printed; the test then fails with the count.
//! `GPUCTL_CORPUS_ONLY=N` reruns blueprint input N alone; `GPUCTL_CORPUS_SKIP=N,M` leaves inputs out
//! (to see past a hang); `GPUCTL_CORPUS_LIST=1` lists the inputs without running them;
//! `GPUCTL_CORPUS_SEED` changes the corpus.

mod hostile;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpuctl::settings::Style;
use gpuctl_core::blueprint::yaml::SourceTree;
use gpuctl_core::live::LiveView;
use gpuctl_core::located::{FileReport, Severity};
use gpuctl_core::plan::{Plan, PlanOptions};
use gpuctl_core::profiles::Catalog;
use gpuctl_core::render::{RenderedSet, Templates};
use gpuctl_core::snapshot::Snapshot;
use serde_json::Value;

use hostile::mutate::{self, Seed};

// ---------------------------------------------------------------------------------------------
// Memory: a counting allocator

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = CURRENT.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(n: usize) {
    CURRENT.fetch_sub(n, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f`, returning its result and the most memory it held above what was live before.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

const MIB: usize = 1024 * 1024;

/// The memory bound of an input of `len` bytes (see the module comment).
fn memory_bound(len: usize) -> usize {
    256 * MIB + 64 * len
}

/// The time bound of one input, in CPU time of this process (all its threads: render parses in
/// parallel), not wall time: a CI machine busy with other work (the release build beside the
/// tests) must not trip it, only a blow-up. Measured on wall time it did: the slowest input (8,000
/// rendered objects from 2,000 namespaces) took 23 s beside a release build and a cluster test
/// run, against about 4-6 s alone; the quadratic cases this caught took 35 s and more.
const TIME_BOUND: Duration = Duration::from_secs(20);

/// CPU time this process has used so far (every thread), for [`TIME_BOUND`].
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}
/// The watchdog's limit: past it the input is hung, and the test exits naming it.
const HANG: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Panics: caught per stage, with where they happened

static LAST_PANIC: Mutex<Option<(String, String)>> = Mutex::new(None);

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_else(|| "<unknown>".into());
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "<non-string panic>".into());
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some((location, message));
    }));
}

/// Runs one stage; a panic becomes a failure of kind `panic in STAGE at FILE:LINE`.
fn guarded<T>(
    stage: &str,
    failures: &mut Vec<(String, String)>,
    f: impl FnOnce() -> T,
) -> Option<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(_) => {
            let (location, message) = LAST_PANIC
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_else(|| ("<unknown>".into(), "<no message>".into()));
            failures.push((
                format!("panic in {stage} at {location}"),
                first_chars(&message, 400),
            ));
            None
        }
    }
}

fn first_chars(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

// ---------------------------------------------------------------------------------------------
// The pipeline under test

struct Env {
    catalog: &'static Catalog,
    templates: Templates,
    opts: gpuctl_core::validate::Options,
    rt: tokio::runtime::Runtime,
    /// The shipped snapshot, for plans of accepted blueprints of its cluster.
    snapshot: Snapshot,
    /// The rendered seed blueprint the snapshot was captured for, for corrupted snapshots.
    seed_set: RenderedSet,
    tmp: tempfile::TempDir,
}

const SNAPSHOT_BLUEPRINT: &str = "dgx-h100-training.yaml";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// What one input did.
#[derive(Default)]
struct Outcome {
    failures: Vec<(String, String)>,
    accepted: bool,
    rendered: bool,
    planned: bool,
    peak: usize,
}

/// Runs one stage under `catch_unwind` and the allocator's peak.
fn stage<T>(out: &mut Outcome, name: &str, f: impl FnOnce() -> T) -> Option<T> {
    let mut failures = Vec::new();
    let (r, peak) = measured(|| guarded(name, &mut failures, f));
    out.failures.extend(failures);
    out.peak = out.peak.max(peak);
    r
}

/// A plan on the runtime; after a panic the runtime is replaced, as it may be mid-poll.
fn plan_on(
    rt: &mut tokio::runtime::Runtime,
    out: &mut Outcome,
    name: &str,
    set: &RenderedSet,
    live: LiveView,
) -> Option<Result<Plan, gpuctl_core::plan::PlanError>> {
    let r = stage(out, name, || {
        gpuctl_core::plan::plan(set, &live, PlanOptions::default())
    });
    if r.is_none() {
        *rt = runtime();
    }
    r
}

impl Env {
    /// Load, validate, the findings renderers, render and plan for one blueprint.
    fn blueprint(&mut self, seed: &str, bytes: &[u8]) -> Outcome {
        let mut out = Outcome::default();
        let text = std::str::from_utf8(bytes).ok();
        let shown = text.map_or_else(
            || String::from_utf8_lossy(bytes).to_string(),
            str::to_string,
        );
        let file = self.tmp.path().join("hostile.yaml");
        if text.is_none() {
            std::fs::write(&file, bytes).expect("write the input");
        }
        let file_name = file.display().to_string();
        let loaded = stage(&mut out, "load", || match text {
            Some(t) => gpuctl_core::blueprint::load_str(&file_name, t),
            None => gpuctl_core::blueprint::load_file(&file),
        });
        let Some(loaded) = loaded else { return out };
        let validated = match loaded {
            Ok(l) => {
                let (catalog, opts) = (self.catalog, self.opts);
                match stage(&mut out, "validate", || {
                    gpuctl_core::validate::validate(l, catalog, opts)
                }) {
                    Some(v) => v,
                    None => return out,
                }
            }
            Err(report) => Err(report),
        };
        let validated = match validated {
            Ok(v) => v,
            Err(report) => {
                if report.count(Severity::Error) == 0 {
                    out.failures
                        .push(("rejected without an error finding".into(), String::new()));
                }
                check_positions(&report, &shown, &mut out.failures);
                self.outputs(&mut out, &report);
                return out;
            }
        };
        out.accepted = true;
        let warnings = FileReport {
            file: validated.file().to_string(),
            findings: validated.warnings().to_vec(),
            source: shown.clone(),
        };
        check_positions(&warnings, &shown, &mut out.failures);
        self.outputs(&mut out, &warnings);

        let (catalog, templates) = (self.catalog, &self.templates);
        let rendered = stage(&mut out, "render", || {
            gpuctl_core::render::render(&validated, catalog, templates)
        });
        let set = match rendered {
            Some(Ok(set)) => set,
            Some(Err(e)) => {
                out.failures.push((
                    format!(
                        "validate accepts, render refuses: {}",
                        variant(&format!("{e:?}"))
                    ),
                    first_chars(&e.to_string(), 400),
                ));
                return out;
            }
            None => return out,
        };
        out.rendered = true;
        check_rendered_names(&set, &mut out.failures);
        stage(&mut out, "render output (to_yaml)", || set.to_yaml());

        let plan = plan_on(
            &mut self.rt,
            &mut out,
            "plan (offline)",
            &set,
            LiveView::offline(),
        );
        match plan {
            Some(Ok(plan)) => {
                out.planned = true;
                self.plan_outputs(&mut out, &plan);
            }
            Some(Err(e)) => out.failures.push((
                format!(
                    "validate accepts, plan (offline) refuses: {}",
                    variant(&format!("{e:?}"))
                ),
                first_chars(&e.to_string(), 400),
            )),
            None => {}
        }
        if seed == SNAPSHOT_BLUEPRINT {
            let plan = plan_on(
                &mut self.rt,
                &mut out,
                "plan (snapshot)",
                &set,
                self.snapshot
                    .live_view(&gpuctl_core::plan::parent_of(&set).id()),
            );
            match plan {
                Some(Ok(plan)) => self.plan_outputs(&mut out, &plan),
                Some(Err(e)) => out.failures.push((
                    format!(
                        "validate accepts, plan (shipped snapshot) refuses: {}",
                        variant(&format!("{e:?}"))
                    ),
                    first_chars(&e.to_string(), 400),
                )),
                None => {}
            }
        }
        out
    }

    /// The three findings renderers.
    fn outputs(&self, out: &mut Outcome, report: &FileReport) {
        let reports = std::slice::from_ref(report);
        stage(out, "output::human", || {
            gpuctl::output::human(reports, Style::Plain)
        });
        stage(out, "output::json", || gpuctl::output::json(reports));
        stage(out, "output::sarif", || gpuctl::output::sarif(reports));
    }

    /// The plan renderers, and the saved plan read back.
    fn plan_outputs(&self, out: &mut Outcome, plan: &Plan) {
        stage(out, "output::plan::human", || {
            gpuctl::output::plan::human(plan, Style::Plain, true)
        });
        stage(out, "output::plan::markdown", || {
            gpuctl::output::plan::markdown(plan)
        });
        // The saved form (`--out`) is the one apply reads; the printed JSON is masked and refused.
        let back = stage(out, "plan JSON round trip", || {
            Plan::from_json(&plan.to_saved_json())
        });
        if let Some(Err(e)) = back {
            out.failures.push((
                "a saved plan does not read back".into(),
                first_chars(&e.to_string(), 400),
            ));
        }
    }

    /// Read a (corrupted) snapshot and plan the seed blueprint against it.
    fn snapshot(&mut self, text: &str) -> Outcome {
        let mut out = Outcome::default();
        let path = self.tmp.path().join("snapshot.json");
        std::fs::write(&path, text).expect("write the snapshot");
        let Some(read) = stage(&mut out, "Snapshot::read", || Snapshot::read(&path)) else {
            return out;
        };
        let Ok(snap) = read else { return out };
        out.accepted = true;
        let plan = plan_on(
            &mut self.rt,
            &mut out,
            "plan (corrupted snapshot)",
            &self.seed_set,
            snap.live_view(&gpuctl_core::plan::parent_of(&self.seed_set).id()),
        );
        if let Some(Ok(plan)) = plan {
            out.planned = true;
            self.plan_outputs(&mut out, &plan);
        }
        out
    }
}

/// The variant name of an error's `Debug` text.
fn variant(debug: &str) -> String {
    debug
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .next()
        .unwrap_or(debug)
        .to_string()
}

/// A finding's message with the specifics taken out, to group findings by what they say.
fn message_shape(message: &str) -> String {
    let mut out = String::new();
    let mut in_tick = false;
    let mut last_digit = false;
    for c in message.chars() {
        if c == '`' {
            in_tick = !in_tick;
            if in_tick {
                out.push_str("`…`");
            }
            continue;
        }
        if in_tick {
            continue;
        }
        if c.is_ascii_digit() {
            if !last_digit {
                out.push('N');
            }
            last_digit = true;
            continue;
        }
        last_digit = false;
        out.push(c);
    }
    first_chars(&out, 70)
}

/// Problems of the whole file have no position: the size limit, an unreadable file, a file that
/// is not a regular file (messages of `gpuctl_core::input` and the loader's own size check).
fn whole_file(f: &gpuctl_core::located::Finding) -> bool {
    f.rule == "GPU001"
        && (f.message.contains(" bytes; over ")
            || f.message.contains(" bytes is refused")
            || f.message.starts_with("cannot read")
            || f.message.contains("not a regular file"))
}

/// Lines as YAML counts them (`\r\n`, `\r` and `\n` end a line), in characters.
fn line_lengths(text: &str) -> Vec<usize> {
    let mut out = vec![0];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push(0);
            }
            '\n' => out.push(0),
            _ => *out.last_mut().expect("one line") += 1,
        }
    }
    out
}

fn check_positions(report: &FileReport, text: &str, failures: &mut Vec<(String, String)>) {
    let lines = line_lengths(text);
    for f in &report.findings {
        let what = format!("{} {}: {}", f.rule, f.severity, message_shape(&f.message));
        let detail = format!(
            "{} {} at `{}` ({:?}): {}",
            f.rule,
            f.severity,
            first_chars(&f.path, 80),
            f.pos,
            first_chars(&f.message, 300)
        );
        match f.pos {
            None if f.severity == Severity::Error && !whole_file(f) => {
                failures.push((format!("error finding without a position: {what}"), detail));
            }
            None => {}
            Some(p) if p.line == 0 || p.column == 0 => {
                failures.push((format!("position with line or column 0: {what}"), detail));
            }
            Some(p) => {
                let inside = p.line <= lines.len() && p.column <= lines[p.line - 1] + 1;
                if !inside {
                    failures.push((
                        format!("position outside the file: {what}"),
                        format!(
                            "{detail} (the file has {} lines; that line has {} chars)",
                            lines.len(),
                            lines.get(p.line - 1).copied().unwrap_or(0)
                        ),
                    ));
                }
            }
        }
    }
}

// Kubernetes naming rules, as the API server applies them (apimachinery `validation`).

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(dns_label)
}

fn label_part(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

fn label_key(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => dns_subdomain(prefix) && label_part(name, 63),
        None => label_part(s, 63),
    }
}

fn label_value(s: &str) -> bool {
    s.is_empty() || label_part(s, 63)
}

/// Names, namespaces and labels of rendered objects and node patches must be ones the API server
/// accepts: otherwise validate passed a blueprint apply cannot apply (and `render -o` would write a
/// file named after it).
fn check_rendered_names(set: &RenderedSet, failures: &mut Vec<(String, String)>) {
    let mut bad = |what: String, value: &str| {
        failures.push((
            format!("validate accepts, render writes an invalid {what}"),
            format!("{what}: {}", first_chars(&format!("{value:?}"), 120)),
        ));
    };
    for o in &set.objects {
        let name_ok = if o.kind == "Namespace" {
            dns_label(&o.name)
        } else {
            dns_subdomain(&o.name)
        };
        if !name_ok {
            bad(format!("{} name", o.kind), &o.name);
        }
        if let Some(ns) = &o.namespace
            && !dns_label(ns)
        {
            bad(format!("{} namespace", o.kind), ns);
        }
        if let Some(labels) = o.manifest["metadata"]["labels"].as_object() {
            for (k, v) in labels {
                if !label_key(k) {
                    bad(format!("{} label key", o.kind), k);
                }
                if !v.as_str().is_some_and(label_value) {
                    bad(format!("{} label value", o.kind), &v.to_string());
                }
            }
        }
    }
    for p in &set.node_patches {
        for (k, v) in p.labels.iter().chain(&p.selector) {
            if !label_key(k) {
                bad("node label key".into(), k);
            }
            if !label_value(v) {
                bad("node label value".into(), v);
            }
        }
        for t in &p.taints {
            if !label_key(&t.key) {
                bad("node taint key".into(), &t.key);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The corpus

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn seeds() -> Vec<Seed> {
    // The shipped examples, and fixtures of fields no example uses yet (DRA shapes and claims,
    // accounting).
    let mut files: Vec<PathBuf> = [
        "blueprints",
        "tests/fixtures/dra",
        "tests/fixtures/accounting",
    ]
    .iter()
    .flat_map(|dir| std::fs::read_dir(root().join(dir)).expect("seed directory"))
    .map(|e| e.expect("entry").path())
    .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
    .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("seed blueprint");
            let tree = SourceTree::parse(&text).expect("seed parses").value;
            Seed {
                name: p.file_name().expect("name").to_string_lossy().to_string(),
                text,
                tree,
            }
        })
        .collect()
}

/// Fixed edge cases next to the generated ones.
fn special_cases() -> Vec<(&'static str, Vec<u8>)> {
    let header = "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\n";
    vec![
        ("empty file", Vec::new()),
        ("only a BOM", "\u{feff}".into()),
        ("only `---`", b"---\n".to_vec()),
        ("`null`", b"null\n".to_vec()),
        ("`[]`", b"[]\n".to_vec()),
        ("`{}`", b"{}\n".to_vec()),
        ("`~`", b"~".to_vec()),
        ("only a comment", b"# nothing\n".to_vec()),
        ("header only", header.into()),
        (
            "header, empty spec",
            format!("{header}metadata: {{name: x}}\nspec: {{}}\n").into(),
        ),
        (
            "header, spec null",
            format!("{header}metadata: {{name: x}}\nspec:\n").into(),
        ),
        ("invalid UTF-8 at the start", vec![0xff, 0xfe, b'a']),
        (
            "UTF-16 LE BOM",
            vec![0xff, 0xfe, b'a', 0, b':', 0, b' ', 0, b'1', 0],
        ),
        ("NUL bytes", vec![0; 64]),
        // Issue 10: the position index kept a path string per node, so leaves under a deep chain
        // of long explicit keys cost key length x depth each (a 260 KB file aborted at 2 GB).
        ("leaves under deep, long explicit keys", {
            let mut b = String::from(header);
            b.push_str("metadata: {name: x}\nspec:\n  gpuOperator:\n    values:\n");
            for d in 0..40 {
                b.push_str(&format!(
                    "{}? {}{d}\n{}:\n",
                    " ".repeat(6 + 2 * d),
                    "k".repeat(1000),
                    " ".repeat(6 + 2 * d)
                ));
            }
            b.push_str(&format!("{}leaves: [", " ".repeat(6 + 2 * 40)));
            b.push_str(&vec!["1"; 20_000].join(","));
            b.push_str("]\n");
            b.into_bytes()
        }),
        ("over the size limit", {
            let mut b = header.as_bytes().to_vec();
            b.extend(std::iter::repeat_n(b'#', 17 * 1024 * 1024));
            b
        }),
    ]
}

struct Failure {
    kind: String,
    detail: String,
    origin: String,
    input: Input,
}

#[derive(Clone)]
enum Input {
    Blueprint { seed: String, bytes: Vec<u8> },
    Snapshot { text: String },
    None,
}

/// Tally of what the corpus did.
#[derive(Default)]
struct Stats {
    inputs: usize,
    rejected: usize,
    accepted: usize,
    rendered: usize,
    planned: usize,
    snapshots: usize,
    snapshots_read: usize,
    snapshots_planned: usize,
    slowest: (Duration, String),
    peak: (usize, String),
}

static WATCHED_SINCE_MS: AtomicU64 = AtomicU64::new(0);
static WATCHED: Mutex<String> = Mutex::new(String::new());
/// Failure kinds so far, one per line, for the watchdog's message.
static SO_FAR: Mutex<String> = Mutex::new(String::new());

fn watchdog(start: Instant) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let since = WATCHED_SINCE_MS.load(Ordering::Relaxed);
            let now = start.elapsed().as_millis() as u64;
            let hang = env_usize("GPUCTL_CORPUS_HANG_SECS")
                .map_or(HANG, |s| Duration::from_secs(s as u64));
            if since > 0 && now.saturating_sub(since) > hang.as_millis() as u64 {
                let what = WATCHED.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let so_far = SO_FAR.lock().unwrap_or_else(|e| e.into_inner()).clone();
                eprintln!(
                    "hostile corpus: an input has run for over {hang:?}, taken as a hang: {what}\n\
                     failure kinds seen before it (rerun without it: GPUCTL_CORPUS_SKIP=N,...):\n{so_far}"
                );
                std::process::exit(3);
            }
        }
    });
}

fn watch(start: Instant, what: &str) {
    *WATCHED.lock().unwrap_or_else(|e| e.into_inner()) = what.to_string();
    WATCHED_SINCE_MS.store(start.elapsed().as_millis().max(1) as u64, Ordering::Relaxed);
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

const BLUEPRINTS: usize = 2000;
const SNAPSHOTS: usize = 100;
const MASTER_SEED: u64 = 0x6770_7563_746c_0010;

#[test]
fn hostile_corpus() {
    let started = Instant::now();
    let master = std::env::var("GPUCTL_CORPUS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(MASTER_SEED);
    let only = env_usize("GPUCTL_CORPUS_ONLY");
    let seeds = seeds();
    assert!(!seeds.is_empty(), "no seed blueprints in blueprints/");
    let snapshot_text =
        std::fs::read_to_string(root().join("blueprints/snapshots/dgx-h100-training.json"))
            .expect("seed snapshot");
    let snapshot_seed: Value = serde_json::from_str(&snapshot_text).expect("seed snapshot JSON");

    // Everything built once stays allocated outside the measured regions.
    let catalog = Catalog::embedded();
    let today = jiff::civil::date(2026, 11, 30);
    let opts = gpuctl_core::validate::Options { today };
    let templates = Templates::load(None).expect("embedded templates");
    let seed_set = {
        let text = &seeds
            .iter()
            .find(|s| s.name == SNAPSHOT_BLUEPRINT)
            .expect("the snapshot's blueprint")
            .text;
        let loaded =
            gpuctl_core::blueprint::load_str(SNAPSHOT_BLUEPRINT, text).expect("seed loads");
        let v = gpuctl_core::validate::validate(loaded, catalog, opts).expect("seed validates");
        gpuctl_core::render::render(&v, catalog, &templates).expect("seed renders")
    };
    let mut env = Env {
        catalog,
        templates,
        opts,
        rt: runtime(),
        snapshot: Snapshot::read(&root().join("blueprints/snapshots/dgx-h100-training.json"))
            .expect("seed snapshot reads"),
        seed_set,
        tmp: tempfile::tempdir().expect("tempdir"),
    };
    // Warm-up: lazily built statics (catalog, regexes) are not the first input's memory.
    let _ = env.blueprint(&seeds[0].name, seeds[0].text.as_bytes());

    let default_hook = std::panic::take_hook();
    install_panic_hook();
    watchdog(started);

    let mut failures: Vec<Failure> = Vec::new();
    let mut stats = Stats::default();
    let record = |stats: &mut Stats,
                  failures: &mut Vec<Failure>,
                  origin: String,
                  input: Input,
                  len: usize,
                  elapsed: Duration,
                  out: Outcome| {
        if elapsed > stats.slowest.0 {
            stats.slowest = (elapsed, origin.clone());
        }
        if out.peak > stats.peak.0 {
            stats.peak = (out.peak, origin.clone());
        }
        let mut found = out.failures;
        if elapsed > TIME_BOUND {
            found.push((
                format!("took over {TIME_BOUND:?}"),
                format!("{:.1} s", elapsed.as_secs_f64()),
            ));
        }
        if out.peak > memory_bound(len) {
            found.push((
                "memory over 256 MiB + 64 x the input size".to_string(),
                format!(
                    "{} MiB held for a {} byte input (bound {} MiB)",
                    out.peak / MIB,
                    len,
                    memory_bound(len) / MIB
                ),
            ));
        }
        // Keep the bytes of the first few failures of each kind only: inputs can be large.
        for (kind, detail) in found {
            let seen = failures.iter().filter(|f| f.kind == kind).count();
            if seen == 0 {
                let mut so_far = SO_FAR.lock().unwrap_or_else(|e| e.into_inner());
                so_far.push_str(&format!("  {kind}: {}\n", first_chars(&origin, 200)));
            }
            failures.push(Failure {
                kind,
                detail,
                origin: origin.clone(),
                input: if seen < 3 { input.clone() } else { Input::None },
            });
        }
    };

    // Fixed edge cases.
    if only.is_none() {
        for (name, bytes) in special_cases() {
            let origin = format!("special case: {name}");
            watch(started, &origin);
            let t = cpu_time();
            let out = env.blueprint("special", &bytes);
            let elapsed = cpu_time().saturating_sub(t);
            stats.inputs += 1;
            if out.accepted {
                stats.accepted += 1;
            } else {
                stats.rejected += 1;
            }
            let input = Input::Blueprint {
                seed: "special".into(),
                bytes: if bytes.len() > 1_000_000 {
                    Vec::new()
                } else {
                    bytes.clone()
                },
            };
            record(
                &mut stats,
                &mut failures,
                origin,
                input,
                bytes.len(),
                elapsed,
                out,
            );
        }
    }

    // Generated blueprints.
    let range = match only {
        Some(i) => i..i + 1,
        None => 0..env_usize("GPUCTL_CORPUS_INPUTS").unwrap_or(BLUEPRINTS),
    };
    let mut generated = 0;
    let skip: Vec<usize> = std::env::var("GPUCTL_CORPUS_SKIP")
        .unwrap_or_default()
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    for i in range {
        if skip.contains(&i) {
            continue;
        }
        let input = mutate::generate(i, master, &seeds);
        let origin = format!(
            "input #{i} ({}): {}",
            input.seed,
            input.mutations.join("; ")
        );
        if std::env::var_os("GPUCTL_CORPUS_LIST").is_some() {
            eprintln!("{origin}");
            continue;
        }
        watch(started, &origin);
        let t = cpu_time();
        let out = env.blueprint(&input.seed, &input.bytes);
        let elapsed = cpu_time().saturating_sub(t);
        generated += 1;
        stats.inputs += 1;
        if out.accepted {
            stats.accepted += 1;
        } else {
            stats.rejected += 1;
        }
        stats.rendered += usize::from(out.rendered);
        stats.planned += usize::from(out.planned);
        let len = input.bytes.len();
        let input = Input::Blueprint {
            seed: input.seed,
            bytes: input.bytes,
        };
        record(&mut stats, &mut failures, origin, input, len, elapsed, out);
    }

    // Corrupted snapshots.
    let snapshot_count = if only.is_some() {
        0
    } else {
        env_usize("GPUCTL_CORPUS_SNAPSHOTS").unwrap_or(SNAPSHOTS)
    };
    for i in 0..snapshot_count {
        let s = hostile::snapshot::generate(i, master, &snapshot_seed);
        let origin = format!("snapshot #{i}: {}", s.corruptions.join("; "));
        watch(started, &origin);
        let t = cpu_time();
        let out = env.snapshot(&s.text);
        let elapsed = cpu_time().saturating_sub(t);
        stats.snapshots += 1;
        stats.snapshots_read += usize::from(out.accepted);
        stats.snapshots_planned += usize::from(out.planned);
        let len = s.text.len();
        record(
            &mut stats,
            &mut failures,
            origin,
            Input::Snapshot { text: s.text },
            len,
            elapsed,
            out,
        );
    }
    WATCHED_SINCE_MS.store(0, Ordering::Relaxed);
    let corpus_time = started.elapsed();

    // Shrink the first failure of each kind to a small reproducer.
    let reproducers = shrink(&mut env, &failures);
    std::panic::set_hook(default_hook);

    eprintln!(
        "hostile corpus: {} blueprint inputs ({generated} generated), {} rejected, {} accepted \
         ({} rendered, {} planned); {} corrupted snapshots ({} read, {} planned); slowest {} ms of CPU \
         ({}); peak {} MiB above baseline ({}); corpus {:.1} s, with shrinking {:.1} s",
        stats.inputs,
        stats.rejected,
        stats.accepted,
        stats.rendered,
        stats.planned,
        stats.snapshots,
        stats.snapshots_read,
        stats.snapshots_planned,
        stats.slowest.0.as_millis(),
        first_chars(&stats.slowest.1, 200),
        stats.peak.0 / MIB,
        first_chars(&stats.peak.1, 200),
        corpus_time.as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
    if only.is_none() {
        assert!(
            generated + skip.len() >= BLUEPRINTS || env_usize("GPUCTL_CORPUS_INPUTS").is_some()
        );
        assert!(stats.snapshots >= 50 || env_usize("GPUCTL_CORPUS_SNAPSHOTS").is_some());
    }
    if failures.is_empty() {
        return;
    }
    eprintln!("{}", report(&failures, &reproducers));
    let kinds = failures
        .iter()
        .map(|f| f.kind.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    panic!(
        "{} failures of {kinds} kinds in the hostile corpus (listed above; reproducers in {})",
        failures.len(),
        reproducer_dir().display()
    );
}

fn reproducer_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-corpus")
}

/// A shrunk input per failure kind.
struct Reproducer {
    bytes: Vec<u8>,
    file: PathBuf,
}

/// Most kinds shrunk, tries per kind, and the wall-clock budget of all shrinking.
const SHRINK_KINDS: usize = 50;
const SHRINK_TRIES: usize = 400;
const SHRINK_TIME: Duration = Duration::from_secs(60);
const SHRINK_TIME_PER_KIND: Duration = Duration::from_secs(8);

fn shrink(env: &mut Env, failures: &[Failure]) -> BTreeMap<String, Reproducer> {
    let dir = reproducer_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = BTreeMap::new();
    if failures.is_empty() {
        return out;
    }
    std::fs::create_dir_all(&dir).expect("reproducer dir");
    let deadline = Instant::now() + SHRINK_TIME;
    let mut kinds: Vec<&Failure> = Vec::new();
    for f in failures {
        if !kinds.iter().any(|k| k.kind == f.kind) {
            kinds.push(f);
        }
    }
    for (n, f) in kinds.into_iter().take(SHRINK_KINDS).enumerate() {
        let slug: String = f
            .kind
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(70)
            .collect();
        let kind = f.kind.clone();
        // Time and memory failures do not shrink: rerunning them is the expensive part.
        let shrinkable = !kind.starts_with("took over") && !kind.starts_with("memory over");
        // Each kind gets a slice of the budget, so one slow kind cannot starve the rest.
        let deadline = deadline.min(Instant::now() + SHRINK_TIME_PER_KIND);
        let (bytes, ext) = match &f.input {
            Input::Blueprint { seed, bytes } if !bytes.is_empty() => {
                let mut budget = if shrinkable && Instant::now() < deadline {
                    SHRINK_TRIES
                } else {
                    0
                };
                let seed = seed.clone();
                let mut fails = |b: &[u8]| {
                    Instant::now() < deadline
                        && env
                            .blueprint(&seed, b)
                            .failures
                            .iter()
                            .any(|(k, _)| *k == kind)
                };
                let mut start = bytes.clone();
                // Through the tree first (drops whole sections), when the input parses and the
                // re-emitted tree still fails the same way.
                if budget > 0
                    && let Ok(text) = std::str::from_utf8(bytes)
                    && let Ok(tree) = SourceTree::parse(text.trim_start_matches('\u{feff}'))
                {
                    let emitted =
                        |v: &Value| hostile::emit::yaml(v, &mut hostile::Rng::new(1)).into_bytes();
                    // Only when the tree is about as large as the text: aliases expand.
                    let first = emitted(&tree.value);
                    if first.len() <= 2 * bytes.len() + 10_000 && fails(&first) {
                        let small =
                            hostile::reduce::tree(tree.value, &mut budget, &mut |v: &Value| {
                                fails(&emitted(v))
                            });
                        start = emitted(&small);
                    }
                }
                let small = hostile::reduce::lines(&start, &mut budget, &mut fails);
                (small, "yaml")
            }
            Input::Snapshot { text } => {
                let mut budget = if shrinkable && Instant::now() < deadline {
                    SHRINK_TRIES
                } else {
                    0
                };
                let mut fails = |t: &str| {
                    Instant::now() < deadline
                        && env.snapshot(t).failures.iter().any(|(k, _)| *k == kind)
                };
                let small = match serde_json::from_str::<Value>(text) {
                    Ok(v) if budget > 0 => {
                        let v = hostile::reduce::tree(v, &mut budget, &mut |v: &Value| {
                            fails(&serde_json::to_string_pretty(v).unwrap_or_default())
                        });
                        serde_json::to_string_pretty(&v).unwrap_or_default()
                    }
                    _ => text.clone(),
                };
                (small.into_bytes(), "json")
            }
            _ => continue,
        };
        let file = dir.join(format!("{n:02}-{slug}.{ext}"));
        let _ = std::fs::write(&file, &bytes);
        out.insert(f.kind.clone(), Reproducer { bytes, file });
    }
    out
}

/// Failures grouped by kind: count, a few origins, and the shrunk reproducer of each.
fn report(failures: &[Failure], reproducers: &BTreeMap<String, Reproducer>) -> String {
    let mut by_kind: BTreeMap<&str, Vec<&Failure>> = BTreeMap::new();
    for f in failures {
        by_kind.entry(&f.kind).or_default().push(f);
    }
    let mut s = format!(
        "\n{} failures of {} kinds in the hostile corpus:\n",
        failures.len(),
        by_kind.len()
    );
    let mut printed = 0;
    for (n, (kind, fs)) in by_kind.iter().enumerate() {
        if printed >= 50 {
            s.push_str(&format!("... and {} more kinds\n", by_kind.len() - n));
            break;
        }
        s.push_str(&format!("\n[{}] {kind} ({} inputs)\n", n + 1, fs.len()));
        for f in fs.iter().take(2) {
            printed += 1;
            s.push_str(&format!(
                "  - {}\n    {}\n",
                first_chars(&f.origin, 300),
                f.detail
            ));
        }
        if let Some(r) = reproducers.get(*kind) {
            s.push_str(&format!(
                "  reproducer ({} bytes, {}):\n{}",
                r.bytes.len(),
                r.file.display(),
                hostile::reduce::excerpt(&r.bytes, 40)
            ));
        }
    }
    s
}
