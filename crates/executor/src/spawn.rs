//! Starting a process on the vfork path: the executor's side of a spawn.
//!
//! Rust's `std::process::Command` leaves `posix_spawn` for `fork()` as soon
//! as a `pre_exec` closure is set, and fork copies the page tables of the
//! parent: 13.7 ms per spawn with a 1 GiB parent on the reference machine.
//! Here the child shares the parent's memory (`CLONE_VM | CLONE_VFORK`, what
//! `posix_spawn` itself does) and runs on a stack of its own, so the cost does
//! not depend on the parent's size. The parent thread is suspended until the
//! child calls `execve` or exits.
//!
//! Everything the child needs (C strings, pointer arrays, limits, file
//! descriptors) is prepared in `plan.rs` before the clone; the child's code,
//! which only makes system calls, is in `child.rs`; the threads that clone
//! are in `spawner.rs`. This module holds the clone itself, the memory the
//! child shares with the executor ([`ChildContext`]), the child stacks, a
//! prepared init ([`Prepared`]) and the handshakes: [`spawn`] at once,
//! [`prepare_on_init_thread`] then [`go`] with toolsmith's init.

use std::ffi::{OsStr, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};

use nix::errno::Errno;
use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous, mprotect, munmap};
use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{SysconfVar, sysconf};

use crate::child::child_main;
use crate::init;
use crate::pipes::{above_stdio, pipe};
use crate::plan::{InitPlan, SpawnPlan};
use crate::{Error, Stage};

/// The size of the child's stack. The child's code is a straight line of
/// system calls; this leaves ample room even in debug builds.
const CHILD_STACK_SIZE: usize = 256 * 1024;

/// Memory shared between the executor and the child (the child runs in the
/// executor's address space: the init for its whole life, the program until
/// `execve`). Boxed, so that its address stays put while a prepared init waits.
pub(crate) struct ChildContext {
    /// The namespace set-up; lives as long as the init (see [`Prepared`]).
    pub(crate) setup: *const InitPlan,
    /// The program's plan: stored by [`go`] just before it wakes the init,
    /// borrowed until the init's handshake. The same plan as the set-up's
    /// call on the direct path.
    pub(crate) tool: AtomicPtr<SpawnPlan>,
    pub(crate) failed_stage: AtomicUsize,
    pub(crate) errno: AtomicI32,
    /// The write end of the status pipe (with an init), else -1.
    pub(crate) status_fd: c_int,
    /// The read end of the go pipe (with an init), else -1.
    pub(crate) go_fd: c_int,
    /// A signalfd for every signal (with an init), else -1.
    pub(crate) signal_fd: c_int,
    /// The top of the program's own stack (with an init), else null.
    pub(crate) tool_stack: *mut c_void,
}

// SAFETY: the pointers point into plans and a stack owned next to the
// context (in `Prepared` or the spawn's frame), which outlive every use.
unsafe impl Send for ChildContext {}

/// A started process: the program itself, or toolsmith's init that runs it.
#[derive(Debug)]
pub(crate) struct Spawned {
    /// Its pid, as seen from the executor's PID namespace.
    pub(crate) pid: libc::pid_t,
    /// A pidfd for it, obtained atomically at clone time (`CLONE_PIDFD`), so
    /// signals through it can never reach a recycled pid.
    pub(crate) pidfd: OwnedFd,
    /// Present when `pid` is toolsmith's init rather than the program.
    pub(crate) init: Option<InitHandle>,
}

/// What the executor holds of a running init.
#[derive(Debug)]
pub(crate) struct InitHandle {
    /// The read end of the status pipe; the handshake is already consumed,
    /// what comes next is the program's [`init::StatusRecord`]. The init
    /// shares the executor's descriptor table, so its death shows on its
    /// pidfd, not as EOF here.
    pub(crate) status: OwnedFd,
    /// The init's stack, pipes and plans: the init runs on that stack in the
    /// executor's memory, so all of it must stay until the init is reaped.
    pub(crate) keep: InitKeep,
}

/// What must outlive an init: dropped only after it is reaped.
#[derive(Debug)]
pub(crate) struct InitKeep {
    _stack: ChildStack,
    /// The read end of the status pipe; each run reads a duplicate of it.
    status_read: OwnedFd,
    _status_write: OwnedFd,
    _go: (OwnedFd, OwnedFd),
    _signals: OwnedFd,
    _context: Box<ContextBox>,
    _setup: Box<InitPlan>,
    /// The init was cloned by a thread of its own ([`on_init_thread`](crate::spawner::on_init_thread)), not
    /// by the spawner thread: [`go`] may run from any thread.
    own_thread: bool,
}

