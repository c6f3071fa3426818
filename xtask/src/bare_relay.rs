//! The egress bench's bare relay: the least any HTTP proxy does for one request, with
//! nothing of toolsmith's in it, so that the report can tell the proxy's own cost from the
//! cost of relaying at all.
//!
//! One thread, blocking calls, one connection at a time (the bench makes one at a time): it
//! accepts, reads the request head in as few `recv`s as the client's writes allow, rewrites
//! the absolute URI to the origin form, connects to the bench's server (no name, no check,
//! no record) from a socket whose receive buffer is fixed as the proxy's, sends the head
//! and splices the response to the client through a pipe. No
//! runtime, no task, no wake-up but the kernel's own. What it still pays is what every
//! proxy that terminates TCP pays: a second loopback TCP connection (its handshake, and the
//! sending and receiving of every byte a second time) and the wake-ups of one more thread.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use anyhow::Context;

/// The longest request head the relay reads.
const MAX_HEAD: usize = 16 * 1024;

/// Starts the relay on a loopback port of its own, in front of `127.0.0.1:upstream`; it
/// serves until the process ends. Returns its port.
pub(crate) fn start(upstream: u16) -> anyhow::Result<u16> {
    let listener =
        TcpListener::bind("127.0.0.1:0").context("could not bind the bare relay's port")?;
    let port = listener.local_addr().context("no local address")?.port();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            // A failed connection is curl's failure, which the bench reports.
            let _ignored = serve(client, upstream);
        }
    });
    Ok(port)
}

fn serve(mut client: TcpStream, upstream: u16) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    let head = read_head(&mut client)?;
    let mut server = connect(upstream)?;
    server.set_nodelay(true)?;
    server.write_all(&origin_form(&head)?)?;
    let pipe = pipe()?;
    loop {
        let filled = splice(server.as_raw_fd(), pipe.1.as_raw_fd(), 1 << 20)?;
        if filled == 0 {
            break;
        }
        let mut held = filled;
        while held > 0 {
            let drained = splice(pipe.0.as_raw_fd(), client.as_raw_fd(), held)?;
            if drained == 0 {
                return Ok(());
            }
            held -= drained;
        }
    }
    client.shutdown(Shutdown::Write)
}

/// The receive buffer of the upstream socket, fixed before `connect` as the proxy's is
/// (`egress/proxy.rs`, `UPSTREAM_RECEIVE_BYTES`): the relay is as cheap as it can be made
/// from the host's namespace.
const RECEIVE_BYTES: libc::c_int = 4 << 20;

/// A connection to `127.0.0.1:port` from a socket whose receive buffer is fixed first.
fn connect(port: u16) -> std::io::Result<TcpStream> {
    // SAFETY: socket, setsockopt and connect on a descriptor we own, from live values.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let socket = OwnedFd::from_raw_fd(fd);
        let size = RECEIVE_BYTES;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&raw const size).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let mut address: libc::sockaddr_in = std::mem::zeroed();
        address.sin_family = libc::AF_INET as libc::sa_family_t;
        address.sin_port = port.to_be();
        address.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        if libc::connect(
            fd,
            (&raw const address).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(TcpStream::from(socket))
    }
}

/// The request head, read until its blank line.
fn read_head(client: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Err(std::io::Error::other("the request head is too long"));
        }
        let read = client.read(&mut chunk)?;
        if read == 0 {
            return Err(std::io::Error::other("the request ended before its head"));
        }
        head.extend_from_slice(&chunk[..read]);
    }
    Ok(head)
}

/// `GET http://host:port/path HTTP/1.1` and its headers, as the server expects them:
/// `GET /path HTTP/1.1`, without the hop-by-hop headers, one request per connection.
fn origin_form(head: &[u8]) -> std::io::Result<Vec<u8>> {
    let text = std::str::from_utf8(head).map_err(std::io::Error::other)?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(std::io::Error::other("a malformed request line"));
    };
    let after_scheme = target
        .strip_prefix("http://")
        .ok_or_else(|| std::io::Error::other("not an absolute http:// URI"))?;
    let path = after_scheme
        .find('/')
        .map_or("/", |slash| &after_scheme[slash..]);
    let mut forward = format!("{method} {path} {version}\r\n").into_bytes();
    for line in lines.filter(|line| !line.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        if !["proxy-connection", "connection"]
            .iter()
            .any(|hop| name.eq_ignore_ascii_case(hop))
        {
            forward.extend_from_slice(line.as_bytes());
            forward.extend_from_slice(b"\r\n");
        }
    }
    forward.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(forward)
}

/// A blocking pipe: (read end, write end).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn splice(from: RawFd, to: RawFd, length: usize) -> std::io::Result<usize> {
    // SAFETY: splice between descriptors the caller holds open, no offsets.
    let moved = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            length,
            libc::SPLICE_F_MOVE,
        )
    };
    usize::try_from(moved).map_err(|_| std::io::Error::last_os_error())
}
