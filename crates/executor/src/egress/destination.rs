//! The destinations a run's egress grant names, in the configuration's own
//! syntax: `api.github.com`, `api.github.com:443`, `*.githubusercontent.com`,
//! `127.0.0.1:8080`, `10.0.0.0/8`, `10.0.0.0/8:5432`, `[::1]:8080`, `fd00::/8`.
//!
//! A destination without a port allows ports 80 and 443 (HTTP and HTTPS), for
//! names, addresses and networks alike: the common case is a web API, and a
//! grant for another service says its port.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::str::FromStr;

/// The ports a destination without an explicit port allows.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// A host-name pattern of a [`Destination::Host`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// Exactly this name (lower case, no trailing dot).
    Exact(String),
    /// `*.suffix`: every name strictly below `suffix` (at any depth), never
    /// `suffix` itself.
    Subdomains(String),
}

impl HostPattern {
    /// Whether `name` (any case, a trailing dot allowed) matches.
    pub fn matches(&self, name: &str) -> bool {
        let name = normalize(name);
        match self {
            HostPattern::Exact(exact) => name == *exact,
            HostPattern::Subdomains(suffix) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

/// One destination of an egress grant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Destination {
    /// A host name or wildcard, matched against the name the program asked
    /// for (never against a resolved address).
    Host {
        /// The name or wildcard.
        pattern: HostPattern,
        /// The one port allowed, or `None` for [`DEFAULT_PORTS`].
        port: Option<u16>,
    },
    /// One address, named literally.
    Address {
        /// The address.
        address: IpAddr,
        /// The one port allowed, or `None` for [`DEFAULT_PORTS`].
        port: Option<u16>,
    },
    /// A network, named literally (`10.0.0.0/8`, `fd00::/8`).
    Network {
        /// The network's first address (host bits zero).
        address: IpAddr,
        /// The prefix length.
        prefix: u8,
        /// The one port allowed, or `None` for [`DEFAULT_PORTS`].
        port: Option<u16>,
    },
}

/// Why a destination did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid network destination `{text}`: {reason}")]
pub struct DestinationError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

fn normalize(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

fn port_allows(port: Option<u16>, asked: u16) -> bool {
    match port {
        Some(port) => port == asked,
        None => DEFAULT_PORTS.contains(&asked),
    }
}

/// Whether `address` lies in the network `network/prefix`. An IPv4-mapped
/// IPv6 address is compared as the IPv4 address it maps.
pub(crate) fn in_network(address: IpAddr, network: IpAddr, prefix: u8) -> bool {
    match (canonical(address), canonical(network)) {
        (IpAddr::V4(address), IpAddr::V4(network)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(address) & mask == u32::from(network) & mask
        }
        (IpAddr::V6(address), IpAddr::V6(network)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(address) & mask == u128::from(network) & mask
        }
        _ => false,
    }
}

/// An IPv4-mapped IPv6 address as its IPv4 address; any other as itself.
pub(crate) fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

impl Destination {
    /// Whether this destination allows the host name `name` on `port`
    /// (names only: an address or network never matches a name).
    pub fn allows_name(&self, name: &str, port: u16) -> bool {
        match self {
            Destination::Host { pattern, port: own } => {
                port_allows(*own, port) && pattern.matches(name)
            }
            _ => false,
        }
    }

    /// Whether this destination names `address` on `port` literally (an
    /// address or a network containing it; a host name never does).
    pub fn names_address(&self, address: IpAddr, port: u16) -> bool {
        match self {
            Destination::Address {
                address: own,
                port: own_port,
            } => port_allows(*own_port, port) && canonical(*own) == canonical(address),
            Destination::Network {
                address: network,
                prefix,
                port: own_port,
            } => port_allows(*own_port, port) && in_network(address, *network, *prefix),
            Destination::Host { .. } => false,
        }
    }
}

fn parse_port(text: &str, whole: &str) -> Result<u16, DestinationError> {
    match text.parse::<u16>() {
        Ok(port) if port != 0 && !text.starts_with('+') && !text.starts_with('0') => Ok(port),
        _ => Err(error(whole, "the port must be a number from 1 to 65535")),
    }
}

fn error(text: &str, reason: &'static str) -> DestinationError {
    DestinationError {
        text: text.to_owned(),
        reason,
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
        })
        // A name of digits and dots only would read as an address.
        && !name.bytes().all(|byte| byte.is_ascii_digit() || byte == b'.')
}

fn parse_network(text: &str, whole: &str) -> Result<Destination, DestinationError> {
    let (address, rest) = text.split_once('/').unwrap_or((text, ""));
    let (prefix, port) = match rest.split_once(':') {
        Some((prefix, port)) => (prefix, Some(parse_port(port, whole)?)),
        None => (rest, None),
    };
    let address: IpAddr = address
        .parse()
        .map_err(|_| error(whole, "a network is an IP address, `/` and a prefix length"))?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    let canonical_digits = prefix == "0" || (!prefix.starts_with('0') && !prefix.is_empty());
    let prefix = match prefix.parse::<u8>() {
        Ok(value)
            if value <= max && canonical_digits && prefix.bytes().all(|b| b.is_ascii_digit()) =>
        {
            value
        }
        _ => return Err(error(whole, "the prefix length is out of range")),
    };
    if network_start(address, prefix) != address {
        return Err(error(
            whole,
            "the network's address has bits set below its prefix",
        ));
    }
    Ok(Destination::Network {
        address,
        prefix,
        port,
    })
}

fn network_start(address: IpAddr, prefix: u8) -> IpAddr {
    match address {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}

impl FromStr for Destination {
    type Err = DestinationError;

    fn from_str(whole: &str) -> Result<Destination, DestinationError> {
        let text = whole.trim();
        if text.is_empty() {
            return Err(error(whole, "it is empty"));
        }
        if text.starts_with("unix:") {
            return Err(error(whole, "a Unix socket path is not a host destination"));
        }
        if text.contains('/') {
            return parse_network(text, whole);
        }
        if let Some(rest) = text.strip_prefix('[') {
            let (address, port) = rest
                .split_once(']')
                .ok_or_else(|| error(whole, "a `[` without its `]`"))?;
            let address: Ipv6Addr = address
                .parse()
                .map_err(|_| error(whole, "brackets hold an IPv6 address"))?;
            let port = match port {
                "" => None,
                port => Some(parse_port(
                    port.strip_prefix(':')
                        .ok_or_else(|| error(whole, "`]` is followed by `:` and a port"))?,
                    whole,
                )?),
            };
            return Ok(Destination::Address {
                address: IpAddr::V6(address),
                port,
            });
        }
        if let Ok(address) = text.parse::<Ipv6Addr>() {
            return Ok(Destination::Address {
                address: IpAddr::V6(address),
                port: None,
            });
        }
        let (host, port) = match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(parse_port(port, whole)?)),
            None => (text, None),
        };
        if let Ok(address) = host.parse::<Ipv4Addr>() {
            return Ok(Destination::Address {
                address: IpAddr::V4(address),
                port,
            });
        }
        let host = normalize(host);
        let pattern = match host.strip_prefix("*.") {
            Some(suffix) if valid_name(suffix) => HostPattern::Subdomains(suffix.to_owned()),
            Some(_) => return Err(error(whole, "a wildcard is `*.` and a host name")),
            None if valid_name(&host) => HostPattern::Exact(host),
            None => return Err(error(whole, "not a host name, address or network")),
        };
        Ok(Destination::Host { pattern, port })
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Host { pattern, port } => {
                match pattern {
                    HostPattern::Exact(name) => formatter.write_str(name)?,
                    HostPattern::Subdomains(suffix) => write!(formatter, "*.{suffix}")?,
                }
                if let Some(port) = port {
                    write!(formatter, ":{port}")?;
                }
                Ok(())
            }
            Destination::Address { address, port } => match (address, port) {
                (IpAddr::V6(v6), Some(port)) => write!(formatter, "[{v6}]:{port}"),
                (address, Some(port)) => write!(formatter, "{address}:{port}"),
                (address, None) => write!(formatter, "{address}"),
            },
            Destination::Network {
                address,
                prefix,
                port,
            } => {
                write!(formatter, "{address}/{prefix}")?;
                if let Some(port) = port {
                    write!(formatter, ":{port}")?;
                }
                Ok(())
            }
        }
    }
}

