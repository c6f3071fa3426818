//! Read masks (`Sandbox::hidden`, `masks.rs`) and the runs' directory (`runs_dir.rs`), tried
//! by programs that run as the test's uid (root on CI) and checked from outside: under every
//! filesystem restriction, `full` included, a hidden path shows nothing and takes no write,
//! and no run reaches another run's TMPDIR.
//!
//! A mechanism the kernel refuses is announced loudly and skipped;
//! `TOOLSMITH_REQUIRE_BACKENDS=1` makes it a failure.

#![expect(
    clippy::print_stderr,
    reason = "unavailable kernel features must be announced loudly"
)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toolsmith_executor::{
    BackendChoice, Command, Enforcement, Executor, ExecutorConfig, Filesystem, Limits, Outcome,
    Sandbox,
};

fn executor() -> Executor {
    Executor::new(ExecutorConfig {
        backend: BackendChoice::Auto,
        max_concurrent: None,
    })
    .unwrap()
}

/// True when the run can have a mount namespace and the test runs as root (the case the
/// masks exist for: a root tool reads every file); otherwise says so loudly (or fails).
fn usable(executor: &Executor, test: &str) -> bool {
    let probe = &executor.features().private_mounts;
    let required = std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_some();
    if !probe.available {
        assert!(!required, "a mount namespace is required: {}", probe.detail);
        eprintln!(
            "WARNING: a mount namespace UNAVAILABLE, {test} SKIPPED: {}",
            probe.detail
        );
        return false;
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("WARNING: {test} needs root (a tool that reads every file); SKIPPED");
        return false;
    }
    true
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(10),
        grace: Duration::from_millis(200),
        ..Limits::recommended()
    }
}

