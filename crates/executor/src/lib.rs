//! Runs one program in an isolated, resource-limited process tree.
//!
//! The principal types: a [`Command`] says what to run, [`Limits`] bound it,
//! an [`Executor`] (created once, holding the containment [`Backend`] chosen
//! for this kernel) runs it, and an [`Outcome`] reports how it ended.
//!
//! The executor knows nothing of tools, JSON or files on disk: it runs
//! processes. The lifecycle of a run and its signal handling are described in
//! `docs/executor.md`.
//!
//! ```no_run
//! # async fn example() -> Result<(), toolsmith_executor::Error> {
//! use std::path::Path;
//! use toolsmith_executor::{BackendChoice, Command, Executor, ExecutorConfig, Limits};
//!
//! let executor = Executor::new(ExecutorConfig { backend: BackendChoice::Auto, max_concurrent: None })?;
//! let mut command = Command::new(Path::new("/bin/echo"), Path::new("/"))?;
//! command.arg("hello".as_ref());
//! let outcome = executor.run(&command, &Limits::recommended()).await?;
//! assert!(outcome.success());
//! assert_eq!(outcome.stdout.bytes, b"hello\n");
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod allowed;
mod backend;
mod bpf;
mod capture;
mod cgroup;
mod child;
mod command;
mod containment;
mod creations;
mod egress;
mod environ;
mod error;
mod features;
mod init;
mod landlock;
mod lease;
mod lifecycle;
mod limits;
mod mask_server;
mod masks;
mod mounts;
mod outcome;
mod pidfd;
mod pipes;
mod plan;
mod prepared;
mod privileges;
mod rlimits;
mod run;
mod runs_dir;
mod sandbox;
mod seccomp;
mod spawn;
mod spawner;
mod subreaper;
mod sweep;

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use nix::sys::resource::{Resource, getrlimit};

pub use crate::backend::{Backend, BackendChoice, UnknownBackend};
pub use crate::command::{
    Command, DEFAULT_ENV_ALLOW, MAX_REPORT_LINE, REPORT_FD, ReportSink, filtered_env,
};
pub use crate::creations::{MAX_WRITE_ATTEMPTS, WriteAttempt, WriteRefusal};
pub use crate::egress::{
    DEFAULT_PORTS, Destination, DestinationError, Egress, EgressEvent, EgressProtocol,
    EgressVerdict, HostPattern, PROXY_PORT,
};
pub use crate::environ::{forbid_dumping, scrub_environment, seal_initial_environment};
pub use crate::error::{Error, Stage};
pub use crate::features::{DISABLE_FEATURES_VAR, Features, Probe, probe_features};
pub use crate::limits::{LimitKind, Limits};
pub use crate::mask_server::{MAX_READ_ATTEMPTS, ReadAttempt};
pub use crate::outcome::{Capture, Outcome, Termination};
pub use crate::prepared::Session;
pub use crate::privileges::{Privileges, RunAs, effective_uid};
pub use crate::sandbox::{
    AppliedSandbox, Enforcement, Filesystem, FilesystemAccess, Network, Sandbox, Syscalls,
};
pub use crate::seccomp::{
    FiltersForBench, LAST_CLASSIFIED, classified_system_calls, filters_for_bench,
};

use crate::cgroup::Cgroups;
use crate::containment::Containment;
use crate::prepared::Planner;
use crate::rlimits::{HardLimits, Rlimit};

/// How an [`Executor`] is set up.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Which containment backend to use.
    pub backend: BackendChoice,
    /// At most this many runs at once; further calls to [`Executor::run`] wait.
    pub max_concurrent: Option<usize>,
}

/// Runs programs. Create one per process and share it: it owns the cgroup
/// directories of its runs (removed when it is dropped) and the chosen backend.
#[derive(Debug)]
pub struct Executor {
    backend: Backend,
    cgroups: Option<Cgroups>,
    permits: Option<tokio::sync::Semaphore>,
    /// The features, the host and what plans a run's sandbox, shared with
    /// the spawner thread that prepares sandboxes ahead (`prepared.rs`).
    planner: Arc<Planner>,
    /// The executor's own hard rlimits, which bound a run's.
    hard_limits: HardLimits,
    /// How the egress proxies of proxied runs resolve names.
    resolver: crate::egress::Resolver,
}

