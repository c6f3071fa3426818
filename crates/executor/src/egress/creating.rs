//! The supervisor's side of supervised creations (`creations/` decides
//! what may be made; this makes it): each notification of a call that makes
//! a name is read once, then made by the supervisor's thread in the caller's
//! mount namespace and root, with its identity and umask, or refused.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::identity::{Identity, host_proc, proc_status};
use super::unix::{Answer, Supervisor, open_pidfd, take_descriptor};
use crate::creations::{Creations, MAX_WRITE_ATTEMPTS, Made, Shape, View};

/// A mount namespace and a root in it, where a creation is made.
pub(super) struct Place {
    mounts: OwnedFd,
    root: OwnedFd,
}

impl Place {
    /// toolsmith's mount namespace and root, with this thread's root and
    /// working directory its own from here on (`unshare(CLONE_FS)`), so that
    /// entering a caller's moves no other thread. `None` when that cannot be
    /// done: creations then fail with `ESRCH`.
    pub(super) fn own() -> Option<Place> {
        // SAFETY: unshare of this thread's file system attributes.
        if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
            return None;
        }
        Some(Place {
            mounts: open_in_proc("thread-self/ns/mnt", libc::O_RDONLY).ok()?,
            root: std::fs::File::open("/").ok()?.into(),
        })
    }

    /// Moves this thread into the place's mount namespace and makes its root
    /// this thread's root and working directory. The namespace matters beyond
    /// paths: whether a name is a mount point (a protected path bound onto
    /// itself, which cannot be renamed or removed) is judged in the caller's
    /// mount namespace.
    fn enter(&self) -> bool {
        // SAFETY: setns, fchdir and chroot of this thread alone (its own fs attributes).
        unsafe {
            libc::setns(self.mounts.as_raw_fd(), libc::CLONE_NEWNS) == 0
                && libc::fchdir(self.root.as_raw_fd()) == 0
                && libc::chroot(c".".as_ptr()) == 0
        }
    }
}

impl Supervisor {
    /// A call that makes a name: read once, made in the caller's mount
    /// namespace and root with its identity and umask, or refused. `None`
    /// when the call ended before the answer.
    pub(super) fn create(
        &self,
        creations: &Creations,
        notification: &libc::seccomp_notif,
        shape: &Shape,
    ) -> Option<Answer> {
        let pid = notification.pid;
        let mut call = match shape.read(pid) {
            Ok(call) => call,
            Err(errno) => {
                return self
                    .still_waiting(notification.id)
                    .then_some(Answer::Errno(errno));
            }
        };
        let status = proc_status(&format!("{pid}/status"));
        let directory = libc::O_PATH | libc::O_DIRECTORY;
        let cwd = open_in_proc(&format!("{pid}/cwd"), directory);
        let descriptors = call.descriptors();
        let process = if descriptors.is_empty() {
            None
        } else {
            Some(open_pidfd(pid))
        };
        let opened = self.run_view.borrow().is_some() || self.open_run_view(pid);
        if !self.still_waiting(notification.id) {
            return None;
        }
        let (Ok(status), Ok(cwd), true, Some(proc)) = (status, cwd, opened, &self.proc) else {
            return Some(Answer::Errno(libc::ESRCH));
        };
        let caller = Identity::parse(&status);
        if let Some((tgid, tid)) = namespace_ids(&status) {
            call.rewrite_self(tgid, tid);
        }
        let mut taken = Vec::new();
        for fd in descriptors {
            let copy = match &process {
                Some(Ok(process)) => take_descriptor(process, fd),
                Some(Err(errno)) => Err(*errno),
                None => Err(libc::EBADF),
            };
            match copy {
                Ok(copy) => taken.push((fd, copy)),
                Err(errno) => return Some(Answer::Errno(errno)),
            }
        }
        let view = View { cwd, taken };
        let mut refused = Vec::new();
        let made = if self.enter_run_view() {
            self.as_caller(&caller, || {
                with_umask(umask_of(&status), || {
                    crate::creations::make(creations, &view, &call, proc, &mut refused)
                })
            })
        } else {
            Err((
                libc::EACCES,
                "entering the caller's mount namespace".to_owned(),
            ))
        };
        self.record_writes(refused);
        Some(match made {
            Ok(Ok(Made::Value(value))) => Answer::Value(value),
            Ok(Ok(Made::File(file, cloexec))) => Answer::File(file, cloexec),
            Ok(Err(errno)) | Err((errno, _)) => Answer::Errno(errno),
        })
    }

