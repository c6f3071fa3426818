//! Starting a process on the vfork path, with the per-run set-up done in the
//! child before `execve` and without any allocation after the clone.
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
//! descriptors) is prepared by [`SpawnPlan::new`] before the clone. The child
//! only makes system calls: no allocation, no locks, no panics. It reports a
//! failure by storing the failed step and errno in memory it shares with the
//! parent, then calls `_exit(127)`.

use std::ffi::{CString, OsStr, c_char, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous, mprotect, munmap};
use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{SysconfVar, getgid, getuid, pipe2, sysconf};

use crate::init::{self, KernelSigaction, NSIG};
use crate::mounts::MountPlan;
use crate::privileges::{self, PrivilegePlan, PrivilegeStep};
use crate::rlimits::Rlimit;
use crate::{Command, Error, Stage, seccomp};

/// The size of the child's stack. The child's code is a straight line of
/// system calls; this leaves ample room even in debug builds.
const CHILD_STACK_SIZE: usize = 256 * 1024;

/// A user-namespace identity map the child writes for itself after entering
/// a new user namespace (`/proc/self/uid_map` and `gid_map`).
#[derive(Debug)]
pub(crate) struct IdMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl IdMaps {
    /// Maps the current uid and gid onto themselves, so the program sees the
    /// same identity inside the namespace.
    pub(crate) fn identity() -> IdMaps {
        let (uid, gid) = (getuid(), getgid());
        IdMaps {
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
        }
    }

    /// Writes the maps for the calling process, which has just entered a new
    /// user namespace. Async-signal-safe.
    ///
    /// A process that is not dumpable (toolsmith sets `PR_SET_DUMPABLE` 0 at
    /// start) has its `/proc/self` files owned by root, which a non-root
    /// child cannot open for writing. Dumpability belongs to the memory the
    /// child shares with the executor (`CLONE_VM`), so it is turned on for
    /// the three writes only and off again at once.
    pub(crate) fn write_own(&self) -> bool {
        // SAFETY: prctl and write_file only make system calls.
        unsafe {
            let was_dumpable = libc::prctl(libc::PR_GET_DUMPABLE) == 1;
            if !was_dumpable {
                let _ignored = set_dumpable(1);
            }
            let written = write_file(c"/proc/self/setgroups", b"deny")
                && write_file(c"/proc/self/uid_map", &self.uid_map)
                && write_file(c"/proc/self/gid_map", &self.gid_map);
            if !was_dumpable {
                let _ignored = set_dumpable(0);
            }
            written
        }
    }
}

/// Sets `PR_SET_DUMPABLE`; false when it failed. Async-signal-safe.
///
/// # Safety
/// One `prctl`.
unsafe fn set_dumpable(value: libc::c_ulong) -> bool {
    // SAFETY: PR_SET_DUMPABLE takes 0 or 1.
    unsafe {
        libc::prctl(
            libc::PR_SET_DUMPABLE,
            value,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) == 0
    }
}

/// What the namespace's first process sets up before any program exists:
/// everything that follows from the sandbox alone, so that it can be done
/// ahead of the call (see [`prepare_on_init_thread`]).
#[derive(Debug)]
pub(crate) struct InitPlan {
    /// Extra `CLONE_NEW*` flags.
    pub(crate) clone_flags: c_int,
    /// Identity maps to write when `CLONE_NEWUSER` is among the flags.
    pub(crate) id_maps: Option<IdMaps>,
    /// Mount a fresh `/proc` (the flags include `CLONE_NEWPID | CLONE_NEWNS`).
    pub(crate) mount_proc: bool,
    /// The run's mount layout (the flags include `CLONE_NEWNS`); replaces `mount_proc`.
    pub(crate) mounts: Option<MountPlan>,
    /// Set the hostname (the flags include `CLONE_NEWUTS`).
    pub(crate) hostname: bool,
    /// A network namespace to enter with `setns` (the executor's shared
    /// empty one) instead of a new one.
    pub(crate) network: Option<RawFd>,
    /// The seccomp filter: installed by the init before the program exists
    /// (the program inherits it), or by the program itself without an init.
    pub(crate) seccomp: Option<libc::sock_fprog>,
    /// A pidfd of the executor itself: the child sets `PR_SET_PDEATHSIG` and
    /// then checks through it that the executor did not die in between.
    pub(crate) executor_pidfd: Option<RawFd>,
    /// A new PID namespace: its first process is toolsmith's init, which
    /// starts the program as its child (see `init.rs`).
    pub(crate) with_init: bool,
    /// The init empties its bounding set (up to this capability) and locks
    /// its securebits while it is prepared, when its programs drop their
    /// privileges: they inherit both, and their own drop only checks them.
    pub(crate) bounding: Option<u32>,
}

