//! Sandbox profiles through `toolsmith run`: `[sandbox]` and `[tools.NAME]`,
//! a tool's own declaration, `POLICY_DENIED` when the kernel refuses a
//! mechanism, the `metadata.sandbox` audit record, secrets in `/proc`, and the
//! executor SIGKILLed mid-call.
//!
//! The hostile scripts live in `tests/hostile/sandbox/`. A kernel feature
//! that is missing is announced loudly and its test skipped;
//! `TOOLSMITH_REQUIRE_BACKENDS=1` makes it a failure.
//! `TOOLSMITH_DISABLE_FEATURES` simulates a kernel without a feature.

#![expect(
    clippy::print_stderr,
    reason = "unavailable kernel features must be announced loudly"
)]

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::context::{TestContext, shell_tool};
use crate::leaks::{HostState, Window};
use crate::processes::marked;

const EMPTY_SCHEMA: &str = r#"{"type": "object"}"#;

fn hostile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("hostile/sandbox")
        .join(name)
}

/// True when `doctor` reports `feature` available; otherwise says so loudly (or fails).
fn available(context: &TestContext, feature: &str) -> bool {
    let output = context
        .command()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let probe = report["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|probe| probe["name"] == feature)
        .unwrap_or_else(|| panic!("doctor reports no {feature}: {report}"));
    if probe["available"] == true {
        return true;
    }
    assert!(
        std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
        "{feature} is required but unavailable: {}",
        probe["detail"]
    );
    eprintln!(
        "WARNING: {feature} UNAVAILABLE on this kernel, its sandbox test is SKIPPED: {}",
        probe["detail"]
    );
    false
}

/// Runs `command` (a `toolsmith run` of a `TestContext`) and returns the envelope it printed,
/// after the leak oracle found nothing of the call on the host and a `toolsmith list` with
/// the same options started without a warning.
fn run_json(command: &mut std::process::Command) -> Value {
    let env = |name: &str| {
        command
            .get_envs()
            .find(|(key, _)| *key == name)
            .and_then(|(_, value)| value)
            .map(PathBuf::from)
            .unwrap()
    };
    let tmpdir = env("TMPDIR");
    let root = tmpdir.parent().unwrap().to_path_buf();
    let window = Window::open(false);
    let before = HostState::capture(&tmpdir);
    let child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    let leaks = before.leaks(pid, &root);
    drop(window);
    let envelope = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not an envelope ({error}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(
        leaks.is_empty(),
        "the call left these on the host (removed by the test): {leaks:#?}\n{envelope:#}"
    );
    // The next start: the same program, environment and options, `list` instead of `run`.
    let options: Vec<_> = command
        .get_args()
        .take_while(|arg| *arg != "run")
        .map(ToOwned::to_owned)
        .collect();
    #[expect(
        clippy::disallowed_methods,
        reason = "the binary under test, started as the call was"
    )]
    let mut list = std::process::Command::new(command.get_program());
    list.env_clear()
        .envs(
            command
                .get_envs()
                .filter_map(|(key, value)| Some((key, value?))),
        )
        .args(options)
        .arg("list");
    if let Some(dir) = command.get_current_dir() {
        list.current_dir(dir);
    }
    let next = list.output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&next.stderr),
        "",
        "toolsmith's next start printed warnings after {envelope:#}"
    );
    envelope
}

/// A Kodelet tool that tries to connect to `port` on the host's loopback.
fn connect_tool(context: &TestContext, name: &str, declaration: &str, port: u16) {
    let schema = format!("{EMPTY_SCHEMA}{declaration}");
    context.tool(
        name,
        &shell_tool(
            name,
            &schema,
            &format!("exec {} {port}", hostile("connect.sh").display()),
        ),
    );
}

