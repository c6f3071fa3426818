//! Fidelity (issue 11, finding 7): a program behaves under the executor as
//! it does when run from a shell, on every backend, with and without a
//! private PID namespace. With one, toolsmith's init is PID 1 and the program
//! is its child, so self-sent signals, SIGTERM's default disposition at a
//! deadline, SIGSTOP and SIGXFSZ all work, and the termination reported is the
//! program's own.
//!
//! Before the init, the program was its namespace's PID 1: `kill -SEGV $$`
//! ended as a success, `kill -TERM $$` was ignored and every timeout waited
//! for the grace and ended in SIGKILL.

#![expect(
    clippy::print_stderr,
    reason = "backends and tools that cannot run here must be announced loudly"
)]

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use toolsmith_executor::{
    Backend, BackendChoice, Command, Executor, ExecutorConfig, LimitKind, Limits, Outcome, Sandbox,
    Termination,
};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every backend this kernel allows, each with and without a private PID
/// namespace, saying loudly which ones cannot be tested; and the first with
/// a sandbox prepared ahead (`Executor::keep_prepared`), one already waiting.
fn setups() -> Vec<(Executor, bool)> {
    let mut setups = Vec::new();
    match Executor::new(ExecutorConfig {
        backend: BackendChoice::Auto,
        max_concurrent: None,
    }) {
        Ok(executor) if executor.features().private_proc.available => {
            executor.keep_prepared(true);
            let (warm_up, _) = sh(&executor, true, "true", &Limits::recommended());
            assert!(warm_up.success(), "{warm_up:?}");
            let deadline = Instant::now() + Duration::from_secs(10);
            while executor.prepared() == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(executor.prepared(), 1, "a sandbox should be prepared ahead");
            setups.push((executor, true));
        }
        Ok(_) => eprintln!(
            "WARNING: no private PID namespace on this kernel: prepared sandboxes are UNTESTED"
        ),
        Err(error) => eprintln!("WARNING: no executor, prepared sandboxes are UNTESTED: {error}"),
    }
    for backend in Backend::ALL {
        for private_pids in [false, true] {
            match Executor::new(ExecutorConfig {
                backend: BackendChoice::Only(backend),
                max_concurrent: None,
            }) {
                Ok(executor) => {
                    if private_pids && !executor.features().private_proc.available {
                        eprintln!(
                            "WARNING: no private PID namespace on this kernel: the init is UNTESTED on {backend}"
                        );
                        continue;
                    }
                    setups.push((executor, private_pids));
                }
                Err(error) => {
                    eprintln!(
                        "WARNING: backend {backend} UNAVAILABLE, its fidelity tests are SKIPPED: {error}"
                    );
                    break;
                }
            }
        }
    }
    setups
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn limits(timeout_ms: u64, grace_ms: u64) -> Limits {
    Limits {
        timeout: Duration::from_millis(timeout_ms),
        grace: Duration::from_millis(grace_ms),
        ..Limits::recommended()
    }
}

/// Runs `sh -c script` in `cwd` and returns the outcome and the wall time.
fn sh_in(
    executor: &Executor,
    private_pids: bool,
    script: &str,
    limits: &Limits,
    cwd: &Path,
) -> (Outcome, Duration) {
    let mut command = Command::new(Path::new("/bin/sh"), cwd).unwrap();
    command.arg(OsStr::new("-c")).arg(OsStr::new(script));
    command.env(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"));
    command.sandbox(Sandbox {
        private_pids,
        ..Sandbox::none()
    });
    let started = Instant::now();
    let outcome = runtime()
        .block_on(executor.run(&command, limits))
        .expect("the run should start");
    (outcome, started.elapsed())
}

fn sh(
    executor: &Executor,
    private_pids: bool,
    script: &str,
    limits: &Limits,
) -> (Outcome, Duration) {
    sh_in(executor, private_pids, script, limits, Path::new("/"))
}

fn name(executor: &Executor, private_pids: bool) -> String {
    let backend = executor.backend();
    if executor.keeps_prepared() {
        return format!("{backend} with an init prepared ahead");
    }
    // The pidns backend always makes a PID namespace.
    if private_pids || backend == Backend::PidNamespace {
        format!("{backend} with an init")
    } else {
        format!("{backend} without a PID namespace")
    }
}

#[test]
fn a_self_sent_segv_is_a_crash_with_signal_11() {
    let _serial = serial();
    for (executor, private_pids) in setups() {
        let (outcome, _) = sh(
            &executor,
            private_pids,
            "kill -SEGV $$; echo survived",
            &limits(5000, 500),
        );
        let setup = name(&executor, private_pids);
        assert_eq!(
            outcome.termination,
            Termination::Signaled(libc::SIGSEGV),
            "{setup}: {outcome:?}"
        );
        assert_eq!(outcome.stdout.text_lossy(), "", "{setup}");
    }
}

#[test]
fn a_self_sent_term_is_a_crash_with_signal_15() {
    let _serial = serial();
    for (executor, private_pids) in setups() {
        let (outcome, _) = sh(
            &executor,
            private_pids,
            "kill -TERM $$; echo survived",
            &limits(5000, 500),
        );
        let setup = name(&executor, private_pids);
        assert_eq!(
            outcome.termination,
            Termination::Signaled(libc::SIGTERM),
            "{setup}"
        );
        assert_eq!(outcome.limit, None, "{setup}");
    }
}

/// Runs `script` on every setup with a 1 s timeout and checks that SIGTERM at the deadline
/// alone ended it: no escalation to SIGKILL.
fn dies_of_sigterm_at_the_deadline(script: &str) {
    for (executor, private_pids) in setups() {
        let limits = limits(1000, 3000);
        let (outcome, elapsed) = sh(&executor, private_pids, script, &limits);
        let setup = name(&executor, private_pids);
        assert_eq!(
            outcome.limit,
            Some(LimitKind::Timeout),
            "{setup}: {outcome:?}"
        );
        assert!(!outcome.escalated, "{setup}: SIGTERM did not end it");
        assert_eq!(
            outcome.termination,
            Termination::Signaled(libc::SIGTERM),
            "{setup}"
        );
        // A liveness bound: well before the grace would have ended.
        assert!(
            elapsed < limits.timeout + limits.grace,
            "{setup}: took {elapsed:?}"
        );
    }
}

#[test]
fn a_busy_loop_dies_of_sigterm_at_the_deadline_without_escalation() {
    let _serial = serial();
    dies_of_sigterm_at_the_deadline("while :; do :; done");
}

#[test]
fn a_program_that_leaves_its_process_group_still_gets_sigterm_at_the_deadline() {
    let _serial = serial();
    // Under toolsmith's init the program has a group of its own in the init's session, and
    // may move to the init's group; the init then forwards signals to the program alone.
    // Without an init the move is refused (another session), and the program just loops.
    dies_of_sigterm_at_the_deadline(
        "exec python3 -c 'import os\ntry:\n    os.setpgid(0, os.getpgid(os.getppid()))\nexcept OSError:\n    pass\nwhile True:\n    pass\n'",
    );
}

#[test]
fn a_self_stopped_program_ends_at_the_deadline() {
    let _serial = serial();
    for (executor, private_pids) in setups() {
        let limits = limits(1000, 3000);
        let (outcome, elapsed) = sh(
            &executor,
            private_pids,
            "kill -STOP $$; echo continued",
            &limits,
        );
        let setup = name(&executor, private_pids);
        assert_eq!(outcome.limit, Some(LimitKind::Timeout), "{setup}");
        assert!(
            elapsed >= limits.timeout,
            "{setup}: ended after {elapsed:?}, before the deadline"
        );
        // SIGCONT follows SIGTERM, so the stopped program dies of SIGTERM.
        assert_eq!(
            outcome.termination,
            Termination::Signaled(libc::SIGTERM),
            "{setup}"
        );
        assert!(!outcome.escalated, "{setup}");
    }
}

#[test]
fn a_write_past_max_file_size_dies_of_sigxfsz() {
    let _serial = serial();
    for (executor, private_pids) in setups() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_file_size: Some(4096),
            ..limits(5000, 500)
        };
        let (outcome, _) = sh_in(
            &executor,
            private_pids,
            "exec head -c 100000 /dev/zero > big",
            &limits,
            dir.path(),
        );
        let setup = name(&executor, private_pids);
        assert_eq!(
            outcome.termination,
            Termination::Signaled(libc::SIGXFSZ),
            "{setup}"
        );
    }
}

