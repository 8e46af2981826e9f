//! Real-path filesystem primitives shared by both hosts: lstat, the atomic write recipe, directory
//! creation with explicit modes, atomic symlink replacement. No node-path logic here.

use super::{FileKind, FileMeta, Owner};
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) fn lstat(path: &Path) -> io::Result<FileMeta> {
    let md = fs::symlink_metadata(path)?;
    let ft = md.file_type();
    let kind = if ft.is_symlink() {
        FileKind::Symlink
    } else if ft.is_dir() {
        FileKind::Dir
    } else if ft.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    };
    let symlink_target = if kind == FileKind::Symlink {
        Some(fs::read_link(path)?)
    } else {
        None
    };
    Ok(FileMeta {
        kind,
        mode: md.mode() & 0o7777,
        uid: md.uid(),
        gid: md.gid(),
        len: md.len(),
        symlink_target,
    })
}

/// A unique sibling name for a temp file: `.<name>.mco-tmp.<pid>.<n>` (hidden, same directory so
/// the rename stays on one filesystem).
fn temp_sibling(path: &Path) -> io::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Ok(path.with_file_name(format!(
        ".{}.mco-tmp.{}.{n}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

fn parent_of(path: &Path) -> io::Result<&Path> {
    path.parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

pub(super) fn write_atomic(path: &Path, data: &[u8], mode: u32, owner: Option<Owner>) -> io::Result<()> {
    let dir = parent_of(path)?;
    create_dir_all(dir, 0o755, None)?;
    let tmp = temp_sibling(path)?;
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(data)?;
        // fchmod after the write: not subject to the umask, and setuid bits survive a later fchown
        // only when set after it, so chown first when we have an owner.
        if let Some(o) = owner {
            std::os::unix::fs::fchown(&f, Some(o.uid), Some(o.gid))?;
        }
        f.set_permissions(Permissions::from_mode(mode))?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

pub(super) fn create_dir_all(path: &Path, mode: u32, owner: Option<Owner>) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut cur = path;
    loop {
        match fs::symlink_metadata(cur) {
            Ok(md) if md.is_dir() => break,
            Ok(md) if md.file_type().is_symlink() && fs::metadata(cur).map(|m| m.is_dir()).unwrap_or(false) => break,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} is not a directory", cur.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(cur.to_path_buf());
                match cur.parent() {
                    Some(p) => cur = p,
                    None => break,
                }
            }
            Err(e) => return Err(e),
        }
    }
    for dir in missing.iter().rev() {
        match fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        fs::set_permissions(dir, Permissions::from_mode(mode))?;
        if let Some(p) = dir.parent() {
            sync_dir(p)?;
        }
    }
    if let Some(o) = owner {
        std::os::unix::fs::lchown(path, Some(o.uid), Some(o.gid))?;
        fs::set_permissions(path, Permissions::from_mode(mode))?;
    }
    Ok(())
}

pub(super) fn symlink_atomic(target: &str, path: &Path) -> io::Result<()> {
    let dir = parent_of(path)?;
    create_dir_all(dir, 0o755, None)?;
    let tmp = temp_sibling(path)?;
    let result = (|| {
        std::os::unix::fs::symlink(target, &tmp)?;
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
