//! Planning a run's sandbox, and keeping one prepared ahead of its call.
//!
//! Most of a sandboxed call's cost is the kernel's: new namespaces, a dozen
//! mounts, the filter. None of it depends on the program, only on the
//! sandbox, so an executor that serves calls in a loop (`toolsmith serve`)
//! can do it while the previous call runs: after each call it asks the
//! spawner thread to prepare one more init for the same sandbox
//! ([`Planner::refill`]), and the next call with that sandbox only has to
//! wake it (`spawn::go`). Each prepared init serves exactly one call, so no
//! call ever sees another's namespaces; the work moves off the call's
//! latency, not off the machine's CPU.
//!
//! A [`Session`] goes further for runs of one trust domain that come one
//! after another (the probes of one tool directory): its runs share one
//! init, so the namespaces, the mounts, the filter and the TMPDIR are set up
//! once for all of them. Each run still has its own cgroup, killed and
//! emptied at its end, so nothing of a run's processes reaches the next;
//! what a run leaves in the TMPDIR or the IPC namespace, the next run of the
//! session sees.
//!
//! Every network-denied run gets a network namespace of its own, never one
//! shared with another run: in a shared one, concurrent runs could name,
//! list (`/proc/net/unix`) and reach each other's sockets, abstract names
//! included, whatever the filter lets them make. Creating a network
//! namespace is the largest single cost of a call (about 850 µs here); a
//! prepared init has made its own before its call comes.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::plan::{IdMaps, InitPlan};
use crate::runs_dir::RunsDir;
use crate::sandbox::{self, SandboxPlan};
use crate::spawn::{self, Prepared};
use crate::{Backend, Error, Features, Sandbox, seccomp};

/// What a prepared sandbox is prepared for: the same profile and TMPDIR size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    sandbox: Sandbox,
    tmp_size: Option<u64>,
}

impl Key {
    pub(crate) fn new(sandbox: &Sandbox, tmp_size: Option<u64>) -> Key {
        Key {
            sandbox: sandbox.clone(),
            tmp_size,
        }
    }
}

/// How a run's namespaces come to be.
#[derive(Debug)]
pub(crate) enum Start {
    /// An init prepared ahead, waiting for the program.
    Prepared(Prepared),
    /// A plan for the spawn to set up at once.
    Setup(Box<InitPlan>),
}

/// Runs that share one init and its namespaces, one after another (see the
/// module's documentation). Made by [`crate::Executor::session`].
#[derive(Debug)]
pub struct Session {
    pub(crate) executor: Arc<crate::Executor>,
    /// The init of the last run, waiting for the next, with its sandbox plan.
    idle: Mutex<Option<Ready>>,
}

impl Session {
    pub(crate) fn new(executor: Arc<crate::Executor>) -> Session {
        Session {
            executor,
            idle: Mutex::new(None),
        }
    }

    /// Runs `command` under `limits` in the session's namespaces, made by the
    /// first run (and again after a run whose init did not survive it, or
    /// with another sandbox). Runs of one session take turns.
    ///
    /// # Errors
    /// As [`crate::Executor::run`].
    pub async fn run(
        &self,
        command: &crate::Command,
        limits: &crate::Limits,
    ) -> Result<crate::Outcome, Error> {
        self.executor
            .run_in(command, limits, Some(self), None)
            .await
    }

    /// The waiting init for `key`, if it is still alive.
    pub(crate) fn take(&self, key: &Key) -> Option<(SandboxPlan, Prepared)> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()?;
        (&idle.key == key && idle.prepared.alive()).then_some((idle.sandbox, idle.prepared))
    }

    /// Keeps the init of a run that ended cleanly for the next run.
    pub(crate) fn put(&self, key: Key, sandbox: SandboxPlan, prepared: Prepared) {
        let previous = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .replace(Ready {
                prepared,
                sandbox,
                key,
            });
        drop(previous);
    }
}

