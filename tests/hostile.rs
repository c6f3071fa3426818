//! The hostile corpus of `tests/hostile/` run through the `toolsmith` binary: every scenario of
//! `research/isolation.md` §7 that a black box can show, each asserting its envelope, a hang
//! bound, and that no process of the run survives.
//!
//! Survival is checked independently of toolsmith: every run gets a test-owned marker in the
//! tool's environment (through the config's `[env] set`), and after the call `/proc` is scanned
//! for it. Anything found is killed by pid, so a failing test leaves nothing behind, and fails
//! the test. The leak oracle (`leaks.rs`) then compares the host's cgroups, mounts, SysV
//! objects, message queues, keys and the TMPDIR given to toolsmith with what they were before
//! the call, and the next `toolsmith list` must print no warning.
//!
//! The `a*` and `b*` scenarios are issue 11's attacks of a hostile tool on its own sandbox, run
//! as root (see the comment above `assert_held` and `docs/security.md`). The corpus runs on the default backend; `crates/executor/tests/hostile.rs` covers
//! every backend through the library.
//!
//! Not here: §7.33 (SIGKILL of toolsmith mid-call) and the `/proc` half of §7.25 are in
//! `sandbox.rs`; §7.35 (64 concurrent floods) is `load.rs`. §7.27 (`kill -9 -1`) runs only
//! where the tool gets its own PID namespace: the fixture refuses to try anywhere else.

#![expect(
    clippy::print_stderr,
    reason = "scenarios that cannot run here must be announced loudly"
)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::context::TestContext;
use crate::leaks::{HostState, Window};
use crate::processes::marked;

const MARKER_VAR: &str = "HOSTILE_MARKER";

/// Slack above timeout + grace: a hang guard, not a speed claim (the binary's start-up and a
/// loaded 2-core machine are in it).
const MARGIN: Duration = Duration::from_secs(4);

static NEXT_MARKER: AtomicU64 = AtomicU64::new(0);

/// The corpus directory in the repository.
fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hostile")
}

/// One scenario's world: a context whose tools directory holds one corpus file, a config
/// giving the limits and the marker, and a scratch directory the tool may write to.
struct Scenario {
    context: TestContext,
    tool: String,
    marker: String,
    scratch: PathBuf,
    bin: PathBuf,
    config: PathBuf,
}

/// What a test saw of one `toolsmith run`.
struct Call {
    envelope: Value,
    output: Output,
    elapsed: Duration,
    survivors: usize,
    /// What the leak oracle found on the host after the call (and removed).
    leaks: Vec<String>,
    /// The stderr of the next `toolsmith list`: must be empty.
    next_start: String,
}

impl Scenario {
    /// Scenario `file` of the corpus with `limits` as the config's `[limits]` table body.
    fn new(file: &str, limits: &str) -> Scenario {
        Scenario::with_config(file, limits, "", "")
    }

    /// As [`Scenario::new`], with `env` more entries of `[env] set` (`KEY = "value", `) and
    /// `extra` more config text (a `[sandbox]` table).
    fn with_config(file: &str, limits: &str, env: &str, extra: &str) -> Scenario {
        let context = TestContext::new();
        fs::copy(corpus().join(file), context.tools.join(file)).unwrap();
        let marker = format!(
            "{}-{}-{file}",
            std::process::id(),
            NEXT_MARKER.fetch_add(1, Ordering::Relaxed)
        );
        let scratch = context.root.join("scratch");
        let bin = context.root.join("bin");
        fs::create_dir_all(&scratch).unwrap();
        fs::create_dir_all(&bin).unwrap();
        let config = context.root.join("config.toml");
        fs::write(
            &config,
            format!(
                "[limits]\n{limits}\n\n[env]\nset = {{ {env}{MARKER_VAR} = \"{marker}\", HOSTILE_SCRATCH = \"{}\", HOSTILE_BIN = \"{}\", HOSTILE_PROJECT = \"{}\" }}\n\n{extra}\n",
                scratch.display(),
                bin.display(),
                context.project.display(),
            ),
        )
        .unwrap();
        let tool = file.trim_end_matches(".md").replace('-', "_");
        Scenario {
            context,
            tool,
            marker,
            scratch,
            bin,
            config,
        }
    }

    /// As [`Scenario::new`], for a scenario that writes its scratch directory: the config
    /// grants the tool that directory (`[tools.NAME] filesystem = [...]`), which the default
    /// profile would not (it writes only below the project).
    fn writing_scratch(file: &str, limits: &str) -> Scenario {
        let scenario = Scenario::new(file, limits);
        let mut config = fs::read_to_string(&scenario.config).unwrap();
        config.push_str(&format!(
            "[tools.{}]\nfilesystem = [\"{}\"]\n",
            scenario.tool,
            scenario.scratch.display()
        ));
        fs::write(&scenario.config, config).unwrap();
        scenario
    }

    /// `toolsmith --config .. --tools-dir .. run TOOL --input {}` with `extra` flags.
    fn run_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = vec![
            "--config".to_owned(),
            self.config.display().to_string(),
            "--tools-dir".to_owned(),
            self.context.tools.display().to_string(),
            "run".to_owned(),
            self.tool.clone(),
            "--input".to_owned(),
            "{}".to_owned(),
        ];
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        args
    }

    fn call(&self, extra: &[&str]) -> Call {
        let mut command = self.context.command();
        command.args(self.run_args(extra));
        self.observe(command)
    }

    /// As [`Scenario::call`], with `env` more variables in toolsmith's environment.
    fn call_with_env(&self, extra: &[&str], env: &[(&str, PathBuf)]) -> Call {
        let mut command = self.context.command();
        command.envs(env.iter().map(|(key, value)| (*key, value)));
        command.args(self.run_args(extra));
        self.observe(command)
    }

    /// The call started by `/bin/sh -c "PREPARE; exec toolsmith ..."`, so toolsmith inherits
    /// what the shell prepared (open descriptors, ignored signals).
    fn call_prepared(&self, prepare: &str) -> Call {
        let toolsmith = self.context.command();
        #[expect(
            clippy::disallowed_methods,
            reason = "the shell prepares the state toolsmith inherits"
        )]
        let mut command = Command::new("/bin/sh");
        command
            .env_clear()
            .envs(
                toolsmith
                    .get_envs()
                    .filter_map(|(key, value)| Some((key, value?))),
            )
            .current_dir(toolsmith.get_current_dir().unwrap())
            .arg("-c")
            .arg(format!("{prepare}; exec \"$0\" \"$@\""))
            .arg(toolsmith.get_program())
            .args(self.run_args(&[]));
        self.observe(command)
    }

    fn observe(&self, mut command: Command) -> Call {
        // The attacks (`a*`, `b*`) try to leave host objects: their window is exclusive.
        let window = Window::open(!self.tool.starts_with('s'));
        let before = HostState::capture(&self.context.tmpdir());
        let started = Instant::now();
        let child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let toolsmith_pid = child.id();
        let output = child.wait_with_output().unwrap();
        let elapsed = started.elapsed();
        let survivors = kill_marked(&format!("{MARKER_VAR}={}", self.marker));
        let leaks = before.leaks(toolsmith_pid, &self.context.root);
        drop(window);
        let next_start = String::from_utf8_lossy(
            &self
                .context
                .command()
                .arg("--config")
                .arg(&self.config)
                .arg("--tools-dir")
                .arg(&self.context.tools)
                .arg("list")
                .output()
                .unwrap()
                .stderr,
        )
        .into_owned();
        let envelope = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "{}: stdout is not a JSON envelope ({error}); stderr: {}",
                self.tool,
                String::from_utf8_lossy(&output.stderr)
            )
        });
        Call {
            envelope,
            output,
            elapsed,
            survivors,
            leaks,
            next_start,
        }
    }
}

impl Call {
    fn metadata(&self, key: &str) -> &Value {
        &self.envelope["metadata"][key]
    }

    /// True when the tool had its own PID namespace: the kernel then kills what the tool
    /// leaves behind the moment it exits, so toolsmith has nothing left to count (the
    /// marker scan still proves nothing survived).
    fn in_pid_namespace(&self) -> bool {
        self.envelope["metadata"]["sandbox"]["pid_namespace"] == json!(true)
    }

    /// `leftovers_killed` is `count` where toolsmith counts leftovers (the cgroup and
    /// subreaper backends always; the others without a PID namespace), and absent where
    /// only the tool's PID namespace, killed with toolsmith's init, holds them.
    #[track_caller]
    fn assert_leftovers(&self, at_least: u64) {
        if self.in_pid_namespace() && matches!(self.backend(), "pidns" | "pgroup") {
            assert_eq!(
                self.metadata("leftovers_killed"),
                &Value::Null,
                "{:#}",
                self.envelope
            );
        } else {
            assert!(
                self.metadata("leftovers_killed").as_u64() >= Some(at_least),
                "{:#}",
                self.envelope
            );
        }
    }

    fn result_text(&self) -> &str {
        self.envelope["result"].as_str().unwrap_or_default()
    }

    fn backend(&self) -> &str {
        self.metadata("backend").as_str().unwrap_or("unknown")
    }

