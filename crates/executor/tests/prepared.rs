//! Sandboxes prepared ahead (`Executor::keep_prepared`): a run takes the
//! one that waits for its sandbox, each serves one run, a new one is made
//! after each run, and nothing of them outlives the executor, even when a
//! prepared init dies while it waits.

#![expect(
    clippy::print_stderr,
    reason = "kernels without the mechanism must be announced loudly"
)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use toolsmith_executor::{
    BackendChoice, Command, Enforcement, Executor, ExecutorConfig, Filesystem, Limits, Network,
    Outcome, Privileges, Sandbox, Syscalls,
};

#[path = "../../../tests/leaks.rs"]
#[expect(
    dead_code,
    reason = "the black-box suite's host oracle; this suite uses its capture and comparison"
)]
mod leaks;
#[path = "oracle/marked.rs"]
mod marked;
#[path = "oracle/next_run.rs"]
mod next_run;

use crate::next_run::Oracle;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The strictest sandbox: every mechanism, network denied, read-only.
fn strict() -> Sandbox {
    Sandbox {
        network: Network::Deny(Enforcement::IfPossible),
        filesystem: Filesystem::ReadOnly(Enforcement::IfPossible),
        private_pids: true,
        private_mounts: true,
        private_ipc: true,
        protected: Vec::new(),
        privileges: Privileges::Drop(None),
        syscalls: Syscalls::Filtered(Enforcement::IfPossible),
        own_dir: None,
        hidden: Vec::new(),
    }
}

fn executor() -> Option<Executor> {
    let executor = Executor::new(ExecutorConfig {
        backend: BackendChoice::Auto,
        max_concurrent: None,
    })
    .unwrap();
    if !executor.features().private_proc.available {
        eprintln!("WARNING: no private PID namespace here: prepared sandboxes are UNTESTED");
        return None;
    }
    executor.keep_prepared(true);
    Some(executor)
}

fn sh(executor: &Executor, sandbox: &Sandbox, script: &str) -> Outcome {
    let mut command = Command::new(Path::new("/bin/sh"), Path::new("/")).unwrap();
    command.arg(OsStr::new("-c")).arg(OsStr::new(script));
    command.env(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"));
    command.sandbox(sandbox.clone());
    runtime()
        .block_on(executor.run(&command, &Limits::recommended()))
        .expect("the run should start")
}

fn wait_prepared(executor: &Executor, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while executor.prepared() != count && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(executor.prepared(), count, "prepared sandboxes waiting");
}

/// The live children of this process's threads (the spawner thread's are
/// the inits), found from outside through `/proc`.
fn live_children() -> Vec<i32> {
    let mut children = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        for pid in list.split_whitespace().filter_map(|pid| pid.parse().ok()) {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = state.rsplit(')').next().unwrap_or("").trim_start();
            if !state.starts_with('Z') && !state.is_empty() {
                children.push(pid);
            }
        }
    }
    children
}

/// This process's threads that keep a prepared init (`toolsmith-init`).
fn init_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.trim() == "toolsmith-init")
        })
        .count()
}

/// The runs' TMPDIRs of this process: in the runs' directory (`toolsmith-runs-<euid>`).
fn own_temp_dirs() -> Vec<String> {
    let prefix = format!("toolsmith-run-{}-", std::process::id());
    let bases = "toolsmith-runs-";
    let names = |dir: &Path| -> Vec<(PathBuf, String)> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| {
                (
                    entry.path(),
                    entry.file_name().to_string_lossy().into_owned(),
                )
            })
            .collect()
    };
    names(&std::env::temp_dir())
        .into_iter()
        .filter(|(_, name)| name.starts_with(bases))
        .flat_map(|(base, _)| names(&base))
        .map(|(_, name)| name)
        .filter(|name| name.starts_with(&prefix))
        .collect()
}

