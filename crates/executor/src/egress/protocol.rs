//! What a connection to the proxy asks for, read from its first bytes: HTTP
//! with an absolute URI, HTTP `CONNECT`, or SOCKS5 `CONNECT` (no
//! authentication; IPv4, IPv6 and domain address types, the name resolved
//! by the proxy). SOCKS4 and 4a, other SOCKS5 commands and anything else are
//! refused with the reply their protocol defines.

use std::net::{Ipv4Addr, Ipv6Addr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{EgressProtocol, EgressVerdict};

/// The longest HTTP request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;

/// A request the proxy can check.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) protocol: EgressProtocol,
    /// A name or an address literal (IPv6 without brackets).
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The reply to the program once connected.
    pub(crate) success: Vec<u8>,
    /// Bytes to send upstream first (a rewritten HTTP head, and what the
    /// program sent after its head).
    pub(crate) forward: Vec<u8>,
}

impl Request {
    /// The reply to the program when the proxy does not connect.
    pub(crate) fn refusal(&self, verdict: &EgressVerdict) -> Vec<u8> {
        let denied = matches!(verdict, EgressVerdict::Denied(_));
        match self.protocol {
            EgressProtocol::Socks5 => socks5_reply(if denied { 2 } else { 4 }),
            _ => http_error(
                if denied {
                    "403 Forbidden"
                } else {
                    "502 Bad Gateway"
                },
                verdict.reason().unwrap_or_default(),
            ),
        }
    }
}

/// A request refused before any destination was checked.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) protocol: EgressProtocol,
    pub(crate) reason: String,
    pub(crate) reply: Vec<u8>,
}

fn refused(protocol: EgressProtocol, reason: &str, reply: Vec<u8>) -> Refusal {
    Refusal {
        protocol,
        reason: reason.to_owned(),
        reply,
    }
}