    /// The envelope matches `expected`: every key of `expected` (recursively in objects) has
    /// exactly that value, and a success carries no `error_code` nor a failure a `result`.
    #[track_caller]
    fn assert_envelope(&self, expected: &Value) {
        assert_subset(&self.envelope, expected, "envelope", &self.envelope);
        let success = self.envelope["tool_success"] == json!(true);
        assert_eq!(
            self.envelope.get("error_code").is_none(),
            success,
            "{:#}",
            self.envelope
        );
        assert_eq!(
            self.output.status.code(),
            Some(if success { 0 } else { 1 }),
            "exit status; stderr: {}",
            String::from_utf8_lossy(&self.output.stderr)
        );
    }

    /// Nothing of the run survived (process, cgroup, mount, SysV object, queue, key,
    /// temporary file), the next start is quiet, and it returned within `bound`.
    #[track_caller]
    fn assert_clean(&self, bound: Duration) {
        self.assert_nothing_left();
        assert!(
            self.elapsed <= bound,
            "took {:?}, more than the hang bound {bound:?}",
            self.elapsed
        );
    }

    /// The leak oracle's verdict, checked from outside toolsmith, and a quiet next start.
    #[track_caller]
    fn assert_nothing_left(&self) {
        self.assert_no_leaks();
        assert_eq!(
            self.next_start, "",
            "toolsmith's next start printed warnings after {:#}",
            self.envelope
        );
    }

    /// The leak oracle's verdict alone (for a corpus whose next start must report a broken
    /// tool).
    #[track_caller]
    fn assert_no_leaks(&self) {
        assert_eq!(
            self.survivors, 0,
            "processes of the tool survived the call (killed by the test): {:#}",
            self.envelope
        );
        assert!(
            self.leaks.is_empty(),
            "the call left these on the host (removed by the test): {:#?}\n{:#}",
            self.leaks,
            self.envelope
        );
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        // A tool may have made a test-owned file immutable; the temp dir must still go.
        crate::leaks::clear_immutable(&self.context.root);
    }
}

#[track_caller]
fn assert_subset(actual: &Value, expected: &Value, path: &str, whole: &Value) {
    match expected {
        Value::Object(fields) => {
            for (key, field) in fields {
                let Some(actual_field) = actual.get(key) else {
                    panic!("{path}.{key} is missing in {whole:#}");
                };
                assert_subset(actual_field, field, &format!("{path}.{key}"), whole);
            }
        }
        _ => assert_eq!(actual, expected, "{path} in {whole:#}"),
    }
}

/// Kills (by pid) every live process whose initial environment holds `marker`, returning
/// how many there were.
fn kill_marked(marker: &str) -> usize {
    let mut found = 0;
    for _ in 0..3 {
        let pids = marked(marker);
        if pids.is_empty() {
            break;
        }
        found = found.max(pids.len());
        for pid in pids {
            // SIGKILL by pid through kill(1): the pid was just seen carrying our marker.
            #[expect(clippy::disallowed_methods, reason = "test hygiene: kill a survivor")]
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    found
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// `timeout` plus `grace` plus the margin.
fn bound(timeout_ms: u64, grace_ms: u64) -> Duration {
    Duration::from_millis(timeout_ms + grace_ms) + MARGIN
}

/// The limits most scenarios run under: T = 1 s, G = 300 ms.
const SHORT: &str = "timeout = \"1s\"\ngrace = \"300ms\"";

fn timeout_envelope(tool: &str) -> Value {
    json!({
        "tool_success": false,
        "error": format!("Tool {tool} did not finish within 1s and was killed."),
        "error_code": "TOOL_TIMEOUT",
        "metadata": {"limit": "timeout", "stdout_truncated": false},
    })
}

#[test]
fn s01_busy_loop_times_out() {
    let scenario = Scenario::new("s01-busy-loop", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(&timeout_envelope("s01_busy_loop"));
    assert!(call.metadata("signal").is_u64(), "{:#}", call.envelope);
    call.assert_clean(bound(1000, 300));
}

/// Issue 11 finding 7: at the deadline SIGTERM's default disposition ends a busy loop
/// at once, as in a shell, without waiting for the grace (the tool is not PID 1).
#[test]
fn s01_busy_loop_dies_of_sigterm_without_escalation() {
    let scenario = Scenario::new("s01-busy-loop", "timeout = \"1s\"\ngrace = \"5s\"");
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "error_code": "TOOL_TIMEOUT",
        "metadata": {"limit": "timeout", "signal": 15, "escalated": false},
    }));
    // A liveness bound, not a speed claim: well before the grace would have ended.
    call.assert_clean(Duration::from_millis(5500));
}

/// Issue 11 finding 7: `kill -SEGV $$` is a crash with signal 11, and what the tool
/// printed before is in the envelope.
#[test]
fn s38_a_self_sent_segv_is_a_crash() {
    let scenario = Scenario::new("s38-crashes-itself", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": false,
        "error_code": "TOOL_CRASHED",
        "metadata": {"signal": 11, "stdout": "step 1 done\n"},
    }));
    call.assert_clean(bound(1000, 300));
}

/// Issue 11 finding 7: `kill -TERM $$` is a crash with signal 15, at once.
#[test]
fn s39_a_self_sent_term_is_a_crash() {
    let scenario = Scenario::new(
        "s39-terminates-itself",
        "timeout = \"20s\"\ngrace = \"300ms\"",
    );
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": false,
        "error_code": "TOOL_CRASHED",
        "metadata": {"signal": 15, "escalated": false},
    }));
    assert!(
        call.elapsed < Duration::from_secs(15),
        "took {:?}",
        call.elapsed
    );
    call.assert_clean(bound(20_000, 300));
}

/// Issue 11 finding 7: signalling toolsmith's init gains the tool nothing: SIGKILL and
/// SIGSTOP are dropped, SIGTERM is forwarded to the tool itself.
#[test]
fn s40_signals_to_pid_one_gain_nothing() {
    let scenario = Scenario::new(
        "s40-signals-pid-one",
        "timeout = \"20s\"\ngrace = \"300ms\"",
    );
    let call = scenario.call(&[]);
    if !call.in_pid_namespace() {
        eprintln!(
            "WARNING: no private PID namespace on this kernel: s40 (signals to toolsmith's init) is UNTESTED"
        );
        call.assert_envelope(&json!({"tool_success": false, "metadata": {"exit_code": 99}}));
        return;
    }
    call.assert_envelope(&json!({
        "tool_success": false,
        "error_code": "TOOL_CRASHED",
        "metadata": {"signal": 15, "stdout": "init still there\n"},
    }));
    assert!(
        call.elapsed < Duration::from_secs(15),
        "took {:?}",
        call.elapsed
    );
    call.assert_clean(bound(20_000, 300));
}

#[test]
fn s02_sigterm_ignorer_is_killed_after_the_grace() {
    let scenario = Scenario::new("s02-sigterm-ignorer", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(&timeout_envelope("s02_sigterm_ignorer"));
    call.assert_envelope(&json!({"metadata": {"signal": 9, "escalated": true}}));
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s03_cpu_limit_with_sigxcpu_ignored() {
    let scenario = Scenario::new("s03-cpu-spinner", "timeout = \"10s\"\ngrace = \"300ms\"");
    let call = scenario.call(&["--cpu", "1s"]);
    call.assert_envelope(&json!({
        "tool_success": false,
        "error": "Tool s03_cpu_spinner used up its CPU time limit of 1s and was killed.",
        "error_code": "CPU_LIMIT",
        "metadata": {"limit": "cpu", "signal": 9},
    }));
    let cpu_ms = call.metadata("cpu_time_ms").as_u64().unwrap();
    assert!((1000..2500).contains(&cpu_ms), "cpu_time_ms {cpu_ms}");
    call.assert_clean(bound(10_000, 300));
}

#[test]
fn s04_cpu_limit_is_on_the_aggregate_of_four_spinners() {
    let scenario = Scenario::new("s04-four-spinners", "timeout = \"10s\"\ngrace = \"300ms\"");
    let call = scenario.call(&["--cpu", "1s"]);
    call.assert_envelope(&json!({
        "tool_success": false,
        "error_code": "CPU_LIMIT",
        "metadata": {"limit": "cpu"},
    }));
    let cpu_ms = call.metadata("cpu_time_ms").as_u64().unwrap();
    if call.backend() == "cgroup" {
        // The cgroup sums the tree: four spinners cannot run 4 s of CPU unnoticed.
        assert!((1000..2500).contains(&cpu_ms), "cpu_time_ms {cpu_ms}");
    } else {
        eprintln!(
            "WARNING: backend {} accounts CPU per process; s04 shows the gap: cpu_time_ms {cpu_ms}",
            call.backend()
        );
    }
    call.assert_clean(bound(10_000, 300));
}

#[test]
fn s05_s06_sleepers_time_out() {
    for (file, tool) in [
        ("s05-sleeper", "s05_sleeper"),
        ("s06-forked-sleeper", "s06_forked_sleeper"),
    ] {
        let scenario = Scenario::new(file, SHORT);
        let call = scenario.call(&[]);
        call.assert_envelope(&timeout_envelope(tool));
        call.assert_clean(bound(1000, 300));
        if file == "s28-stops-itself" {
            // Issue 11 finding 7: the tool stopped itself, as in a shell (it never printed
            // "continued"), and at the deadline SIGTERM, then SIGCONT, ended it.
            call.assert_envelope(
                &json!({"metadata": {"signal": 15, "escalated": false, "stdout_bytes": 0}}),
            );
        }
    }
}

#[test]
fn s07_output_before_the_deadline_is_kept() {
    let scenario = Scenario::new("s07-background-sleeper-with-output", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(&timeout_envelope("s07_background_sleeper_with_output"));
    // Issue 11: what the tool printed before the deadline comes back with the timeout.
    call.assert_envelope(&json!({"metadata": {"stdout_bytes": 8, "stdout": "started\n"}}));
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s08_success_with_a_background_child_is_not_a_timeout() {
    let scenario = Scenario::new(
        "s08-success-with-background-child",
        "timeout = \"10s\"\ngrace = \"300ms\"",
    );
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": {"ok": 1},
        "metadata": {"exit_code": 0, "stdout_truncated": false},
    }));
    call.assert_leftovers(1);
    // Far below the 10 s timeout: the background child did not hold the call open.
    call.assert_clean(Duration::from_secs(5));
}

#[test]
fn s09_setsid_child_dies_at_the_deadline() {
    let scenario = Scenario::new("s09-setsid-sleeper", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(&timeout_envelope("s09_setsid_sleeper"));
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s10_setsid_daemon_is_killed_after_success() {
    let scenario = Scenario::new("s10-setsid-daemon", "timeout = \"10s\"\ngrace = \"300ms\"");
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": "spawned",
        "metadata": {"exit_code": 0},
    }));
    call.assert_leftovers(1);
    call.assert_clean(Duration::from_secs(5));
}

