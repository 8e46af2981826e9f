//! Local-file helpers of the control-plane processes (not the node's filesystem, which goes
//! through [`crate::host`]): one atomic write, used for the PKI ([`crate::tls`]) and the
//! credential files ([`crate::credentials`]).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Writes `bytes` to `path` atomically with permission bits `mode` (for example `0o600`): a
/// temporary file `.<name>.tmp-<pid>` in the same directory, created exclusively (`O_EXCL`) with
/// `mode` and chmod-ed to it past the umask, fsynced, renamed over `path`, then the directory
/// fsynced so the rename survives a power loss. Readers see the old content or the new, never a
/// part; the file never exists with wider permissions. The directory must exist.
///
/// Errors: the IO error of the step that failed; the temporary file is removed.
pub fn atomic_write(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    // A temporary file left by a crashed writer of the same pid.
    let _ = std::fs::remove_file(&tmp);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::atomic_write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn atomic_write_replaces_with_the_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        atomic_write(&path, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("secret")]);
    }

    #[test]
    fn a_failed_write_removes_its_temporary_file_and_keeps_the_old_content() {
        let dir = tempfile::tempdir().unwrap();
        // A directory in the way: the rename fails after the temporary file was written.
        let path = dir.path().join("taken");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("inside"), "x").unwrap();
        assert!(atomic_write(&path, b"new", 0o600).is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("taken")]);
        assert!(path.is_dir());
    }
}
