//! Per-run egress: the grant a run with [`Network::Proxy`](crate::Network::Proxy)
//! has, and the proxy that enforces it (see `docs/executor.md`).

mod destination;

pub use destination::{
    DEFAULT_PORTS, Destination, DestinationError, Egress, EgressEvent, EgressProtocol,
    EgressVerdict, HostPattern,
};