#[test]
fn s11_fork_bomb_is_capped_and_the_host_stays_usable() {
    let scenario = Scenario::new(
        "s11-fork-bomb",
        "timeout = \"1s\"\ngrace = \"300ms\"\nmax_processes = 64",
    );
    let bystander = Scenario::new("s20-closes-stdin", "timeout = \"10s\"");
    let call = std::thread::scope(|scope| {
        let bomb = scope.spawn(|| scenario.call(&[]));
        // A second call while the bomb runs (its processes are seen in /proc): it starts,
        // runs and answers.
        let guard = Instant::now() + Duration::from_secs(10);
        while marked(&format!("{MARKER_VAR}={}", scenario.marker)).is_empty() {
            assert!(Instant::now() < guard, "the fork bomb never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        let other = bystander.call(&[]);
        other.assert_envelope(&json!({"tool_success": true, "result": "ok"}));
        bomb.join().unwrap()
    });
    call.assert_envelope(&timeout_envelope("s11_fork_bomb"));
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s12_two_hundred_background_sleepers_are_killed() {
    let scenario = Scenario::new(
        "s12-two-hundred-sleepers",
        "timeout = \"10s\"\ngrace = \"300ms\"",
    );
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": "started",
        "metadata": {"exit_code": 0},
    }));
    call.assert_leftovers(200);
    call.assert_clean(Duration::from_secs(10));
}

#[test]
fn s13_s14_memory_limit_is_on_the_tree() {
    for (file, tool) in [
        ("s13-memory-hog", "s13_memory_hog"),
        (
            "s14-two-children-over-the-cap",
            "s14_two_children_over_the_cap",
        ),
    ] {
        let scenario = Scenario::new(file, "timeout = \"10s\"\ngrace = \"300ms\"");
        let call = scenario.call(&["--memory", "64MiB"]);
        if call.backend() == "cgroup" {
            call.assert_envelope(&json!({
                "tool_success": false,
                "error": format!("Tool {tool} exceeded its memory limit of 64 MiB and was killed."),
                "error_code": "MEMORY_LIMIT",
                "metadata": {"limit": "memory"},
            }));
        } else {
            eprintln!(
                "WARNING: backend {} has no OOM accounting; {tool} gave {}",
                call.backend(),
                call.envelope["error_code"]
            );
        }
        call.assert_clean(bound(10_000, 300));
    }
}

#[test]
fn s15_runtimes_that_reserve_address_space_run_under_default_limits() {
    let mut ran = Vec::new();
    if which("java").is_some() {
        let scenario = Scenario::new("s15-java", "timeout = \"30s\"");
        let call = scenario.call(&[]);
        call.assert_envelope(&json!({"tool_success": true, "metadata": {"exit_code": 0}}));
        assert!(
            call.metadata("stderr")
                .as_str()
                .unwrap()
                .contains("version"),
            "{:#}",
            call.envelope
        );
        call.assert_clean(Duration::from_secs(30));
        ran.push("java");
    } else {
        eprintln!("WARNING: java is not installed, s15 java SKIPPED");
    }
    let binaries = [
        (
            "s15-asan",
            "asan-hello",
            "gcc",
            "hello from asan",
            "#include <stdio.h>\nint main(void) { puts(\"hello from asan\"); return 0; }\n",
        ),
        (
            "s15-rust",
            "rust-hello",
            "rustc",
            "hello from rust",
            "fn main() { println!(\"hello from rust\"); }\n",
        ),
    ];
    for (file, binary, compiler, greeting, source) in binaries {
        if which(compiler).is_none() {
            eprintln!("WARNING: {compiler} is not installed, s15 {binary} SKIPPED");
            continue;
        }
        let scenario = Scenario::new(file, "timeout = \"30s\"");
        let output_path = scenario.bin.join(binary);
        let status = if compiler == "gcc" {
            let source_path = scenario.context.root.join("hello.c");
            fs::write(&source_path, source).unwrap();
            #[expect(clippy::disallowed_methods, reason = "the test builds its fixture")]
            Command::new("gcc")
                .args(["-fsanitize=address", "-o"])
                .arg(&output_path)
                .arg(&source_path)
                .status()
                .unwrap()
        } else {
            let source_path = scenario.context.root.join("hello.rs");
            fs::write(&source_path, source).unwrap();
            #[expect(clippy::disallowed_methods, reason = "the test builds its fixture")]
            Command::new("rustc")
                .arg("-o")
                .arg(&output_path)
                .arg(&source_path)
                .status()
                .unwrap()
        };
        if !status.success() {
            eprintln!("WARNING: {compiler} could not build {binary}, s15 {binary} SKIPPED");
            continue;
        }
        let call = scenario.call(&[]);
        call.assert_envelope(&json!({"tool_success": true, "result": greeting}));
        call.assert_clean(Duration::from_secs(30));
        ran.push(binary);
    }
    eprintln!("s15 ran {ran:?}");
    if which("go").is_none() {
        eprintln!(
            "WARNING: go is not installed, s15 go SKIPPED (the Rust binary stands in for it)"
        );
    }
}

#[test]
fn s16_stdout_flood_is_bounded() {
    let scenario = Scenario::new("s16-stdout-flood", "timeout = \"60s\"\ngrace = \"300ms\"");
    let call = scenario.call(&["--max-output", "1MiB"]);
    call.assert_envelope(&json!({
        "tool_success": true,
        "metadata": {"exit_code": 0, "stdout_truncated": true, "stdout_bytes": 2_147_483_648_u64},
    }));
    assert_eq!(
        call.result_text().len(),
        1 << 20,
        "the cap is kept, no more"
    );
    call.assert_clean(bound(60_000, 300));
}

#[test]
fn s17_stderr_flood_does_not_block_stdout() {
    let scenario = Scenario::new("s17-stderr-flood", "timeout = \"30s\"\ngrace = \"300ms\"");
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": "0123456789",
        "metadata": {
            "exit_code": 0,
            "stdout_bytes": 10,
            "stderr_bytes": 1_073_741_824_u64,
            "stderr_truncated": true,
        },
    }));
    assert!(call.metadata("stderr").as_str().unwrap().len() <= 64 << 10);
    call.assert_clean(bound(30_000, 300));
}

#[test]
fn s18_one_mebibyte_beyond_the_pipe_buffer() {
    let scenario = Scenario::new(
        "s18-one-mebibyte",
        "timeout = \"10s\"\nmax_output = \"2MiB\"",
    );
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": "a".repeat(1 << 20),
        "metadata": {"exit_code": 0, "stdout_truncated": false, "stdout_bytes": 1 << 20},
    }));
    call.assert_clean(Duration::from_secs(10));
}