// SAFETY: the seccomp program is static; the plan is never mutated after construction.
unsafe impl Send for InitPlan {}
// SAFETY: as above.
unsafe impl Sync for InitPlan {}

/// Everything the program's own process needs, prepared before the clone.
#[derive(Debug)]
pub(crate) struct SpawnPlan {
    program: CString,
    // The pointer arrays below point into these; they must outlive the spawn.
    _argv: Vec<CString>,
    _envp: Vec<CString>,
    argv_ptrs: Vec<*const c_char>,
    envp_ptrs: Vec<*const c_char>,
    cwd: CString,
    stdio: [RawFd; 3],
    /// The write end of the report pipe, put on fd 3 in the child; 4 or above.
    report: Option<RawFd>,
    cgroup_procs: Vec<RawFd>,
    rlimits: Vec<Rlimit>,
    /// A Landlock ruleset (4 or above) to enforce just before the descriptors are closed.
    landlock: Option<RawFd>,
    /// The identity and capabilities to drop before `execve`.
    privileges: Option<PrivilegePlan>,
}

// SAFETY: the raw pointers point into the CStrings owned by the plan itself;
// they are only read, by the child, while the plan is borrowed by the spawn.
unsafe impl Send for SpawnPlan {}
// SAFETY: as above; the plan is never mutated after construction.
unsafe impl Sync for SpawnPlan {}

/// What the program's process drops and enforces, from the run's sandbox.
pub(crate) struct Confinement {
    /// A Landlock ruleset (4 or above) to enforce just before the descriptors are closed.
    pub(crate) landlock: Option<RawFd>,
    /// The identity and capabilities to drop before `execve`.
    pub(crate) privileges: Option<PrivilegePlan>,
}

impl SpawnPlan {
    /// Prepares a spawn of `command` with the given stdio descriptors (each
    /// must be 3 or above), cgroup `cgroup.procs` descriptors to join, and
    /// rlimits, and `extra_env` appended to the command's environment.
    pub(crate) fn new(
        command: &Command,
        extra_env: &[(&OsStr, &OsStr)],
        stdio: [RawFd; 3],
        report: Option<RawFd>,
        cgroup_procs: Vec<RawFd>,
        rlimits: Vec<Rlimit>,
        confinement: Confinement,
    ) -> Result<SpawnPlan, Error> {
        let program = c_string(command.program().as_os_str())?;
        let mut argv = Vec::with_capacity(command.args().len() + 1);
        argv.push(program.clone());
        for arg in command.args() {
            argv.push(c_string(arg)?);
        }
        let mut envp = Vec::with_capacity(command.env_vars().len() + extra_env.len());
        // A variable the executor sets (the private TMPDIR) replaces the command's.
        let pairs = command
            .env_vars()
            .iter()
            .map(|(name, value)| (name.as_os_str(), value.as_os_str()))
            .filter(|(name, _)| !extra_env.iter().any(|(extra, _)| extra == name))
            .chain(extra_env.iter().copied());
        for (name, value) in pairs {
            let mut entry = Vec::with_capacity(name.len() + value.len() + 1);
            entry.extend_from_slice(name.as_bytes());
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            envp.push(c_string(OsStr::from_bytes(&entry))?);
        }
        let argv_ptrs = null_terminated(&argv);
        let envp_ptrs = null_terminated(&envp);
        Ok(SpawnPlan {
            program,
            _argv: argv,
            _envp: envp,
            argv_ptrs,
            envp_ptrs,
            cwd: c_string(command.cwd().as_os_str())?,
            stdio,
            report,
            cgroup_procs,
            rlimits,
            landlock: confinement.landlock,
            privileges: confinement.privileges,
        })
    }
}

