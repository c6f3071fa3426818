//! The child's side of a spawn: the code that runs after the clone, in the
//! executor's memory, on a stack of its own. The namespace's first process
//! ([`child_main`]: the program, or toolsmith's init and its loop) and the
//! program's set-up before `execve` ([`tool_main`]).
//!
//! Only raw system calls from here on: no allocation, no lock, no panic.
//! A failing step stores its [`Stage`] and errno in the context the parent
//! reads, then calls `_exit(127)`. After its handshake the init writes no
//! `errno` either (`init.rs`).

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::Ordering;

use crate::init::{self, KernelSigaction, NSIG};
use crate::plan::{InitPlan, SpawnPlan};
use crate::privileges::{self, PrivilegeStep};
use crate::spawn::{ChildContext, FAILED, READY, STARTED};
use crate::{Stage, seccomp};

/// Sets `PR_SET_DUMPABLE`; false when it failed. Async-signal-safe.
///
/// # Safety
/// One `prctl`.
pub(crate) unsafe fn set_dumpable(value: libc::c_ulong) -> bool {
    // SAFETY: PR_SET_DUMPABLE takes 0 or 1.
    unsafe {
        libc::prctl(
            libc::PR_SET_DUMPABLE,
            value,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) == 0
    }
}

/// The child's entry point: the namespace's first process. Only system calls
/// from here on.
///
/// Without an init this process is the program. With one, this process is
/// toolsmith's init: it sets the namespaces up, waits for the call, starts
/// the program with [`tool_main`] and supervises it (`init.rs`).
pub(crate) extern "C" fn child_main(argument: *mut c_void) -> c_int {
    // SAFETY: the parent passed a ChildContext that outlives the child's use
    // of it (the parent waits until execve, _exit or the init's handshake,
    // and keeps a prepared init's context until it is reaped).
    let context = unsafe { &*argument.cast::<ChildContext>() };
    // SAFETY: the set-up plan lives as long as the context.
    let setup = unsafe { &*context.setup };

    // SAFETY: every call below is a plain system call on descriptors and
    // buffers prepared by the parent; none allocates or takes a lock.
    unsafe {
        // C1 step 1: the namespace's first process, while it holds its capabilities.
        if setup.id_maps.as_ref().is_some_and(|maps| !maps.write_own()) {
            return fail(context, Stage::IdMaps);
        }
        // The program dies with the executor. The signal fires when the
        // parent *thread* exits, which is why spawns come from one long-lived
        // thread (`spawn_from_spawner`); and the executor may have died
        // before the call, which the pidfd shows.
        if let Some(executor) = setup.executor_pidfd {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) != 0
            {
                return fail(context, Stage::Pdeathsig);
            }
            let mut poll = libc::pollfd {
                fd: executor,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut poll, 1, 0) != 0 {
                return fail(context, Stage::Orphaned);
            }
        }
        // C1 step 2 (`mounts`): the call's mount layout and UTS set-up go
        // here, in the namespace's first process, before the program starts.
        // In the run's own network namespace, before `/proc/sys` becomes read-only
        // (`mounts`): its sockets start with a wide receive window (`egress/window.rs`).
        // Only in a namespace of the run's own: never the host's `tcp_rmem`. Refused, the
        // kernel's default stays and the run is only slower.
        if setup.egress_channel.is_some() && setup.clone_flags & libc::CLONE_NEWNET != 0 {
            crate::egress::widen_receive_window();
        }
        if setup.mount_proc && !mount_private_proc() {
            return fail(context, Stage::MountProc);
        }
        // Before Landlock in the program: `set_up` adds the TMPDIR tmpfs's
        // rule to the ruleset the program enforces.
        if setup
            .mounts
            .as_ref()
            .is_some_and(|mounts| !crate::mounts::set_up(mounts))
        {
            return fail(context, Stage::Mounts);
        }
        if setup.hostname && !crate::mounts::set_hostname() {
            return fail(context, Stage::Hostname);
        }
        // In the run's own network namespace, before any program exists: the
        // proxy's listener, handed to the executor (`egress/listen.rs`).
        if setup
            .egress_channel
            .is_some_and(|channel| !crate::egress::listen_and_send(channel))
        {
            return fail(context, Stage::EgressListener);
        }
        if !setup.with_init {
            return tool_main(argument);
        }

        // toolsmith's init. The memory it shares with the executor becomes
        // non-dumpable before the program exists, so the program can never
        // ptrace the init or read its memory (`docs/security.md`).
        if !set_dumpable(0) {
            return fail(context, Stage::InitDumpable);
        }
        init::reset_signal_dispositions();
        // Out of the executor's session and process group: a terminal's
        // Ctrl-C to toolsmith's group must not reach the init.
        if libc::setsid() < 0 {
            return fail(context, Stage::InitSetsid);
        }
        // The bounding set only limits what an `execve` grants, and the
        // init never calls it: it keeps the capabilities it holds.
        if setup
            .bounding
            .is_some_and(|last| !privileges::lock_bounding_set(last))
        {
            return fail(context, Stage::BoundingSet);
        }
        // The filter, last of the set-up: the init itself lives under it
        // from here on, and the program inherits it, so a call does not pay
        // for building the kernel's copy of it. The init needs nothing the
        // filter refuses (see `init.rs`). NO_NEW_PRIVS lets a filter be
        // installed without CAP_SYS_ADMIN; the init never calls `execve`.
        if let Some(filter) = &setup.seccomp {
            if !seccomp::set_no_new_privs() {
                return fail(context, Stage::NoNewPrivs);
            }
            if !install_filter(setup, filter) {
                return fail(context, Stage::Seccomp);
            }
        }
        // Ready: the loop waits for the call.
        if !init::write_byte(context.status_fd, READY) {
            init::exit(0);
        }
        init_loop(context, argument)
    }
}