#[test]
fn s19_eight_mebibytes_of_arguments_never_read() {
    let scenario = Scenario::new("s19-never-reads-stdin", SHORT);
    let input = scenario.context.root.join("input.json");
    fs::write(
        &input,
        serde_json::to_vec(&json!({"blob": "x".repeat(8 << 20)})).unwrap(),
    )
    .unwrap();
    let mut command = scenario.context.command();
    let mut args = scenario.run_args(&[]);
    args.truncate(args.len() - 1);
    args.push(format!("@{}", input.display()));
    command.args(args);
    let call = scenario.observe(command);
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": {"done": true},
        "metadata": {"exit_code": 0},
    }));
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s20_s21_closed_or_absent_stdin() {
    let scenario = Scenario::new("s20-closes-stdin", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(
        &json!({"tool_success": true, "result": "ok", "metadata": {"exit_code": 0}}),
    );
    call.assert_clean(bound(1000, 300));

    // A manifest tool gets no arguments on stdin: `cat` must see /dev/null, not a pipe
    // that never closes (a 1 s timeout would catch that).
    let scenario = Scenario::new("s21-cat-without-input.md", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(
        &json!({"tool_success": true, "result": "after-cat", "metadata": {"exit_code": 0}}),
    );
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s22_file_size_limit() {
    let scenario = Scenario::writing_scratch(
        "s22-file-size",
        "timeout = \"10s\"\nmax_file_size = \"1MiB\"",
    );
    let call = scenario.call(&[]);
    // As in a shell, with or without a PID namespace: toolsmith's init is PID 1, not
    // `head`, so the kernel's SIGXFSZ reaches it (issue 11 finding 7).
    call.assert_envelope(&json!({
        "tool_success": false,
        "error_code": "TOOL_CRASHED",
        "metadata": {"signal": 25},
    }));
    let written = fs::metadata(scenario.scratch.join("big")).unwrap().len();
    assert!(written <= 1 << 20, "the file grew to {written} bytes");
    call.assert_clean(Duration::from_secs(10));
}

#[test]
fn s23_open_file_limit() {
    let scenario = Scenario::new("s23-open-files", "timeout = \"10s\"\nmax_open_files = 256");
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({"tool_success": true, "metadata": {"exit_code": 0}}));
    let (count, reason) = call.result_text().split_once(' ').unwrap();
    let count: u32 = count.parse().unwrap();
    assert!(count < 256, "{count} files opened");
    assert_eq!(reason, "Too many open files");
    call.assert_clean(Duration::from_secs(10));
}

#[test]
fn s24_only_stdio_is_inherited() {
    let scenario = Scenario::new("s24-inherited-fds", SHORT);
    // toolsmith itself inherits descriptors 7 and 8; the tool must not.
    let call = scenario.call_prepared("exec 7</dev/null 8>/dev/null");
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": "0\n1\n2\n3",
        "metadata": {"exit_code": 0},
    }));
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s25_toolsmiths_secret_is_not_in_the_tools_environment() {
    let scenario = Scenario::new("s25-environment", SHORT);
    let mut command = scenario.context.command();
    command
        .env("SECRET_TOKEN", "hunter2-s25")
        .args(scenario.run_args(&[]));
    let call = scenario.observe(command);
    call.assert_envelope(&json!({"tool_success": true, "metadata": {"exit_code": 0}}));
    let environment = call.result_text();
    assert!(environment.contains(MARKER_VAR), "{environment}");
    assert!(!environment.contains("hunter2-s25"), "{environment}");
    assert!(!environment.contains("SECRET_TOKEN"), "{environment}");
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s26_ignored_signals_are_reset() {
    let scenario = Scenario::new("s26-signal-dispositions", SHORT);
    let call = scenario.call_prepared("trap '' INT TERM");
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": "SigIgn:\t0000000000000000",
    }));
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s27_kill_minus_one_reaches_only_the_tools_namespace() {
    let scenario = Scenario::new("s27-kill-everything", SHORT);
    let call = scenario.call(&[]);
    if call.envelope["metadata"]["sandbox"]["pid_namespace"] != json!(true) {
        let message = format!(
            "WARNING: no private PID namespace here, s27 SKIPPED (the fixture refused): {}",
            call.envelope
        );
        assert!(
            std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
            "{message}"
        );
        eprintln!("{message}");
        return;
    }
    call.assert_envelope(&json!({
        "tool_success": true,
        // The tool alone: toolsmith's init (PID 1) is hidden from it (`hidepid=4`).
        "result": "alive, ppid 1, 1 process(es) in /proc",
    }));
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s28_s29_stopped_or_signal_blocking_trees_are_still_killed() {
    for (file, tool) in [
        ("s28-stops-itself", "s28_stops_itself"),
        ("s29-blocks-every-signal", "s29_blocks_every_signal"),
    ] {
        let scenario = Scenario::new(file, SHORT);
        let call = scenario.call(&[]);
        call.assert_envelope(&timeout_envelope(tool));
        call.assert_clean(bound(1000, 300));
        if file == "s28-stops-itself" {
            // Issue 11 finding 7: the tool stopped itself, as in a shell (it never printed
            // "continued"), and at the deadline SIGTERM, then SIGCONT, ended it.
            call.assert_envelope(
                &json!({"metadata": {"signal": 15, "escalated": false, "stdout_bytes": 0}}),
            );
        }
    }
}

#[test]
fn s30_segfault_leaves_no_core() {
    let scenario = Scenario::new("s30-segfault", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": false,
        "error": "Tool s30_segfault was killed by signal 11: core limit: 0.",
        "error_code": "TOOL_CRASHED",
        "metadata": {"signal": 11, "stderr": "core limit: 0\n"},
    }));
    for dir in [&scenario.context.project, &scenario.context.tools] {
        let cores: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().starts_with("core"))
            .collect();
        assert!(
            cores.is_empty(),
            "core files in {}: {cores:?}",
            dir.display()
        );
    }
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s31_programs_that_cannot_start_say_why() {
    let scenario = Scenario::new("s31-no-shebang", SHORT);
    let call = scenario.call(&[]);
    let tools = scenario.context.tools.display().to_string();
    call.assert_envelope(&json!({
        "tool_success": false,
        "error": format!("Tool s31_no_shebang could not be loaded from {tools}/s31-no-shebang: `description` could not be started: failed to start `{tools}/s31-no-shebang` (execve): Exec format error (os error 8)."),
        "error_code": "TOOL_NOT_FOUND",
    }));
    assert!(call.metadata("exit_code").is_null(), "not an exit 127");
    // The next start reports the broken tool, by design: only the leaks are checked.
    call.assert_no_leaks();

    // A script that lost its executable bit.
    let scenario = Scenario::new("s20-closes-stdin", SHORT);
    let tool = scenario.context.tools.join("s20-closes-stdin");
    fs::set_permissions(&tool, fs::Permissions::from_mode(0o644)).unwrap();
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": false,
        "error": format!("Tool s20_closes_stdin could not be loaded from {}: it starts with `#!` but is not executable (chmod +x it).", tool.display()),
        "error_code": "TOOL_NOT_FOUND",
    }));
    call.assert_no_leaks();
}

#[test]
fn s32_unwaited_child_leaves_no_zombie() {
    let scenario = Scenario::new("s32-unwaited-child", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(
        &json!({"tool_success": true, "result": "done", "metadata": {"exit_code": 0}}),
    );
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s34_an_unrelated_process_is_never_signalled() {
    let scenario = Scenario::new("s34-leftovers-next-to-a-stranger", "timeout = \"10s\"");
    #[expect(
        clippy::disallowed_methods,
        reason = "the unrelated process of the scenario"
    )]
    let mut stranger = Command::new("sleep").arg("60").spawn().unwrap();
    let call = scenario.call(&[]);
    let stranger_status = stranger.try_wait().unwrap();
    stranger.kill().unwrap();
    stranger.wait().unwrap();
    assert_eq!(stranger_status, None, "the unrelated process was killed");
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": "left",
        "metadata": {"exit_code": 0},
    }));
    call.assert_leftovers(2);
    call.assert_clean(Duration::from_secs(10));
}

#[test]
fn s36_no_controlling_terminal() {
    let scenario = Scenario::new("s36-tty", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": "not a tty\ncannot open /dev/tty",
    }));
    call.assert_clean(bound(1000, 300));
}

#[test]
fn s37_binary_output_gives_a_valid_envelope() {
    let scenario = Scenario::new("s37-binary-output", SHORT);
    let call = scenario.call(&[]);
    // observe() parsed stdout as JSON: the envelope is valid. The bytes that are not UTF-8
    // become U+FFFD, flagged by `stdout_lossy`, and the NUL is escaped.
    call.assert_envelope(&json!({
        "tool_success": true,
        "result": "ok\u{fffd}\u{fffd}\u{0}end",
        "metadata": {"exit_code": 0, "stdout_bytes": 8, "stdout_lossy": true},
    }));
    call.assert_clean(bound(1000, 300));
}

/// Every file of the corpus is a tool that loads (but the one whose point is not to), so a
/// scenario cannot silently turn into a "tool not found".
#[test]
fn the_corpus_loads() {
    let context = TestContext::new();
    let output = context
        .command()
        .arg("--tools-dir")
        .arg(corpus())
        .args(["list", "--json", "--all"])
        .output()
        .unwrap();
    let listing: Value = serde_json::from_slice(&output.stdout).unwrap();
    let problems: Vec<&str> = listing["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|problem| problem["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        problems,
        [corpus().join("s31-no-shebang").display().to_string()]
    );
    // Files only: `sandbox/` holds the sandbox cases (`sandbox.rs`), which discovery does not
    // descend into.
    let n_files = fs::read_dir(corpus())
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_type().unwrap().is_file())
        .count();
    assert_eq!(listing["tools"].as_array().unwrap().len(), n_files - 1);
}

