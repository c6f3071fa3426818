//! The supervisor of a run's Unix socket grants (`network = ["unix:/path"]`).
//!
//! The run's filter (`seccomp::Sockets::ProxiedUnix`) lets it make Unix
//! stream and seqpacket sockets and sends every `connect` here, through the
//! listener of a seccomp user notification. The filter cannot read the
//! address, and letting the kernel continue a checked call is unsound: the
//! kernel reads the address (and looks the descriptor up) again, after any
//! other thread of the tool has changed them (`seccomp_unotify(2)`). So the
//! supervisor never continues a call. It copies the address once from the
//! tool's memory, checks that the notification is still live (so the memory
//! and the descriptor it takes were the caller's), takes the caller's socket
//! with `pidfd_getfd` (the same open file), and decides on its own copy by
//! the family of the socket it holds, which no thread of the tool can change:
//!
//! - a Unix socket is connected, by toolsmith, only to a path the grant names
//!   byte for byte, opened in toolsmith's view without crossing a symbolic
//!   link and connected through that descriptor (`/proc/self/fd/N`), so no
//!   name the tool controls (a symlink in its directory, `/proc/self/root`,
//!   an abstract name) reaches another socket; anything else is refused with
//!   `EACCES` and recorded as a denial;
//! - any other socket (IPv4, IPv6, netlink: the only other families the
//!   filter lets the run make) is connected to the supervisor's copy of the
//!   address. A socket stays in the network namespace it was made in, and the
//!   run's has nothing but loopback and the proxy's port, so this reaches
//!   exactly what the call would have reached without the supervisor.
//!
//! The supervisor replies with the result of its own `connect`, which a timer
//! of its own thread bounds by
//! [`CONNECT_TIMEOUT`](super::bounded::CONNECT_TIMEOUT) whatever the tool does to
//! its socket (`bounded.rs`), so no tool can hold the supervisor.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use super::bounded::{Stopper, connect_bounded, prepare_thread};
use super::identity::{Identity, Switch, as_caller, host_proc, proc_status};
use crate::creations::{Creations, WriteAttempt};
use crate::{EgressEvent, EgressProtocol, EgressVerdict, Error};

/// At most this many connects of one run are recorded (each is still decided).
const MAX_RECORDS: usize = 4096;

/// `sizeof(struct sockaddr_storage)`: the kernel refuses longer addresses.
const MAX_ADDRESS: usize = size_of::<libc::sockaddr_storage>();

/// Whether this kernel has what the supervisor needs: user notifications
/// (Linux 5.0), `pidfd_getfd` (5.6), `openat2` (5.6) and the notification's
/// `ADDFD` (5.9); the reason when not.
pub(crate) fn supported() -> Result<(), String> {
    static SUPPORTED: OnceLock<Result<(), String>> = OnceLock::new();
    SUPPORTED.get_or_init(probe).clone()
}

fn probe() -> Result<(), String> {
    let action = libc::SECCOMP_RET_USER_NOTIF;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32.
    let notify = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0 as libc::c_uint,
            std::ptr::from_ref(&action),
        )
    };
    if notify != 0 {
        return Err(format!(
            "seccomp user notifications are unavailable (Linux 5.0): {}",
            io::Error::last_os_error()
        ));
    }
    // SECCOMP_IOCTL_NOTIF_ADDFD (Linux 5.9) has no probe short of a listener.
    if kernel_release() < (5, 9) {
        return Err("seccomp's ADDFD is unavailable (Linux 5.9)".to_owned());
    }
    for (call, name) in [
        (libc::SYS_pidfd_getfd, "pidfd_getfd (Linux 5.6)"),
        (libc::SYS_openat2, "openat2 (Linux 5.6)"),
    ] {
        // SAFETY: invalid arguments: the call fails without touching memory.
        let result = unsafe { libc::syscall(call, -1, 0_usize, 0_usize, 0_usize) };
        if result < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            return Err(format!("{name} is unavailable"));
        }
    }
    Ok(())
}

