//! The grant vocabulary shared by the operator's configuration and a tool's declaration:
//! network destinations (`"api.github.com:443"`, `"*.example.com"`, `"10.0.0.0/8"`,
//! `"unix:/run/x.sock"`), writable paths, and the denial that names the key to add.
//!
//! A list is a set of needs when a tool declares it and a set of permissions when the operator
//! writes it; [`NetworkTarget::covers`] and [`path_covers`] decide whether a permission
//! includes a need, so that narrowing a grant by a declaration is a set intersection.

use std::fmt;
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};

/// One entry of a `network` list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NetworkTarget {
    /// A host name, wildcard, address or network, with an optional port.
    Remote(Remote),
    /// A Unix socket path (`"unix:/run/postgresql/.s.PGSQL.5432"`).
    Unix(PathBuf),
}

/// A remote destination: what it names and on which port (`None`: every port).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Remote {
    host: RemoteHost,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum RemoteHost {
    /// A host name, lowercase.
    Name(String),
    /// `*.suffix`: every name below `suffix` (not `suffix` itself).
    Wildcard(String),
    /// An address (full prefix) or a network.
    Net(IpAddr, u8),
}

/// Why a `network` list entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{entry}` is not a destination (expected a host such as \"api.github.com\" or \"api.github.com:443\", a wildcard \"*.example.com\", an address \"127.0.0.1:8080\" or \"[::1]:8080\", a network \"10.0.0.0/8\", or \"unix:/absolute/path\")"
)]
pub struct InvalidTarget {
    /// The entry as written.
    pub entry: String,
}

impl NetworkTarget {
    /// Parses one list entry.
    pub fn parse(text: &str) -> Result<NetworkTarget, InvalidTarget> {
        let invalid = || InvalidTarget {
            entry: text.to_owned(),
        };
        if let Some(path) = text.strip_prefix("unix:") {
            let path = Path::new(path);
            return if is_plain_absolute(path) {
                Ok(NetworkTarget::Unix(path.to_path_buf()))
            } else {
                Err(invalid())
            };
        }
        parse_remote(text)
            .map(NetworkTarget::Remote)
            .ok_or_else(invalid)
    }

    /// True when `self`, a permission, includes all of `need`.
    pub fn covers(&self, need: &NetworkTarget) -> bool {
        match (self, need) {
            (NetworkTarget::Unix(granted), NetworkTarget::Unix(needed)) => granted == needed,
            (NetworkTarget::Remote(granted), NetworkTarget::Remote(needed)) => {
                let port = granted.port.is_none() || granted.port == needed.port;
                port && host_covers(&granted.host, &needed.host)
            }
            _ => false,
        }
    }
}

fn host_covers(granted: &RemoteHost, needed: &RemoteHost) -> bool {
    match (granted, needed) {
        (RemoteHost::Name(granted), RemoteHost::Name(needed)) => granted == needed,
        (RemoteHost::Wildcard(suffix), RemoteHost::Name(name) | RemoteHost::Wildcard(name)) => {
            name == suffix && matches!(needed, RemoteHost::Wildcard(_))
                || name.ends_with(&format!(".{suffix}"))
        }
        (RemoteHost::Net(network, prefix), RemoteHost::Net(address, length)) => {
            length >= prefix && masked(*address, *prefix) == masked(*network, *prefix)
        }
        _ => false,
    }
}

/// `address` with every bit past `prefix` cleared, as a 128-bit number tagged by family.
fn masked(address: IpAddr, prefix: u8) -> (bool, u128) {
    let (v6, bits, width) = match address {
        IpAddr::V4(v4) => (false, u128::from(u32::from(v4)), 32u32),
        IpAddr::V6(v6) => (true, u128::from(v6), 128u32),
    };
    let keep = u32::from(prefix).min(width);
    let mask = if keep == 0 {
        0
    } else {
        (u128::MAX >> (128 - keep)) << (width - keep)
    };
    (v6, bits & mask)
}

