//! What one `serve --http` holds for its clients, bounded: connections (in all and per client,
//! an idle one closed after a while or when a newer one needs its place), requests in flight
//! (streams, per client), legacy sessions (in all and per client, the least recently used one
//! closed to make room), and the answers owed, which a shutdown waits for.
//!
//! A client is an IP address, as for the per-client call limits (`crate::admission`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// The bounds, from `serve`'s flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Connections open at once, in all.
    pub(crate) max_connections: usize,
    /// Connections open at once from one client.
    pub(crate) max_connections_per_client: usize,
    /// `/mcp` requests in flight at once from one client (each an HTTP/2 stream or an
    /// HTTP/1 connection; an SSE stream stays in flight as long as it is open).
    pub(crate) max_streams_per_client: usize,
    /// Legacy sessions in all.
    pub(crate) max_sessions: usize,
    /// Legacy sessions of one client.
    pub(crate) max_sessions_per_client: usize,
    /// A connection with no request in flight for this long is closed (this also bounds the
    /// time a client may take to send a request's head).
    pub(crate) idle_timeout: Duration,
    /// The time a client has to send a request's head once it began.
    pub(crate) header_timeout: Duration,
    /// The time a client has to send a request's body.
    pub(crate) body_timeout: Duration,
    /// A session unused this long is closed by rmcp and forgotten here.
    pub(crate) session_idle: Duration,
}

/// Descriptors kept for everything but client connections: the tool directories and their
/// watches, the audit log, the tools' pipes and sandboxes.
pub(crate) const RESERVED_DESCRIPTORS: usize = 256;

impl Bounds {
    /// The bounds with `max_connections` cut to what `descriptors` (the process's limit on
    /// open files) leaves after [`RESERVED_DESCRIPTORS`], so that clients can never take the
    /// descriptors a rescan or a call needs.
    pub(crate) fn within(mut self, descriptors: u64) -> Bounds {
        let room = usize::try_from(descriptors)
            .unwrap_or(usize::MAX)
            .saturating_sub(RESERVED_DESCRIPTORS)
            .max(1);
        if self.max_connections > room {
            tracing::warn!(
                configured = self.max_connections,
                allowed = room,
                descriptors,
                "the open-file limit leaves room for fewer connections than configured: raise LimitNOFILE"
            );
            self.max_connections = room;
        }
        self.max_connections_per_client = self.max_connections_per_client.min(room);
        self
    }
}

/// The live state behind the bounds, shared by every connection.
#[derive(Debug)]
pub(crate) struct Tracker {
    pub(crate) bounds: Bounds,
    inner: Mutex<Inner>,
    /// Answers owed: requests whose response has not been written to the end (or dropped).
    owed: AtomicUsize,
    settled: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    connections: HashMap<u64, Connection>,
    clients: HashMap<IpAddr, Client>,
    sessions: HashMap<Arc<str>, Session>,
}

#[derive(Debug)]
struct Connection {
    ip: IpAddr,
    in_flight: usize,
    /// Since when no request is in flight; `None` while one is.
    idle_since: Option<Instant>,
    /// Cancelled to close the connection (to make room for a newer one).
    close: CancellationToken,
}

#[derive(Debug, Default)]
struct Client {
    connections: usize,
    streams: usize,
    sessions: usize,
}

#[derive(Debug)]
struct Session {
    ip: IpAddr,
    used: Instant,
}