/// The running kernel's major and minor version (0.0 when unknown).
fn kernel_release() -> (u32, u32) {
    // SAFETY: uname fills a zeroed utsname.
    let mut name: libc::utsname = unsafe { zeroed() };
    // SAFETY: as above.
    if unsafe { libc::uname(&raw mut name) } != 0 {
        return (0, 0);
    }
    let release: String = name
        .release
        .iter()
        .take_while(|&&byte| byte != 0)
        .map(|&byte| byte as u8 as char)
        .collect();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|part| part.parse().ok());
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// A running supervisor; [`UnixSupervisor::finish`] stops it and returns its events.
#[derive(Debug)]
pub(super) struct UnixSupervisor {
    stop: OwnedFd,
    thread: JoinHandle<()>,
    events: Arc<Mutex<Vec<EgressEvent>>>,
    writes: Arc<Mutex<Vec<WriteAttempt>>>,
    stopper: Arc<Stopper>,
}

impl UnixSupervisor {
    /// Answers the notifications of `listener` on a thread of its own: the
    /// `connect`s of a run with Unix socket grants (`granted`), and the calls
    /// that make a name of a run with supervised creations (`creations/`).
    pub(crate) fn start(
        listener: OwnedFd,
        granted: Vec<PathBuf>,
        creations: Option<Arc<Creations>>,
    ) -> Result<Self, Error> {
        // Opened here, in toolsmith's root, for the supervisor's reads of /proc.
        if host_proc().is_none() {
            return Err(Error::Sys {
                call: "opening /proc (supervisor)",
                source: io::Error::last_os_error(),
            });
        }
        // SAFETY: eventfd returns a fresh descriptor or -1.
        let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if stop < 0 {
            return Err(Error::Sys {
                call: "eventfd (Unix socket supervisor)",
                source: io::Error::last_os_error(),
            });
        }
        // SAFETY: fresh and ours.
        let stop = unsafe { OwnedFd::from_raw_fd(stop) };
        let stop_copy = stop.try_clone().map_err(|source| Error::Sys {
            call: "dup (Unix socket supervisor)",
            source,
        })?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let writes = Arc::new(Mutex::new(Vec::new()));
        let stopper = Arc::new(Stopper::default());
        let supervisor = Supervisor {
            creations,
            writes: Arc::clone(&writes),
            host: None,
            run_view: std::cell::RefCell::new(None),
            in_run_view: std::cell::Cell::new(false),
            proc: None,
            listener,
            stop: stop_copy,
            granted: granted
                .iter()
                .map(|path| path.as_os_str().as_bytes().to_vec())
                .collect(),
            events: Arc::clone(&events),
            own: None,
            stuck: std::cell::Cell::new(false),
            stopper: Arc::clone(&stopper),
        };
        let thread = std::thread::Builder::new()
            .name("unix-grants".to_owned())
            .spawn(move || supervisor.serve())
            .map_err(|source| Error::Sys {
                call: "spawning the Unix socket supervisor",
                source,
            })?;
        Ok(UnixSupervisor {
            stop,
            thread,
            events,
            writes,
            stopper,
        })
    }