fn c_string(value: &OsStr) -> Result<CString, Error> {
    CString::new(value.as_bytes()).map_err(|_| Error::NulByte {
        value: value.to_string_lossy().into_owned(),
    })
}

fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|string| string.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect()
}

/// Memory shared between the executor and the child (the child runs in the
/// executor's address space: the init for its whole life, the program until
/// `execve`). Boxed, so that its address stays put while a prepared init waits.
struct ChildContext {
    /// The namespace set-up; lives as long as the init (see [`Prepared`]).
    setup: *const InitPlan,
    /// The program's plan: stored by [`go`] just before it wakes the init,
    /// borrowed until the init's handshake. The same plan as the set-up's
    /// call on the direct path.
    tool: AtomicPtr<SpawnPlan>,
    failed_stage: AtomicUsize,
    errno: AtomicI32,
    /// The write end of the status pipe (with an init), else -1.
    status_fd: c_int,
    /// The read end of the go pipe (with an init), else -1.
    go_fd: c_int,
    /// A signalfd for every signal (with an init), else -1.
    signal_fd: c_int,
    /// The top of the program's own stack (with an init), else null.
    tool_stack: *mut c_void,
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
    /// The init was cloned by a thread of its own ([`on_init_thread`]), not
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
const READY: u8 = b'R';
/// The byte the init writes once the program has called `execve`.
const STARTED: u8 = b'S';
/// The byte the init writes when the program failed before `execve` (the
/// step and errno are in the context).
const FAILED: u8 = b'F';

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
/// but its own before `execve`. Call from the thread [`on_init_thread`]
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

/// [`spawn`] of a plan with an init, the init on a thread of its own
/// ([`on_init_thread`]) rather than the spawner thread: for an init that
/// serves more runs after this one (a session's), which then start their
/// programs from their own threads ([`go_from_any`]) instead of queuing on
/// the spawner thread. Blocks the calling thread likewise.
pub(crate) fn spawn_apart(setup: Box<InitPlan>, plan: &SpawnPlan) -> Result<Spawned, Error> {
    let (answer, prepared) = std::sync::mpsc::sync_channel(1);
    on_init_thread(Box::new(move || {
        let result = prepare_or_stage(setup, true);
        let pidfd = result.as_ref().ok().and_then(Prepared::pidfd_copy);
        // A caller that is gone drops the init, which the thread then outlives.
        let _ignored = answer.send(result);
        pidfd
    }))?;
    let prepared = prepared
        .recv()
        .map_err(|_| Error::Sys {
            call: "preparing toolsmith's init",
            source: io::Error::other("the init's thread ended without an answer"),
        })?
        .map_err(|failed| setup_error(failed, plan))?;
    go(prepared, plan, || ())
}

/// The error of a failed set-up of `plan`'s init: the executor's own call, or
/// the step that failed in the init (a spawn error of the program).
fn setup_error(failed: SetupFailed, plan: &SpawnPlan) -> Error {
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
struct SetupFailed {
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

fn prepare_or_stage(setup: Box<InitPlan>, own_thread: bool) -> Result<Prepared, SetupFailed> {
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
/// its own thread ([`on_init_thread`]) may be started from any thread: see
/// [`go_from_any`].
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

/// The child's entry point: the namespace's first process. Only system calls
/// from here on.
///
/// Without an init this process is the program. With one, this process is
/// toolsmith's init: it sets the namespaces up, waits for the call, starts
/// the program with [`tool_main`] and supervises it (`init.rs`).
extern "C" fn child_main(argument: *mut c_void) -> c_int {
    // SAFETY: the parent passed a ChildContext that outlives the child's use
    // of it (the parent waits until execve, _exit or the init's handshake,
    // and keeps a prepared init's context until it is reaped).
    let context = unsafe { &*argument.cast::<ChildContext>() };
    // SAFETY: the set-up plan lives as long as the context.
    let setup = unsafe { &*context.setup };

    // SAFETY: every call below is a plain system call on descriptors and
    // buffers prepared by the parent; none allocates or takes a lock.
    unsafe {
        // C1 step 1: the namespace's first process, while it holds its capabilities.
        if setup.id_maps.as_ref().is_some_and(|maps| !maps.write_own()) {
            return fail(context, Stage::IdMaps);
        }
        // The program dies with the executor. The signal fires when the
        // parent *thread* exits, which is why spawns come from one long-lived
        // thread (`spawn_from_spawner`); and the executor may have died
        // before the call, which the pidfd shows.
        if let Some(executor) = setup.executor_pidfd {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) != 0
            {
                return fail(context, Stage::Pdeathsig);
            }
            let mut poll = libc::pollfd {
                fd: executor,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut poll, 1, 0) != 0 {
                return fail(context, Stage::Orphaned);
            }
        }
        if let Some(network) = setup.network
            && libc::setns(network, libc::CLONE_NEWNET) != 0
        {
            return fail(context, Stage::Network);
        }
        // C1 step 2 (`mounts`): the call's mount layout and UTS set-up go
        // here, in the namespace's first process, before the program starts.
        if setup.mount_proc && !mount_private_proc() {
            return fail(context, Stage::MountProc);
        }
        // Before Landlock in the program: `set_up` adds the TMPDIR tmpfs's
        // rule to the ruleset the program enforces.
        if setup
            .mounts
            .as_ref()
            .is_some_and(|mounts| !crate::mounts::set_up(mounts))
        {
            return fail(context, Stage::Mounts);
        }
        if setup.hostname && !crate::mounts::set_hostname() {
            return fail(context, Stage::Hostname);
        }
        if !setup.with_init {
            return tool_main(argument);
        }

        // toolsmith's init. The memory it shares with the executor becomes
        // non-dumpable before the program exists, so the program can never
        // ptrace the init or read its memory (`docs/security.md`).
        if !set_dumpable(0) {
            return fail(context, Stage::InitDumpable);
        }
        init::reset_signal_dispositions();
        // Out of the executor's session and process group: a terminal's
        // Ctrl-C to toolsmith's group must not reach the init.
        if libc::setsid() < 0 {
            return fail(context, Stage::InitSetsid);
        }
        // The bounding set only limits what an `execve` grants, and the
        // init never calls it: it keeps the capabilities it holds.
        if setup
            .bounding
            .is_some_and(|last| !privileges::lock_bounding_set(last))
        {
            return fail(context, Stage::BoundingSet);
        }
        // The filter, last of the set-up: the init itself lives under it
        // from here on, and the program inherits it, so a call does not pay
        // for building the kernel's copy of it. The init needs nothing the
        // filter refuses (see `init.rs`). NO_NEW_PRIVS lets a filter be
        // installed without CAP_SYS_ADMIN; the init never calls `execve`.
        if let Some(filter) = &setup.seccomp {
            if !seccomp::set_no_new_privs() {
                return fail(context, Stage::NoNewPrivs);
            }
            if !seccomp::install(filter) {
                return fail(context, Stage::Seccomp);
            }
        }
        // Ready: the loop waits for the call.
        if !init::write_byte(context.status_fd, READY) {
            init::exit(0);
        }
        init_loop(context, argument)
    }
}

/// toolsmith's init after its set-up: starts a program at each go, forwards
/// signals to the running one, reaps every process re-parented to it, and
/// writes each program's record when it exits (`init.rs`). Ends when the
/// executor closes the go pipe, or kills it.
///
/// # Safety
/// Only in the init, after its handshake.
unsafe fn init_loop(context: &ChildContext, argument: *mut c_void) -> ! {
    let mut tool: libc::pid_t = 0;
    loop {
        // SAFETY: raw system calls on the init's descriptors and signals.
        match unsafe { init::wait(context.signal_fd, context.go_fd) } {
            init::Wake::Signal(libc::SIGCHLD) => {
                // SAFETY: as above.
                if tool != 0 && unsafe { init::reap_children(tool, context.status_fd) } {
                    tool = 0;
                } else if tool == 0 {
                    // Orphans of an earlier program, killed with its cgroup.
                    // SAFETY: as above.
                    unsafe { init::reap_children(0, context.status_fd) };
                }
            }
            init::Wake::Signal(signal) => {
                if tool != 0 {
                    // SAFETY: as above.
                    unsafe { init::forward(tool, signal) };
                }
            }
            // One program at a time: a go while one runs is the executor's
            // mistake, and is dropped.
            init::Wake::Go if tool != 0 => {}
            init::Wake::Go => {
                // SAFETY: as above; the executor stored the program's plan
                // before the go and keeps it until the handshake.
                tool = unsafe { start_tool(context, argument) };
                let byte = if tool > 0 { STARTED } else { FAILED };
                tool = tool.max(0);
                // SAFETY: as above.
                unsafe { init::write_byte(context.status_fd, byte) };
            }
            // SAFETY: as above.
            init::Wake::Closed => unsafe { init::exit(0) },
        }
    }
}

/// Starts the program as the init's child (PID 2 for the first), sharing the
/// memory until its `execve` on a stack of its own, while this process is
/// suspended. Returns its pid, or 0 when it failed before `execve` (it is
/// reaped; the step and errno are in the context) or could not be cloned.
///
/// # Safety
/// Only in the init.
unsafe fn start_tool(context: &ChildContext, argument: *mut c_void) -> libc::pid_t {
    // SAFETY: tool_main only makes system calls on the context.
    unsafe {
        let tool = libc::clone(
            tool_main,
            context.tool_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            argument,
        );
        if tool < 0 {
            context
                .errno
                .store(*libc::__errno_location(), Ordering::Release);
            context
                .failed_stage
                .store(Stage::InitClone.code(), Ordering::Release);
            return 0;
        }
        if context.failed_stage.load(Ordering::Acquire) != 0 {
            let mut status = 0;
            init::syscall4(
                libc::SYS_wait4,
                tool as usize,
                ptr::from_mut(&mut status) as usize,
                libc::__WALL as usize,
                0,
            );
            return 0;
        }
        tool
    }
}

/// Records the failed step and its errno where the parent reads them, then exits.
fn fail(context: &ChildContext, stage: Stage) -> c_int {
    // SAFETY: __errno_location is async-signal-safe and thread-local;
    // _exit never returns.
    unsafe {
        context
            .errno
            .store(*libc::__errno_location(), Ordering::Release);
        context.failed_stage.store(stage.code(), Ordering::Release);
        libc::_exit(127)
    }
}

/// The program's process, from its set-up to `execve`. Only system calls.
extern "C" fn tool_main(argument: *mut c_void) -> c_int {
    // SAFETY: as in child_main: the context outlives the program's set-up.
    let context = unsafe { &*argument.cast::<ChildContext>() };
    // SAFETY: both plans outlive the program's set-up (see ChildContext).
    let (setup, plan) = unsafe { (&*context.setup, &*context.tool.load(Ordering::Acquire)) };

    // SAFETY: every call below is a plain system call on descriptors and
    // buffers prepared by the parent; none allocates or takes a lock.
    unsafe {
        // Joining the cgroups comes first, so every process the program ever
        // starts is born inside them. The init stays out of them: it shares
        // the executor's memory, and the memory cgroup's OOM killer kills
        // every process sharing its victim's memory.
        for &procs in &plan.cgroup_procs {
            if libc::write(procs, b"0".as_ptr().cast(), 1) != 1 {
                return fail(context, Stage::Cgroup);
            }
        }
        // C1 step 3: session, signals, limits, descriptors.
        // Under an init, a process group of its own in the init's session,
        // as a shell makes for a job: the init left toolsmith's session
        // already, and a session of its own would also cost an autogroup of
        // the scheduler's, created and joined on the call's path. Without
        // one, a new session leaves toolsmith's session and terminal.
        let own_group = if setup.with_init {
            libc::setpgid(0, 0) == 0
        } else {
            libc::setsid() >= 0
        };
        if !own_group {
            return fail(context, Stage::Setsid);
        }
        // Dispositions the executor set to "ignore" would survive execve.
        // The raw system call also resets the signals glibc reserves for
        // itself (32 and 33), which its sigaction wrapper refuses to touch.
        // Errors for SIGKILL and SIGSTOP are expected and harmless. Under an
        // init there is nothing to reset: the init reset every disposition
        // before any program existed and never sets one, and this process
        // inherited them (64 system calls fewer per call).
        if !setup.with_init {
            let default_action = KernelSigaction::default();
            for signal in 1..NSIG {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    &raw const default_action,
                    ptr::null_mut::<KernelSigaction>(),
                    size_of::<u64>(),
                );
            }
        }
        for limit in &plan.rlimits {
            let value = libc::rlimit {
                rlim_cur: limit.soft,
                rlim_max: limit.hard,
            };
            // nix's `Resource` is the C library's own number: `__rlimit_resource_t`
            // on glibc, `int` on musl.
            if libc::setrlimit(limit.resource as _, &value) != 0 {
                return fail(context, Stage::Rlimit);
            }
        }
        for (target, &source) in plan.stdio.iter().enumerate() {
            if libc::dup2(source, target as c_int) < 0 {
                return fail(context, Stage::Stdio);
            }
        }
        // The report pipe's end is 4 or above, so dup2 always makes a new descriptor 3,
        // which (unlike its close-on-exec source) survives execve.
        let first_closed: u32 = match plan.report {
            Some(report) => {
                if libc::dup2(report, crate::command::REPORT_FD) < 0 {
                    return fail(context, Stage::Stdio);
                }
                4
            }
            None => 3,
        };
        // C1 step 4: identity, then every capability dropped.
        if let Some(privileges) = &plan.privileges
            && let Err(step) = privileges::drop_privileges(privileges, setup.bounding.is_some())
        {
            return fail(
                context,
                match step {
                    PrivilegeStep::Bounding => Stage::BoundingSet,
                    PrivilegeStep::Identity => Stage::Identity,
                    PrivilegeStep::Capabilities => Stage::Capabilities,
                },
            );
        }
        // C1 step 5: NO_NEW_PRIVS, Landlock, then seccomp, last.
        // Landlock needs no_new_privs (without CAP_SYS_ADMIN) and its ruleset
        // descriptor, which the next step closes.
        if !seccomp::set_no_new_privs() {
            return fail(context, Stage::NoNewPrivs);
        }
        if let Some(ruleset) = plan.landlock
            && libc::syscall(
                libc::SYS_landlock_restrict_self,
                ruleset,
                0 as libc::c_ulong,
            ) != 0
        {
            return fail(context, Stage::Landlock);
        }
        // With an init, the init installed the filter and this process inherited it.
        if !setup.with_init
            && let Some(filter) = &setup.seccomp
            && !seccomp::install(filter)
        {
            return fail(context, Stage::Seccomp);
        }
        // C1 step 6: close inherited descriptors, chdir, unmask, execve.
        if libc::syscall(libc::SYS_close_range, first_closed, u32::MAX, 0_u32) != 0
            && !close_fds_slowly(first_closed as c_int)
        {
            return fail(context, Stage::CloseFds);
        }
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            return fail(context, Stage::Chdir);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut()) != 0 {
            return fail(context, Stage::Sigmask);
        }
        libc::execve(
            plan.program.as_ptr(),
            plan.argv_ptrs.as_ptr(),
            plan.envp_ptrs.as_ptr(),
        );
        fail(context, Stage::Execve)
    }
}

/// Makes every mount private (so nothing the child mounts propagates to the
/// host), then mounts a fresh `/proc` for the calling process's PID
/// namespace over the old one. For a child in new PID and mount namespaces.
///
/// # Safety
/// Async-signal-safe: only `mount`.
pub(crate) unsafe fn mount_private_proc() -> bool {
    // SAFETY: mount with static NUL-terminated strings.
    unsafe {
        libc::mount(
            ptr::null(),
            c"/".as_ptr(),
            ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            ptr::null(),
        ) == 0
            && libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                ptr::null(),
            ) == 0
    }
}