#[test]
fn each_run_takes_a_prepared_sandbox_and_a_new_one_is_made() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    let sandbox = strict();
    assert_eq!(executor.prepared(), 0);
    let first = sh(&executor, &sandbox, "echo first");
    assert!(first.success(), "{first:?}");
    wait_prepared(&executor, 1);
    for round in 0..5 {
        // Each run sees a sandbox of its own: a file it leaves in its TMPDIR
        // or a SysV queue it makes is not there for the next.
        let outcome = sh(
            &executor,
            &sandbox,
            r#"test -z "$(ls -A "$TMPDIR")" || exit 3; touch "$TMPDIR/mark"; echo "$TMPDIR""#,
        );
        assert!(outcome.success(), "round {round}: {outcome:?}");
        assert!(outcome.sandbox.network_denied && outcome.sandbox.private_pids);
        wait_prepared(&executor, 1);
    }
}

#[test]
fn a_prepared_sandbox_serves_only_its_own_profile() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    let strict = strict();
    let pids_only = Sandbox {
        private_pids: true,
        ..Sandbox::none()
    };
    assert!(sh(&executor, &strict, "true").success());
    wait_prepared(&executor, 1);
    // Another profile does not take it: it is set up at once, and one is
    // prepared for it too.
    let outcome = sh(&executor, &pids_only, "echo $$");
    assert!(outcome.success(), "{outcome:?}");
    assert!(!outcome.sandbox.network_denied, "{outcome:?}");
    wait_prepared(&executor, 2);
    let outcome = sh(&executor, &strict, "true");
    assert!(outcome.sandbox.network_denied, "{outcome:?}");
}

#[test]
fn a_prepared_init_killed_while_it_waits_costs_nothing_but_itself() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    let sandbox = strict();
    assert!(sh(&executor, &sandbox, "true").success());
    wait_prepared(&executor, 1);
    // Let the first run's init finish dying, then kill the prepared one.
    std::thread::sleep(Duration::from_millis(300));
    let children = live_children();
    assert_eq!(children.len(), 1, "only the prepared init: {children:?}");
    // SAFETY: our own child, alive and unreaped (a zombie at worst).
    unsafe { libc::kill(children[0], libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(100));
    let outcome = sh(&executor, &sandbox, "echo fine");
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(outcome.stdout.bytes, b"fine\n");
}

#[test]
fn nothing_prepared_outlives_the_executor_or_keep_prepared_off() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    let sandbox = strict();
    assert!(sh(&executor, &sandbox, "true").success());
    wait_prepared(&executor, 1);
    assert!(
        !own_temp_dirs().is_empty(),
        "the prepared sandbox has its TMPDIR"
    );
    assert_eq!(init_threads(), 1, "the prepared init has its thread");
    executor.keep_prepared(false);
    assert_eq!(executor.prepared(), 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while init_threads() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(init_threads(), 0, "the thread ends with its init");
    executor.keep_prepared(true);
    assert!(sh(&executor, &sandbox, "true").success());
    wait_prepared(&executor, 1);
    drop(executor);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_children().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        live_children(),
        Vec::<i32>::new(),
        "no init outlives the executor"
    );
    assert_eq!(
        own_temp_dirs(),
        Vec::<String>::new(),
        "no TMPDIR outlives it"
    );
}