    /// Stops answering (a call still waiting then fails with `ENOSYS`, as
    /// the kernel answers a notification no one listens to) and returns
    /// every connect the run's Unix sockets asked for.
    pub(crate) async fn finish(self) -> (Vec<EgressEvent>, Vec<WriteAttempt>) {
        self.stopper.stop();
        let one = 1_u64;
        // SAFETY: an eventfd takes an 8-byte write.
        unsafe { libc::write(self.stop.as_raw_fd(), (&raw const one).cast(), 8) };
        let (thread, stopper) = (self.thread, Arc::clone(&self.stopper));
        // A connect in progress is ended at once (bounded.rs), not at its bound.
        let _joined = tokio::task::spawn_blocking(move || {
            // The thread sees the eventfd at once unless a connect holds it;
            // a short pause keeps the call's end from waiting long for it.
            while !thread.is_finished() {
                stopper.interrupt();
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            thread.join()
        })
        .await;
        fn take<T>(held: &Mutex<Vec<T>>) -> Vec<T> {
            std::mem::take(&mut *held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
        }
        (take(&self.events), take(&self.writes))
    }
}

/// The supervisor's side: the listener, the granted paths as bytes, the events.
pub(super) struct Supervisor {
    /// What the run may not create, when its creations are supervised.
    creations: Option<Arc<Creations>>,
    pub(super) writes: Arc<Mutex<Vec<WriteAttempt>>>,
    /// toolsmith's mount namespace and root, to come back to after a creation
    /// in the caller's (`creating.rs`).
    pub(super) host: Option<super::creating::Place>,
    /// The run's mount namespace and root, opened at its first creation: every
    /// process of a run shares them (the filter refuses `setns`, `chroot`,
    /// `pivot_root` and new mount namespaces).
    pub(super) run_view: std::cell::RefCell<Option<super::creating::Place>>,
    /// The thread is in the run's view (it stays there between creations, and
    /// goes back to toolsmith's for a Unix socket's connect).
    pub(super) in_run_view: std::cell::Cell<bool>,
    /// toolsmith's `/proc`, to read the callers' and name descriptors.
    pub(super) proc: Option<OwnedFd>,
    listener: OwnedFd,
    stop: OwnedFd,
    granted: Vec<Vec<u8>>,
    events: Arc<Mutex<Vec<EgressEvent>>>,
    /// The supervisor thread's own identity, taken back after each connect.
    own: Option<Identity>,
    /// The thread could not take its own identity back: it answers no more.
    pub(super) stuck: std::cell::Cell<bool>,
    stopper: Arc<Stopper>,
}

impl Supervisor {
    fn serve(mut self) {
        // Only its own timer may interrupt this thread's connects: without
        // that bound no connect is made (the listener closes, and every
        // waiting connect fails with ENOSYS).
        if prepare_thread().is_err() {
            return;
        }
        self.stopper.register();
        // Read on this thread: the identity the connects switch from and back to.
        self.own = Identity::own().ok();
        if self.creations.is_some() {
            self.host = super::creating::Place::own();
            self.proc = host_proc().and_then(|proc| {
                // SAFETY: the process-wide descriptor outlives this thread; this is a copy.
                unsafe { std::os::fd::BorrowedFd::borrow_raw(proc) }
                    .try_clone_to_owned()
                    .ok()
            });
        }
        while !self.stuck.get() {
            let mut polled = [
                libc::pollfd {
                    fd: self.listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.stop.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two pollfds on the stack.
            let ready = unsafe { libc::poll(polled.as_mut_ptr(), 2, -1) };
            if ready < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return;
            }
            if polled[1].revents != 0 {
                return;
            }
            if polled[0].revents & libc::POLLIN == 0 {
                // POLLHUP: every process of the run is gone.
                return;
            }
            // SAFETY: the kernel requires a zeroed notification.
            let mut notification: libc::seccomp_notif = unsafe { zeroed() };
            // SAFETY: RECV fills one seccomp_notif.
            let received = unsafe {
                libc::ioctl(
                    self.listener.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_RECV,
                    &raw mut notification,
                )
            };
            if received != 0 {
                // ENOENT: the caller went away between poll and receive.
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::ENOENT | libc::EINTR) => continue,
                    _ => return,
                }
            }
            let answer = match (
                &self.creations,
                crate::creations::shape(i64::from(notification.data.nr), notification.data.args),
            ) {
                (Some(creations), Some(shape)) => {
                    self.create(&Arc::clone(creations), &notification, &shape)
                }
                _ => self.answer(&notification).map(Answer::Errno),
            };
            match answer {
                Some(Answer::Errno(errno)) => self.reply(notification.id, errno),
                Some(Answer::Value(value)) => self.send(notification.id, value, 0),
                Some(Answer::File(file, cloexec)) => {
                    self.hand_over(notification.id, &file, cloexec)
                }
                None => {}
            }
        }
    }

    /// Sends a successful result.
    fn send(&self, id: u64, val: i64, error: i32) {
        let response = libc::seccomp_notif_resp {
            id,
            val,
            error,
            flags: 0,
        };
        // SAFETY: SEND reads one seccomp_notif_resp; ENOENT leaves nothing to do.
        unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &raw const response,
            )
        };
    }

    /// Installs `file` in the caller's descriptor table and answers with its
    /// number, in one step (`SECCOMP_ADDFD_FLAG_SEND`, Linux 5.14), or in two.
    fn hand_over(&self, id: u64, file: &OwnedFd, cloexec: bool) {
        let mut add = libc::seccomp_notif_addfd {
            id,
            flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
            srcfd: file.as_raw_fd() as u32,
            newfd: 0,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: ADDFD reads one seccomp_notif_addfd.
        let added = unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                &raw const add,
            )
        };
        if added >= 0 || last_errno() != libc::EINVAL {
            return;
        }
        add.flags = 0;
        // SAFETY: as above.
        let added = unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                &raw const add,
            )
        };
        if added >= 0 {
            self.send(id, i64::from(added), 0);
        } else {
            self.reply(id, last_errno());
        }
    }

    /// Sends the result of the caller's call: 0, or `-1` with `errno`.
    fn reply(&self, id: u64, errno: i32) {
        self.send(id, if errno == 0 { 0 } else { -1 }, -errno);
    }

    /// Whether the notification `id` still waits for its answer: its caller
    /// is alive and still in the call, so what was read of it was its own.
    pub(super) fn still_waiting(&self, id: u64) -> bool {
        // SAFETY: ID_VALID reads one u64.
        unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &raw const id,
            ) == 0
        }
    }

    /// The errno the caller's `connect` returns (0 for success), or `None`
    /// when the call ended before the answer.
    fn answer(&self, notification: &libc::seccomp_notif) -> Option<i32> {
        if i64::from(notification.data.nr) != libc::SYS_connect {
            return Some(libc::ENOSYS);
        }
        // A connect opens granted paths in toolsmith's view.
        if !self.leave_run_view() {
            return Some(libc::EACCES);
        }
        let [descriptor, address_at, length, ..] = notification.data.args;
        let Ok(length) = usize::try_from(length as u32 as i32) else {
            return Some(libc::EINVAL);
        };
        if length > MAX_ADDRESS {
            return Some(libc::EINVAL);
        }
        let pid = notification.pid;
        let address = match read_memory(pid, address_at, length) {
            Ok(address) => address,
            Err(errno) => return self.still_waiting(notification.id).then_some(errno),
        };
        let caller = Identity::of_thread(pid);
        let process = open_pidfd(pid);
        if !self.still_waiting(notification.id) {
            return None;
        }
        let process = match process {
            Ok(process) => process,
            Err(errno) => return Some(errno),
        };
        let socket = match take_descriptor(&process, descriptor as u32 as i32) {
            Ok(socket) => socket,
            Err(errno) => return Some(errno),
        };
        let family = match socket_family(&socket) {
            Ok(family) => family,
            Err(errno) => return Some(errno),
        };
        if family != libc::AF_UNIX {
            // With the caller's identity too: a connect can need a
            // capability (a netlink socket's to a group or port), which
            // toolsmith must not lend.
            return Some(
                self.as_caller(&caller, || {
                    connect_bounded(&socket, &address, &self.stopper)
                })
                .unwrap_or_else(|(errno, _)| errno),
            );
        }
        Some(self.connect_unix(&socket, &address, caller))
    }

    /// Runs `action` on this thread with the caller's identity
    /// (`identity.rs`); the errno and reason when that cannot be done.
    pub(super) fn as_caller<T>(
        &self,
        caller: &Result<Identity, i32>,
        action: impl FnOnce() -> T,
    ) -> Result<T, (i32, String)> {
        let (Ok(caller), Some(own)) = (caller, &self.own) else {
            return Err((libc::EACCES, "the caller's identity is unknown".to_owned()));
        };
        as_caller(caller, own, action).map_err(|switch| match switch {
            Switch::Refused(errno) => (
                libc::EACCES,
                format!(
                    "taking on the caller's identity: {}",
                    io::Error::from_raw_os_error(errno)
                ),
            ),
            Switch::Stuck => {
                self.stuck.set(true);
                (
                    libc::EACCES,
                    "the supervisor could not take its identity back".to_owned(),
                )
            }
        })
    }

    /// A Unix socket's `connect`: to a granted path, with the caller's
    /// identity (`identity.rs`), or refused.
    fn connect_unix(&self, socket: &OwnedFd, address: &[u8], caller: Result<Identity, i32>) -> i32 {
        let target = match UnixTarget::parse(address) {
            Ok(target) => target,
            Err(errno) => return errno,
        };
        let name = target.name();
        let granted = match &target {
            UnixTarget::Path(path) => self.granted.iter().any(|granted| granted == path),
            UnixTarget::Abstract(_) | UnixTarget::Unnamed => false,
        };
        if !granted {
            let reason = match target {
                UnixTarget::Path(_) => "not a granted Unix socket path",
                UnixTarget::Abstract(_) => "an abstract Unix socket name is never granted",
                UnixTarget::Unnamed => "an unnamed Unix socket address",
            };
            self.record(name, EgressVerdict::Denied(reason.to_owned()));
            return libc::EACCES;
        }
        let UnixTarget::Path(path) = &target else {
            return libc::EACCES;
        };
        let connected = self
            .as_caller(&caller, || connect_granted(socket, path, &self.stopper))
            .and_then(|connected| connected);
        match connected {
            Ok(()) => {
                self.record(name, EgressVerdict::Allowed);
                0
            }
            Err((errno, reason)) => {
                self.record(name, EgressVerdict::Failed(reason));
                errno
            }
        }
    }

    fn record(&self, destination: String, verdict: EgressVerdict) {
        let mut events = self
            .events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if events.len() < MAX_RECORDS {
            events.push(EgressEvent {
                protocol: EgressProtocol::Unix,
                destination,
                port: 0,
                resolved: None,
                verdict,
                bytes_out: 0,
                bytes_in: 0,
            });
        }
    }
}