/// Work for the spawner thread.
enum SpawnJob {
    /// [`spawn`], with the program's plan borrowed for the duration of the
    /// call (the caller blocks until the reply).
    Spawn {
        setup: Box<InitPlan>,
        plan: *const SpawnPlan,
        reply: std::sync::mpsc::SyncSender<Result<Spawned, Error>>,
    },
    /// [`go`], borrowed likewise.
    Go {
        prepared: Prepared,
        plan: *const SpawnPlan,
        reply: std::sync::mpsc::SyncSender<Result<Spawned, Error>>,
    },
}

// SAFETY: the plans are Sync and outlive the job (the requester blocks on the reply).
unsafe impl Send for SpawnJob {}

static SPAWNER: std::sync::Mutex<Option<std::sync::mpsc::Sender<SpawnJob>>> =
    std::sync::Mutex::new(None);

fn spawner_gone() -> Error {
    Error::Sys {
        call: "spawning from the spawner thread",
        source: io::Error::other("the spawner thread is gone"),
    }
}

/// Hands `job` to the executor's spawner thread, a thread that lives as
/// long as the process. `PR_SET_PDEATHSIG` fires when the parent *thread*
/// exits (isolation.md pitfall 13); spawning from a runtime worker or a
/// blocking-pool thread that later exits would kill the program. And an init
/// inherits the thread pointer of the thread that cloned it, so it and its
/// program write that thread's `errno`: one thread clones every init and
/// starts every program, and waits with signals blocked while they run.
fn send_to_spawner(job: SpawnJob) -> Result<(), Error> {
    let mut spawner = SPAWNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if spawner.is_none() {
        let (sender, jobs) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("toolsmith-spawner".to_owned())
            .spawn(move || {
                for job in jobs {
                    match job {
                        SpawnJob::Spawn { setup, plan, reply } => {
                            // SAFETY: the requester blocks on the reply, so the plan is alive.
                            let _ignored = reply.send(spawn(setup, unsafe { &*plan }));
                        }
                        SpawnJob::Go {
                            prepared,
                            plan,
                            reply,
                        } => {
                            // SAFETY: as above.
                            let _ignored = reply.send(go(prepared, unsafe { &*plan }, || ()));
                        }
                    }
                }
            })
            .map_err(|source| Error::Sys {
                call: "starting the spawner thread",
                source,
            })?;
        *spawner = Some(sender);
    }
    let Some(sender) = spawner.as_ref() else {
        return Err(spawner_gone());
    };
    sender.send(job).map_err(|_| spawner_gone())
}

