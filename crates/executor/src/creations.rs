//! Supervised creations: the names a run may not make in its writable roots
//! (issue 22, finding 2), refused whether or not they exist, at any depth.
//!
//! Under `filesystem = "project"` (or a list of writable paths) the mount
//! layout keeps what exists of the protected paths read-only, but a name that
//! does not exist has no mount to hold it: a tool could make a `docs/.git`
//! whose `core.fsmonitor` the user's next `git status` in `docs/` runs, an
//! implicit bare repository (`HEAD`, `objects/`, `refs/`: git discovers one
//! wherever it works, `safe.bareRepository` defaults to `all`), or a
//! `.toolsmith/tools/deploy` that the next `run deploy` would run. Landlock
//! cannot refuse a name, and a filter that looks at a path and lets the
//! kernel go on is unsound: the kernel reads the path again, after another
//! thread of the tool changed it (`seccomp_unotify(2)`).
//!
//! So in such a run every call that makes a name (`seccomp::CREATING`, and
//! `open`/`openat` with `O_CREAT`) goes to toolsmith's supervisor, which makes
//! the name itself and never lets the kernel continue:
//!
//! 1. it copies the path (and the other arguments) once from the caller's
//!    memory, takes the caller's directory descriptor (`pidfd_getfd`, or its
//!    working directory and root through toolsmith's `/proc`), and checks that
//!    the notification is still live, so all of it was the caller's;
//! 2. on its own thread, whose root and working directory are its own
//!    (`unshare(CLONE_FS)`), it enters the caller's root (`chroot`), takes the
//!    caller's identity (`identity.rs`) and umask, and opens the directory
//!    the new name goes in (the path but its last component, resolved as the
//!    kernel would for the caller: the run's mounts, its symbolic links);
//! 3. it decides on that descriptor and the last component, which no thread
//!    of the tool can change any more: inside a writable root, an entry named
//!    `.git` or `HEAD` (ASCII case ignored) is refused, and so is the first
//!    missing component of each missing protected path, in its own directory;
//! 4. it makes the name relative to that descriptor (`mkdirat`, `openat`,
//!    `mknodat`, `symlinkat`, `linkat`, `renameat2`), hands an opened file to
//!    the caller (`SECCOMP_IOCTL_NOTIF_ADDFD`), and answers with the result.
//!    An `open` that would create through a dangling symbolic link follows it
//!    itself, one link at a time, so the name finally made is checked too.
//!
//! What the supervisor makes is bounded as the caller is: the run's mount
//! layout (read-only outside the writable roots) and the caller's uid, gid,
//! groups and capabilities. A refusal fails with `EACCES` and is reported
//! ([`WriteAttempt`]).

use std::ffi::{CString, OsStr};
use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// At most this many refused creations of one run are recorded (each is still refused).
pub const MAX_WRITE_ATTEMPTS: usize = 32;

/// The longest path the kernel takes (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// Symbolic links an `open` with `O_CREAT` follows before `ELOOP`, as the kernel.
const MAX_LINKS: usize = 40;

/// A run's attempt to make a name it may not make.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WriteAttempt {
    /// The name as toolsmith sees it: the directory's path in the run's view, and the name.
    pub path: PathBuf,
    /// Why it is refused.
    pub reason: WriteRefusal,
}

/// Why a name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteRefusal {
    /// `.git` or `HEAD` in a writable root: a repository git would find and obey.
    Repository,
    /// The first missing component of a protected path (the project's
    /// `.toolsmith`, a peer's tool directory, toolsmith's own state).
    Protected,
}

/// What a run with supervised creations may not make: planned by the parent,
/// read by the supervisor.
#[derive(Debug, Clone, Default)]
pub(crate) struct Creations {
    /// Device and inode of each writable root.
    roots: Vec<(u64, u64)>,
    /// Device and inode of a directory, and the name it may not get: the
    /// first missing component of a missing protected path.
    reserved: Vec<(u64, u64, Vec<u8>)>,
}

fn identity_of(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.dev(), metadata.ino()))
}

