//! The proxy of one run: accepts on the listener of the run's namespace
//! (`listen.rs`), reads what each connection asks for (HTTP with an absolute
//! URI, HTTP `CONNECT`, or SOCKS5 `CONNECT`, told apart by the first byte),
//! resolves the name itself, checks every address (`check.rs`), connects to
//! exactly the address it checked and relays the bytes (`relay.rs`: spliced
//! socket to socket, never through toolsmith's memory), counting them. Every
//! connection becomes an [`EgressEvent`].

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::check::{check_address, name_granted};
use super::hosts::HostsFile;
use super::protocol::{Request, read_request};
use super::relay::relay;
use crate::{Egress, EgressEvent, EgressProtocol, EgressVerdict, Error};

/// At most this many connections of one run are recorded; later ones are refused.
const MAX_CONNECTIONS: usize = 4096;

/// How the proxy resolves names: the system resolver, or a hosts-format file
/// (`TOOLSMITH_EGRESS_HOSTS`), kept and read again only when it may have
/// changed (`hosts.rs`), shared by every run of the executor.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolver {
    hosts: Option<Arc<HostsFile>>,
}

impl Resolver {
    pub(crate) fn new(hosts: Option<PathBuf>) -> Resolver {
        Resolver {
            hosts: hosts.map(|path| Arc::new(HostsFile::new(path))),
        }
    }

    async fn resolve(&self, name: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        let Some(hosts) = &self.hosts else {
            return tokio::net::lookup_host((name, port))
                .await
                .map(|found| found.map(|address| address.ip()).collect())
                .map_err(|error| format!("{name} does not resolve: {error}"));
        };
        let found = hosts.lookup(name)?;
        if found.is_empty() {
            return Err(format!(
                "{name} does not resolve ({})",
                hosts.path().display()
            ));
        }
        Ok(found)
    }
}

/// One connection's event, its byte counts kept apart so that a connection
/// cut at the run's end still reports what it moved.
#[derive(Debug)]
struct Record {
    event: Mutex<EgressEvent>,
    out: AtomicU64,
    into: AtomicU64,
}

/// A running proxy; [`Proxy::finish`] stops it and returns its events.
#[derive(Debug)]
pub(crate) struct Proxy {
    task: JoinHandle<()>,
    records: Arc<Mutex<Vec<Arc<Record>>>>,
}

impl Proxy {
    pub(crate) fn start(
        listener: OwnedFd,
        egress: Egress,
        resolver: Resolver,
    ) -> Result<Proxy, Error> {
        defer_accept(&listener);
        let listener = std::net::TcpListener::from(listener);
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
            .map_err(|source| Error::Sys {
                call: "registering the egress listener",
                source,
            })?;
        let records = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new((egress, resolver));
        let task = tokio::spawn(accept_loop(listener, shared, Arc::clone(&records)));
        Ok(Proxy { task, records })
    }

    /// Stops accepting, cuts every open connection and returns the events.
    pub(crate) async fn finish(mut self) -> Vec<EgressEvent> {
        self.task.abort();
        let _cancelled = (&mut self.task).await;
        let records = self
            .records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        records
            .iter()
            .map(|record| {
                let mut event = record
                    .event
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .clone();
                event.bytes_out = record.out.load(Ordering::Relaxed);
                event.bytes_in = record.into.load(Ordering::Relaxed);
                event
            })
            .collect()
    }
}

/// How long the kernel holds a connection that has sent nothing before
/// queueing it for `accept` anyway.
const DEFER_ACCEPT_SECONDS: libc::c_int = 10;

/// Has the listener wake the proxy only once a connection has sent its first
/// bytes (`TCP_DEFER_ACCEPT`): in every protocol the proxy speaks the client
/// speaks first, so the accept and the request take one wake-up of the
/// proxy's thread instead of two. A kernel that refuses it leaves the
/// listener as it was: the proxy then reads the request after its own wait.
fn defer_accept(listener: &OwnedFd) {
    let seconds = DEFER_ACCEPT_SECONDS;
    // SAFETY: setsockopt on a descriptor we own, from a live `c_int`.
    unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&raw const seconds).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// A run that ends early (an error, a cancelled call) drops its proxy: the accept loop and
