//! The container of one run, per backend: signalling, killing, counting and
//! waiting for the whole process tree.
//!
//! Every kill goes through something that cannot hit an unrelated process:
//! `cgroup.kill`, a pidfd opened and then re-checked against the cgroup or
//! the environment marker, or the process group while its leader is an
//! unreaped zombie (so its id cannot be reused).

use std::collections::HashSet;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getpid};

use crate::cgroup::Leaf;
use crate::spawn::InitKeep;
use crate::{Backend, pidfd, sweep};

/// The name of the environment variable that marks the processes of a run
/// under the subreaper backend.
pub(crate) const MARKER_VAR: &str = "TOOLSMITH_RUN_ID";

/// The container of one run.
#[derive(Debug)]
pub(crate) enum Containment {
    Cgroup(Leaf),
    PidNamespace,
    Subreaper {
        /// `TOOLSMITH_RUN_ID=<value>`, as it appears in `/proc/<pid>/environ`.
        marker: Vec<u8>,
        /// Processes seen carrying the marker; only these are ever reaped.
        seen: HashSet<libc::pid_t>,
    },
    ProcessGroup,
}

impl Containment {
    pub(crate) fn backend(&self) -> Backend {
        match self {
            Containment::Cgroup(_) => Backend::Cgroup,
            Containment::PidNamespace => Backend::PidNamespace,
            Containment::Subreaper { .. } => Backend::Subreaper,
            Containment::ProcessGroup => Backend::ProcessGroup,
        }
    }

    /// The `cgroup.procs` descriptors the child must join.
    pub(crate) fn procs_fds(&self) -> Vec<RawFd> {
        match self {
            Containment::Cgroup(leaf) => leaf.procs_fds(),
            _ => Vec::new(),
        }
    }

    /// Sends `signal` to every process of the run (the leader is alive or an
    /// unreaped zombie). SIGKILL also reaches processes forked meanwhile.
    pub(crate) fn signal_tree(&mut self, leader: &Leader, signal: libc::c_int) {
        if leader.is_init() {
            // toolsmith's init forwards every signal but SIGKILL to the
            // program's process group (SIGTERM first, then SIGCONT: it takes
            // them lowest number first). SIGKILL ends the init, and with it
            // the namespace; the backend's own kill below is a second net.
            pidfd::send_signal(&leader.pidfd, signal);
            if signal != libc::SIGKILL {
                if signal == libc::SIGTERM {
                    pidfd::send_signal(&leader.pidfd, libc::SIGCONT);
                }
                return;
            }
        }
        match self {
            Containment::Cgroup(leaf) if signal == libc::SIGKILL => leaf.kill(),
            Containment::Cgroup(leaf) => {
                let leaf_path = leaf.v2_path().to_path_buf();
                for pid in leaf.pids() {
                    signal_verified(pid, signal, |pid| in_cgroup(pid, &leaf_path));
                }
            }
            Containment::PidNamespace => {
                // Killing the namespace's init kills the namespace. Other
                // signals reach the init only if it handles them.
                pidfd::send_signal(&leader.pidfd, signal);
            }
            Containment::Subreaper { marker, seen } => {
                pidfd::send_signal(&leader.pidfd, signal);
                for entry in sweep::scan() {
                    if entry.state != b'Z'
                        && entry.pid != leader.pid
                        && sweep::has_marker(entry.pid, marker)
                    {
                        seen.insert(entry.pid);
                        signal_verified(entry.pid, signal, |pid| sweep::has_marker(pid, marker));
                    }
                }
            }
            Containment::ProcessGroup => {
                // The group id is the leader's pid, which cannot be reused
                // while the leader is unreaped.
                kill_group(leader.pid, signal);
            }
        }
        if signal == libc::SIGTERM {
            // A stopped process would keep SIGTERM pending until the kill.
            self.signal_tree_once(leader, libc::SIGCONT);
        }
    }