#[test]
fn signals_sent_to_pid_1_reach_the_program_and_nothing_else() {
    let _serial = serial();
    for (executor, private_pids) in setups() {
        if !private_pids {
            continue;
        }
        let setup = name(&executor, private_pids);
        // SIGKILL and SIGSTOP to the init are dropped by the kernel; the
        // init is not the program, so the program carries on.
        let (outcome, _) = sh(
            &executor,
            private_pids,
            "[ $$ = 2 ] || exit 99; kill -KILL 1; kill -STOP 1; echo alive",
            &limits(5000, 500),
        );
        assert_eq!(outcome.termination, Termination::Exited(0), "{setup}");
        assert_eq!(outcome.stdout.text_lossy(), "alive\n", "{setup}");
        // Any other signal is forwarded to the program's group, as a shell's
        // job control would: the program gains nothing it could not do to itself.
        let (outcome, _) = sh(
            &executor,
            private_pids,
            "trap 'echo got-usr1' USR1; kill -USR1 1; sleep 0.2; kill -HUP 1; sleep 5; echo survived",
            &limits(5000, 500),
        );
        assert_eq!(
            outcome.termination,
            Termination::Signaled(libc::SIGHUP),
            "{setup}"
        );
        assert_eq!(outcome.stdout.text_lossy(), "got-usr1\n", "{setup}");
    }
}

