//! Resource limits for one run, and which of them ended it.

use std::fmt;
use std::time::Duration;

/// The resource limits of one run.
///
/// `memory`, `max_processes` and `cpu` apply to the whole process tree when
/// the executor has cgroup controllers for them (see [`Features`](crate::Features));
/// otherwise they fall back to per-process rlimits, which a tool can multiply
/// by forking. The fallbacks are documented in `docs/executor.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget. At the deadline the tree gets SIGTERM, then SIGKILL after `grace`.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// CPU time of the tree (user + system). `None` leaves CPU unlimited (the
    /// wall timeout still bounds the run).
    pub cpu: Option<Duration>,
    /// Memory of the tree in bytes. Never enforced with RLIMIT_AS.
    pub memory: Option<u64>,
    /// Number of processes (and threads) the tree may hold at once.
    pub max_processes: Option<u64>,
    /// Largest file a process may write, in bytes (RLIMIT_FSIZE).
    pub max_file_size: Option<u64>,
    /// Open file descriptors per process (RLIMIT_NOFILE).
    pub max_open_files: Option<u64>,
    /// Bytes kept per output stream; the rest is counted and discarded.
    pub max_output: u64,
    /// Size of the run's private TMPDIR (a tmpfs in its mount namespace,
    /// whose pages count against `memory` where a memory cgroup applies).
    /// `None` leaves the kernel's default, half of RAM.
    pub tmp_size: Option<u64>,
}

impl Limits {
    /// The limits toolsmith uses when the operator sets none: 30 s wall time,
    /// 2 s grace, no CPU cap, 1 GiB of memory, 256 processes, 1 GiB files,
    /// 1024 open files, 1 MiB of output per stream, a 64 MiB TMPDIR.
    pub fn recommended() -> Limits {
        Limits {
            timeout: Duration::from_secs(30),
            grace: Duration::from_secs(2),
            cpu: None,
            memory: Some(1 << 30),
            max_processes: Some(256),
            max_file_size: Some(1 << 30),
            max_open_files: Some(1024),
            max_output: 1 << 20,
            tmp_size: Some(64 << 20),
        }
    }
}

/// The limit that ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// The wall-clock timeout.
    Timeout,
    /// The CPU time limit (SIGXCPU/SIGKILL from RLIMIT_CPU, or the tree's
    /// cgroup CPU usage reaching the limit).
    Cpu,
    /// The memory limit (an OOM kill in the run's memory cgroup).
    Memory,
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LimitKind::Timeout => "timeout",
            LimitKind::Cpu => "cpu",
            LimitKind::Memory => "memory",
        })
    }
}
