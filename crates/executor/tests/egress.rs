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
    BackendChoice, Command, EgressEvent, EgressVerdict, Executor, ExecutorConfig, Limits, Outcome,
    Sandbox,
};

#[path = "support/proxied.rs"]
mod proxied;
use proxied::{command, proxied};

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

#[expect(
    clippy::disallowed_methods,
    reason = "setting up the test's own network namespace, not running a tool"
)]
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
        assert_eq!(
            hosts.a.hits(),
            2,
            "HTTP and SOCKS5 reached a.test:80: {:#?}",
            outcome.egress
        );
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

/// Runs a hostile script under `sandbox` and checks that it printed `lines`
/// lines, each `held: ...` (none `ESCAPED: ...`).
fn held(executor: &Executor, name: &str, args: &[&str], sandbox: Sandbox, lines: usize) -> Outcome {
    let outcome = run(executor, &command(&script(name), args, sandbox));
    let stdout = outcome.stdout.text_lossy();
    assert!(
        stdout.lines().count() == lines && stdout.lines().all(|line| line.starts_with("held: ")),
        "{name}: {stdout}\nstderr: {}\n{:#?}",
        outcome.stderr.text_lossy(),
        outcome.egress
    );
    outcome
}

#[test]
fn an_address_literal_reaches_only_what_a_grant_names() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let outcome = held(&executor, "raw_ip.sh", &[B], proxied(&["a.test"]), 3);
        assert_eq!(hosts.b.hits(), 0);
        assert_eq!(
            outcome
                .egress
                .iter()
                .filter(|event| event.destination == B)
                .count(),
            3
        );
        // The same address granted literally is reached: the test can fail.
        let granted = run(
            &executor,
            &command(&script("raw_ip.sh"), &[B], proxied(&[B])),
        );
        assert_eq!(granted.stdout.text_lossy().matches("ESCAPED").count(), 3);
        assert_eq!(hosts.b.hits(), 3);
    });
}

#[test]
fn ipv6_forms_of_loopback_are_refused() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let outcome = held(&executor, "ipv6_literal.sh", &[], proxied(&["a.test"]), 8);
        assert_eq!(hosts.loopback.hits(), 0);
        assert!(
            outcome
                .egress
                .iter()
                .all(|event| matches!(event.verdict, EgressVerdict::Denied(_)))
        );
    });
}

#[test]
fn a_tunnel_to_a_port_not_granted_is_refused() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let outcome = held(
            &executor,
            "connect_port.sh",
            &["8080"],
            proxied(&["a.test"]),
            2,
        );
        assert_eq!(hosts.a_other.hits(), 0);
        denied(&outcome, "a.test", 8080);
        // Granted with its port, it is reached: the test can fail.
        let granted = run(
            &executor,
            &command(
                &script("connect_port.sh"),
                &["8080"],
                proxied(&["a.test:8080"]),
            ),
        );
        assert_eq!(granted.stdout.text_lossy().matches("ESCAPED").count(), 2);
        assert_eq!(hosts.a_other.hits(), 2);
    });
}

#[test]
fn a_rebound_name_is_checked_again() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let signal = tempfile::tempdir().unwrap();
        let rebound = signal.path().join("rebound");
        let path = hosts.file.path().to_path_buf();
        let a_hits = Arc::clone(&hosts.a.hits);
        let marker = rebound.clone();
        // Rebinds a.test to loopback as soon as its first connection arrives.
        let rebinder = std::thread::spawn(move || {
            for _ in 0..400 {
                if a_hits.load(Ordering::SeqCst) > 0 {
                    std::fs::write(&path, "127.0.0.1 a.test\n").unwrap();
                    std::fs::write(&marker, "").unwrap();
                    return;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        });
        let outcome = run(
            &executor,
            &command(
                &script("rebinding.sh"),
                &[rebound.to_str().unwrap()],
                proxied(&["a.test"]),
            ),
        );
        rebinder.join().unwrap();
        assert_eq!(
            outcome.stdout.text_lossy(),
            "first: hello from a\nheld: the rebound name was refused\n",
            "{:#?}",
            outcome.egress
        );
        assert_eq!(hosts.loopback.hits(), 0);
        let second = denied(&outcome, "a.test", 80);
        assert_eq!(second.resolved, Some("127.0.0.1".parse().unwrap()));
    });
}

#[test]
fn socks4_and_other_socks_commands_are_refused() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        held(&executor, "socks4.py", &[B], proxied(&["b.test", B]), 4);
        assert_eq!(hosts.b.hits(), 0);
    });
}

#[test]
fn udp_and_icmp_leave_nothing() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let udp = std::net::UdpSocket::bind((A, 0)).unwrap();
        udp.set_nonblocking(true).unwrap();
        let port = udp.local_addr().unwrap().port().to_string();
        held(
            &executor,
            "udp_icmp.py",
            &[A, &port],
            proxied(&["any", A]),
            3,
        );
        let mut buffer = [0u8; 16];
        assert!(udp.recv_from(&mut buffer).is_err(), "a datagram arrived");
    });
}