/// A prepared init with the sandbox plan it was made from. The init is
/// declared first so that it is killed before the plan's temporary
/// directory is removed.
#[derive(Debug)]
struct Ready {
    prepared: Prepared,
    sandbox: SandboxPlan,
    key: Key,
}

/// The longest a run waits for a preparation under way (`Planner::await_refill`).
const REFILL_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// At most this many prepared sandboxes wait at once (one per profile in use).
const MAX_READY: usize = 2;

/// What an executor needs to plan a run's sandbox, shared with the spawner
/// thread that prepares them ahead.
#[derive(Debug)]
pub(crate) struct Planner {
    pub(crate) features: Features,
    pub(crate) host: sandbox::Host,
    pub(crate) backend: Backend,
    /// A pidfd of the executor's own process (see `InitPlan::executor_pidfd`).
    pub(crate) own_pidfd: Option<OwnedFd>,
    /// The directory of the runs' TMPDIRs, hidden from every run (`runs_dir.rs`).
    runs: Arc<RunsDir>,
    next_run: AtomicU64,
    keep_prepared: AtomicBool,
    ready: Mutex<Vec<Ready>>,
    /// Refills queued on the spawner thread and not done yet.
    refilling: AtomicUsize,
    /// The sandbox being prepared, while a refill is under way.
    refilling_key: Mutex<Option<Key>>,
    /// Told when a refill ends.
    refilled: tokio::sync::Notify,
}

impl Planner {
    pub(crate) fn new(
        features: Features,
        host: sandbox::Host,
        backend: Backend,
        own_pidfd: Option<OwnedFd>,
        runs: Arc<RunsDir>,
    ) -> Planner {
        Planner {
            features,
            host,
            backend,
            own_pidfd,
            runs,
            next_run: AtomicU64::new(0),
            keep_prepared: AtomicBool::new(false),
            ready: Mutex::new(Vec::new()),
            refilling: AtomicUsize::new(0),
            refilling_key: Mutex::new(None),
            refilled: tokio::sync::Notify::new(),
        }
    }

