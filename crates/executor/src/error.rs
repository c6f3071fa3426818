//! The executor's error type.

use std::path::PathBuf;
use std::{fmt, io};

use crate::{Backend, RunAs};

/// Why the executor could not run a program or set itself up.
///
/// A program that starts and then fails is not an error: it is an
/// [`Outcome`](crate::Outcome). Errors are what happens before the program
/// runs (or around it, in the executor's own plumbing).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The program could not be started: the kernel refused `execve` (for
    /// example ENOENT, EACCES or ENOEXEC) or a per-run set-up step failed in
    /// the new process.
    #[error("failed to start `{program}` ({stage})", program = program.display())]
    Spawn {
        /// The program that was to run.
        program: PathBuf,
        /// The set-up step that failed in the new process, e.g. `execve` or `chdir`.
        stage: Stage,
        /// The errno of that step.
        #[source]
        source: io::Error,
    },
    /// The program or working directory was not an absolute path.
    #[error("`{path}` is not an absolute path", path = path.display())]
    RelativePath {
        /// The offending path.
        path: PathBuf,
    },
    /// A writable path of `Filesystem::Paths` is relative or does not exist: Landlock and the
    /// mount layout can only grant what exists.
    #[error("writable path `{path}` is not an absolute path that exists", path = path.display())]
    WritablePath {
        /// The path as given.
        path: std::path::PathBuf,
    },
    /// `Filesystem::Paths` lists more roots than a run may have.
    #[error("{count} writable paths (at most {max})")]
    TooManyWritablePaths {
        /// How many were listed.
        count: usize,
        /// The most a run may have.
        max: usize,
    },
    /// A path or argument held a NUL byte, which no process can receive.
    #[error("`{value}` contains a NUL byte")]
    NulByte {
        /// The offending value, lossily printed.
        value: String,
    },
    /// A cgroup of the run could not be created, configured or read.
    #[error("cgroup operation failed on `{path}`", path = path.display())]
    Cgroup {
        /// The cgroup file or directory.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: io::Error,
    },
    /// The requested containment backend cannot work on this kernel.
    #[error("the `{backend}` containment backend is unavailable: {reason}")]
    BackendUnavailable {
        /// The backend that was asked for.
        backend: Backend,
        /// Why the probe refused it.
        reason: String,
    },
    /// The run's sandbox asks for a mechanism the kernel does not allow, and
    /// the sandbox says it is required: the run fails closed instead of
    /// running with less isolation.
    #[error("{requirement} needs {mechanism}, which is unavailable: {reason}")]
    SandboxUnavailable {
        /// The setting that asked for it, e.g. `network = deny`.
        requirement: &'static str,
        /// The mechanism, e.g. `a network namespace` or `Landlock`.
        mechanism: &'static str,
        /// Why the probe found it unusable.
        reason: String,
    },
    /// `[sandbox] user` named an identity that cannot be used.
    #[error("invalid user `{user}`: {reason}")]
    InvalidUser {
        /// The text given.
        user: String,
        /// Why it was refused.
        reason: String,
    },
    /// A run was to switch identity, which only a root executor can do.
    #[error("running tools as {run_as} needs toolsmith to run as root (it runs as uid {uid})", uid = crate::effective_uid())]
    RunAsNeedsRoot {
        /// The identity asked for.
        run_as: RunAs,
    },
    /// The run's own directory ([`Sandbox::own_dir`](crate::Sandbox::own_dir)) could not
    /// be made, is not a directory (a symbolic link, a file), or is not an absolute path
    /// below a directory other than `/`.
    #[error("cannot use {} as the run's own directory", path.display())]
    OwnDir {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The directory of the runs' TMPDIRs is no longer the one the executor made (see
    /// `runs_dir.rs`): the run is refused rather than given a TMPDIR someone else chose.
    #[error("{} was replaced while toolsmith runs", path.display())]
    RunsDirReplaced {
        /// The directory.
        path: std::path::PathBuf,
    },
    /// A system call of the executor's own plumbing failed.
    #[error("{call} failed")]
    Sys {
        /// The call, e.g. `pipe2` or `clone`.
        call: &'static str,
        /// The errno.
        #[source]
        source: io::Error,
    },
}

