//! Per-client limits of `serve --http`: how many calls one client (IP address) may have
//! running at once, and how many it may start per second (a token bucket).
//!
//! A call over a limit is refused before it starts, with a [`Refusal`] that says which limit
//! and, for the rate, when to retry: nothing runs, so nothing is lost by sending it again.
//! Both limits are checked under one lock, and a call refused for its concurrency spends no
//! token.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The limits each client is held to; `None`: no such limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientLimits {
    /// Calls running at once.
    pub(crate) max_running: Option<usize>,
    /// Calls started per second, sustained; a client at rest may start this many at once.
    pub(crate) max_rate: Option<u32>,
}

impl ClientLimits {
    /// The limits of the `--max-calls-per-client` and `--max-call-rate` values, 0 meaning none.
    pub(crate) fn new(max_running: usize, max_rate: u32) -> ClientLimits {
        ClientLimits {
            max_running: (max_running > 0).then_some(max_running),
            max_rate: (max_rate > 0).then_some(max_rate),
        }
    }

    /// Whether any limit applies.
    pub(crate) fn any(self) -> bool {
        self.max_running.is_some() || self.max_rate.is_some()
    }
}

/// Why a call was not started.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    /// The client has `limit` calls running.
    Concurrency { limit: usize },
    /// The client started its `per_second` calls; one more may start after `retry_after`.
    Rate {
        per_second: u32,
        retry_after: Duration,
    },
}

impl Refusal {
    /// The reason, as `/metrics` labels it.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Refusal::Concurrency { .. } => "concurrency",
            Refusal::Rate { .. } => "rate",
        }
    }
}

/// What the server knows of one client.
#[derive(Debug)]
struct ClientState {
    running: usize,
    /// Calls the client may start now, refilled at `max_rate` per second up to `max_rate`.
    tokens: f64,
    refilled: Instant,
}

impl ClientState {
    fn refill(&mut self, rate: u32, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * f64::from(rate)).min(f64::from(rate));
        self.refilled = now;
    }

    /// Whether the server can forget this client: nothing running and a full bucket, so a
    /// fresh state would be the same.
    fn at_rest(&self, limits: ClientLimits, now: Instant) -> bool {
        self.running == 0
            && limits.max_rate.is_none_or(|rate| {
                let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
                self.tokens + elapsed * f64::from(rate) >= f64::from(rate)
            })
    }
}

/// The calls of every HTTP client, and the limits they are held to.
#[derive(Debug)]
pub(crate) struct PerClient {
    limits: ClientLimits,
    clients: Mutex<Clients>,
}

#[derive(Debug)]
struct Clients {
    states: HashMap<IpAddr, ClientState>,
    /// The number of states at which the next sweep of clients at rest happens.
    next_sweep: usize,
}

/// The fewest states kept before clients at rest are swept.
const MIN_SWEEP: usize = 64;

impl PerClient {
    pub(crate) fn new(limits: ClientLimits) -> PerClient {
        PerClient {
            limits,
            clients: Mutex::new(Clients {
                states: HashMap::new(),
                next_sweep: MIN_SWEEP,
            }),
        }
    }

    /// Counts a call of `ip` until the guard drops, or says why it may not start.
    pub(crate) fn admit(&self, ip: IpAddr) -> Result<Admitted<'_>, Refusal> {
        self.admit_at(ip, Instant::now())
    }

    fn admit_at(&self, ip: IpAddr, now: Instant) -> Result<Admitted<'_>, Refusal> {
        let limits = self.limits;
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.states.len() >= clients.next_sweep {
            // States of clients at rest are dropped now and then, so that the map holds the
            // clients of the last moments, not every address ever seen.
            clients
                .states
                .retain(|_, state| !state.at_rest(limits, now));
            clients.next_sweep = MIN_SWEEP.max(clients.states.len() * 2);
        }
        let state = clients.states.entry(ip).or_insert_with(|| ClientState {
            running: 0,
            tokens: f64::from(limits.max_rate.unwrap_or(0)),
            refilled: now,
        });
        if let Some(limit) = limits.max_running
            && state.running >= limit
        {
            return Err(Refusal::Concurrency { limit });
        }
        if let Some(rate) = limits.max_rate {
            state.refill(rate, now);
            if state.tokens < 1.0 {
                let wait = (1.0 - state.tokens) / f64::from(rate);
                return Err(Refusal::Rate {
                    per_second: rate,
                    retry_after: Duration::from_secs_f64(wait),
                });
            }
            state.tokens -= 1.0;
        }
        state.running += 1;
        Ok(Admitted {
            per_client: self,
            ip,
        })
    }
}

