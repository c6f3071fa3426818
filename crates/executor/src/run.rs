//! One run from spawn to a clean end: the event loop that feeds the
//! [`Lifecycle`] state machine, drains the output streams, feeds stdin, and
//! guarantees (in `Drop`) that nothing outlives the run.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

use crate::command::ReportSink;
use crate::containment::{Containment, Leader, MARKER_VAR};
use crate::lifecycle::{Action, Event, Lifecycle, Phase};
use crate::pipes::{InitStatus, Input, Reports, Stream};
use crate::plan::{Confinement, SpawnPlan};
use crate::prepared::{Key, Session, Start};
use crate::sandbox::SandboxPlan;
use crate::spawn::{self, Prepared};
use crate::{Command, Error, Executor, LimitKind, Limits, Outcome, Termination, pidfd};

/// How long the pipes may still be read after the main process exited and
/// the rest of the tree was killed. With a kernel-enforced container the
/// pipes reach EOF at once; this bounds the weaker backends, where a process
/// that escaped may hold a pipe open forever.
const DRAIN_BUDGET: Duration = Duration::from_millis(500);

/// How long to wait for the killed tree to disappear.
const TREE_GONE_BUDGET: Duration = Duration::from_secs(1);

/// How often the tree's CPU time is compared with the CPU limit.
const CPU_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A run in progress. Dropping it (a cancelled future, an early error)
/// kills and reaps everything the run started.
struct RunGuard<'executor> {
    executor: &'executor Executor,
    containment: Option<Containment>,
    leader: Option<Leader>,
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        let Some(mut containment) = self.containment.take() else {
            return;
        };
        if let Some(leader) = self.leader.take() {
            containment.signal_tree(&leader, libc::SIGKILL);
            // SIGKILL cannot be caught, so this wait is short.
            if let Err(error) = pidfd::reap_blocking(leader.pid) {
                tracing::warn!(pid = leader.pid, %error, "could not reap a cancelled run");
                // An init that could not be reaped may still run on its stack.
                std::mem::forget(leader);
            }
            containment.wait_gone_blocking(TREE_GONE_BUDGET);
        }
        self.executor.release(containment);
    }
}

/// The supervisor of the run's Unix socket grants and of its creations, when
/// its filter has a listener: its program waits in the call until the
/// supervisor answers, so it may start after the program, and it starts only
/// when first needed.
fn start_supervisor(sandbox: &SandboxPlan) -> Result<Option<crate::egress::LazySupervisor>, Error> {
    if !sandbox.seccomp_listener {
        return Ok(None);
    }
    let granted = sandbox
        .egress
        .as_ref()
        .map(|channel| channel.egress.unix_sockets.clone())
        .unwrap_or_default();
    crate::egress::LazySupervisor::start(sandbox.notifier()?, granted, sandbox.creations.clone())
        .map(Some)
}

