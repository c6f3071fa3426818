//! What a finished run reports: how it ended, what it printed, what it cost.

use std::time::Duration;

use crate::{AppliedSandbox, Backend, EgressEvent, LimitKind};

/// How the program's main process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It called `exit` with this code.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(i32),
}

/// The bytes kept from one output stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The first bytes of the stream, at most `max_output`, cut back to a
    /// UTF-8 character boundary when the stream is text.
    pub bytes: Vec<u8>,
    /// Every byte the program wrote to the stream, kept or not.
    pub total: u64,
    /// True when `bytes` is shorter than `total`.
    pub truncated: bool,
}

impl Capture {
    /// The kept bytes as text, with invalid UTF-8 replaced by U+FFFD.
    pub fn text_lossy(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// The report of one finished run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How the main process ended.
    pub termination: Termination,
    /// The limit that ended the run, if one did.
    pub limit: Option<LimitKind>,
    /// True when SIGTERM was not enough and the tree was killed with SIGKILL.
    pub escalated: bool,
    /// Wall time from spawn until the whole tree was gone.
    pub wall_time: Duration,
    /// CPU time (user + system) of the whole tree when a cgroup measured it,
    /// else of the main process and the children it waited for.
    pub cpu_time: Option<Duration>,
    /// Peak memory in bytes: of the whole tree when a cgroup measured it,
    /// else of the largest single process.
    pub peak_memory: Option<u64>,
    /// What the program wrote to stdout.
    pub stdout: Capture,
    /// What the program wrote to stderr.
    pub stderr: Capture,
    /// Processes of the run still alive after the main process ended, which
    /// the executor then killed. `None` when the backend cannot count them.
    pub leftovers_killed: Option<u64>,
    /// True when the program closed stdin before reading all of its input.
    pub stdin_unread: bool,
    /// The containment backend that ran the program.
    pub backend: Backend,
    /// The isolation that applied.
    pub sandbox: AppliedSandbox,
    /// Every connection the run asked its egress proxy for, in the order
    /// they were asked (empty unless the network was [`crate::Network::Proxy`]).
    pub egress: Vec<EgressEvent>,
    /// Every masked path the run tried to read (looked up, opened or listed), at most
    /// [`MAX_READ_ATTEMPTS`](crate::MAX_READ_ATTEMPTS), deduplicated, in order. Empty
    /// without the mask server or a cgroup of the run's own ([`Features::read_watch`](crate::Features)).
    pub reads_denied: Vec<crate::ReadAttempt>,
    /// How many more attempts there were beyond `reads_denied`.
    pub reads_denied_more: usize,
    /// Every name the run tried to make and was refused (supervised creations,
    /// `Sandbox::protected`), at most [`MAX_WRITE_ATTEMPTS`](crate::MAX_WRITE_ATTEMPTS),
    /// deduplicated, in order.
    pub writes_denied: Vec<crate::WriteAttempt>,
}

impl Outcome {
    /// True when the main process exited with status 0 and no limit fired.
    pub fn success(&self) -> bool {
        self.termination == Termination::Exited(0) && self.limit.is_none()
    }
}
