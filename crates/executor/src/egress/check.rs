//! The proxy's decision for one destination: the grant, then the address
//! rules. A pure function of the grant, the name asked, the address and the
//! port, so that every connection is checked the same way, on the address
//! the proxy then connects to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::destination::{canonical, in_network};
use crate::Egress;

/// Why an address is not public, or `None` when it is.
pub(crate) fn special_range(address: IpAddr) -> Option<&'static str> {
    match canonical(address) {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(address: Ipv4Addr) -> Option<&'static str> {
    const RANGES: [(&str, [u8; 4], u8, &str); 12] = [
        (
            "0.0.0.0/8",
            [0, 0, 0, 0],
            8,
            "unspecified (\"this network\")",
        ),
        ("10.0.0.0/8", [10, 0, 0, 0], 8, "private"),
        ("100.64.0.0/10", [100, 64, 0, 0], 10, "shared (CGNAT)"),
        ("127.0.0.0/8", [127, 0, 0, 0], 8, "loopback"),
        (
            "169.254.0.0/16",
            [169, 254, 0, 0],
            16,
            "link-local (cloud metadata)",
        ),
        ("172.16.0.0/12", [172, 16, 0, 0], 12, "private"),
        (
            "192.0.0.0/24",
            [192, 0, 0, 0],
            24,
            "reserved (IETF protocol assignments)",
        ),
        ("192.168.0.0/16", [192, 168, 0, 0], 16, "private"),
        (
            "198.18.0.0/15",
            [198, 18, 0, 0],
            15,
            "reserved (benchmarking)",
        ),
        ("224.0.0.0/4", [224, 0, 0, 0], 4, "multicast"),
        ("240.0.0.0/4", [240, 0, 0, 0], 4, "reserved (and broadcast)"),
        ("255.255.255.255/32", [255, 255, 255, 255], 32, "broadcast"),
    ];
    RANGES
        .iter()
        .find(|(_, network, prefix, _)| {
            in_network(
                IpAddr::V4(address),
                IpAddr::V4(Ipv4Addr::from(*network)),
                *prefix,
            )
        })
        .map(|(_, _, _, class)| *class)
}

fn special_v6(address: Ipv6Addr) -> Option<&'static str> {
    let bits = u128::from(address);
    let segments = address.segments();
    if address.is_unspecified() {
        return Some("unspecified");
    }
    if address.is_loopback() {
        return Some("loopback");
    }
    // IPv4-compatible (::a.b.c.d, deprecated), NAT64 (64:ff9b::/96) and
    // 6to4 (2002::/16) forms carry an IPv4 address: judged as that address.
    if bits >> 32 == 0 || bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
        let embedded = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
        return Some(special_v4(embedded).unwrap_or("IPv4-embedding (compatible or NAT64)"));
    }
    if segments[0] == 0x2002 {
        let embedded = Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32);
        return special_v4(embedded);
    }
    match segments[0] {
        0xfe80..=0xfebf => Some("link-local"),
        0xfec0..=0xfeff => Some("site-local (deprecated)"),
        0xfc00..=0xfdff => Some("unique local (private)"),
        0xff00..=0xffff => Some("multicast"),
        _ => None,
    }
}

/// Whether the grant lets a name through to resolution at all: a name is
/// resolved only when a grant could allow it (so a denied name never makes
/// a DNS query, which would itself carry data out).
pub(crate) fn name_granted(egress: &Egress, name: &str, port: u16) -> bool {
    egress.any_public
        || egress
            .destinations
            .iter()
            .any(|destination| destination.allows_name(name, port))
}

/// Whether a connection to `address:port` is allowed, asked for as `name`
/// (a host name) or as the address itself (`name` is `None`). A literal
/// grant of the address (or a network containing it) allows any address; a
/// name grant or `any_public` allows only public addresses.
pub(crate) fn check_address(
    egress: &Egress,
    name: Option<&str>,
    address: IpAddr,
    port: u16,
) -> Result<(), String> {
    if egress
        .destinations
        .iter()
        .any(|destination| destination.names_address(address, port))
    {
        return Ok(());
    }
    let asked = name.map_or_else(|| address.to_string(), str::to_owned);
    if let Some(class) = special_range(address) {
        return Err(format!(
            "{address} is a {class} address, reachable only when a grant names it literally"
        ));
    }
    if egress.any_public || name.is_some_and(|name| name_granted(egress, name, port)) {
        return Ok(());
    }
    Err(format!("{asked}:{port} is not granted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn egress(entries: &[&str]) -> Egress {
        Egress::from_entries(entries.iter().copied()).unwrap()
    }

    #[test]
    fn special_ranges_are_refused_in_every_form() {
        for text in [
            "127.0.0.1",
            "10.1.2.3",
            "172.31.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "fc00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
        ] {
            let address: IpAddr = text.parse().unwrap();
            assert!(special_range(address).is_some(), "{text} counted as public");
        }
        for text in ["203.0.113.10", "8.8.8.8", "2001:db8::1", "2606:4700::1111"] {
            let address: IpAddr = text.parse().unwrap();
            assert_eq!(special_range(address), None, "{text}");
        }
    }

    #[test]
    fn a_name_grant_never_reaches_a_private_address() {
        let grant = egress(&["a.test"]);
        let public: IpAddr = "203.0.113.10".parse().unwrap();
        assert!(check_address(&grant, Some("a.test"), public, 443).is_ok());
        assert!(check_address(&grant, Some("a.test"), public, 8080).is_err());
        assert!(check_address(&grant, Some("b.test"), public, 443).is_err());
        assert!(check_address(&grant, None, public, 443).is_err());
        for private in ["127.0.0.1", "169.254.169.254", "::ffff:10.0.0.1"] {
            let private: IpAddr = private.parse().unwrap();
            assert!(check_address(&grant, Some("a.test"), private, 443).is_err());
        }
        let any = egress(&["any"]);
        assert!(check_address(&any, None, public, 22).is_ok());
        assert!(check_address(&any, None, "10.0.0.1".parse().unwrap(), 443).is_err());
    }

    #[test]
    fn a_literal_grant_reaches_its_private_address() {
        let grant = egress(&["10.0.0.0/8:5432", "127.0.0.1:8080"]);
        assert!(check_address(&grant, None, "10.2.3.4".parse().unwrap(), 5432).is_ok());
        assert!(check_address(&grant, Some("db.test"), "10.2.3.4".parse().unwrap(), 5432).is_ok());
        assert!(check_address(&grant, None, "127.0.0.1".parse().unwrap(), 8080).is_ok());
        assert!(check_address(&grant, None, "127.0.0.1".parse().unwrap(), 8081).is_err());
        assert!(!name_granted(&grant, "db.test", 5432));
    }
}
