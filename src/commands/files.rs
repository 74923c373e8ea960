//! Writing a file whole: every file gpuctl writes for a later run (a saved plan, a snapshot, a
//! status picture) goes through [`write_atomically`], so it is complete or absent, never half
//! written, and nothing is written through a link someone placed.

use std::io::Write;
use std::path::Path;

/// Who may read a file gpuctl writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    /// Its owner only (mode 0600 on Unix): a saved plan or a snapshot carries credentials.
    Owner,
    /// As the umask allows (a picture).
    Default,
}

/// Writes `bytes` to `path` through a new temporary file beside it, created exclusively (so
/// nothing is written through a symlink an attacker placed) and with `readers`' mode from the
/// start, synced, then renamed over `path`: the file is complete or absent, a symlink at `path` is
/// replaced rather than followed, and an existing file's wider mode is not kept
/// (`OpenOptions::mode` applies only when a file is created). On an error the temporary file is
/// removed.
pub fn write_atomically(path: &Path, bytes: &[u8], readers: Readers) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("not a file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    if readers == Readers::Owner {
        std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    }
    let written = open.open(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Writes `bytes` to `path` readable by its owner only: a saved plan and a snapshot carry
/// credentials, so they are never readable by others, not even for an instant.
pub fn write_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically(path, bytes, Readers::Owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_a_link_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let path = dir.path().join("out");
        #[cfg(unix)]
        std::os::unix::fs::symlink(&target, &path).unwrap();
        write_atomically(&path, b"new", Readers::Default).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        #[cfg(unix)]
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporary file is left"
        );
        let err = write_atomically(dir.path(), b"x", Readers::Default);
        assert!(err.is_err(), "a directory is not replaced");
    }

    #[cfg(unix)]
    #[test]
    fn owner_only_narrows_an_existing_wider_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_owner_only(&path, b"secret").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
