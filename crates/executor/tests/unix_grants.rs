//! Unix socket grants (`network = ["unix:/path"]`) against listeners this
//! test makes in a temporary directory (two paths, plus an abstract name):
//! a run granted one path reaches it and nothing else, whatever form, race or
//! detour it tries (`tests/hostile/egress/unix_grants.py`). Each listener
//! counts its connections, so every refusal is also checked from outside.

#![expect(
    clippy::print_stderr,
    reason = "unavailable kernel features must be announced loudly"
)]

use std::ffi::OsStr;
use std::io::Write;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use toolsmith_executor::{
    BackendChoice, Command, EgressEvent, EgressProtocol, EgressVerdict, Error, Executor,
    ExecutorConfig, LimitKind, Limits, Outcome, Privileges, RunAs, Sandbox, Syscalls,
};

#[path = "support/proxied.rs"]
mod proxied;
use proxied::{command, proxied};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/hostile/egress")
        .join(name)
}

/// A listener that answers each connection with its label and counts them.
struct Server {
    hits: Arc<AtomicUsize>,
}

impl Server {
    fn serve(listener: UnixListener, label: &'static str) -> Server {
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let _ignored = writeln!(stream, "{label}");
            }
        });
        Server { hits }
    }

    /// A listener that answers each connection with its peer's uid (`SO_PEERCRED`).
    fn peer_uid(path: &Path) -> Server {
        let listener = UnixListener::bind(path).unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                // SAFETY: SO_PEERCRED writes one ucred.
                let mut credentials: libc::ucred = unsafe { std::mem::zeroed() };
                let mut size = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
                // SAFETY: as above, on the accepted socket.
                unsafe {
                    libc::getsockopt(
                        std::os::fd::AsRawFd::as_raw_fd(&stream),
                        libc::SOL_SOCKET,
                        libc::SO_PEERCRED,
                        (&raw mut credentials).cast(),
                        &raw mut size,
                    )
                };
                // One write: the client reads what one `recv` brings.
                let _ignored = stream.write_all(format!("uid {}\n", credentials.uid).as_bytes());
            }
        });
        Server { hits }
    }

    fn at(path: &Path, label: &'static str) -> Server {
        Server::serve(UnixListener::bind(path).unwrap(), label)
    }

    fn abstract_name(name: &str, label: &'static str) -> Server {
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        Server::serve(UnixListener::bind_addr(&address).unwrap(), label)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

fn executor() -> Executor {
    Executor::new(ExecutorConfig {
        backend: BackendChoice::Auto,
        max_concurrent: None,
    })
    .unwrap()
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(60),
        grace: Duration::from_millis(200),
        ..Limits::recommended()
    }
}

/// The outcome, or `None` (said loudly) when this kernel cannot enforce a
/// Unix socket grant and the run failed closed.
fn run(executor: &Executor, command: &Command) -> Option<Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match runtime.block_on(executor.run(command, &limits())) {
        Ok(outcome) => Some(outcome),
        Err(error @ Error::SandboxUnavailable { .. }) => {
            assert!(
                std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
                "Unix socket grants are required: {error}"
            );
            eprintln!("WARNING: Unix socket grants unavailable ({error}), the test is SKIPPED");
            None
        }
        Err(error) => panic!("{error}"),
    }
}

fn unix_events<'a>(outcome: &'a Outcome, target: &str) -> Vec<&'a EgressEvent> {
    outcome
        .egress
        .iter()
        .filter(|event| event.protocol == EgressProtocol::Unix && event.destination == target)
        .collect()
}