/// Runs `command` to completion. See [`Executor::run`].
///
/// Four steps: [`start`] (the sandbox, the container, the pipes and the
/// spawn), [`supervise`] (the lifecycle's event loop until the tree has
/// exited), [`settle`] (the leader reaped, the tree gone, the init kept for
/// a session or handed to the reaper) and [`drain`] (what the pipes still
/// hold), then [`outcome`].
pub(crate) async fn run(
    executor: &Executor,
    command: &Command,
    limits: &Limits,
    session: Option<&Session>,
    reports: Option<ReportSink>,
) -> Result<Outcome, Error> {
    let run_id = executor.next_run_id();
    let key = Key::new(command.sandbox_profile(), limits.tmp_size);
    // Declared before the guard, so that on cancellation the tree is killed
    // before its temporary directory is removed.
    if session.is_none() && executor.planner.keeps_prepared() {
        executor.planner.await_refill(&key).await;
    }
    let (sandbox, start_from) = match session.and_then(|session| session.take(&key)) {
        Some((sandbox, prepared)) => (sandbox, Start::Prepared(prepared)),
        None => executor.planner.start(&key)?,
    };
    let containment = executor.contain(limits)?;
    // Before the program can start: its first attempt is recorded too.
    let watch = watch_reads(&containment, &sandbox);
    // A session keeps the init for its next run when the run's cgroup, not
    // the init's death, is what ends the program's leftovers.
    let keep_init = session.filter(|_| matches!(containment, Containment::Cgroup(_)));
    let mut guard = RunGuard {
        executor,
        containment: Some(containment),
        leader: None,
    };
    let Started {
        started,
        mut streams,
    } = start(
        executor,
        command,
        limits,
        session,
        reports.as_ref(),
        (run_id, &key, &sandbox, start_from),
        &mut guard,
    )?;
    // The proxy serves from the program's start; a run whose listener did not
    // come ends here (the guard kills it): no proxy, no way out.
    let proxy = match &sandbox.egress {
        Some(channel) => Some(crate::egress::Proxy::start(
            channel.listener()?,
            channel.egress.clone(),
            executor.resolver.clone(),
        )?),
        None => None,
    };
    let supervisor = start_supervisor(&sandbox)?;
    let Some(leader) = guard.leader.as_ref() else {
        return Err(lost("the run lost its leader"));
    };
    // The program's exit is the init's record when there is an init (the init
    // itself lives on until the executor kills it), else the pidfd. An init
    // that dies first (killed at a deadline) shows on its pidfd too: it
    // shares the executor's descriptors, so its status pipe has no EOF.
    // SAFETY: the pidfd is owned by `guard.leader`, which is taken only after
    // `leader_exit` is dropped, and on cancellation `leader_exit` (declared
    // later) is dropped before `guard`.
    let leader_exit = unsafe {
        AsyncFd::register_with_interest(leader.pidfd.as_raw_fd(), tokio::io::Interest::READABLE)
    }
    .map_err(|error| Error::Sys {
        call: "registering a pidfd with the runtime",
        source: io::Error::from(error),
    })?;
    let supervised = supervise(
        &mut guard,
        &leader_exit,
        &mut streams,
        limits,
        keep_init.is_some(),
        started,
    )
    .await;
    drop(leader_exit);
    streams.input.close();
    let settled = settle(
        executor,
        &mut guard,
        key,
        sandbox,
        keep_init,
        streams.init_status.as_ref(),
    )
    .await?;
    drain(&mut streams).await;
    let wall_time = started.elapsed();
    let mut egress = match proxy {
        Some(proxy) => proxy.finish().await,
        None => Vec::new(),
    };
    let mut writes_denied = Vec::new();
    if let Some(supervisor) = supervisor {
        let (events, writes) = supervisor.finish().await;
        egress.extend(events);
        writes_denied = writes;
    }
    let mut outcome = outcome(executor, limits, supervised, streams, settled, wall_time)?;
    outcome.egress = egress;
    outcome.writes_denied = writes_denied;
    if let Some(watch) = watch {
        (outcome.reads_denied, outcome.reads_denied_more) = watch.finish();
    }
    Ok(outcome)
}

/// What the event loop reads, writes and watches while the program runs.
struct Streams<'input> {
    stdout: Stream,
    stderr: Stream,
    input: Input<'input>,
    reports: Option<Reports>,
    /// With toolsmith's init, its status pipe.
    init_status: Option<InitStatus>,
}

/// A run whose program has called `execve`.
struct Started<'input> {
    /// When the program was started (the deadline counts from here).
    started: Instant,
    streams: Streams<'input>,
}