// Issue 11: a hostile tool run by a root toolsmith cannot undo its sandbox. `a*` are the
// issue's findings 1 to 6 (finding 7, fidelity, is the `init` tests: `kill -SEGV $$`,
// `kill -TERM $$`, the 1 s timeout of a busy shell, `kill -STOP $$`); `b*` reach the same goals
// other ways. Each script prints `held: WHAT` for an attempt that failed and `ESCAPED: WHAT`
// for one that worked; the test also checks the effect from outside where there is one, and
// the leak oracle (`leaks.rs`) runs after every call.

/// The sandbox was not undone: no `ESCAPED` line, and every attempt of `held` was made and
/// failed (so an attempt that silently did not run cannot pass).
#[track_caller]
fn assert_held(call: &Call, held: &[&str]) {
    let text = format!(
        "{}\n{}",
        call.result_text(),
        call.metadata("stderr").as_str().unwrap_or_default()
    );
    let escaped: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("ESCAPED"))
        .collect();
    assert!(
        escaped.is_empty(),
        "the tool undid its sandbox: {escaped:#?}\n{:#}",
        call.envelope
    );
    for attempt in held {
        let line = format!("held: {attempt}");
        assert!(
            text.lines().any(|printed| printed == line),
            "attempt `{attempt}` was not made: {:#}",
            call.envelope
        );
    }
}

/// True (and a loud warning otherwise) when the attacks can run as the issue means them: as
/// root, with the interpreter their scripts use.
fn attacks_can_run(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let python = Path::new("/usr/bin/python3").is_file();
    if root && python {
        return true;
    }
    let message = format!(
        "WARNING: {what} needs root and /usr/bin/python3 (root: {root}, python3: {python}); SKIPPED"
    );
    assert!(
        std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
        "{message}"
    );
    eprintln!("{message}");
    false
}

/// Warns when the call ran on a backend without cgroups, where a limit of the attack is
/// not a cgroup one; true on the cgroup backend.
fn on_cgroups(call: &Call) -> bool {
    if call.backend() == "cgroup" {
        return true;
    }
    eprintln!(
        "WARNING: backend {} has no cgroup; the cgroup half of {} is not shown",
        call.backend(),
        call.envelope
    );
    false
}

const PROJECT: &str = "[sandbox]\nfilesystem = \"project\"\n";
const READ_ONLY: &str = "[sandbox]\nfilesystem = \"read-only\"\n";
const TEN_SECONDS: &str = "timeout = \"10s\"\ngrace = \"300ms\"";

/// Makes the scenario's project a git work tree with a `.toolsmith` (config and tools
/// directory) and returns every file of `.git` and `.toolsmith` with its bytes, to compare
/// after the call.
fn protected_project(scenario: &Scenario) -> Vec<(PathBuf, Vec<u8>)> {
    let project = &scenario.context.project;
    #[expect(clippy::disallowed_methods, reason = "the test builds its fixture")]
    let status = Command::new("git")
        .args(["init", "-q"])
        .current_dir(project)
        .status()
        .unwrap();
    assert!(status.success());
    scenario.context.project_file(
        ".toolsmith/config.toml",
        "# the operator's project config\n",
    );
    fs::create_dir_all(project.join(".toolsmith/tools")).unwrap();
    protected_files(project)
}

fn protected_files(project: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![project.join(".git"), project.join(".toolsmith")];
    while let Some(path) = pending.pop() {
        let Ok(metadata) = fs::symlink_metadata(&path) else {
            files.push((path, b"<missing>".to_vec()));
            continue;
        };
        if metadata.file_type().is_symlink() {
            files.push((path, b"<symlink>".to_vec()));
        } else if metadata.is_dir() {
            files.push((path.clone(), b"<dir>".to_vec()));
            pending.extend(
                fs::read_dir(&path)
                    .unwrap()
                    .flatten()
                    .map(|entry| entry.path()),
            );
        } else {
            files.push((path.clone(), fs::read(&path).unwrap()));
        }
    }
    files.sort();
    files
}

#[track_caller]
fn assert_protected_unchanged(scenario: &Scenario, before: &[(PathBuf, Vec<u8>)]) {
    let after = protected_files(&scenario.context.project);
    let changed: Vec<&PathBuf> = after
        .iter()
        .filter(|entry| !before.contains(entry))
        .chain(before.iter().filter(|entry| !after.contains(entry)))
        .map(|(path, _)| path)
        .collect();
    assert!(
        changed.is_empty(),
        "the tool changed protected paths: {changed:#?}"
    );
}

#[test]
fn a01_cgroup_limits_cannot_be_raised_nor_left() {
    if !attacks_can_run("a01") {
        return;
    }
    let scenario = Scenario::new("a01-cgroup-limits", TEN_SECONDS);
    let call = scenario.call(&["--memory", "64MiB"]);
    assert_held(&call, &[]);
    if on_cgroups(&call) {
        call.assert_envelope(&json!({
            "tool_success": false,
            "error_code": "MEMORY_LIMIT",
            "metadata": {"limit": "memory"},
        }));
    }
    call.assert_clean(bound(10_000, 300));
}

#[test]
fn a02_network_deny_survives_an_unmounted_proc_and_pathname_sockets() {
    if !attacks_can_run("a02") {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The pathname socket lives in the test's temp dir, outside the scenario's own.
    let unix_dir = tempfile::tempdir().unwrap();
    let unix = unix_dir.path().join("listener.sock");
    let unix_listener = std::os::unix::net::UnixListener::bind(&unix).unwrap();
    let scenario = Scenario::with_config(
        "a02-network-deny-escape",
        SHORT,
        &format!(
            "HOSTILE_PORT = \"{port}\", HOSTILE_UNIX = \"{}\", ",
            unix.display()
        ),
        "[sandbox]\nnetwork = \"deny\"\n",
    );
    let call = scenario.call(&[]);
    drop((listener, unix_listener));
    call.assert_envelope(
        &json!({"tool_success": true, "metadata": {"sandbox": {"network": "deny"}}}),
    );
    assert_held(&call, &["host loopback", "pathname socket"]);
    call.assert_clean(bound(1000, 300));
}

#[test]
fn a03_toolsmiths_memory_keeps_its_secret() {
    if !attacks_can_run("a03") {
        return;
    }
    // Reading every mapping of toolsmith takes a while on a loaded machine.
    let scenario = Scenario::new("a03-secret-in-memory", TEN_SECONDS);
    let secret = format!("hunter2-a03-{}", std::process::id());
    let mut command = scenario.context.command();
    command
        .env("SECRET_TOKEN", &secret)
        .args(scenario.run_args(&[]));
    let call = scenario.observe(command);
    assert!(
        !call.envelope.to_string().contains(&secret),
        "the secret leaked: {:#}",
        call.envelope
    );
    assert_held(&call, &["toolsmith's memory"]);
    call.assert_clean(bound(10_000, 300));
}

/// What a04 may not change of its victim: mode, owner, times, extended attributes, flags.
fn victim_state(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let metadata = fs::metadata(path).unwrap();
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let mut names = [0u8; 1024];
    // SAFETY: the buffer and its length match; the path is NUL-terminated.
    let length = unsafe { libc::listxattr(name.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    #[expect(
        clippy::disallowed_methods,
        reason = "the test reads the flags from outside"
    )]
    let flags = Command::new("lsattr")
        .arg("-d")
        .arg(path)
        .output()
        .map_or_else(
            |_| "no lsattr".to_owned(),
            |output| {
                String::from_utf8_lossy(&output.stdout)
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            },
        );
    format!(
        "mode {:o} owner {}:{} mtime {} xattrs {:?} flags {flags}",
        metadata.mode(),
        metadata.uid(),
        metadata.gid(),
        metadata.mtime(),
        String::from_utf8_lossy(&names[..usize::try_from(length).unwrap_or(0)]),
    )
}

/// Device nodes below `dir`.
fn device_nodes(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in fs::read_dir(&next).into_iter().flatten().flatten() {
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_block_device() || kind.is_char_device() {
                found.push(entry.path());
            }
        }
    }
    found
}

#[test]
fn a04_no_metadata_change_outside_the_writable_roots() {
    if !attacks_can_run("a04") {
        return;
    }
    let scenario = Scenario::with_config("a04-metadata-outside-the-roots", SHORT, "", PROJECT);
    let victim = scenario.scratch.join("victim");
    fs::write(&victim, "the test's file\n").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).unwrap();
    let before = victim_state(&victim);
    let call = scenario.call(&[]);
    let after = victim_state(&victim);
    let nodes = device_nodes(&scenario.context.project);
    crate::leaks::clear_immutable(&scenario.scratch);
    call.assert_envelope(
        &json!({"tool_success": true, "metadata": {"sandbox": {"filesystem": "project"}}}),
    );
    assert_held(
        &call,
        &[
            "mknod char device in the project",
            "mknod block device in TMPDIR",
            "chmod 4777",
            "chown",
            "user xattr",
            "security.capability xattr",
            "chattr +i",
            "touch -d 2001-01-01",
        ],
    );
    assert_eq!(after, before, "the victim outside the roots changed");
    assert!(nodes.is_empty(), "device nodes in the project: {nodes:?}");
    call.assert_clean(bound(1000, 300));
}