/// [`ChildContext`] with a `Debug` that prints nothing of its pointers.
struct ContextBox(ChildContext);

impl std::fmt::Debug for ContextBox {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ChildContext")
    }
}

/// A toolsmith init whose namespaces, mounts and filter are set up and
/// which waits, blocked in `read` on its go pipe, for the program to start
/// ([`go`]). Dropping it unused kills and reaps the init.
#[derive(Debug)]
pub(crate) struct Prepared {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    keep: Option<InitKeep>,
}

impl Prepared {
    /// An init whose program has exited and whose run is over, to start
    /// another program in the same namespaces (`Session`).
    pub(crate) fn reuse(pid: libc::pid_t, pidfd: OwnedFd, keep: InitKeep) -> Prepared {
        Prepared {
            pid,
            pidfd: Some(pidfd),
            keep: Some(keep),
        }
    }

    /// The init was cloned by a thread of its own, not by the spawner
    /// thread: [`go`] may run from any thread.
    pub(crate) fn own_thread(&self) -> bool {
        self.keep.as_ref().is_some_and(|keep| keep.own_thread)
    }

    /// A duplicate of the init's pidfd, to wait for its end from elsewhere.
    pub(crate) fn pidfd_copy(&self) -> Option<OwnedFd> {
        self.pidfd.as_ref()?.try_clone().ok()
    }

    /// False when the init has died while it waited (killed from outside).
    pub(crate) fn alive(&self) -> bool {
        self.pidfd
            .as_ref()
            .is_some_and(|pidfd| !readable(pidfd.as_raw_fd(), 0))
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        let (Some(pidfd), Some(keep)) = (self.pidfd.take(), self.keep.take()) else {
            return;
        };
        crate::pidfd::send_signal(&pidfd, libc::SIGKILL);
        match crate::pidfd::reap_blocking(self.pid) {
            Ok(_) => drop(keep),
            Err(error) => {
                tracing::warn!(pid = self.pid, %error, "could not reap a prepared init");
                // It may still run on its stack.
                std::mem::forget(keep);
            }
        }
    }
}

/// Stacks for the child (and, with an init, for the program's set-up), each
/// with a guard page below it.
#[derive(Debug)]
pub(crate) struct ChildStack {
    base: ptr::NonNull<c_void>,
    len: usize,
}

impl ChildStack {
    fn new(count: usize) -> Result<ChildStack, Error> {
        let page = page_size();
        let len = (CHILD_STACK_SIZE + page) * count;
        let mmap_error = |errno| Error::Sys {
            call: "mmap",
            source: io::Error::from(errno),
        };
        let length = std::num::NonZeroUsize::new(len).ok_or_else(|| mmap_error(Errno::EINVAL))?;
        // SAFETY: an anonymous private mapping with no address hint.
        let base = unsafe {
            mmap_anonymous(
                None,
                length,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_STACK,
            )
        }
        .map_err(mmap_error)?;
        let stack = ChildStack { base, len };
        for index in 0..count {
            // SAFETY: each guard page lies inside the mapping just created.
            unsafe {
                let guard = stack.base.byte_add(index * (CHILD_STACK_SIZE + page));
                mprotect(guard, page, ProtFlags::PROT_NONE)
            }
            .map_err(mmap_error)?;
        }
        Ok(stack)
    }

    /// The top of stack `index` (from 0).
    fn top(&self, index: usize) -> *mut c_void {
        // The stack grows down on every architecture we support; 16-byte
        // alignment holds because the mapping is page aligned.
        self.base
            .as_ptr()
            .wrapping_byte_add((index + 1) * (CHILD_STACK_SIZE + page_size()))
    }
}

// SAFETY: the mapping is owned by the value and only unmapped by its Drop.
unsafe impl Send for ChildStack {}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping created in `new`.
        let _ignored = unsafe { munmap(self.base, self.len) };
    }
}

fn page_size() -> usize {
    sysconf(SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|size| usize::try_from(size).ok())
        .unwrap_or(4096)
}

/// The byte the init writes when its set-up is done and it waits for [`go`].
pub(crate) const READY: u8 = b'R';
/// The byte the init writes once the program has called `execve`.
pub(crate) const STARTED: u8 = b'S';
/// The byte the init writes when the program failed before `execve` (the
/// step and errno are in the context).
pub(crate) const FAILED: u8 = b'F';