/// Opens the run's pipes, plans the spawn and starts the program (in a
/// prepared init, or in one set up at once, or without one), then puts its
/// leader in the guard. `sandbox` is the run's id, key, sandbox plan and start.
fn start<'command>(
    executor: &Executor,
    command: &'command Command,
    limits: &Limits,
    session: Option<&Session>,
    reports: Option<&ReportSink>,
    sandbox: (u64, &Key, &SandboxPlan, Start),
    guard: &mut RunGuard<'_>,
) -> Result<Started<'command>, Error> {
    let (run_id, key, sandbox, start_from) = sandbox;
    let (stdout_read, stdout_write) = crate::pipes::pipe()?;
    let (stderr_read, stderr_write) = crate::pipes::pipe()?;
    let (stdin_child, stdin_parent) = match command.stdin_bytes() {
        Some(_) => {
            let (read, write) = crate::pipes::pipe()?;
            (read, Some(write))
        }
        None => (executor.dev_null()?, None),
    };

    let report_pipe = match reports {
        Some(_) => {
            let (read, write) = crate::pipes::pipe()?;
            // Descriptor 3 in the child: its source must not be 3 itself (see spawn.rs).
            Some((read, crate::pipes::at_least(write, 4)?))
        }
        None => None,
    };

    let marker_value = format!("{}.{run_id}", std::process::id());
    let sandbox_env = sandbox.env();
    let mut extra_env: Vec<(&OsStr, &OsStr)> = sandbox_env
        .iter()
        .map(|(name, value)| (name.as_os_str(), value.as_os_str()))
        .collect();
    if let Some(crate::Backend::Subreaper) = guard.containment.as_ref().map(Containment::backend) {
        extra_env.push((OsStr::new(MARKER_VAR), OsStr::new(&marker_value)));
    }
    if let Some(Containment::Subreaper { marker, .. }) = guard.containment.as_mut() {
        *marker = format!("{MARKER_VAR}={marker_value}").into_bytes();
    }
    let plan = SpawnPlan::new(
        command,
        &extra_env,
        [
            stdin_child.as_raw_fd(),
            stdout_write.as_raw_fd(),
            stderr_write.as_raw_fd(),
        ],
        report_pipe.as_ref().map(|(_, write)| write.as_raw_fd()),
        guard
            .containment
            .as_ref()
            .map(Containment::procs_fds)
            .unwrap_or_default(),
        executor.rlimits(limits),
        Confinement {
            landlock: sandbox.landlock.as_ref().map(AsRawFd::as_raw_fd),
            privileges: sandbox.privileges,
        },
    )?;

    let started = Instant::now();
    let spawned = spawn_program(executor, session, key, start_from, &plan)?;
    drop((stdin_child, stdout_write, stderr_write));
    // The leader goes in the guard before anything else can fail: an error below then still
    // kills and reaps the program, and an init's stack stays mapped until it is reaped.
    let (init_keep, init_status) = match spawned.init {
        Some(init) => (Some(init.keep), Some(init.status)),
        None => (None, None),
    };
    guard.leader = Some(Leader {
        pid: spawned.pid,
        pidfd: spawned.pidfd,
        init: init_keep,
    });
    let reports = match (report_pipe, reports) {
        (Some((read, write)), Some(sink)) => {
            drop(write);
            Some(Reports::new(read, sink.clone())?)
        }
        _ => None,
    };
    let init_status = init_status.map(InitStatus::new).transpose()?;

    let stdout = Stream::new(stdout_read, limits.max_output)?;
    let stderr = Stream::new(stderr_read, limits.max_output)?;
    let input = Input::new(stdin_parent, command.stdin_bytes().unwrap_or_default())?;
    Ok(Started {
        started,
        streams: Streams {
            stdout,
            stderr,
            input,
            reports,
            init_status,
        },
    })
}

/// Starts the planned program: in a prepared init, or in one set up at once
/// (on a thread of its own for a session), or without one.
fn spawn_program(
    executor: &Executor,
    session: Option<&Session>,
    key: &Key,
    start_from: Start,
    plan: &SpawnPlan,
) -> Result<spawn::Spawned, Error> {
    // The next call's sandbox is prepared while this one runs, so that
    // back-to-back calls find it ready: it is queued as soon as this run's
    // program is on its way, on another core. A session's runs reuse the
    // session's own init: what the pool holds is for calls (a probe's
    // sandbox there would only push a call's out).
    let refill = || {
        if session.is_none() {
            executor.planner.refill(key);
        }
    };
    match start_from {
        Start::Prepared(prepared) => crate::spawner::go_from_any(prepared, plan, refill),
        // A session's init serves its later runs too: on a thread of its own,
        // their programs start from their own threads, not one after another
        // on the spawner thread (discovery runs several sessions at once).
        Start::Setup(setup) if session.is_some() && setup.with_init => {
            crate::spawner::spawn_apart(setup, plan)
        }
        Start::Setup(setup) => {
            refill();
            crate::spawner::spawn_from_spawner(setup, plan)
        }
    }
}

