//! Containment backends: how a run's whole process tree is tracked and killed.

use std::fmt;
use std::str::FromStr;

/// How the executor contains a run's process tree, strongest first.
///
/// The executor picks the strongest one the kernel allows at start-up
/// ([`BackendChoice::Auto`]) and reports it in every [`Outcome`](crate::Outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// A cgroup v2 leaf per run, emptied with `cgroup.kill`. Nothing escapes it,
    /// `setsid` and double-forks included.
    Cgroup,
    /// A PID namespace per run whose init is the program: when it dies, the
    /// kernel kills every process in the namespace.
    PidNamespace,
    /// The executor is a child subreaper; processes of a run are found by a
    /// marker in their environment and by parentage in `/proc`, then killed
    /// through pidfds.
    Subreaper,
    /// The run's process group only. A process that calls `setsid` escapes it.
    ProcessGroup,
}

impl Backend {
    /// Every backend, strongest first.
    pub const ALL: [Backend; 4] = [
        Backend::Cgroup,
        Backend::PidNamespace,
        Backend::Subreaper,
        Backend::ProcessGroup,
    ];

    /// The name used in configuration and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cgroup => "cgroup",
            Backend::PidNamespace => "pidns",
            Backend::Subreaper => "subreaper",
            Backend::ProcessGroup => "pgroup",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A backend name that is not one of `cgroup`, `pidns`, `subreaper`, `pgroup`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown containment backend `{0}` (expected auto, cgroup, pidns, subreaper or pgroup)")]
pub struct UnknownBackend(String);

impl FromStr for Backend {
    type Err = UnknownBackend;

    fn from_str(name: &str) -> Result<Backend, UnknownBackend> {
        Backend::ALL
            .into_iter()
            .find(|backend| backend.as_str() == name)
            .ok_or_else(|| UnknownBackend(name.to_owned()))
    }
}

/// Which backend an [`Executor`](crate::Executor) should use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// The strongest one available.
    Auto,
    /// Exactly this one, or an error if the kernel does not allow it.
    Only(Backend),
}

impl FromStr for BackendChoice {
    type Err = UnknownBackend;

    fn from_str(name: &str) -> Result<BackendChoice, UnknownBackend> {
        if name == "auto" {
            return Ok(BackendChoice::Auto);
        }
        name.parse().map(BackendChoice::Only)
    }
}
