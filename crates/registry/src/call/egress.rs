//! A call's egress, as its envelope and audit line report it: every connection the tool
//! asked toolsmith's proxy for (`metadata.sandbox.egress`), and each refusal in
//! `metadata.sandbox.denied` with the `[tools.NAME] network = [...]` line that would allow it.

use std::net::IpAddr;

use toolsmith_executor::{DEFAULT_PORTS, EgressEvent, EgressProtocol, EgressVerdict};

use crate::grant::{DenialKind, SandboxDenial, toml_string};
use crate::sandbox::SandboxReport;

/// One connection through the egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EgressRecord {
    /// `http`, `http-connect`, `socks5` or `other`.
    pub protocol: String,
    /// The host the tool asked for, as it asked.
    pub destination: String,
    /// The port it asked for.
    pub port: u16,
    /// The address the proxy checked (and connected to, when allowed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// `allowed`, `denied` or `failed`.
    pub verdict: String,
    /// Why it was denied or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes from the tool to the destination.
    pub bytes_out: u64,
    /// Bytes from the destination to the tool.
    pub bytes_in: u64,
}

impl EgressRecord {
    fn from_event(event: &EgressEvent) -> EgressRecord {
        EgressRecord {
            protocol: event.protocol.as_str().to_owned(),
            destination: event.destination.clone(),
            port: event.port,
            resolved: event.resolved.map(|address| address.to_string()),
            verdict: event.verdict.as_str().to_owned(),
            reason: event.verdict.reason().map(str::to_owned),
            bytes_out: event.bytes_out,
            bytes_in: event.bytes_in,
        }
    }
}

/// `host:port` as a grant names it (`[v6]:port` for an IPv6 address).
fn grant_target(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
        _ if DEFAULT_PORTS.contains(&port) && host.parse::<IpAddr>().is_err() => host.to_owned(),
        _ => format!("{host}:{port}"),
    }
}

/// The denial of one refused connection of `tool`. A name refused for the address it
/// resolved to (a private or loopback one) is granted by naming that address literally.
fn denial(tool: &str, event: &EgressEvent, reason: &str) -> SandboxDenial {
    if event.protocol == EgressProtocol::Unix {
        // `unix:/path` (or `unix:@name`, which no grant allows), as a grant names it.
        return SandboxDenial {
            kind: DenialKind::Network,
            target: event.destination.clone(),
            reason: reason.to_owned(),
            grant: format!(
                "[tools.{tool}] network = [{}]",
                toml_string(&event.destination)
            ),
        };
    }
    let asked = grant_target(&event.destination, event.port);
    let by_address = event
        .resolved
        .filter(|_| event.destination.parse::<IpAddr>().is_err());
    let grant = match by_address {
        Some(address) => grant_target(&address.to_string(), event.port),
        None => asked.clone(),
    };
    SandboxDenial {
        kind: DenialKind::Network,
        target: asked,
        reason: reason.to_owned(),
        grant: format!("[tools.{tool}] network = [{}]", toml_string(&grant)),
    }
}

/// Adds a run's egress events to its report: every one to `egress`, each refusal to
/// `denied` (once per target).
pub(crate) fn report(report: &mut SandboxReport, tool: &str, events: &[EgressEvent]) {
    for event in events {
        report.egress.push(EgressRecord::from_event(event));
        if let EgressVerdict::Denied(reason) = &event.verdict {
            if event.destination.is_empty() {
                continue;
            }
            let denial = denial(tool, event, reason);
            if !report
                .denied
                .iter()
                .any(|known| known.target == denial.target)
            {
                report.denied.push(denial);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(
        destination: &str,
        port: u16,
        resolved: Option<&str>,
        verdict: EgressVerdict,
    ) -> EgressEvent {
        EgressEvent {
            protocol: EgressProtocol::Http,
            destination: destination.to_owned(),
            port,
            resolved: resolved.map(|text| text.parse().unwrap()),
            verdict,
            bytes_out: 0,
            bytes_in: 0,
        }
    }

    #[test]
    fn each_refusal_names_the_line_that_grants_it() {
        let mut sandbox = SandboxReport::refused(Vec::new());
        let denied = |reason: &str| EgressVerdict::Denied(reason.to_owned());
        report(
            &mut sandbox,
            "fetch",
            &[
                event("a.test", 80, Some("203.0.113.10"), EgressVerdict::Allowed),
                event("b.test", 80, None, denied("b.test:80 is not granted")),
                event("b.test", 80, None, denied("b.test:80 is not granted")),
                event("a.test", 8080, None, denied("a.test:8080 is not granted")),
                event(
                    "meta.test",
                    80,
                    Some("169.254.169.254"),
                    denied("link-local"),
                ),
                event("::1", 80, Some("::1"), denied("loopback")),
            ],
        );
        assert_eq!(sandbox.egress.len(), 6);
        let grants: Vec<(&str, &str)> = sandbox
            .denied
            .iter()
            .map(|denial| (denial.target.as_str(), denial.grant.as_str()))
            .collect();
        assert_eq!(
            grants,
            [
                ("b.test", "[tools.fetch] network = [\"b.test\"]"),
                ("a.test:8080", "[tools.fetch] network = [\"a.test:8080\"]"),
                (
                    "meta.test",
                    "[tools.fetch] network = [\"169.254.169.254:80\"]"
                ),
                ("[::1]:80", "[tools.fetch] network = [\"[::1]:80\"]"),
            ]
        );
        assert!(
            sandbox
                .denied
                .iter()
                .all(|denial| denial.kind == DenialKind::Network)
        );
    }

    #[test]
    fn a_refused_unix_socket_names_its_path_as_the_grant() {
        let mut sandbox = SandboxReport::refused(Vec::new());
        let mut refused = event(
            "unix:/run/b.sock",
            0,
            None,
            EgressVerdict::Denied("no".to_owned()),
        );
        refused.protocol = EgressProtocol::Unix;
        report(&mut sandbox, "db", &[refused]);
        assert_eq!(sandbox.denied.len(), 1);
        assert_eq!(sandbox.denied[0].target, "unix:/run/b.sock");
        assert_eq!(
            sandbox.denied[0].grant,
            "[tools.db] network = [\"unix:/run/b.sock\"]"
        );
    }
}