/// The supervisor's answer to one notification.
pub(super) enum Answer {
    /// Failure with this errno, or success with 0.
    Errno(i32),
    /// Success with this value.
    Value(i64),
    /// Success: this file, installed in the caller's table (close-on-exec when asked).
    File(OwnedFd, bool),
}

/// What a Unix socket address names, parsed from the supervisor's copy.
#[derive(Debug, PartialEq, Eq)]
enum UnixTarget {
    /// A pathname (the bytes before the first NUL).
    Path(Vec<u8>),
    /// An abstract name (after the leading NUL).
    Abstract(Vec<u8>),
    /// No name at all (`sizeof(sa_family_t)` bytes).
    Unnamed,
}

impl UnixTarget {
    /// The target of `address`, or the errno the kernel gives a malformed one.
    fn parse(address: &[u8]) -> Result<UnixTarget, i32> {
        let family_size = size_of::<libc::sa_family_t>();
        let Some((family, path)) = address.split_at_checked(family_size) else {
            return Err(libc::EINVAL);
        };
        if u16::from_ne_bytes([family[0], family[1]]) != libc::AF_UNIX as u16 {
            return Err(libc::EINVAL);
        }
        Ok(match path.split_first() {
            None => UnixTarget::Unnamed,
            Some((0, name)) => UnixTarget::Abstract(name.to_vec()),
            Some(_) => {
                let end = path
                    .iter()
                    .position(|&byte| byte == 0)
                    .unwrap_or(path.len());
                UnixTarget::Path(path[..end].to_vec())
            }
        })
    }