#[test]
fn a05_git_and_toolsmith_dirs_stay_read_only() {
    if !attacks_can_run("a05") {
        return;
    }
    let scenario = Scenario::with_config("a05-self-loosening", SHORT, "", PROJECT);
    let before = protected_project(&scenario);
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({"tool_success": true}));
    assert_held(
        &call,
        &[
            ".toolsmith/config.toml",
            ".toolsmith/tools/planted",
            ".git/hooks/pre-commit",
            ".git/config",
        ],
    );
    assert_protected_unchanged(&scenario, &before);
    call.assert_clean(bound(1000, 300));
}

/// A SysV shared memory segment of the test's, holding `token`, removed on drop.
struct HostSegment {
    id: i32,
    key: i32,
}

impl HostSegment {
    fn new(token: &[u8]) -> HostSegment {
        let key = crate::leaks::test_segment_key();
        // SAFETY: plain SysV calls on a segment this test creates; the copy fits its 4 KiB.
        unsafe {
            let id = libc::shmget(key, 4096, libc::IPC_CREAT | libc::IPC_EXCL | 0o600);
            assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
            let address = libc::shmat(id, std::ptr::null(), 0);
            std::ptr::copy_nonoverlapping(token.as_ptr(), address.cast::<u8>(), token.len());
            libc::shmdt(address);
            HostSegment { id, key }
        }
    }

    fn read(&self, length: usize) -> Vec<u8> {
        // SAFETY: attaches the test's own 4 KiB segment read-only and copies `length` bytes.
        unsafe {
            let address = libc::shmat(self.id, std::ptr::null(), libc::SHM_RDONLY);
            assert_ne!(
                address as isize,
                -1,
                "the test's segment is gone: {}",
                std::io::Error::last_os_error()
            );
            let bytes = std::slice::from_raw_parts(address.cast::<u8>(), length).to_vec();
            libc::shmdt(address);
            bytes
        }
    }
}

