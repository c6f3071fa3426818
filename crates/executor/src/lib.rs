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

mod backend;
mod command;
mod error;
mod features;
mod limits;
mod outcome;

use std::time::Instant;

pub use crate::backend::{Backend, BackendChoice, UnknownBackend};
pub use crate::command::{Command, DEFAULT_ENV_ALLOW, filtered_env};
pub use crate::error::Error;
pub use crate::features::{Features, Probe, probe_features};
pub use crate::limits::{LimitKind, Limits};
pub use crate::outcome::{Capture, Outcome, Termination};

/// How an [`Executor`] is set up.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Which containment backend to use.
    pub backend: BackendChoice,
    /// At most this many runs at once; further calls to [`Executor::run`] wait.
    pub max_concurrent: Option<usize>,
}

/// Runs programs. Create one per process and share it: it owns the cgroup
/// directory of its runs and the chosen backend.
#[derive(Debug)]
pub struct Executor {
    backend: Backend,
    features: Features,
    permits: Option<tokio::sync::Semaphore>,
}

impl Executor {
    /// Probes the kernel and picks the backend.
    pub fn new(config: ExecutorConfig) -> Result<Executor, Error> {
        let features = probe_features();
        let backend = match config.backend {
            BackendChoice::Auto => Backend::ProcessGroup,
            BackendChoice::Only(backend) => backend,
        };
        Ok(Executor {
            backend,
            features,
            permits: config.max_concurrent.map(tokio::sync::Semaphore::new),
        })
    }

    /// The containment backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// What the kernel allowed when the executor was created.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// Runs `command` under `limits` and waits until its whole process tree is gone.
    ///
    /// Cancel-safe: dropping the returned future kills and reaps everything
    /// the run started.
    pub async fn run(&self, command: &Command, limits: &Limits) -> Result<Outcome, Error> {
        let _permit = match &self.permits {
            Some(semaphore) => semaphore.acquire().await.ok(),
            None => None,
        };
        // Transitional body, replaced by the contained engine.
        let started = Instant::now();
        let mut child = tokio::process::Command::new(command.program());
        child
            .args(command.args())
            .current_dir(command.cwd())
            .env_clear()
            .envs(command.env_vars().iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = child.spawn().map_err(|source| Error::Spawn {
            program: command.program().to_path_buf(),
            stage: "execve",
            source,
        })?;
        if let Some(mut stdin) = child.stdin.take() {
            use tokio::io::AsyncWriteExt;
            let _ = stdin.write_all(command.stdin_bytes().unwrap_or_default()).await;
        }
        let output = tokio::time::timeout(limits.timeout, child.wait_with_output()).await;
        let (termination, limit, stdout, stderr) = match output {
            Ok(Ok(output)) => {
                use std::os::unix::process::ExitStatusExt;
                let termination = match output.status.code() {
                    Some(code) => Termination::Exited(code),
                    None => Termination::Signaled(output.status.signal().unwrap_or(9)),
                };
                (termination, None, output.stdout, output.stderr)
            }
            _ => (Termination::Signaled(9), Some(LimitKind::Timeout), Vec::new(), Vec::new()),
        };
        let capture = |bytes: Vec<u8>| Capture {
            total: bytes.len() as u64,
            truncated: false,
            bytes,
        };
        Ok(Outcome {
            termination,
            limit,
            escalated: false,
            wall_time: started.elapsed(),
            cpu_time: None,
            peak_memory: None,
            stdout: capture(stdout),
            stderr: capture(stderr),
            leftovers_killed: None,
            stdin_unread: false,
            backend: self.backend,
        })
    }
}