    fn signal_tree_once(&mut self, leader: &Leader, signal: libc::c_int) {
        match self {
            Containment::ProcessGroup | Containment::PidNamespace => {
                if matches!(self, Containment::ProcessGroup) {
                    // As in signal_tree.
                    kill_group(leader.pid, signal);
                } else {
                    pidfd::send_signal(&leader.pidfd, signal);
                }
            }
            Containment::Cgroup(leaf) => {
                let leaf_path = leaf.v2_path().to_path_buf();
                for pid in leaf.pids() {
                    signal_verified(pid, signal, |pid| in_cgroup(pid, &leaf_path));
                }
            }
            Containment::Subreaper { marker, .. } => {
                pidfd::send_signal(&leader.pidfd, signal);
                for entry in sweep::scan() {
                    if entry.pid != leader.pid && sweep::has_marker(entry.pid, marker) {
                        signal_verified(entry.pid, signal, |pid| sweep::has_marker(pid, marker));
                    }
                }
            }
        }
    }

    /// Counts and kills every process but the leader, which has exited and
    /// is not reaped yet. `None` when the backend cannot count them.
    ///
    /// With toolsmith's init as the leader, the program has exited and the
    /// init is alive (it is not in the run's cgroups and carries no marker,
    /// so it is never counted); the caller kills it afterwards.
    pub(crate) fn kill_leftovers(&mut self, leader: &Leader) -> Option<u64> {
        if leader.is_init() && matches!(self, Containment::ProcessGroup | Containment::PidNamespace)
        {
            // Neither a cgroup nor a marker: the namespace itself holds the
            // leftovers, and the caller's kill of the init kills them.
            return Some(count_in_namespace_of(leader));
        }
        match self {
            Containment::Cgroup(leaf) => {
                let leftovers = leaf.pids().len() as u64;
                if leftovers > 0 {
                    leaf.kill();
                }
                Some(leftovers)
            }
            // The kernel killed the namespace when its init exited.
            Containment::PidNamespace => None,
            Containment::Subreaper { .. } => {
                let before = self.count_marked(leader);
                self.signal_tree(leader, libc::SIGKILL);
                Some(before)
            }
            Containment::ProcessGroup => {
                let leftovers = sweep::scan()
                    .iter()
                    .filter(|entry| {
                        entry.pgrp == leader.pid && entry.pid != leader.pid && entry.state != b'Z'
                    })
                    .count() as u64;
                if leftovers > 0 {
                    // The leader is an unreaped zombie, so its group id is ours.
                    kill_group(leader.pid, libc::SIGKILL);
                }
                Some(leftovers)
            }
        }
    }

    fn count_marked(&self, leader: &Leader) -> u64 {
        let Containment::Subreaper { marker, .. } = self else {
            return 0;
        };
        sweep::scan()
            .iter()
            .filter(|entry| {
                entry.pid != leader.pid
                    && entry.state != b'Z'
                    && sweep::has_marker(entry.pid, marker)
            })
            .count() as u64
    }

