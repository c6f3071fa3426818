//! The calls that make a name, decoded from a notification: their paths copied
//! once from the caller's memory, and the caller's descriptors they name.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::PATH_MAX;

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
    pub(super) fn dirfd(&self, place: &Place) -> RawFd {
        if place.dirfd == libc::AT_FDCWD || place.path.as_bytes().first() == Some(&b'/') {
            return self.cwd.as_raw_fd();
        }
        self.taken(place.dirfd)
    }

    /// Our copy of the caller's descriptor `number` (-1, `EBADF`, when it had none).
    pub(super) fn taken(&self, number: i32) -> RawFd {
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