fn command(script: &str, args: &[&OsStr], sandbox: Sandbox) -> Command {
    let mut command = Command::new(Path::new("/bin/sh"), Path::new("/")).unwrap();
    command
        .arg(OsStr::new("-c"))
        .arg(OsStr::new(script))
        .arg(OsStr::new("sh"));
    for arg in args {
        command.arg(arg);
    }
    command.env(
        OsStr::new("PATH"),
        OsStr::new("/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
    );
    command.sandbox(sandbox);
    command
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn sh(executor: &Executor, script: &str, args: &[&OsStr], sandbox: Sandbox) -> Outcome {
    runtime()
        .block_on(executor.run(&command(script, args, sandbox), &limits()))
        .unwrap()
}

/// The profiles a mask must hold under: `full` with and without a mount namespace asked for
/// (the masks ask for one themselves), `project` and `read-only`.
fn profiles(project: &Path) -> Vec<(&'static str, Sandbox)> {
    vec![
        ("none", Sandbox::none()),
        (
            "full",
            Sandbox {
                private_pids: true,
                private_mounts: true,
                ..Sandbox::none()
            },
        ),
        (
            "project",
            Sandbox {
                filesystem: Filesystem::Project {
                    root: project.to_path_buf(),
                    enforcement: Enforcement::IfPossible,
                },
                private_pids: true,
                private_mounts: true,
                ..Sandbox::none()
            },
        ),
        (
            "read-only",
            Sandbox {
                filesystem: Filesystem::ReadOnly(Enforcement::IfPossible),
                private_pids: true,
                private_mounts: true,
                ..Sandbox::none()
            },
        ),
    ]
}

/// What a root tool tries against a fake home whose `.ssh` and `.netrc` are hidden: read,
/// list, write, replace, hard-link, rename the home away (so that the next run's mask misses),
/// reach the files through `/proc/self/root` and through a directory descriptor opened on the
/// home, and find their content through `/proc/self/mountinfo`.
const ATTACKS: &str = r#"
home=$1
cat "$home/.ssh/id_ed25519" 2>/dev/null
ls -A "$home/.ssh" 2>/dev/null | sed 's/^/lists: /'
cat "$home/.netrc" 2>/dev/null
cat "/proc/self/root$home/.ssh/id_ed25519" 2>/dev/null
(cd "$home" && exec 3<. && cat /proc/self/fd/3/.ssh/id_ed25519) 2>/dev/null
echo planted > "$home/.ssh/planted" 2>/dev/null && echo "planted"
echo rewritten > "$home/.netrc" 2>/dev/null && echo "rewrote .netrc"
rm -rf "$home/.ssh" 2>/dev/null; rm -f "$home/.netrc" 2>/dev/null
ln "$home/.netrc" "$home/netrc-link" 2>/dev/null && cat "$home/netrc-link"
mv "$home" "$home-moved" 2>/dev/null && echo "moved the home"
mv "$(dirname "$home")" "$(dirname "$home")-moved" 2>/dev/null && echo "moved the home's parent"
grep -c SECRET /proc/self/mountinfo 2>/dev/null | grep -v '^0$'
echo "visible: $(grep -c "$home" /proc/self/mountinfo)"
true
"#;

#[test]
fn hidden_paths_show_nothing_and_take_nothing_under_every_profile() {
    let executor = executor();
    if !usable(
        &executor,
        "hidden_paths_show_nothing_and_take_nothing_under_every_profile",
    ) {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("homes").join("alice");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "SECRET key\n").unwrap();
    std::fs::write(home.join(".netrc"), "SECRET netrc\n").unwrap();
    let hidden: Vec<PathBuf> = [".ssh", ".netrc", ".aws"]
        .iter()
        .map(|name| home.join(name))
        .collect();
    for (name, base) in profiles(temp.path()) {
        let outcome = sh(
            &executor,
            ATTACKS,
            &[home.as_os_str()],
            Sandbox {
                hidden: hidden.clone(),
                ..base.clone()
            },
        );
        let stdout = outcome.stdout.text_lossy();
        assert!(
            outcome.sandbox.relaxed.is_empty(),
            "{name}: {:?}",
            outcome.sandbox.relaxed
        );
        assert_eq!(outcome.sandbox.hidden, 2, "{name}");
        // The mount points may be seen, never what lies under them.
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{name}: {stdout}");
        assert!(lines[0].starts_with("visible: "), "{name}: {stdout}");
        assert_eq!(
            std::fs::read_to_string(home.join(".ssh/id_ed25519")).unwrap(),
            "SECRET key\n",
            "{name}"
        );
        assert_eq!(
            std::fs::read_to_string(home.join(".netrc")).unwrap(),
            "SECRET netrc\n",
            "{name}"
        );
        assert!(!home.join(".ssh/planted").exists(), "{name}");
        assert!(!home.join("netrc-link").exists(), "{name}");
        assert!(home.exists(), "{name}: the home was moved");
    }
    // The same attacks without the masks: the test can fail.
    let stdout = sh(
        &executor,
        ATTACKS,
        &[home.as_os_str()],
        profiles(temp.path())[1].1.clone(),
    )
    .stdout
    .text_lossy();
    assert!(stdout.contains("SECRET key"), "{stdout}");
    assert!(stdout.contains("moved the home"), "{stdout}");
}

/// A run under `full` tries to reach a concurrent run's TMPDIR: list the runs' directory,
/// remove the other's mount point and put its own in its place (issue 23, Why 3). The other
/// run then checks that its TMPDIR is the one it had.
#[test]
fn no_run_reaches_another_runs_tmpdir() {
    let executor = executor();
    if !usable(&executor, "no_run_reaches_another_runs_tmpdir") {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let signal = temp.path().join("victim-ready");
    let done = temp.path().join("attacker-done");
    let victim = r#"
echo mine > "$TMPDIR/marker"
echo "$TMPDIR" > "$1"
while [ ! -e "$2" ]; do sleep 0.02; done
cat "$TMPDIR/marker"
ls -A "$TMPDIR"
"#;
    let attacker = r#"
while [ ! -s "$1" ]; do sleep 0.02; done
victim=$(cat "$1")
base=$(dirname "$victim")
ls -A "$base" 2>/dev/null | grep -v -x .hidden | sed 's/^/sees: /'
cat "$victim/marker" 2>/dev/null && echo "read the victim's file"
rm -rf "$victim" 2>/dev/null
rmdir "$victim" 2>/dev/null && echo "removed the victim's mount point"
mkdir -p "$victim" 2>/dev/null && echo theirs > "$victim/marker" 2>/dev/null && echo "planted"
touch "$2"
true
"#;
    let project = Sandbox {
        filesystem: Filesystem::Project {
            root: temp.path().to_path_buf(),
            enforcement: Enforcement::IfPossible,
        },
        private_pids: true,
        private_mounts: true,
        ..Sandbox::none()
    };
    let full = Sandbox {
        private_pids: true,
        private_mounts: true,
        ..Sandbox::none()
    };
    let args = [signal.as_os_str(), done.as_os_str()];
    let victim = command(victim, &args, project);
    let attacker = command(attacker, &args, full);
    let limits = limits();
    let (victim, attacker) = runtime().block_on(async {
        tokio::join!(
            executor.run(&victim, &limits),
            executor.run(&attacker, &limits)
        )
    });
    let (victim, attacker) = (victim.unwrap(), attacker.unwrap());
    assert_eq!(
        attacker.stdout.text_lossy(),
        "",
        "{:?}",
        attacker.stderr.text_lossy()
    );
    assert_eq!(victim.stdout.text_lossy(), "mine\nmarker\n");
}

/// True when the mask server records reads (`Features::read_watch`); otherwise says so loudly
/// (or fails under `TOOLSMITH_REQUIRE_BACKENDS`).
fn watched(executor: &Executor, test: &str) -> bool {
    let probe = &executor.features().read_watch;
    if probe.available {
        return true;
    }
    assert!(
        std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
        "the read-mask server is required: {}",
        probe.detail
    );
    eprintln!(
        "WARNING: the read-mask server UNAVAILABLE, {test} SKIPPED: {}",
        probe.detail
    );
    false
}

/// The attempts of `outcome`, as `(hidden entry, path)` relative to `home`, sorted.
fn attempts(outcome: &Outcome, home: &Path) -> Vec<(String, String)> {
    let relative = |path: &Path| path.strip_prefix(home).unwrap().display().to_string();
    let mut attempts: Vec<(String, String)> = outcome
        .reads_denied
        .iter()
        .map(|attempt| (relative(&attempt.hidden), relative(&attempt.path)))
        .collect();
    attempts.sort();
    attempts
}

/// Issue 23: a run that reads a masked file, looks inside a masked directory or lists it is
/// told nothing more than before (the content stays hidden), and its outcome lists each
/// attempt with the mask entry that refused it; two concurrent runs' attempts are each
/// reported for the run that made them, never for the other.
#[test]
fn each_read_of_a_mask_is_reported_for_the_run_that_tried_it() {
    let executor = executor();
    let test = "each_read_of_a_mask_is_reported_for_the_run_that_tried_it";
    if !usable(&executor, test) || !watched(&executor, test) {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "SECRET key\n").unwrap();
    std::fs::write(home.join(".aws/credentials"), "SECRET aws\n").unwrap();
    std::fs::write(home.join(".netrc"), "SECRET netrc\n").unwrap();
    let sandbox = Sandbox {
        hidden: [".ssh", ".aws", ".netrc", ".kube"]
            .iter()
            .map(|name| home.join(name))
            .collect(),
        private_pids: true,
        private_mounts: true,
        ..Sandbox::none()
    };
    // Each run waits for the other to start, then tries its own names a few times (a refused
    // lookup is never cached: each one reaches the server).
    let script = r#"
home=$1; mine=$2; theirs=$3
touch "$mine"
while [ ! -e "$theirs" ]; do sleep 0.01; done
for i in 1 2 3 4 5; do
  cat "$home/.ssh/$4" 2>/dev/null
  ls -A "$home/.aws/$5" 2>/dev/null
  sleep 0.01
done
cat "$home/.netrc" "$home/.ssh/id_ed25519" 2>/dev/null
ls -A "$home/.aws"
cat "$home/not-masked" 2>/dev/null
true
"#;
    let (a, b) = (temp.path().join("a"), temp.path().join("b"));
    let first = command(
        script,
        &[
            home.as_os_str(),
            a.as_os_str(),
            b.as_os_str(),
            OsStr::new("first-key"),
            OsStr::new("first-dir"),
        ],
        sandbox.clone(),
    );
    let second = command(
        script,
        &[
            home.as_os_str(),
            b.as_os_str(),
            a.as_os_str(),
            OsStr::new("second-key"),
            OsStr::new("second-dir"),
        ],
        sandbox,
    );
    let limits = limits();
    // As `serve` runs calls: one of the two takes a sandbox prepared ahead (its masks set up
    // before the call), the other sets its own up.
    executor.keep_prepared(true);
    let warm_up = command("true", &[], second.sandbox_profile().clone());
    let rt = runtime();
    assert!(
        rt.block_on(executor.run(&warm_up, &limits))
            .unwrap()
            .success()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while executor.prepared() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(executor.prepared() > 0, "no sandbox was prepared");
    let (first, second) = rt.block_on(async {
        tokio::join!(
            executor.run(&first, &limits),
            executor.run(&second, &limits)
        )
    });
    for (name, outcome) in [("first", first.unwrap()), ("second", second.unwrap())] {
        assert!(outcome.success(), "{name}: {outcome:?}");
        assert_eq!(outcome.stdout.text_lossy(), "", "{name}");
        let mut expected: Vec<(String, String)> = vec![
            (".aws".into(), ".aws".into()),
            (".aws".into(), format!(".aws/{name}-dir")),
            (".netrc".into(), ".netrc".into()),
            (".ssh".into(), ".ssh/id_ed25519".into()),
            (".ssh".into(), format!(".ssh/{name}-key")),
        ];
        expected.sort();
        assert_eq!(attempts(&outcome, &home), expected, "{name}");
        assert_eq!(outcome.reads_denied_more, 0, "{name}");
    }
    assert_eq!(
        std::fs::read_to_string(home.join(".ssh/id_ed25519")).unwrap(),
        "SECRET key\n"
    );
}

/// A run that tries more masked names than an outcome keeps gets the first
/// `MAX_READ_ATTEMPTS`, and the count of the rest.
#[test]
fn a_flood_of_reads_is_capped() {
    let executor = executor();
    let test = "a_flood_of_reads_is_capped";
    if !usable(&executor, test) || !watched(&executor, test) {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let outcome = sh(
        &executor,
        r#"for i in $(seq 1 100); do cat "$1/.ssh/key-$i" 2>/dev/null; done; true"#,
        &[home.as_os_str()],
        Sandbox {
            hidden: vec![home.join(".ssh")],
            private_pids: true,
            private_mounts: true,
            ..Sandbox::none()
        },
    );
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(
        outcome.reads_denied.len(),
        toolsmith_executor::MAX_READ_ATTEMPTS
    );
    assert_eq!(
        outcome.reads_denied[0].path,
        home.join(".ssh/key-1"),
        "in order"
    );
    assert_eq!(outcome.reads_denied.len() + outcome.reads_denied_more, 100);
}

/// Red team, the read-mask server: run A floods its masks from 32 processes (lookups of
/// fresh names, which are never cached, names with terminal escapes, newlines, quotes and
/// bytes that are not UTF-8, listings, a descriptor of the mask held open, children killed
/// in the middle of a lookup so that the kernel sends `INTERRUPT`s and `FORGET`s) until its
/// deadline kills it. Meanwhile run B, whose masks include a path never masked before (its
/// node needs a round trip to the server to be set up), must start, finish within a
/// liveness bound, and have its own attempts recorded, none of A's; A's record none of B's.
/// After A was killed mid-flood, run C's attempt is still recorded (the server was not
/// wedged by the killed requests). Checked from outside: the outcomes' records and times.
#[test]
fn a_flood_on_the_masks_neither_stalls_nor_reaches_another_run() {
    let executor = executor();
    let test = "a_flood_on_the_masks_neither_stalls_nor_reaches_another_run";
    if !usable(&executor, test) || !watched(&executor, test) {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    for dir in [".ssh", ".aws", ".kube"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    let masks = |names: &[&str]| Sandbox {
        hidden: names.iter().map(|name| home.join(name)).collect(),
        private_pids: true,
        private_mounts: true,
        ..Sandbox::none()
    };
    let code = r#"
import os, signal, sys, time
home = sys.argv[1]
held = os.open(home + "/.ssh", os.O_RDONLY | os.O_DIRECTORY)
hostile = [b"\x1b]52;c;aGk=\x07", b"line\nbreak", b'"},{"kind":"write"', b"\xff\xfe", b"x" * 255]
def worker(n):
    i = 0
    while True:
        i += 1
        for name in [("a-%d-%d" % (n, i)).encode()] + hostile:
            try: os.stat(os.path.join(home.encode(), b".ssh", name))
            except OSError: pass
        os.listdir(home + "/.aws")
        os.listdir("/proc/self/fd/%d" % held)
for n in range(32):
    if os.fork() == 0:
        worker(n)
while True:
    child = os.fork()
    if child == 0:
        worker(99)
    time.sleep(0.005)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
"#;
    let mut flood = Command::new(Path::new("/usr/bin/python3"), Path::new("/")).unwrap();
    flood
        .arg(OsStr::new("-c"))
        .arg(OsStr::new(code))
        .arg(home.as_os_str());
    flood.sandbox(masks(&[".ssh", ".aws"]));
    let flood_limits = Limits {
        timeout: Duration::from_secs(6),
        ..limits()
    };
    let rt = runtime();
    let (flooded, beside) = rt.block_on(async {
        let beside = async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let started = std::time::Instant::now();
            let outcome = executor
                .run(
                    &command(
                        r#"cat "$1/.kube/b-key" "$1/.ssh/b-key" 2>/dev/null; true"#,
                        &[home.as_os_str()],
                        masks(&[".ssh", ".kube"]),
                    ),
                    &limits(),
                )
                .await;
            (outcome, started.elapsed())
        };
        tokio::join!(executor.run(&flood, &flood_limits), beside)
    });
    let flooded = flooded.unwrap();
    let (beside, took) = (beside.0.unwrap(), beside.1);
    assert_eq!(flooded.limit, Some(toolsmith_executor::LimitKind::Timeout));
    assert!(
        flooded.reads_denied.len() + flooded.reads_denied_more > 100,
        "the flood reached the server: {flooded:?}"
    );
    assert!(
        flooded
            .reads_denied
            .iter()
            .all(|attempt| !attempt.path.to_string_lossy().contains("b-key")),
        "{:?}",
        flooded.reads_denied
    );
    eprintln!(
        "B took {took:?} beside a flood of {} recorded attempts",
        flooded.reads_denied.len() + flooded.reads_denied_more
    );
    assert!(beside.success(), "{beside:?}");
    assert!(
        took < Duration::from_secs(5),
        "B took {took:?} beside the flood"
    );
    assert_eq!(
        attempts(&beside, &home),
        vec![
            (".kube".to_owned(), ".kube/b-key".to_owned()),
            (".ssh".to_owned(), ".ssh/b-key".to_owned()),
        ]
    );
    let after = sh(
        &executor,
        r#"cat "$1/.ssh/c-key" 2>/dev/null; true"#,
        &[home.as_os_str()],
        masks(&[".ssh"]),
    );
    assert_eq!(
        attempts(&after, &home),
        vec![(".ssh".to_owned(), ".ssh/c-key".to_owned())]
    );
}

/// Whether the descriptor table at `fd_dir` (`/proc/<pid>/fd` or `/proc/<pid>/task/<tid>/fd`)
/// holds `/dev/fuse`.
fn holds_fuse(fd_dir: &Path) -> bool {
    std::fs::read_dir(fd_dir).is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            std::fs::read_link(entry.path()).is_ok_and(|target| target == Path::new("/dev/fuse"))
        })
    })
}

/// A process that holds the FUSE device must never wait on a request of it: a request the
/// server has read waits uninterruptibly for its answer, so a toolsmith killed while a run's
/// init (which shares toolsmith's descriptor table) looked up a mask left that init in `D`
/// state for good, holding the device and so the connection (seen once in the registration
/// kill test). By construction the device lives only in the server thread's own table:
/// checked from outside, in `/proc`, after runs with masks.
#[test]
fn only_the_mask_servers_thread_holds_the_fuse_device() {
    let executor = executor();
    let test = "only_the_mask_servers_thread_holds_the_fuse_device";
    if !usable(&executor, test) || !watched(&executor, test) {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(temp.path().join(".ssh")).unwrap();
    let sandbox = Sandbox {
        hidden: vec![temp.path().join(".ssh")],
        private_pids: true,
        private_mounts: true,
        ..Sandbox::none()
    };
    let outcome = sh(
        &executor,
        "ls -A \"$1/.ssh\"; true",
        &[temp.path().as_os_str()],
        sandbox,
    );
    assert!(outcome.success(), "{outcome:?}");
    assert!(
        !outcome.reads_denied.is_empty(),
        "the run was not served by the mask server: {outcome:?}"
    );
    assert!(
        !holds_fuse(Path::new("/proc/self/fd")),
        "the process's own table holds the FUSE device"
    );
    let holders: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|task| holds_fuse(&task.path().join("fd")))
        .map(|task| std::fs::read_to_string(task.path().join("comm")).unwrap_or_default())
        .collect();
    assert_eq!(holders, ["toolsmith-masks\n"]);
}