fn socks5_reply(code: u8) -> Vec<u8> {
    vec![5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

fn http_error(status: &str, reason: &str) -> Vec<u8> {
    let body = format!("toolsmith egress proxy: {reason}\n");
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nX-Toolsmith-Egress: refused\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads the request of a fresh connection.
pub(crate) async fn read_request(client: &mut TcpStream) -> Result<Request, Refusal> {
    let mut first = [0u8; 1];
    let unreadable = || {
        refused(
            EgressProtocol::Other,
            "the connection closed before a request",
            Vec::new(),
        )
    };
    client
        .read_exact(&mut first)
        .await
        .map_err(|_| unreadable())?;
    match first[0] {
        5 => socks5(client).await,
        // SOCKS4's reply: version 0, 0x5B "request rejected or failed".
        4 => Err(refused(
            EgressProtocol::Other,
            "SOCKS4 is not supported (SOCKS5 with remote name resolution is)",
            vec![0, 0x5B, 0, 0, 0, 0, 0, 0],
        )),
        byte if byte.is_ascii_uppercase() => http(client, first[0]).await,
        _ => Err(refused(
            EgressProtocol::Other,
            "not HTTP or SOCKS5",
            Vec::new(),
        )),
    }
}

async fn socks5(client: &mut TcpStream) -> Result<Request, Refusal> {
    let broken = |reason: &str| refused(EgressProtocol::Socks5, reason, socks5_reply(1));
    let count = client
        .read_u8()
        .await
        .map_err(|_| broken("truncated greeting"))?;
    let mut methods = vec![0u8; usize::from(count)];
    client
        .read_exact(&mut methods)
        .await
        .map_err(|_| broken("truncated greeting"))?;
    if !methods.contains(&0) {
        return Err(refused(
            EgressProtocol::Socks5,
            "only SOCKS5 without authentication is supported",
            vec![5, 0xFF],
        ));
    }
    client
        .write_all(&[5, 0])
        .await
        .map_err(|_| broken("closed"))?;
    let mut header = [0u8; 4];
    client
        .read_exact(&mut header)
        .await
        .map_err(|_| broken("truncated request"))?;
    if header[0] != 5 {
        return Err(broken("not a SOCKS5 request"));
    }
    if header[1] != 1 {
        return Err(refused(
            EgressProtocol::Socks5,
            "only the SOCKS5 CONNECT command is supported (no BIND, no UDP ASSOCIATE)",
            socks5_reply(7),
        ));
    }
    let host = match header[3] {
        1 => {
            let mut octets = [0u8; 4];
            client
                .read_exact(&mut octets)
                .await
                .map_err(|_| broken("truncated address"))?;
            Ipv4Addr::from(octets).to_string()
        }
        4 => {
            let mut octets = [0u8; 16];
            client
                .read_exact(&mut octets)
                .await
                .map_err(|_| broken("truncated address"))?;
            Ipv6Addr::from(octets).to_string()
        }
        3 => {
            let length = client
                .read_u8()
                .await
                .map_err(|_| broken("truncated name"))?;
            let mut name = vec![0u8; usize::from(length)];
            client
                .read_exact(&mut name)
                .await
                .map_err(|_| broken("truncated name"))?;
            String::from_utf8(name).map_err(|_| broken("a name that is not UTF-8"))?
        }
        _ => {
            return Err(refused(
                EgressProtocol::Socks5,
                "unknown SOCKS5 address type",
                socks5_reply(8),
            ));
        }
    };
    let port = client
        .read_u16()
        .await
        .map_err(|_| broken("truncated port"))?;
    Ok(Request {
        protocol: EgressProtocol::Socks5,
        host,
        port,
        success: socks5_reply(0),
        forward: Vec::new(),
    })
}

async fn http(client: &mut TcpStream, first: u8) -> Result<Request, Refusal> {
    let bad = |reason: &str| {
        refused(
            EgressProtocol::Http,
            reason,
            http_error("400 Bad Request", reason),
        )
    };
    let mut head = vec![first];
    let end = loop {
        if let Some(end) = head.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        if head.len() > MAX_HEAD {
            return Err(bad("the request head is too long"));
        }
        let mut chunk = [0u8; 4096];
        let read = client
            .read(&mut chunk)
            .await
            .map_err(|_| bad("unreadable request"))?;
        if read == 0 {
            return Err(bad("the request ended before its head"));
        }
        head.extend_from_slice(&chunk[..read]);
    };
    let rest = head.split_off(end);
    let text = String::from_utf8(head).map_err(|_| bad("a request head that is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("a malformed request line"));
    };
    if method == "CONNECT" {
        let (host, port) = authority(target, None).ok_or_else(|| bad("CONNECT needs host:port"))?;
        return Ok(Request {
            protocol: EgressProtocol::HttpConnect,
            host,
            port,
            success: b"HTTP/1.1 200 Connection established\r\n\r\n".to_vec(),
            forward: rest,
        });
    }
    let Some(after_scheme) = target
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
        .map(|_| &target[7..])
    else {
        return Err(bad(
            "a proxy request needs an absolute http:// URI (HTTPS goes through CONNECT)",
        ));
    };
    let split = after_scheme.find(['/', '?']).unwrap_or(after_scheme.len());
    let (host_port, path) = after_scheme.split_at(split);
    let (host, port) = authority(host_port, Some(80)).ok_or_else(|| bad("a malformed host"))?;
    let path = if path.is_empty() {
        "/".to_owned()
    } else if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let mut forward = format!("{method} {path} {version}\r\n").into_bytes();
    for line in lines.filter(|line| !line.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        let hop_by_hop = [
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
        ];
        if !hop_by_hop.iter().any(|hop| name.eq_ignore_ascii_case(hop)) {
            forward.extend_from_slice(line.as_bytes());
            forward.extend_from_slice(b"\r\n");
        }
    }
    // One request per connection: the next may name another host.
    forward.extend_from_slice(b"Connection: close\r\n\r\n");
    forward.extend_from_slice(&rest);
    Ok(Request {
        protocol: EgressProtocol::Http,
        host,
        port,
        success: Vec::new(),
        forward,
    })
}

/// `host:port`, `[v6]:port`, or (with a default port) `host` alone.
fn authority(text: &str, default_port: Option<u16>) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(port) => port.parse().ok().filter(|&port| port != 0)?,
        None => default_port?,
    };
    (!host.is_empty() && !host.contains(['@', ' ', '/'])).then(|| (host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::authority;

    #[test]
    fn authorities_parse() {
        assert_eq!(authority("a.test:443", None), Some(("a.test".into(), 443)));
        assert_eq!(authority("[::1]:80", None), Some(("::1".into(), 80)));
        assert_eq!(authority("a.test", Some(80)), Some(("a.test".into(), 80)));
        assert_eq!(authority("a.test", None), None);
        assert_eq!(authority("user@a.test:80", None), None);
        assert_eq!(authority("a.test:0", None), None);
    }
}