#[test]
fn a_granted_unix_socket_is_reached_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let writable = tempfile::tempdir().unwrap();
    let (path_a, path_b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let a = Server::at(&path_a, "granted");
    let b = Server::at(&path_b, "other");
    let name = format!("toolsmith-test-{}", std::process::id());
    let abstract_server = Server::abstract_name(&name, "abstract");
    let (path_a, path_b) = (path_a.to_str().unwrap(), path_b.to_str().unwrap());
    let args = [path_a, path_b, &name, writable.path().to_str().unwrap()];
    let executor = executor();
    let Some(outcome) = run(
        &executor,
        &command(
            &script("unix_grants.py"),
            &args,
            proxied(&[&format!("unix:{path_a}")]),
        ),
    ) else {
        return;
    };
    let stdout = outcome.stdout.text_lossy();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        outcome.success() && lines.first() == Some(&"granted: granted"),
        "{stdout}\n{}",
        outcome.stderr.text_lossy()
    );
    assert!(!stdout.contains("ESCAPED"), "{stdout}");
    assert_eq!(
        lines
            .iter()
            .filter(|line| line.starts_with("held: "))
            .count(),
        15,
        "{stdout}"
    );
    let reported: usize = lines
        .last()
        .and_then(|line| line.strip_prefix("granted-connects: "))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    // Checked from outside: the granted listener saw exactly the script's
    // granted connects (the races included), the others nothing.
    assert_eq!(a.hits(), reported, "{stdout}");
    assert_eq!(b.hits(), 0, "the other socket was reached: {stdout}");
    assert_eq!(abstract_server.hits(), 0, "the abstract name was reached");
    let allowed = unix_events(&outcome, &format!("unix:{path_a}"));
    assert!(
        allowed
            .iter()
            .filter(|event| event.verdict == EgressVerdict::Allowed)
            .count()
            >= 1
    );
    for target in [
        format!("unix:{path_b}"),
        format!("unix:@{name}"),
        format!("unix:{}/link.sock", writable.path().display()),
        format!("unix:/proc/self/root{path_b}"),
    ] {
        let events = unix_events(&outcome, &target);
        assert!(
            events
                .iter()
                .any(|event| matches!(event.verdict, EgressVerdict::Denied(_))),
            "no denial of {target}: {:#?}",
            outcome.egress
        );
    }
    // The same script with the whole network reaches the other socket: the
    // test can fail.
    let open = run(
        &executor,
        &command(&script("unix_grants.py"), &args, Sandbox::none()),
    )
    .unwrap();
    assert!(open.stdout.text_lossy().contains("ESCAPED"), "{open:?}");
    assert!(b.hits() > 0);
}

/// A Python program run under `sandbox` with `args` as `sys.argv[1:]`.
fn python(executor: &Executor, code: &str, args: &[&str], sandbox: Sandbox) -> Option<Outcome> {
    let mut all = vec!["-c", code];
    all.extend_from_slice(args);
    run(
        executor,
        &command(Path::new("/usr/bin/python3"), &all, sandbox),
    )
}

const CONNECT: &str = "
import socket, sys
for path in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.settimeout(5)
        print('reached ' + s.recv(64).decode().strip())
    except OSError as error:
        print('refused ' + error.strerror)
";

#[test]
fn a_symlink_grant_is_taken_literally() {
    let dir = tempfile::tempdir().unwrap();
    let (path_a, path_b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let a = Server::at(&path_a, "a");
    let b = Server::at(&path_b, "b");
    // A grant that names a symlink (to a), and a granted socket (c) that the
    // tool replaces with a symlink to b before it connects.
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&path_a, &link).unwrap();
    let path_c = dir.path().join("c.sock");
    let c = Server::at(&path_c, "c");
    let (link, path_b, path_c) = (
        link.to_str().unwrap(),
        path_b.to_str().unwrap(),
        path_c.to_str().unwrap(),
    );
    let code =
        format!("import os\nos.remove('{path_c}')\nos.symlink('{path_b}', '{path_c}')\n{CONNECT}");
    let executor = executor();
    let Some(outcome) = python(
        &executor,
        &code,
        &[link, path_c],
        proxied(&[&format!("unix:{link}"), &format!("unix:{path_c}")]),
    ) else {
        return;
    };
    assert_eq!(
        outcome.stdout.text_lossy(),
        "refused Connection refused\nrefused Connection refused\n",
        "{outcome:?}"
    );
    assert_eq!((a.hits(), b.hits(), c.hits()), (0, 0, 0));
    for target in [link, path_c] {
        let events = unix_events(&outcome, &format!("unix:{target}"));
        assert!(
            events.iter().any(|event| matches!(&event.verdict,
                EgressVerdict::Failed(reason) if reason.contains("symbolic link"))),
            "{:#?}",
            outcome.egress
        );
    }
}

/// The kernel connects by inode: a hard link to another socket, put at a
/// granted path by a tool that may write there, must not reach that socket.
#[test]
fn a_hard_link_to_another_socket_at_a_granted_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (granted_path, other) = (dir.path().join("app.sock"), dir.path().join("engine.sock"));
    let app = Server::at(&granted_path, "app");
    let engine = Server::at(&other, "engine");
    let (granted_path, other) = (granted_path.to_str().unwrap(), other.to_str().unwrap());
    let code = format!(
        "import os\nos.link('{other}', '{granted_path}.new')\nos.replace('{granted_path}.new', '{granted_path}')\n{CONNECT}"
    );
    let executor = executor();
    let Some(outcome) = python(
        &executor,
        &code,
        &[granted_path],
        proxied(&[&format!("unix:{granted_path}")]),
    ) else {
        return;
    };
    assert_eq!(
        outcome.stdout.text_lossy(),
        "refused Connection refused\n",
        "{outcome:?}"
    );
    assert_eq!((app.hits(), engine.hits()), (0, 0));
    assert!(
        unix_events(&outcome, &format!("unix:{granted_path}"))
            .iter()
            .any(|event| matches!(&event.verdict,
                EgressVerdict::Failed(reason) if reason.contains("hard links"))),
        "{:#?}",
        outcome.egress
    );
}