/// How the event loop ended: the lifecycle (its limit and escalation) and
/// the leftovers it killed.
struct Supervised {
    lifecycle: Lifecycle,
    leftovers_killed: Option<u64>,
}

/// The event loop: feeds the [`Lifecycle`] with the leader's exit, the
/// deadline, the grace and the CPU limit, and carries out its actions,
/// while it reads the output pipes and the reports and writes stdin. Ends
/// when the lifecycle reaches [`Phase::Exited`].
async fn supervise(
    guard: &mut RunGuard<'_>,
    leader_exit: &AsyncFd<std::os::fd::RawFd>,
    streams: &mut Streams<'_>,
    limits: &Limits,
    keep_init: bool,
    started: Instant,
) -> Supervised {
    let Streams {
        stdout,
        stderr,
        input,
        reports,
        init_status,
    } = streams;
    let deadline = tokio::time::Instant::from_std(started + limits.timeout);
    let watch_cpu = limits.cpu.filter(|_| {
        guard
            .containment
            .as_ref()
            .is_some_and(|containment| containment.cpu_time().is_some())
    });
    let mut cpu_poll = tokio::time::interval(CPU_POLL_INTERVAL);
    let mut lifecycle = Lifecycle::new(limits.grace);
    let mut leftovers_killed = Some(0);

    while lifecycle.phase() != Phase::Exited {
        let kill_at = match lifecycle.phase() {
            Phase::Terminating { kill_at } => Some(tokio::time::Instant::from_std(kill_at)),
            _ => None,
        };
        let running = lifecycle.phase() == Phase::Running;
        let event = tokio::select! {
            biased;
            () = leader_readable(leader_exit), if leader_running(init_status.as_ref()) => {
                if let Some(status) = init_status.as_mut() {
                    // The init died: what it wrote before is in the pipe.
                    status.drain();
                }
                Event::LeaderExited
            }
            () = read_init_status(init_status), if init_status.as_ref().is_some_and(|status| !status.finished()) => {
                if init_status.as_ref().is_some_and(InitStatus::finished) {
                    Event::LeaderExited
                } else {
                    continue;
                }
            }
            () = tokio::time::sleep_until(deadline), if running => Event::Deadline,
            () = tokio::time::sleep_until(kill_at.unwrap_or(deadline)), if kill_at.is_some() => Event::GraceElapsed,
            _ = cpu_poll.tick(), if running && watch_cpu.is_some() => {
                let used = guard.containment.as_ref().and_then(Containment::cpu_time).unwrap_or_default();
                if watch_cpu.is_some_and(|limit| used >= limit) {
                    Event::CpuExceeded
                } else {
                    continue;
                }
            }
            () = stdout.read_chunk(), if stdout.open() => continue,
            () = stderr.read_chunk(), if stderr.open() => continue,
            () = input.write_chunk(), if input.pending() => continue,
            () = read_reports(reports), if reports.as_ref().is_some_and(Reports::open) => continue,
        };
        let Some(action) = lifecycle.on(event, Instant::now()) else {
            continue;
        };
        let (Some(containment), Some(leader)) = (guard.containment.as_mut(), guard.leader.as_ref())
        else {
            break;
        };
        match action {
            Action::TerminateTree => containment.signal_tree(leader, libc::SIGTERM),
            Action::KillTree => containment.signal_tree(leader, libc::SIGKILL),
            Action::KillLeftovers => {
                leftovers_killed = containment.kill_leftovers(leader);
                if leader.is_init() && !keep_init {
                    // The program has exited: its init's work is done, and
                    // the namespace (with anything left in it) ends with it.
                    pidfd::send_signal(&leader.pidfd, libc::SIGKILL);
                }
            }
        }
    }
    Supervised {
        lifecycle,
        leftovers_killed,
    }
}