/// [`spawn`] on the spawner thread. Blocks the calling thread until the
/// program has called `execve`, as [`spawn`] itself does.
pub(crate) fn spawn_from_spawner(setup: Box<InitPlan>, plan: &SpawnPlan) -> Result<Spawned, Error> {
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    send_to_spawner(SpawnJob::Spawn {
        setup,
        plan: ptr::from_ref(plan),
        reply,
    })?;
    answer.recv().map_err(|_| spawner_gone())?
}

/// [`go`] on the spawner thread, blocking likewise; `meanwhile` runs on the
/// calling thread once the job is handed over.
fn go_from_spawner(
    prepared: Prepared,
    plan: &SpawnPlan,
    meanwhile: impl FnOnce(),
) -> Result<Spawned, Error> {
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    send_to_spawner(SpawnJob::Go {
        prepared,
        plan: ptr::from_ref(plan),
        reply,
    })?;
    meanwhile();
    answer.recv().map_err(|_| spawner_gone())?
}

/// [`go`] from the calling thread when the init has a thread of its own,
/// else on the spawner thread; blocks until the program has called `execve`.
/// `meanwhile` runs on the calling thread while the init starts the program
/// (it may set that thread's `errno`, which no init of its own shares).
pub(crate) fn go_from_any(
    prepared: Prepared,
    plan: &SpawnPlan,
    meanwhile: impl FnOnce(),
) -> Result<Spawned, Error> {
    if prepared.keep.as_ref().is_some_and(|keep| keep.own_thread) {
        go(prepared, plan, meanwhile)
    } else {
        go_from_spawner(prepared, plan, meanwhile)
    }
}

