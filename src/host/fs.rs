//! Filesystem primitives shared by both hosts, done on directory handles so that a node path
//! cannot leave the node root: lstat, read, the atomic write recipe, directory creation with
//! explicit modes, atomic symlink replacement, removal, and opening the daemon's own lock and
//! journal files. No node-path policy here beyond the confinement rules below.
//!
//! # Confinement (the threat: whatever the root contains)
//! Node paths are never joined to the root as strings for I/O. Each operation walks the node
//! path's parent directories one component at a time from a directory handle of the root
//! (`openat(O_DIRECTORY|O_NOFOLLOW)`), and then acts on the final component with a `*at` call
//! relative to the parent's handle, never following a symlink there:
//! - **A symlinked parent directory** (`<root>/etc -> ...`) is followed only *beneath* the root
//!   ([`Confinement::Beneath`], a sandbox): the link's prefix is re-resolved from the root handle
//!   with `cap-std` (openat2 `RESOLVE_BENEATH`, or its checked component-by-component fallback).
//!   A relative link that stays inside is followed, as Ignition and MCO write through symlinked
//!   parents; an absolute link, or a relative one whose `..` climbs above the root, is refused
//!   ([`super::HostError::Refused`], naming the path and the link). On a real host
//!   ([`Confinement::Host`], root `/`) parents are followed as the kernel does: all of it is the
//!   host's own tree.
//! - **The final component** is never followed when replacing or removing: the atomic write
//!   renames a temp file over it (`renameat` replaces a symlink itself, as MCO's `renameio`
//!   does), a symlink is made by renaming a temp link over it, removal is `unlinkat`. A read
//!   follows a final symlink only beneath the root (sandbox).
//! - **Device files, FIFOs and sockets** at a path are refused for writing and reading; nothing
//!   is ever opened without `O_NONBLOCK`, so a FIFO planted after the check cannot block the
//!   daemon, and the opened file is checked again with `fstat`.
//! - Directories are created with `mkdirat` + `fchmod` (mode not subject to the umask) and
//!   ownership is applied with `fchown` on the opened handle.

use super::{FileKind, FileMeta, HostError, Owner};
use cap_std::fs::Dir;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How parent directories of a node path are resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confinement {
    /// Beneath the root only (a sandbox): symlinks are followed only while they stay inside;
    /// absolute links and `..` above the root are refused.
    Beneath,
    /// As the kernel resolves them (a real host, root `/`).
    Host,
}

/// The node's filesystem: a root directory and how to resolve beneath it.
#[derive(Clone, Copy, Debug)]
pub struct NodeFs<'a> {
    pub root: &'a Path,
    pub confinement: Confinement,
}

/// The components of a node path, checked as MCO (Ignition's validation, mco-facts 1.7)
/// requires: absolute and already clean (`path.Clean(p) == p`: no `.`, `..`, `//`, trailing `/`).
/// `/` itself has no components. Errors: [`HostError::BadPath`].
pub fn node_components(path: &str) -> Result<Vec<&OsStr>, HostError> {
    let bad = || HostError::BadPath(path.to_string());
    if !path.starts_with('/') || path.contains('\0') {
        return Err(bad());
    }
    if path == "/" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for part in path[1..].split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(bad());
        }
        out.push(OsStr::new(part));
    }
    Ok(out)
}

fn io_err(e: rustix::io::Errno) -> io::Error {
    io::Error::from(e)
}

/// Whether `e` is cap-std's refusal of a path that leads outside the root (`EXDEV` of openat2
/// `RESOLVE_BENEATH`, or the fallback's own check).
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none()
        || e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error())
}

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC);

/// What a failed operation was doing: the host error's `op` and node path.
struct Ctx<'p> {
    op: &'static str,
    path: &'p str,
}

impl Ctx<'_> {
    fn io(&self, err: io::Error) -> HostError {
        HostError::Io {
            op: self.op,
            path: self.path.to_string(),
            err,
        }
    }

    fn refused(&self, reason: String) -> HostError {
        HostError::Refused {
            op: self.op,
            path: self.path.to_string(),
            reason,
        }
    }
}

