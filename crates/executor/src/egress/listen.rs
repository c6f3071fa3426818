//! The proxy's door into a run's network namespace: the namespace's first
//! process brings loopback up, listens on `127.0.0.1:PROXY_PORT` there and
//! hands the listening socket to the executor over a socket pair
//! (`SCM_RIGHTS`), before any program of the run exists. The executor's
//! proxy accepts on it from toolsmith's own namespace: a socket stays in the
//! namespace it was made in, whoever holds it. Works the same for a run set
//! up at once and for a prepared init (whose descriptor table is shared).

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use crate::{Egress, Error};

/// The proxy's port on the run's own loopback (each run has its own
/// namespace, so every run has the same one).
pub const PROXY_PORT: u16 = 3128;

/// The socket pair that carries a run's listener to the executor, and the
/// listener once it came.
#[derive(Debug)]
pub(crate) struct EgressChannel {
    /// The grant the proxy enforces.
    pub(crate) egress: Egress,
    parent: OwnedFd,
    child: OwnedFd,
    listener: Mutex<Option<OwnedFd>>,
    notifier: Mutex<Option<OwnedFd>>,
}

impl EgressChannel {
    pub(crate) fn new(egress: Egress) -> Result<EgressChannel, Error> {
        let (parent, child) = pair()?;
        Ok(EgressChannel {
            egress,
            parent,
            child,
            listener: Mutex::new(None),
            notifier: Mutex::new(None),
        })
    }

    /// The end the namespace's first process sends the listener on.
    pub(crate) fn child_fd(&self) -> RawFd {
        self.child.as_raw_fd()
    }

    /// A duplicate of the run's listener, received on the first call (the
    /// child sent it before the run's program or init became ready).
    pub(crate) fn listener(&self) -> Result<OwnedFd, Error> {
        let mut held = self
            .listener
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if held.is_none() {
            *held = Some(receive(self.parent.as_raw_fd())?);
        }
        let listener = held.as_ref().ok_or_else(|| lost("no listener"))?;
        listener.try_clone().map_err(|source| Error::Sys {
            call: "dup (egress listener)",
            source,
        })
    }
}

impl EgressChannel {
    /// A duplicate of the listener of the run's filter notifications, which
    /// the namespace's first process sent after the proxy's listener when
    /// the run has Unix socket grants (`child.rs`). Each run of a session
    /// (which take turns) gets one for its supervisor.
    pub(crate) fn notifier(&self) -> Result<OwnedFd, Error> {
        // The proxy's listener comes first on the channel.
        drop(self.listener()?);
        received_once(&self.notifier, self.parent.as_raw_fd())
    }
}

/// The channel of a run whose filter has a listener but no egress channel
/// carries it (a run with supervised creations, `creations/`): the
/// namespace's first process sends the listener, the executor receives it once.
#[derive(Debug)]
pub(crate) struct NotifyChannel {
    parent: OwnedFd,
    child: OwnedFd,
    listener: Mutex<Option<OwnedFd>>,
}

impl NotifyChannel {
    pub(crate) fn new() -> Result<NotifyChannel, Error> {
        let (parent, child) = pair()?;
        Ok(NotifyChannel {
            parent,
            child,
            listener: Mutex::new(None),
        })
    }

    /// The end the namespace's first process sends the listener on.
    pub(crate) fn child_fd(&self) -> RawFd {
        self.child.as_raw_fd()
    }

    /// A duplicate of the run's filter listener, received on the first call.
    pub(crate) fn listener(&self) -> Result<OwnedFd, Error> {
        received_once(&self.listener, self.parent.as_raw_fd())
    }
}

/// A duplicate of the seccomp listener `held` keeps, received from `channel` the first time.
fn received_once(held: &Mutex<Option<OwnedFd>>, channel: RawFd) -> Result<OwnedFd, Error> {
    let mut held = held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if held.is_none() {
        *held = Some(receive(channel)?);
    }
    let listener = held
        .as_ref()
        .ok_or_else(|| lost("no notification listener"))?;
    listener.try_clone().map_err(|source| Error::Sys {
        call: "dup (seccomp notification listener)",
        source,
    })
}