#[test]
fn leftovers_are_counted_again_with_an_init() {
    let _serial = serial();
    for (executor, private_pids) in setups() {
        let setup = name(&executor, private_pids);
        let (outcome, _) = sh(
            &executor,
            private_pids,
            "sleep 1000 & echo started",
            &limits(5000, 500),
        );
        assert!(outcome.success(), "{setup}: {outcome:?}");
        // Every backend counts them again: the cgroup, the marker, the process
        // group, or (with an init and neither) the init's PID namespace.
        assert_eq!(outcome.leftovers_killed, Some(1), "{setup}");
    }
}

#[test]
fn the_init_reaps_orphans_and_reports_the_programs_usage() {
    let _serial = serial();
    for (executor, private_pids) in setups() {
        if !private_pids {
            continue;
        }
        let setup = name(&executor, private_pids);
        // Orphans re-parented to the init are reaped (no zombie is listed),
        // and the CPU time is the program's, not the init's.
        let (outcome, _) = sh(
            &executor,
            private_pids,
            "(sleep 0 &) ; sleep 0.2; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; ps -eo stat= | grep -c '^Z' || true",
            &limits(10000, 500),
        );
        assert!(outcome.success(), "{setup}: {outcome:?}");
        assert_eq!(outcome.stdout.text_lossy(), "0\n", "{setup}");
        assert!(
            outcome.cpu_time.is_some_and(|cpu| cpu > Duration::ZERO),
            "{setup}: {:?}",
            outcome.cpu_time
        );
        // The peak is the program's, never the executor's own resident set.
        assert!(
            outcome.peak_memory.is_some_and(|peak| peak < 512 << 20),
            "{setup}: {:?}",
            outcome.peak_memory
        );
    }
}

#[test]
fn a_timed_out_program_returns_what_it_printed() {
    let _serial = serial();
    for (executor, private_pids) in setups() {
        let setup = name(&executor, private_pids);
        let (outcome, _) = sh(
            &executor,
            private_pids,
            "echo step-1; echo warn >&2; sleep 1000",
            &limits(1000, 500),
        );
        assert_eq!(outcome.limit, Some(LimitKind::Timeout), "{setup}");
        assert_eq!(outcome.stdout.text_lossy(), "step-1\n", "{setup}");
        assert_eq!(outcome.stderr.text_lossy(), "warn\n", "{setup}");
    }
}

#[test]
fn the_init_memory_cannot_be_read_by_a_program_without_capabilities() {
    let _serial = serial();
    let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .map(Path::new)
        .find(|path| path.exists())
    else {
        eprintln!("WARNING: setpriv is missing: the init's non-dumpable memory is UNTESTED");
        return;
    };
    for (executor, private_pids) in setups() {
        if !private_pids {
            continue;
        }
        let setup = name(&executor, private_pids);
        // Same uid as the init, every capability gone: only the init's
        // non-dumpable memory stands between the program and PID 1's memory.
        let script = format!(
            "{} --bounding-set=-all --inh-caps=-all --securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked -- sh -c 'cat /proc/1/environ > /dev/null 2>&1 && echo environ-read; head -c 1 /proc/1/mem > /dev/null 2>&1 && echo mem-read; grep -q \"^CapEff:.0*$\" /proc/self/status && echo no-caps'",
            setpriv.display()
        );
        let (outcome, _) = sh(&executor, private_pids, &script, &limits(5000, 500));
        assert!(outcome.success(), "{setup}: {outcome:?}");
        assert_eq!(
            outcome.stdout.text_lossy(),
            "no-caps\n",
            "{setup}: {}",
            outcome.stderr.text_lossy()
        );
    }
}
