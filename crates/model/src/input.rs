//! Reading the files gpuctl is given (blueprints, snapshots, saved plans, template overrides):
//! bounded, and never blocking on something that is not a file.
//!
//! In CI these files come from pull requests, so they are hostile input. Every read goes through
//! [`read`], which refuses anything but a regular file or standard input (`-`) before reading a
//! byte (a FIFO would block forever, `/dev/zero` never ends), refuses a file whose size is over the
//! limit without reading it, and reads at most the limit plus one byte, so a file that grows while
//! it is read, or an endless standard input, is refused too.

use std::io::Read;
use std::path::Path;

/// The path that means standard input (as for kubectl and Terraform).
pub const STDIN: &str = "-";
/// How standard input is named in findings and errors.
pub const STDIN_NAME: &str = "<stdin>";

/// How many bytes one kind of input may have, and what to do about a bigger one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// What is read (`blueprint`, `snapshot`), for messages.
    pub what: &'static str,
    /// Largest accepted size in bytes.
    pub bytes: u64,
    /// What to do with a bigger one.
    pub hint: &'static str,
}

/// Blueprints: real ones are tens of KiB, and the generated 5,000-object benchmark blueprint
/// (64 pools, 1,000 tenant namespaces; `testgen::large_blueprint`) is 154 KiB, so 4 MiB is 26 times
/// the largest cluster gpuctl is tested with, and a blueprint's parse stays a few tens of MiB.
pub const BLUEPRINT: Limit = Limit {
    what: "blueprint",
    bytes: 4 * MIB,
    hint: "split the cluster into several blueprints",
};

/// Snapshots: a snapshot of the 4,160-object benchmark cluster (with managedFields and 512 nodes)
/// weighs 6.9 MiB, one of 5,000 objects 7.9 MiB; 64 MiB is 8 times that. Parsing holds about 11
/// bytes of memory per byte of snapshot (measured: a 63.5 MiB snapshot peaks at 0.8 GB RSS), so
/// the limit also keeps a plan well under the 2 GB a CI runner can spare.
pub const SNAPSHOT: Limit = Limit {
    what: "snapshot",
    bytes: 64 * MIB,
    hint: "capture a snapshot of one blueprint's objects with `gpuctl snapshot BLUEPRINT --out FILE`",
};

/// Saved plans: the offline plan of the 4,160-object benchmark blueprint (every object a create,
/// with all its fields) is 6.4 MiB; 64 MiB is 10 times that, and parses like a snapshot.
pub const SAVED_PLAN: Limit = Limit {
    what: "saved plan",
    bytes: 64 * MIB,
    hint: "save the plan of one blueprint with `gpuctl plan BLUEPRINT --out FILE`",
};

/// What `gpuctl apply` reads before it knows whether it was given a blueprint or a saved plan:
/// the larger of the two limits; a blueprint over [`BLUEPRINT`] is then refused as a blueprint.
pub const BLUEPRINT_OR_PLAN: Limit = Limit {
    what: "blueprint or saved plan",
    bytes: SAVED_PLAN.bytes,
    hint: SAVED_PLAN.hint,
};

/// One `--templates` override: the largest shipped template is 11 KiB; 1 MiB is 90 times that.
pub const TEMPLATE: Limit = Limit {
    what: "template",
    bytes: MIB,
    hint: "a template override replaces one shipped template (see `templates/`)",
};

/// Every file of a `--templates` directory together: the shipped set is 58 KiB.
pub const TEMPLATE_DIR_BYTES: u64 = 8 * MIB;

/// Chart archives named by `gpuOperator.chart.path`: the GPU Operator v26.7.0 chart with its
/// node-feature-discovery dependency is 126 KiB; 32 MiB is 250 times that.
pub const CHART: Limit = Limit {
    what: "chart archive",
    bytes: 32 * MIB,
    hint: "give the chart as the `.tgz` archive `helm package` or `helm pull` writes",
};

const MIB: u64 = 1024 * 1024;

/// A chart named by a blueprint, found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalChart {
    /// Absolute path.
    pub path: std::path::PathBuf,
    /// `sha256:<hex>` of an archive (`None` for a chart directory).
    pub digest: Option<String>,
}