impl Drop for HostSegment {
    fn drop(&mut self) {
        // SAFETY: removes the test's own segment.
        unsafe { libc::shmctl(self.id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

#[test]
fn a06_sysv_objects_keys_cgroup_dirs_and_immutable_files_do_not_outlive_the_call() {
    if !attacks_can_run("a06") {
        return;
    }
    let token = b"host-token\0";
    let segment = HostSegment::new(token);
    let scenario = Scenario::with_config(
        "a06-leftovers",
        SHORT,
        &format!("HOSTILE_SHM_KEY = \"{}\", ", segment.key),
        READ_ONLY,
    );
    let call = scenario.call(&[]);
    let segment_after = segment.read(token.len());
    drop(segment);
    call.assert_envelope(&json!({"tool_success": true}));
    let mut held = vec!["add_key", "host segment", "chattr"];
    if on_cgroups(&call) {
        held.push("cgroup mkdir");
    }
    assert_held(&call, &held);
    assert_eq!(segment_after, token, "the tool wrote the host's segment");
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b01_a_cgroup_filesystem_of_its_own_does_not_raise_the_limit() {
    if !attacks_can_run("b01") {
        return;
    }
    let scenario = Scenario::new("b01-cgroup2-mount", TEN_SECONDS);
    let call = scenario.call(&["--memory", "64MiB"]);
    assert_held(&call, &[]);
    if on_cgroups(&call) {
        call.assert_envelope(&json!({"tool_success": false, "error_code": "MEMORY_LIMIT"}));
    }
    call.assert_clean(bound(10_000, 300));
}

#[test]
fn b02_hard_rlimits_cannot_be_raised() {
    if !attacks_can_run("b02") {
        return;
    }
    let scenario = Scenario::new(
        "b02-rlimit-raise",
        "timeout = \"10s\"\nmax_file_size = \"1MiB\"\nmax_open_files = 64",
    );
    let call = scenario.call(&[]);
    assert_held(&call, &["rlimit -f", "rlimit -n", "rlimit -c"]);
    let written = fs::metadata(scenario.scratch.join("big")).map_or(0, |file| file.len());
    assert!(written <= 1 << 20, "the file grew to {written} bytes");
    call.assert_clean(Duration::from_secs(10));
}

#[test]
fn b03_no_sibling_cgroup_outside_the_leaf() {
    if !attacks_can_run("b03") {
        return;
    }
    let scenario = Scenario::new("b03-sibling-cgroup", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({"tool_success": true}));
    if on_cgroups(&call) {
        assert_held(&call, &["sibling cgroup 0", "sibling cgroup pids"]);
    }
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b04_moving_proc_aside_shows_no_host_process() {
    use std::os::unix::process::CommandExt;
    if !attacks_can_run("b04") {
        return;
    }
    let stranger_id = format!("{}x{}", std::process::id(), line!());
    #[expect(
        clippy::disallowed_methods,
        reason = "the host process the tool must not see"
    )]
    let mut stranger = Command::new("sleep")
        .arg0(format!("STRANGER_{stranger_id}"))
        .arg("30")
        .spawn()
        .unwrap();
    let scenario = Scenario::with_config(
        "b04-proc-move",
        SHORT,
        &format!("HOSTILE_STRANGER = \"{stranger_id}\", "),
        "",
    );
    let call = scenario.call(&[]);
    stranger.kill().unwrap();
    stranger.wait().unwrap();
    assert_held(&call, &["host processes"]);
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b05_a_nested_user_namespace_does_not_unlock_protected_paths() {
    if !attacks_can_run("b05") {
        return;
    }
    let scenario = Scenario::with_config("b05-nested-user-namespace", SHORT, "", PROJECT);
    let before = protected_project(&scenario);
    let call = scenario.call(&[]);
    assert_held(&call, &["nested user namespace"]);
    assert_protected_unchanged(&scenario, &before);
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b06_protected_paths_cannot_be_remounted_or_uncovered() {
    if !attacks_can_run("b06") {
        return;
    }
    let scenario = Scenario::with_config("b06-remount-protected", SHORT, "", PROJECT);
    let before = protected_project(&scenario);
    let call = scenario.call(&[]);
    assert_held(&call, &[".git/config"]);
    assert_protected_unchanged(&scenario, &before);
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b07_protected_paths_cannot_be_linked_renamed_or_swapped() {
    if !attacks_can_run("b07") {
        return;
    }
    let scenario = Scenario::with_config("b07-link-and-swap-protected", SHORT, "", PROJECT);
    let before = protected_project(&scenario);
    let call = scenario.call(&[]);
    assert_held(
        &call,
        &[
            "hard link to config.toml",
            "rename .toolsmith",
            "symlink swap of .git/hooks",
        ],
    );
    assert_protected_unchanged(&scenario, &before);
    assert!(
        !scenario.context.project.join(".toolsmith-old").exists(),
        ".toolsmith was renamed"
    );
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b08_no_setuid_root_file_is_left_in_the_project() {
    if !attacks_can_run("b08") {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let scenario = Scenario::with_config("b08-setuid-copy", SHORT, "", PROJECT);
    let call = scenario.call(&[]);
    let planted: Vec<PathBuf> = fs::read_dir(&scenario.context.project)
        .unwrap()
        .flatten()
        .filter(|entry| {
            entry
                .metadata()
                .is_ok_and(|metadata| metadata.uid() == 0 && metadata.mode() & 0o6000 != 0)
        })
        .map(|entry| entry.path())
        .collect();
    for path in &planted {
        let _ = fs::remove_file(path);
    }
    assert_held(&call, &["setuid copy"]);
    assert!(
        planted.is_empty(),
        "setuid-root files in the project: {planted:?}"
    );
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b16_no_setuid_root_file_through_any_other_door() {
    if !attacks_can_run("b16") {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let scenario = Scenario::with_config("b16-setuid-other-doors", SHORT, "", PROJECT);
    let call = scenario.call(&[]);
    let planted: Vec<PathBuf> = fs::read_dir(&scenario.context.project)
        .unwrap()
        .flatten()
        .filter(|entry| {
            entry
                .metadata()
                .is_ok_and(|metadata| metadata.uid() == 0 && metadata.mode() & 0o6000 != 0)
        })
        .map(|entry| entry.path())
        .collect();
    for path in &planted {
        let _ = fs::remove_file(path);
    }
    assert_held(
        &call,
        &[
            "open with a setuid mode",
            "mknod of a setuid file",
            "fchmod of an open file",
            "install -m 4755",
        ],
    );
    assert!(
        planted.is_empty(),
        "setuid-root files in the project: {planted:?}"
    );
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b17_no_datagram_leaves_network_deny_through_a_socketpair() {
    if !attacks_can_run("b17") {
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    // The pathname listener lives in the test's temp dir, outside the scenario's own, and
    // anyone may write to it, as to /dev/log.
    let unix_dir = tempfile::tempdir().unwrap();
    let pathname = unix_dir.path().join("datagrams.sock");
    let pathname_listener = UnixDatagram::bind(&pathname).unwrap();
    fs::set_permissions(&pathname, fs::Permissions::from_mode(0o777)).unwrap();
    let abstract_name = format!("toolsmith-b17-{}", std::process::id());
    let abstract_listener =
        UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&abstract_name).unwrap()).unwrap();
    let scenario = Scenario::with_config(
        "b17-datagram-pair",
        SHORT,
        &format!(
            "HOSTILE_UNIX_DGRAM = \"{}\", HOSTILE_ABSTRACT = \"{abstract_name}\", ",
            pathname.display()
        ),
        "[sandbox]\nnetwork = \"deny\"\n",
    );
    let call = scenario.call(&[]);
    let arrived = |listener: &UnixDatagram| {
        listener.set_nonblocking(true).unwrap();
        let mut buffer = [0_u8; 64];
        listener
            .recv(&mut buffer)
            .map(|length| String::from_utf8_lossy(&buffer[..length]).into_owned())
            .ok()
    };
    assert_eq!(arrived(&pathname_listener), None, "pathname listener");
    assert_eq!(arrived(&abstract_listener), None, "abstract listener");
    call.assert_envelope(
        &json!({"tool_success": true, "metadata": {"sandbox": {"network": "deny"}}}),
    );
    assert_held(
        &call,
        &[
            "pathname datagram",
            "abstract datagram",
            "stream pair",
            "seqpacket pair",
            "datagram socket",
            "netlink socket",
            "tipc pair",
        ],
    );
    let printed: Vec<&str> = call.result_text().lines().collect();
    for refusal in [
        "refused: pathname datagram EPERM",
        "refused: datagram socket EPERM",
        "refused: netlink socket EPERM",
        "refused: tipc pair EPERM",
        "stream pair talks",
    ] {
        assert!(
            printed.contains(&refusal),
            "no `{refusal}`: {:#}",
            call.envelope
        );
    }
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b09_proc_sys_and_sysrq_trigger_are_read_only() {
    if !attacks_can_run("b09") {
        return;
    }
    let scenario = Scenario::new("b09-proc-sys-and-sysrq", SHORT);
    let call = scenario.call(&[]);
    if call.result_text().contains("absent: sysrq-trigger") {
        eprintln!("WARNING: this kernel has no /proc/sysrq-trigger; b09 tries /proc/sys alone");
        assert_held(&call, &["/proc/sys"]);
    } else {
        assert_held(&call, &["/proc/sys", "sysrq-trigger"]);
    }
    call.assert_clean(bound(1000, 300));
}

fn hostname() -> Vec<u8> {
    let mut name = [0u8; 256];
    // SAFETY: the buffer and its length match.
    unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    name.split(|&byte| byte == 0).next().unwrap().to_vec()
}

#[test]
fn b10_the_hosts_hostname_is_out_of_reach() {
    if !attacks_can_run("b10") {
        return;
    }
    let host_uts = fs::read_link("/proc/self/ns/uts").unwrap();
    let before = hostname();
    let scenario = Scenario::with_config(
        "b10-hostname",
        SHORT,
        &format!("HOSTILE_HOST_UTS = \"{}\", ", host_uts.display()),
        "",
    );
    let call = scenario.call(&[]);
    assert_eq!(hostname(), before, "the host's hostname changed");
    assert_held(&call, &["hostname"]);
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b11_posix_message_queues_do_not_outlive_the_call() {
    if !attacks_can_run("b11") {
        return;
    }
    let scenario = Scenario::new("b11-mqueue", SHORT);
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({"tool_success": true}));
    assert!(call.result_text().ends_with("done"), "{:#}", call.envelope);
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b12_no_key_in_the_inherited_session_keyring() {
    if !attacks_can_run("b12") {
        return;
    }
    let scenario = Scenario::new("b12-session-keyring", SHORT);
    let call = scenario.call(&[]);
    assert_held(&call, &["session keyring", "user session keyring"]);
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b13_no_device_node_in_the_project() {
    if !attacks_can_run("b13") {
        return;
    }
    let scenario = Scenario::with_config("b13-device-node-in-the-project", SHORT, "", PROJECT);
    let call = scenario.call(&[]);
    let nodes = device_nodes(&scenario.context.project);
    assert_held(&call, &["kmsg", "loop-control"]);
    assert!(nodes.is_empty(), "device nodes in the project: {nodes:?}");
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b14_the_calls_init_cannot_be_ptraced_read_or_killed() {
    if !attacks_can_run("b14") {
        return;
    }
    let scenario = Scenario::new("b14-init-tampering", SHORT);
    let call = scenario.call(&[]);
    assert_held(&call, &["ptrace", "/proc/1/mem", "/proc/1/environ"]);
    call.assert_envelope(&json!({"tool_success": true}));
    assert!(
        call.result_text().ends_with("still alive"),
        "{:#}",
        call.envelope
    );
    call.assert_clean(bound(1000, 300));
}

#[test]
fn b18_the_inits_shared_descriptors_are_out_of_reach() {
    if !attacks_can_run("b18") {
        return;
    }
    let scenario = Scenario::new("b18-init-descriptors", SHORT);
    let call = scenario.call(&[]);
    assert_held(
        &call,
        &[
            "list /proc/1/fd",
            "list /proc/1/fdinfo",
            "open /proc/1/fd/N",
            "pidfd_getfd",
            "kcmp",
        ],
    );
    call.assert_envelope(&json!({"tool_success": true}));
    call.assert_clean(bound(1000, 300));
}

/// Issue 22, finding 3: toolsmith's own state is read-only to a `project` tool wherever it
/// lies in the project, whether this command uses it or not (see the fixture's header).
#[test]
fn b22_toolsmiths_own_state_in_the_project_stays_read_only() {
    if !attacks_can_run("b22") {
        return;
    }
    let scenario = Scenario::with_config(
        "b22-own-state-in-the-project",
        SHORT,
        "",
        "[sandbox]\nfilesystem = \"project\"\n[audit]\npath = \"project/state/audit.jsonl\"\n",
    );
    let state = scenario.context.project.join("state");
    // The directories exist, as they do for a user who ran toolsmith before: a missing one
    // would be held by the seal of its nearest existing directory alone.
    for dir in [
        "home/templates",
        "home/tools",
        "xdg-state/toolsmith",
        "xdg-cache/toolsmith",
    ] {
        fs::create_dir_all(state.join(dir)).unwrap();
    }
    let call = scenario.call_with_env(
        &["--no-cache"],
        &[
            ("TOOLSMITH_HOME", state.join("home")),
            ("XDG_STATE_HOME", state.join("xdg-state")),
            ("XDG_CACHE_HOME", state.join("xdg-cache")),
        ],
    );
    call.assert_envelope(&json!({"tool_success": true}));
    assert_held(
        &call,
        &[
            "user config",
            "user template",
            "user tool",
            "trust store",
            "discovery cache",
            "audit log",
            "audit log moved",
        ],
    );
    for planted in [
        "home/config.toml",
        "home/templates/bash.tera",
        "home/tools/planted",
        "xdg-state/toolsmith/trust.json",
        "xdg-cache/toolsmith/discovery.json",
        "audit.jsonl.gone",
    ] {
        assert!(!state.join(planted).exists(), "{planted} was planted");
    }
    let audit = fs::read_to_string(state.join("audit.jsonl")).unwrap();
    assert!(audit.contains("b22_own_state_in_the_project"), "{audit}");
    call.assert_clean(bound(1000, 300));
}

// Issue 22, finding 2: nested repositories (`b23-nested-repository`; its header lists the
// attempts). Each attempt must be held and each ordinary counterpart must work, under
// `project` and under the default profile (no `[sandbox]` table), in a git project without
// `.toolsmith`: sealing the project's root against new entries (today's way for a missing
// protected path) fails the control `new file at the project root`, and holds nothing below.

/// The attempts of the fixture's shell part, its system calls (`python3`, which
/// [`attacks_can_run`] requires) and the races.
const NESTED_ATTEMPTS: &[&str] = &[
    "mkdir docs/.git with core.fsmonitor",
    ".git file with gitdir",
    "implicit bare repository",
    "copy of the root .git as docs/copy/clone",
    "repository built in TMPDIR and moved in",
    "mv x .git",
    "ln -s /tmp .git",
    "ln file .git",
    "mkdir .GIT",
    "mkdir .Git",
    "mkdir .GIT at the project root",
    "mkdir -p a/b/c/.git",
    "ln -s at the root, mkdir through it",
    "ln -s to a directory, mkdir through it",
    "mkdir /proc/self/cwd/docs/.git",
    "mkdir .git with an absolute path",
    "mkdir x/../.git/",
    "mkdirat .git",
    "mkdirat .git relative to an O_PATH descriptor",
    "openat O_CREAT .git",
    "openat O_CREAT HEAD",
    "openat2 O_CREAT .git",
    "renameat2 RENAME_NOREPLACE x .git",
    "renameat2 RENAME_WHITEOUT x .git",
    "renameat2 RENAME_NOREPLACE file HEAD",
    "renameat2 RENAME_EXCHANGE x with the root .git",
    "linkat of an O_TMPFILE through /proc/self/fd to .git",
    "linkat of an O_TMPFILE with AT_EMPTY_PATH to .git",
    "symlinkat .git",
    "symlinkat HEAD",
    "mknodat FIFO HEAD",
    "mknodat regular .git",
    "race on mkdir's path, flipped by another thread",
    "race on mkdir's path, flipped by another process",
];

/// The attempts through git itself, made where the sandbox can run git.
const NESTED_GIT_ATTEMPTS: &[&str] = &["git init", "git init --bare"];

/// The attempts through the old x86_64 calls (aarch64 has none of them).
const NESTED_OLD_CALL_ATTEMPTS: &[&str] = &[
    "mkdir(2) .git",
    "open(2) O_CREAT .git",
    "creat(2) HEAD",
    "rename(2) x .git",
    "link(2) file .git",
    "symlink(2) .git",
    "mknod(2) FIFO HEAD",
];

/// The same operations with ordinary names, which must still work.
const NESTED_CONTROLS: &[&str] = &[
    "new directory and file in docs/",
    "new file at the project root",
    "file with a gitdir line",
    "mv x y and back",
    "ln -s /tmp link",
    "ln file linked",
    "mkdir through a symbolic link to a directory",
    "mkdir through /proc/self/cwd",
    "mkdir with an absolute path",
    "mkdirat plain",
    "O_EXCL file written and read",
    "renameat2 RENAME_NOREPLACE file renamed",
    "renameat2 RENAME_EXCHANGE x with y",
    "linkat of an O_TMPFILE to an ordinary name",
    "linkat of a file to an ordinary name",
    "symlinkat plain",
    "mknodat FIFO plain",
    "the thread race made ordinary directories",
    "the process race made ordinary directories",
];

/// The fixture's shell and python start-up, its many small processes and the two 1.5 s races.
const NESTED_LIMITS: &str = "timeout = \"30s\"\ngrace = \"300ms\"";

/// Makes the scenario's project a git work tree with `docs/README` and `docs/sub/notes` and
/// nothing else (no `.toolsmith`), and returns its whole tree.
fn git_project(scenario: &Scenario) -> Vec<(PathBuf, Vec<u8>)> {
    let project = &scenario.context.project;
    let status = git(project).args(["init", "-q"]).status().unwrap();
    assert!(status.success());
    fs::create_dir_all(project.join("docs/sub")).unwrap();
    fs::write(project.join("docs/README"), "docs\n").unwrap();
    fs::write(project.join("docs/sub/notes"), "notes\n").unwrap();
    project_tree(project)
}

/// `git -C dir` with an environment of the test's own: no system or global config.
fn git(dir: &Path) -> Command {
    #[expect(clippy::disallowed_methods, reason = "the test checks from outside")]
    let mut command = Command::new("git");
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .arg("-C")
        .arg(dir);
    command
}

/// Every entry below `project` (symbolic links not followed) with its bytes, a link's target
/// or its kind.
fn project_tree(project: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt;
    let mut entries = Vec::new();
    let mut pending = vec![project.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let file_type = entry.file_type().unwrap();
            let content = if file_type.is_dir() {
                pending.push(path.clone());
                b"<dir>".to_vec()
            } else if file_type.is_symlink() {
                let target = fs::read_link(&path).unwrap();
                [b"<symlink> ".as_slice(), target.as_os_str().as_bytes()].concat()
            } else if file_type.is_file() {
                fs::read(&path).unwrap()
            } else {
                b"<special>".to_vec()
            };
            entries.push((path, content));
        }
    }
    entries.sort();
    entries
}

/// The entries named `.git` or `HEAD` (any case) in the project, but the root's `.git`.
fn repository_names(project: &Path) -> Vec<PathBuf> {
    let root_git = project.join(".git");
    project_tree(project)
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| !path.starts_with(&root_git))
        .filter(|path| {
            path.file_name().is_some_and(|name| {
                let name = name.to_string_lossy();
                name.eq_ignore_ascii_case(".git") || name.eq_ignore_ascii_case("head")
            })
        })
        .collect()
}

/// The directories of the project (outside the root's `.git`) from which git finds another
/// repository than the root's, with the one it finds.
fn foreign_repositories(project: &Path) -> Vec<(PathBuf, String)> {
    let root_git = project.join(".git");
    let mut dirs = vec![project.to_path_buf()];
    dirs.extend(
        project_tree(project)
            .into_iter()
            .map(|(path, _)| path)
            .filter(|path| !path.starts_with(&root_git))
            .filter(|path| fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_dir())),
    );
    dirs.into_iter()
        .filter_map(|dir| match git_dir_of(&dir) {
            Ok(found) if Path::new(&found) == root_git => None,
            Ok(found) | Err(found) => Some((dir, found)),
        })
        .collect()
}

/// The repository git finds from `dir` (`rev-parse --absolute-git-dir`), or why it found
/// none: its error, or that it hung (a FIFO named HEAD blocks git's read of it), after which
/// it is killed.
fn git_dir_of(dir: &Path) -> Result<String, String> {
    let mut child = git(dir)
        .args(["rev-parse", "--absolute-git-dir"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            return Err("git hung".to_owned());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().unwrap();
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}

/// What the call's text says went wrong: an `ESCAPED` or `FAILED` line, an attempt of
/// `held` not reported held, an ordinary creation of `controls` not reported made.
fn nested_report(call: &Call, held: &[&str], controls: &[&str]) -> Vec<String> {
    let text = call.result_text();
    let printed = |line: String| text.lines().any(|printed| printed == line);
    let mut problems: Vec<String> = text
        .lines()
        .filter(|line| line.starts_with("ESCAPED") || line.starts_with("FAILED"))
        .map(str::to_owned)
        .collect();
    for attempt in held {
        if !printed(format!("held: {attempt}")) && !printed(format!("ESCAPED: {attempt}")) {
            problems.push(format!("attempt `{attempt}` was not made"));
        }
    }
    for control in controls {
        if !printed(format!("ok: {control}")) && !printed(format!("FAILED: {control}")) {
            problems.push(format!("ordinary creation `{control}` was not made"));
        }
    }
    problems
}

/// The nested-repository attempts under the config's `sandbox` table `sandbox`, checked by
/// the tool and from outside; every problem is reported at once.
fn assert_no_nested_repository(sandbox: &str) {
    let scenario = Scenario::with_config("b23-nested-repository", NESTED_LIMITS, "", sandbox);
    let project = scenario.context.project.clone();
    let before = git_project(&scenario);
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({"tool_success": true}));
    let mut attempts = NESTED_ATTEMPTS.to_vec();
    if call
        .result_text()
        .contains("WARNING: no git in the sandbox")
    {
        eprintln!("WARNING: b23 could not run git in the sandbox: `git init` not tried");
    } else {
        attempts.extend(NESTED_GIT_ATTEMPTS);
    }
    let mut controls = NESTED_CONTROLS.to_vec();
    if cfg!(target_arch = "x86_64") {
        attempts.extend(NESTED_OLD_CALL_ATTEMPTS);
        controls.push("mkdir(2) plain");
    }
    let mut problems = nested_report(&call, &attempts, &controls);
    for path in repository_names(&project) {
        problems.push(format!("repository name made: {}", path.display()));
    }
    for (dir, found) in foreign_repositories(&project) {
        problems.push(format!("git in {} finds: {found}", dir.display()));
    }
    let after = project_tree(&project);
    for (path, _) in after.iter().filter(|entry| !before.contains(entry)) {
        problems.push(format!("made or changed: {}", path.display()));
    }
    for (path, _) in before.iter().filter(|entry| !after.contains(entry)) {
        problems.push(format!("removed or changed: {}", path.display()));
    }
    assert!(
        problems.is_empty(),
        "the tool made a repository below the project, or an ordinary creation failed: \
         {problems:#?}\n{}\nsandbox: {:#}",
        call.result_text(),
        call.metadata("sandbox")
    );
    call.assert_clean(bound(30_000, 300));
}

#[test]
fn b23_no_nested_repository_under_project() {
    if !attacks_can_run("b23") {
        return;
    }
    assert_no_nested_repository(PROJECT);
}

#[test]
fn b23_no_nested_repository_under_the_default_profile() {
    if !attacks_can_run("b23") {
        return;
    }
    assert_no_nested_repository("");
}

/// A refused creation is in the envelope: `metadata.sandbox.denied` has a `write` entry
/// naming the `.git` the tool tried to make.
#[test]
fn b23_a_refused_nested_repository_is_reported() {
    if !attacks_can_run("b23") {
        return;
    }
    let scenario = Scenario::with_config(
        "b23-nested-repository",
        NESTED_LIMITS,
        "HOSTILE_ONLY = \"report\", ",
        PROJECT,
    );
    let project = scenario.context.project.clone();
    git_project(&scenario);
    let call = scenario.call(&[]);
    call.assert_envelope(&json!({"tool_success": true}));
    assert_held(&call, &["mkdir docs/.git with core.fsmonitor"]);
    assert!(repository_names(&project).is_empty(), "{:#}", call.envelope);
    let denied = call.metadata("sandbox")["denied"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        denied.iter().any(|entry| {
            entry["kind"] == "write"
                && entry["target"]
                    .as_str()
                    .is_some_and(|target| target.ends_with("report/.git"))
        }),
        "no `write` denial of docs/report/.git: {:#}",
        call.envelope
    );
    call.assert_clean(bound(30_000, 300));
}

#[test]
fn b15_the_cgroup_release_agent_is_out_of_reach() {
    if !attacks_can_run("b15") {
        return;
    }
    let scenario = Scenario::new("b15-release-agent", SHORT);
    let call = scenario.call(&[]);
    assert_held(&call, &["release_agent"]);
    call.assert_clean(bound(1000, 300));
}
