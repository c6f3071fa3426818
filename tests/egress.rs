//! Issue 23, acceptance 2 end to end: a tool that declares `network: ["a.test"]` reaches
//! a.test through toolsmith's egress proxy and nothing else, and each refusal is in the
//! envelope (`metadata.sandbox.denied`, with the line that would grant it) and in the audit
//! log. The test hosts run in a network namespace this test creates (TEST-NET-3 addresses
//! on its loopback); names reach the proxy through `TOOLSMITH_EGRESS_HOSTS`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::context::TestContext;

const A: &str = "203.0.113.10";
const B: &str = "203.0.113.20";

/// A server of the test namespace on `address`, port 80: answers each HTTP request with
/// `label`, counting them.
pub(crate) fn serve(address: &str, label: &'static str) -> Arc<AtomicUsize> {
    let listener = TcpListener::bind((address, 80)).unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|read| read > 2) {
                line.clear();
            }
            let _ignored = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{label}",
                label.len()
            );
        }
    });
    hits
}

#[expect(
    clippy::disallowed_methods,
    reason = "setting up the test's own network namespace, not running a tool"
)]
pub(crate) fn ip(args: &[&str]) {
    let status = std::process::Command::new("ip")
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "ip {args:?}");
}

/// Moves the calling thread (and what it spawns) into a network namespace of its own, with
/// loopback up and each of `addresses` on it; false, after a loud WARNING naming `test`, when
/// the kernel refuses one (a failure under `TOOLSMITH_REQUIRE_BACKENDS`).
pub(crate) fn enter_test_network(test: &str, addresses: &[&str]) -> bool {
    // SAFETY: unshare moves only this thread into a new network namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        assert!(
            std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
            "a test network namespace is required"
        );
        #[expect(clippy::print_stderr, reason = "a skipped test says so loudly")]
        {
            eprintln!(
                "WARNING: no test network namespace ({}), the {test} test is SKIPPED",
                std::io::Error::last_os_error()
            );
        }
        return false;
    }
    ip(&["link", "set", "lo", "up"]);
    for address in addresses {
        ip(&["addr", "add", &format!("{address}/32"), "dev", "lo"]);
    }
    true
}

#[test]
fn a_declared_destination_is_reached_and_every_other_is_denied_and_audited() {
    std::thread::spawn(|| {
        if !enter_test_network("egress", &[A, B]) {
            return;
        }
        let (a, b) = (serve(A, "hello from a"), serve(B, "hello from b"));
        let context = TestContext::new();
        let hosts = context.project.join("hosts");
        std::fs::write(&hosts, format!("{A} a.test\n{B} b.test\n")).unwrap();
        let description = json!({
            "name": "fetch",
            "description": "Fetches a.test",
            "input_schema": {"type": "object"},
            "sandbox": {"network": ["a.test"]},
        });
        context.tool(
            "fetch",
            &format!(
                "#!/bin/sh\ncase \"$1\" in\n  description) cat <<'JSON'\n{description}\nJSON\n ;;\n  run) curl -sf -m 5 http://a.test/; echo; curl -sf -m 5 http://b.test/ || echo refused ;;\nesac\n"
            ),
        );
        context.project_file(".toolsmith/config.toml", "[audit]\npath = \"audit.jsonl\"\n");
        let output = context
            .with_tools()
            .env("TOOLSMITH_EGRESS_HOSTS", &hosts)
            .args(["run", "fetch", "--input", "{}"])
            .output()
            .unwrap();
        let envelope: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        let result = envelope["result"].as_str().unwrap_or_default();
        assert!(
            result.contains("hello from a") && result.contains("refused"),
            "{envelope:#}"
        );
        assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (1, 0));
        let denied = &envelope["metadata"]["sandbox"]["denied"];
        assert_eq!(
            denied,
            &json!([{
                "kind": "network",
                "target": "b.test",
                "reason": "b.test:80 is not granted",
                "grant": "[tools.fetch] network = [\"b.test\"]",
            }]),
            "{envelope:#}"
        );
        let audit = std::fs::read_to_string(context.project.join(".toolsmith/audit.jsonl")).unwrap();
        let line: Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
        let egress = line["egress"].as_array().unwrap();
        assert_eq!(egress.len(), 2, "{line:#}");
        assert_eq!(egress[0]["destination"], "a.test");
        assert_eq!(egress[0]["resolved"], A);
        assert_eq!(egress[0]["verdict"], "allowed");
        assert!(egress[0]["bytes_in"].as_u64().unwrap() > 0);
        assert_eq!(egress[1]["destination"], "b.test");
        assert_eq!(egress[1]["verdict"], "denied");
    })
    .join()
    .unwrap();
}