/// A datagram socket pair (close-on-exec): the executor's end, the child's end.
fn pair() -> Result<(OwnedFd, OwnedFd), Error> {
    let mut fds = [-1; 2];
    // SAFETY: socketpair writes two descriptors into the array.
    let made = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if made != 0 {
        return Err(Error::Sys {
            call: "socketpair (egress channel)",
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: both descriptors are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn lost(what: &str) -> Error {
    Error::Sys {
        call: "receiving the egress listener",
        source: io::Error::other(what.to_owned()),
    }
}

/// Room for one descriptor's control message.
#[repr(C)]
struct OneFd {
    header: libc::cmsghdr,
    fd: libc::c_int,
    _pad: libc::c_int,
}

fn receive(socket: RawFd) -> Result<OwnedFd, Error> {
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: (&raw mut byte).cast(),
        iov_len: 1,
    };
    // SAFETY: zeroed plain C structures.
    let mut control: OneFd = unsafe { zeroed() };
    // SAFETY: as above.
    let mut message: libc::msghdr = unsafe { zeroed() };
    message.msg_iov = &raw mut iov;
    message.msg_iovlen = 1;
    message.msg_control = (&raw mut control).cast();
    message.msg_controllen = size_of::<OneFd>();
    // SAFETY: the message points at live buffers of the sizes given.
    let read = unsafe {
        libc::recvmsg(
            socket,
            &raw mut message,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        )
    };
    if read != 1 {
        return Err(lost("the run's namespace sent no listener"));
    }
    if control.header.cmsg_level != libc::SOL_SOCKET
        || control.header.cmsg_type != libc::SCM_RIGHTS
        || control.fd < 0
    {
        return Err(lost("the run's namespace sent no descriptor"));
    }
    // SAFETY: SCM_RIGHTS installed a fresh descriptor, ours now.
    Ok(unsafe { OwnedFd::from_raw_fd(control.fd) })
}

/// In the namespace's first process: brings loopback up, listens on
/// `127.0.0.1:PROXY_PORT` and sends the socket on `channel`. Only system
/// calls on stack memory (the child shares the executor's memory).
///
/// # Safety
/// Call only in the clone child, with `channel` the child end of an
/// [`EgressChannel`].
pub(crate) unsafe fn listen_and_send(channel: RawFd) -> bool {
    // SAFETY: plain system calls on stack structures and our own descriptors.
    unsafe {
        if !loopback_up() {
            return false;
        }
        let listener = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if listener < 0 {
            return false;
        }
        let mut address: libc::sockaddr_in = zeroed();
        address.sin_family = libc::AF_INET as libc::sa_family_t;
        address.sin_port = PROXY_PORT.to_be();
        address.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let sent = libc::bind(
            listener,
            (&raw const address).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) == 0
            && libc::listen(listener, 128) == 0
            && send_descriptor(channel, listener);
        libc::close(listener);
        sent
    }
}

unsafe fn loopback_up() -> bool {
    // SAFETY: an ioctl on a fresh socket with a zeroed, then filled, ifreq.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return false;
        }
        let mut request: libc::ifreq = zeroed();
        request.ifr_name[0] = b'l' as libc::c_char;
        request.ifr_name[1] = b'o' as libc::c_char;
        let up = libc::ioctl(socket, libc::SIOCGIFFLAGS, &raw mut request) == 0 && {
            request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            libc::ioctl(socket, libc::SIOCSIFFLAGS, &raw const request) == 0
        };
        libc::close(socket);
        up
    }
}

/// Sends `fd` on `channel` with one byte; false when it failed.
///
/// # Safety
/// Raw system calls on stack buffers: for the clone child.
pub(crate) unsafe fn send_descriptor(channel: RawFd, fd: RawFd) -> bool {
    // SAFETY: a sendmsg of one byte and one descriptor from stack buffers.
    unsafe {
        let mut byte = 1u8;
        let mut iov = libc::iovec {
            iov_base: (&raw mut byte).cast(),
            iov_len: 1,
        };
        let mut control: OneFd = zeroed();
        control.header.cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
        control.header.cmsg_level = libc::SOL_SOCKET;
        control.header.cmsg_type = libc::SCM_RIGHTS;
        control.fd = fd;
        let mut message: libc::msghdr = zeroed();
        message.msg_iov = &raw mut iov;
        message.msg_iovlen = 1;
        message.msg_control = (&raw mut control).cast();
        message.msg_controllen = size_of::<OneFd>();
        libc::sendmsg(channel, &raw const message, libc::MSG_NOSIGNAL) == 1
    }
}

/// The variables that point a run's programs at its proxy: HTTP clients
/// (`HTTP_PROXY`, `HTTPS_PROXY`), SOCKS-aware ones (`ALL_PROXY`, with remote
/// name resolution), in both cases, and `NO_PROXY` for the run's own loopback.
pub(crate) fn proxy_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let http = format!("http://127.0.0.1:{PROXY_PORT}");
    let socks = format!("socks5h://127.0.0.1:{PROXY_PORT}");
    let no_proxy = "localhost,127.0.0.1,::1".to_owned();
    [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", &no_proxy),
    ]
    .into_iter()
    .flat_map(|(name, value)| {
        [
            (name.into(), value.into()),
            (name.to_ascii_lowercase().into(), value.into()),
        ]
    })
    .collect()
}