/// every connection end with it, never outliving the run.
impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<(Egress, Resolver)>,
    records: Arc<Mutex<Vec<Arc<Record>>>>,
) {
    // Dropped (and so aborted) with this task when the proxy finishes.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                // The proxy writes whole messages; Nagle would only hold small ones back.
                let _ignored = stream.set_nodelay(true);
                let record = Arc::new(Record {
                    event: Mutex::new(EgressEvent {
                        protocol: EgressProtocol::Other,
                        destination: String::new(),
                        port: 0,
                        resolved: None,
                        verdict: EgressVerdict::Denied("the request did not complete".to_owned()),
                        bytes_out: 0,
                        bytes_in: 0,
                    }),
                    out: AtomicU64::new(0),
                    into: AtomicU64::new(0),
                });
                {
                    let mut held = records.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    if held.len() >= MAX_CONNECTIONS {
                        continue;
                    }
                    held.push(Arc::clone(&record));
                }
                connections.spawn(serve(stream, Arc::clone(&shared), record));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve(mut client: TcpStream, shared: Arc<(Egress, Resolver)>, record: Arc<Record>) {
    let (egress, resolver) = &*shared;
    let request = match read_request(&mut client).await {
        Ok(request) => request,
        Err(refusal) => {
            set(&record, |event| {
                event.protocol = refusal.protocol;
                event.verdict = EgressVerdict::Denied(refusal.reason.clone());
            });
            let _ignored = client.write_all(&refusal.reply).await;
            return;
        }
    };
    set(&record, |event| {
        event.protocol = request.protocol;
        event.destination.clone_from(&request.host);
        event.port = request.port;
    });
    let upstream = match connect_checked(egress, resolver, &request, &record).await {
        Ok(upstream) => upstream,
        Err(verdict) => {
            let _ignored = client.write_all(&request.refusal(&verdict)).await;
            set(&record, |event| event.verdict = verdict);
            return;
        }
    };
    set(&record, |event| event.verdict = EgressVerdict::Allowed);
    let mut upstream = upstream;
    if let Err(_error) = client.write_all(&request.success).await {
        return;
    }
    if !request.forward.is_empty() {
        if upstream.write_all(&request.forward).await.is_err() {
            return;
        }
        record
            .out
            .fetch_add(request.forward.len() as u64, Ordering::Relaxed);
    }
    // Both directions in this one task, on shared references: no split, no task hop.
    let out = relay(&client, &upstream, &record.out);
    let into = relay(&upstream, &client, &record.into);
    let _both = tokio::join!(out, into);
}

fn set(record: &Record, change: impl FnOnce(&mut EgressEvent)) {
    change(
        &mut record
            .event
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    );
}

/// Resolves (names the grant allows only), checks each address and connects
/// to the first allowed one: the address checked is the address connected to.
async fn connect_checked(
    egress: &Egress,
    resolver: &Resolver,
    request: &Request,
    record: &Record,
) -> Result<TcpStream, EgressVerdict> {
    let (name, addresses) = match request
        .host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(address) => (None, vec![address]),
        Err(_) => {
            if !name_granted(egress, &request.host, request.port) {
                return Err(EgressVerdict::Denied(format!(
                    "{}:{} is not granted",
                    request.host, request.port
                )));
            }
            let found = resolver
                .resolve(&request.host, request.port)
                .await
                .map_err(EgressVerdict::Failed)?;
            (Some(request.host.as_str()), found)
        }
    };
    let mut first_refusal = None;
    for address in addresses {
        match check_address(egress, name, address, request.port) {
            Ok(()) => {
                set(record, |event| event.resolved = Some(address));
                let upstream = connect_upstream(SocketAddr::new(address, request.port))
                    .await
                    .map_err(|error| {
                        EgressVerdict::Failed(format!("connecting to {address}: {error}"))
                    })?;
                let _ignored = upstream.set_nodelay(true);
                return Ok(upstream);
            }
            Err(reason) => {
                if first_refusal.is_none() {
                    set(record, |event| event.resolved = Some(address));
                    first_refusal = Some(reason);
                }
            }
        }
    }
    Err(EgressVerdict::Denied(first_refusal.unwrap_or_else(|| {
        format!("{} has no address", request.host)
    })))
}

