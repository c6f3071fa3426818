//! Per-run egress: the grant a run with [`Network::Proxy`](crate::Network::Proxy)
//! has, and the proxy that enforces it (see `docs/executor.md`).

mod check;
mod destination;
mod hosts;
mod listen;
mod protocol;
mod proxy;
mod relay;

pub use destination::{
    DEFAULT_PORTS, Destination, DestinationError, Egress, EgressEvent, EgressProtocol,
    EgressVerdict, HostPattern,
};

pub use listen::PROXY_PORT;
pub(crate) use listen::{EgressChannel, listen_and_send, proxy_env};
pub(crate) use proxy::{Proxy, Resolver};