/// Kind of a raw `st_mode`.
fn kind_of(mode: u32) -> FileKind {
    match rustix::fs::FileType::from_raw_mode(mode as _) {
        rustix::fs::FileType::RegularFile => FileKind::File,
        rustix::fs::FileType::Directory => FileKind::Dir,
        rustix::fs::FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

/// A human name of a special file kind, for refusals.
fn special_name(mode: u32) -> &'static str {
    match rustix::fs::FileType::from_raw_mode(mode as _) {
        rustix::fs::FileType::Fifo => "a FIFO",
        rustix::fs::FileType::Socket => "a socket",
        rustix::fs::FileType::CharacterDevice => "a character device",
        rustix::fs::FileType::BlockDevice => "a block device",
        rustix::fs::FileType::Directory => "a directory",
        rustix::fs::FileType::Symlink => "a symlink",
        _ => "not a regular file",
    }
}

/// A unique sibling name for a temp file: `.<name>.mco-tmp.<pid>.<n>` (hidden, same directory so
/// the rename stays on one filesystem). [`is_temp_name`] recognises them.
fn temp_name(name: &OsStr) -> Vec<u8> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut out = b".".to_vec();
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(format!(".mco-tmp.{}.{n}", std::process::id()).as_bytes());
    out
}

/// Whether a directory entry is a temp file of the atomic write recipe (left behind only when
/// the process died between creating and renaming it).
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(".mco-tmp.")
}

