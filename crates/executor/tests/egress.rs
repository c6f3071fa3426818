//! The per-run egress proxy against test hosts this test runs in a network
//! namespace of its own (never any other address): a thread enters a fresh
//! namespace, gives its loopback TEST-NET-3 addresses (public-looking)
//! and the metadata address, runs its servers there and the executor from
//! there; names reach the proxy through a hosts file (`with_egress_hosts`).
//! Each server counts its connections, so every refusal is also checked from
//! outside: the refused destination saw nothing.

#![expect(
    clippy::print_stderr,
    reason = "unavailable kernel features must be announced loudly"
)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use toolsmith_executor::{
    BackendChoice, Command, Egress, EgressEvent, EgressVerdict, Executor, ExecutorConfig, Limits,
    Network, Outcome, Sandbox,
};

const A: &str = "203.0.113.10";
const B: &str = "203.0.113.20";
const METADATA: &str = "169.254.169.254";

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/hostile/egress")
        .join(name)
}

/// A server of the test namespace: answers each HTTP request (or any bytes)
/// with its label, and counts its connections.
struct Server {
    hits: Arc<AtomicUsize>,
}

impl Server {
    fn start(address: &str, port: u16, label: &'static str) -> Server {
        let listener = TcpListener::bind((address, port)).unwrap();
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
        Server { hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// The test namespace's servers: a.test on 80, 443 and 8080, b.test on 80,
/// the namespace's own loopback on 80, the metadata address on 80.
struct Hosts {
    a: Server,
    a_tls_port: Server,
    a_other: Server,
    b: Server,
    loopback: Server,
    metadata: Server,
    file: tempfile::NamedTempFile,
}

fn ip(args: &str) {
    let status = Process::new("ip").args(args.split(' ')).status().unwrap();
    assert!(status.success(), "ip {args}");
}

/// Runs `test` on a thread in a network namespace of its own with the test
/// hosts up, or says loudly why it cannot.
fn in_test_network(test: impl FnOnce(&Hosts) + Send + 'static) {
    let thread = std::thread::spawn(move || {
        // SAFETY: unshare moves only this thread into a new network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            assert!(
                std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
                "a test network namespace is required"
            );
            eprintln!(
                "WARNING: no test network namespace ({}), the egress test is SKIPPED",
                std::io::Error::last_os_error()
            );
            return;
        }
        // On loopback: a dummy interface needs a module this kernel may lack,
        // and the proxy judges addresses, not interfaces.
        ip("link set lo up");
        for address in [A, B, METADATA] {
            ip(&format!("addr add {address}/32 dev lo"));
        }
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            file,
            "{A} a.test\n{B} b.test\n127.0.0.1 loop.test\n{METADATA} meta.test"
        )
        .unwrap();
        let hosts = Hosts {
            a: Server::start(A, 80, "hello from a"),
            a_tls_port: Server::start(A, 443, "hello from a:443"),
            a_other: Server::start(A, 8080, "hello from a:8080"),
            b: Server::start(B, 80, "hello from b"),
            loopback: Server::start("127.0.0.1", 80, "hello from loopback"),
            metadata: Server::start(METADATA, 80, "hello from metadata"),
            file,
        };
        test(&hosts);
    });
    thread.join().unwrap();
}

fn executor(hosts: &Hosts) -> Executor {
    Executor::new(ExecutorConfig {
        backend: BackendChoice::Auto,
        max_concurrent: None,
    })
    .unwrap()
    .with_egress_hosts(Some(hosts.file.path().to_path_buf()))
}

fn proxied(entries: &[&str]) -> Sandbox {
    Sandbox {
        network: Network::Proxy(Egress::from_entries(entries.iter().copied()).unwrap()),
        ..Sandbox::none()
    }
}

fn command(program: &Path, args: &[&str], sandbox: Sandbox) -> Command {
    let mut command = Command::new(program, Path::new("/")).unwrap();
    for arg in args {
        command.arg(OsStr::new(arg));
    }
    command.env(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"));
    command.sandbox(sandbox);
    command
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(30),
        grace: Duration::from_millis(200),
        ..Limits::recommended()
    }
}

fn run(executor: &Executor, command: &Command) -> Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(executor.run(command, &limits())).unwrap()
}

fn denied<'a>(outcome: &'a Outcome, destination: &str, port: u16) -> &'a EgressEvent {
    outcome
        .egress
        .iter()
        .find(|event| {
            event.destination == destination
                && event.port == port
                && matches!(event.verdict, EgressVerdict::Denied(_))
        })
        .unwrap_or_else(|| panic!("no denial of {destination}:{port} in {:#?}", outcome.egress))
}

#[test]
fn a_granted_host_is_reached_through_every_door_and_nothing_else() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let outcome = run(
            &executor,
            // The names that resolve to loopback and to the metadata address are
            // granted too: a name grant never reaches a private address.
            &command(
                &script("reach.sh"),
                &[],
                proxied(&["a.test", "loop.test", "meta.test"]),
            ),
        );
        assert!(outcome.success(), "{outcome:?}");
        assert_eq!(
            outcome.stdout.text_lossy(),
            "http: hello from a\n\
             connect: hello from a:443\n\
             socks5: hello from a\n\
             b: refused\n\
             own-loopback: refused\n\
             loop-name: refused\n\
             metadata-name: refused\n\
             other-port: refused\n\
             connect-other-port: refused\n",
            "{:#?}",
            outcome.egress
        );
        assert_eq!(hosts.a.hits(), 2, "HTTP and SOCKS5 reached a.test:80");
        assert_eq!(hosts.a_tls_port.hits(), 1);
        for (server, what) in [
            (&hosts.b, "b.test"),
            (&hosts.loopback, "loopback"),
            (&hosts.metadata, "metadata"),
            (&hosts.a_other, "a.test:8080"),
        ] {
            assert_eq!(server.hits(), 0, "{what} was reached");
        }
        let allowed: Vec<_> = outcome
            .egress
            .iter()
            .filter(|event| event.verdict == EgressVerdict::Allowed)
            .collect();
        assert_eq!(allowed.len(), 3, "{:#?}", outcome.egress);
        assert!(
            allowed
                .iter()
                .all(|event| event.resolved == Some(A.parse().unwrap())
                    && event.bytes_in > 0
                    && event.bytes_out > 0)
        );
        denied(&outcome, "b.test", 80);
        denied(&outcome, "127.0.0.1", 80);
        let loop_name = denied(&outcome, "loop.test", 80);
        assert!(
            loop_name.verdict.reason().unwrap().contains("loopback"),
            "{loop_name:?}"
        );
        let metadata = denied(&outcome, "meta.test", 80);
        assert_eq!(metadata.resolved, Some(METADATA.parse().unwrap()));
        denied(&outcome, "a.test", 8080);
    });
}