/// toolsmith's init after its set-up: starts a program at each go, forwards
/// signals to the running one, reaps every process re-parented to it, and
/// writes each program's record when it exits (`init.rs`). Ends when the
/// executor closes the go pipe, or kills it.
///
/// # Safety
/// Only in the init, after its handshake.
unsafe fn init_loop(context: &ChildContext, argument: *mut c_void) -> ! {
    let mut tool: libc::pid_t = 0;
    loop {
        // SAFETY: raw system calls on the init's descriptors and signals.
        match unsafe { init::wait(context.signal_fd, context.go_fd) } {
            init::Wake::Signal(libc::SIGCHLD) => {
                // SAFETY: as above.
                if tool != 0 && unsafe { init::reap_children(tool, context.status_fd) } {
                    tool = 0;
                } else if tool == 0 {
                    // Orphans of an earlier program, killed with its cgroup.
                    // SAFETY: as above.
                    unsafe { init::reap_children(0, context.status_fd) };
                }
            }
            init::Wake::Signal(signal) => {
                if tool != 0 {
                    // SAFETY: as above.
                    unsafe { init::forward(tool, signal) };
                }
            }
            // One program at a time: a go while one runs is the executor's
            // mistake, and is dropped.
            init::Wake::Go if tool != 0 => {}
            init::Wake::Go => {
                // SAFETY: as above; the executor stored the program's plan
                // before the go and keeps it until the handshake.
                tool = unsafe { start_tool(context, argument) };
                let byte = if tool > 0 { STARTED } else { FAILED };
                tool = tool.max(0);
                // SAFETY: as above.
                unsafe { init::write_byte(context.status_fd, byte) };
            }
            // SAFETY: as above.
            init::Wake::Closed => unsafe { init::exit(0) },
        }
    }
}

/// Starts the program as the init's child (PID 2 for the first), sharing the
/// memory until its `execve` on a stack of its own, while this process is
/// suspended. Returns its pid, or 0 when it failed before `execve` (it is
/// reaped; the step and errno are in the context) or could not be cloned.
///
/// # Safety
/// Only in the init.
unsafe fn start_tool(context: &ChildContext, argument: *mut c_void) -> libc::pid_t {
    // SAFETY: tool_main only makes system calls on the context.
    unsafe {
        let tool = libc::clone(
            tool_main,
            context.tool_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            argument,
        );
        if tool < 0 {
            context
                .errno
                .store(*libc::__errno_location(), Ordering::Release);
            context
                .failed_stage
                .store(Stage::InitClone.code(), Ordering::Release);
            return 0;
        }
        if context.failed_stage.load(Ordering::Acquire) != 0 {
            let mut status = 0;
            init::syscall4(
                libc::SYS_wait4,
                tool as usize,
                ptr::from_mut(&mut status) as usize,
                libc::__WALL as usize,
                0,
            );
            return 0;
        }
        tool
    }
}

/// Records the failed step and its errno where the parent reads them, then exits.
fn fail(context: &ChildContext, stage: Stage) -> c_int {
    // SAFETY: __errno_location is async-signal-safe and thread-local;
    // _exit never returns.
    unsafe {
        context
            .errno
            .store(*libc::__errno_location(), Ordering::Release);
        context.failed_stage.store(stage.code(), Ordering::Release);
        libc::_exit(127)
    }
}