impl Creations {
    /// The plan for `roots`, with `protected` (existing or not) below them.
    pub(crate) fn plan(roots: &[&Path], protected: &[PathBuf]) -> Creations {
        let exists = |path: &Path| path.symlink_metadata().is_ok();
        let mut reserved = Vec::new();
        for path in protected.iter().filter(|path| !exists(path)) {
            let Some(nearest) = path.ancestors().skip(1).find(|ancestor| exists(ancestor)) else {
                continue;
            };
            let Some(first) = path
                .strip_prefix(nearest)
                .ok()
                .and_then(|rest| rest.components().next())
            else {
                continue;
            };
            if let Some((device, inode)) = identity_of(nearest) {
                reserved.push((device, inode, first.as_os_str().as_bytes().to_vec()));
            }
        }
        Creations {
            roots: roots.iter().filter_map(|root| identity_of(root)).collect(),
            reserved,
        }
    }

    /// Why `name` may not be made in `directory` (a descriptor in the
    /// caller's view, whose path there is `at`), or `None`.
    fn refusal(&self, directory: &OwnedFd, at: &Path, name: &[u8]) -> Option<WriteRefusal> {
        let (device, inode) = stat(directory.as_raw_fd()).ok()?;
        if self
            .reserved
            .iter()
            .any(|(d, i, reserved)| *d == device && *i == inode && reserved == name)
        {
            return Some(WriteRefusal::Protected);
        }
        let git = |name: &[u8]| name.eq_ignore_ascii_case(b".git");
        // A new name inside an existing `.git` (a nested repository's hooks
        // or config) is a repository's too; the project's own is read-only.
        let repository = git(name)
            || name.eq_ignore_ascii_case(b"HEAD")
            || at
                .components()
                .any(|component| git(component.as_os_str().as_bytes()));
        (repository && self.inside_a_root(directory)).then_some(WriteRefusal::Repository)
    }

    /// Whether `directory` is a writable root or below one: walks `..` up
    /// to the root of the caller's view.
    fn inside_a_root(&self, directory: &OwnedFd) -> bool {
        let Ok(mut here) = stat(directory.as_raw_fd()) else {
            return true;
        };
        let mut current = directory.try_clone().ok();
        for _ in 0..PATH_MAX {
            if self.roots.contains(&here) {
                return true;
            }
            let Some(parent) = current.as_ref().and_then(|fd| {
                open_at(fd.as_raw_fd(), c"..", libc::O_PATH | libc::O_DIRECTORY).ok()
            }) else {
                // Unreadable: count it as inside, the refusal is the safe side.
                return true;
            };
            let Ok(up) = stat(parent.as_raw_fd()) else {
                return true;
            };
            if up == here {
                return false;
            }
            here = up;
            current = Some(parent);
        }
        true
    }
}

/// A place a call names: a directory descriptor of the caller's and a path.
#[derive(Debug)]
pub(crate) struct Place {
    pub(crate) dirfd: i32,
    pub(crate) path: CString,
}

/// A call that makes a name, decoded from a notification.
#[derive(Debug)]
pub(crate) enum Call {
    Mkdir { at: Place, mode: u32 },
    Mknod { at: Place, mode: u32, device: u64 },
    Open { at: Place, flags: i32, mode: u32 },
    Symlink { target: CString, at: Place },
    Link { from: Place, at: Place, flags: i32 },
    Rename { from: Place, at: Place, flags: u32 },
}

/// What a call's arguments are, before its paths are read: each path's
/// argument index and its directory descriptor.
pub(crate) enum Shape {
    Mkdir {
        dirfd: i32,
        path: u64,
        mode: u32,
    },
    Mknod {
        dirfd: i32,
        path: u64,
        mode: u32,
        device: u64,
    },
    Open {
        dirfd: i32,
        path: u64,
        flags: i32,
        mode: u32,
    },
    Symlink {
        target: u64,
        dirfd: i32,
        path: u64,
    },
    Link {
        old_dirfd: i32,
        old: u64,
        dirfd: i32,
        path: u64,
        flags: i32,
    },
    Rename {
        old_dirfd: i32,
        old: u64,
        dirfd: i32,
        path: u64,
        flags: u32,
    },
}

