//! The threads that clone inits and start programs: the executor's one
//! long-lived spawner thread, and a thread of its own for each init prepared
//! ahead or kept by a session.
//!
//! `PR_SET_PDEATHSIG` fires when the parent *thread* exits, and an init
//! inherits the thread pointer (so the `errno`) of the thread that cloned
//! it: hence threads that live as long as what they cloned, and that only
//! wait, in raw system calls, while it runs.

use std::os::fd::{AsRawFd, OwnedFd};
use std::{io, ptr};

use crate::Error;
use crate::init;
use crate::plan::{InitPlan, SpawnPlan};
use crate::spawn::{Prepared, Spawned, go, prepare_or_stage, setup_error, spawn};

/// Work for the spawner thread.
enum SpawnJob {
    /// [`spawn`], with the program's plan borrowed for the duration of the
    /// call (the caller blocks until the reply).
    Spawn {
        setup: Box<InitPlan>,
        plan: *const SpawnPlan,
        reply: std::sync::mpsc::SyncSender<Result<Spawned, Error>>,
    },
    /// [`go`], borrowed likewise.
    Go {
        prepared: Prepared,
        plan: *const SpawnPlan,
        reply: std::sync::mpsc::SyncSender<Result<Spawned, Error>>,
    },
}

// SAFETY: the plans are Sync and outlive the job (the requester blocks on the reply).
unsafe impl Send for SpawnJob {}

static SPAWNER: std::sync::Mutex<Option<std::sync::mpsc::Sender<SpawnJob>>> =
    std::sync::Mutex::new(None);

fn spawner_gone() -> Error {
    Error::Sys {
        call: "spawning from the spawner thread",
        source: io::Error::other("the spawner thread is gone"),
    }
}

/// Hands `job` to the executor's spawner thread, a thread that lives as
/// long as the process. `PR_SET_PDEATHSIG` fires when the parent *thread*
/// exits (isolation.md pitfall 13); spawning from a runtime worker or a
/// blocking-pool thread that later exits would kill the program. And an init
/// inherits the thread pointer of the thread that cloned it, so it and its
/// program write that thread's `errno`: one thread clones every init and
/// starts every program, and waits with signals blocked while they run.
fn send_to_spawner(job: SpawnJob) -> Result<(), Error> {
    let mut spawner = SPAWNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if spawner.is_none() {
        let (sender, jobs) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("toolsmith-spawner".to_owned())
            .spawn(move || {
                for job in jobs {
                    match job {
                        SpawnJob::Spawn { setup, plan, reply } => {
                            // SAFETY: the requester blocks on the reply, so the plan is alive.
                            let _ignored = reply.send(spawn(setup, unsafe { &*plan }));
                        }
                        SpawnJob::Go {
                            prepared,
                            plan,
                            reply,
                        } => {
                            // SAFETY: as above.
                            let _ignored = reply.send(go(prepared, unsafe { &*plan }, || ()));
                        }
                    }
                }
            })
            .map_err(|source| Error::Sys {
                call: "starting the spawner thread",
                source,
            })?;
        *spawner = Some(sender);
    }
    let Some(sender) = spawner.as_ref() else {
        return Err(spawner_gone());
    };
    sender.send(job).map_err(|_| spawner_gone())
}

/// [`spawn`] on the spawner thread. Blocks the calling thread until the
/// program has called `execve`, as [`spawn`] itself does.
pub(crate) fn spawn_from_spawner(setup: Box<InitPlan>, plan: &SpawnPlan) -> Result<Spawned, Error> {
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    send_to_spawner(SpawnJob::Spawn {
        setup,
        plan: ptr::from_ref(plan),
        reply,
    })?;
    answer.recv().map_err(|_| spawner_gone())?
}

/// [`go`] on the spawner thread, blocking likewise; `meanwhile` runs on the
/// calling thread once the job is handed over.
fn go_from_spawner(
    prepared: Prepared,
    plan: &SpawnPlan,
    meanwhile: impl FnOnce(),
) -> Result<Spawned, Error> {
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    send_to_spawner(SpawnJob::Go {
        prepared,
        plan: ptr::from_ref(plan),
        reply,
    })?;
    meanwhile();
    answer.recv().map_err(|_| spawner_gone())?
}

/// [`go`] from the calling thread when the init has a thread of its own,
/// else on the spawner thread; blocks until the program has called `execve`.
/// `meanwhile` runs on the calling thread while the init starts the program
/// (it may set that thread's `errno`, which no init of its own shares).
pub(crate) fn go_from_any(
    prepared: Prepared,
    plan: &SpawnPlan,
    meanwhile: impl FnOnce(),
) -> Result<Spawned, Error> {
    if prepared.own_thread() {
        go(prepared, plan, meanwhile)
    } else {
        go_from_spawner(prepared, plan, meanwhile)
    }
}

/// Runs `work` on a new thread that then lives exactly as long as the init
/// `work` prepares ([`prepare_on_init_thread`](crate::spawn::prepare_on_init_thread); `work` returns a duplicate
/// of its pidfd, or `None` when it prepared none).
///
/// An init inherits the thread pointer of the thread that cloned it, so it
/// and every program it starts write that thread's `errno`, and its
/// `PR_SET_PDEATHSIG` fires when that thread exits. A thread of its own
/// that only waits satisfies both: nothing else of the executor's runs on
/// it, so an init prepared ahead never queues a call's start behind it on
/// the spawner thread, and the call starts the program from its own thread
/// ([`go_from_any`]).
pub(crate) fn on_init_thread(
    work: Box<dyn FnOnce() -> Option<OwnedFd> + Send>,
) -> Result<(), Error> {
    std::thread::Builder::new()
        .name("toolsmith-init".to_owned())
        .stack_size(INIT_THREAD_STACK)
        .spawn(move || {
            let Some(pidfd) = work() else { return };
            let mut poll = libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // Raw: a program may write this thread's `errno` meanwhile. A
            // pidfd is readable once its process has exited.
            // SAFETY: ppoll on one valid pollfd, no timeout, no mask change.
            while unsafe {
                init::syscall4(libc::SYS_ppoll, ptr::from_mut(&mut poll) as usize, 1, 0, 0)
            } <= 0
            {}
        })
        .map(drop)
        .map_err(|source| Error::Sys {
            call: "starting a thread for toolsmith's init",
            source,
        })
}

/// The stack of a thread of [`on_init_thread`]: it plans a sandbox and
/// clones the init (which runs on a stack of its own), then waits.
const INIT_THREAD_STACK: usize = 256 * 1024;

/// [`spawn`] of a plan with an init, the init on a thread of its own
/// ([`on_init_thread`]) rather than the spawner thread: for an init that
/// serves more runs after this one (a session's), which then start their
/// programs from their own threads ([`go_from_any`]) instead of queuing on
/// the spawner thread. Blocks the calling thread likewise.
pub(crate) fn spawn_apart(setup: Box<InitPlan>, plan: &SpawnPlan) -> Result<Spawned, Error> {
    let (answer, prepared) = std::sync::mpsc::sync_channel(1);
    on_init_thread(Box::new(move || {
        let result = prepare_or_stage(setup, true);
        let pidfd = result.as_ref().ok().and_then(Prepared::pidfd_copy);
        // A caller that is gone drops the init, which the thread then outlives.
        let _ignored = answer.send(result);
        pidfd
    }))?;
    let prepared = prepared
        .recv()
        .map_err(|_| Error::Sys {
            call: "preparing toolsmith's init",
            source: io::Error::other("the init's thread ended without an answer"),
        })?
        .map_err(|failed| setup_error(failed, plan))?;
    go(prepared, plan, || ())
}