impl Executor {
    /// Probes the kernel and sets up the chosen backend.
    ///
    /// With [`BackendChoice::Auto`] the strongest available backend is used:
    /// cgroup, then PID namespace, then subreaper, then process group. With
    /// [`BackendChoice::Only`] an unavailable backend is an error.
    pub fn new(config: ExecutorConfig) -> Result<Executor, Error> {
        ignore_sigpipe();
        let (cgroups, features) = features::probe();
        let available = |backend: Backend| -> Result<(), String> {
            let probe = match backend {
                Backend::Cgroup => &features.cgroup_kill,
                Backend::PidNamespace => &features.pid_namespace,
                Backend::Subreaper => &features.subreaper,
                Backend::ProcessGroup => return Ok(()),
            };
            if !features.pidfd.available {
                return Err(format!("pidfds are unavailable: {}", features.pidfd.detail));
            }
            if probe.available {
                Ok(())
            } else {
                Err(probe.detail.clone())
            }
        };
        let backend = match config.backend {
            BackendChoice::Auto => Backend::ALL
                .into_iter()
                .find(|&backend| available(backend).is_ok())
                .unwrap_or(Backend::ProcessGroup),
            BackendChoice::Only(backend) => {
                available(backend)
                    .map_err(|reason| Error::BackendUnavailable { backend, reason })?;
                backend
            }
        };
        if backend == Backend::Subreaper {
            subreaper::acquire()?;
        }
        let hard_limits = HardLimits::read(getrlimit)?;
        let host = sandbox::Host {
            is_root: nix::unistd::geteuid().is_root(),
            last_capability: privileges::last_capability(),
        };
        let own_pidfd = pidfd::open(nix::unistd::getpid().as_raw());
        Ok(Executor {
            backend,
            cgroups: if backend == Backend::Cgroup {
                cgroups
            } else {
                None
            },
            permits: config
                .max_concurrent
                .map(|permits| tokio::sync::Semaphore::new(permits.max(1))),
            planner: Arc::new(Planner::new(
                features,
                host,
                backend,
                own_pidfd,
                runs_dir::RunsDir::acquire()?,
            )),
            hard_limits,
            resolver: crate::egress::Resolver::default(),
        })
    }

    /// Has the egress proxies of [`Network::Proxy`] runs resolve names from
    /// this hosts-format file (read again whenever it may have changed) instead of the system
    /// resolver: `TOOLSMITH_EGRESS_HOSTS`, for tests and air-gapped hosts.
    #[must_use]
    pub fn with_egress_hosts(mut self, hosts: Option<std::path::PathBuf>) -> Executor {
        self.resolver = crate::egress::Resolver::new(hosts);
        self
    }

    /// The containment backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// What the kernel allowed when the executor was created.
    pub fn features(&self) -> &Features {
        &self.planner.features
    }

    /// Keeps a sandbox prepared ahead of the next run (off by default).
    ///
    /// After each sandboxed run, the executor's spawner thread sets up the
    /// namespaces, mounts and system-call filter of one more run with the same
    /// sandbox and TMPDIR size, and the next such run starts its program in
    /// them at once. Each prepared sandbox serves one run. This takes the
    /// sandbox's set-up off each run's latency (not off the machine's CPU),
    /// and a prepared sandbox is an idle process and an empty temporary
    /// directory between calls: for a server that runs calls in a loop, not
    /// for a one-shot run. With it on, a run also returns before the kernel
    /// has torn its namespaces down (the init is reaped in the background).
    /// Turning it off drops what waits.
    pub fn keep_prepared(&self, keep: bool) {
        self.planner.set_keep_prepared(keep);
    }

    /// Whether the executor keeps sandboxes prepared (see [`Executor::keep_prepared`]).
    pub fn keeps_prepared(&self) -> bool {
        self.planner.keeps_prepared()
    }

    /// How many prepared sandboxes wait for a run now.
    pub fn prepared(&self) -> usize {
        self.planner.waiting()
    }

    /// Runs `command` under `limits` and waits until its whole process tree is gone.
    ///
    /// Cancel-safe: dropping the returned future kills and reaps everything
    /// the run started. A program that cannot be started is
    /// [`Error::Spawn`]; a program that starts and fails is an [`Outcome`].
    pub async fn run(&self, command: &Command, limits: &Limits) -> Result<Outcome, Error> {
        self.run_in(command, limits, None, None).await
    }

    /// [`Executor::run`] with a report channel: the program gets the write end of a pipe on
    /// file descriptor [`REPORT_FD`], and every line it writes there (without its newline, at
    /// most [`MAX_REPORT_LINE`] bytes) is sent to `reports` while the program runs. What the
    /// lines mean is the caller's business; the executor only carries them. `reports` is
    /// dropped when the run ends, so a receiver's loop ends with it.
    pub async fn run_reporting(
        &self,
        command: &Command,
        limits: &Limits,
        reports: ReportSink,
    ) -> Result<Outcome, Error> {
        self.run_in(command, limits, None, Some(reports)).await
    }