/// Blocks every signal of the calling thread until dropped.
///
/// Around a clone no handler of the executor may run in the child while it
/// shares the executor's memory; and while an init or its program runs code
/// that uses the spawner thread's `errno` (they inherited its thread
/// pointer), that thread runs nothing that reads or writes it: it waits in
/// raw system calls with every signal blocked.
///
/// `pthread_sigmask` returns its error rather than setting `errno`, and the
/// mask is set before the clone and restored after the handshake.
struct SignalsBlocked(SigSet);

impl SignalsBlocked {
    fn new() -> SignalsBlocked {
        let mut previous = SigSet::empty();
        // Cannot fail: SIG_SETMASK with a valid set.
        let _ignored = pthread_sigmask(
            SigmaskHow::SIG_SETMASK,
            Some(&SigSet::all()),
            Some(&mut previous),
        );
        SignalsBlocked(previous)
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        let _ignored = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.0), None);
    }
}

/// True when `fd` is readable within `timeout_ms` (-1: no limit). Raw system
/// calls only (see [`SignalsBlocked`]).
fn readable(fd: RawFd, timeout_ms: c_int) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: ppoll on one valid pollfd; a null timeout waits without limit.
    let timeout = libc::timespec {
        tv_sec: libc::time_t::from(timeout_ms.max(0) / 1000),
        tv_nsec: libc::c_long::from(timeout_ms.max(0) % 1000) * 1_000_000,
    };
    let timeout_ptr = if timeout_ms < 0 {
        ptr::null()
    } else {
        ptr::from_ref(&timeout)
    };
    // SAFETY: as above.
    let ready = unsafe {
        init::syscall4(
            libc::SYS_ppoll,
            ptr::from_mut(&mut poll) as usize,
            1,
            timeout_ptr as usize,
            0,
        )
    };
    ready > 0 && poll.revents != 0
}

