//! Faults while toolsmith runs: the tools directory removed or made unreadable under `serve`,
//! a tool replaced while it runs, the disk filling up under the audit log. Nothing that was
//! acknowledged is lost, and nothing hangs.

#![expect(
    clippy::print_stderr,
    reason = "a fault that this machine cannot stage must be announced loudly"
)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::context::{TestContext, shell_tool, write_executable};
use crate::serve::{Session, call, connect_to_child, legacy, text};

/// How long a test waits for something the server should do promptly: a liveness bound.
const PATIENCE: Duration = Duration::from_secs(20);

const EMPTY_SCHEMA: &str = r#"{"type": "object"}"#;

/// A tool that announces it runs (its pid into `started`), then takes `seconds` and prints
/// `{"version": version}`.
fn versioned_tool(name: &str, version: u32, seconds: &str, started: &Path) -> String {
    shell_tool(
        name,
        EMPTY_SCHEMA,
        &format!(
            r#"echo $$ > {started}.tmp; mv {started}.tmp {started}; sleep {seconds}; echo '{{"version": {version}}}'"#,
            started = started.display()
        ),
    )
}

async fn wait_for(path: &Path) {
    let deadline = Instant::now() + PATIENCE;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn next_change(changes: &mut mpsc::UnboundedReceiver<()>) {
    tokio::time::timeout(PATIENCE, changes.recv())
        .await
        .expect("no notifications/tools/list_changed")
        .expect("the client is gone");
}

/// The tools the server lists from the tool directories: all but the `custom_tool` meta-tool.
async fn directory_tools(session: &Session) -> Vec<String> {
    session
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .filter(|name| name != "custom_tool")
        .collect()
}

async fn call_tool(session: &Session, name: &str) -> Result<CallToolResult, String> {
    tokio::time::timeout(PATIENCE, session.call_tool(call(name, json!({}))))
        .await
        .expect("the call hung")
        .map_err(|error| error.to_string())
}

fn version_of(result: &CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(false), "{result:?}");
    serde_json::from_str::<Value>(&text(result)).unwrap()["version"].clone()
}