const UNDER_SIGNALS: &str = "
import ctypes, errno, signal, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
path = sys.argv[1].encode()
address = ctypes.create_string_buffer(socket.AF_UNIX.to_bytes(2, sys.byteorder) + path + bytes(1), 110)
signal.signal(signal.SIGALRM, lambda *_: None)
signal.setitimer(signal.ITIMER_REAL, 0.00002, 0.00002)
failures = {}
for _ in range(1000):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while libc.connect(s.fileno(), address, 110) != 0:
        if ctypes.get_errno() != errno.EINTR:
            name = errno.errorcode.get(ctypes.get_errno(), '?')
            failures[name] = failures.get(name, 0) + 1
            break
    s.close()
signal.setitimer(signal.ITIMER_REAL, 0, 0)
print('failures: %r' % failures)
";

/// A program interrupted by signals while it waits for the supervisor
/// (timers, a runtime's preemption) may see `EINTR`, but only before the
/// supervisor took the call: retrying then connects, as without a sandbox,
/// never a second connect of a connected socket failing with `EISCONN`.
#[test]
fn a_granted_connect_survives_signals() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sock");
    let _a = Server::at(&path, "a");
    let path = path.to_str().unwrap();
    let executor = executor();
    let Some(outcome) = python(
        &executor,
        UNDER_SIGNALS,
        &[path],
        proxied(&[&format!("unix:{path}")]),
    ) else {
        return;
    };
    assert_eq!(
        outcome.stdout.text_lossy(),
        "failures: {}\n",
        "{}",
        outcome.stderr.text_lossy()
    );
}

const INET: &str = "
import errno, socket, sys
server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.bind(('127.0.0.1', 0)); server.listen(8)
client = socket.create_connection(server.getsockname(), timeout=5)
print('inet: ' + ('ok' if server.accept() else 'no'))
quick = socket.socket(socket.AF_INET, socket.SOCK_STREAM); quick.setblocking(False)
code = quick.connect_ex(server.getsockname())
print('nonblocking: ' + ('ok' if code in (0, errno.EINPROGRESS) else errno.errorcode[code]))
proxy = socket.create_connection(('127.0.0.1', 3128), timeout=5)
print('proxy: ok')
netlink = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
try:
    netlink.connect((0, 1))
    print('netlink group: connected')
except OSError as error:
    print('netlink group: ' + errno.errorcode[error.errno])
";

#[test]
fn ip_sockets_keep_working_beside_a_unix_grant() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sock");
    let _a = Server::at(&path, "a");
    let executor = executor();
    let grant = proxied(&[&format!("unix:{}", path.display())]);
    // With its capabilities a tool may connect a netlink socket to a group.
    let Some(outcome) = python(&executor, INET, &[], grant.clone()) else {
        return;
    };
    assert_eq!(
        outcome.stdout.text_lossy(),
        "inet: ok\nnonblocking: ok\nproxy: ok\nnetlink group: connected\n",
        "{outcome:?}"
    );
    // Without them, the supervisor's connect does not lend it toolsmith's.
    let dropped = Sandbox {
        privileges: Privileges::Drop(None),
        ..grant
    };
    let outcome = python(&executor, INET, &[], dropped).unwrap();
    assert_eq!(
        outcome.stdout.text_lossy(),
        "inet: ok\nnonblocking: ok\nproxy: ok\nnetlink group: EPERM\n",
        "{outcome:?}"
    );
}