/// The chart at `relative` (as the blueprint writes it) beside the blueprint in `base`: it must
/// stay inside `base` once symlinks are resolved (a pull request cannot point gpuctl at another
/// file of the machine), and be a chart directory (with `Chart.yaml`) or a regular file, read
/// under [`CHART`] to compute its digest.
pub fn chart(base: &Path, relative: &str) -> Result<LocalChart, String> {
    let root = base.canonicalize().map_err(|e| {
        format!(
            "cannot resolve the blueprint's directory `{}`: {e}",
            base.display()
        )
    })?;
    let joined = root.join(relative);
    let path = joined
        .canonicalize()
        .map_err(|e| format!("`{}`: {e}", joined.display()))?;
    if !path.starts_with(&root) {
        return Err(format!(
            "`{relative}` resolves to `{}`, outside the blueprint's directory `{}`",
            path.display(),
            root.display()
        ));
    }
    if path.is_dir() {
        if !path.join("Chart.yaml").is_file() {
            return Err(format!(
                "`{}` is a directory without Chart.yaml",
                path.display()
            ));
        }
        return Ok(LocalChart { path, digest: None });
    }
    let bytes = read(&path, &CHART).map_err(|e| e.to_string())?;
    Ok(LocalChart {
        path,
        digest: Some(sha256(&bytes)),
    })
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(bytes);
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
#[error("`{name}`: {problem}; {}", problem.hint(limit))]
pub struct InputError {
    /// The input as named in messages (`<stdin>` for `-`).
    pub name: String,
    /// The limit it was read under.
    pub limit: Limit,
    /// What is wrong.
    #[source]
    pub problem: Problem,
}

/// What is wrong with an input.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The file could not be opened or read.
    #[error("cannot read the file: {0}")]
    Io(#[from] std::io::Error),
    /// A directory, FIFO, device or socket: reading one may block forever or never end.
    #[error("it is a {0}, not a regular file")]
    NotAFile(&'static str),
    /// Over the limit.
    #[error("the {what} is {size} bytes; a {what} over {limit} bytes is refused")]
    TooLarge {
        /// `blueprint`, `snapshot`, ...
        what: &'static str,
        /// Its size, or "more than" the limit when it was read from a stream.
        size: String,
        /// The limit.
        limit: u64,
    },
}

impl Problem {
    /// What to do about it.
    pub fn hint(&self, limit: &Limit) -> String {
        match self {
            Problem::Io(_) => "check the path and permissions".into(),
            Problem::NotAFile(_) => format!(
                "give the {} as a file, or as `-` to read it from standard input",
                limit.what
            ),
            Problem::TooLarge { .. } => limit.hint.into(),
        }
    }
}

/// Whether `path` means standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// How an input is named in messages: its path, or `<stdin>` for `-`.
pub fn name(path: &Path) -> String {
    if is_stdin(path) {
        STDIN_NAME.to_string()
    } else {
        path.display().to_string()
    }
}

/// The command-line argument that names an input again, for "run this" hints: `-` for `<stdin>`.
pub fn as_argument(name: &str) -> &str {
    if name == STDIN_NAME { STDIN } else { name }
}

/// Reads `path` (or standard input for `-`) under `limit`. Refuses anything but a regular file
/// before opening it, a file over the limit before reading it, and stops reading one byte past the
/// limit, so it neither blocks on a FIFO nor reads an endless device.
pub fn read(path: &Path, limit: &Limit) -> Result<Vec<u8>, InputError> {
    let fail = |problem: Problem| InputError {
        name: name(path),
        limit: *limit,
        problem,
    };
    if is_stdin(path) {
        return read_bounded(std::io::stdin().lock(), 0, limit).map_err(fail);
    }
    // Checked before opening: opening a FIFO for reading blocks until a writer appears.
    let meta = std::fs::metadata(path).map_err(|e| fail(e.into()))?;
    check_kind(&meta).map_err(fail)?;
    let file = std::fs::File::open(path).map_err(|e| fail(e.into()))?;
    // And again on the opened file, which is what is read even if the path changed in between.
    let meta = file.metadata().map_err(|e| fail(e.into()))?;
    check_kind(&meta).map_err(fail)?;
    if meta.len() > limit.bytes {
        return Err(fail(Problem::TooLarge {
            what: limit.what,
            size: meta.len().to_string(),
            limit: limit.bytes,
        }));
    }
    read_bounded(file, meta.len(), limit).map_err(fail)
}

/// Reads at most `limit.bytes + 1` bytes; one more than the limit means too large.
fn read_bounded(r: impl Read, expected: u64, limit: &Limit) -> Result<Vec<u8>, Problem> {
    // `expected` is at most the limit here; a stream gets a modest start and grows as it goes.
    let mut buf = Vec::with_capacity(usize::try_from(expected.max(8 * 1024)).unwrap_or(0) + 1);
    r.take(limit.bytes + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit.bytes {
        return Err(Problem::TooLarge {
            what: limit.what,
            size: format!("more than {}", limit.bytes),
            limit: limit.bytes,
        });
    }
    Ok(buf)
}

fn check_kind(meta: &std::fs::Metadata) -> Result<(), Problem> {
    let t = meta.file_type();
    if t.is_file() {
        return Ok(());
    }
    let kind = if t.is_dir() {
        "directory"
    } else {
        kind_of_special(&t)
    };
    Err(Problem::NotAFile(kind))
}

#[cfg(unix)]
fn kind_of_special(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "FIFO (named pipe)"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

#[cfg(not(unix))]
fn kind_of_special(_: &std::fs::FileType) -> &'static str {
    "special file"
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_chart_path_stays_beside_the_blueprint_and_an_archive_is_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("repo");
        std::fs::create_dir_all(base.join("charts/dir-chart")).unwrap();
        std::fs::write(base.join("charts/gpu-operator.tgz"), b"archive bytes").unwrap();
        std::fs::write(dir.path().join("outside.tgz"), b"secret").unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.tgz"), base.join("link.tgz")).unwrap();

        let c = chart(&base, "charts/gpu-operator.tgz").unwrap();
        assert_eq!(c.digest.as_deref(), Some(sha256(b"archive bytes").as_str()));
        assert!(c.path.is_absolute() && c.path.ends_with("charts/gpu-operator.tgz"));
        let e = chart(&base, "link.tgz").unwrap_err();
        assert!(e.contains("outside the blueprint's directory"), "{e}");
        let e = chart(&base, "../outside.tgz").unwrap_err();
        assert!(e.contains("outside the blueprint's directory"), "{e}");
        let e = chart(&base, "charts/dir-chart").unwrap_err();
        assert!(e.contains("without Chart.yaml"), "{e}");
        std::fs::write(
            base.join("charts/dir-chart/Chart.yaml"),
            "name: gpu-operator\n",
        )
        .unwrap();
        assert_eq!(chart(&base, "charts/dir-chart").unwrap().digest, None);
        let e = chart(&base, "charts/missing.tgz").unwrap_err();
        assert!(e.contains("missing.tgz"), "{e}");
        assert_eq!(
            sha256(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    use super::*;

    const SMALL: Limit = Limit {
        what: "blueprint",
        bytes: 10,
        hint: "make it smaller",
    };

    #[test]
    fn a_file_within_the_limit_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bp.yaml");
        std::fs::write(&p, "0123456789").unwrap();
        assert_eq!(read(&p, &SMALL).unwrap(), b"0123456789");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_with_its_size_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bp.yaml");
        std::fs::write(&p, "01234567890").unwrap();
        let e = read(&p, &SMALL).unwrap_err().to_string();
        assert!(e.contains("bp.yaml`: the blueprint is 11 bytes"), "{e}");
        assert!(
            e.contains("over 10 bytes is refused; make it smaller"),
            "{e}"
        );
    }

    #[test]
    fn a_stream_is_read_one_byte_past_the_limit_and_no_further() {
        let endless = std::io::repeat(b'x');
        let e = read_bounded(endless, 0, &SMALL).unwrap_err();
        assert!(e.to_string().contains("more than 10 bytes"), "{e}");
        assert_eq!(read_bounded(&b"short"[..], 0, &SMALL).unwrap(), b"short");
    }

    #[test]
    fn a_directory_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(dir.path(), &BLUEPRINT).unwrap_err().to_string();
        assert!(e.contains("it is a directory, not a regular file"), "{e}");
        assert!(
            e.contains("or as `-` to read it from standard input"),
            "{e}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn dev_zero_is_refused_as_a_device() {
        let e = read(Path::new("/dev/zero"), &BLUEPRINT).unwrap_err();
        assert!(
            matches!(e.problem, Problem::NotAFile("character device")),
            "{e}"
        );
    }

    #[test]
    fn a_missing_file_names_itself() {
        let e = read(Path::new("no/such.yaml"), &BLUEPRINT)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("`no/such.yaml`: cannot read the file: "),
            "{e}"
        );
        assert!(e.ends_with("check the path and permissions"), "{e}");
    }

    #[test]
    fn dash_is_stdin_and_named_so() {
        assert!(is_stdin(Path::new("-")));
        assert!(!is_stdin(Path::new("./-")));
        assert_eq!(name(Path::new("-")), "<stdin>");
        assert_eq!(name(Path::new("a.yaml")), "a.yaml");
        assert_eq!(as_argument("<stdin>"), "-");
        assert_eq!(as_argument("a.yaml"), "a.yaml");
    }
}