    /// `unix:/path`, `unix:@name` or `unix:`, as reports and grants name it.
    fn name(&self) -> String {
        match self {
            UnixTarget::Path(path) => format!("unix:{}", String::from_utf8_lossy(path)),
            UnixTarget::Abstract(name) => format!("unix:@{}", String::from_utf8_lossy(name)),
            UnixTarget::Unnamed => "unix:".to_owned(),
        }
    }
}

fn last_errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Copies `length` bytes at `at` in process `pid`, once.
pub(crate) fn read_memory(pid: u32, at: u64, length: usize) -> Result<Vec<u8>, i32> {
    let mut copy = vec![0_u8; length];
    if length == 0 {
        return Ok(copy);
    }
    let local = libc::iovec {
        iov_base: copy.as_mut_ptr().cast(),
        iov_len: length,
    };
    let remote = libc::iovec {
        iov_base: at as usize as *mut libc::c_void,
        iov_len: length,
    };
    let pid = libc::pid_t::try_from(pid).map_err(|_| libc::ESRCH)?;
    // SAFETY: the local buffer has `length` bytes; the remote one is read by the kernel.
    let read = unsafe { libc::process_vm_readv(pid, &raw const local, 1, &raw const remote, 1, 0) };
    if usize::try_from(read).ok() != Some(length) {
        return Err(libc::EFAULT);
    }
    Ok(copy)
}