async fn serve(context: &TestContext, wrapper: &[&str]) -> (Session, mpsc::UnboundedReceiver<()>) {
    let toolsmith = context.with_tools();
    let mut command = if wrapper.is_empty() {
        toolsmith
    } else {
        #[expect(
            clippy::disallowed_methods,
            reason = "the wrapper (setpriv) starts the binary under test"
        )]
        let mut wrapped = Command::new(wrapper[0]);
        wrapped
            .env_clear()
            .envs(
                toolsmith
                    .get_envs()
                    .filter_map(|(key, value)| Some((key, value?))),
            )
            .current_dir(toolsmith.get_current_dir().unwrap())
            .args(&wrapper[1..])
            .arg(toolsmith.get_program())
            .args(toolsmith.get_args());
        wrapped
    };
    command.arg("serve");
    let (session, changes, _pid) = connect_to_child(command, legacy()).await;
    (session, changes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_directory_removed_while_a_call_runs() {
    let context = TestContext::new();
    let started = context.outbox().join("started");
    context.tool("slow", &versioned_tool("slow", 1, "1", &started));
    context.tool(
        "fast",
        &versioned_tool("fast", 1, "0", &context.root.join("fast-started")),
    );
    let (session, mut changes) = serve(&context, &[]).await;
    let in_flight = {
        let peer = session.peer().clone();
        tokio::spawn(async move { peer.call_tool(call("custom_tool_slow", json!({}))).await })
    };
    wait_for(&started).await;
    fs::remove_dir_all(&context.tools).unwrap();

    // The call that was running finishes with its envelope.
    let finished = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .expect("the running call hung")
        .unwrap()
        .unwrap();
    assert_eq!(version_of(&finished), json!(1));
    // The tools leave the catalog, the client hears of it, and a later call is refused clearly.
    next_change(&mut changes).await;
    assert!(directory_tools(&session).await.is_empty());
    let refused = call_tool(&session, "custom_tool_fast").await.unwrap_err();
    assert!(refused.contains("custom_tool_fast"), "{refused}");

    // The directory comes back: so do its tools.
    fs::create_dir_all(&context.tools).unwrap();
    let staging = context.root.join("fast.staging");
    write_executable(
        &staging,
        &versioned_tool("fast", 2, "0", &context.root.join("fast-started")),
    );
    fs::rename(&staging, context.tools.join("fast")).unwrap();
    next_change(&mut changes).await;
    let again = call_tool(&session, "custom_tool_fast").await.unwrap();
    assert_eq!(version_of(&again), json!(2));
    session.cancel().await.unwrap();
}

/// Root reads a `chmod 000` directory anyway (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so the
/// server runs as root without those two capabilities (`setpriv` drops them from the bounding
/// set before exec), and `chmod 000` really makes the directory unreadable to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_directory_made_unreadable_while_a_call_runs() {
    let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|path| Path::new(path).exists())
    else {
        eprintln!("WARNING: no setpriv, the unreadable-directory fault is SKIPPED");
        assert!(std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none());
        return;
    };
    let context = TestContext::new();
    let started = context.outbox().join("started");
    context.tool("slow", &versioned_tool("slow", 1, "1", &started));
    context.tool(
        "fast",
        &versioned_tool("fast", 1, "0", &context.root.join("fast-started")),
    );
    let (session, mut changes) = serve(
        &context,
        &[
            setpriv,
            "--bounding-set=-dac_override,-dac_read_search",
            "--inh-caps=-dac_override,-dac_read_search",
        ],
    )
    .await;
    assert_eq!(directory_tools(&session).await.len(), 2);
    let in_flight = {
        let peer = session.peer().clone();
        tokio::spawn(async move { peer.call_tool(call("custom_tool_slow", json!({}))).await })
    };
    wait_for(&started).await;
    fs::set_permissions(&context.tools, fs::Permissions::from_mode(0o000)).unwrap();

    let finished = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .expect("the running call hung")
        .unwrap()
        .unwrap();
    assert_eq!(version_of(&finished), json!(1));
    next_change(&mut changes).await;
    assert!(directory_tools(&session).await.is_empty());
    let refused = call_tool(&session, "custom_tool_fast").await.unwrap_err();
    assert!(refused.contains("custom_tool_fast"), "{refused}");

    fs::set_permissions(&context.tools, fs::Permissions::from_mode(0o755)).unwrap();
    next_change(&mut changes).await;
    let again = call_tool(&session, "custom_tool_fast").await.unwrap();
    assert_eq!(version_of(&again), json!(1));
    session.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_replaced_while_it_runs() {
    let context = TestContext::new();
    let started = context.outbox().join("started");
    let tool = context.tool("slow", &versioned_tool("slow", 1, "1", &started));
    let (session, _changes) = serve(&context, &[]).await;

    // Atomically, by rename: the running call keeps the old file, the next call gets the new.
    let in_flight = {
        let peer = session.peer().clone();
        tokio::spawn(async move { peer.call_tool(call("custom_tool_slow", json!({}))).await })
    };
    wait_for(&started).await;
    let staging = context.root.join("slow.staging");
    write_executable(&staging, &versioned_tool("slow", 2, "0", &started));
    fs::rename(&staging, &tool).unwrap();
    let finished = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(version_of(&finished), json!(1));
    assert_eq!(
        version_of(&call_tool(&session, "custom_tool_slow").await.unwrap()),
        json!(2)
    );

    // In place (truncate and write the same inode): the shell already read the running
    // script, so the call completes; the next call runs the new text.
    fs::remove_file(&started).unwrap();
    fs::write(&tool, versioned_tool("slow", 3, "1", &started)).unwrap();
    let in_flight = {
        let peer = session.peer().clone();
        tokio::spawn(async move { peer.call_tool(call("custom_tool_slow", json!({}))).await })
    };
    wait_for(&started).await;
    fs::write(&tool, versioned_tool("slow", 4, "0", &started)).unwrap();
    let finished = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(version_of(&finished), json!(3));
    // The registry may be rescanning the rewritten file; the call that follows is answered
    // either way, and once the rewrite has settled it runs version 4.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let next = call_tool(&session, "custom_tool_slow").await;
        if let Ok(result) = &next
            && result.is_error == Some(false)
            && version_of(result) == json!(4)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never ran the new version: {next:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    session.cancel().await.unwrap();
}

/// A small tmpfs mounted for one test, unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(dir: PathBuf) -> Option<SmallDisk> {
        SmallDisk::mount_sized(dir, "64k")
    }

    fn mount_sized(dir: PathBuf, size: &str) -> Option<SmallDisk> {
        fs::create_dir_all(&dir).unwrap();
        #[expect(clippy::disallowed_methods, reason = "the test mounts its full disk")]
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "toolsmith-test",
            ])
            .arg(&dir)
            .status()
            .ok()?;
        status.success().then_some(SmallDisk { dir })
    }

    /// Fills the disk until a write fails.
    fn fill(&self) {
        let mut filler = fs::File::create(self.dir.join("filler")).unwrap();
        let block = [0_u8; 512];
        while std::io::Write::write_all(&mut filler, &block).is_ok() {}
    }

    fn free(&self) {
        fs::remove_file(self.dir.join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        #[expect(clippy::disallowed_methods, reason = "the test unmounts its full disk")]
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn audit_lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("a torn audit line ({error}): {line:?}"))
        })
        .collect()
}

