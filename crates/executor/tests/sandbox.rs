//! Sandbox profiles against hostile programs (`tests/hostile/sandbox/`):
//! a connection to a listener the test owns, writes outside the allowed
//! directories, and a hunt for the executor's environment in `/proc`.
//!
//! Each mechanism is also run without its sandbox, so a test that could not
//! fail is caught. A mechanism the kernel refuses is announced loudly and
//! skipped; `TOOLSMITH_REQUIRE_BACKENDS=1` makes it a failure.

#![expect(
    clippy::print_stderr,
    reason = "unavailable kernel features must be announced loudly"
)]

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toolsmith_executor::{
    BackendChoice, Command, Enforcement, Executor, ExecutorConfig, Filesystem, FilesystemAccess,
    Limits, Network, Outcome, Privileges, Probe, Sandbox, Syscalls,
};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/hostile/sandbox")
        .join(name)
}

fn executor() -> Executor {
    Executor::new(ExecutorConfig {
        backend: BackendChoice::Auto,
        max_concurrent: None,
    })
    .unwrap()
}

/// True when the feature is there; otherwise says so loudly (or fails).
fn available(name: &str, probe: &Probe) -> bool {
    if probe.available {
        return true;
    }
    assert!(
        std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
        "{name} is required but unavailable: {}",
        probe.detail
    );
    eprintln!(
        "WARNING: {name} UNAVAILABLE on this kernel, its sandbox test is SKIPPED: {}",
        probe.detail
    );
    false
}

fn run(
    executor: &Executor,
    program: &Path,
    args: &[&OsStr],
    cwd: &Path,
    sandbox: Sandbox,
) -> Outcome {
    let mut command = Command::new(program, cwd).unwrap();
    for arg in args {
        command.arg(arg);
    }
    command.env(
        OsStr::new("PATH"),
        OsStr::new("/usr/local/bin:/usr/bin:/bin"),
    );
    command.sandbox(sandbox);
    let limits = Limits {
        timeout: Duration::from_secs(10),
        grace: Duration::from_millis(200),
        ..Limits::recommended()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(executor.run(&command, &limits)).unwrap()
}

fn sandbox(network: Network, filesystem: Filesystem, private_pids: bool) -> Sandbox {
    Sandbox {
        network,
        filesystem,
        private_pids,
        ..Sandbox::none()
    }
}

#[test]
fn network_deny_refuses_the_hosts_loopback_and_allow_reaches_it() {
    let executor = executor();
    if !available("network namespace", &executor.features().network_namespace) {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let connect = script("connect.sh");
    let args = [OsStr::new(&port)];

    let denied = run(
        &executor,
        &connect,
        &args,
        Path::new("/"),
        sandbox(
            Network::Deny(Enforcement::Required),
            Filesystem::Full,
            false,
        ),
    );
    assert!(denied.success(), "{denied:?}");
    assert_eq!(denied.stdout.text_lossy(), "refused\n");
    assert!(denied.sandbox.network_denied);

    let allowed = run(&executor, &connect, &args, Path::new("/"), Sandbox::none());
    assert_eq!(allowed.stdout.text_lossy(), "connected\n");
    assert!(!allowed.sandbox.network_denied);
    // The allowed connection really reached the test's listener.
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_ok());
}

#[test]
fn private_pids_hide_the_executors_environment() {
    let executor = executor();
    if !available("private /proc", &executor.features().private_proc) {
        return;
    }
    // Cargo puts this in the test process's initial environment; the tool's
    // own environment holds only PATH.
    let secret = format!("CARGO_MANIFEST_DIR={}", env!("CARGO_MANIFEST_DIR"));
    assert!(
        std::fs::read("/proc/self/environ")
            .unwrap()
            .windows(secret.len())
            .any(|window| window == secret.as_bytes())
    );
    let environ = script("environ.sh");
    let args = [OsStr::new(&secret)];

    // The only other process the tool sees is toolsmith's init (PID 1, its
    // parent), which shares the executor's memory: a tool without
    // CAP_SYS_PTRACE cannot read it (the init made it non-dumpable). A root
    // tool keeps that capability unless its capabilities are dropped (issue
    // 11's capability drop does it for every tool), so the hunt runs without
    // any, as every tool will.
    let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .map(Path::new)
        .find(|path| path.exists())
    else {
        eprintln!("WARNING: setpriv is missing: the private /proc hunt is UNTESTED");
        return;
    };
    let mut hunt = vec![
        OsStr::new("--bounding-set=-all"),
        OsStr::new("--inh-caps=-all"),
        OsStr::new("--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked"),
        OsStr::new("--"),
        environ.as_os_str(),
    ];
    hunt.extend(args);
    let hidden = run(
        &executor,
        setpriv,
        &hunt,
        Path::new("/"),
        sandbox(Network::Allow, Filesystem::Full, true),
    );
    assert!(hidden.sandbox.private_pids);
    assert_eq!(hidden.stdout.text_lossy(), "ppid=1\ndone\n");

    let exposed = run(&executor, &environ, &args, Path::new("/"), Sandbox::none());
    let seen = exposed.stdout.text_lossy();
    assert!(
        seen.contains("parent-environ: secret found")
            && seen.contains(&format!("secret in /proc/{}/environ", std::process::id())),
        "without the sandbox the hole is open, as the test expects: {seen}"
    );
}

#[test]
fn project_filesystem_allows_writes_only_below_the_project_and_the_private_tmp() {
    let executor = executor();
    if !available("landlock", &executor.features().landlock) {
        return;
    }
    let project = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let write = script("write.sh");
    let args = [
        project.path().as_os_str(),
        outside.path().as_os_str(),
        OsStr::new("$TMPDIR"),
    ];
    let sh_args: Vec<&OsStr> = [
        OsStr::new("-c"),
        OsStr::new("exec \"$0\" \"$1\" \"$2\" \"$TMPDIR\""),
    ]
    .into_iter()
    .chain([write.as_os_str()])
    .chain(args[..2].iter().copied())
    .collect();

    let outcome = run(
        &executor,
        Path::new("/bin/sh"),
        &sh_args,
        project.path(),
        sandbox(
            Network::Allow,
            Filesystem::Project {
                root: project.path().to_path_buf(),
                enforcement: Enforcement::Required,
            },
            false,
        ),
    );
    assert_eq!(outcome.sandbox.filesystem, FilesystemAccess::Project);
    let printed = outcome.stdout.text_lossy();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines[0], format!("wrote {}", project.path().display()));
    assert_eq!(lines[1], format!("denied {}", outside.path().display()));
    assert!(
        lines[2].starts_with("wrote ") && lines[2].contains("toolsmith-run-"),
        "{printed}"
    );
    assert_eq!(lines[3], "wrote /dev/null");
    // The private temporary directory is gone after the run.
    let private_tmp = Path::new(lines[2].trim_start_matches("wrote "));
    assert!(
        !private_tmp.exists(),
        "{} was not removed",
        private_tmp.display()
    );

    let unrestricted = run(
        &executor,
        Path::new("/bin/sh"),
        &sh_args,
        project.path(),
        Sandbox::none(),
    );
    assert!(
        unrestricted
            .stdout
            .text_lossy()
            .contains(&format!("wrote {}", outside.path().display()))
    );
}