#[test]
fn network_deny_from_config_refuses_the_hosts_loopback() {
    let context = TestContext::new();
    if !available(&context, "network namespace") {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    connect_tool(&context, "dial", "", port);

    // With no config at all a tool that declares nothing has no network (issue 23).
    let default = run_json(context.with_tools().args(["run", "dial"]));
    assert_eq!(default["result"], "refused", "{default}");
    assert_eq!(default["metadata"]["sandbox"]["network"], "deny");

    context.project_file(".toolsmith/config.toml", "[sandbox]\nnetwork = \"any\"\n");
    let allowed = run_json(context.with_tools().args(["run", "dial"]));
    assert_eq!(allowed["result"], "connected", "{allowed}");
    assert_eq!(allowed["metadata"]["sandbox"]["network"], "allow");

    context.project_file(".toolsmith/config.toml", "[sandbox]\nnetwork = \"deny\"\n");
    let denied = run_json(context.with_tools().args(["run", "dial"]));
    assert_eq!(denied["tool_success"], true, "{denied}");
    assert_eq!(denied["result"], "refused", "{denied}");
    assert_eq!(denied["metadata"]["sandbox"]["network"], "deny");

    // The operator's word for one tool replaces the default.
    context.project_file(
        ".toolsmith/config.toml",
        "[sandbox]\nnetwork = \"deny\"\n\n[tools.dial]\nnetwork = \"allow\"\n",
    );
    let reopened = run_json(context.with_tools().args(["run", "dial"]));
    assert_eq!(reopened["result"], "connected", "{reopened}");
}

#[test]
fn a_tools_declaration_tightens_the_grant_but_never_loosens_it() {
    let context = TestContext::new();
    if !available(&context, "network namespace") {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Kodelet's description may carry a `sandbox` object next to input_schema.
    connect_tool(
        &context,
        "offline",
        r#", "sandbox": {"network": "deny"}"#,
        port,
    );
    connect_tool(
        &context,
        "greedy",
        r#", "sandbox": {"network": "allow"}"#,
        port,
    );

    let offline = run_json(context.with_tools().args(["run", "offline"]));
    assert_eq!(offline["result"], "refused", "{offline}");

    context.project_file(".toolsmith/config.toml", "[sandbox]\nnetwork = \"deny\"\n");
    let greedy = run_json(context.with_tools().args(["run", "greedy"]));
    assert_eq!(greedy["result"], "refused", "{greedy}");

    let shown = context
        .with_tools()
        .args(["show", "offline", "--json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["sandbox"]["network"], "none", "{shown}");
    assert_eq!(
        shown["sandbox"]["filesystem"], "project-if-possible",
        "{shown}"
    );
    assert_eq!(
        shown["sandbox"]["declared"],
        json!({"network": "none", "filesystem": null, "secrets": []})
    );
}

#[test]
fn a_refused_mechanism_is_policy_denied_and_runs_nothing() {
    let context = TestContext::new();
    // Below the project, the one place the default profile lets a tool write (its root is
    // sealed while `.git` is missing, so in a directory of its own).
    fs::create_dir_all(context.project.join("out")).unwrap();
    let marker = context.project.join("out/ran");
    context.tool(
        "writer",
        &shell_tool(
            "writer",
            EMPTY_SCHEMA,
            &format!("touch {} && echo done", marker.display()),
        ),
    );
    context.project_file(".toolsmith/config.toml", "[sandbox]\nnetwork = \"deny\"\n");
    cli_snapshot!(context, context.with_tools().env("TOOLSMITH_DISABLE_FEATURES", "netns").args(["run", "writer"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool writer was not run: network = deny needs a network namespace, which this kernel refused (disabled by TOOLSMITH_DISABLE_FEATURES); set network = \"deny-if-possible\" in [sandbox] or [tools.NAME] to run it without.",
      "error_code": "POLICY_DENIED",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 0,
        "stderr_bytes": 0,
        "escalated": false
      }
    }
    ----- stderr -----
    "#);
    assert!(!marker.exists(), "a denied call must start no process");

    // deny-if-possible runs it, and the envelope says what was not enforced.
    context.project_file(
        ".toolsmith/config.toml",
        "[sandbox]\nnetwork = \"deny-if-possible\"\nfilesystem = \"read-only-if-possible\"\n",
    );
    let relaxed = run_json(
        context
            .with_tools()
            .env("TOOLSMITH_DISABLE_FEATURES", "netns,landlock")
            .args(["run", "writer"]),
    );
    assert_eq!(relaxed["tool_success"], true, "{relaxed}");
    assert!(marker.exists());
    let sandbox = &relaxed["metadata"]["sandbox"];
    assert_eq!(sandbox["network"], "allow", "{relaxed}");
    assert_eq!(sandbox["filesystem"], "full", "{relaxed}");
    assert_eq!(
        sandbox["not_enforced"],
        json!([
            "network = deny not enforced: a network namespace is unavailable (disabled by TOOLSMITH_DISABLE_FEATURES)",
            "filesystem = read-only not enforced: Landlock is unavailable (disabled by TOOLSMITH_DISABLE_FEATURES)"
        ])
    );
}

#[test]
fn filesystem_profiles_from_config_and_manifest_frontmatter() {
    let context = TestContext::new();
    if !available(&context, "landlock") {
        return;
    }
    let outside = context.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let script = hostile("write.sh");
    // An existing directory of the project (the project's root works too, where the seccomp
    // supervisor refuses only the missing protected names; a directory keeps the test the same
    // where the root is sealed instead).
    let work = context.project.join("work");
    fs::create_dir_all(&work).unwrap();
    let body = format!(
        "{} {} {} \"$TMPDIR\"",
        script.display(),
        work.display(),
        outside.display()
    );
    fs::write(
        context.tools.join("scribble.md"),
        format!("---\nname: scribble\ndescription: Writes where it can\n---\n{body}\n"),
    )
    .unwrap();
    fs::write(
        context.tools.join("reader.md"),
        format!(
            "---\nname: reader\ndescription: Declares itself read-only\nsandbox:\n  filesystem: read-only\n---\n{body}\n"
        ),
    )
    .unwrap();
    context.project_file(
        ".toolsmith/config.toml",
        "[sandbox]\nfilesystem = \"project\"\n",
    );

    let project = run_json(context.with_tools().args(["run", "scribble"]));
    let printed = project["result"].as_str().unwrap();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines[0], format!("wrote {}", work.display()), "{project}");
    assert_eq!(
        lines[1],
        format!("denied {}", outside.display()),
        "{project}"
    );
    assert!(
        lines[2].starts_with("wrote ") && lines[2].contains("toolsmith-run-"),
        "{project}"
    );
    assert_eq!(lines[3], "wrote /dev/null");
    assert_eq!(project["metadata"]["sandbox"]["filesystem"], "project");

    let read_only = run_json(context.with_tools().args(["run", "reader"]));
    let printed = read_only["result"].as_str().unwrap();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(
        lines[0],
        format!("denied {}", work.display()),
        "{read_only}"
    );
    assert_eq!(
        lines[1],
        format!("denied {}", outside.display()),
        "{read_only}"
    );
    assert!(lines[2].starts_with("wrote "), "{read_only}");
    assert_eq!(read_only["metadata"]["sandbox"]["filesystem"], "read-only");
}

/// A tool that hunts for `secret` in `/proc/$PPID/environ` and `/proc/*/environ`.
fn environ_tool(context: &TestContext, secret: &str) {
    context.tool(
        "hunt",
        &shell_tool(
            "hunt",
            EMPTY_SCHEMA,
            &format!("exec {} '{secret}'", hostile("environ.sh").display()),
        ),
    );
}

#[test]
fn tools_cannot_read_toolsmiths_environment() {
    let context = TestContext::new();
    let secret = format!("SECRET_TOKEN=s3cr3t-{}", std::process::id());
    environ_tool(&context, &secret);
    let value = secret.trim_start_matches("SECRET_TOKEN=");

    if available(&context, "private /proc") {
        let hidden = run_json(
            context
                .with_tools()
                .env("SECRET_TOKEN", value)
                .args(["run", "hunt"]),
        );
        // The only other process is toolsmith's init, PID 1 and the tool's parent; its
        // environment is toolsmith's initial one, blanked at start.
        assert_eq!(hidden["result"], "ppid=1\ndone", "{hidden}");
        assert_eq!(hidden["metadata"]["sandbox"]["pid_namespace"], true);
    }

    // Without a private /proc the tool sees toolsmith, whose environment was blanked at start.
    let blanked = run_json(
        context
            .with_tools()
            .env("SECRET_TOKEN", value)
            .env("TOOLSMITH_DISABLE_FEATURES", "private-proc")
            .args(["run", "hunt"]),
    );
    let printed = blanked["result"].as_str().unwrap();
    assert!(!printed.starts_with("ppid=0\n"), "{blanked}");
    assert!(printed.ends_with("\ndone"), "{blanked}");
    assert!(!printed.contains("secret"), "{blanked}");
    assert_eq!(blanked["metadata"]["sandbox"]["pid_namespace"], false);
}

/// The directory the cgroup backend creates its executors' directories in, from `doctor`.
fn cgroup_base(context: &TestContext) -> Option<PathBuf> {
    let output = context
        .command()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    if report["backend"] != "cgroup" {
        return None;
    }
    let detail = report["features"][0]["detail"].as_str()?;
    let dir = detail.strip_prefix("cgroup v2 leaves under ")?;
    Path::new(dir).parent().map(Path::to_path_buf)
}

#[test]
fn executor_sigkilled_mid_call_takes_its_tools_along_and_a_restart_cleans_up() {
    let context = TestContext::new();
    if !available(&context, "private /proc") {
        return;
    }
    let marker = format!("SANDBOX_KILL_TEST={}-{}", std::process::id(), line!());
    let (name, value) = marker.split_once('=').unwrap();
    context.tool(
        "forever",
        &shell_tool(
            "forever",
            EMPTY_SCHEMA,
            &format!("exec {}", hostile("sleeper.sh").display()),
        ),
    );
    context.project_file(
        ".toolsmith/config.toml",
        &format!("[env]\nallow = [\"PATH\"]\nset = {{ {name} = \"{value}\" }}\n"),
    );
    let base = cgroup_base(&context);
    // No other oracle-checked call (each starts toolsmith twice) may clean the killed
    // executor's stale directory up before this test looks at it.
    let _window = Window::open(true);

    let mut toolsmith = context
        .with_tools()
        .args(["run", "forever", "--timeout", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let guard = Instant::now() + Duration::from_secs(20);
    // The tool's shell, its sleeper, the setsid'd sleeper and the foreground sleep.
    while marked(&marker).len() < 4 {
        assert!(
            Instant::now() < guard,
            "the tool did not start: {:?}",
            marked(&marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let toolsmith_pid = toolsmith.id();
    toolsmith.kill().unwrap();
    toolsmith.wait().unwrap();
    let killed_at = Instant::now();
    let survivors = loop {
        let survivors = marked(&marker);
        if survivors.is_empty() || killed_at.elapsed() > Duration::from_secs(5) {
            break survivors;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = killed_at.elapsed();
    for pid in &survivors {
        // SAFETY: these pids carry this test's marker; a failing test leaves nothing behind.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
    }
    assert!(
        survivors.is_empty(),
        "processes of the tool survived: {survivors:?}"
    );
    assert!(
        took <= Duration::from_secs(1),
        "the tool took {took:?} to die"
    );

    let Some(base) = base else {
        eprintln!(
            "WARNING: the cgroup backend is not in use; the stale-leaf part of this test is SKIPPED"
        );
        return;
    };
    let stale = base.join(format!("toolsmith-{toolsmith_pid}-0"));
    let leaves = fs::read_dir(&stale)
        .unwrap_or_else(|error| {
            panic!(
                "{} should be left by the killed executor: {error}",
                stale.display()
            )
        })
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("run-"))
        .count();
    assert!(leaves > 0, "{} holds no run leaf", stale.display());
    // Any new toolsmith removes the directories of executors that are gone.
    let output = context.command().arg("doctor").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(!stale.exists(), "{} survived a restart", stale.display());
}

/// True when the tests run as root (the privilege tests need a root toolsmith); else says so.
fn root() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let root = status
        .lines()
        .find(|line| line.starts_with("Uid:"))
        .is_some_and(|line| line.split_whitespace().nth(2) == Some("0"));
    if !root {
        eprintln!("WARNING: not run as root, the root-toolsmith privilege test is SKIPPED");
    }
    root
}

/// A tool that prints its capability sets and uid, then tries the calls of
/// `tests/hostile/sandbox/syscalls.py` (a root tool undoing its sandbox).
fn privileges_tool(context: &TestContext, probes: &str) {
    context.tool(
        "undo",
        &shell_tool(
            "undo",
            EMPTY_SCHEMA,
            &format!(
                "grep '^Cap' /proc/self/status; id -u; exec /usr/bin/python3 {} {probes}",
                hostile("syscalls.py").display()
            ),
        ),
    );
}

#[test]
fn a_root_toolsmiths_tools_have_no_capability_and_their_system_calls_are_filtered() {
    let context = TestContext::new();
    if !root() || !available(&context, "seccomp") || !Path::new("/usr/bin/python3").exists() {
        return;
    }
    privileges_tool(
        &context,
        "keyctl add_key unshare-user unshare-mount mount ptrace bpf umount-proc mknod chattr",
    );
    // What refuses `mknod` here must be the missing capability, not the default profile's
    // Landlock rule (which refuses it first, EACCES).
    context.user_config("[sandbox]\nfilesystem = \"full\"\n");
    let envelope = run_json(context.with_tools().args(["run", "undo"]));
    assert_eq!(envelope["tool_success"], true, "{envelope}");
    let printed = envelope["result"].as_str().unwrap();
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            printed.contains(&format!("{set}:\t0000000000000000\n")),
            "{set}: {printed}"
        );
    }
    for probe in [
        "keyctl",
        "add_key",
        "unshare-user",
        "unshare-mount",
        "mount",
        "bpf",
        "mknod",
        "chattr",
    ] {
        assert!(
            printed.contains(&format!("\n{probe} EPERM")),
            "{probe}: {printed}"
        );
    }
    // In its private PID namespace a tool may trace its own children, as in a shell (debuggers,
    // AddressSanitizer's leak checker); toolsmith's init is out of its reach (b14).
    assert!(printed.contains("\nptrace ok"), "{printed}");
    // umount of its own /proc is tried only in a private PID (and mount) namespace.
    assert!(
        printed.contains("\numount-proc EPERM") || printed.contains("\numount-proc skipped"),
        "{printed}"
    );
    let sandbox = &envelope["metadata"]["sandbox"];
    assert_eq!(sandbox["capabilities"], "none", "{envelope}");
    assert_eq!(sandbox["syscalls"], "filtered", "{envelope}");

    // `unfiltered` (per tool) lifts the filter but not the capability drop.
    context.project_file(
        ".toolsmith/config.toml",
        "[tools.undo]\nsyscalls = \"unfiltered\"\n",
    );
    let unfiltered = run_json(context.with_tools().args(["run", "undo"]));
    let printed = unfiltered["result"].as_str().unwrap();
    assert!(printed.contains("\nadd_key EFAULT"), "{printed}");
    assert!(printed.contains("\nunshare-mount EPERM"), "{printed}");
    assert_eq!(unfiltered["metadata"]["sandbox"]["syscalls"], "unfiltered");
    assert_eq!(unfiltered["metadata"]["sandbox"]["capabilities"], "none");
}

#[test]
fn a_required_filter_the_kernel_refuses_is_policy_denied_and_if_possible_runs_without() {
    let context = TestContext::new();
    // Below the project, the one place the default profile lets a tool write (its root is
    // sealed while `.git` is missing, so in a directory of its own).
    fs::create_dir_all(context.project.join("out")).unwrap();
    let marker = context.project.join("out/ran");
    context.tool(
        "writer",
        &shell_tool(
            "writer",
            EMPTY_SCHEMA,
            &format!("touch {} && echo done", marker.display()),
        ),
    );
    let denied = run_json(
        context
            .with_tools()
            .env("TOOLSMITH_DISABLE_FEATURES", "seccomp")
            .args(["run", "writer"]),
    );
    assert_eq!(denied["error_code"], "POLICY_DENIED", "{denied}");
    assert_eq!(
        denied["error"],
        "Tool writer was not run: syscalls = filter needs a seccomp filter, which this kernel refused (disabled by TOOLSMITH_DISABLE_FEATURES); set syscalls = \"filter-if-possible\" in [sandbox] or [tools.NAME] to run it without."
    );
    assert!(!marker.exists(), "a denied call must start no process");

    context.project_file(
        ".toolsmith/config.toml",
        "[sandbox]\nsyscalls = \"filter-if-possible\"\n",
    );
    let relaxed = run_json(
        context
            .with_tools()
            .env("TOOLSMITH_DISABLE_FEATURES", "seccomp")
            .args(["run", "writer"]),
    );
    assert_eq!(relaxed["tool_success"], true, "{relaxed}");
    assert!(marker.exists());
    let sandbox = &relaxed["metadata"]["sandbox"];
    assert_eq!(sandbox["syscalls"], "unfiltered", "{relaxed}");
    assert_eq!(
        sandbox["not_enforced"],
        json!([
            "syscalls = filter not enforced: a seccomp filter is unavailable (disabled by TOOLSMITH_DISABLE_FEATURES)"
        ])
    );
}

#[test]
fn sandbox_user_runs_tools_as_that_uid_and_their_files_belong_to_it() {
    use std::os::unix::fs::MetadataExt;
    let context = TestContext::new();
    context.tool(
        "whoami",
        &shell_tool(
            "whoami",
            EMPTY_SCHEMA,
            "id -u; id -g; id -G; echo x > out/written.txt; echo y > \"$TMPDIR/t\" && echo tmp-ok",
        ),
    );
    context.project_file(
        ".toolsmith/config.toml",
        "[sandbox]\nuser = \"65534:65534\"\nfilesystem = \"project\"\n",
    );
    if !root() {
        let output = context
            .with_tools()
            .args(["run", "whoami"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("setting the user tools run as needs toolsmith to run as root"),
            "{stderr}"
        );
        return;
    }
    if !available(&context, "landlock") {
        return;
    }
    let out = context.project.join("out");
    fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::chown(&out, Some(65534), Some(65534)).unwrap();
    let envelope = run_json(context.with_tools().args(["run", "whoami"]));
    assert_eq!(envelope["tool_success"], true, "{envelope}");
    assert_eq!(
        envelope["result"], "65534\n65534\n65534\ntmp-ok",
        "{envelope}"
    );
    assert_eq!(envelope["metadata"]["sandbox"]["user"], "65534:65534");
    let written = fs::metadata(out.join("written.txt")).unwrap();
    assert_eq!((written.uid(), written.gid()), (65534, 65534));

    context.project_file(
        ".toolsmith/config.toml",
        "[sandbox]\nuser = \"no-such-user-here\"\n",
    );
    let output = context
        .with_tools()
        .args(["run", "whoami"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no such user"),
        "{output:?}"
    );
}

#[test]
fn toolsmith_is_not_dumpable_and_keeps_no_secret_it_does_not_pass_on() {
    let context = TestContext::new();
    // Without a private /proc the tool sees toolsmith as its parent.
    context.tool(
        "peek",
        &shell_tool(
            "peek",
            EMPTY_SCHEMA,
            "head -c 1 /proc/$PPID/mem >/dev/null 2>&1 && echo mem-readable || echo mem-denied; stat -c %u /proc/$PPID/environ 2>/dev/null || echo hidden",
        ),
    );
    let envelope = run_json(
        context
            .with_tools()
            .env("SECRET_TOKEN", "s3cr3t")
            .env("TOOLSMITH_DISABLE_FEATURES", "private-proc")
            .args(["run", "peek"]),
    );
    // A non-dumpable process's /proc files belong to root, and its memory
    // needs CAP_SYS_PTRACE, which no tool has. With a mount namespace the tool's
    // `/proc` is a fresh one with `hidepid=4` (issue 23), where toolsmith does not show.
    let expected = if envelope["metadata"]["sandbox"]["mount_namespace"] == true {
        "mem-denied\nhidden"
    } else {
        "mem-denied\n0"
    };
    assert_eq!(envelope["result"], expected, "{envelope}");
}