/// Runs `work` on a new thread that then lives exactly as long as the init
/// `work` prepares ([`prepare_on_init_thread`]; `work` returns a duplicate
/// of its pidfd, or `None` when it prepared none).
///
/// An init inherits the thread pointer of the thread that cloned it, so it
/// and every program it starts write that thread's `errno`, and its
/// `PR_SET_PDEATHSIG` fires when that thread exits. A thread of its own
/// that only waits satisfies both: nothing else of the executor's runs on
/// it, so an init prepared ahead never queues a call's start behind it on
/// the spawner thread, and the call starts the program from its own thread
/// ([`go_from_any`]).
pub(crate) fn on_init_thread(
    work: Box<dyn FnOnce() -> Option<OwnedFd> + Send>,
) -> Result<(), Error> {
    std::thread::Builder::new()
        .name("toolsmith-init".to_owned())
        .stack_size(INIT_THREAD_STACK)
        .spawn(move || {
            let Some(pidfd) = work() else { return };
            let mut poll = libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // Raw: a program may write this thread's `errno` meanwhile. A
            // pidfd is readable once its process has exited.
            // SAFETY: ppoll on one valid pollfd, no timeout, no mask change.
            while unsafe {
                init::syscall4(libc::SYS_ppoll, ptr::from_mut(&mut poll) as usize, 1, 0, 0)
            } <= 0
            {}
        })
        .map(drop)
        .map_err(|source| Error::Sys {
            call: "starting a thread for toolsmith's init",
            source,
        })
}

