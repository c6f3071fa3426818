//! `toolsmith serve`: driven end to end by rmcp's client (an MCP client this project did not write), in both protocol eras.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ProtocolVersion,
    ServerNotification, SubscriptionFilter,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, PeerRequestOptions, RunningService,
    ServiceError,
};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, Peer, RoleClient};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::context::{TestContext, ikigai_tool, shell_tool, write_executable};
use crate::load::Footprint;
use crate::processes::alive;

/// How long a test waits for something the server should do promptly.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// A client that reports every `notifications/tools/list_changed` of a legacy session.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ignored = self.changed.send(());
    }
}

pub(crate) type Session = RunningService<RoleClient, Client>;

/// Starts `toolsmith --tools-dir <fixtures> serve <args>` and connects to it.
async fn connect(
    context: &TestContext,
    args: &[&str],
    lifecycle: ClientLifecycleMode,
) -> (Session, mpsc::UnboundedReceiver<()>) {
    let mut command = context.with_tools();
    command.arg("serve").args(args);
    let (session, changes, _server_pid) = connect_to_child(command, lifecycle).await;
    (session, changes)
}

/// Starts `command` (a `toolsmith serve`) and connects to it; also returns the server's pid,
/// for tests that watch the server process.
pub(crate) async fn connect_to_child(
    command: std::process::Command,
    lifecycle: ClientLifecycleMode,
) -> (Session, mpsc::UnboundedReceiver<()>, u32) {
    let transport = TokioChildProcess::new(tokio::process::Command::from(command)).unwrap();
    let server_pid = transport
        .id()
        .expect("a child that was just spawned has a pid");
    let (changed, changes) = mpsc::unbounded_channel();
    let session = Client { changed }
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap();
    (session, changes, server_pid)
}

pub(crate) fn legacy() -> ClientLifecycleMode {
    ClientLifecycleMode::Initialize
}

pub(crate) fn modern() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

pub(crate) fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

pub(crate) fn text(result: &CallToolResult) -> String {
    let content = serde_json::to_value(&result.content).unwrap();
    content[0]["text"].as_str().unwrap().to_owned()
}