    /// After the leader is reaped: waits until no process of the run is
    /// left, killing stragglers, for at most `budget`. True when the tree is
    /// known to be gone.
    pub(crate) async fn wait_gone(&mut self, budget: Duration) -> bool {
        let give_up = Instant::now() + budget;
        match self {
            Containment::Cgroup(leaf) => leaf.wait_empty(budget).await,
            Containment::PidNamespace => true,
            Containment::ProcessGroup => false,
            Containment::Subreaper { .. } => loop {
                if self.sweep_round() {
                    return true;
                }
                if Instant::now() >= give_up {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            },
        }
    }

    /// As [`Containment::wait_gone`], blocking; for `Drop`.
    pub(crate) fn wait_gone_blocking(&mut self, budget: Duration) -> bool {
        let give_up = Instant::now() + budget;
        match self {
            Containment::Cgroup(leaf) => leaf.wait_empty_blocking(budget),
            Containment::PidNamespace => true,
            Containment::ProcessGroup => false,
            Containment::Subreaper { .. } => loop {
                if self.sweep_round() {
                    return true;
                }
                if Instant::now() >= give_up {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(2));
            },
        }
    }

    /// One round of the subreaper sweep: kills every live marked process and
    /// reaps the marked ones that were re-parented to the executor. True when
    /// nothing marked is left.
    fn sweep_round(&mut self) -> bool {
        let Containment::Subreaper { marker, seen } = self else {
            return true;
        };
        let executor_pid = getpid().as_raw();
        let mut remaining = false;
        for entry in sweep::scan() {
            if entry.state == b'Z' {
                if entry.ppid == executor_pid && seen.contains(&entry.pid) {
                    // A re-parented process of this run: ours to reap.
                    let _ = pidfd::try_reap(entry.pid);
                    seen.remove(&entry.pid);
                }
                continue;
            }
            if sweep::has_marker(entry.pid, marker) {
                remaining = true;
                seen.insert(entry.pid);
                signal_verified(entry.pid, libc::SIGKILL, |pid| {
                    sweep::has_marker(pid, marker)
                });
            }
        }
        !remaining && seen.is_empty()
    }

    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        match self {
            Containment::Cgroup(leaf) => leaf.cpu_time(),
            _ => None,
        }
    }

    pub(crate) fn peak_memory(&self) -> Option<u64> {
        match self {
            Containment::Cgroup(leaf) => leaf.peak_memory(),
            _ => None,
        }
    }

    pub(crate) fn oom_kills(&self) -> u64 {
        match self {
            Containment::Cgroup(leaf) => leaf.oom_kills(),
            _ => 0,
        }
    }
}

/// The main process of a run: the program, or toolsmith's init that runs it.
#[derive(Debug)]
pub(crate) struct Leader {
    pub(crate) pid: libc::pid_t,
    pub(crate) pidfd: OwnedFd,
    /// The init's stack, pipes and plans, present when the leader is
    /// toolsmith's init. They are freed when the leader is dropped, which
    /// every path does only after reaping the init.
    pub(crate) init: Option<InitKeep>,
}

impl Leader {
    /// True when the leader is toolsmith's init rather than the program.
    pub(crate) fn is_init(&self) -> bool {
        self.init.is_some()
    }
}

impl AsRawFd for Leader {
    fn as_raw_fd(&self) -> RawFd {
        self.pidfd.as_raw_fd()
    }
}

/// Counts the live processes in the PID namespace of `init`, the init excepted.
fn count_in_namespace_of(init: &Leader) -> u64 {
    let Some(namespace) = sweep::pid_namespace(init.pid) else {
        return 0;
    };
    sweep::scan()
        .iter()
        .filter(|entry| {
            entry.pid != init.pid
                && entry.state != b'Z'
                && sweep::pid_namespace(entry.pid).as_ref() == Some(&namespace)
        })
        .count() as u64
}

/// Signals `pid` through a pidfd, after checking with `belongs` (once the
/// pidfd pins the process) that the pid still names a process of the run.
fn signal_verified(pid: libc::pid_t, signal: libc::c_int, belongs: impl Fn(libc::pid_t) -> bool) {
    if let Some(fd) = pidfd::open(pid)
        && belongs(pid)
    {
        pidfd::send_signal(&fd, signal);
    }
}

fn in_cgroup(pid: libc::pid_t, leaf_path: &std::path::Path) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|text| {
        text.lines()
            .filter_map(|line| line.strip_prefix("0::"))
            .map(|path| path.trim_start_matches('/'))
            .any(|path| !path.is_empty() && leaf_path.ends_with(path))
    })
}

/// Sends `signal` to the process group `group`; a group already gone is no error.
fn kill_group(group: libc::pid_t, signal: libc::c_int) {
    if let Ok(signal) = Signal::try_from(signal) {
        let _ignored = killpg(Pid::from_raw(group), signal);
    }
}