/// The shape of call `nr` with arguments `args`, or `None` when it makes no name.
pub(crate) fn shape(nr: i64, args: [u64; 6]) -> Option<Shape> {
    let fd = |value: u64| value as u32 as i32;
    let low = |value: u64| value as u32;
    let cwd = libc::AT_FDCWD;
    Some(match nr {
        libc::SYS_mkdirat => Shape::Mkdir {
            dirfd: fd(args[0]),
            path: args[1],
            mode: low(args[2]),
        },
        libc::SYS_mknodat => Shape::Mknod {
            dirfd: fd(args[0]),
            path: args[1],
            mode: low(args[2]),
            device: args[3],
        },
        libc::SYS_openat if low(args[2]) & libc::O_CREAT as u32 != 0 => Shape::Open {
            dirfd: fd(args[0]),
            path: args[1],
            flags: low(args[2]) as i32,
            mode: low(args[3]),
        },
        libc::SYS_symlinkat => Shape::Symlink {
            target: args[0],
            dirfd: fd(args[1]),
            path: args[2],
        },
        libc::SYS_linkat => Shape::Link {
            old_dirfd: fd(args[0]),
            old: args[1],
            dirfd: fd(args[2]),
            path: args[3],
            flags: low(args[4]) as i32,
        },
        libc::SYS_renameat2 => Shape::Rename {
            old_dirfd: fd(args[0]),
            old: args[1],
            dirfd: fd(args[2]),
            path: args[3],
            flags: low(args[4]),
        },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_renameat => Shape::Rename {
            old_dirfd: fd(args[0]),
            old: args[1],
            dirfd: fd(args[2]),
            path: args[3],
            flags: 0,
        },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_mkdir => Shape::Mkdir {
            dirfd: cwd,
            path: args[0],
            mode: low(args[1]),
        },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_mknod => Shape::Mknod {
            dirfd: cwd,
            path: args[0],
            mode: low(args[1]),
            device: args[2],
        },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_open if low(args[1]) & libc::O_CREAT as u32 != 0 => Shape::Open {
            dirfd: cwd,
            path: args[0],
            flags: low(args[1]) as i32,
            mode: low(args[2]),
        },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_creat => Shape::Open {
            dirfd: cwd,
            path: args[0],
            flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            mode: low(args[1]),
        },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_rename => Shape::Rename {
            old_dirfd: cwd,
            old: args[0],
            dirfd: cwd,
            path: args[1],
            flags: 0,
        },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_link => Shape::Link {
            old_dirfd: cwd,
            old: args[0],
            dirfd: cwd,
            path: args[1],
            flags: 0,
        },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_symlink => Shape::Symlink {
            target: args[0],
            dirfd: cwd,
            path: args[1],
        },
        _ => return None,
    })
}

impl Shape {
    /// The call, with every path copied once from process `pid`'s memory.
    pub(crate) fn read(&self, pid: u32) -> Result<Call, i32> {
        let path = |at: u64| read_path(pid, at);
        let place = |dirfd: i32, at: u64| -> Result<Place, i32> {
            Ok(Place {
                dirfd,
                path: path(at)?,
            })
        };
        Ok(match *self {
            Shape::Mkdir { dirfd, path, mode } => Call::Mkdir {
                at: place(dirfd, path)?,
                mode,
            },
            Shape::Mknod {
                dirfd,
                path,
                mode,
                device,
            } => Call::Mknod {
                at: place(dirfd, path)?,
                mode,
                device,
            },
            Shape::Open {
                dirfd,
                path,
                flags,
                mode,
            } => Call::Open {
                at: place(dirfd, path)?,
                flags,
                mode,
            },
            Shape::Symlink {
                target,
                dirfd,
                path: at,
            } => Call::Symlink {
                target: path(target)?,
                at: place(dirfd, at)?,
            },
            Shape::Link {
                old_dirfd,
                old,
                dirfd,
                path,
                flags,
            } => Call::Link {
                from: place(old_dirfd, old)?,
                at: place(dirfd, path)?,
                flags,
            },
            Shape::Rename {
                old_dirfd,
                old,
                dirfd,
                path,
                flags,
            } => Call::Rename {
                from: place(old_dirfd, old)?,
                at: place(dirfd, path)?,
                flags,
            },
        })
    }
}

