//! Issue 24, inputs: no file, argument or manifest starves toolsmith. State files and tool
//! files that are FIFOs, devices or links out of their directory give an error at once;
//! an in-place rewrite with its size, inode and mtime put back is seen; a huge argument or
//! violation report, a deeply nested manifest and an idle watcher cost bounded time.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::context::{TestContext, shell_tool, write_file};
use crate::serve::{call, modern};
use crate::serve_http::Server;

/// A liveness bound: each of these took forever (a FIFO), ran out of memory (`/dev/zero`)
/// or took minutes before the fix, and takes well under a second after it.
const BOUND: Duration = Duration::from_secs(10);

/// Runs `command` to its end, killing it (by its own pid) past [`BOUND`]: a hang is a
/// failure, not a stuck test.
fn bounded(command: &mut Command) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            let elapsed = started.elapsed();
            return (child.wait_with_output().unwrap(), elapsed);
        }
        if started.elapsed() > BOUND {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "still running after {BOUND:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mkfifo(path: &Path) {
    let _ = fs::remove_file(path);
    #[expect(
        clippy::disallowed_methods,
        reason = "the test makes its fixture FIFO with the system's mkfifo"
    )]
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// Makes `path` each of the three hostile kinds in turn and hands it to `check` with its name.
fn each_special(path: &Path, outside: &Path, mut check: impl FnMut(&str)) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    mkfifo(path);
    check("a FIFO");
    fs::remove_file(path).unwrap();
    symlink("/dev/zero", path).unwrap();
    check("a link to /dev/zero");
    fs::remove_file(path).unwrap();
    fs::write(outside, "{}").unwrap();
    symlink(outside, path).unwrap();
    check("a link out of its directory");
    fs::remove_file(path).unwrap();
}

const SCHEMA: &str = r#"{"type": "object"}"#;

#[test]
fn special_files_as_state_give_an_error_at_once_and_the_tools_keep_working() {
    let context = TestContext::new();
    context.tool("hello", &shell_tool("hello", SCHEMA, "echo '{\"hi\": 1}'"));
    let outside = context.root.join("elsewhere.json");

    // The discovery cache: an empty cache and a debug line naming what the file is.
    let cache = context.root.join("home/.cache/toolsmith/discovery.json");
    each_special(&cache, &outside, |what| {
        let (output, _) = bounded(
            context
                .with_tools()
                .env("TOOLSMITH_LOG", "toolsmith_registry=debug")
                .arg("list"),
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "cache {what}: {stderr}");
        assert!(String::from_utf8_lossy(&output.stdout).contains("hello"));
        assert!(
            stderr.contains("not a regular file") || stderr.contains("outside its directory"),
            "cache {what}: {stderr}"
        );
    });

    // The audit log: the call is refused with the reason, before anything runs.
    context.project_file(
        ".toolsmith/config.toml",
        "[audit]\npath = \"audit.jsonl\"\n",
    );
    let audit = context.project.join(".toolsmith/audit.jsonl");
    each_special(&audit, &outside, |what| {
        let (output, _) = bounded(context.with_tools().args(["run", "hello", "--input", "{}"]));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "audit log {what}: {stderr}");
        assert!(
            stderr.contains("cannot open audit log")
                && (stderr.contains("not a regular file")
                    || stderr.contains("outside its directory")
                    // A FIFO with no reader refuses a non-blocking open for writing.
                    || stderr.contains("No such device or address")),
            "audit log {what}: {stderr}"
        );
    });
    fs::remove_file(context.project.join(".toolsmith/config.toml")).unwrap();

    // The trust store: every command that needs it says why it cannot read it.
    let store = context.root.join("home/.local/state/toolsmith/trust.json");
    each_special(&store, &outside, |what| {
        let (output, _) = bounded(context.with_tools().arg("list"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("not a regular file") || stderr.contains("outside its directory"),
            "trust store {what}: {stderr}"
        );
    });
}

#[test]
fn special_tool_files_are_problems_and_the_other_tools_keep_working() {
    let context = TestContext::new();
    context.tool("hello", &shell_tool("hello", SCHEMA, "echo '{\"hi\": 1}'"));
    mkfifo(&context.tools.join("piped.md"));
    symlink("/dev/zero", context.tools.join("zeros.md")).unwrap();
    // A sparse gigabyte: refused on its size, never read.
    let sparse = fs::File::create(context.tools.join("huge.md")).unwrap();
    sparse.set_len(1 << 30).unwrap();
    let (output, elapsed) = bounded(context.with_tools().args(["list", "--all"]));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stdout.contains("hello"), "{stdout}{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("not a regular file but a FIFO"), "{all}");
    assert!(
        all.contains("not a regular file but a character device"),
        "{all}"
    );
    assert!(all.contains("more than the limit of 1048576"), "{all}");
    assert!(elapsed < BOUND);
}

