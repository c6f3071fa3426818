//! The lifecycle of one run as a pure state machine: which event moves the
//! run to which phase, and what the executor must then do to the process
//! tree. The event loop in `run.rs` feeds it; tests drive it without any
//! process. See `docs/executor.md` for the diagram.

use std::time::{Duration, Instant};

use crate::LimitKind;

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The program runs within its limits.
    Running,
    /// SIGTERM was sent to the tree; SIGKILL follows at `kill_at`.
    Terminating { kill_at: Instant },
    /// SIGKILL was sent to the tree; waiting for the main process to go.
    Killing,
    /// The main process has exited; what remains is clean-up.
    Exited,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The wall-clock timeout passed.
    Deadline,
    /// The grace period after SIGTERM passed.
    GraceElapsed,
    /// The tree's CPU time reached the limit.
    CpuExceeded,
    /// The main process exited (it is a zombie, not yet reaped).
    LeaderExited,
}

/// What the executor must do to the process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// SIGTERM (and SIGCONT, so stopped processes see it) to every process.
    TerminateTree,
    /// SIGKILL to every process.
    KillTree,
    /// Count and kill every process but the (exited) main one.
    KillLeftovers,
}

/// The state of one run.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    phase: Phase,
    grace: Duration,
    limit: Option<LimitKind>,
    escalated: bool,
}

impl Lifecycle {
    pub(crate) fn new(grace: Duration) -> Lifecycle {
        Lifecycle {
            phase: Phase::Running,
            grace,
            limit: None,
            escalated: false,
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// The limit that ended the run, if one did.
    pub(crate) fn limit(&self) -> Option<LimitKind> {
        self.limit
    }

    /// True when SIGTERM was not enough.
    pub(crate) fn escalated(&self) -> bool {
        self.escalated
    }

    /// Applies `event`, returning what to do to the tree.
    pub(crate) fn on(&mut self, event: Event, now: Instant) -> Option<Action> {
        let (phase, action) = match (self.phase, event) {
            (Phase::Exited, _) => return None,
            (_, Event::LeaderExited) => (Phase::Exited, Some(Action::KillLeftovers)),
            (Phase::Running, Event::Deadline) => {
                self.limit = Some(LimitKind::Timeout);
                (
                    Phase::Terminating {
                        kill_at: now + self.grace,
                    },
                    Some(Action::TerminateTree),
                )
            }
            (Phase::Running, Event::CpuExceeded) => {
                self.limit = Some(LimitKind::Cpu);
                (Phase::Killing, Some(Action::KillTree))
            }
            (Phase::Terminating { .. }, Event::GraceElapsed) => {
                self.escalated = true;
                (Phase::Killing, Some(Action::KillTree))
            }
            (phase, _) => (phase, None),
        };
        self.phase = phase;
        action
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `events` one second apart and returns the actions, the final
    /// phase name, the limit and whether the run escalated.
    fn check(
        events: &[Event],
        expect_actions: &[Option<Action>],
        expect: (&str, Option<LimitKind>, bool),
    ) {
        let start = Instant::now();
        let mut lifecycle = Lifecycle::new(Duration::from_secs(2));
        let actions: Vec<_> = events
            .iter()
            .enumerate()
            .map(|(index, &event)| lifecycle.on(event, start + Duration::from_secs(index as u64)))
            .collect();
        assert_eq!(actions, expect_actions);
        let phase = match lifecycle.phase() {
            Phase::Running => "running",
            Phase::Terminating { .. } => "terminating",
            Phase::Killing => "killing",
            Phase::Exited => "exited",
        };
        assert_eq!((phase, lifecycle.limit(), lifecycle.escalated()), expect);
    }

    #[test]
    fn clean_exit_kills_leftovers() {
        check(
            &[Event::LeaderExited],
            &[Some(Action::KillLeftovers)],
            ("exited", None, false),
        );
    }

    #[test]
    fn deadline_terminates_then_the_program_obeys() {
        check(
            &[Event::Deadline, Event::LeaderExited],
            &[Some(Action::TerminateTree), Some(Action::KillLeftovers)],
            ("exited", Some(LimitKind::Timeout), false),
        );
    }

    #[test]
    fn deadline_then_grace_escalates_to_kill() {
        check(
            &[Event::Deadline, Event::GraceElapsed, Event::LeaderExited],
            &[
                Some(Action::TerminateTree),
                Some(Action::KillTree),
                Some(Action::KillLeftovers),
            ],
            ("exited", Some(LimitKind::Timeout), true),
        );
    }

    #[test]
    fn cpu_limit_kills_at_once() {
        check(
            &[Event::CpuExceeded, Event::LeaderExited],
            &[Some(Action::KillTree), Some(Action::KillLeftovers)],
            ("exited", Some(LimitKind::Cpu), false),
        );
    }

    #[test]
    fn a_second_deadline_does_nothing() {
        check(
            &[Event::Deadline, Event::Deadline],
            &[Some(Action::TerminateTree), None],
            ("terminating", Some(LimitKind::Timeout), false),
        );
    }

    #[test]
    fn cpu_after_the_deadline_keeps_the_timeout() {
        check(
            &[Event::Deadline, Event::CpuExceeded],
            &[Some(Action::TerminateTree), None],
            ("terminating", Some(LimitKind::Timeout), false),
        );
    }

    #[test]
    fn nothing_happens_after_exit() {
        check(
            &[Event::LeaderExited, Event::Deadline, Event::GraceElapsed],
            &[Some(Action::KillLeftovers), None, None],
            ("exited", None, false),
        );
    }
}