/// The receive buffer of every upstream socket, fixed before its `connect`.
///
/// Left to autotuning, an upstream socket starts with a small window (`tcp_rmem`'s
/// default, 128 KiB) and grows it only as the proxy reads: a server's response beyond the
/// first window then reaches the proxy in rounds, each a window update the proxy's thread
/// sends and a burst of the server's queue the proxy's thread receives, so relaying costs
/// far more CPU than the bytes need (a bare relay in C on the 2-core bench machine: about
/// 720 µs of CPU per 1 MiB response, 470 µs with the buffer fixed). Fixed before `connect`,
/// the window is whole from the handshake on and the server pushes the response in one go.
/// 4 MiB is the size at which the fixed buffer stops paying (1, 2 and 4 MiB measured alike)
/// while keeping the ceiling autotuning would give on a stock kernel (6 MiB at most):
/// a fixed buffer bounds a connection to about this much per round trip (some 300 Mbit/s
/// at 100 ms). It adds little or nothing to what one connection could make toolsmith hold
/// before: autotuning grows the buffer up to `tcp_rmem`'s maximum (6 MiB on a stock kernel).
const UPSTREAM_RECEIVE_BYTES: u32 = 4 << 20;

/// Whether the kernel grants [`UPSTREAM_RECEIVE_BYTES`] (`net.core.rmem_max`, 208 KiB on a
/// stock kernel, caps `SO_RCVBUF`): a buffer fixed below it would only lower the ceiling,
/// so a kernel that caps it keeps autotuning. Asked once, of a socket of its own.
fn fixed_receive_buffer() -> bool {
    static GRANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *GRANTED.get_or_init(|| {
        tokio::net::TcpSocket::new_v4()
            .and_then(|probe| {
                probe.set_recv_buffer_size(UPSTREAM_RECEIVE_BYTES)?;
                probe.recv_buffer_size()
            })
            // The kernel reports twice what it granted (its bookkeeping is included).
            .is_ok_and(|granted| granted >= 2 * UPSTREAM_RECEIVE_BYTES)
    })
}

/// Connects to `address` (the address the proxy checked) from a socket whose receive
/// buffer is fixed at [`UPSTREAM_RECEIVE_BYTES`] where the kernel grants it.
async fn connect_upstream(address: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    if fixed_receive_buffer() {
        socket.set_recv_buffer_size(UPSTREAM_RECEIVE_BYTES)?;
    }
    socket.connect(address).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The proxy's listener queues a connection only once it has spoken.
    #[test]
    fn the_listener_defers_accept_until_the_first_bytes() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listener = OwnedFd::from(listener);
        defer_accept(&listener);
        let mut seconds: libc::c_int = 0;
        let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt into a live `c_int` of the length given.
        let read = unsafe {
            libc::getsockopt(
                listener.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                (&raw mut seconds).cast(),
                &raw mut length,
            )
        };
        assert_eq!(read, 0);
        // The kernel rounds the time to its retransmissions of the handshake.
        assert!(seconds > 0, "{seconds}");
    }

    /// The upstream socket has its receive buffer fixed where the kernel grants it, and is
    /// left to autotuning where the kernel would cap it.
    #[tokio::test]
    #[expect(
        clippy::print_stderr,
        reason = "a kernel that caps the buffer must be announced loudly"
    )]
    async fn the_upstream_socket_has_its_receive_buffer_fixed_where_granted() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (upstream, accepted) = tokio::join!(connect_upstream(address), listener.accept());
        let (upstream, _accepted) = (upstream.unwrap(), accepted.unwrap());
        let socket = receive_buffer(&upstream);
        let maximum: u32 = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        if maximum >= UPSTREAM_RECEIVE_BYTES {
            assert!(fixed_receive_buffer());
            assert_eq!(socket, 2 * UPSTREAM_RECEIVE_BYTES);
        } else {
            eprintln!(
                "WARNING: net.core.rmem_max is {maximum}, below {UPSTREAM_RECEIVE_BYTES}: \
                 the upstream buffer stays autotuned, the fixed one is not tested here"
            );
            assert!(!fixed_receive_buffer());
            assert!(socket < 2 * UPSTREAM_RECEIVE_BYTES, "{socket}");
        }
    }

    /// `SO_RCVBUF` of a connected stream, as the kernel reports it.
    fn receive_buffer(stream: &TcpStream) -> u32 {
        let mut size: libc::c_int = 0;
        let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt into a live `c_int` of the length given.
        let read = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&raw mut size).cast(),
                &raw mut length,
            )
        };
        assert_eq!(read, 0);
        u32::try_from(size).unwrap()
    }
}