/// Issue 24, finding 10: a tool rewritten in place with its size, inode and mtime put back is
/// probed again: `run` validates against the new schema and runs the new program.
#[test]
fn an_in_place_rewrite_with_its_mtime_put_back_is_seen() {
    let context = TestContext::new();
    let old = shell_tool(
        "flip",
        r#"{"type": "object", "properties": {"x": {"type": "string"}}}"#,
        "echo '{\"v\": 1}'",
    );
    let new = shell_tool(
        "flip",
        r#"{"type": "object", "properties": {"x": {"type": "integer"}}}"#,
        "echo '{\"v\": 2}'",
    );
    // The same size ("integer" is one letter longer than "string"), so that only the times
    // and the content differ.
    let old = format!("{old} ");
    assert_eq!(old.len(), new.len());
    let path = context.tool("flip", &old);
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let file = fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(long_ago).unwrap();
    drop(file);
    let (listed, _) = bounded(context.with_tools().arg("list"));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("flip"));
    assert!(
        context
            .root
            .join("home/.cache/toolsmith/discovery.json")
            .is_file()
    );
    let before = fs::metadata(&path).unwrap();
    // In place: the same inode, the same size, the modification time put back.
    let mut file = fs::File::options().write(true).open(&path).unwrap();
    std::io::Write::write_all(&mut file, new.as_bytes()).unwrap();
    file.set_modified(long_ago).unwrap();
    drop(file);
    let after = fs::metadata(&path).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (
            before.ino(),
            before.size(),
            before.mtime(),
            before.mtime_nsec()
        ),
        (after.ino(), after.size(), after.mtime(), after.mtime_nsec())
    );
    let (output, _) = bounded(
        context
            .with_tools()
            .args(["run", "flip", "--input", r#"{"x": 5}"#]),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(r#""v": 2"#) || stdout.contains(r#""v":2"#),
        "{stdout}"
    );
}

/// A manifest that echoes how many elements its array argument has.
fn counting_manifest(context: &TestContext) {
    let path = write_file(
        &context.tools.join("count.md"),
        "---\nname: count\ndescription: Counts its items\nparameters:\n  items:\n    type: array\n    required: true\n---\necho {{ items }} | wc -c\n",
    );
    // Settled: a live registry leaves a file written a moment ago for later.
    let file = fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

#[test]
fn a_huge_array_argument_is_refused_quickly_without_writing_a_file_per_element() {
    let context = TestContext::new();
    counting_manifest(&context);
    // About 1 MB of JSON: 200 000 short strings.
    let items: Vec<Value> = (0..200_000)
        .map(|index| json!(format!("{index}")))
        .collect();
    let input = json!({"items": items}).to_string();
    let input_file = context.root.join("input.json");
    fs::write(&input_file, &input).unwrap();
    let (output, elapsed) = bounded(context.with_tools().args([
        "run",
        "count",
        "--input",
        &format!("@{}", input_file.display()),
    ]));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(all.contains("at most 4096"), "{all}");
    assert!(elapsed < BOUND, "{elapsed:?}");
    // No argument file is left behind, and none was needed.
    let left: Vec<_> = fs::read_dir(context.tmpdir()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_20000_key_property_names_violation_is_reported_quickly() {
    let context = TestContext::new();
    context.tool(
        "keys",
        &shell_tool(
            "keys",
            r#"{"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}"#,
            "echo '{}'",
        ),
    );
    let object: serde_json::Map<String, Value> = (0..20_000)
        .map(|index| (format!("K{index}"), json!(index)))
        .collect();
    let input_file = context.root.join("input.json");
    fs::write(&input_file, Value::Object(object).to_string()).unwrap();
    let (output, elapsed) = bounded(context.with_tools().args([
        "run",
        "keys",
        "--input",
        &format!("@{}", input_file.display()),
    ]));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_ne!(output.status.code(), Some(0), "{all}");
    assert!(all.contains("more violations not listed"), "{all}");
    assert!(elapsed < BOUND, "{elapsed:?}");
}

#[test]
fn a_deeply_nested_200_kb_manifest_is_refused_quickly() {
    let context = TestContext::new();
    context.tool("hello", &shell_tool("hello", SCHEMA, "echo '{\"hi\": 1}'"));
    write_file(
        &context.tools.join("flow.md"),
        &format!(
            "---\nname: flow\ndescription: d\nx: {}{}\n---\necho hi\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
    );
    write_file(
        &context.tools.join("shell.md"),
        &format!(
            "---\nname: shell\ndescription: d\n---\necho {}true{}\n",
            "$(".repeat(50_000),
            ")".repeat(50_000)
        ),
    );
    let (output, elapsed) = bounded(context.with_tools().args(["list", "--all"]));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(all.contains("hello"), "{all}");
    assert!(all.contains("nests deeper than 64"), "{all}");
    assert!(all.contains("nest deeper than 64"), "{all}");
    assert!(elapsed < BOUND, "{elapsed:?}");
}

/// Issue 24, finding 14: an idle `serve` rescanned about five times a second, its own reads
/// of the directories the events of the next rescan. Rescans are counted from outside twice:
/// the opens of the tool directory (each rescan lists it) seen by an inotify watch of the
/// test's own, and the debug line the watcher writes for each rescan it starts.
#[test]
fn an_idle_serve_over_100_manifests_does_not_rescan() {
    use notify::Watcher as _;

    let context = TestContext::new();
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    for index in 0..100 {
        let path = write_file(
            &context.tools.join(format!("m{index}.md")),
            &format!("---\nname: m{index}\ndescription: Manifest {index}\n---\necho {index}\n"),
        );
        // Settled long ago: no rescan is owed to a file still being written.
        let file = fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(long_ago).unwrap();
    }
    let mut child = context
        .with_tools()
        .env("TOOLSMITH_LOG", "toolsmith_registry=debug")
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::BufReader::new(stderr), &mut text).unwrap();
        text
    });
    // Started and idle: the first discovery is done well within this.
    std::thread::sleep(Duration::from_secs(3));
    let (sender, opens) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && matches!(
                event.kind,
                notify::EventKind::Access(notify::event::AccessKind::Open(_))
            )
        {
            let _ignored = sender.send(event.paths);
        }
    })
    .unwrap();
    watcher
        .watch(&context.tools, notify::RecursiveMode::NonRecursive)
        .unwrap();
    std::thread::sleep(Duration::from_secs(10));
    drop(watcher);
    let opened: Vec<_> = opens.try_iter().collect();
    // Closing stdin ends a stdio server; the kill is only for a server that ignores it.
    drop(child.stdin.take());
    let deadline = Instant::now() + BOUND;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let log = reader.join().unwrap();
    let rescans = log
        .lines()
        .filter(|line| line.contains("rescanning the tool directories"))
        .count();
    assert!(
        opened.is_empty(),
        "the idle server opened its tool directory {} times in 10 s: {:?}",
        opened.len(),
        opened.first()
    );
    assert_eq!(rescans, 0, "{log}");
}