impl NodeFs<'_> {
    fn open_root(&self) -> io::Result<OwnedFd> {
        rustix::fs::open(self.root, DIR_FLAGS.difference(OFlags::NOFOLLOW), Mode::empty()).map_err(io_err)
    }

    /// The directory at the relative path `rel` (components of a node path), resolved as the
    /// confinement says; used when a component of a walk is a symlink.
    fn follow_dir(&self, root: &OwnedFd, rel: &[&OsStr], ctx: &Ctx<'_>) -> Result<OwnedFd, HostError> {
        let rel_path: PathBuf = rel.iter().collect();
        match self.confinement {
            Confinement::Beneath => {
                let dir = dir_handle(root).map_err(|e| ctx.io(e))?;
                match dir.open_dir(&rel_path) {
                    // cap-std may hand back an `O_PATH` handle: reopen it for fsync and fchmod
                    Ok(d) => rustix::fs::openat(d.into_std_file(), ".", DIR_FLAGS, Mode::empty())
                        .map_err(|e| ctx.io(io_err(e))),
                    Err(e) if is_escape(&e) => Err(self.escape(&dir, rel, ctx)),
                    Err(e) => Err(ctx.io(e)),
                }
            }
            Confinement::Host => rustix::fs::open(
                self.root.join(&rel_path),
                DIR_FLAGS.difference(OFlags::NOFOLLOW),
                Mode::empty(),
            )
            .map_err(|e| ctx.io(io_err(e))),
        }
    }

    /// The refusal of a path that leads outside the root, naming the first component that does
    /// (a symlink, with its target).
    fn escape(&self, dir: &Dir, rel: &[&OsStr], ctx: &Ctx<'_>) -> HostError {
        for i in 1..=rel.len() {
            let prefix: PathBuf = rel[..i].iter().collect();
            if dir.canonicalize(&prefix).is_err_and(|e| is_escape(&e)) {
                let node = format!("/{}", prefix.display());
                let target = match prefix.parent().filter(|p| !p.as_os_str().is_empty()) {
                    None => dir.read_link_contents(&prefix).ok(),
                    Some(parent) => dir
                        .open_dir(parent)
                        .ok()
                        .and_then(|p| p.read_link_contents(prefix.file_name()?).ok()),
                };
                return ctx.refused(match target {
                    Some(t) => format!(
                        "{node} is a symlink to {} that leads outside the node root {}",
                        t.display(),
                        self.root.display()
                    ),
                    None => format!("{node} leads outside the node root {}", self.root.display()),
                });
            }
        }
        ctx.refused(format!("the path leads outside the node root {}", self.root.display()))
    }

    /// Walks to the directory `dirs` (components of a node path) from the root, one component
    /// at a time. A missing directory is created with `create`'s mode and owner when given
    /// (every directory created; then the final one gets them too), else `Ok(None)`.
    fn walk(
        &self,
        dirs: &[&OsStr],
        create: Option<(u32, Option<Owner>)>,
        ctx: &Ctx<'_>,
    ) -> Result<Option<OwnedFd>, HostError> {
        let root = self.open_root().map_err(|e| ctx.io(e))?;
        let mut cur = rustix::io::dup(&root).map_err(|e| ctx.io(io_err(e)))?;
        for (i, name) in dirs.iter().enumerate() {
            match rustix::fs::openat(&cur, *name, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => cur = fd,
                Err(rustix::io::Errno::NOENT) => {
                    let Some((mode, owner)) = create else {
                        return Ok(None);
                    };
                    match rustix::fs::mkdirat(&cur, *name, Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(ctx.io(io_err(e))),
                    }
                    let fd = match rustix::fs::openat(&cur, *name, DIR_FLAGS, Mode::empty()) {
                        Ok(fd) => fd,
                        // raced with a symlink: resolve it as any other
                        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                            self.follow_dir(&root, &dirs[..=i], ctx)?
                        }
                        Err(e) => return Err(ctx.io(io_err(e))),
                    };
                    apply_dir_attrs(&fd, mode, owner).map_err(|e| ctx.io(e))?;
                    rustix::fs::fsync(&cur).map_err(|e| ctx.io(io_err(e)))?;
                    cur = fd;
                }
                Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                    let st =
                        rustix::fs::statat(&cur, *name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| ctx.io(io_err(e)))?;
                    if kind_of(st.st_mode) != FileKind::Symlink {
                        let node = format!("/{}", dirs[..=i].iter().collect::<PathBuf>().display());
                        return Err(ctx.io(io::Error::new(
                            io::ErrorKind::NotADirectory,
                            format!("{node} is not a directory"),
                        )));
                    }
                    cur = match self.follow_dir(&root, &dirs[..=i], ctx) {
                        Err(e) if e.is_not_found() && create.is_none() => return Ok(None),
                        other => other?,
                    };
                }
                Err(e) => return Err(ctx.io(io_err(e))),
            }
        }
        Ok(Some(cur))
    }

    /// The parent directory handle and file name of `path`; `None` when a parent is missing and
    /// `create` is `None`.
    fn parent<'p>(
        &self,
        path: &'p str,
        create: Option<(u32, Option<Owner>)>,
        ctx: &Ctx<'_>,
    ) -> Result<Option<(OwnedFd, &'p OsStr)>, HostError> {
        let comps = node_components(path)?;
        let Some((name, dirs)) = comps.split_last() else {
            return Err(HostError::BadPath(path.to_string()));
        };
        Ok(self.walk(dirs, create, ctx)?.map(|d| (d, *name)))
    }

    /// `lstat` of a node path (a symlink is reported as such, with its target).
    pub fn lstat(&self, path: &str) -> Result<FileMeta, HostError> {
        let ctx = Ctx { op: "lstat", path };
        if path == "/" {
            let st = rustix::fs::fstat(self.open_root().map_err(|e| ctx.io(e))?).map_err(|e| ctx.io(io_err(e)))?;
            return Ok(meta(&st, None));
        }
        let Some((dir, name)) = self.parent(path, None, &ctx)? else {
            return Err(ctx.io(io_err(rustix::io::Errno::NOENT)));
        };
        let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| ctx.io(io_err(e)))?;
        let target = if kind_of(st.st_mode) == FileKind::Symlink {
            let t = rustix::fs::readlinkat(&dir, name, Vec::new()).map_err(|e| ctx.io(io_err(e)))?;
            Some(PathBuf::from(OsStr::from_bytes(t.as_bytes())))
        } else {
            None
        };
        Ok(meta(&st, target))
    }

    /// Reads a whole regular file, following a final symlink (beneath the root in a sandbox).
    /// Refused: anything but a regular file (a FIFO is never opened for reading).
    pub fn read(&self, path: &str) -> Result<Vec<u8>, HostError> {
        let ctx = Ctx { op: "read", path };
        let comps = node_components(path)?;
        let file: OwnedFd = match self.confinement {
            Confinement::Beneath => {
                let root = self.open_root().map_err(|e| ctx.io(e))?;
                let dir = dir_handle(&root).map_err(|e| ctx.io(e))?;
                let rel: PathBuf = comps.iter().collect();
                let escaped = |e: io::Error| {
                    if is_escape(&e) {
                        self.escape(&dir, &comps, &ctx)
                    } else {
                        ctx.io(e)
                    }
                };
                let md = dir.metadata(&rel).map_err(escaped)?;
                if !md.is_file() {
                    let st_mode = {
                        use cap_std::fs::MetadataExt;
                        md.mode()
                    };
                    return Err(ctx.refused(format!("{path} is {}, not a regular file", special_name(st_mode))));
                }
                let mut opts = cap_std::fs::OpenOptions::new();
                opts.read(true);
                {
                    use cap_std::fs::OpenOptionsExt;
                    opts.custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32);
                }
                OwnedFd::from(dir.open_with(&rel, &opts).map_err(escaped)?.into_std())
            }
            Confinement::Host => {
                let real = self.root.join(comps.iter().collect::<PathBuf>());
                let st = rustix::fs::stat(&real).map_err(|e| ctx.io(io_err(e)))?;
                if kind_of(st.st_mode) != FileKind::File {
                    return Err(ctx.refused(format!("{path} is {}, not a regular file", special_name(st.st_mode))));
                }
                rustix::fs::open(
                    &real,
                    OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
                    Mode::empty(),
                )
                .map_err(|e| ctx.io(io_err(e)))?
            }
        };
        let st = rustix::fs::fstat(&file).map_err(|e| ctx.io(io_err(e)))?;
        if kind_of(st.st_mode) != FileKind::File {
            return Err(ctx.refused(format!("{path} is {}, not a regular file", special_name(st.st_mode))));
        }
        let mut out = Vec::new();
        File::from(file).read_to_end(&mut out).map_err(|e| ctx.io(e))?;
        Ok(out)
    }

    /// Refuses a special file at `name` in `dir` (a replace must not touch one).
    fn refuse_special(&self, dir: &OwnedFd, name: &OsStr, path: &str, ctx: &Ctx<'_>) -> Result<(), HostError> {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if kind_of(st.st_mode) == FileKind::Other => Err(ctx.refused(format!(
                "{path} is {}; mco manages only regular files, directories and symlinks",
                special_name(st.st_mode)
            ))),
            _ => Ok(()),
        }
    }

    /// The atomic write recipe: missing parents created `0755`; a temp file in the same
    /// directory written, chown-ed, chmod-ed, fsync-ed and renamed over `path` (a symlink there
    /// is replaced, never followed), then the directory fsync-ed. On error no temp file is left.
    pub fn write_atomic(&self, path: &str, data: &[u8], mode: u32, owner: Option<Owner>) -> Result<(), HostError> {
        let ctx = Ctx { op: "write", path };
        let (dir, name) = self.parent(path, Some((0o755, None)), &ctx)?.expect("created");
        self.refuse_special(&dir, name, path, &ctx)?;
        let tmp = temp_name(name);
        let tmp = OsStr::from_bytes(&tmp);
        let result = (|| -> io::Result<()> {
            let fd = rustix::fs::openat(
                &dir,
                tmp,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .map_err(io_err)?;
            let mut f = File::from(fd);
            f.write_all(data)?;
            fail::fail_point!("host::write::before_fsync", |_| crate::host::sigkill_self());
            // fchmod after the fchown: setuid/setgid bits survive only when set after it.
            if let Some(o) = owner {
                rustix::fs::fchown(&f, Some(uid(o.uid)), Some(gid(o.gid))).map_err(io_err)?;
            }
            rustix::fs::fchmod(&f, Mode::from_raw_mode(mode as _)).map_err(io_err)?;
            f.sync_all()?;
            drop(f);
            fail::fail_point!("host::write::before_rename", |_| crate::host::sigkill_self());
            rustix::fs::renameat(&dir, tmp, &dir, name).map_err(io_err)?;
            fail::fail_point!("host::write::before_dir_fsync", |_| crate::host::sigkill_self());
            rustix::fs::fsync(&dir).map_err(io_err)
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp, AtFlags::empty());
        }
        result.map_err(|e| ctx.io(e))
    }

    /// Creates `path` and its missing parents, each created directory with `mode` and `owner`;
    /// the existing final directory gets them too.
    pub fn create_dir_all(&self, path: &str, mode: u32, owner: Option<Owner>) -> Result<(), HostError> {
        let ctx = Ctx { op: "mkdir", path };
        let comps = node_components(path)?;
        let dir = self.walk(&comps, Some((mode, owner)), &ctx)?.expect("created");
        if owner.is_some() {
            apply_dir_attrs(&dir, mode, owner).map_err(|e| ctx.io(e))?;
        }
        Ok(())
    }

    /// Removes a file or symlink (`unlinkat`, never following). `Ok(false)` when nothing was
    /// there (a missing parent included).
    pub fn remove(&self, path: &str) -> Result<bool, HostError> {
        let ctx = Ctx { op: "remove", path };
        let Some((dir, name)) = self.parent(path, None, &ctx)? else {
            return Ok(false);
        };
        match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(ctx.io(io_err(e))),
        }
    }

    /// Makes `path` a symlink to `target` (stored verbatim), replacing whatever was there by a
    /// rename of a temp link; parents created `0755`.
    pub fn symlink_atomic(&self, target: &str, path: &str) -> Result<(), HostError> {
        let ctx = Ctx { op: "symlink", path };
        let (dir, name) = self.parent(path, Some((0o755, None)), &ctx)?.expect("created");
        self.refuse_special(&dir, name, path, &ctx)?;
        let tmp = temp_name(name);
        let tmp = OsStr::from_bytes(&tmp);
        let result = (|| -> io::Result<()> {
            rustix::fs::symlinkat(target, &dir, tmp).map_err(io_err)?;
            rustix::fs::renameat(&dir, tmp, &dir, name).map_err(io_err)?;
            rustix::fs::fsync(&dir).map_err(io_err)
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp, AtFlags::empty());
        }
        result.map_err(|e| ctx.io(e))
    }

    /// Opens (creating `0644` when missing, parents `0755`) a regular file for writing, at its
    /// end when `append`: the daemon's lock and the sandbox journal. A final symlink is not
    /// followed (`ELOOP`); anything but a regular file is refused.
    pub fn open_file(&self, path: &str, append: bool) -> Result<File, HostError> {
        let ctx = Ctx { op: "open", path };
        let (dir, name) = self.parent(path, Some((0o755, None)), &ctx)?.expect("created");
        self.refuse_special(&dir, name, path, &ctx)?;
        let mut flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        if append {
            flags |= OFlags::APPEND;
        }
        let fd = rustix::fs::openat(&dir, name, flags, Mode::from_raw_mode(0o644)).map_err(|e| ctx.io(io_err(e)))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| ctx.io(io_err(e)))?;
        if kind_of(st.st_mode) != FileKind::File {
            return Err(ctx.refused(format!("{path} is {}, not a regular file", special_name(st.st_mode))));
        }
        Ok(File::from(fd))
    }

    /// Removes the temp files of the atomic write recipe ([`is_temp_name`]) left in the
    /// directory `dir` by a process killed between creating and renaming one; returns how many.
    /// Nothing when the directory does not exist. Only for a single writer (the daemon holds
    /// the node lock), since it cannot tell a live temp file from a leftover.
    pub fn remove_temp_files(&self, dir: &str) -> Result<usize, HostError> {
        let ctx = Ctx { op: "clean", path: dir };
        let comps = node_components(dir)?;
        let Some(fd) = self.walk(&comps, None, &ctx)? else {
            return Ok(0);
        };
        let mut names = Vec::new();
        let entries = rustix::fs::Dir::read_from(&fd).map_err(|e| ctx.io(io_err(e)))?;
        for entry in entries {
            let entry = entry.map_err(|e| ctx.io(io_err(e)))?;
            let name = entry.file_name().to_bytes();
            if std::str::from_utf8(name).is_ok_and(is_temp_name) {
                names.push(name.to_vec());
            }
        }
        for name in &names {
            match rustix::fs::unlinkat(&fd, OsStr::from_bytes(name), AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(ctx.io(io_err(e))),
            }
        }
        Ok(names.len())
    }

    /// The real path of the directory `path` resolves to under the confinement (for the drift
    /// monitor's inotify watches); `None` when it does not resolve to a directory (missing,
    /// escaping, not a directory).
    pub fn real_dir(&self, path: &str) -> Option<PathBuf> {
        let comps = node_components(path).ok()?;
        let rel: PathBuf = comps.iter().collect();
        match self.confinement {
            Confinement::Beneath => {
                let root = self.open_root().ok()?;
                let dir = dir_handle(&root).ok()?;
                let canon = if comps.is_empty() {
                    PathBuf::new()
                } else {
                    dir.canonicalize(&rel).ok()?
                };
                let md = if comps.is_empty() {
                    dir.dir_metadata().ok()?
                } else {
                    dir.metadata(&canon).ok()?
                };
                md.is_dir().then(|| self.root.join(canon))
            }
            Confinement::Host => {
                let p = std::fs::canonicalize(self.root.join(rel)).ok()?;
                p.is_dir().then_some(p)
            }
        }
    }

    /// Whether the directory `path` (checked with `lstat`, component by component from the
    /// root) is a real directory reached through no symlink at all.
    pub fn is_plain_dir(&self, path: &str) -> bool {
        let Ok(comps) = node_components(path) else {
            return false;
        };
        let Ok(mut cur) = self.open_root() else {
            return false;
        };
        for name in comps {
            match rustix::fs::openat(&cur, name, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => cur = fd,
                Err(_) => return false,
            }
        }
        true
    }
}