/// A pidfd of thread `tid` (`PIDFD_THREAD`, Linux 6.9), or of its thread
/// group on older kernels.
pub(super) fn open_pidfd(tid: u32) -> Result<OwnedFd, i32> {
    let open = |pid: u32, flags: libc::c_uint| -> Result<OwnedFd, i32> {
        // SAFETY: pidfd_open returns a fresh descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
        let fd = RawFd::try_from(fd).map_err(|_| libc::EBADF)?;
        if fd < 0 {
            return Err(last_errno());
        }
        // SAFETY: fresh and ours.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    open(tid, libc::O_EXCL as libc::c_uint).or_else(|_| open(thread_group(tid)?, 0))
}

/// The thread group of `tid`, from `/proc`.
fn thread_group(tid: u32) -> Result<u32, i32> {
    let status = proc_status(&format!("{tid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|tgid| tgid.trim().parse().ok())
        .ok_or(libc::ESRCH)
}

/// The caller's descriptor `fd`: the same open file, now also ours.
pub(super) fn take_descriptor(process: &OwnedFd, fd: i32) -> Result<OwnedFd, i32> {
    // SAFETY: pidfd_getfd returns a fresh descriptor (close-on-exec) or -1.
    let taken = unsafe { libc::syscall(libc::SYS_pidfd_getfd, process.as_raw_fd(), fd, 0_u32) };
    let taken = RawFd::try_from(taken).map_err(|_| libc::EBADF)?;
    if taken < 0 {
        return Err(match last_errno() {
            libc::EBADF => libc::EBADF,
            _ => libc::ESRCH,
        });
    }
    // SAFETY: fresh and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(taken) })
}

fn socket_family(socket: &OwnedFd) -> Result<i32, i32> {
    let mut family: libc::c_int = 0;
    let mut size = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_DOMAIN writes one int.
    let got = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&raw mut family).cast(),
            &raw mut size,
        )
    };
    if got != 0 {
        return Err(last_errno());
    }
    Ok(family)
}