impl Call {
    /// Rewrites `/proc/self/...` and `/proc/thread-self/...` to the caller's
    /// own entries in its `/proc` (`tgid` and `tid` as its PID namespace
    /// numbers them): the supervisor is not the caller, and in the caller's
    /// `/proc` it has no `self`. So `linkat` of an `O_TMPFILE` through
    /// `/proc/self/fd/N` makes the file the caller holds.
    pub(crate) fn rewrite_self(&mut self, tgid: u32, tid: u32) {
        let rewrite = |path: &mut CString| {
            let bytes = path.as_bytes();
            let rest = if let Some(rest) = bytes.strip_prefix(b"/proc/self/") {
                Some(
                    format!("/proc/{tgid}/")
                        .into_bytes()
                        .into_iter()
                        .chain(rest.iter().copied()),
                )
            } else {
                bytes.strip_prefix(b"/proc/thread-self/").map(|rest| {
                    format!("/proc/{tgid}/task/{tid}/")
                        .into_bytes()
                        .into_iter()
                        .chain(rest.iter().copied())
                })
            };
            if let Some(rewritten) = rest.map(Iterator::collect::<Vec<u8>>)
                && let Ok(rewritten) = CString::new(rewritten)
            {
                *path = rewritten;
            }
        };
        match self {
            Call::Mkdir { at, .. }
            | Call::Mknod { at, .. }
            | Call::Open { at, .. }
            | Call::Symlink { at, .. } => rewrite(&mut at.path),
            Call::Link { from, at, .. } | Call::Rename { from, at, .. } => {
                rewrite(&mut from.path);
                rewrite(&mut at.path);
            }
        }
    }
}

/// Copies a NUL-terminated path from process `pid`'s memory, once, a page at
/// a time (a path may end just before an unmapped page).
fn read_path(pid: u32, at: u64) -> Result<CString, i32> {
    if at == 0 {
        return Err(libc::EFAULT);
    }
    let mut bytes = Vec::new();
    let mut address = at;
    while bytes.len() < PATH_MAX {
        let room = 4096 - (address % 4096) as usize;
        let chunk = crate::egress::read_memory(pid, address, room.min(PATH_MAX - bytes.len()))?;
        if let Some(end) = chunk.iter().position(|&byte| byte == 0) {
            bytes.extend_from_slice(&chunk[..end]);
            return CString::new(bytes).map_err(|_| libc::EINVAL);
        }
        bytes.extend_from_slice(&chunk);
        address += chunk.len() as u64;
    }
    Err(libc::ENAMETOOLONG)
}

/// A call's directory descriptors, taken from the caller: what `AT_FDCWD`
/// means for it, and its other descriptors (absolute paths start at the
/// supervisor's root, which is the caller's while it decides).
pub(crate) struct View {
    /// The caller's working directory.
    pub(crate) cwd: OwnedFd,
    /// Descriptors the call names, taken with `pidfd_getfd`.
    pub(crate) taken: Vec<(i32, OwnedFd)>,
}

impl View {
    /// The descriptor a place's path is relative to (any, for an absolute path).
    fn dirfd(&self, place: &Place) -> RawFd {
        if place.dirfd == libc::AT_FDCWD || place.path.as_bytes().first() == Some(&b'/') {
            return self.cwd.as_raw_fd();
        }
        self.taken(place.dirfd)
    }

    /// Our copy of the caller's descriptor `number` (-1, `EBADF`, when it had none).
    fn taken(&self, number: i32) -> RawFd {
        self.taken
            .iter()
            .find(|(taken, _)| *taken == number)
            .map_or(-1, |(_, fd)| fd.as_raw_fd())
    }
}

