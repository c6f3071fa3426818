//! The making of a name by the supervisor, relative to the directory it
//! checked (`mod.rs` says what may not be made).

use std::ffi::{CString, OsStr};
use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::calls::{Call, View};
use super::{Creations, MAX_LINKS, MAX_WRITE_ATTEMPTS, PATH_MAX, WriteAttempt};

/// The result of a call made by the supervisor.
#[derive(Debug)]
pub(crate) enum Made {
    /// The call's return value.
    Value(i64),
    /// An opened file for the caller, with `O_CLOEXEC` when it asked for it.
    File(OwnedFd, bool),
}

/// Makes `call` in the caller's `view`, or refuses it. Runs on a thread that
/// has its own root and working directory, inside the caller's root
/// (`chroot` done by the caller of this function), with the caller's identity;
/// `proc` is toolsmith's `/proc`, to name refused paths.
pub(crate) fn make(
    creations: &Creations,
    view: &View,
    call: &Call,
    proc: &OwnedFd,
    refused: &mut Vec<WriteAttempt>,
) -> Result<Made, i32> {
    let checker = Checker {
        creations,
        proc,
        refused: std::cell::RefCell::new(refused),
    };
    let value = |result: libc::c_int| -> Result<Made, i32> {
        if result < 0 {
            Err(last_errno())
        } else {
            Ok(Made::Value(i64::from(result)))
        }
    };
    match call {
        Call::Mkdir { at, mode } => {
            let (directory, name) = checker.check(view.dirfd(at), &at.path)?;
            // SAFETY: a descriptor and a NUL-terminated name.
            value(unsafe { libc::mkdirat(directory.as_raw_fd(), name.as_ptr(), *mode) })
        }
        Call::Mknod { at, mode, device } => {
            if mode & crate::seccomp::SET_ID_BITS != 0 {
                return Err(libc::EPERM);
            }
            let (directory, name) = checker.check(view.dirfd(at), &at.path)?;
            // SAFETY: as above.
            value(unsafe { libc::mknodat(directory.as_raw_fd(), name.as_ptr(), *mode, *device) })
        }
        Call::Symlink { target, at } => {
            let (directory, name) = checker.check(view.dirfd(at), &at.path)?;
            // SAFETY: as above.
            value(unsafe { libc::symlinkat(target.as_ptr(), directory.as_raw_fd(), name.as_ptr()) })
        }
        Call::Link { from, at, flags } => {
            let (directory, name) = checker.check(view.dirfd(at), &at.path)?;
            if flags & libc::AT_EMPTY_PATH != 0 && from.path.as_bytes().is_empty() {
                // The file the caller holds (an `O_TMPFILE`, say). The kernel
                // lets its opener link it by descriptor (Linux 6.10), judging
                // by the very credentials it was opened with, which the
                // supervisor's thread never has; the caller could as well
                // link it through `/proc/self/fd/N`, which is what is done
                // here with the supervisor's copy of it.
                let Ok(through) =
                    CString::new(format!("thread-self/fd/{}", view.taken(from.dirfd)))
                else {
                    return Err(libc::EINVAL);
                };
                // SAFETY: descriptors and NUL-terminated paths.
                return value(unsafe {
                    libc::linkat(
                        checker.proc.as_raw_fd(),
                        through.as_ptr(),
                        directory.as_raw_fd(),
                        name.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                });
            }
            // SAFETY: descriptors and NUL-terminated paths.
            value(unsafe {
                libc::linkat(
                    view.dirfd(from),
                    from.path.as_ptr(),
                    directory.as_raw_fd(),
                    name.as_ptr(),
                    *flags,
                )
            })
        }
        Call::Rename { from, at, flags } => {
            let (directory, name) = checker.check(view.dirfd(at), &at.path)?;
            // An exchange gives the old name the new one's entry: a name made too.
            let (old_directory, old_name) = if flags & libc::RENAME_EXCHANGE != 0 {
                checker.check(view.dirfd(from), &from.path)?
            } else {
                parent(view.dirfd(from), &from.path)?
            };
            // SAFETY: descriptors and NUL-terminated names.
            let result = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    old_directory.as_raw_fd(),
                    old_name.as_ptr(),
                    directory.as_raw_fd(),
                    name.as_ptr(),
                    *flags,
                )
            };
            value(i32::try_from(result).unwrap_or(-1))
        }
        Call::Open { at, flags, mode } => {
            open_creating(&checker, view.dirfd(at), &at.path, *flags, *mode)
        }
    }
}

/// Opens the directory of a new name and decides on it, recording refusals.
struct Checker<'a> {
    creations: &'a Creations,
    proc: &'a OwnedFd,
    refused: std::cell::RefCell<&'a mut Vec<WriteAttempt>>,
}

impl Checker<'_> {
    /// The directory `path` (relative to `dirfd`) makes its name in, and the
    /// name, or `EACCES` when the name is refused there.
    fn check(&self, dirfd: RawFd, path: &CString) -> Result<(OwnedFd, CString), i32> {
        let (directory, name) = parent(dirfd, path)?;
        let at = descriptor_path(self.proc, &directory);
        let bare = bare(name.as_bytes());
        if let Some(reason) = self.creations.refusal(&directory, &at, bare) {
            let mut refused = self.refused.borrow_mut();
            if refused.len() < MAX_WRITE_ATTEMPTS {
                refused.push(WriteAttempt {
                    path: at.join(OsStr::from_bytes(bare)),
                    reason,
                });
            }
            return Err(libc::EACCES);
        }
        Ok((directory, name))
    }
}