    /// Opens the run's view (mount namespace and root) from its process `pid`.
    fn open_run_view(&self, pid: u32) -> bool {
        let directory = libc::O_PATH | libc::O_DIRECTORY;
        let place = open_in_proc(&format!("{pid}/ns/mnt"), libc::O_RDONLY).and_then(|mounts| {
            Ok(Place {
                mounts,
                root: open_in_proc(&format!("{pid}/root"), directory)?,
            })
        });
        match place {
            Ok(place) => {
                *self.run_view.borrow_mut() = Some(place);
                true
            }
            Err(_) => false,
        }
    }

    /// Moves this thread into the run's view, unless it is there already.
    fn enter_run_view(&self) -> bool {
        if self.in_run_view.get() {
            return true;
        }
        let entered = self.run_view.borrow().as_ref().is_some_and(Place::enter);
        // Entering may stop half way (in the namespace, not yet the root):
        // counted as inside, so that leaving puts both back.
        self.in_run_view.set(true);
        if !entered {
            self.leave_run_view();
        }
        entered
    }

    /// Moves this thread back into toolsmith's view, unless it is there
    /// already; false (and the supervisor stops) when it cannot.
    pub(super) fn leave_run_view(&self) -> bool {
        if !self.in_run_view.get() {
            return true;
        }
        let left = self.host.as_ref().is_some_and(Place::enter);
        if left {
            self.in_run_view.set(false);
        } else {
            self.stuck.set(true);
        }
        left
    }

    fn record_writes(&self, refused: Vec<crate::WriteAttempt>) {
        if refused.is_empty() {
            return;
        }
        let mut writes = self
            .writes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for attempt in refused {
            if writes.len() < MAX_WRITE_ATTEMPTS && !writes.contains(&attempt) {
                writes.push(attempt);
            }
        }
    }
}

/// Opens `path` below toolsmith's `/proc` (a thread's root, working directory
/// or namespace), whatever this thread's root is.
fn open_in_proc(path: &str, flags: i32) -> Result<OwnedFd, i32> {
    let proc = host_proc().ok_or(libc::ESRCH)?;
    let path = CString::new(path).map_err(|_| libc::EINVAL)?;
    // SAFETY: a descriptor and a NUL-terminated path; a fresh descriptor or -1.
    let fd = unsafe { libc::openat(proc, path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(libc::ESRCH);
    }
    // SAFETY: fresh and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The umask in a thread's `status` (`Umask:`, Linux 4.7), 022 when unknown.
fn umask_of(status: &str) -> libc::mode_t {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Umask:"))
        .and_then(|mask| libc::mode_t::from_str_radix(mask.trim(), 8).ok())
        .unwrap_or(0o022)
}

/// A thread's process and thread ids in its own PID namespace (the last of
/// `NStgid:` and `NSpid:` in its `status`, Linux 4.1).
fn namespace_ids(status: &str) -> Option<(u32, u32)> {
    let innermost = |name: &str| -> Option<u32> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))?
            .split_whitespace()
            .last()?
            .parse()
            .ok()
    };
    Some((innermost("NStgid:")?, innermost("NSpid:")?))
}

/// Runs `action` with this thread's umask set to `mask` (per thread once
/// `unshare(CLONE_FS)` made its file system attributes its own).
fn with_umask<T>(mask: libc::mode_t, action: impl FnOnce() -> T) -> T {
    // SAFETY: umask of this thread's own fs attributes.
    let old = unsafe { libc::umask(mask) };
    let result = action();
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    result
}