/// Waits until the init writes a byte to the status pipe (`Some`), or dies
/// first (`None`). Raw system calls only (see [`SignalsBlocked`]).
fn await_byte(status_read: RawFd, pidfd: RawFd) -> Option<u8> {
    let mut polls = [
        libc::pollfd {
            fd: status_read,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: ppoll on two valid pollfds, no timeout, no mask change.
        let ready =
            unsafe { init::syscall4(libc::SYS_ppoll, polls.as_mut_ptr() as usize, 2, 0, 0) };
        if ready < 0 {
            continue;
        }
        // SAFETY: our own pipe's read end.
        if polls[0].revents != 0
            && let Some(byte) = unsafe { init::read_byte(status_read) }
        {
            return Some(byte);
        }
        // The init exited: whatever it wrote before is in the pipe.
        if polls[1].revents != 0 && !readable(status_read, 0) {
            return None;
        }
    }
}

/// Starts the planned process, all at once: the namespaces and their init,
/// then the program.
///
/// Returns once the program has called `execve` (or failed before it). On a
/// failure in the child, the child is reaped here and the error names the
/// step that failed.
///
/// Without a new PID namespace the child is the program: a vfork-style clone
/// (`CLONE_VM | CLONE_VFORK`) suspends this thread until its `execve`. With
/// one, the child is toolsmith's init (prepared, then [`go`] at once).
/// Either way nothing here copies page tables.
pub(crate) fn spawn(setup: Box<InitPlan>, plan: &SpawnPlan) -> Result<Spawned, Error> {
    if setup.with_init {
        let prepared =
            prepare_or_stage(setup, false).map_err(|failed| setup_error(failed, plan))?;
        return go(prepared, plan, || ());
    }
    let stack = ChildStack::new(1)?;
    let context = ChildContext {
        setup: &raw const *setup,
        tool: AtomicPtr::new(ptr::from_ref(plan).cast_mut()),
        failed_stage: AtomicUsize::new(0),
        errno: AtomicI32::new(0),
        status_fd: -1,
        go_fd: -1,
        signal_fd: -1,
        tool_stack: ptr::null_mut(),
    };
    let mut pidfd: c_int = -1;
    let flags =
        libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | setup.clone_flags | libc::SIGCHLD;
    let pid = {
        let _blocked = SignalsBlocked::new();
        // SAFETY: child_main only makes system calls on the context, which
        // outlives the child's use of it (this thread is suspended until
        // the child's execve or exit).
        unsafe {
            libc::clone(
                child_main,
                stack.top(0),
                flags,
                ptr::from_ref(&context).cast_mut().cast::<c_void>(),
                ptr::from_mut(&mut pidfd),
            )
        }
    };
    if pid < 0 {
        return Err(Error::Sys {
            call: "clone",
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: with CLONE_PIDFD the kernel stored a fresh pidfd, owned by us.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    if let Some(error) = failure(&context, plan) {
        // The child has exited (127), so this wait is short.
        let _ignored = crate::pidfd::reap_blocking(pid);
        return Err(error);
    }
    drop(stack);
    Ok(Spawned {
        pid,
        pidfd,
        init: None,
    })
}

/// The error a failed child recorded, if it did.
fn failure(context: &ChildContext, plan: &SpawnPlan) -> Option<Error> {
    let stage = Stage::from_code(context.failed_stage.load(Ordering::Acquire))?;
    Some(Error::Spawn {
        program: Path::new(OsStr::from_bytes(plan.program.as_bytes())).to_path_buf(),
        stage,
        source: io::Error::from_raw_os_error(context.errno.load(Ordering::Acquire)),
    })
}

/// Starts toolsmith's init in new namespaces and has it set them up (id
/// maps, mounts, hostname, network namespace, filter), up to the point where
/// it waits for a program: everything that does not depend on the call.
/// Returns once the init is ready.
///
/// The init shares the executor's memory (`CLONE_VM`, no `execve`) and its
/// descriptor table (`CLONE_FILES`): the program it starts later gets a copy
/// of the table as it is then, with that call's pipes in it, and closes all
/// but its own before `execve`. Call from the thread [`on_init_thread`](crate::spawner::on_init_thread)
/// started ([`spawn`] does the same on the spawner thread, then [`go`]).
pub(crate) fn prepare_on_init_thread(setup: Box<InitPlan>) -> Result<Prepared, Error> {
    prepare_or_stage(setup, true).map_err(|failed| match failed {
        SetupFailed { stage: None, .. } => Error::Sys {
            call: "setting up the namespaces in toolsmith's init",
            source: io::Error::other("the init ended before it was ready"),
        },
        SetupFailed {
            stage: Some(stage),
            errno,
        } => Error::Sys {
            call: stage.name(),
            source: io::Error::from_raw_os_error(errno),
        },
    })
}

/// The error of a failed set-up of `plan`'s init: the executor's own call, or
/// the step that failed in the init (a spawn error of the program).
pub(crate) fn setup_error(failed: SetupFailed, plan: &SpawnPlan) -> Error {
    match failed {
        SetupFailed { stage: None, errno } => Error::Sys {
            call: "clone (toolsmith's init)",
            source: if errno == 0 {
                io::Error::other("the init ended before it was ready")
            } else {
                io::Error::from_raw_os_error(errno)
            },
        },
        SetupFailed {
            stage: Some(stage),
            errno,
        } => Error::Spawn {
            program: Path::new(OsStr::from_bytes(plan.program.as_bytes())).to_path_buf(),
            stage,
            source: io::Error::from_raw_os_error(errno),
        },
    }
}

/// How a preparation failed: the step that failed in the init and its errno
/// (no stage: the init died without saying, or the executor's own call
/// failed, with `errno`).
#[derive(Debug)]
pub(crate) struct SetupFailed {
    stage: Option<Stage>,
    errno: i32,
}

impl From<Error> for SetupFailed {
    fn from(error: Error) -> SetupFailed {
        let errno = match &error {
            Error::Sys { source, .. } => source.raw_os_error().unwrap_or(0),
            _ => 0,
        };
        SetupFailed { stage: None, errno }
    }
}

pub(crate) fn prepare_or_stage(
    setup: Box<InitPlan>,
    own_thread: bool,
) -> Result<Prepared, SetupFailed> {
    if !setup.with_init {
        // Without an init the child is the program itself: nothing waits.
        return Err(SetupFailed {
            stage: None,
            errno: libc::EINVAL,
        });
    }
    let stack = ChildStack::new(2)?;
    let (status_read, status_write) = pipe()?;
    let (go_read, go_write) = pipe()?;
    let signals = signalfd()?;
    let context = Box::new(ContextBox(ChildContext {
        setup: &raw const *setup,
        tool: AtomicPtr::new(ptr::null_mut()),
        failed_stage: AtomicUsize::new(0),
        errno: AtomicI32::new(0),
        status_fd: status_write.as_raw_fd(),
        go_fd: go_read.as_raw_fd(),
        signal_fd: signals.as_raw_fd(),
        tool_stack: stack.top(1),
    }));
    let mut pidfd: c_int = -1;
    let flags =
        libc::CLONE_VM | libc::CLONE_FILES | libc::CLONE_PIDFD | setup.clone_flags | libc::SIGCHLD;
    let (pid, ready) = {
        let _blocked = SignalsBlocked::new();
        // SAFETY: child_main only makes system calls on the context, which
        // lives in `Prepared` until the init is reaped.
        let pid = unsafe {
            libc::clone(
                child_main,
                stack.top(0),
                flags,
                ptr::from_ref(&context.0).cast_mut().cast::<c_void>(),
                ptr::from_mut(&mut pidfd),
            )
        };
        if pid < 0 {
            let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(SetupFailed { stage: None, errno });
        }
        (
            pid,
            await_byte(status_read.as_raw_fd(), pidfd) == Some(READY),
        )
    };
    // SAFETY: with CLONE_PIDFD the kernel stored a fresh pidfd, owned by us.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let prepared = Prepared {
        pid,
        pidfd: Some(pidfd),
        keep: Some(InitKeep {
            _stack: stack,
            status_read,
            _status_write: status_write,
            _go: (go_read, go_write),
            _signals: signals,
            _context: context,
            _setup: setup,
            own_thread,
        }),
    };
    if !ready {
        let stage = prepared.keep.as_ref().map_or((None, 0), |keep| {
            let context = &keep._context.0;
            (
                Stage::from_code(context.failed_stage.load(Ordering::Acquire)),
                context.errno.load(Ordering::Acquire),
            )
        });
        drop(prepared);
        return Err(SetupFailed {
            stage: stage.0,
            errno: stage.1,
        });
    }
    Ok(prepared)
}

/// Has a prepared init start the planned program, and returns once the
/// program has called `execve` (or failed before it). Call from the spawner
/// thread when the spawner thread cloned the init (it and its programs write
/// that thread's `errno`, so that thread must not run meanwhile); an init of
/// its own thread ([`on_init_thread`](crate::spawner::on_init_thread)) may be started from any thread: see
/// [`go_from_any`](crate::spawner::go_from_any).
pub(crate) fn go(
    mut prepared: Prepared,
    plan: &SpawnPlan,
    meanwhile: impl FnOnce(),
) -> Result<Spawned, Error> {
    let (Some(pidfd), Some(keep)) = (prepared.pidfd.take(), prepared.keep.take()) else {
        return Err(Error::Sys {
            call: "starting the program from toolsmith's init",
            source: io::Error::other("the prepared init was already used"),
        });
    };
    let context = &keep._context.0;
    context.failed_stage.store(0, Ordering::Release);
    context
        .tool
        .store(ptr::from_ref(plan).cast_mut(), Ordering::Release);
    let status_read = keep.status_read.as_raw_fd();
    let started = {
        let _blocked = SignalsBlocked::new();
        // SAFETY: our own pipe's write end.
        let written = unsafe { init::write_byte(keep._go.1.as_raw_fd(), 1) };
        if written {
            meanwhile();
        }
        written && await_byte(status_read, pidfd.as_raw_fd()) == Some(STARTED)
    };
    if !started {
        let error = failure(context, plan).unwrap_or_else(|| Error::Sys {
            call: "starting the program from toolsmith's init",
            source: io::Error::other("the init ended before the program started"),
        });
        crate::pidfd::send_signal(&pidfd, libc::SIGKILL);
        match crate::pidfd::reap_blocking(prepared.pid) {
            Ok(_) => drop(keep),
            Err(_) => std::mem::forget(keep),
        }
        return Err(error);
    }
    let status = keep.status_read.try_clone().map_err(|source| Error::Sys {
        call: "dup(status pipe)",
        source,
    })?;
    Ok(Spawned {
        pid: prepared.pid,
        pidfd,
        init: Some(InitHandle { status, keep }),
    })
}

/// A non-blocking signalfd for every signal, close-on-exec and at least 3.
/// It reads the pending signals of whichever process reads it: the init.
fn signalfd() -> Result<OwnedFd, Error> {
    let fd = SignalFd::with_flags(
        &SigSet::all(),
        SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK,
    )
    .map_err(|errno| Error::Sys {
        call: "signalfd",
        source: io::Error::from(errno),
    })?;
    above_stdio(OwnedFd::from(fd))
}