fn parse_remote(text: &str) -> Option<Remote> {
    if let Some((network, prefix)) = text.split_once('/') {
        let address: IpAddr = network.parse().ok()?;
        let prefix: u8 = prefix.parse().ok()?;
        let width = if address.is_ipv4() { 32 } else { 128 };
        return (prefix <= width).then_some(Remote {
            host: RemoteHost::Net(address, prefix),
            port: None,
        });
    }
    if let Some(rest) = text.strip_prefix('[') {
        let (address, after) = rest.split_once(']')?;
        let address: std::net::Ipv6Addr = address.parse().ok()?;
        let port = match after {
            "" => None,
            _ => Some(parse_port(after.strip_prefix(':')?)?),
        };
        return Some(Remote {
            host: RemoteHost::Net(IpAddr::V6(address), 128),
            port,
        });
    }
    if let Ok(IpAddr::V6(address)) = text.parse::<IpAddr>() {
        return Some(Remote {
            host: RemoteHost::Net(IpAddr::V6(address), 128),
            port: None,
        });
    }
    let (host, port) = match text.split_once(':') {
        Some((host, port)) => (host, Some(parse_port(port)?)),
        None => (text, None),
    };
    let host = if let Ok(address) = host.parse::<IpAddr>() {
        RemoteHost::Net(address, 32)
    } else if let Some(suffix) = host.strip_prefix("*.") {
        RemoteHost::Wildcard(host_name(suffix)?)
    } else {
        RemoteHost::Name(host_name(host)?)
    };
    Some(Remote { host, port })
}

fn parse_port(text: &str) -> Option<u16> {
    text.parse().ok().filter(|port| *port != 0)
}

/// `text` lowercased when it is a DNS name: labels of letters, digits, `-` and `_`.
fn host_name(text: &str) -> Option<String> {
    let valid = !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
        });
    valid.then(|| text.to_ascii_lowercase())
}

impl fmt::Display for NetworkTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkTarget::Unix(path) => write!(f, "unix:{}", path.display()),
            NetworkTarget::Remote(remote) => remote.fmt(f),
        }
    }
}

impl fmt::Display for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.host, self.port) {
            (RemoteHost::Name(name), None) => f.write_str(name),
            (RemoteHost::Name(name), Some(port)) => write!(f, "{name}:{port}"),
            (RemoteHost::Wildcard(suffix), None) => write!(f, "*.{suffix}"),
            (RemoteHost::Wildcard(suffix), Some(port)) => write!(f, "*.{suffix}:{port}"),
            (RemoteHost::Net(IpAddr::V4(address), 32), None) => write!(f, "{address}"),
            (RemoteHost::Net(IpAddr::V4(address), 32), Some(port)) => {
                write!(f, "{address}:{port}")
            }
            (RemoteHost::Net(IpAddr::V6(address), 128), None) => write!(f, "{address}"),
            (RemoteHost::Net(IpAddr::V6(address), 128), Some(port)) => {
                write!(f, "[{address}]:{port}")
            }
            (RemoteHost::Net(address, prefix), _) => write!(f, "{address}/{prefix}"),
        }
    }
}

/// A writable path as written in a `filesystem` list: absolute, without `.` or `..`.
pub(crate) fn is_plain_absolute(path: &Path) -> bool {
    path.is_absolute()
        && path
            .components()
            .all(|component| matches!(component, Component::RootDir | Component::Normal(_)))
}

/// True when the writable root `granted` includes the writable root `needed`.
pub(crate) fn path_covers(granted: &Path, needed: &Path) -> bool {
    needed.starts_with(granted)
}

/// The roots both `left` and `right` make writable: for each pair, the deeper of the two
/// when one lies below the other.
pub(crate) fn intersect_roots(left: &[PathBuf], right: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for a in left {
        for b in right {
            let deeper = if path_covers(a, b) {
                Some(b)
            } else if path_covers(b, a) {
                Some(a)
            } else {
                None
            };
            if let Some(deeper) = deeper
                && !roots.iter().any(|root| path_covers(root, deeper))
            {
                roots.retain(|root| !path_covers(deeper, root));
                roots.push(deeper.clone());
            }
        }
    }
    roots
}

/// What a refusal was about, in `metadata.sandbox.denied`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DenialKind {
    /// A destination.
    Network,
    /// A path to read.
    Read,
    /// A path to write.
    Write,
    /// A secret.
    Secret,
}