/// The stack of a thread of [`on_init_thread`]: it plans a sandbox and
/// clones the init (which runs on a stack of its own), then waits.
const INIT_THREAD_STACK: usize = 256 * 1024;

/// Writes `data` to the file at `path` with one `write`; true on success.
///
/// # Safety
/// Async-signal-safe: only `open`, `write` and `close`.
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> bool {
    // SAFETY: path is NUL-terminated; data is a valid buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let written = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        usize::try_from(written).is_ok_and(|written| written == data.len())
    }
}

/// Closes descriptors `first` and up one by one, for kernels without `close_range`.
///
/// # Safety
/// Async-signal-safe: only `getrlimit` and `close`.
unsafe fn close_fds_slowly(first: c_int) -> bool {
    // SAFETY: plain system calls on our own descriptor table.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return false;
        }
        let highest = c_int::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
        for fd in first..highest {
            libc::close(fd);
        }
        true
    }
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

/// Creates a pipe whose both ends are close-on-exec and at least 3, so that
/// `dup2` onto 0, 1 and 2 in the child never clobbers another end. Returns
/// `(read, write)`.
pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), Error> {
    let (read, write) = pipe2(OFlag::O_CLOEXEC).map_err(|errno| Error::Sys {
        call: "pipe2",
        source: io::Error::from(errno),
    })?;
    Ok((above_stdio(read)?, above_stdio(write)?))
}