/// `open` with `O_CREAT`: opens the name in its checked directory, following
/// a dangling symbolic link in the last component itself (checking each
/// name it leads to) where the kernel would create the link's target.
fn open_creating(
    checker: &Checker<'_>,
    dirfd: RawFd,
    path: &CString,
    flags: i32,
    mode: u32,
) -> Result<Made, i32> {
    if mode & crate::seccomp::SET_ID_BITS != 0 {
        return Err(libc::EPERM);
    }
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let follow = flags & (libc::O_NOFOLLOW | libc::O_EXCL) == 0;
    let mut base: Option<OwnedFd> = None;
    let mut path = path.clone();
    for _ in 0..=MAX_LINKS {
        let from = base.as_ref().map_or(dirfd, AsRawFd::as_raw_fd);
        let (directory, name) = checker.check(from, &path)?;
        // SAFETY: a descriptor and a NUL-terminated name. `O_NOFOLLOW`, so a
        // link in the last component is seen rather than followed.
        let opened = unsafe {
            libc::openat(
                directory.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode,
            )
        };
        if opened >= 0 {
            // SAFETY: fresh and ours.
            return Ok(Made::File(unsafe { OwnedFd::from_raw_fd(opened) }, cloexec));
        }
        let errno = last_errno();
        if errno != libc::ELOOP || !follow {
            return Err(errno);
        }
        // A link: the kernel would follow it (and create its target).
        path = match read_link(&directory, &name) {
            Ok(target) => target,
            Err(_) => return Err(libc::ELOOP),
        };
        base = Some(directory);
    }
    Err(libc::ELOOP)
}

/// The directory `path` (relative to `dirfd`) names its last component in,
/// opened, and that component (with its trailing slashes, which the checks ignore).
pub(super) fn parent(dirfd: RawFd, path: &CString) -> Result<(OwnedFd, CString), i32> {
    let bytes = path.as_bytes();
    if bytes.is_empty() {
        return Err(libc::ENOENT);
    }
    let trimmed = {
        let mut end = bytes.len();
        while end > 1 && bytes[end - 1] == b'/' {
            end -= 1;
        }
        &bytes[..end]
    };
    // The name keeps its trailing slashes: the kernel gives them their meaning
    // (`EISDIR` for a file, `ENOTDIR`), the checks ignore them (`bare`).
    let (directory, name): (&[u8], &[u8]) = match trimmed.iter().rposition(|&byte| byte == b'/') {
        Some(0) => (b"/", &bytes[1..]),
        Some(at) => (&trimmed[..at], &bytes[at + 1..]),
        None => (b".", bytes),
    };
    let name = if name.is_empty() { b"." as &[u8] } else { name };
    let directory = CString::new(directory).map_err(|_| libc::EINVAL)?;
    let opened = open_at(dirfd, &directory, libc::O_PATH | libc::O_DIRECTORY)?;
    Ok((opened, CString::new(name).map_err(|_| libc::EINVAL)?))
}

/// A name without its trailing slashes.
pub(super) fn bare(name: &[u8]) -> &[u8] {
    let mut end = name.len();
    while end > 1 && name[end - 1] == b'/' {
        end -= 1;
    }
    &name[..end]
}

pub(super) fn open_at(dirfd: RawFd, path: &std::ffi::CStr, flags: i32) -> Result<OwnedFd, i32> {
    // SAFETY: a descriptor and a NUL-terminated path; a fresh descriptor or -1.
    let fd = unsafe { libc::openat(dirfd, path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: fresh and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn read_link(directory: &OwnedFd, name: &CString) -> Result<CString, i32> {
    let mut buffer = vec![0_u8; PATH_MAX];
    // SAFETY: the buffer has PATH_MAX bytes.
    let length = unsafe {
        libc::readlinkat(
            directory.as_raw_fd(),
            name.as_ptr(),
            buffer.as_mut_ptr().cast(),
            PATH_MAX,
        )
    };
    let length = usize::try_from(length).map_err(|_| last_errno())?;
    buffer.truncate(length);
    CString::new(buffer).map_err(|_| libc::EINVAL)
}

pub(super) fn stat(fd: RawFd) -> Result<(u64, u64), i32> {
    // SAFETY: fstat fills a stat structure.
    let mut status: libc::stat = unsafe { zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd, &raw mut status) } != 0 {
        return Err(last_errno());
    }
    Ok((status.st_dev, status.st_ino))
}

/// The path of `directory` as the caller sees it: the supervisor's root is
/// the caller's while it decides, and `proc` is toolsmith's `/proc`.
fn descriptor_path(proc: &OwnedFd, directory: &OwnedFd) -> PathBuf {
    let Ok(link) = CString::new(format!("thread-self/fd/{}", directory.as_raw_fd())) else {
        return PathBuf::from("?");
    };
    read_link(proc, &link)
        .map(|path| PathBuf::from(OsStr::from_bytes(path.as_bytes())))
        .unwrap_or_else(|_| PathBuf::from("?"))
}

fn last_errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