/// A cap-std handle on a duplicate of the directory descriptor `fd`.
fn dir_handle(fd: &OwnedFd) -> io::Result<Dir> {
    let dup = rustix::io::dup(fd).map_err(io_err)?;
    Ok(Dir::from_std_file(File::from(dup)))
}

fn uid(raw: u32) -> rustix::fs::Uid {
    rustix::fs::Uid::from_raw(raw)
}

fn gid(raw: u32) -> rustix::fs::Gid {
    rustix::fs::Gid::from_raw(raw)
}

fn apply_dir_attrs(fd: &OwnedFd, mode: u32, owner: Option<Owner>) -> io::Result<()> {
    if let Some(o) = owner {
        rustix::fs::fchown(fd, Some(uid(o.uid)), Some(gid(o.gid))).map_err(io_err)?;
    }
    rustix::fs::fchmod(fd, Mode::from_raw_mode(mode as _)).map_err(io_err)
}

fn meta(st: &rustix::fs::Stat, symlink_target: Option<PathBuf>) -> FileMeta {
    FileMeta {
        kind: kind_of(st.st_mode),
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        len: st.st_size as u64,
        symlink_target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_paths_must_be_absolute_and_clean() {
        assert_eq!(
            node_components("/etc/foo").unwrap(),
            vec![OsStr::new("etc"), OsStr::new("foo")]
        );
        assert!(node_components("/").unwrap().is_empty());
        for bad in [
            "etc/foo",
            "/etc/../x",
            "/etc/./x",
            "/etc//x",
            "/etc/x/",
            "",
            "/etc/\0x",
            "/..",
        ] {
            assert!(matches!(node_components(bad), Err(HostError::BadPath(_))), "{bad:?}");
        }
    }

    /// A real host ([`Confinement::Host`], tried on a temp root): parents resolve as the kernel
    /// does, but a symlink at the final component is replaced, never written through, and
    /// paths MCO refuses (not absolute, not clean) are refused.
    #[test]
    fn on_a_real_host_the_final_symlink_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(dir.path().join("target"), "original").unwrap();
        std::os::unix::fs::symlink(dir.path().join("target"), root.join("etc/f")).unwrap();
        let fs = NodeFs {
            root: &root,
            confinement: Confinement::Host,
        };
        fs.write_atomic("/etc/f", b"new", 0o644, None).unwrap();
        assert_eq!(std::fs::read(dir.path().join("target")).unwrap(), b"original");
        assert_eq!(fs.lstat("/etc/f").unwrap().kind, FileKind::File);
        std::os::unix::fs::symlink(dir.path().join("target"), root.join("etc/g")).unwrap();
        fs.symlink_atomic("/dev/null", "/etc/g").unwrap();
        assert!(fs.remove("/etc/g").unwrap());
        assert_eq!(std::fs::read(dir.path().join("target")).unwrap(), b"original");
        for bad in ["/etc/../target", "etc/f", "/etc/./f"] {
            assert!(matches!(
                fs.write_atomic(bad, b"x", 0o644, None),
                Err(HostError::BadPath(_))
            ));
        }
    }

    #[test]
    fn temp_names_are_recognised() {
        let t = temp_name(OsStr::new("chrony.conf"));
        assert!(is_temp_name(std::str::from_utf8(&t).unwrap()));
        assert!(!is_temp_name("chrony.conf"));
    }
}