/// One running call of an HTTP client, counted by [`PerClient`] until it drops.
#[derive(Debug)]
pub(crate) struct Admitted<'a> {
    per_client: &'a PerClient,
    ip: IpAddr,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        let limits = self.per_client.limits;
        let mut clients = self
            .per_client
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = clients.states.get_mut(&self.ip) {
            state.running = state.running.saturating_sub(1);
            if state.at_rest(limits, Instant::now()) {
                clients.states.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::time::{Duration, Instant};

    use crate::admission::{ClientLimits, PerClient, Refusal};

    const ADA: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const BOB: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    /// Admits the calls of `steps` (milliseconds after the start, client) on a server with
    /// `limits`, each call ending at once unless `held`, and checks the outcome of each.
    #[track_caller]
    fn check(
        limits: ClientLimits,
        held: bool,
        steps: &[(u64, IpAddr)],
        expect: &[Result<(), Refusal>],
    ) {
        let per_client = PerClient::new(limits);
        let start = Instant::now();
        let mut running = Vec::new();
        let outcomes: Vec<Result<(), Refusal>> = steps
            .iter()
            .map(|&(millis, ip)| {
                match per_client.admit_at(ip, start + Duration::from_millis(millis)) {
                    Ok(admitted) => {
                        if held {
                            running.push(admitted);
                        }
                        Ok(())
                    }
                    Err(refusal) => Err(refusal),
                }
            })
            .collect();
        assert_eq!(outcomes, expect);
    }

    fn rate(per_second: u32, retry_millis: u64) -> Result<(), Refusal> {
        Err(Refusal::Rate {
            per_second,
            retry_after: Duration::from_millis(retry_millis),
        })
    }

    #[test]
    fn a_burst_of_the_rate_then_one_per_interval() {
        let limits = ClientLimits::new(0, 2);
        check(
            limits,
            false,
            &[
                (0, ADA),
                (0, ADA),
                (0, ADA),
                (250, ADA),
                (500, ADA),
                (500, ADA),
            ],
            &[
                Ok(()),
                Ok(()),
                rate(2, 500),
                rate(2, 250),
                Ok(()),
                rate(2, 500),
            ],
        );
    }

    #[test]
    fn each_client_has_its_own_bucket() {
        check(
            ClientLimits::new(0, 1),
            false,
            &[(0, ADA), (0, BOB), (0, ADA), (1000, ADA)],
            &[Ok(()), Ok(()), rate(1, 1000), Ok(())],
        );
    }

    #[test]
    fn the_concurrency_limit_spends_no_token() {
        check(
            ClientLimits::new(1, 2),
            true,
            &[(0, ADA), (0, ADA), (0, BOB)],
            &[Ok(()), Err(Refusal::Concurrency { limit: 1 }), Ok(())],
        );
        // Ended calls free their slot; the bucket still counts them.
        check(
            ClientLimits::new(1, 2),
            false,
            &[(0, ADA), (0, ADA), (0, ADA)],
            &[Ok(()), Ok(()), rate(2, 500)],
        );
    }

    #[test]
    fn no_limits_admit_everything() {
        let limits = ClientLimits::new(0, 0);
        assert!(!limits.any());
        check(limits, true, &[(0, ADA); 100], &vec![Ok(()); 100]);
    }

    #[test]
    fn clients_at_rest_are_forgotten() {
        let per_client = PerClient::new(ClientLimits::new(4, 1));
        let start = Instant::now();
        // The states of the 1024 clients are swept at the next admission after they rest.
        for last in 0..1024_u32 {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(last));
            drop(per_client.admit_at(ip, start).unwrap());
        }
        let later = start + Duration::from_secs(2);
        drop(per_client.admit_at(ADA, later).unwrap());
        let clients = per_client.clients.lock().unwrap();
        assert_eq!(clients.states.len(), 1);
    }
}