/// The audit log on a disk that fills up: the call's envelope is still printed, the failure
/// is reported (status 2, one line on stderr), and every record written before stays whole,
/// so the log stays parseable and later records are intact once there is room again.
#[test]
fn audit_log_on_a_full_disk() {
    let context = TestContext::new();
    let Some(disk) = SmallDisk::mount(context.root.join("disk")) else {
        eprintln!("WARNING: cannot mount a tmpfs here, the full-disk fault is SKIPPED");
        assert!(std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none());
        return;
    };
    context.tool(
        "fast",
        &versioned_tool("fast", 1, "0", &context.root.join("started")),
    );
    let log = disk.dir.join("audit.jsonl");
    let config = context.root.join("config.toml");
    fs::write(&config, format!("[audit]\npath = \"{}\"\n", log.display())).unwrap();
    let run = || {
        context
            .with_tools()
            .arg("--config")
            .arg(&config)
            .args(["run", "fast", "--input", "{}"])
            .output()
            .unwrap()
    };
    // Leave less room in the log's last page than a record takes: tmpfs allocates whole
    // pages, and the filler takes every free one, so the next record is cut short.
    let first = run();
    assert_eq!(first.status.code(), Some(0));
    let record_len = fs::metadata(&log).unwrap().len();
    while 4096 - fs::metadata(&log).unwrap().len() % 4096 >= record_len {
        assert_eq!(run().status.code(), Some(0));
    }
    let acknowledged = audit_lines(&log).len();
    disk.fill();

    let failed = run();
    assert_eq!(failed.status.code(), Some(2), "{failed:?}");
    let envelope: Value = serde_json::from_slice(&failed.stdout).unwrap();
    assert_eq!(envelope["result"], json!({"version": 1}));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains(&format!("audit log {}", log.display())),
        "{stderr}"
    );
    assert_eq!(
        audit_lines(&log).len(),
        acknowledged,
        "a record was lost or torn"
    );

    disk.free();
    assert_eq!(run().status.code(), Some(0));
    assert_eq!(audit_lines(&log).len(), acknowledged + 1);
}

/// The generator on a disk that fills up: the request is answered with a clear error, nothing
/// is registered and nothing is left in the tools directory; once there is room again, the
/// same request registers.
#[test]
fn generator_on_a_full_disk() {
    let context = TestContext::new();
    // Room for a tool and its history repository once the filler is gone.
    let Some(disk) = SmallDisk::mount_sized(context.root.join("disk"), "4m") else {
        eprintln!("WARNING: cannot mount a tmpfs here, the generator's full-disk fault is SKIPPED");
        assert!(std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none());
        return;
    };
    let tools_dir = disk.dir.join("tools");
    let config = context.root.join("config.toml");
    fs::write(
        &config,
        format!("[generator]\ntools_dir = \"{}\"\n", tools_dir.display()),
    )
    .unwrap();
    let request = context.root.join("request.json");
    fs::write(
        &request,
        json!({
            "name": "shout_text",
            "description": "Upper-cases a text.",
            "parameters": {"text": "The text"},
            "language": "python",
            "implementation": "return args['text'].upper()",
            "tests": [{"input": {"text": "hi"}, "expect": {"result": "HI"}}],
        })
        .to_string(),
    )
    .unwrap();
    let generate = || {
        context
            .command()
            .arg("--config")
            .arg(&config)
            .args(["generate", "--json", "--request"])
            .arg(&request)
            .output()
            .unwrap()
    };
    disk.fill();
    let failed = generate();
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_ne!(failed.status.code(), Some(0), "{failed:?}");
    let said = format!("{stderr}{}", String::from_utf8_lossy(&failed.stdout));
    assert!(
        said.contains("No space left on device"),
        "the error should say the disk is full: {said}"
    );
    let left: Vec<String> = fs::read_dir(&tools_dir)
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        left.iter().all(|name| name.starts_with(".history")),
        "a rejected generation left {left:?}"
    );

    disk.free();
    let registered = generate();
    assert_eq!(
        registered.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&registered.stdout),
        String::from_utf8_lossy(&registered.stderr)
    );
    let report: Value = serde_json::from_slice(&registered.stdout).unwrap();
    assert_eq!(report["status"], "registered");
}