#[test]
fn read_only_filesystem_allows_writes_only_in_the_private_tmp() {
    let executor = executor();
    if !available("landlock", &executor.features().landlock) {
        return;
    }
    let project = tempfile::tempdir().unwrap();
    let write = script("write.sh");
    let outcome = run(
        &executor,
        Path::new("/bin/sh"),
        &[
            OsStr::new("-c"),
            OsStr::new("exec \"$0\" \"$1\" /tmp \"$TMPDIR\""),
            write.as_os_str(),
            project.path().as_os_str(),
        ],
        project.path(),
        sandbox(
            Network::Allow,
            Filesystem::ReadOnly(Enforcement::Required),
            false,
        ),
    );
    assert_eq!(outcome.sandbox.filesystem, FilesystemAccess::ReadOnly);
    let printed = outcome.stdout.text_lossy();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines[0], format!("denied {}", project.path().display()));
    assert_eq!(lines[1], "denied /tmp");
    assert!(
        lines[2].starts_with("wrote ") && lines[2].contains("toolsmith-run-"),
        "{printed}"
    );
    assert_eq!(lines[3], "wrote /dev/null");
}

#[test]
fn every_mechanism_together_still_runs_ordinary_programs() {
    let executor = executor();
    let features = executor.features();
    if !(available("network namespace", &features.network_namespace)
        && available("private /proc", &features.private_proc)
        && available("landlock", &features.landlock)
        && available("seccomp", &features.seccomp))
    {
        return;
    }
    let project = tempfile::tempdir().unwrap();
    let outcome = run(
        &executor,
        Path::new("/bin/sh"),
        &[
            OsStr::new("-c"),
            OsStr::new(
                "echo hi > out.txt && cat out.txt && set -- /proc/[0-9]* && echo $# && echo $$",
            ),
        ],
        project.path(),
        Sandbox {
            privileges: Privileges::Drop(None),
            syscalls: Syscalls::Filtered(Enforcement::Required),
            ..sandbox(
                Network::Deny(Enforcement::Required),
                Filesystem::Project {
                    root: project.path().to_path_buf(),
                    enforcement: Enforcement::Required,
                },
                true,
            )
        },
    );
    assert!(outcome.success(), "{outcome:?}");
    assert!(outcome.sandbox.capabilities_dropped && outcome.sandbox.syscall_filter);
    // toolsmith's init is PID 1, hidden from the tool (`hidepid=4`), the
    // shell PID 2, and nothing else lives in the namespace (the shell counts
    // with a glob: no process of its own, unlike `ls /proc | grep`, whose
    // count raced with the pipeline's forks).
    assert_eq!(outcome.stdout.text_lossy(), "hi\n1\n2\n");
    assert_eq!(outcome.leftovers_killed, Some(0));
}