/// What is left of a run once its tree is gone.
struct Settled {
    /// The leader's own wait status and usage, when it was reaped here.
    reaped: Option<pidfd::Reaped>,
    /// The run's container, still to be read (CPU time, peak memory, OOM
    /// kills) and released.
    containment: Containment,
    applied: crate::AppliedSandbox,
}

/// After the lifecycle: reaps the leader (it is our child and a zombie, so
/// its pid could not have been reused), makes sure the tree is gone, and
/// keeps the init for the session's next run, or hands it and the sandbox
/// to the reaper thread, or drops the sandbox.
async fn settle(
    executor: &Executor,
    guard: &mut RunGuard<'_>,
    key: Key,
    sandbox: SandboxPlan,
    keep_init: Option<&Session>,
    init_status: Option<&InitStatus>,
) -> Result<Settled, Error> {
    let mut leader = guard.leader.take();
    // The program's record is in and its cgroup was killed: a session's
    // init waits for the session's next run once the cgroup is empty.
    let reusable = match (keep_init, leader.take()) {
        (Some(session), Some(init))
            if init.is_init() && init_status.is_some_and(|status| status.record().is_some()) =>
        {
            Some((session, init))
        }
        (_, other) => {
            leader = other;
            None
        }
    };
    let applied = sandbox.applied.clone();
    let mut sandbox = Some(sandbox);
    let reaped = match leader {
        // Its program is reaped and the leftovers are killed: what is left is
        // the kernel tearing the namespaces down as the init exits, which an
        // executor that keeps sandboxes prepared does not wait for. The
        // sandbox's own clean-up (its temporary directory) follows, on the
        // reaper thread, once the namespace is gone.
        Some(leader) if leader.is_init() && executor.planner.keeps_prepared() => {
            pidfd::reap_later(leader.pid, Box::new((leader, sandbox.take())));
            None
        }
        Some(leader) => pidfd::reap_blocking(leader.pid).map_err(|source| Error::Sys {
            call: "wait4",
            source,
        })?,
        None => None,
    };
    let mut containment = guard.containment.take();
    let tree_gone = match containment.as_mut() {
        Some(containment) => containment.wait_gone(TREE_GONE_BUDGET).await,
        None => true,
    };
    if !tree_gone {
        tracing::debug!("processes of the run may remain (weak containment backend)");
    }
    match (reusable, sandbox) {
        (Some((session, init)), Some(sandbox)) if tree_gone => {
            let Leader { pid, pidfd, init } = init;
            if let Some(keep) = init {
                session.put(key, sandbox, Prepared::reuse(pid, pidfd, keep));
            }
        }
        (Some((_, init)), sandbox) => {
            pidfd::send_signal(&init.pidfd, libc::SIGKILL);
            pidfd::reap_later(init.pid, Box::new((init, sandbox)));
        }
        (None, sandbox) => drop(sandbox),
    }
    let containment = containment.ok_or_else(|| lost("the run lost its container"))?;
    Ok(Settled {
        reaped,
        containment,
        applied,
    })
}

/// Reads what the output and report pipes still hold, for at most
/// [`DRAIN_BUDGET`].
async fn drain(streams: &mut Streams<'_>) {
    let Streams {
        stdout,
        stderr,
        reports,
        ..
    } = streams;
    let drain_until = tokio::time::Instant::now() + DRAIN_BUDGET;
    let reports_open = |reports: &Option<Reports>| reports.as_ref().is_some_and(Reports::open);
    while stdout.open() || stderr.open() || reports_open(reports) {
        tokio::select! {
            () = tokio::time::sleep_until(drain_until) => break,
            () = stdout.read_chunk(), if stdout.open() => {}
            () = stderr.read_chunk(), if stderr.open() => {}
            () = read_reports(reports), if reports_open(reports) => {}
        }
    }
}