/// The egress a run with [`Network::Proxy`](crate::Network::Proxy) is granted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Egress {
    /// The destinations reachable through the proxy.
    pub destinations: Vec<Destination>,
    /// Every public destination (on every port), as a declared `"any"` gets
    /// under the default profile: names and addresses that resolve only to
    /// public addresses. Private, loopback and link-local addresses still
    /// need a literal grant.
    pub any_public: bool,
    /// The Unix sockets the run may connect to: host paths, taken literally
    /// (toolsmith connects them in its own view, crossing no symbolic link).
    pub unix_sockets: Vec<PathBuf>,
}

impl Egress {
    /// An egress grant from the entries of a `network = [...]` list:
    /// `"unix:/path"` entries are Unix sockets, `"any"` sets
    /// [`Egress::any_public`], every other entry is a [`Destination`].
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = &'a str>,
    ) -> Result<Egress, DestinationError> {
        let mut egress = Egress::default();
        for entry in entries {
            if let Some(path) = entry.strip_prefix("unix:") {
                if !path.starts_with('/') {
                    return Err(error(entry, "a Unix socket path is absolute"));
                }
                egress.unix_sockets.push(PathBuf::from(path));
            } else if entry == "any" {
                egress.any_public = true;
            } else {
                egress.destinations.push(entry.parse()?);
            }
        }
        Ok(egress)
    }

    /// The entries [`Egress::from_entries`] reads back into this grant.
    pub fn entries(&self) -> Vec<String> {
        let mut entries: Vec<String> = self.destinations.iter().map(ToString::to_string).collect();
        if self.any_public {
            entries.push("any".to_owned());
        }
        entries.extend(
            self.unix_sockets
                .iter()
                .map(|path| format!("unix:{}", path.display())),
        );
        entries
    }
}