/// A listener at `path` that answers each connection with `label`, counting them.
fn serve_unix(path: &std::path::Path, label: &'static str) -> Arc<AtomicUsize> {
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            let _ignored = writeln!(stream, "{label}");
        }
    });
    hits
}

/// Issue 23: a tool granted `unix:/path` by the operator reaches that socket and no other;
/// the refusal is in the envelope with the line that would grant it, and in the audit log.
#[test]
fn a_granted_unix_socket_is_reached_and_another_is_denied_and_audited() {
    let sockets = tempfile::tempdir().unwrap();
    let (path_a, path_b) = (sockets.path().join("a.sock"), sockets.path().join("b.sock"));
    let (a, b) = (
        serve_unix(&path_a, "hello from a"),
        serve_unix(&path_b, "hello from b"),
    );
    let (path_a, path_b) = (path_a.to_str().unwrap(), path_b.to_str().unwrap());
    let context = TestContext::new();
    let description = json!({
        "name": "sock",
        "description": "Talks to a Unix socket",
        "input_schema": {"type": "object"},
        "sandbox": {"network": [format!("unix:{path_a}")]},
    });
    let connect = "import socket, sys\nfor path in sys.argv[1:]:\n    try:\n        s = socket.socket(socket.AF_UNIX)\n        s.connect(path)\n        print(s.recv(64).decode().strip())\n    except OSError as error:\n        print('refused ' + error.strerror)";
    context.tool(
        "sock",
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n  description) cat <<'JSON'\n{description}\nJSON\n ;;\n  run) python3 -c \"{connect}\" {path_a} {path_b} ;;\nesac\n"
        ),
    );
    context.project_file(
        ".toolsmith/config.toml",
        &format!(
            "[audit]\npath = \"audit.jsonl\"\n\n[tools.sock]\nnetwork = [\"unix:{path_a}\"]\n"
        ),
    );
    let output = context
        .with_tools()
        .args(["run", "sock", "--input", "{}"])
        .output()
        .unwrap();
    let envelope: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let result = envelope["result"].as_str().unwrap_or_default();
    assert_eq!(
        result, "hello from a\nrefused Permission denied",
        "{envelope:#}"
    );
    assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (1, 0));
    // The C library's own probes (nscd's socket) are refused and reported too.
    let denied = envelope["metadata"]["sandbox"]["denied"]
        .as_array()
        .unwrap();
    assert!(
        denied.contains(&json!({
            "kind": "network",
            "target": format!("unix:{path_b}"),
            "reason": "not a granted Unix socket path",
            "grant": format!("[tools.sock] network = [\"unix:{path_b}\"]"),
        })),
        "{envelope:#}"
    );
    let audit = std::fs::read_to_string(context.project.join(".toolsmith/audit.jsonl")).unwrap();
    let line: Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
    let egress = line["egress"].as_array().unwrap();
    let verdict_of = |path: &str| {
        egress
            .iter()
            .find(|event| event["destination"] == format!("unix:{path}"))
            .map(|event| (event["protocol"].clone(), event["verdict"].clone()))
    };
    assert_eq!(
        verdict_of(path_a),
        Some((json!("unix"), json!("allowed"))),
        "{line:#}"
    );
    assert_eq!(
        verdict_of(path_b),
        Some((json!("unix"), json!("denied"))),
        "{line:#}"
    );
}