pub(crate) fn meta(result: &CallToolResult, key: &str) -> Value {
    result
        .meta
        .as_ref()
        .and_then(|meta| meta.0.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Writes a tool the way a generator would: complete, then renamed into place, so the live
/// registry registers it at once.
pub(crate) fn install(context: &TestContext, name: &str, script: &str) {
    let staging = context.root.join(format!("staging-{name}"));
    write_executable(&staging, script);
    std::fs::rename(&staging, context.tools.join(name)).unwrap();
}

/// The fixture set: a plain tool, one with an output schema, a failing one, one with a required
/// argument, a read-only and a destructive manifest.
pub(crate) fn fixtures(context: &TestContext) {
    context.tool(
        "hello",
        &shell_tool(
            "hello",
            r#"{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}"#,
            r#"printf 'Hello, %s!' "$(sed 's/.*"name": *"\([^"]*\)".*/\1/')""#,
        ),
    );
    context.tool(
        "stats-tool",
        &ikigai_tool(
            r#"{"name": "stats", "description": "Counts", "parameters": {}, "returns": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}}"#,
            r#"echo '{"count": 3}'"#,
        ),
    );
    context.tool(
        "fail",
        &shell_tool("fail", r#"{"type": "object"}"#, "echo boom >&2; exit 3"),
    );
    std::fs::write(
        context.tools.join("peek.md"),
        "---\nname: peek\ndescription: Look without touching\nparameters: {}\napproval: never\nread_only: true\n---\necho looked\n",
    )
    .unwrap();
    std::fs::write(
        context.tools.join("wipe.md"),
        "---\nname: wipe\ndescription: Remove everything\nparameters: {}\napproval: destructive\n---\necho wiped\n",
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_session_lists_and_calls() {
    let context = TestContext::new();
    fixtures(&context);
    let (session, _changes) = connect(&context, &[], legacy()).await;
    let info = session.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "toolsmith");
    assert!(
        info.capabilities
            .tools
            .as_ref()
            .and_then(|tools| tools.list_changed)
            .unwrap_or(false)
    );

    let tools = session.list_all_tools().await.unwrap();
    let listed = serde_json::to_value(&tools).unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "custom_tool",
            "custom_tool_fail",
            "custom_tool_hello",
            "custom_tool_peek",
            "custom_tool_stats",
            "custom_tool_wipe"
        ]
    );
    assert_eq!(
        listed[2]["inputSchema"]["required"],
        json!(["name"]),
        "{listed:#}"
    );
    assert_eq!(
        listed[4]["outputSchema"]["required"],
        json!(["count"]),
        "{listed:#}"
    );
    assert_eq!(listed[3]["annotations"]["readOnlyHint"], true, "{listed:#}");
    assert_eq!(
        listed[5]["annotations"]["destructiveHint"], true,
        "{listed:#}"
    );
    // An executable declares nothing, so MCP's cautious defaults stand.
    assert!(listed[1].get("annotations").is_none(), "{listed:#}");

    let hello = session
        .call_tool(call("custom_tool_hello", json!({"name": "Ada"})))
        .await
        .unwrap();
    assert_eq!(hello.is_error, Some(false));
    assert_eq!(text(&hello), "Hello, Ada!");
    assert_eq!(hello.structured_content, None);
    assert_eq!(meta(&hello, "toolsmith/metadata")["exit_code"], 0);

    let stats = session
        .call_tool(call("custom_tool_stats", json!({})))
        .await
        .unwrap();
    assert_eq!(stats.is_error, Some(false));
    assert_eq!(stats.structured_content, Some(json!({"count": 3})));
    assert_eq!(text(&stats), r#"{"count":3}"#);

    let fail = session
        .call_tool(call("custom_tool_fail", json!({})))
        .await
        .unwrap();
    assert_eq!(fail.is_error, Some(true));
    assert!(text(&fail).contains("TOOL_CRASHED"), "{}", text(&fail));
    assert_eq!(meta(&fail, "toolsmith/error_code"), "TOOL_CRASHED");

    let invalid = session
        .call_tool(call("custom_tool_hello", json!({"name": 7})))
        .await
        .unwrap();
    assert_eq!(invalid.is_error, Some(true));
    assert_eq!(meta(&invalid, "toolsmith/error_code"), "INVALID_PARAMS");

    let unknown = session
        .call_tool(call("custom_tool_nope", json!({})))
        .await
        .unwrap_err();
    let ServiceError::McpError(error) = unknown else {
        panic!("expected a JSON-RPC error, got {unknown:?}");
    };
    assert_eq!(error.code.0, -32602);
    assert!(error.message.contains("custom_tool_nope"), "{error:?}");

    session.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_and_profile_shape_the_listing() {
    let context = TestContext::new();
    fixtures(&context);
    let (session, _changes) =
        connect(&context, &["--prefix", "", "--profile", "plan"], legacy()).await;
    let tools = session.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["peek"]);
    let peek = session.call_tool(call("peek", json!({}))).await.unwrap();
    assert_eq!(text(&peek), "looked");
    // Denied tools are known but not callable: the envelope says why.
    let wipe = session.call_tool(call("wipe", json!({}))).await.unwrap();
    assert_eq!(wipe.is_error, Some(true));
    assert_eq!(meta(&wipe, "toolsmith/error_code"), "POLICY_DENIED");
    session.cancel().await.unwrap();
}

/// Issue 25, finding 5: `custom_tool` obeys `[policy]` like every tool: an `allowed` list
/// that omits it hides it (and a call of it is an unknown tool), `disabled = ["custom_tool"]`
/// hides it (it was a config error), and an `allowed` list that names it lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_tool_obeys_the_policy_lists() {
    let context = TestContext::new();
    fixtures(&context);
    for (policy, expected) in [
        ("allowed = [\"hello\"]", vec!["custom_tool_hello"]),
        (
            "disabled = [\"custom_tool\", \"fail\", \"stats\", \"wipe\"]",
            vec!["custom_tool_hello", "custom_tool_peek"],
        ),
        (
            "allowed = [\"custom_tool\", \"peek\"]",
            vec!["custom_tool", "custom_tool_peek"],
        ),
    ] {
        context.user_config(&format!("[policy]\n{policy}\n"));
        let (session, _changes) = connect(&context, &[], legacy()).await;
        let tools = session.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, expected, "{policy}");
        let generation = session
            .call_tool(call(
                "custom_tool",
                json!({"name": "probe", "description": "d", "language": "bash", "implementation": "echo hi"}),
            ))
            .await;
        if expected.contains(&"custom_tool") {
            let report = generation.expect("an admitted custom_tool answers");
            assert!(report.structured_content.is_some() || report.is_error == Some(true));
        } else {
            let ServiceError::McpError(error) = generation.unwrap_err() else {
                panic!("expected a JSON-RPC error ({policy})");
            };
            assert_eq!(error.code.0, -32602, "{policy}: {error:?}");
            assert!(!context.tools.join("probe").exists(), "{policy}");
        }
        session.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_session_hears_of_a_new_tool() {
    let context = TestContext::new();
    fixtures(&context);
    let (session, mut changes) = connect(&context, &[], legacy()).await;
    // The five fixtures and the `custom_tool` meta-tool.
    assert_eq!(session.list_all_tools().await.unwrap().len(), 6);
    install(
        &context,
        "fresh",
        &shell_tool("fresh", r#"{"type": "object"}"#, "echo new"),
    );
    tokio::time::timeout(PATIENCE, changes.recv())
        .await
        .expect("no notifications/tools/list_changed")
        .unwrap();
    let tools = session.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "custom_tool_fresh"));
    let fresh = session
        .call_tool(call("custom_tool_fresh", json!({})))
        .await
        .unwrap();
    assert_eq!(text(&fresh), "new");
    session.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_session_lists_calls_and_listens() {
    let context = TestContext::new();
    fixtures(&context);
    let (session, _changes) = connect(&context, &[], modern()).await;
    assert_eq!(
        session.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    assert_eq!(session.list_all_tools().await.unwrap().len(), 6);
    let stats = session
        .call_tool(call("custom_tool_stats", json!({})))
        .await
        .unwrap();
    assert_eq!(stats.structured_content, Some(json!({"count": 3})));

    a_new_tool_is_announced_and_answers(&context, &session).await;
    session.cancel().await.unwrap();
}

/// Subscribes `session` to list changes, installs a tool, and checks that the notification
/// comes, the list holds the new tool and it answers.
pub(crate) async fn a_new_tool_is_announced_and_answers<H: ClientHandler>(
    context: &TestContext,
    session: &RunningService<RoleClient, H>,
) {
    let mut subscription = session
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .unwrap();
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
    install(
        context,
        "fresh",
        &shell_tool("fresh", r#"{"type": "object"}"#, "echo new"),
    );
    let notification = tokio::time::timeout(PATIENCE, subscription.next())
        .await
        .expect("no list_changed on the subscription")
        .unwrap()
        .unwrap();
    assert!(
        matches!(
            notification,
            ServerNotification::ToolListChangedNotification(_)
        ),
        "{notification:?}"
    );
    let tools = session.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "custom_tool_fresh"));
    let fresh = session
        .call_tool(call("custom_tool_fresh", json!({})))
        .await
        .unwrap();
    assert_eq!(text(&fresh), "new");
}

/// The shell snippet a fixture tool uses to write its own pid namespace, then `pids`.
///
/// Tools run in a PID namespace of their own where the kernel allows it, so `$$` is a pid of
/// that namespace; [`host_pids`] turns the line back into the test's pids.
pub(crate) fn pids_line(pids: &str) -> String {
    format!("$(readlink /proc/self/ns/pid) {pids}")
}

/// The host pids of a line written with [`pids_line`]: the processes whose pid namespace is
/// the one named and whose innermost pid is one of those listed.
pub(crate) fn host_pids(line: &str) -> Vec<String> {
    let mut words = line.split_whitespace();
    let namespace = words.next().unwrap_or_default().to_owned();
    let inner: Vec<&str> = words.collect();
    let own_namespace = std::fs::read_link("/proc/self/ns/pid")
        .map(|link| link.display().to_string())
        .unwrap_or_default();
    if namespace == own_namespace {
        return inner.iter().map(|pid| (*pid).to_owned()).collect();
    }
    inner
        .iter()
        .map(|wanted| {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
                .find(|pid| {
                    let in_namespace = std::fs::read_link(format!("/proc/{pid}/ns/pid"))
                        .is_ok_and(|link| link.display().to_string() == namespace);
                    in_namespace
                        && std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(
                            |status| {
                                status
                                    .lines()
                                    .find_map(|line| line.strip_prefix("NSpid:"))
                                    .and_then(|ids| ids.split_whitespace().last())
                                    == Some(*wanted)
                            },
                        )
                })
                .unwrap_or_else(|| panic!("no process {wanted} in {namespace}"))
        })
        .collect()
}

/// `serve` lists exactly what `export --format mcp` prints, hints included: both come from one
/// mapping. The examples have executables (no hint: MCP's cautious defaults apply), a
/// read-only manifest and tools with output schemas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_lists_exactly_what_export_prints() {
    let context = TestContext::new();
    let exported = context
        .with_examples()
        .args(["export", "--format", "mcp"])
        .output()
        .unwrap();
    assert!(exported.status.success(), "{exported:?}");
    let exported: Value = serde_json::from_slice(&exported.stdout).unwrap();
    let mut command = context.with_examples();
    command.arg("serve");
    let (session, _changes, _server_pid) = connect_to_child(command, legacy()).await;
    let listed: Vec<Value> = session
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        // The generator's meta-tool is the server's own, not a tool file's.
        .filter(|tool| tool.name != "custom_tool")
        .map(|tool| serde_json::to_value(tool).unwrap())
        .collect();
    assert!(listed.len() >= 4, "{listed:?}");
    assert_eq!(Value::from(listed), exported["tools"]);
    session.cancel().await.unwrap();
}

/// A tool that starts `sleep 60`, writes its own and the sleep's pids to `<root>/pids` (with
/// [`pids_line`]), and waits: a call of it runs until it is cancelled.
pub(crate) fn slow_tool(context: &TestContext) {
    context.tool(
        "slow",
        &shell_tool(
            "slow",
            r#"{"type": "object"}"#,
            &format!(
                "sleep 60 & echo \"{}\" > {}; wait",
                pids_line("$$ $!"),
                context.outbox().join("pids").display()
            ),
        ),
    );
}

/// The host pids the [`slow_tool`] wrote once it runs, all alive; the file is removed, so the
/// next call writes it afresh.
pub(crate) async fn slow_tool_pids(context: &TestContext) -> Vec<String> {
    let file = context.outbox().join("pids");
    let written = wait_for_file(&file).await;
    let pids = host_pids(&written);
    assert_eq!(pids.len(), 2, "{written:?}");
    assert!(pids.iter().all(alive), "{pids:?}");
    std::fs::remove_file(&file).unwrap();
    pids
}

/// Waits (a bound on liveness) until none of `pids` is alive.
pub(crate) async fn wait_until_gone(pids: &[String]) {
    let deadline = Instant::now() + PATIENCE;
    while pids.iter().any(alive) {
        assert!(Instant::now() < deadline, "still alive: {pids:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Calls the [`slow_tool`] through `peer`, cancels the call once its processes run, and checks
/// from outside that its whole tree is gone.
pub(crate) async fn cancelled_call_leaves_no_process(
    context: &TestContext,
    peer: &Peer<RoleClient>,
) {
    let handle = peer
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(call(
                "custom_tool_slow",
                json!({}),
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let pids = slow_tool_pids(context).await;
    handle
        .cancel(Some("the test gave up".to_owned()))
        .await
        .unwrap();
    wait_until_gone(&pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_call_kills_the_tree_and_the_session_goes_on() {
    let context = TestContext::new();
    slow_tool(&context);
    let (session, _changes) = connect(&context, &[], legacy()).await;
    cancelled_call_leaves_no_process(&context, session.peer()).await;
    // The session goes on (the tool and the `custom_tool` meta-tool).
    assert_eq!(session.list_all_tools().await.unwrap().len(), 2);
    session.cancel().await.unwrap();
}

pub(crate) async fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_calls_are_all_answered() {
    let context = TestContext::new();
    context.tool(
        "twice",
        &shell_tool(
            "twice",
            r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#,
            r#"n=$(sed 's/[^0-9]//g'); echo "{\"twice\": $((n * 2))}""#,
        ),
    );
    let mut command = context.with_tools();
    // Fixed, so that the bound on the executor's pool of cgroup leaves does not depend on the
    // number of cores.
    command
        .arg("serve")
        .env("TOOLSMITH_MAX_CONCURRENT", MAX_CONCURRENT.to_string());
    let (session, _changes, server_pid) = connect_to_child(command, legacy()).await;
    let warm_up = session
        .call_tool(call("custom_tool_twice", json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(warm_up.is_error, Some(false), "{warm_up:?}");
    // Taken once the runtime has started the threads that a session and a call need, since it
    // starts them lazily, and once the server keeps a sandbox prepared for the next call.
    crate::load::settle_prepared(server_pid).await;
    let baseline = Footprint::of(server_pid);
    let peer = Arc::new(session.peer().clone());
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..200_u64 {
        let peer = Arc::clone(&peer);
        calls.spawn(async move {
            let result = peer
                .call_tool(call("custom_tool_twice", json!({"n": n})))
                .await
                .unwrap();
            (n, result)
        });
    }
    let mut answered = 0;
    while let Some(joined) = calls.join_next().await {
        let (n, result) = joined.unwrap();
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let value: Value = serde_json::from_str(&text(&result)).unwrap();
        assert_eq!(value, json!({"twice": n * 2}));
        answered += 1;
    }
    assert_eq!(answered, 200);
    // Every call's pipes and pidfds are closed and its threads are gone. Tokio's blocking
    // threads linger for 10 s after their last use, so the counts are polled for up to
    // `LINGER_PATIENCE`: a bound on liveness, not a claim about speed.
    let deadline = Instant::now() + LINGER_PATIENCE;
    let mut now = Footprint::of(server_pid);
    while !now.holds_only_reused(&baseline, MAX_CONCURRENT) {
        assert!(
            Instant::now() < deadline,
            "the server holds {now:?} after all answers, against {baseline:?} before the calls; its fds: {}",
            open_fds(server_pid)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        now = Footprint::of(server_pid);
    }
    session.cancel().await.unwrap();
}

/// How long a test waits for tokio's idle blocking threads (kept alive 10 s) to exit.
pub(crate) const LINGER_PATIENCE: Duration = Duration::from_secs(15);

/// The server's limit on concurrent runs in the test that counts its resources.
const MAX_CONCURRENT: usize = 8;

/// `run-N` if `target` is a file of a leaf of the executor of process `pid`
/// (`…/toolsmith-<pid>-<n>/run-N/cgroup.procs`): a pooled leaf keeps its `cgroup.procs` and
/// the files each run reads or writes open.
pub(crate) fn pooled_leaf(target: &Path, pid: u32) -> Option<String> {
    let leaf = target.parent()?;
    let executor_dir = leaf.parent()?.file_name()?.to_str()?;
    let leaf = leaf.file_name()?.to_str()?;
    (leaf.starts_with("run-") && executor_dir.starts_with(&format!("toolsmith-{pid}-")))
        .then(|| leaf.to_owned())
}

/// The targets of `pid`'s open fds, for a failure message.
pub(crate) fn open_fds(pid: u32) -> String {
    let mut targets: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .map(|target| target.display().to_string())
        .collect();
    targets.sort();
    targets.join(", ")
}

#[test]
fn closing_stdin_ends_the_server() {
    let context = TestContext::new();
    fixtures(&context);
    let output = context
        .with_tools()
        .arg("serve")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stdout.is_empty());
}

/// `toolsmith serve` spoken to in raw JSON lines, one answer read per request.
struct RawSession {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl RawSession {
    fn start(context: &TestContext) -> RawSession {
        use std::io::BufRead;

        let mut child = context
            .with_tools()
            .arg("serve")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        RawSession {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write;

        writeln!(self.stdin, "{message}").unwrap();
    }

    fn exchange(&mut self, request: &Value) -> Value {
        self.send(request);
        let line = self.lines.next().unwrap().unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// Closes stdin and returns the exit code.
    fn close(self) -> Option<i32> {
        let RawSession {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        child.wait().unwrap().code()
    }
}

#[test]
fn raw_json_lines_modern() {
    let context = TestContext::new();
    fixtures(&context);
    let mut session = RawSession::start(&context);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    });
    let discover = session.exchange(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
    );
    let versions = discover["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")), "{discover}");
    assert!(versions.contains(&json!("2025-11-25")), "{discover}");
    let listed = session.exchange(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}),
    );
    assert_eq!(
        listed["result"]["tools"].as_array().unwrap().len(),
        6,
        "{listed}"
    );
    assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
    let bad_cursor = session.exchange(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta, "cursor": "7"}}));
    assert_eq!(bad_cursor["error"]["code"], -32602, "{bad_cursor}");
    assert_eq!(session.close(), Some(0));
}

#[test]
fn raw_json_lines_legacy() {
    let context = TestContext::new();
    fixtures(&context);
    let mut session = RawSession::start(&context);
    let initialized = session.exchange(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    assert_eq!(
        initialized["result"]["protocolVersion"], "2025-06-18",
        "{initialized}"
    );
    assert_eq!(
        initialized["result"]["capabilities"]["tools"]["listChanged"], true,
        "{initialized}"
    );
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let called = session.exchange(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "custom_tool_hello", "arguments": {"name": "Bo"}}}));
    assert_eq!(
        called["result"]["content"][0]["text"], "Hello, Bo!",
        "{called}"
    );
    assert_eq!(called["result"]["isError"], false, "{called}");
    // Legacy peers get no 2026-07-28 fields.
    assert!(called["result"].get("resultType").is_none(), "{called}");
    assert_eq!(session.close(), Some(0));
}

#[test]
fn raw_cancelled_call_gets_no_response() {
    let context = TestContext::new();
    let pids = context.outbox().join("pids");
    context.tool(
        "slow",
        &shell_tool(
            "slow",
            r#"{"type": "object"}"#,
            &format!(
                "echo \"{}\" > {}; exec sleep 60",
                pids_line("$$"),
                pids.display()
            ),
        ),
    );
    let mut session = RawSession::start(&context);
    session.exchange(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    session.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "custom_tool_slow", "arguments": {}}}));
    let deadline = Instant::now() + PATIENCE;
    let pid = loop {
        if let Ok(text) = std::fs::read_to_string(&pids)
            && text.ends_with('\n')
        {
            break host_pids(&text).remove(0);
        }
        assert!(Instant::now() < deadline, "the slow tool never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "enough"}}));
    while alive(&pid) {
        assert!(Instant::now() < deadline, "{pid} still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The next line on the wire answers the next request: request 2 got no response.
    let listed = session.exchange(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert_eq!(listed["id"], 3, "{listed}");
    assert_eq!(session.close(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_listings_are_paginated() {
    let context = TestContext::new();
    for n in 0..120 {
        std::fs::write(
            context.tools.join(format!("m{n:03}.md")),
            format!(
                "---\nname: m{n:03}\ndescription: Manifest {n}\nparameters: {{}}\n---\necho {n}\n"
            ),
        )
        .unwrap();
    }
    let (session, _changes) = connect(&context, &[], legacy()).await;
    let first = session.list_tools(None).await.unwrap();
    // The `custom_tool` meta-tool comes first, on top of the page of 100 tools.
    assert_eq!(first.tools.len(), 101);
    assert_eq!(first.tools[0].name, "custom_tool");
    assert_eq!(first.tools[1].name, "custom_tool_m000");
    assert!(first.next_cursor.is_some());
    let all = session.list_all_tools().await.unwrap();
    let names: Vec<String> = all.iter().map(|tool| tool.name.to_string()).collect();
    let expected: Vec<String> = std::iter::once("custom_tool".to_owned())
        .chain((0..120).map(|n| format!("custom_tool_m{n:03}")))
        .collect();
    assert_eq!(names, expected);
    session.cancel().await.unwrap();
}

/// A tool that reports three steps on `$TOOLSMITH_PROGRESS_FD`, writing its pid first.
pub(crate) fn counter_tool() -> String {
    shell_tool(
        "counter",
        r#"{"type": "object"}"#,
        r#"echo "$(readlink /proc/self/ns/pid) $$" > outbox/counter.pid; for i in 1 2 3; do if [ -n "$TOOLSMITH_PROGRESS_FD" ]; then printf '{"progress": %s, "total": 3, "message": "step %s"}\n' $i $i >&"$TOOLSMITH_PROGRESS_FD"; fi; sleep 0.3; done; echo done"#,
    )
}

/// Reads lines until the response to `id`, collecting the progress notifications on the way.
fn until_response(session: &mut RawSession, id: u64) -> (Value, Vec<Value>) {
    let mut progress = Vec::new();
    loop {
        let line = session.lines.next().unwrap().unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == json!(id) {
            return (message, progress);
        }
        if message["method"] == "notifications/progress" {
            progress.push(message["params"].clone());
        }
    }
}

#[test]
fn progress_is_forwarded_and_a_cancelled_long_call_leaves_no_process() {
    let context = TestContext::new();
    context.tool("counter", &counter_tool());
    context.outbox();
    let mut session = RawSession::start(&context);
    session.exchange(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    session.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "custom_tool_counter", "arguments": {}, "_meta": {"progressToken": "count"}}}));
    let (response, progress) = until_response(&mut session, 2);
    assert_eq!(
        response["result"]["content"][0]["text"], "done",
        "{response}"
    );
    let values: Vec<f64> = progress
        .iter()
        .map(|params| {
            assert_eq!(params["progressToken"], "count", "{params}");
            assert_eq!(params["total"], 3.0, "{params}");
            params["progress"].as_f64().unwrap()
        })
        .collect();
    assert_eq!(values, [1.0, 2.0, 3.0], "{progress:?}");
    assert_eq!(progress[0]["message"], "step 1");

    // The same long tool, cancelled once it has reported its first step.
    let pid_file = context.outbox().join("counter.pid");
    let _ = std::fs::remove_file(&pid_file);
    session.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "custom_tool_counter", "arguments": {}, "_meta": {"progressToken": "cancel-me"}}}));
    loop {
        let line = session.lines.next().unwrap().unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        assert_ne!(
            message["id"],
            json!(3),
            "the call finished before it could be cancelled"
        );
        if message["method"] == "notifications/progress" {
            break;
        }
    }
    let pid = host_pids(&std::fs::read_to_string(&pid_file).unwrap()).remove(0);
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "test"}}));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alive(&pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!alive(&pid), "the cancelled tool {pid} is still running");
    assert_eq!(session.close(), Some(0));
}