#[test]
fn a_prepared_sandbox_enforces_its_unix_grant() {
    let dir = tempfile::tempdir().unwrap();
    let (path_a, path_b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let a = Server::at(&path_a, "a");
    let b = Server::at(&path_b, "b");
    let (path_a, path_b) = (path_a.to_str().unwrap(), path_b.to_str().unwrap());
    let executor = executor();
    executor.keep_prepared(true);
    let sandbox = Sandbox {
        private_pids: true,
        ..proxied(&[&format!("unix:{path_a}")])
    };
    // The first call prepares the next one's sandbox, which the second call uses.
    for _ in 0..3 {
        let Some(outcome) = python(&executor, CONNECT, &[path_a, path_b], sandbox.clone()) else {
            return;
        };
        assert_eq!(
            outcome.stdout.text_lossy(),
            "reached a\nrefused Permission denied\n",
            "{outcome:?}"
        );
    }
    assert_eq!((a.hits(), b.hits()), (3, 0));
}

const LATENCY: &str = "
import socket, sys, time
def connects(path):
    start = time.perf_counter()
    for _ in range(200):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(path); s.recv(8); s.close()
    return (time.perf_counter() - start) / 200 * 1e6
print('%.1f' % connects(sys.argv[1]))
";

/// Not a speed claim (those are `cargo xtask bench`'s): prints the mean
/// connect latency to a granted socket, through the supervisor, beside the
/// same connects without a sandbox, and bounds only liveness.
#[test]
fn a_granted_connect_latency_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sock");
    let a = Server::at(&path, "a");
    let path = path.to_str().unwrap();
    let executor = executor();
    let started = Instant::now();
    let Some(granted_run) = python(
        &executor,
        LATENCY,
        &[path],
        proxied(&[&format!("unix:{path}")]),
    ) else {
        return;
    };
    let open_run = python(&executor, LATENCY, &[path], Sandbox::none()).unwrap();
    assert!(
        granted_run.success() && open_run.success(),
        "{granted_run:?}"
    );
    assert_eq!(a.hits(), 400);
    eprintln!(
        "granted connect: {} us, unsandboxed: {} us",
        granted_run.stdout.text_lossy().trim(),
        open_run.stdout.text_lossy().trim()
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// The supervisor connects with the tool's identity: a socket the tool's uid
/// may not open stays closed to it, and the server sees the tool's uid.
#[test]
fn a_granted_connect_is_made_with_the_tools_identity() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("WARNING: not root, run_as is unavailable: the identity test is SKIPPED");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (open_path, closed_path) = (dir.path().join("open.sock"), dir.path().join("closed.sock"));
    let open = Server::peer_uid(&open_path);
    let closed = Server::at(&closed_path, "closed");
    std::fs::set_permissions(&open_path, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&closed_path, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (open_path, closed_path) = (open_path.to_str().unwrap(), closed_path.to_str().unwrap());
    let sandbox = Sandbox {
        privileges: Privileges::Drop(Some(RunAs::new(65534, 65534))),
        ..proxied(&[&format!("unix:{open_path}"), &format!("unix:{closed_path}")])
    };
    let executor = executor();
    let Some(outcome) = python(&executor, CONNECT, &[open_path, closed_path], sandbox) else {
        return;
    };
    assert_eq!(
        outcome.stdout.text_lossy(),
        "reached uid 65534\nrefused Permission denied\n",
        "{outcome:?}"
    );
    assert_eq!((open.hits(), closed.hits()), (1, 0));
    // The same grants for a tool run as root: the server sees uid 0, and the
    // closed socket opens (its owner is root): the test can fail.
    let as_root = python(
        &executor,
        CONNECT,
        &[open_path, closed_path],
        proxied(&[&format!("unix:{open_path}"), &format!("unix:{closed_path}")]),
    )
    .unwrap();
    assert_eq!(
        as_root.stdout.text_lossy(),
        "reached uid 0\nreached closed\n"
    );
}

/// The runs of a session share one init, so one filter and one listener:
/// each run's supervisor answers its own connects.
#[test]
fn each_run_of_a_session_is_supervised() {
    let dir = tempfile::tempdir().unwrap();
    let (path_a, path_b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let a = Server::at(&path_a, "a");
    let b = Server::at(&path_b, "b");
    let (path_a, path_b) = (path_a.to_str().unwrap(), path_b.to_str().unwrap());
    let executor = Arc::new(executor());
    let session = executor.session();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sandbox = Sandbox {
        private_pids: true,
        ..proxied(&[&format!("unix:{path_a}")])
    };
    for round in 1..=3 {
        let mut all = vec!["-c", CONNECT];
        all.extend_from_slice(&[path_a, path_b]);
        let command = command(Path::new("/usr/bin/python3"), &all, sandbox.clone());
        let outcome = match runtime.block_on(session.run(&command, &limits())) {
            Ok(outcome) => outcome,
            Err(error @ Error::SandboxUnavailable { .. }) => {
                eprintln!("WARNING: Unix socket grants unavailable ({error}), SKIPPED");
                return;
            }
            Err(error) => panic!("{error}"),
        };
        assert_eq!(
            outcome.stdout.text_lossy(),
            "reached a\nrefused Permission denied\n",
            "round {round}: {outcome:?}"
        );
        assert!(
            unix_events(&outcome, &format!("unix:{path_b}"))
                .iter()
                .any(|event| matches!(event.verdict, EgressVerdict::Denied(_))),
            "round {round}: {:#?}",
            outcome.egress
        );
    }
    assert_eq!((a.hits(), b.hits()), (3, 0));
}

/// Without the system-call filter nothing keeps a run's Unix sockets to the
/// granted paths: the run fails closed, naming why.
#[test]
fn a_unix_grant_without_the_filter_fails_closed() {
    let sandbox = Sandbox {
        syscalls: Syscalls::Unfiltered,
        ..proxied(&["unix:/run/a.sock"])
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let refused = runtime
        .block_on(executor().run(&command(Path::new("/bin/true"), &[], sandbox), &limits()))
        .unwrap_err();
    assert!(
        matches!(&refused, Error::SandboxUnavailable { reason, .. } if reason.contains("filter is off")),
        "{refused}"
    );
}

/// A listener at `path` that never accepts, with the smallest backlog: the
/// second connection to it waits until the connecting side gives up.
fn never_accepts(path: &Path) -> UnixListener {
    let listener = UnixListener::bind(path).unwrap();
    // SAFETY: listen again on our socket, to shrink its backlog.
    assert_eq!(
        unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), 0) },
        0
    );
    listener
}

/// Red team (`tests/hostile/egress/unix_wedge.py`): the supervisor makes each
/// connect itself, so a connect that never ends would hold it, and the call
/// with it. A socket with its own three-year send timeout, another thread
/// rewriting the timeout and `O_NONBLOCK` during the connect, and 200 threads
/// connecting at once to a granted server that never accepts must each end
/// within the supervisor's bound (10 s); the run must end soon after its
/// deadline, the connect then in progress ended at once (checked from
/// outside), and a concurrent run granted another socket is served meanwhile. It failed before the fix: the
/// supervisor bounded only sockets without a timeout of their own, and the
/// run never returned.
#[test]
fn no_connect_holds_the_supervisor_or_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let (slow, path_a, other) = (
        dir.path().join("slow.sock"),
        dir.path().join("a.sock"),
        dir.path().join("other.sock"),
    );
    let _slow = never_accepts(&slow);
    let a = Server::at(&path_a, "a");
    let other_server = Server::at(&other, "other");
    let (slow, path_a, other) = (
        slow.to_str().unwrap().to_owned(),
        path_a.to_str().unwrap().to_owned(),
        other.to_str().unwrap().to_owned(),
    );
    let executor = Arc::new(executor());
    let deadline = Duration::from_secs(24);
    let wedged = {
        let (executor, slow, other) = (Arc::clone(&executor), slow.clone(), other.clone());
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut command = command(
                &script("unix_wedge.py"),
                &[&slow, &other],
                proxied(&[&format!("unix:{slow}")]),
            );
            command.env(OsStr::new("PYTHONDONTWRITEBYTECODE"), OsStr::new("1"));
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let limits = Limits {
                timeout: deadline,
                ..limits()
            };
            let _ignored = sender.send(runtime.block_on(executor.run(&command, &limits)));
        });
        receiver
    };
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    let Some(beside) = python(
        &executor,
        CONNECT,
        &[&path_a],
        proxied(&[&format!("unix:{path_a}")]),
    ) else {
        return;
    };
    assert_eq!(beside.stdout.text_lossy(), "reached a\n", "{beside:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "{beside:?}");
    assert_eq!(a.hits(), 1);
    // The deadline + slack for this loaded machine: the connect in progress at the run's end
    // is ended then, not at its own bound.
    let outcome = match wedged.recv_timeout(deadline + Duration::from_secs(8)) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(error)) => panic!("{error}"),
        Err(_) => panic!("the wedged run did not return within its deadline plus 8 s"),
    };
    eprintln!("the wedged run took {:?}", outcome.wall_time);
    let stdout = outcome.stdout.text_lossy();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(outcome.limit, Some(LimitKind::Timeout), "{outcome:?}");
    assert_eq!(lines.len(), 5, "{stdout}\n{}", outcome.stderr.text_lossy());
    assert!(
        lines[..4].iter().all(|line| line.starts_with("held: ")),
        "{stdout}"
    );
    assert_eq!(lines[4], "flooding");
    assert_eq!(other_server.hits(), 0);
}