/// The run's [`Outcome`], and its container released.
fn outcome(
    executor: &Executor,
    limits: &Limits,
    supervised: Supervised,
    streams: Streams<'_>,
    settled: Settled,
    wall_time: Duration,
) -> Result<Outcome, Error> {
    let Settled {
        reaped,
        containment,
        applied,
    } = settled;
    // With an init, the program's own status comes from its record, and its
    // usage too: the init's rusage would report the executor's memory as its own.
    let reaped = match &streams.init_status {
        Some(status) => status.record().map(pidfd::Reaped::from_record),
        None => reaped,
    };
    let termination = reaped.map_or(Termination::Signaled(libc::SIGKILL), |reaped| {
        reaped.termination
    });
    let cpu_time = containment
        .cpu_time()
        .or(reaped.map(|reaped| reaped.cpu_time));
    let lifecycle = supervised.lifecycle;
    let limit = lifecycle.limit().or_else(|| {
        if containment.oom_kills() > 0 {
            return Some(LimitKind::Memory);
        }
        cpu_limit_hit(
            termination,
            limits.cpu,
            reaped.map(|reaped| reaped.cpu_time),
        )
    });
    let outcome = Outcome {
        termination,
        limit,
        escalated: lifecycle.escalated(),
        wall_time,
        cpu_time,
        peak_memory: containment
            .peak_memory()
            .or(reaped.map(|reaped| reaped.max_rss_bytes)),
        stdout: streams.stdout.capture.finish(),
        stderr: streams.stderr.capture.finish(),
        leftovers_killed: supervised.leftovers_killed,
        stdin_unread: streams.input.unread,
        backend: containment.backend(),
        sandbox: applied,
        egress: Vec::new(),
        reads_denied: Vec::new(),
        reads_denied_more: 0,
        writes_denied: Vec::new(),
    };
    executor.release(containment);
    Ok(outcome)
}

/// The error of a run that lost track of what it started.
fn lost(what: &str) -> Error {
    Error::Sys {
        call: "run",
        source: io::Error::other(what),
    }
}

async fn leader_readable(leader_exit: &AsyncFd<std::os::fd::RawFd>) {
    if let Ok(mut ready) = leader_exit.readable().await {
        ready.retain_ready();
    }
}

/// Whether the leader's exit is still to be seen: the program's, or the
/// init's until its record is in.
fn leader_running(init_status: Option<&InitStatus>) -> bool {
    init_status.is_none_or(|status| !status.finished())
}

async fn read_init_status(status: &mut Option<InitStatus>) {
    if let Some(status) = status {
        status.read_chunk().await;
    }
}

async fn read_reports(reports: &mut Option<Reports>) {
    if let Some(reports) = reports {
        reports.read_chunk().await;
    }
}

/// RLIMIT_CPU ends a process with SIGXCPU at the soft limit, or SIGKILL at
/// the hard one when SIGXCPU is caught or ignored.
fn cpu_limit_hit(
    termination: Termination,
    limit: Option<Duration>,
    used: Option<Duration>,
) -> Option<LimitKind> {
    let limit = limit?;
    match termination {
        Termination::Signaled(libc::SIGXCPU) => Some(LimitKind::Cpu),
        Termination::Signaled(libc::SIGKILL) if used.is_some_and(|used| used >= limit) => {
            Some(LimitKind::Cpu)
        }
        _ => None,
    }
}

/// The watch of the run's attempts to read its masks: with the mask server, masks it serves,
/// and a cgroup leaf of the run's own, by which the server tells its processes from others'.
fn watch_reads(
    containment: &Containment,
    sandbox: &crate::sandbox::SandboxPlan,
) -> Option<crate::mask_server::Watch> {
    let Containment::Cgroup(leaf) = containment else {
        return None;
    };
    if sandbox.mask_nodes.is_empty() {
        return None;
    }
    let server = crate::mask_server::server().ok()?;
    Some(server.watch(leaf.v2_path(), sandbox.mask_nodes.clone()))
}
