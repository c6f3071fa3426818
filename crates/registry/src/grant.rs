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

use toolsmith_executor::{DEFAULT_PORTS, Destination, Egress, HostPattern};

/// One entry of a `network` list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NetworkTarget {
    /// A host name, wildcard, address or network, with an optional port (`None`: the
    /// executor's [`DEFAULT_PORTS`], 80 and 443).
    Remote(Destination),
    /// A Unix socket path (`"unix:/run/postgresql/.s.PGSQL.5432"`).
    Unix(PathBuf),
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
    /// Parses one list entry: the executor's [`Destination`] forms, or `unix:` and an absolute
    /// path.
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
        text.parse::<Destination>()
            .map(NetworkTarget::Remote)
            .map_err(|_| invalid())
    }

    /// True when `self`, a permission, includes all of `need`: every port and every host or
    /// address `need` names.
    pub fn covers(&self, need: &NetworkTarget) -> bool {
        match (self, need) {
            (NetworkTarget::Unix(granted), NetworkTarget::Unix(needed)) => granted == needed,
            (NetworkTarget::Remote(granted), NetworkTarget::Remote(needed)) => {
                let granted_ports = ports(granted);
                ports(needed)
                    .iter()
                    .all(|port| granted_ports.contains(port))
                    && host_covers(granted, needed)
            }
            _ => false,
        }
    }

    /// True for a host name or wildcard, whose addresses the proxy checks (never a private
    /// one unless the operator names it); false for a literal address, network or socket.
    pub(crate) fn is_host_name(&self) -> bool {
        matches!(self, NetworkTarget::Remote(Destination::Host { .. }))
    }

    /// The egress grant of a list: its destinations and Unix sockets.
    pub(crate) fn egress(targets: &[NetworkTarget], any_public: bool) -> Egress {
        let mut egress = Egress {
            any_public,
            ..Egress::default()
        };
        for target in targets {
            match target {
                NetworkTarget::Remote(destination) => {
                    egress.destinations.push(destination.clone());
                }
                NetworkTarget::Unix(path) => egress.unix_sockets.push(path.clone()),
            }
        }
        egress
    }
}

fn ports(destination: &Destination) -> Vec<u16> {
    let port = match destination {
        Destination::Host { port, .. }
        | Destination::Address { port, .. }
        | Destination::Network { port, .. } => *port,
    };
    port.map_or_else(|| DEFAULT_PORTS.to_vec(), |port| vec![port])
}

/// The network an address or network destination names, `None` for a host name.
fn network_of(destination: &Destination) -> Option<(IpAddr, u8)> {
    match destination {
        Destination::Host { .. } => None,
        Destination::Address { address, .. } => {
            Some((*address, if address.is_ipv4() { 32 } else { 128 }))
        }
        Destination::Network {
            address, prefix, ..
        } => Some((*address, *prefix)),
    }
}

fn host_covers(granted: &Destination, needed: &Destination) -> bool {
    match (granted, needed) {
        (
            Destination::Host {
                pattern: granted, ..
            },
            Destination::Host {
                pattern: needed, ..
            },
        ) => match (granted, needed) {
            (HostPattern::Exact(granted), HostPattern::Exact(needed)) => granted == needed,
            (HostPattern::Subdomains(_), HostPattern::Exact(name)) => granted.matches(name),
            (HostPattern::Subdomains(suffix), HostPattern::Subdomains(other)) => {
                suffix == other || granted.matches(other)
            }
            (HostPattern::Exact(_), HostPattern::Subdomains(_)) => false,
        },
        _ => match (network_of(granted), network_of(needed)) {
            (Some((network, prefix)), Some((address, length))) => {
                length >= prefix && masked(address, prefix) == masked(network, prefix)
            }
            _ => false,
        },
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

impl fmt::Display for NetworkTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkTarget::Unix(path) => write!(f, "unix:{}", path.display()),
            NetworkTarget::Remote(destination) => destination.fmt(f),
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

/// A TOML string literal of `text` (the key a denial names): one line that parses back to
/// exactly `text`. The text can be the tool's (a Unix socket path it tried, a path it
/// declares), so every character a TOML basic string may not hold raw is escaped: the quote,
/// the backslash and every control character (`\u{7f}` and all below `\u{20}`, tab and
/// newline included), which also keeps a pasted grant line one line.
pub(crate) fn toml_string(text: &str) -> String {
    use std::fmt::Write as _;
    let mut quoted = String::from("\"");
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            control if control.is_ascii_control() => {
                let _infallible = write!(quoted, "\\u{:04X}", u32::from(control));
            }
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

    /// Red team: a denial's grant line can carry text the tool chose (a Unix socket path it
    /// tried); pasted into a config it must be one valid TOML line naming exactly that text.
    #[test]
    fn a_grant_line_is_one_toml_line_that_names_exactly_its_text() {
        for text in [
            "/run/a.sock",
            "/tmp/x\n[sandbox]\nfilesystem = \"full\"",
            "/tmp/\"quoted\\",
            "\u{1b}]52;c;aGk=\u{7}\r\t\u{0}\u{7f}\u{9b}\u{202e}",
        ] {
            let line = format!("key = {}", super::toml_string(text));
            assert_eq!(line.lines().count(), 1, "{line}");
            let parsed: toml::Table = toml::from_str(&line).unwrap_or_else(|error| {
                panic!("{line:?}: {error}");
            });
            assert_eq!(parsed["key"].as_str(), Some(text), "{line:?}");
        }
    }

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
        assert!(covers("a.test", "a.test"));
        assert!(!covers("a.test", "a.test:8080"));
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