    pub(crate) fn next_run_id(&self) -> u64 {
        self.next_run.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn set_keep_prepared(&self, keep: bool) {
        self.keep_prepared.store(keep, Ordering::Relaxed);
        if !keep {
            drop(std::mem::take(&mut *self.lock_ready()));
        }
    }

    pub(crate) fn keeps_prepared(&self) -> bool {
        self.keep_prepared.load(Ordering::Relaxed)
    }

    pub(crate) fn waiting(&self) -> usize {
        self.lock_ready().len()
    }

    fn lock_ready(&self) -> std::sync::MutexGuard<'_, Vec<Ready>> {
        self.ready
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits, briefly, for a preparation of `key` under way on the spawner
    /// thread: it ends sooner than a set-up started now, which would wait
    /// behind it on that thread anyway.
    pub(crate) async fn await_refill(&self, key: &Key) {
        let notified = self.refilled.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let under_way = self
            .refilling_key
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_ref()
            == Some(key);
        if under_way {
            let _ignored = tokio::time::timeout(REFILL_WAIT, notified).await;
        }
    }

    /// The sandbox plan of a run and how its namespaces start: a prepared
    /// init for `key` when one waits, else a plan to set up now.
    pub(crate) fn start(&self, key: &Key) -> Result<(SandboxPlan, Start), Error> {
        let taken = {
            let mut ready = self.lock_ready();
            ready
                .iter()
                .position(|ready| &ready.key == key)
                .map(|index| ready.remove(index))
        };
        if let Some(ready) = taken
            && ready.prepared.alive()
        {
            return Ok((ready.sandbox, Start::Prepared(ready.prepared)));
        }
        let (sandbox, setup) = self.plan(key)?;
        Ok((sandbox, Start::Setup(setup)))
    }

    /// Plans the sandbox of one run of `key`.
    fn plan(&self, key: &Key) -> Result<(SandboxPlan, Box<InitPlan>), Error> {
        let run_name = format!("{}-{}", std::process::id(), self.next_run_id());
        let mut plan = sandbox::plan(
            &key.sandbox,
            &self.features,
            self.host,
            &self.runs,
            &run_name,
            key.tmp_size,
        )?;
        let setup = self.init_plan(&mut plan);
        Ok((plan, setup))
    }

    /// The namespaces of a run: the backend's PID namespace and the
    /// sandbox's, in a user namespace when not root.
    fn init_plan(&self, sandbox: &mut SandboxPlan) -> Box<InitPlan> {
        let mut clone_flags = sandbox.clone_flags;
        if self.backend == Backend::PidNamespace {
            clone_flags |= libc::CLONE_NEWPID;
        }
        let user_namespace = clone_flags != 0 && !self.host.is_root;
        Box::new(InitPlan {
            clone_flags: if user_namespace {
                clone_flags | libc::CLONE_NEWUSER
            } else {
                clone_flags
            },
            id_maps: user_namespace.then(IdMaps::identity),
            mount_proc: sandbox.mount_proc,
            mounts: sandbox.mounts.take(),
            hostname: sandbox.hostname,
            seccomp: sandbox.seccomp.map(seccomp::fprog),
            executor_pidfd: self.own_pidfd.as_ref().map(AsRawFd::as_raw_fd),
            with_init: clone_flags & libc::CLONE_NEWPID != 0,
            bounding: sandbox
                .privileges
                .map(|privileges| privileges.last_capability),
            egress_channel: sandbox
                .egress
                .as_ref()
                .map(crate::egress::EgressChannel::child_fd),
            notify_channel: sandbox.notify_fd(),
        })
    }

    fn refill_done(&self) {
        *self
            .refilling_key
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
        self.refilling.fetch_sub(1, Ordering::AcqRel);
        self.refilled.notify_waiters();
    }

    /// When the executor keeps sandboxes prepared, queues the preparation of
    /// one more for `key` on the spawner thread, unless one waits already.
    pub(crate) fn refill(self: &Arc<Planner>, key: &Key) {
        // Only an init waits: a run without a PID namespace is its program's
        // own process from the start, so there is nothing to prepare.
        let with_init = (key.sandbox.private_pids && self.features.private_proc.available)
            || self.backend == Backend::PidNamespace;
        if !with_init
            || !self.keeps_prepared()
            || self.lock_ready().iter().any(|ready| &ready.key == key)
        {
            return;
        }
        // One preparation at a time: under a burst of calls the spawner
        // thread's time goes to the calls themselves.
        if self.refilling.fetch_add(1, Ordering::AcqRel) > 0 {
            self.refilling.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let planner = Arc::clone(self);
        let key = key.clone();
        *planner
            .refilling_key
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(key.clone());
        let queued = crate::spawner::on_init_thread(Box::new(move || {
            // Another refill may have made one since this was queued.
            if planner.lock_ready().iter().any(|ready| ready.key == key) {
                planner.refill_done();
                return None;
            }
            let result = planner
                .plan(&key)
                .and_then(|(sandbox, setup)| Ok((sandbox, spawn::prepare_on_init_thread(setup)?)));
            let pidfd = result
                .as_ref()
                .ok()
                .and_then(|(_, prepared)| prepared.pidfd_copy());
            match result {
                Ok((sandbox, prepared)) if planner.keeps_prepared() => {
                    let mut ready = planner.lock_ready();
                    if ready.len() >= MAX_READY {
                        ready.remove(0);
                    }
                    ready.push(Ready {
                        prepared,
                        sandbox,
                        key,
                    });
                }
                Ok(_) => {}
                Err(error) => tracing::debug!(%error, "could not prepare a sandbox ahead"),
            }
            planner.refill_done();
            pidfd
        }));
        if queued.is_err() {
            self.refill_done();
        }
    }
}