/// The step of a new process's set-up that failed before `execve`, in
/// [`Error::Spawn`]. Displayed as the step's name, e.g. `execve` or `chdir`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stage {
    /// The user-namespace id maps (`/proc/self/uid_map`, `gid_map`).
    IdMaps,
    /// Joining the run's cgroups (`cgroup.procs`).
    Cgroup,
    /// A session (`setsid`) or, under toolsmith's init, a process group (`setpgid`) of the program's own.
    Setsid,
    /// A resource limit (`setrlimit`).
    Rlimit,
    /// Standard input, output and error, and the report pipe (`dup2`).
    Stdio,
    /// Closing every inherited descriptor (`close_range`).
    CloseFds,
    /// The working directory (`chdir`).
    Chdir,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs,
    /// Unblocking every signal (`sigprocmask`).
    Sigmask,
    /// `execve` itself: ENOENT, EACCES or ENOEXEC, for example.
    Execve,
    /// `PR_SET_PDEATHSIG`.
    Pdeathsig,
    /// The executor died during the spawn.
    Orphaned,
    /// Mounting a private `/proc`.
    MountProc,
    /// Enforcing the Landlock ruleset (`landlock_restrict_self`).
    Landlock,
    /// `PR_SET_DUMPABLE` 0 in toolsmith's init.
    InitDumpable,
    /// The init's clone of the program.
    InitClone,
    /// The init's own session (`setsid`).
    InitSetsid,
    /// The run's mount layout.
    Mounts,
    /// The hostname of the UTS namespace (`sethostname`).
    Hostname,
    /// Emptying the capability bounding set and locking the securebits.
    BoundingSet,
    /// Switching to the `[sandbox] user`.
    Identity,
    /// Dropping every capability (`capset`).
    Capabilities,
    /// Installing the system-call filter.
    Seccomp,
    /// Bringing loopback up and listening on the egress proxy's port in the
    /// run's network namespace, and handing the socket to the executor.
    EgressListener,
}

impl Stage {
    /// Every stage, in the order of their codes (from 1).
    const ALL: [Stage; 24] = [
        Stage::IdMaps,
        Stage::Cgroup,
        Stage::Setsid,
        Stage::Rlimit,
        Stage::Stdio,
        Stage::CloseFds,
        Stage::Chdir,
        Stage::NoNewPrivs,
        Stage::Sigmask,
        Stage::Execve,
        Stage::Pdeathsig,
        Stage::Orphaned,
        Stage::MountProc,
        Stage::Landlock,
        Stage::InitDumpable,
        Stage::InitClone,
        Stage::InitSetsid,
        Stage::Mounts,
        Stage::Hostname,
        Stage::BoundingSet,
        Stage::Identity,
        Stage::Capabilities,
        Stage::Seccomp,
        Stage::EgressListener,
    ];

    /// The step's name, as errors display it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::IdMaps => "writing the user namespace id maps",
            Stage::Cgroup => "joining the run's cgroup",
            Stage::Setsid => "setsid",
            Stage::Rlimit => "setrlimit",
            Stage::Stdio => "redirecting stdio",
            Stage::CloseFds => "closing inherited file descriptors",
            Stage::Chdir => "chdir",
            Stage::NoNewPrivs => "prctl(PR_SET_NO_NEW_PRIVS)",
            Stage::Sigmask => "sigprocmask",
            Stage::Execve => "execve",
            Stage::Pdeathsig => "prctl(PR_SET_PDEATHSIG)",
            Stage::Orphaned => "the executor exited during the spawn",
            Stage::MountProc => "mounting a private /proc",
            Stage::Landlock => "landlock_restrict_self",
            Stage::InitDumpable => "prctl(PR_SET_DUMPABLE) in the init",
            Stage::InitClone => "starting the program from the init",
            Stage::InitSetsid => "setsid in the init",
            Stage::Mounts => "setting up the run's mounts",
            Stage::Hostname => "sethostname",
            Stage::BoundingSet => {
                "dropping the capability bounding set (PR_CAPBSET_DROP, PR_SET_SECUREBITS)"
            }
            Stage::Identity => "switching to the [sandbox] user (setgroups, setresgid, setresuid)",
            Stage::Capabilities => "dropping capabilities (capset)",
            Stage::Seccomp => "installing the seccomp filter",
            Stage::EgressListener => "listening on the egress proxy's port in the run's network",
        }
    }

    /// The number the child stores in the memory it shares with the
    /// executor (0 is no failure).
    pub(crate) fn code(self) -> usize {
        self as usize + 1
    }

    /// The stage a child stored, `None` for 0 (no failure) or an unknown code.
    pub(crate) fn from_code(code: usize) -> Option<Stage> {
        Stage::ALL.get(code.checked_sub(1)?).copied()
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A stage equals its name, e.g. `"execve"`.
impl PartialEq<&str> for Stage {
    fn eq(&self, name: &&str) -> bool {
        self.name() == *name
    }
}

#[cfg(test)]
mod tests {
    use super::Stage;

    #[test]
    fn every_stage_round_trips_through_its_code_and_has_a_name_of_its_own() {
        for (index, stage) in Stage::ALL.into_iter().enumerate() {
            assert_eq!(Stage::from_code(stage.code()), Some(stage));
            assert!(
                Stage::ALL[..index]
                    .iter()
                    .all(|earlier| earlier.name() != stage.name())
            );
        }
        assert_eq!(Stage::from_code(0), None);
        assert_eq!(Stage::from_code(Stage::ALL.len() + 1), None);
        assert_eq!(Stage::Execve.to_string(), "execve");
    }
}