    /// A [`Session`]: runs that share one init and its namespaces, one after
    /// another, for the runs of one trust domain (the probes of one tool
    /// directory). Only the cgroup backend can end a run without ending its
    /// init; on the others each run of a session gets namespaces of its own.
    pub fn session(self: &Arc<Self>) -> Session {
        Session::new(Arc::clone(self))
    }

    async fn run_in(
        &self,
        command: &Command,
        limits: &Limits,
        session: Option<&Session>,
        reports: Option<ReportSink>,
    ) -> Result<Outcome, Error> {
        let _permit = match &self.permits {
            Some(semaphore) => semaphore.acquire().await.ok(),
            None => None,
        };
        run::run(self, command, limits, session, reports).await
    }

    fn next_run_id(&self) -> u64 {
        self.planner.next_run_id()
    }

    fn contain(&self, limits: &Limits) -> Result<Containment, Error> {
        Ok(match self.backend {
            Backend::Cgroup => match &self.cgroups {
                Some(cgroups) => Containment::Cgroup(cgroups.acquire(limits)?),
                None => Containment::ProcessGroup,
            },
            Backend::PidNamespace => Containment::PidNamespace,
            Backend::Subreaper => Containment::Subreaper {
                marker: Vec::new(),
                seen: HashSet::new(),
            },
            Backend::ProcessGroup => Containment::ProcessGroup,
        })
    }

    fn release(&self, containment: Containment) {
        if let (Containment::Cgroup(leaf), Some(cgroups)) = (containment, &self.cgroups) {
            cgroups.release(leaf);
        }
    }

    fn dev_null(&self) -> Result<OwnedFd, Error> {
        let file = std::fs::File::open("/dev/null").map_err(|source| Error::Sys {
            call: "open(/dev/null)",
            source,
        })?;
        crate::pipes::above_stdio(file.into())
    }

    /// The rlimits of a run: always no core files; CPU with soft < hard so
    /// SIGXCPU comes first; file size and open files; and, only where no
    /// cgroup does the job, RLIMIT_DATA for memory and RLIMIT_NPROC for
    /// processes (which does not bind root, and counts every process of the uid).
    fn rlimits(&self, limits: &Limits) -> Vec<Rlimit> {
        let cgroups = self.cgroups.as_ref();
        let mut wanted: Vec<(Resource, u64, u64)> = vec![(Resource::RLIMIT_CORE, 0, 0)];
        if let Some(cpu) = limits.cpu {
            let soft = cpu.as_secs() + u64::from(cpu.subsec_nanos() > 0);
            let soft = soft.max(1);
            wanted.push((Resource::RLIMIT_CPU, soft, soft + 1));
        }
        if let Some(bytes) = limits.max_file_size {
            wanted.push((Resource::RLIMIT_FSIZE, bytes, bytes));
        }
        if let Some(count) = limits.max_open_files {
            wanted.push((Resource::RLIMIT_NOFILE, count, count));
        }
        if let Some(bytes) = limits
            .memory
            .filter(|_| !cgroups.is_some_and(Cgroups::limits_memory))
        {
            wanted.push((Resource::RLIMIT_DATA, bytes, bytes));
        }
        if let Some(count) = limits
            .max_processes
            .filter(|_| !self.planner.host.is_root && !cgroups.is_some_and(Cgroups::limits_pids))
        {
            wanted.push((Resource::RLIMIT_NPROC, count, count));
        }
        wanted
            .into_iter()
            .map(|(resource, soft, hard)| self.hard_limits.clamp(resource, soft, hard))
            .collect()
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.planner.set_keep_prepared(false);
        // Finished runs' inits, and what goes after them (their TMPDIRs), are
        // the reaper thread's: gone before the process may exit.
        pidfd::wait_reaped(std::time::Duration::from_secs(2));
        if self.backend == Backend::Subreaper {
            subreaper::release();
        }
    }
}

/// A write to a pipe whose reader is gone must fail with EPIPE rather than
/// kill the executor. Rust binaries already ignore SIGPIPE; a library may be
/// embedded in one that does not.
fn ignore_sigpipe() {
    // SAFETY: querying and, if it is the default, ignoring SIGPIPE.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_DFL
        {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
    }
}