#[test]
fn concurrent_runs_share_nothing_and_all_finish() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    let sandbox = strict();
    let mut command = Command::new(Path::new("/bin/sh"), Path::new("/")).unwrap();
    command
        .arg(OsStr::new("-c"))
        .arg(OsStr::new(r#"ls -A "$TMPDIR" | wc -l; touch "$TMPDIR/x""#));
    command.env(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"));
    command.sandbox(sandbox);
    let limits = Limits::recommended();
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..12)
            .map(|_| scope.spawn(|| runtime().block_on(executor.run(&command, &limits))))
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    for outcome in outcomes {
        let outcome = outcome.expect("the run should start");
        assert!(outcome.success(), "{outcome:?}");
        assert_eq!(
            outcome.stdout.bytes, b"0\n",
            "each run's TMPDIR starts empty"
        );
    }
}

#[test]
fn a_sessions_runs_share_one_init_but_no_process() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    executor.keep_prepared(false);
    if executor.backend() != toolsmith_executor::Backend::Cgroup {
        eprintln!("WARNING: sessions reuse an init only on the cgroup backend: UNTESTED here");
        return;
    }
    let executor = std::sync::Arc::new(executor);
    let session = executor.session();
    let sandbox = strict();
    let run = |script: &str, limits: &Limits| {
        let mut command = Command::new(Path::new("/bin/sh"), Path::new("/")).unwrap();
        command.arg(OsStr::new("-c")).arg(OsStr::new(script));
        command.env(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"));
        command.sandbox(sandbox.clone());
        runtime()
            .block_on(session.run(&command, limits))
            .expect("the run should start")
    };
    let limits = Limits::recommended();
    // The first run leaves a daemon behind and a file in its TMPDIR.
    let first = run(
        r#"touch "$TMPDIR/mark"; setsid sleep 30 </dev/null >/dev/null 2>&1 & echo $$"#,
        &limits,
    );
    assert!(first.success(), "{first:?}");
    assert_eq!(
        first.stdout.bytes, b"2\n",
        "the program is the init's first child"
    );
    assert_eq!(first.leftovers_killed, Some(1), "{first:?}");
    // The second runs in the same namespaces (a later pid, the same TMPDIR),
    // and no process of the first is left: only the init and itself.
    let second = run(
        r#"test -e "$TMPDIR/mark" || exit 3; echo $$; ls /proc | grep -c '^[0-9]'"#,
        &limits,
    );
    assert!(second.success(), "{second:?}");
    let lines: Vec<&str> = std::str::from_utf8(&second.stdout.bytes)
        .unwrap()
        .lines()
        .collect();
    assert_ne!(lines[0], "2", "a new pid in the same namespace: {lines:?}");
    // The init, the shell, and `ls` (and the pipe's `grep`).
    let processes: usize = lines[1].parse().unwrap();
    assert!(
        processes <= 4,
        "processes left in the namespace: {processes}"
    );
    // A run killed at its deadline takes the init with it; the next makes a new one.
    let short = Limits {
        timeout: Duration::from_millis(300),
        grace: Duration::from_millis(100),
        ..Limits::recommended()
    };
    let stuck = run("trap '' TERM; while :; do :; done", &short);
    assert!(stuck.escalated, "{stuck:?}");
    let after = run(r#"test -e "$TMPDIR/mark" && exit 3; echo $$"#, &limits);
    assert!(after.success(), "{after:?}");
    assert_eq!(after.stdout.bytes, b"2\n", "a new init: {after:?}");
    drop(session);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_children().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        live_children(),
        Vec::<i32>::new(),
        "no init outlives the session"
    );
    assert_eq!(
        own_temp_dirs(),
        Vec::<String>::new(),
        "no TMPDIR outlives it"
    );
}

#[test]
fn a_sessions_runs_leave_what_waits_for_calls_alone() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    // A call's profile (the network allowed) and the probes' (strict).
    let call = Sandbox {
        network: Network::Allow,
        ..strict()
    };
    let first = sh(&executor, &call, "echo call");
    assert!(first.success(), "{first:?}");
    wait_prepared(&executor, 1);
    let executor = std::sync::Arc::new(executor);
    let session = executor.session();
    for round in 0..3 {
        let mut command = Command::new(Path::new("/bin/sh"), Path::new("/")).unwrap();
        command.arg(OsStr::new("-c")).arg(OsStr::new("echo probe"));
        command.sandbox(strict());
        let probe = runtime()
            .block_on(session.run(&command, &Limits::recommended()))
            .expect("the run should start");
        assert!(probe.success(), "round {round}: {probe:?}");
    }
    drop(session);
    // A refill would be queued on the spawner thread right after the spawn;
    // it has had the time to show.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        executor.prepared(),
        1,
        "only the call's sandbox waits: a session's runs prepare nothing ahead"
    );
    let again = sh(&executor, &call, "echo call");
    assert!(again.success(), "{again:?}");
    wait_prepared(&executor, 1);
}

#[test]
fn a_sandbox_without_an_init_has_nothing_prepared() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    if executor.backend() == toolsmith_executor::Backend::PidNamespace {
        eprintln!("WARNING: the pidns backend always has an init: case UNTESTED here");
        return;
    }
    for _ in 0..3 {
        let outcome = sh(&executor, &Sandbox::none(), "echo $$");
        assert!(outcome.success(), "{outcome:?}");
        assert_ne!(outcome.stdout.bytes, b"2\n", "no PID namespace");
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(executor.prepared(), 0);
}