/// Issue 24, finding 13: two calls with 100 000-element array arguments wrote a file per
/// element on the runtime's workers and stalled `/healthz` for 11-70 s. They are now refused
/// (or validated and delivered) off the workers, and `/healthz` keeps answering meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_array_calls_do_not_stall_healthz() {
    let context = TestContext::new();
    counting_manifest(&context);
    let server = Server::start(&context, &["--max-body", "8MiB", "--prefix", ""], &[]).await;
    let (session, _events) = server.connect(None, modern()).await;
    let items: Vec<Value> = (0..100_000)
        .map(|index| json!(format!("{index}")))
        .collect();
    let arguments = json!({ "items": items });
    let done = std::sync::atomic::AtomicBool::new(false);
    let calls = async {
        let both = tokio::time::timeout(BOUND, async {
            tokio::join!(
                session.call_tool(call("count", arguments.clone())),
                session.call_tool(call("count", arguments.clone())),
            )
        })
        .await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        both
    };
    let polls = async {
        let mut worst = Duration::ZERO;
        let mut answered = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let asked = Instant::now();
            let response = server.request("GET", "/healthz", &[], "").await;
            assert_eq!(response.status, 200);
            worst = worst.max(asked.elapsed());
            answered += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (worst, answered)
    };
    let (both, (worst, answered)) = tokio::join!(calls, polls);
    // A liveness bound, generous for a debug build on a shared machine: the stall was 11-70 s.
    assert!(
        worst < Duration::from_secs(1),
        "/healthz took {worst:?} at worst over {answered} requests"
    );
    let (first, second) = both.expect("the calls did not finish in time");
    for result in [first, second] {
        let shown = format!("{result:?}");
        assert!(shown.contains("at most 4096"), "{shown}");
    }
}
