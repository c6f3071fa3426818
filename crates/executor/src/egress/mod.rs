//! Per-run egress: the grant a run with [`Network::Proxy`](crate::Network::Proxy)
//! has, and the proxy that enforces it (see `docs/executor.md`).

mod bounded;
mod check;
mod creating;
mod destination;
mod hosts;
mod identity;
mod lazy;
mod listen;
mod protocol;
mod proxy;
mod relay;
mod unix;
mod window;

pub use destination::{
    DEFAULT_PORTS, Destination, DestinationError, Egress, EgressEvent, EgressProtocol,
    EgressVerdict, HostPattern,
};

pub(crate) use identity::host_proc;
pub(crate) use lazy::LazySupervisor;
pub use listen::PROXY_PORT;
pub(crate) use listen::{
    EgressChannel, NotifyChannel, listen_and_send, proxy_env, send_descriptor,
};
pub(crate) use proxy::{Proxy, Resolver};
pub(crate) use unix::{read_memory, supported as supervisor_supported};
pub(crate) use window::widen_receive_window;