impl Tracker {
    pub(crate) fn new(bounds: Bounds) -> Arc<Tracker> {
        Arc::new(Tracker {
            bounds,
            inner: Mutex::new(Inner::default()),
            owed: AtomicUsize::new(0),
            settled: tokio::sync::Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a connection of `ip`, or `None` when it may not be served: its client has all
    /// its connections, or every connection has a request in flight. When all the
    /// connections are open, the one idle longest is closed for this one.
    pub(crate) fn connect(self: &Arc<Tracker>, ip: IpAddr) -> Option<ConnectionGuard> {
        let mut inner = self.lock();
        let client = inner
            .clients
            .get(&ip)
            .map_or(0, |client| client.connections);
        if client >= self.bounds.max_connections_per_client {
            return None;
        }
        if inner.connections.len() >= self.bounds.max_connections {
            let victim = inner.eviction()?;
            inner.forget(victim);
        }
        inner.next_id += 1;
        let id = inner.next_id;
        let close = CancellationToken::new();
        inner.connections.insert(
            id,
            Connection {
                ip,
                in_flight: 0,
                idle_since: Some(Instant::now()),
                close: close.clone(),
            },
        );
        inner.clients.entry(ip).or_default().connections += 1;
        Some(ConnectionGuard {
            tracker: Arc::clone(self),
            id,
            close,
        })
    }

    /// Counts an answer owed until the guard drops (its response written to the end, or
    /// dropped with its connection).
    pub(crate) fn owe(self: &Arc<Tracker>) -> Owed {
        self.owed.fetch_add(1, Ordering::SeqCst);
        Owed(Arc::clone(self))
    }

    /// How many answers are owed.
    pub(crate) fn owed(&self) -> usize {
        self.owed.load(Ordering::SeqCst)
    }

    /// Waits until no answer is owed.
    pub(crate) async fn settled(&self) {
        loop {
            let notified = self.settled.notified();
            if self.owed() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Records a legacy session `id` that `ip` just created, and names the sessions to close
    /// to keep within the bounds: the client's least recently used one over its share, the
    /// least recently used of all over the total.
    pub(crate) fn session_created(&self, ip: IpAddr, id: Arc<str>) -> Vec<Arc<str>> {
        let mut inner = self.lock();
        let now = Instant::now();
        let stale: Vec<Arc<str>> = inner
            .sessions
            .iter()
            .filter(|(_, session)| now.duration_since(session.used) > self.bounds.session_idle)
            .map(|(id, _)| Arc::clone(id))
            .collect();
        for id in &stale {
            inner.end_session(id);
        }
        inner
            .sessions
            .insert(Arc::clone(&id), Session { ip, used: now });
        inner.clients.entry(ip).or_default().sessions += 1;
        let mut closed = stale;
        while inner.clients.get(&ip).map_or(0, |client| client.sessions)
            > self.bounds.max_sessions_per_client
        {
            let Some(lru) = inner.least_recent(Some(ip), &id) else {
                break;
            };
            inner.end_session(&lru);
            closed.push(lru);
        }
        while inner.sessions.len() > self.bounds.max_sessions {
            let Some(lru) = inner.least_recent(None, &id) else {
                break;
            };
            inner.end_session(&lru);
            closed.push(lru);
        }
        closed
    }

    /// A request of session `id`: it is in use.
    pub(crate) fn session_used(&self, id: &str) {
        if let Some(session) = self.lock().sessions.get_mut(id) {
            session.used = Instant::now();
        }
    }

    /// Session `id` ended (its client deleted it).
    pub(crate) fn session_ended(&self, id: &str) {
        self.lock().end_session(id);
    }

    /// How many connections and legacy sessions are held.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.connections.len(), inner.sessions.len())
    }
}

impl Inner {
    /// Closes connection `id` and forgets it.
    fn forget(&mut self, id: u64) {
        if let Some(connection) = self.connections.remove(&id) {
            connection.close.cancel();
            self.client(connection.ip, |client| client.connections -= 1);
        }
    }

    /// The connection to close for a new one: an idle one of the client that holds the most
    /// connections (a flood, not a client with a few), the one idle longest of those.
    fn eviction(&self) -> Option<u64> {
        self.connections
            .iter()
            .filter_map(|(id, connection)| {
                let since = connection.idle_since?;
                let held = self
                    .clients
                    .get(&connection.ip)
                    .map_or(0, |client| client.connections);
                Some((std::cmp::Reverse(held), since, *id))
            })
            .min()
            .map(|(_, _, id)| id)
    }

    fn end_session(&mut self, id: &str) {
        if let Some(session) = self.sessions.remove(id) {
            self.client(session.ip, |client| client.sessions -= 1);
        }
    }

    /// Changes `ip`'s counts, and forgets a client that holds nothing.
    fn client(&mut self, ip: IpAddr, change: impl FnOnce(&mut Client)) {
        if let Some(client) = self.clients.get_mut(&ip) {
            change(client);
            if client.connections == 0 && client.streams == 0 && client.sessions == 0 {
                self.clients.remove(&ip);
            }
        }
    }

    /// The least recently used session (of `ip`, if given) but `except`.
    fn least_recent(&self, ip: Option<IpAddr>, except: &Arc<str>) -> Option<Arc<str>> {
        self.sessions
            .iter()
            .filter(|(id, session)| *id != except && ip.is_none_or(|ip| session.ip == ip))
            .min_by_key(|(_, session)| session.used)
            .map(|(id, _)| Arc::clone(id))
    }
}

/// One connection held in a [`Tracker`]; dropping it releases its place.
#[derive(Debug)]
pub(crate) struct ConnectionGuard {
    tracker: Arc<Tracker>,
    id: u64,
    close: CancellationToken,
}

impl ConnectionGuard {
    /// Cancelled when the connection must close to make room for another.
    pub(crate) fn closed(&self) -> &CancellationToken {
        &self.close
    }

    /// How long the connection has had no request in flight; `None` while one is, or once
    /// it was closed.
    pub(crate) fn idle_for(&self) -> Option<Duration> {
        let inner = self.tracker.lock();
        let connection = inner.connections.get(&self.id)?;
        connection.idle_since.map(|since| since.elapsed())
    }

    /// Counts a request on this connection until the guard drops (with its response body).
    /// An `/mcp` request (`stream`) also counts against its client's streams, and is refused
    /// (`None`) when the client has all its streams open.
    pub(crate) fn request(&self, stream: bool) -> Option<RequestGuard> {
        let mut inner = self.tracker.lock();
        let connection = inner.connections.get(&self.id)?;
        let ip = connection.ip;
        if stream {
            let streams = inner.clients.get(&ip).map_or(0, |client| client.streams);
            if streams >= self.tracker.bounds.max_streams_per_client {
                return None;
            }
            inner.clients.entry(ip).or_default().streams += 1;
        }
        if let Some(connection) = inner.connections.get_mut(&self.id) {
            connection.in_flight += 1;
            connection.idle_since = None;
        }
        Some(RequestGuard {
            tracker: Arc::clone(&self.tracker),
            id: self.id,
            ip,
            stream,
        })
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.tracker.lock().forget(self.id);
    }
}

/// One request in flight on a tracked connection.
#[derive(Debug)]
pub(crate) struct RequestGuard {
    tracker: Arc<Tracker>,
    id: u64,
    ip: IpAddr,
    stream: bool,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let mut inner = self.tracker.lock();
        if self.stream {
            inner.client(self.ip, |client| client.streams -= 1);
        }
        if let Some(connection) = inner.connections.get_mut(&self.id) {
            connection.in_flight -= 1;
            if connection.in_flight == 0 {
                connection.idle_since = Some(Instant::now());
            }
        }
    }
}

/// One answer owed, counted by [`Tracker::owe`].
#[derive(Debug)]
pub(crate) struct Owed(Arc<Tracker>);

impl Drop for Owed {
    fn drop(&mut self) {
        if self.0.owed.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.settled.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;
    use std::time::Duration;

    use crate::http::bounds::{Bounds, Tracker};

    const ADA: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const BOB: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    fn bounds() -> Bounds {
        Bounds {
            max_connections: 3,
            max_connections_per_client: 2,
            max_streams_per_client: 1,
            max_sessions: 3,
            max_sessions_per_client: 2,
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            session_idle: Duration::from_secs(300),
        }
    }

    #[test]
    fn a_client_over_its_share_is_refused_and_the_oldest_idle_connection_makes_room() {
        let tracker = Tracker::new(bounds());
        let first = tracker.connect(ADA).unwrap();
        let second = tracker.connect(ADA).unwrap();
        assert!(tracker.connect(ADA).is_none(), "over ADA's share");
        // The first is busy: the second, idle, makes room for BOB's second connection.
        let busy = first.request(false).unwrap();
        let bob = tracker.connect(BOB).unwrap();
        let _bob_again = tracker.connect(BOB).unwrap();
        assert!(second.closed().is_cancelled());
        assert!(!first.closed().is_cancelled());
        assert!(!bob.closed().is_cancelled());
        assert_eq!(tracker.held().0, 3);
        // With every connection busy, a new one is refused.
        let _bob_busy = bob.request(false).unwrap();
        let third = tracker.connect(ADA);
        assert!(third.is_some(), "BOB's idle second connection makes room");
        drop(busy);
        drop(second);
        assert_eq!(tracker.held().0, 3);
    }

    #[test]
    fn streams_are_bounded_per_client() {
        let tracker = Tracker::new(bounds());
        let connection = tracker.connect(ADA).unwrap();
        let other = tracker.connect(ADA).unwrap();
        let stream = connection.request(true).unwrap();
        assert!(other.request(true).is_none());
        assert!(other.request(false).is_some(), "not a stream: not counted");
        drop(stream);
        assert!(other.request(true).is_some());
        assert!(connection.idle_for().is_some());
    }

    #[test]
    fn sessions_over_a_share_close_the_least_recently_used() {
        let tracker = Tracker::new(bounds());
        let id = |text: &str| -> Arc<str> { Arc::from(text) };
        assert!(tracker.session_created(ADA, id("a1")).is_empty());
        assert!(tracker.session_created(ADA, id("a2")).is_empty());
        tracker.session_used("a1");
        assert_eq!(tracker.session_created(ADA, id("a3")), vec![id("a2")]);
        assert!(tracker.session_created(BOB, id("b1")).is_empty());
        // Four in all: the least recently used of all goes, ADA's a1.
        assert_eq!(tracker.session_created(BOB, id("b2")), vec![id("a1")]);
        tracker.session_ended("b1");
        assert_eq!(tracker.held().1, 2);
        // 10 000 sessions of one client leave its share.
        for index in 0..10_000 {
            let _closed = tracker.session_created(ADA, id(&format!("x{index}")));
        }
        assert_eq!(tracker.held().1, 3);
    }

    #[test]
    fn owed_answers_settle() {
        let tracker = Tracker::new(bounds());
        let owed = tracker.owe();
        assert_eq!(tracker.owed(), 1);
        drop(owed);
        assert_eq!(tracker.owed(), 0);
    }

    #[test]
    fn connections_are_cut_to_the_descriptors() {
        let cut = bounds().within(258);
        assert_eq!(cut.max_connections, 2);
        assert_eq!(bounds().within(65_536).max_connections, 3);
    }
}
