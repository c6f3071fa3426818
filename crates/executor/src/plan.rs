//! What a spawn needs, prepared in the executor before the clone: the
//! init's plan (namespaces, mounts, filter: everything that follows from the
//! sandbox alone) and the program's plan (C strings, pointer arrays,
//! descriptors, rlimits), so that the child only makes system calls.

use std::ffi::{CString, OsStr, c_char, c_int};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::ptr;

use nix::unistd::{getgid, getuid};

use crate::child::{set_dumpable, write_file};
use crate::mounts::MountPlan;
use crate::privileges::PrivilegePlan;
use crate::rlimits::Rlimit;
use crate::{Command, Error};

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

/// What the namespace's first process sets up before any program exists:
/// everything that follows from the sandbox alone, so that it can be done
/// ahead of the call (see [`prepare_on_init_thread`](crate::spawn::prepare_on_init_thread)).
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
    /// The child end of the run's egress channel: the namespace's first
    /// process listens on the proxy's port and sends the socket on it.
    pub(crate) egress_channel: Option<RawFd>,
    /// The channel the filter's listener goes to (the egress channel, or a
    /// channel of its own): the filter is installed with a listener, which
    /// goes to the executor's supervisor (Unix socket grants, supervised creations).
    pub(crate) notify_channel: Option<RawFd>,
}

// SAFETY: the seccomp program is static; the plan is never mutated after construction.
unsafe impl Send for InitPlan {}
// SAFETY: as above.
unsafe impl Sync for InitPlan {}

/// Everything the program's own process needs, prepared before the clone.
#[derive(Debug)]
pub(crate) struct SpawnPlan {
    pub(crate) program: CString,
    // The pointer arrays below point into these; they must outlive the spawn.
    _argv: Vec<CString>,
    _envp: Vec<CString>,
    pub(crate) argv_ptrs: Vec<*const c_char>,
    pub(crate) envp_ptrs: Vec<*const c_char>,
    pub(crate) cwd: CString,
    pub(crate) stdio: [RawFd; 3],
    /// The write end of the report pipe, put on fd 3 in the child; 4 or above.
    pub(crate) report: Option<RawFd>,
    pub(crate) cgroup_procs: Vec<RawFd>,
    pub(crate) rlimits: Vec<Rlimit>,
    /// A Landlock ruleset (4 or above) to enforce just before the descriptors are closed.
    pub(crate) landlock: Option<RawFd>,
    /// The identity and capabilities to drop before `execve`.
    pub(crate) privileges: Option<PrivilegePlan>,
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