/// Opens the granted `path` in toolsmith's view without crossing a symbolic
/// link (a link in a directory the tool may write could point anywhere),
/// checks that it is a socket, and connects `socket` to that very inode.
fn connect_granted(socket: &OwnedFd, path: &[u8], stopper: &Stopper) -> Result<(), (i32, String)> {
    let c_path = CString::new(path).map_err(|_| (libc::EINVAL, "a NUL in the path".to_owned()))?;
    // SAFETY: a plain C structure; zero is "no flags".
    let mut how: libc::open_how = unsafe { zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: openat2 reads the path and `how`, returns a fresh descriptor or -1.
    let opened = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            &raw const how,
            size_of::<libc::open_how>(),
        )
    };
    let opened = RawFd::try_from(opened).unwrap_or(-1);
    if opened < 0 {
        let errno = last_errno();
        let reason = if errno == libc::ELOOP {
            "the granted path crosses a symbolic link: grant the real path".to_owned()
        } else {
            format!(
                "opening the granted path: {}",
                io::Error::from_raw_os_error(errno)
            )
        };
        return Err((libc::ECONNREFUSED, reason));
    }
    // SAFETY: fresh and ours.
    let opened = unsafe { OwnedFd::from_raw_fd(opened) };
    // SAFETY: fstat fills a stat structure.
    let mut status: libc::stat = unsafe { zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(opened.as_raw_fd(), &raw mut status) } != 0
        || status.st_mode & libc::S_IFMT != libc::S_IFSOCK
    {
        return Err((
            libc::ECONNREFUSED,
            "the granted path is not a socket".to_owned(),
        ));
    }
    // The kernel connects by inode: a hard link to another socket (a
    // container engine's), made where the granted socket was by a tool that
    // may write there, would reach that socket. A bound socket has one name.
    if status.st_nlink != 1 {
        return Err((
            libc::ECONNREFUSED,
            "the socket at the granted path has other names (hard links)".to_owned(),
        ));
    }
    let through = format!("/proc/self/fd/{}", opened.as_raw_fd());
    // SAFETY: a zeroed sockaddr_un, filled below within its size.
    let mut address: libc::sockaddr_un = unsafe { zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (slot, &byte) in address.sun_path.iter_mut().zip(through.as_bytes()) {
        *slot = byte as libc::c_char;
    }
    let length = size_of::<libc::sa_family_t>() + through.len() + 1;
    // SAFETY: the address is a plain C structure of at least `length` bytes.
    let bytes = unsafe { std::slice::from_raw_parts((&raw const address).cast::<u8>(), length) };
    match connect_bounded(socket, bytes, stopper) {
        0 => Ok(()),
        errno => Err((
            errno,
            format!("connecting: {}", io::Error::from_raw_os_error(errno)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::UnixTarget;

    fn address(path: &[u8]) -> Vec<u8> {
        let mut bytes = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        bytes.extend_from_slice(path);
        bytes
    }

    #[test]
    fn addresses_parse_as_the_kernel_reads_them() {
        let check = |bytes: Vec<u8>, expect: Result<UnixTarget, i32>| {
            assert_eq!(UnixTarget::parse(&bytes), expect);
        };
        check(
            address(b"/run/a.sock\0"),
            Ok(UnixTarget::Path(b"/run/a.sock".to_vec())),
        );
        // Bytes after the first NUL are not part of the path.
        check(
            address(b"/run/a.sock\0/run/b"),
            Ok(UnixTarget::Path(b"/run/a.sock".to_vec())),
        );
        check(
            address(b"/run/a.sock"),
            Ok(UnixTarget::Path(b"/run/a.sock".to_vec())),
        );
        check(
            address(b"\0name"),
            Ok(UnixTarget::Abstract(b"name".to_vec())),
        );
        check(address(b""), Ok(UnixTarget::Unnamed));
        check(vec![1], Err(libc::EINVAL));
        let mut inet = address(b"/run/a.sock");
        inet[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        check(inet, Err(libc::EINVAL));
    }

    #[test]
    fn targets_are_named_as_grants_name_them() {
        assert_eq!(UnixTarget::Path(b"/run/a".to_vec()).name(), "unix:/run/a");
        assert_eq!(UnixTarget::Abstract(b"x".to_vec()).name(), "unix:@x");
        assert_eq!(UnixTarget::Unnamed.name(), "unix:");
    }
}
