//! The executor's error type.

use std::io;
use std::path::PathBuf;

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
        stage: &'static str,
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
