//! The credential files a server writes for its own operators and sandbox nodes, and every side
//! reads (server, `mco up`, the simulator, the CLI): `<data-dir>/admin.token` and
//! `<data-dir>/tokens/<node>.token`, one secret per file, mode 0600. Issuing the tokens they hold
//! is the server's job ([`crate::api::auth::bootstrap_admin`], [`crate::api::auth::ensure_node_token`]).

use anyhow::Context;
use std::path::{Path, PathBuf};

/// The file `mco server` and `mco up` write the first admin token to (in the data dir).
pub const ADMIN_TOKEN_FILE: &str = "admin.token";

/// The token file of sandbox node `node` in `data_dir`: `<data_dir>/tokens/<node>.token`.
pub fn node_token_file(data_dir: &Path, node: &str) -> PathBuf {
    data_dir.join("tokens").join(format!("{node}.token"))
}

/// Writes `secret` and a newline to `path` readable and writable by its owner only (0600, set at
/// creation, so no other user ever sees it), atomically ([`crate::fsutil::atomic_write`]),
/// creating the parent directories.
///
/// Errors: the IO error, naming the path.
pub fn write_secret_file(path: &Path, secret: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    crate::fsutil::atomic_write(path, format!("{secret}\n").as_bytes(), 0o600)
        .with_context(|| format!("writing {}", path.display()))
}

/// The secret in a token file (trimmed), if the file exists and is not empty.
pub fn read_secret_file(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_secret_file_is_owner_only_and_reads_back_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = node_token_file(dir.path(), "worker-1");
        assert!(path.ends_with("tokens/worker-1.token"));
        assert_eq!(read_secret_file(&path), None);
        write_secret_file(&path, "s3cret").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "s3cret\n");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(read_secret_file(&path).as_deref(), Some("s3cret"));
        std::fs::write(&path, " \n").unwrap();
        assert_eq!(read_secret_file(&path), None);
    }
}