/// One refusal of a call's sandbox, as `metadata.sandbox.denied` lists it: what, why, and the
/// configuration line that would allow it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SandboxDenial {
    /// What was refused.
    pub kind: DenialKind,
    /// The destination, path or secret.
    pub target: String,
    /// Why, as a sentence fragment.
    pub reason: String,
    /// The configuration line that would grant it, ready to paste, e.g.
    /// `[tools.fetch] network = ["a.test:443"]`.
    pub grant: String,
}

/// A TOML string literal of `text` (the key a denial names).
pub(crate) fn toml_string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::grant::{NetworkTarget, intersect_roots};

    fn check(text: &str, expect: &str) {
        let shown = match NetworkTarget::parse(text) {
            Ok(target) => target.to_string(),
            Err(_) => "invalid".to_owned(),
        };
        assert_eq!(shown, expect, "{text}");
    }

    #[test]
    fn every_form_of_the_issue_parses() {
        check("api.github.com", "api.github.com");
        check("API.GitHub.com:443", "api.github.com:443");
        check("*.githubusercontent.com", "*.githubusercontent.com");
        check("127.0.0.1:8080", "127.0.0.1:8080");
        check("10.0.0.0/8", "10.0.0.0/8");
        check("[::1]:8080", "[::1]:8080");
        check("fd00::/8", "fd00::/8");
        check("::1", "::1");
        check(
            "unix:/run/postgresql/.s.PGSQL.5432",
            "unix:/run/postgresql/.s.PGSQL.5432",
        );
    }

    #[test]
    fn malformed_entries_are_refused() {
        for text in [
            "",
            "a.test:0",
            "a.test:65536",
            "a..test",
            "http://a.test",
            "10.0.0.0/33",
            "unix:relative",
            "unix:/run/../etc",
            "[::1",
            "a test",
        ] {
            check(text, "invalid");
        }
    }

    fn covers(granted: &str, needed: &str) -> bool {
        NetworkTarget::parse(granted)
            .unwrap()
            .covers(&NetworkTarget::parse(needed).unwrap())
    }

    #[test]
    fn a_permission_covers_what_it_names_and_nothing_more() {
        assert!(covers("a.test", "a.test:443"));
        assert!(covers("a.test:443", "a.test:443"));
        assert!(!covers("a.test:443", "a.test:80"));
        assert!(!covers("a.test:443", "a.test"));
        assert!(!covers("a.test", "b.test"));
        assert!(covers("*.a.test", "x.a.test:443"));
        assert!(covers("*.a.test", "*.x.a.test"));
        assert!(!covers("*.a.test", "a.test"));
        assert!(!covers("*.a.test", "xa.test"));
        assert!(covers("10.0.0.0/8", "10.1.2.3:80"));
        assert!(covers("10.0.0.0/8", "10.1.0.0/16"));
        assert!(!covers("10.0.0.0/8", "11.0.0.1"));
        assert!(!covers("10.0.0.0/8", "10.0.0.0/7"));
        assert!(covers("fd00::/8", "[fd12::1]:80"));
        assert!(!covers("fd00::/8", "10.0.0.1"));
        assert!(covers("unix:/run/a.sock", "unix:/run/a.sock"));
        assert!(!covers("unix:/run/a.sock", "unix:/run/b.sock"));
        assert!(!covers("a.test", "unix:/run/a.sock"));
    }

    #[test]
    fn roots_intersect_to_the_deeper_of_each_pair() {
        let roots = |paths: &[&str]| paths.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(
            intersect_roots(&roots(&["/"]), &roots(&["/srv/out", "/tmp/x"])),
            roots(&["/srv/out", "/tmp/x"])
        );
        assert_eq!(
            intersect_roots(&roots(&["/work/p"]), &roots(&["/work/p/out", "/etc"])),
            roots(&["/work/p/out"])
        );
        assert_eq!(
            intersect_roots(&roots(&["/work/p/out"]), &roots(&["/work/p"])),
            roots(&["/work/p/out"])
        );
        assert!(intersect_roots(&roots(&["/a"]), &roots(&["/ab"])).is_empty());
    }
}