/// Runs two scripts at once on `executor`, each in `sandbox`.
fn concurrently(executor: &Executor, sandbox: &Sandbox, scripts: [&str; 2]) -> [Outcome; 2] {
    let [first, second] = scripts.map(|script| {
        let mut command = Command::new(Path::new("/bin/sh"), Path::new("/")).unwrap();
        command.arg(OsStr::new("-c")).arg(OsStr::new(script));
        command.env(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"));
        command.sandbox(sandbox.clone());
        command
    });
    let limits = Limits::recommended();
    let (first, second) = runtime().block_on(async {
        tokio::join!(
            executor.run(&first, &limits),
            executor.run(&second, &limits)
        )
    });
    [first.unwrap(), second.unwrap()]
}

/// Issue 22 finding 6: two network-denied runs at once. The first binds an
/// abstract Unix socket name (on a socket of a pair, which the filter
/// allows) and holds it; the second looks for it in `/proc/net/unix` and
/// tries to bind the same name. It must neither list the name nor find it
/// taken: the runs do not share a network namespace.
#[test]
fn issue_22_6_concurrent_network_denied_runs_cannot_see_each_others_abstract_names() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    let oracle = Oracle::start();
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("WARNING: no python3: abstract socket names between runs are UNTESTED");
        return;
    }
    let name = format!("toolsmith-issue-22-6-{}", std::process::id());
    let holder = format!(
        r#"/usr/bin/python3 -c '
import socket, time
first, second = socket.socketpair()
first.bind(b"\0{name}")
listed = "@{name}" in open("/proc/net/unix").read()
print("bound", "listed" if listed else "unlisted", flush=True)
time.sleep(5)
'"#
    );
    let looker = format!(
        r#"/usr/bin/python3 -c '
import errno, socket, time
seen = False
deadline = time.time() + 3
while time.time() < deadline and not seen:
    seen = "@{name}" in open("/proc/net/unix").read()
    time.sleep(0.05)
first, second = socket.socketpair()
try:
    first.bind(b"\0{name}")
    taken = "free"
except OSError as error:
    taken = errno.errorcode.get(error.errno, "taken")
print("seen" if seen else "unseen", taken)
'"#
    );
    let outcomes = concurrently(&executor, &strict(), [&holder, &looker]);
    for outcome in &outcomes {
        assert!(outcome.success(), "{outcome:?}");
        assert!(outcome.sandbox.network_denied, "{outcome:?}");
    }
    assert_eq!(
        outcomes[0].stdout.text_lossy(),
        "bound listed\n",
        "the holder's own view"
    );
    assert_eq!(
        outcomes[1].stdout.text_lossy(),
        "unseen free\n",
        "another run's abstract name was visible or taken"
    );
    oracle.check_next_run(&executor, &strict());
    drop(executor);
    oracle.finish();
}

/// Issue 22 finding 6, another way: runs at once each have a network
/// namespace no other run has (the namespace itself, rather than one
/// symptom of sharing it). Runs one after another cannot be told apart by
/// the namespace's inode, which the kernel reuses once the first is gone.
#[test]
fn issue_22_6_concurrent_network_denied_runs_have_network_namespaces_of_their_own() {
    let _serial = serial();
    let Some(executor) = executor() else { return };
    let oracle = Oracle::start();
    let sandbox = strict();
    let script = "readlink /proc/self/ns/net; sleep 0.5";
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    // Twice: the first pair may find a prepared init waiting, the second not.
    for _ in 0..2 {
        let [first, second] = concurrently(&executor, &sandbox, [script, script]).map(|outcome| {
            assert!(
                outcome.success() && outcome.sandbox.network_denied,
                "{outcome:?}"
            );
            outcome.stdout.text_lossy().trim().to_owned()
        });
        assert_ne!(first, host.to_string_lossy(), "the host's");
        assert_ne!(first, second, "two runs at once shared a network namespace");
    }
    oracle.check_next_run(&executor, &sandbox);
    drop(executor);
    oracle.finish();
}
