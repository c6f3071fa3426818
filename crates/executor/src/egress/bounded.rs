//! The `connect` the Unix socket supervisor (`unix.rs`) makes for a tool,
//! bounded by a timer of the supervisor's own thread, whatever the tool does
//! to its socket.
//!
//! The supervisor connects the tool's socket itself (the same open file), so
//! what the kernel reads to decide how long a blocking connect waits is the
//! tool's to change, at any moment and from any of its threads: `O_NONBLOCK`
//! and `SO_SNDTIMEO`. The bound used to be the socket's send timeout, set only
//! when the socket had none: a tool that gave its socket a three-year timeout
//! and connected to a granted server that never accepts held the supervisor
//! for three years, and its call with it (the run never returned, past its
//! deadline). No setting of the socket can bound a connect the tool may
//! rewrite, so the bound is not the socket's: before each connect the
//! supervisor arms a POSIX timer of its own thread that sends it
//! [`signal`] after [`CONNECT_TIMEOUT`], and again every 10 ms until the
//! connect has returned. The signal's handler does nothing and is installed
//! without `SA_RESTART`, so a connect still waiting ends with `EINTR`, which
//! the tool receives as `ETIMEDOUT`. The supervisor thread blocks every other
//! signal ([`prepare_thread`]), so nothing else ends its connects early.
//! A thread that cannot be prepared, or a timer that cannot be armed, makes no
//! connect at all (fail closed).
//!
//! At the run's end ([`Stopper`]) no connect starts any more, and the one in
//! progress is ended at once: the supervisor signals its thread through a
//! pidfd of that very thread (`PIDFD_THREAD`, Linux 6.9), so a signal can
//! never reach another thread that took its id; without it, the run's end
//! waits for the connect's own bound.

use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a connect the supervisor makes may wait.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// After [`CONNECT_TIMEOUT`], the timer fires again this often, so that a
/// signal that came just before the connect began cannot leave it waiting.
const REPEAT: Duration = Duration::from_millis(10);

/// The real-time signal that ends a supervisor's connect: `SIGRTMIN + 6`.
/// toolsmith uses it for nothing else; an embedding program must not either.
pub(crate) fn signal() -> libc::c_int {
    libc::SIGRTMIN() + 6
}

extern "C" fn nothing(_signal: libc::c_int) {}

fn last_errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Installs the do-nothing handler of [`signal`] (once per process), without
/// `SA_RESTART`, so that it ends a waiting connect.
fn install() -> Result<(), i32> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // SAFETY: a zeroed sigaction is valid; the fields are set below.
        let mut action: libc::sigaction = unsafe { zeroed() };
        action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = 0;
        // SAFETY: sigemptyset on our mask; sigaction reads `action`.
        let installed = unsafe {
            libc::sigemptyset(&raw mut action.sa_mask);
            libc::sigaction(signal(), &raw const action, std::ptr::null_mut())
        };
        if installed == 0 {
            Ok(())
        } else {
            Err(last_errno())
        }
    })
}

/// Makes the calling thread (the supervisor's) one that only [`signal`]
/// interrupts: its handler installed, every other signal blocked on it.
pub(crate) fn prepare_thread() -> Result<(), i32> {
    install()?;
    // SAFETY: a zeroed sigset_t is filled by sigfillset before use.
    let mut mask: libc::sigset_t = unsafe { zeroed() };
    // SAFETY: the set is ours; pthread_sigmask reads it.
    let error = unsafe {
        libc::sigfillset(&raw mut mask);
        libc::sigdelset(&raw mut mask, signal());
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const mask, std::ptr::null_mut())
    };
    if error == 0 { Ok(()) } else { Err(error) }
}

/// A POSIX timer that sends [`signal`] to the calling thread; deleted on drop.
struct Timer(libc::timer_t);

impl Timer {
    fn arm() -> Result<Timer, i32> {
        let timespec = |duration: Duration| libc::timespec {
            tv_sec: libc::time_t::try_from(duration.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(duration.subsec_nanos() as i32),
        };
        // SAFETY: a zeroed sigevent is valid; the fields are set below.
        let mut event: libc::sigevent = unsafe { zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = signal();
        // SAFETY: gettid cannot fail.
        event.sigev_notify_thread_id = unsafe { libc::gettid() };
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: timer_create reads `event` and writes `timer`.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &raw mut event, &raw mut timer) } != 0
        {
            return Err(last_errno());
        }
        let timer = Timer(timer);
        let schedule = libc::itimerspec {
            it_interval: timespec(REPEAT),
            it_value: timespec(CONNECT_TIMEOUT),
        };
        // SAFETY: our timer; timer_settime reads `schedule`.
        if unsafe { libc::timer_settime(timer.0, 0, &raw const schedule, std::ptr::null_mut()) }
            != 0
        {
            return Err(last_errno());
        }
        Ok(timer)
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: our timer, deleted once; a signal it queued before is
        // delivered (to the do-nothing handler) when this call returns.
        unsafe { libc::timer_delete(self.0) };
    }
}

/// Ends a supervisor's connects when its run ends.
#[derive(Debug, Default)]
pub(crate) struct Stopper {
    stopping: AtomicBool,
    /// A pidfd of the supervisor thread itself.
    thread: OnceLock<OwnedFd>,
}

impl Stopper {
    /// Remembers the calling thread (the supervisor's), to interrupt it later.
    pub(crate) fn register(&self) {
        const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;
        // SAFETY: pidfd_open returns a fresh descriptor or -1; gettid cannot fail.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::gettid(), PIDFD_THREAD) };
        if let Ok(fd) = RawFd::try_from(fd)
            && fd >= 0
        {
            // SAFETY: fresh and ours.
            let _first = self.thread.set(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }

    /// From now on no connect starts.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Ends the connect in progress, if any (sent until the thread has ended:
    /// a signal that comes just before a connect begins does not end it).
    pub(crate) fn interrupt(&self) {
        if let Some(thread) = self.thread.get() {
            // SAFETY: our pidfd; no siginfo. ESRCH: the thread is gone.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    thread.as_raw_fd(),
                    signal(),
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
        }
    }
}

/// Connects `socket` to `address` on the calling (prepared) thread and
/// returns 0 or the errno: `ETIMEDOUT` when it waited [`CONNECT_TIMEOUT`] or
/// the run ended meanwhile, `EAGAIN` (and no connect) when the timer cannot
/// be armed.
pub(crate) fn connect_bounded(socket: &OwnedFd, address: &[u8], stopper: &Stopper) -> i32 {
    if stopper.stopping.load(Ordering::SeqCst) {
        return libc::ETIMEDOUT;
    }
    let Ok(timer) = Timer::arm() else {
        return libc::EAGAIN;
    };
    let length = libc::socklen_t::try_from(address.len()).unwrap_or(0);
    // SAFETY: the address buffer has `length` bytes.
    let connected = unsafe { libc::connect(socket.as_raw_fd(), address.as_ptr().cast(), length) };
    let errno = if connected == 0 { 0 } else { last_errno() };
    drop(timer);
    // Every other signal is blocked on this thread: EINTR is the timer's.
    if errno == libc::EINTR {
        libc::ETIMEDOUT
    } else {
        errno
    }
}