/// How a program reached the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EgressProtocol {
    /// An HTTP request with an absolute URI (`GET http://host/...`).
    Http,
    /// HTTP `CONNECT host:port` (a tunnel, e.g. for HTTPS).
    HttpConnect,
    /// SOCKS5 `CONNECT`.
    Socks5,
    /// Something else (SOCKS4, a malformed request): refused.
    Other,
    /// A `connect` of a Unix socket, answered by the run's supervisor
    /// (`egress/unix.rs`); the destination is `unix:/path` (`unix:@name` for
    /// an abstract name), the port 0.
    Unix,
}

impl EgressProtocol {
    /// The name used in reports and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            EgressProtocol::Http => "http",
            EgressProtocol::HttpConnect => "http-connect",
            EgressProtocol::Socks5 => "socks5",
            EgressProtocol::Other => "other",
            EgressProtocol::Unix => "unix",
        }
    }
}

/// Whether the proxy let a connection through.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EgressVerdict {
    /// Connected to the checked address.
    Allowed,
    /// Refused by the grant or the address rules (the reason says which).
    Denied(String),
    /// Allowed, but the destination could not be resolved or reached.
    Failed(String),
}

impl EgressVerdict {
    /// `"allowed"`, `"denied"` or `"failed"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            EgressVerdict::Allowed => "allowed",
            EgressVerdict::Denied(_) => "denied",
            EgressVerdict::Failed(_) => "failed",
        }
    }

    /// The reason of a denial or failure.
    pub fn reason(&self) -> Option<&str> {
        match self {
            EgressVerdict::Allowed => None,
            EgressVerdict::Denied(reason) | EgressVerdict::Failed(reason) => Some(reason),
        }
    }
}

