//! Process handles that cannot outlive their process: pidfds, and reaping.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::Termination;
use crate::init::StatusRecord;

/// Opens a pidfd for `pid`, or `None` when the process is already gone.
pub(crate) fn open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0_u32) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel returned a fresh descriptor, which we now own.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sends `signal` to the process behind `pidfd`. A process that has already
/// exited is not an error: there is nothing left to signal.
pub(crate) fn send_signal(pidfd: &OwnedFd, signal: libc::c_int) {
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0_u32,
        );
    }
}

/// How a reaped process ended, with the resources it and the children it
/// waited for used.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reaped {
    pub(crate) termination: Termination,
    pub(crate) cpu_time: Duration,
    pub(crate) max_rss_bytes: u64,
}

/// Reaps `pid`, our child, if it has exited; `Ok(None)` while it runs.
pub(crate) fn try_reap(pid: libc::pid_t) -> io::Result<Option<Reaped>> {
    reap(pid, libc::WNOHANG)
}

/// Reaps `pid`, our child, waiting for it to exit.
pub(crate) fn reap_blocking(pid: libc::pid_t) -> io::Result<Option<Reaped>> {
    reap(pid, 0)
}

/// How many [`reap_later`] jobs the reaper thread has not finished, and its
/// signal when that number drops.
static REAPS_PENDING: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// Waits, up to `budget`, until the reaper thread has finished every job
/// handed to it: what a job drops after its reap (a run's TMPDIR) is gone
/// then. For an executor being dropped, whose process may exit next.
pub(crate) fn wait_reaped(budget: Duration) {
    let (pending, finished) = &REAPS_PENDING;
    let pending = pending
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let _waited = finished.wait_timeout_while(pending, budget, |pending| *pending > 0);
}

/// Reaps `pid`, our child, on the reaper thread, and drops `keep` after it:
/// what the process may still use until it is gone (an init's stack), and
/// what is cleaned up once it is (a run's TMPDIR).
pub(crate) fn reap_later(pid: libc::pid_t, keep: Box<dyn std::fmt::Debug + Send>) {
    type Job = (libc::pid_t, Box<dyn std::fmt::Debug + Send>);
    static REAPER: std::sync::Mutex<Option<std::sync::mpsc::Sender<Job>>> =
        std::sync::Mutex::new(None);
    let mut reaper = REAPER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if reaper.is_none() {
        let (sender, jobs) = std::sync::mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("toolsmith-reaper".to_owned())
            .spawn(move || {
                for (pid, keep) in jobs {
                    finish_reap(pid, keep);
                    let (pending, finished) = &REAPS_PENDING;
                    let mut pending = pending
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    *pending = pending.saturating_sub(1);
                    finished.notify_all();
                }
            });
        if started.is_ok() {
            *reaper = Some(sender);
        }
    }
    let job = (pid, keep);
    let job = match reaper.as_ref() {
        Some(sender) => {
            *REAPS_PENDING
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) += 1;
            match sender.send(job) {
                Ok(()) => return,
                Err(std::sync::mpsc::SendError(job)) => {
                    let mut pending = REAPS_PENDING
                        .0
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    *pending = pending.saturating_sub(1);
                    job
                }
            }
        }
        None => job,
    };
    // No reaper thread: reap here.
    finish_reap(job.0, job.1);
}

fn finish_reap(pid: libc::pid_t, keep: Box<dyn std::fmt::Debug + Send>) {
    match reap_blocking(pid) {
        Ok(_) => drop(keep),
        Err(error) => {
            tracing::warn!(pid, %error, "could not reap a finished run's init");
            // It may still run on memory `keep` holds.
            std::mem::forget(keep);
        }
    }
}

fn reap(pid: libc::pid_t, flags: libc::c_int) -> io::Result<Option<Reaped>> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data, filled by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 on our own child with valid out-pointers.
        let result = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if result == 0 {
            return Ok(None);
        }
        if result < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        break;
    }
    let to_duration = |time: libc::timeval| {
        Duration::from_secs(u64::try_from(time.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(time.tv_usec).unwrap_or(0))
    };
    Ok(Some(Reaped {
        termination: termination(status),
        cpu_time: to_duration(usage.ru_utime) + to_duration(usage.ru_stime),
        max_rss_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
    }))
}

impl Reaped {
    /// The program's end as toolsmith's init reported it.
    pub(crate) fn from_record(record: StatusRecord) -> Reaped {
        Reaped {
            termination: termination(record.status),
            cpu_time: Duration::from_micros(u64::try_from(record.cpu_micros).unwrap_or(0)),
            max_rss_bytes: u64::try_from(record.max_rss_kib)
                .unwrap_or(0)
                .saturating_mul(1024),
        }
    }
}

fn termination(status: libc::c_int) -> Termination {
    if libc::WIFSIGNALED(status) {
        Termination::Signaled(libc::WTERMSIG(status))
    } else {
        Termination::Exited(libc::WEXITSTATUS(status))
    }
}