/// The program's process, from its set-up to `execve`. Only system calls.
extern "C" fn tool_main(argument: *mut c_void) -> c_int {
    // SAFETY: as in child_main: the context outlives the program's set-up.
    let context = unsafe { &*argument.cast::<ChildContext>() };
    // SAFETY: both plans outlive the program's set-up (see ChildContext).
    let (setup, plan) = unsafe { (&*context.setup, &*context.tool.load(Ordering::Acquire)) };

    // SAFETY: every call below is a plain system call on descriptors and
    // buffers prepared by the parent; none allocates or takes a lock.
    unsafe {
        // Joining the cgroups comes first, so every process the program ever
        // starts is born inside them. The init stays out of them: it shares
        // the executor's memory, and the memory cgroup's OOM killer kills
        // every process sharing its victim's memory.
        for &procs in &plan.cgroup_procs {
            if libc::write(procs, b"0".as_ptr().cast(), 1) != 1 {
                return fail(context, Stage::Cgroup);
            }
        }
        // C1 step 3: session, signals, limits, descriptors.
        // Under an init, a process group of its own in the init's session,
        // as a shell makes for a job: the init left toolsmith's session
        // already, and a session of its own would also cost an autogroup of
        // the scheduler's, created and joined on the call's path. Without
        // one, a new session leaves toolsmith's session and terminal.
        let own_group = if setup.with_init {
            libc::setpgid(0, 0) == 0
        } else {
            libc::setsid() >= 0
        };
        if !own_group {
            return fail(context, Stage::Setsid);
        }
        // Dispositions the executor set to "ignore" would survive execve.
        // The raw system call also resets the signals glibc reserves for
        // itself (32 and 33), which its sigaction wrapper refuses to touch.
        // Errors for SIGKILL and SIGSTOP are expected and harmless. Under an
        // init there is nothing to reset: the init reset every disposition
        // before any program existed and never sets one, and this process
        // inherited them (64 system calls fewer per call).
        if !setup.with_init {
            let default_action = KernelSigaction::default();
            for signal in 1..NSIG {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    &raw const default_action,
                    ptr::null_mut::<KernelSigaction>(),
                    size_of::<u64>(),
                );
            }
        }
        for limit in &plan.rlimits {
            let value = libc::rlimit {
                rlim_cur: limit.soft,
                rlim_max: limit.hard,
            };
            // nix's `Resource` is the C library's own number: `__rlimit_resource_t`
            // on glibc, `int` on musl.
            if libc::setrlimit(limit.resource as _, &value) != 0 {
                return fail(context, Stage::Rlimit);
            }
        }
        for (target, &source) in plan.stdio.iter().enumerate() {
            if libc::dup2(source, target as c_int) < 0 {
                return fail(context, Stage::Stdio);
            }
        }
        // The report pipe's end is 4 or above, so dup2 always makes a new descriptor 3,
        // which (unlike its close-on-exec source) survives execve.
        let first_closed: u32 = match plan.report {
            Some(report) => {
                if libc::dup2(report, crate::command::REPORT_FD) < 0 {
                    return fail(context, Stage::Stdio);
                }
                4
            }
            None => 3,
        };
        if let Err(stage) = confine(setup, plan) {
            return fail(context, stage);
        }
        // C1 step 6: close inherited descriptors, chdir, unmask, execve.
        if libc::syscall(libc::SYS_close_range, first_closed, u32::MAX, 0_u32) != 0
            && !close_fds_slowly(first_closed as c_int)
        {
            return fail(context, Stage::CloseFds);
        }
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            return fail(context, Stage::Chdir);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut()) != 0 {
            return fail(context, Stage::Sigmask);
        }
        libc::execve(
            plan.program.as_ptr(),
            plan.argv_ptrs.as_ptr(),
            plan.envp_ptrs.as_ptr(),
        );
        fail(context, Stage::Execve)
    }
}

/// The program's confinement, right before its descriptors are closed:
/// identity and capabilities (C1 step 4), then `PR_SET_NO_NEW_PRIVS`,
/// Landlock and, without an init, the filter, last (C1 step 5). The failed
/// step, with `errno` as it left it.
///
/// # Safety
/// In the program's process before `execve`: raw system calls only.
unsafe fn confine(setup: &InitPlan, plan: &SpawnPlan) -> Result<(), Stage> {
    if let Some(privileges) = &plan.privileges {
        // SAFETY: as the caller's.
        unsafe { privileges::drop_privileges(privileges, setup.bounding.is_some()) }.map_err(
            |step| match step {
                PrivilegeStep::Bounding => Stage::BoundingSet,
                PrivilegeStep::Identity => Stage::Identity,
                PrivilegeStep::Capabilities => Stage::Capabilities,
            },
        )?;
    }
    // Landlock needs no_new_privs (without CAP_SYS_ADMIN) and its ruleset
    // descriptor, which the caller's next step closes.
    // SAFETY: one prctl.
    if !unsafe { seccomp::set_no_new_privs() } {
        return Err(Stage::NoNewPrivs);
    }
    if let Some(ruleset) = plan.landlock
        // SAFETY: a ruleset descriptor the parent opened.
        && unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0 as libc::c_ulong) }
            != 0
    {
        return Err(Stage::Landlock);
    }
    // With an init, the init installed the filter and this process inherited it.
    if !setup.with_init
        && let Some(filter) = &setup.seccomp
        // SAFETY: a program the parent built, which outlives the call.
        && !unsafe { install_filter(setup, filter) }
    {
        return Err(Stage::Seccomp);
    }
    Ok(())
}