impl Call {
    /// The caller's descriptors the call names (not `AT_FDCWD`), for absolute paths none.
    pub(crate) fn descriptors(&self) -> Vec<i32> {
        let relative = |place: &Place| {
            (place.dirfd != libc::AT_FDCWD && place.path.as_bytes().first() != Some(&b'/'))
                .then_some(place.dirfd)
        };
        let mut fds: Vec<i32> = match self {
            Call::Mkdir { at, .. }
            | Call::Mknod { at, .. }
            | Call::Open { at, .. }
            | Call::Symlink { at, .. } => relative(at).into_iter().collect(),
            Call::Link { from, at, flags } => {
                let mut fds: Vec<i32> = relative(at).into_iter().collect();
                // `AT_EMPTY_PATH`: the old descriptor is the file itself.
                if flags & libc::AT_EMPTY_PATH != 0 && from.path.as_bytes().is_empty() {
                    fds.push(from.dirfd);
                } else {
                    fds.extend(relative(from));
                }
                fds
            }
            Call::Rename { from, at, .. } => {
                relative(from).into_iter().chain(relative(at)).collect()
            }
        };
        fds.sort_unstable();
        fds.dedup();
        fds
    }
}

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
            let old_dirfd = if flags & libc::AT_EMPTY_PATH != 0 && from.path.as_bytes().is_empty() {
                view.taken(from.dirfd)
            } else {
                view.dirfd(from)
            };
            // SAFETY: descriptors and NUL-terminated paths.
            value(unsafe {
                libc::linkat(
                    old_dirfd,
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
fn parent(dirfd: RawFd, path: &CString) -> Result<(OwnedFd, CString), i32> {
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
fn bare(name: &[u8]) -> &[u8] {
    let mut end = name.len();
    while end > 1 && name[end - 1] == b'/' {
        end -= 1;
    }
    &name[..end]
}

fn open_at(dirfd: RawFd, path: &std::ffi::CStr, flags: i32) -> Result<OwnedFd, i32> {
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

fn stat(fd: RawFd) -> Result<(u64, u64), i32> {
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

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;

    use super::{Creations, WriteRefusal, parent};

    fn name_of(dirfd: i32, path: &str) -> (std::path::PathBuf, String) {
        let (directory, name) = parent(dirfd, &CString::new(path).unwrap()).unwrap();
        let at = std::fs::read_link(format!("/proc/self/fd/{}", directory.as_raw_fd())).unwrap();
        (at, String::from_utf8(name.as_bytes().to_vec()).unwrap())
    }

    /// The last component is the name (trailing slashes kept for the kernel), and
    /// the directory is resolved as the kernel resolves it (links followed).
    #[test]
    fn a_path_splits_into_its_directory_and_its_last_name() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("docs/sub")).unwrap();
        std::os::unix::fs::symlink("docs", root.path().join("link")).unwrap();
        let dir = std::fs::File::open(root.path()).unwrap();
        let fd = dir.as_raw_fd();
        let docs = root.path().join("docs");
        assert_eq!(name_of(fd, "docs/.git"), (docs.clone(), ".git".to_owned()));
        assert_eq!(
            name_of(fd, "docs/.git/"),
            (docs.clone(), ".git/".to_owned())
        );
        assert_eq!(super::bare(b".git//"), b".git");
        assert_eq!(
            name_of(fd, "docs//sub/x"),
            (docs.join("sub"), "x".to_owned())
        );
        assert_eq!(name_of(fd, "link/.git"), (docs.clone(), ".git".to_owned()));
        assert_eq!(
            name_of(fd, "x"),
            (root.path().to_path_buf(), "x".to_owned())
        );
        let absolute = format!("{}/HEAD", docs.display());
        assert_eq!(name_of(-1, &absolute), (docs, "HEAD".to_owned()));
        assert_eq!(
            parent(fd, &CString::new("").unwrap()).map(|_| ()),
            Err(libc::ENOENT)
        );
        assert_eq!(
            parent(fd, &CString::new("missing/x").unwrap()).map(|_| ()),
            Err(libc::ENOENT)
        );
    }

    /// `.git` and `HEAD`, in any case, are refused at any depth inside a root and
    /// nowhere else; a missing protected path's first missing component is
    /// refused in its own directory only.
    #[test]
    fn repositories_are_refused_inside_the_roots_and_protected_names_where_they_belong() {
        let top = tempfile::tempdir().unwrap();
        let project = top.path().join("project");
        let outside = top.path().join("outside");
        std::fs::create_dir_all(project.join("docs/deep")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let creations = Creations::plan(
            &[project.as_path()],
            &[project.join(".toolsmith"), project.join(".kodelet/tools")],
        );
        let open = |path: &std::path::Path| -> std::os::fd::OwnedFd {
            std::fs::File::open(path).unwrap().into()
        };
        let refusal = |path: &std::path::Path, name: &str| {
            creations.refusal(&open(path), path, name.as_bytes())
        };
        for name in [".git", ".GIT", ".Git", "HEAD", "head"] {
            assert_eq!(
                refusal(&project, name),
                Some(WriteRefusal::Repository),
                "{name}"
            );
            assert_eq!(
                refusal(&project.join("docs/deep"), name),
                Some(WriteRefusal::Repository)
            );
            assert_eq!(refusal(&outside, name), None, "{name} outside the roots");
        }
        assert_eq!(
            refusal(&project, ".toolsmith"),
            Some(WriteRefusal::Protected)
        );
        assert_eq!(refusal(&project, ".kodelet"), Some(WriteRefusal::Protected));
        assert_eq!(refusal(&project.join("docs"), ".toolsmith"), None);
        for name in [
            "README",
            ".gitignore",
            ".github",
            "git",
            "HEADS",
            "objects",
            "refs",
        ] {
            assert_eq!(refusal(&project, name), None, "{name}");
        }
    }
}