/// Returns `fd` itself when it is 3 or above, else a close-on-exec duplicate that is.
pub(crate) fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, Error> {
    at_least(fd, 3)
}

/// Returns `fd` itself when it is `lowest` or above, else a close-on-exec duplicate that is.
pub(crate) fn at_least(fd: OwnedFd, lowest: c_int) -> Result<OwnedFd, Error> {
    if fd.as_raw_fd() >= lowest {
        return Ok(fd);
    }
    let duplicate = fcntl(&fd, FcntlArg::F_DUPFD_CLOEXEC(lowest)).map_err(|errno| Error::Sys {
        call: "fcntl(F_DUPFD_CLOEXEC)",
        source: io::Error::from(errno),
    })?;
    // SAFETY: fcntl returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(duplicate) })
}

/// Switches the parent's end of a pipe to non-blocking mode (the child's end
/// stays blocking, as programs expect).
pub(crate) fn set_nonblocking(fd: &OwnedFd) -> Result<(), Error> {
    fcntl(fd, FcntlArg::F_GETFL)
        .and_then(|flags| {
            let flags = OFlag::from_bits_retain(flags) | OFlag::O_NONBLOCK;
            fcntl(fd, FcntlArg::F_SETFL(flags))
        })
        .map(drop)
        .map_err(|errno| Error::Sys {
            call: "fcntl(O_NONBLOCK)",
            source: io::Error::from(errno),
        })
}