#[test]
fn a_unix_socket_not_listed_is_out_of_reach() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let path = path.to_str().unwrap();
        held(
            &executor,
            "unix_socket.py",
            &[path],
            proxied(&["a.test"]),
            3,
        );
        assert!(listener.accept().is_err(), "the Unix socket was reached");
        // With the whole network the same script reaches it: the test can fail
        // (a pathname socket is reached from any network namespace).
        let open = run(
            &executor,
            &command(&script("unix_socket.py"), &[path], Sandbox::none()),
        );
        assert!(
            open.stdout
                .text_lossy()
                .contains("ESCAPED: unix stream connected")
        );
    });
}

#[test]
fn a_program_that_ignores_the_proxy_gets_a_clear_error() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let outcome = held(
            &executor,
            "direct.py",
            &[A, "80"],
            proxied(&["a.test", A]),
            2,
        );
        assert!(
            outcome.stdout.text_lossy().contains("unreachable"),
            "{}",
            outcome.stdout.text_lossy()
        );
        assert_eq!(hosts.a.hits(), 0);
        assert!(outcome.egress.is_empty());
        // The script sees a connection that succeeds (to its own proxy's port):
        // the test can fail. (A run with the whole network would start in the
        // namespace of the executor's spawner thread, not this test's.)
        let open = run(
            &executor,
            &command(&script("direct.py"), &["127.0.0.1", "3128"], proxied(&[])),
        );
        assert!(open.stdout.text_lossy().starts_with("ESCAPED"), "{open:?}");
    });
}

#[test]
fn another_runs_proxy_is_out_of_reach() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // The other run holds its proxy (granted b.test) open while this one tries.
        let mut holder = command(Path::new("/bin/sleep"), &["3"], proxied(&["b.test"]));
        holder.env(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"));
        let attacker = command(&script("other_run.sh"), &[], proxied(&["a.test"]));
        let limits = limits();
        let (holder, attacker) = runtime.block_on(async {
            tokio::join!(
                executor.run(&holder, &limits),
                executor.run(&attacker, &limits)
            )
        });
        let (holder, attacker) = (holder.unwrap(), attacker.unwrap());
        let stdout = attacker.stdout.text_lossy();
        assert_eq!(stdout.matches("held: ").count(), 3, "{stdout}");
        assert_eq!(hosts.b.hits(), 0);
        assert!(holder.egress.is_empty());
        assert_eq!(attacker.egress.len(), 3);
    });
}

#[test]
fn a_smuggled_host_header_reaches_only_the_checked_address() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        let outcome = held(&executor, "host_header.py", &[], proxied(&["a.test"]), 1);
        assert_eq!(hosts.b.hits(), 0);
        assert_eq!(hosts.a.hits(), 1);
        assert_eq!(outcome.egress.len(), 1);
    });
}

#[test]
fn a_prepared_sandbox_serves_its_call_through_its_own_proxy() {
    in_test_network(|hosts| {
        let executor = executor(hosts);
        executor.keep_prepared(true);
        let sandbox = Sandbox {
            private_pids: true,
            ..proxied(&["a.test"])
        };
        let curl = Path::new("/usr/bin/curl");
        // The first call prepares the next one's sandbox, which the second call uses.
        for _ in 0..3 {
            let outcome = run(
                &executor,
                &command(curl, &["-sf", "-m", "5", "http://a.test/"], sandbox.clone()),
            );
            assert_eq!(outcome.stdout.text_lossy(), "hello from a", "{outcome:?}");
            assert_eq!(outcome.egress.len(), 1, "{:#?}", outcome.egress);
        }
        assert_eq!(hosts.a.hits(), 3);
    });
}

/// `tcp_rmem` ("min default max") as three numbers.
fn receive_memory(text: &str) -> [u64; 3] {
    let numbers: Vec<u64> = text
        .split_whitespace()
        .map(|word| word.parse().unwrap())
        .collect();
    numbers.try_into().unwrap()
}

/// A proxied run's sockets start with a wide receive window (`egress/window.rs`), set in
/// its own network namespace before `/proc/sys` became read-only for it, with private
/// mounts and without, prepared or not; the host's default stays as it was.
#[test]
fn a_proxied_runs_sockets_start_with_a_wide_window_and_the_hosts_stay() {
    let host = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap();
    let [_, _, max] = receive_memory(&host);
    let executor = Executor::new(ExecutorConfig {
        backend: BackendChoice::Auto,
        max_concurrent: None,
    })
    .unwrap();
    executor.keep_prepared(true);
    let cat = Path::new("/bin/cat");
    for private in [false, true] {
        let sandbox = Sandbox {
            private_pids: private,
            private_mounts: private,
            ..proxied(&["a.test"])
        };
        // The first call prepares the next one's sandbox, which the second call uses.
        for _ in 0..2 {
            let outcome = run(
                &executor,
                &command(cat, &["/proc/sys/net/ipv4/tcp_rmem"], sandbox.clone()),
            );
            assert!(outcome.success(), "{outcome:?}");
            let [_, default, run_max] = receive_memory(&outcome.stdout.text_lossy());
            assert_eq!(run_max, max, "the maximum is kept");
            assert!(
                default >= (4 << 20u64).min(max),
                "private mounts {private}: {outcome:?}"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap(),
        host
    );
}