/// One connection a run asked its proxy for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressEvent {
    /// How it asked.
    pub protocol: EgressProtocol,
    /// The host it asked for, as it asked (a name or an address literal;
    /// empty when the request did not parse).
    pub destination: String,
    /// The port it asked for (0 when the request did not parse).
    pub port: u16,
    /// The address the proxy checked and connected to (or refused).
    pub resolved: Option<IpAddr>,
    /// The proxy's decision.
    pub verdict: EgressVerdict,
    /// Bytes from the program to the destination.
    pub bytes_out: u64,
    /// Bytes from the destination to the program.
    pub bytes_in: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_issues_forms_parse_and_print_back() {
        for text in [
            "api.github.com",
            "api.github.com:443",
            "*.githubusercontent.com",
            "127.0.0.1:8080",
            "10.0.0.0/8",
            "10.0.0.0/8:5432",
            "[::1]:8080",
            "fd00::/8",
            "::1",
            "203.0.113.10",
        ] {
            let destination: Destination = text.parse().unwrap();
            assert_eq!(destination.to_string(), text);
        }
    }

    #[test]
    fn malformed_destinations_are_refused() {
        for text in [
            "",
            "a.test:0",
            "a.test:65536",
            "a.test:",
            "*.",
            "*",
            "a.*.test",
            "10.0.0.1/8",
            "10.0.0.0/33",
            "fd00::/129",
            "[::1",
            "[::1]x",
            "unix:/run/x",
            "a..test",
            "-a.test",
            "a b",
            "1.2.3",
            "10.0.0.0/08",
            "a.test:+80",
            "a.test:080",
        ] {
            assert!(text.parse::<Destination>().is_err(), "{text:?} parsed");
        }
    }

    #[test]
    fn a_wildcard_matches_subdomains_only() {
        let grant: Destination = "*.x.test".parse().unwrap();
        assert!(grant.allows_name("a.x.test", 443));
        assert!(grant.allows_name("A.B.X.TEST.", 80));
        assert!(!grant.allows_name("x.test", 443));
        assert!(!grant.allows_name("evilx.test", 443));
        assert!(!grant.allows_name("a.x.test", 8080));
    }

    #[test]
    fn no_port_means_80_and_443() {
        let grant: Destination = "a.test".parse().unwrap();
        assert!(grant.allows_name("a.test", 80));
        assert!(grant.allows_name("a.test", 443));
        assert!(!grant.allows_name("a.test", 22));
        let network: Destination = "10.0.0.0/8:5432".parse().unwrap();
        assert!(network.names_address("10.9.8.7".parse().unwrap(), 5432));
        assert!(!network.names_address("10.9.8.7".parse().unwrap(), 443));
        assert!(!network.names_address("11.0.0.1".parse().unwrap(), 5432));
        let mapped: IpAddr = "::ffff:10.1.1.1".parse().unwrap();
        assert!(network.names_address(mapped, 5432));
        assert!(!grant.names_address("10.1.1.1".parse().unwrap(), 80));
    }

    #[test]
    fn entries_sort_unix_sockets_and_any() {
        let egress = Egress::from_entries(["a.test", "any", "unix:/run/x.sock"]).unwrap();
        assert!(egress.any_public);
        assert_eq!(egress.unix_sockets, [PathBuf::from("/run/x.sock")]);
        assert_eq!(egress.entries(), ["a.test", "any", "unix:/run/x.sock"]);
        assert!(Egress::from_entries(["unix:relative"]).is_err());
    }

    fn destination() -> impl Strategy<Value = Destination> {
        let port = proptest::option::of(1u16..);
        let name = "[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?(\\.[a-z]{1,6}){1,3}";
        prop_oneof![
            (name, port.clone()).prop_map(|(name, port)| Destination::Host {
                pattern: HostPattern::Exact(name),
                port
            }),
            (name, port.clone()).prop_map(|(name, port)| Destination::Host {
                pattern: HostPattern::Subdomains(name),
                port
            }),
            (any::<IpAddr>(), port.clone())
                .prop_map(|(address, port)| Destination::Address { address, port }),
            (any::<IpAddr>(), 0u8..=128, port).prop_map(|(address, prefix, port)| {
                let prefix = if address.is_ipv4() {
                    prefix % 33
                } else {
                    prefix
                };
                Destination::Network {
                    address: network_start(address, prefix),
                    prefix,
                    port,
                }
            }),
        ]
    }

    proptest! {
        #[test]
        fn every_destination_round_trips(destination in destination()) {
            let text = destination.to_string();
            prop_assert_eq!(text.parse::<Destination>(), Ok(destination));
        }
    }
}