/// Installs the run's filter. A filter that sends calls to the supervisor
/// (`connect` under `seccomp::Sockets::ProxiedUnix`, the calls that make a
/// name under supervised creations) is installed with a listener, which goes
/// to the executor on the notify channel (the egress channel, after the
/// proxy's listener, or a channel of its own), and is closed here before any
/// program of the run exists (a program holding it could answer its own
/// notifications).
///
/// # Safety
/// In the clone child: raw system calls only.
unsafe fn install_filter(setup: &InitPlan, filter: &libc::sock_fprog) -> bool {
    let Some(channel) = setup.notify_channel else {
        // SAFETY: as the caller's.
        return unsafe { seccomp::install(filter) };
    };
    // SAFETY: as the caller's; the listener is ours to send and close.
    unsafe {
        let listener = seccomp::install_with_listener(filter);
        if listener < 0 {
            return false;
        }
        let sent = crate::egress::send_descriptor(channel, listener);
        libc::close(listener);
        sent
    }
}

/// Makes every mount private (so nothing the child mounts propagates to the
/// host), then mounts a fresh `/proc` for the calling process's PID
/// namespace over the old one, with [`PROC_OPTIONS`]. For a child in new
/// PID and mount namespaces.
///
/// # Safety
/// Async-signal-safe: only `mount`.
pub(crate) unsafe fn mount_private_proc() -> bool {
    // SAFETY: mount with static NUL-terminated strings.
    unsafe {
        libc::mount(
            ptr::null(),
            c"/".as_ptr(),
            ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            ptr::null(),
        ) == 0
            && mount_proc()
    }
}

/// Mounts a fresh `/proc` on `/proc` with [`PROC_OPTIONS`], or, on a kernel
/// older than 5.8, which does not know them, without them and with `/proc/1`
/// (toolsmith's init in a private PID namespace) behind an empty read-only
/// `tmpfs`, so that nothing under it shows or changes toolsmith there either.
///
/// # Safety
/// Async-signal-safe: only `mount`, and an atomic load.
pub(crate) unsafe fn mount_proc() -> bool {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let mount = |options: *const libc::c_char| {
        // SAFETY: mount with static NUL-terminated strings.
        unsafe {
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                flags,
                options.cast(),
            ) == 0
        }
    };
    let hidepid = !PROC_WITHOUT_HIDEPID.load(std::sync::atomic::Ordering::Relaxed);
    if hidepid && mount(PROC_OPTIONS.as_ptr()) {
        return true;
    }
    // SAFETY: mount with static NUL-terminated strings.
    mount(ptr::null())
        && unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                c"/proc/1".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"size=0,nr_inodes=1,mode=0555".as_ptr().cast(),
            ) == 0
        }
}

/// Set (before any run) when `hidepid` is turned off by
/// `TOOLSMITH_DISABLE_FEATURES=hidepid`, to test the fallback of kernels
/// older than 5.8; the clone child reads it (it shares the executor's memory).
pub(crate) static PROC_WITHOUT_HIDEPID: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The options of a run's `/proc`: `hidepid=4` (`ptraceable`, Linux 5.8)
/// shows a process only to those who may ptrace it, with no exemption for a
/// group (`hidepid=2` exempts the group of `gid=`, root's by default, which
/// a uid-0 tool is in). toolsmith's init shares toolsmith's memory and
/// descriptor table, and is not dumpable: its directory, `/proc/1`, is
/// invisible to a tool without `CAP_SYS_PTRACE`, and with it every file
/// that would show or change toolsmith (the command line, the OOM score
/// shared by every process of the memory, the coredump filter, `clear_refs`,
/// the descriptors). The tool's own processes stay visible to it.
pub(crate) const PROC_OPTIONS: &std::ffi::CStr = c"hidepid=4";

/// Writes `data` to the file at `path` with one `write`; true on success.
///
/// # Safety
/// Async-signal-safe: only `open`, `write` and `close`.
pub(crate) unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> bool {
    // SAFETY: path is NUL-terminated; data is a valid buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let written = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        usize::try_from(written).is_ok_and(|written| written == data.len())
    }
}

/// Closes descriptors `first` and up one by one, for kernels without `close_range`.
///
/// # Safety
/// Async-signal-safe: only `getrlimit` and `close`.
unsafe fn close_fds_slowly(first: c_int) -> bool {
    // SAFETY: plain system calls on our own descriptor table.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return false;
        }
        let highest = c_int::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
        for fd in first..highest {
            libc::close(fd);
        }
        true
    }
}
