//! `toolsmith serve --http`: rmcp's Streamable HTTP client and the official MCP Python SDK in
//! both eras, every security rule (token, Origin and Host, body cap, refused binds, TLS,
//! per-client concurrency and rate), load with the server's footprint checked, metrics, JSON
//! logs and graceful shutdown, all tested from outside.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResult, NumberOrString, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    RequestParamsMeta,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RunningService, ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::context::{TestContext, repository_root, shell_tool, target_dir};
use crate::load::{
    LOAD_MARKER, MAX_PREPARED, drive_calls, fill_prepared, footprint_at_rest, number_tool, quiet,
    settle,
};
use crate::processes::marked;
use crate::serve::{
    PATIENCE, a_new_tool_is_announced_and_answers, call, cancelled_call_leaves_no_process,
    counter_tool, fixtures, host_pids, install, legacy, meta, modern, pids_line, slow_tool,
    slow_tool_pids, text, wait_until_gone,
};

/// A `toolsmith serve --http 127.0.0.1:0` child, killed and reaped when dropped.
pub(crate) struct Server {
    child: Child,
    /// `127.0.0.1:PORT`, as the server printed it.
    authority: String,
    /// `http` or `https`.
    scheme: String,
    /// Everything the server wrote on stderr so far, for failure messages.
    stderr: Arc<Mutex<String>>,
    /// The thread that reads stderr; it ends when the server's stderr closes.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Starts the server with `args` after `serve --http 127.0.0.1:0` and waits until it is ready.
    pub(crate) async fn start(
        context: &TestContext,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut command = context.with_tools();
        command.envs(env.iter().copied());
        Server::start_command(command, args).await
    }

    /// Starts `command` (a `toolsmith` command with its global flags) with `serve --http
    /// 127.0.0.1:0 <args>` and waits until it is ready.
    pub(crate) async fn start_command(mut command: std::process::Command, args: &[&str]) -> Server {
        command
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (address, addresses) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        let log = Arc::clone(&stderr);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { return };
                if let Some(rest) = line.strip_prefix("toolsmith: serving MCP on ") {
                    let url = rest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    let _ignored = address.send(url);
                }
                // With `--log-format json`, the same as a log line.
                if let Ok(event) = serde_json::from_str::<Value>(&line)
                    && event["fields"]["message"] == "serving MCP"
                    && let Some(url) = event["fields"]["url"].as_str()
                {
                    let _ignored = address.send(url.to_owned());
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let url = match addresses.recv_timeout(PATIENCE) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the server never said where it listens: {}",
                    stderr.lock().unwrap()
                );
            }
        };
        let (scheme, rest) = url.split_once("://").unwrap();
        let authority = rest.strip_suffix("/mcp").unwrap().to_owned();
        let server = Server {
            child,
            authority,
            scheme: scheme.to_owned(),
            stderr,
            reader: Some(reader),
        };
        if server.scheme == "http" {
            server.wait_ready().await;
        }
        server
    }

    fn url(&self) -> String {
        format!("{}://{}/mcp", self.scheme, self.authority)
    }

    /// The loopback port the server listens on.
    pub(crate) fn port(&self) -> u16 {
        self.authority.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Polls `/readyz` until it says ready.
    async fn wait_ready(&self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let response = self.request("GET", "/readyz", &[], "").await;
            if response.status == 200 {
                return;
            }
            assert_eq!(response.status, 503, "{response:?}");
            assert!(Instant::now() < deadline, "never ready: {}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM, waits (a bound on liveness) until the server exits and its stderr is
    /// read to the end, and returns its exit status and everything it wrote on stderr.
    pub(crate) async fn terminate(&mut self) -> (std::process::ExitStatus, String) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on the server this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        (status, self.log())
    }

    /// One plain-HTTP request on a fresh connection.
    pub(crate) async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> RawResponse {
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .unwrap();
        exchange(stream, &self.authority, method, path, headers, body).await
    }

    /// Connects rmcp's Streamable HTTP client, with `token` as its bearer token.
    pub(crate) async fn connect(
        &self,
        token: Option<&str>,
        lifecycle: ClientLifecycleMode,
    ) -> (Session, Events) {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url());
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let (changed, changes) = mpsc::unbounded_channel();
        let (progressed, progress) = mpsc::unbounded_channel();
        let session = Recorder {
            changed,
            progressed,
        }
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}\n{}", self.log()));
        (session, Events { changes, progress })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client that reports list changes and progress notifications.
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    changed: mpsc::UnboundedSender<()>,
    progressed: mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ignored = self.changed.send(());
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ignored = self.progressed.send(params);
    }
}

pub(crate) type Session = RunningService<RoleClient, Recorder>;

/// What a [`Recorder`] heard.
pub(crate) struct Events {
    changes: mpsc::UnboundedReceiver<()>,
    progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
}

#[derive(Debug)]
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    head: String,
    body: String,
}

/// Sends one HTTP/1.1 request with `Connection: close` and reads the whole response.
async fn exchange(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> RawResponse {
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("Host: {host}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    // The server may answer before reading a body it refuses, and close: keep what came.
    let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut response)).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    RawResponse {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// The headers of an MCP POST.
const MCP_HEADERS: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
];

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// A fresh token from `toolsmith token new`.
pub(crate) fn new_token(context: &TestContext) -> String {
    let output = context.command().args(["token", "new"]).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let token = String::from_utf8(output.stdout).unwrap();
    assert!(token.ends_with('\n'), "{token:?}");
    token.trim_end().to_owned()
}

/// The checks both eras share: list, call, a failing tool, invalid arguments, an unknown tool.
async fn lists_and_calls(session: &Session) {
    let tools = session.list_all_tools().await.unwrap();
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
    let hello = session
        .call_tool(call("custom_tool_hello", json!({"name": "Ada"})))
        .await
        .unwrap();
    assert_eq!(hello.is_error, Some(false));
    assert_eq!(text(&hello), "Hello, Ada!");
    let stats = session
        .call_tool(call("custom_tool_stats", json!({})))
        .await
        .unwrap();
    assert_eq!(stats.structured_content, Some(json!({"count": 3})));
    let fail = session
        .call_tool(call("custom_tool_fail", json!({})))
        .await
        .unwrap();
    assert_eq!(fail.is_error, Some(true));
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
}

/// Calls the counter tool with a progress token and checks the three steps arrive.
async fn progress_is_forwarded(session: &Session, events: &mut Events) {
    // rmcp's client puts a progress token of its own on the request; all that matters is
    // that one is there, and that every notification names the same.
    let mut params = call("custom_tool_counter", json!({}));
    params.set_progress_token(ProgressToken(NumberOrString::String("count".into())));
    let done = session.call_tool(params).await.unwrap();
    assert_eq!(text(&done), "done");
    let mut steps = Vec::new();
    let mut tokens = Vec::new();
    while steps.len() < 3 {
        let progress = tokio::time::timeout(PATIENCE, events.progress.recv())
            .await
            .unwrap_or_else(|_| panic!("only {steps:?} arrived"))
            .unwrap();
        tokens.push(progress.progress_token.clone());
        steps.push((progress.progress, progress.total, progress.message));
    }
    assert!(events.progress.try_recv().is_err(), "more than three steps");
    tokens.dedup();
    assert_eq!(tokens.len(), 1, "{tokens:?}");
    assert_eq!(
        steps,
        [
            (1.0, Some(3.0), Some("step 1".to_owned())),
            (2.0, Some(3.0), Some("step 2".to_owned())),
            (3.0, Some(3.0), Some("step 3".to_owned())),
        ]
    );
}

/// The counter (it reports progress) and the slow tool (it runs until cancelled).
fn long_tools(context: &TestContext) {
    context.tool("counter", &counter_tool());
    context.outbox();
    slow_tool(context);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_legacy_session_lists_calls_and_hears_of_a_new_tool() {
    let context = TestContext::new();
    fixtures(&context);
    let server = Server::start(&context, &[], &[]).await;
    let (session, mut events) = server.connect(None, legacy()).await;
    assert_ne!(
        session.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    lists_and_calls(&session).await;
    install(
        &context,
        "fresh",
        &shell_tool("fresh", r#"{"type": "object"}"#, "echo new"),
    );
    tokio::time::timeout(PATIENCE, events.changes.recv())
        .await
        .expect("no notifications/tools/list_changed")
        .unwrap();
    let fresh = session
        .call_tool(call("custom_tool_fresh", json!({})))
        .await
        .unwrap();
    assert_eq!(text(&fresh), "new");
    session.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_modern_requests_list_call_and_listen() {
    let context = TestContext::new();
    fixtures(&context);
    let server = Server::start(&context, &[], &[]).await;
    let (session, _events) = server.connect(None, modern()).await;
    assert_eq!(
        session.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    lists_and_calls(&session).await;
    a_new_tool_is_announced_and_answers(&context, &session).await;
    session.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_progress_and_cancellation_in_both_eras() {
    let context = TestContext::new();
    long_tools(&context);
    let server = Server::start(&context, &[], &[]).await;
    for lifecycle in [legacy(), modern()] {
        let (session, mut events) = server.connect(None, lifecycle).await;
        progress_is_forwarded(&session, &mut events).await;
        cancelled_call_leaves_no_process(&context, session.peer()).await;
        // The server goes on: the two tools and the `custom_tool` meta-tool.
        assert_eq!(session.list_all_tools().await.unwrap().len(), 3);
        session.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bearer_token_is_required_on_mcp_only() {
    let context = TestContext::new();
    fixtures(&context);
    let token = new_token(&context);
    assert_eq!(token.len(), 64, "{token:?}");
    assert_ne!(token, new_token(&context), "two tokens were the same");
    let server = Server::start(&context, &[], &[("TOOLSMITH_TOKEN", &token)]).await;
    // Health and readiness answer anyone.
    let health = server.request("GET", "/healthz", &[], "").await;
    assert_eq!(health.status, 200, "{health:?}");
    // No token, a wrong one, another scheme: 401, and the client is told how to authenticate.
    let wrong = format!(
        "Bearer {}",
        token.replace(&token[..1], if &token[..1] == "0" { "1" } else { "0" })
    );
    let basic = format!("Basic {token}");
    for authorization in [
        None,
        Some(wrong.as_str()),
        Some(basic.as_str()),
        Some("Bearer "),
    ] {
        let mut headers = MCP_HEADERS.to_vec();
        if let Some(value) = authorization {
            headers.push(("Authorization", value));
        }
        let refused = server.request("POST", "/mcp", &headers, INITIALIZE).await;
        assert_eq!(refused.status, 401, "{authorization:?}: {refused:?}");
        assert!(
            refused
                .head
                .to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{refused:?}"
        );
    }
    let bearer = format!("Bearer {token}");
    let mut headers = MCP_HEADERS.to_vec();
    headers.push(("Authorization", &bearer));
    let accepted = server.request("POST", "/mcp", &headers, INITIALIZE).await;
    assert_eq!(accepted.status, 200, "{accepted:?}");
    assert!(
        accepted.body.contains("\"protocolVersion\""),
        "{accepted:?}"
    );

    // rmcp's client with the token works; without it, it cannot connect.
    let (session, _events) = server.connect(Some(&token), modern()).await;
    assert_eq!(session.list_all_tools().await.unwrap().len(), 6);
    session.cancel().await.unwrap();
    let transport = StreamableHttpClientTransport::from_uri(server.url());
    let (changed, _changes) = mpsc::unbounded_channel();
    let (progressed, _progress) = mpsc::unbounded_channel();
    let refused = Recorder {
        changed,
        progressed,
    }
    .serve_with_lifecycle(transport, legacy())
    .await;
    assert!(refused.is_err(), "a client without the token connected");
}

#[test]
fn http_token_file_wins_over_the_environment() {
    let context = TestContext::new();
    fixtures(&context);
    let token = new_token(&context);
    let file = context.root.join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let other = new_token(&context);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(Server::start(
        &context,
        &["--token-file", file.to_str().unwrap()],
        &[("TOOLSMITH_TOKEN", &other)],
    ));
    let status = |token: &str| {
        let bearer = format!("Bearer {token}");
        let mut headers = MCP_HEADERS.to_vec();
        headers.push(("Authorization", &bearer));
        runtime
            .block_on(server.request("POST", "/mcp", &headers, INITIALIZE))
            .status
    };
    assert_eq!(status(&token), 200);
    assert_eq!(status(&other), 401);

    // A token too short to be a secret is refused at start.
    std::fs::write(&file, "hunter2\n").unwrap();
    let output = context
        .with_tools()
        .args(["serve", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("shorter than 16 characters"),
        "{output:?}"
    );
}

#[test]
fn http_non_loopback_bind_without_a_token_is_refused() {
    let context = TestContext::new();
    for address in ["0.0.0.0:0", "[::]:0"] {
        let output = context
            .with_tools()
            .args(["serve", "--http", address])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("without a token") && stderr.contains("toolsmith token new"),
            "{stderr}"
        );
        assert!(!stderr.contains("serving MCP"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_foreign_origin_and_host_are_forbidden() {
    let context = TestContext::new();
    fixtures(&context);
    let server = Server::start(
        &context,
        &["--allow-origin", "https://app.example.com:443"],
        &[],
    )
    .await;
    let with = |extra: (&'static str, &'static str)| {
        let mut headers = MCP_HEADERS.to_vec();
        headers.push(extra);
        headers
    };
    // A page of another site (DNS rebinding or a plain cross-site request): 403.
    for origin in [
        "http://evil.example",
        "https://app.example.com:8443",
        "null",
    ] {
        let response = server
            .request("POST", "/mcp", &with(("Origin", origin)), INITIALIZE)
            .await;
        assert_eq!(response.status, 403, "{origin}: {response:?}");
    }
    // A rebound name reaches the server with its own Host: 403.
    let response = server
        .request("POST", "/mcp", &with(("Host", "evil.example")), INITIALIZE)
        .await;
    assert_eq!(response.status, 403, "{response:?}");
    // The allowed origin, and a client that sends none, are served.
    let response = server
        .request(
            "POST",
            "/mcp",
            &with(("Origin", "https://app.example.com")),
            INITIALIZE,
        )
        .await;
    assert_eq!(response.status, 200, "{response:?}");
    let response = server
        .request("POST", "/mcp", &MCP_HEADERS, INITIALIZE)
        .await;
    assert_eq!(response.status, 200, "{response:?}");
    // Anything else is not found.
    let response = server.request("GET", "/other", &[], "").await;
    assert_eq!(response.status, 404, "{response:?}");
}

/// A client ending its session with `DELETE /mcp` is told it succeeded (200, as the Python SDK
/// and the clients built on it require: a 202 is logged as a failed termination); a session
/// that does not exist (never made, or already ended) is 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_delete_ends_a_session_with_200_and_an_unknown_one_is_404() {
    let context = TestContext::new();
    fixtures(&context);
    let server = Server::start(&context, &[], &[]).await;
    let response = server
        .request("POST", "/mcp", &MCP_HEADERS, INITIALIZE)
        .await;
    assert_eq!(response.status, 200, "{response:?}");
    let id = session_id(&response.head).expect("a legacy session id");
    let delete = |id: String| {
        let server = &server;
        async move {
            let headers = [
                ("Mcp-Session-Id", id.as_str()),
                ("MCP-Protocol-Version", "2025-11-25"),
            ];
            server.request("DELETE", "/mcp", &headers, "").await
        }
    };
    let response = delete(id.clone()).await;
    assert_eq!(response.status, 200, "{response:?}\n{}", server.log());
    // Ended: the same DELETE again, and the session's use, find nothing.
    let response = delete(id.clone()).await;
    assert_eq!(response.status, 404, "{response:?}");
    let response = delete("no-such-session".to_owned()).await;
    assert_eq!(response.status, 404, "{response:?}");
    let listing = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let headers = [
        MCP_HEADERS[0],
        MCP_HEADERS[1],
        ("Mcp-Session-Id", id.as_str()),
    ];
    let response = server.request("POST", "/mcp", &headers, listing).await;
    assert_eq!(response.status, 404, "{response:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_oversized_body_is_refused() {
    let context = TestContext::new();
    fixtures(&context);
    let server = Server::start(&context, &["--max-body", "4KiB"], &[]).await;
    let padding = "x".repeat(8 * 1024);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"{padding}","version":"1"}}}}}}"#
    );
    let response = server.request("POST", "/mcp", &MCP_HEADERS, &big).await;
    assert_eq!(response.status, 413, "{response:?}");
    // Under the cap, the same request is served.
    let response = server
        .request("POST", "/mcp", &MCP_HEADERS, INITIALIZE)
        .await;
    assert_eq!(response.status, 200, "{response:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_audit_log_names_the_client() {
    let context = TestContext::new();
    fixtures(&context);
    let config = context.root.join("config.toml");
    std::fs::write(&config, "[audit]\npath = \"audit.jsonl\"\n").unwrap();
    let token = new_token(&context);
    let server = Server::start(
        &context,
        &[],
        &[
            ("TOOLSMITH_TOKEN", &token),
            ("TOOLSMITH_CONFIG", config.to_str().unwrap()),
        ],
    )
    .await;
    let (session, _events) = server.connect(Some(&token), legacy()).await;
    let hello = session
        .call_tool(call("custom_tool_hello", json!({"name": "Ada"})))
        .await
        .unwrap();
    assert_eq!(text(&hello), "Hello, Ada!");
    session.cancel().await.unwrap();
    let log = std::fs::read_to_string(context.root.join("audit.jsonl")).unwrap();
    let line: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(line["tool"], "hello", "{line}");
    let client = line["client"].as_str().unwrap_or_else(|| panic!("{line}"));
    assert!(
        client.starts_with("127.0.0.1:") && client.ends_with(" (token)"),
        "{client}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tls_with_a_test_certificate() {
    let context = TestContext::new();
    fixtures(&context);
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = context.root.join("cert.pem");
    let key = context.root.join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let server = Server::start(
        &context,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(server.scheme, "https");

    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let port = server.authority.rsplit(':').next().unwrap().to_owned();
    let host = format!("localhost:{port}");
    let tls = |path: &'static str, body: &'static str| {
        let connector = connector.clone();
        let name = name.clone();
        let authority = server.authority.clone();
        let host = host.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(&authority).await.unwrap();
            let stream = connector.connect(name, tcp).await.unwrap();
            let method = if body.is_empty() { "GET" } else { "POST" };
            exchange(stream, &host, method, path, &MCP_HEADERS, body).await
        }
    };
    let deadline = Instant::now() + PATIENCE;
    loop {
        let ready = tls("/readyz", "").await;
        if ready.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "never ready: {}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let initialized = tls("/mcp", INITIALIZE).await;
    assert_eq!(initialized.status, 200, "{initialized:?}");
    assert!(
        initialized
            .head
            .to_ascii_lowercase()
            .contains("mcp-session-id:"),
        "{initialized:?}"
    );
    assert!(
        initialized.body.contains("\"toolsmith\""),
        "{initialized:?}"
    );

    // Plain HTTP on the TLS port gets no HTTP answer.
    let mut plain = tokio::net::TcpStream::connect(&server.authority)
        .await
        .unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, plain.read_to_end(&mut answer)).await;
    assert!(!answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
}

/// The pinned version of the official MCP Python SDK (`.ci/run` installs it).
const MCP_PYTHON_VERSION: &str = "2.3.0";

/// The Python of the venv holding the MCP Python SDK: `$TOOLSMITH_MCP_PYTHON`, else the one
/// `.ci/run` makes in the target directory; `None` (said loudly) when it is missing, which
/// fails the test in CI.
pub(crate) fn mcp_python() -> Option<std::path::PathBuf> {
    let python = std::env::var_os("TOOLSMITH_MCP_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| target_dir().join("mcp-python/bin/python"));
    #[expect(
        clippy::disallowed_methods,
        reason = "the test asks the SDK's Python for its version"
    )]
    let version = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    if version.as_deref() == Some(MCP_PYTHON_VERSION) {
        return Some(python);
    }
    let message = format!(
        "THE MCP PYTHON SDK IS MISSING: {} has mcp {version:?}, not {MCP_PYTHON_VERSION}; \
         run .ci/run, or: python3 -m venv target/mcp-python && \
         target/mcp-python/bin/pip install mcp=={MCP_PYTHON_VERSION}",
        python.display()
    );
    assert!(
        std::env::var_os("CI").is_none_or(|ci| ci.is_empty()),
        "{message}"
    );
    #[expect(clippy::print_stderr, reason = "a test that cannot run says so")]
    {
        eprintln!("warning: NOT RUN: {message}");
    }
    None
}

/// Acceptance 1 with the official Python SDK: `tests/acceptance/mcp_http_client.py` runs every
/// check in both eras; this test answers what it asks (see the script's docstring): it notes
/// the slow tool's processes, checks from outside that cancelling kills them, and adds tool
/// files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_python_sdk_runs_every_check_in_both_eras() {
    let Some(python) = mcp_python() else {
        return;
    };
    let context = TestContext::new();
    fixtures(&context);
    long_tools(&context);
    let token = new_token(&context);
    let server = Server::start(&context, &[], &[("TOOLSMITH_TOKEN", &token)]).await;
    let script = repository_root().join("tests/acceptance/mcp_http_client.py");
    let mut client = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(server.url())
        .arg(&token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut answers = client.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(client.stdout.take().unwrap()).lines();
    let mut errors = client.stderr.take().unwrap();
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let _ = errors.read_to_string(&mut text).await;
        text
    });
    let mut transcript = String::new();
    let conversation = async {
        let mut running = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            transcript.push_str(&line);
            transcript.push('\n');
            let Some(asked) = line.strip_prefix("ask ") else {
                continue;
            };
            match asked.split_once(' ').unwrap() {
                ("running", _) => running = slow_tool_pids(&context).await,
                ("cancelled", _) => wait_until_gone(&running).await,
                ("install", era) => {
                    let name = format!("fresh_{era}");
                    let script =
                        shell_tool(&name, r#"{"type": "object"}"#, &format!("echo new {era}"));
                    install(&context, &name, &script);
                }
                other => panic!("the script asked {other:?}"),
            }
            answers.write_all(b"go\n").await.unwrap();
        }
    };
    let finished = tokio::time::timeout(PATIENCE * 4, conversation).await;
    let status = client.wait().await.unwrap();
    let stderr = stderr.await.unwrap();
    assert!(
        finished.is_ok() && status.success(),
        "{transcript}\n{stderr}\nserver:\n{}",
        server.log()
    );
    for line in [
        "ok legacy: 2025-11-25",
        "ok legacy calls: 8 tools, hello, stats, failing, invalid arguments, unknown tool",
        "ok legacy progress: 3 steps",
        "ok legacy cancellation",
        "ok legacy list_changed: custom_tool_fresh_legacy listed and called",
        "ok modern: 2026-07-28",
        "ok modern calls: 8 tools, hello, stats, failing, invalid arguments, unknown tool",
        "ok modern progress: 3 steps",
        "ok modern cancellation",
        "ok modern list_changed: custom_tool_fresh_modern listed and called",
        "ok refused without the token",
    ] {
        assert!(
            transcript.contains(line),
            "{line:?} missing from:\n{transcript}"
        );
    }
}

/// Acceptance 5 of issue 26: the official Python SDK (which the OpenAI Agents SDK and
/// LangChain's MCP adapters use) opens a session, calls a tool and closes the session (its
/// `DELETE /mcp`) without a logged warning, on its side or the server's; and in the stateless
/// era too. `tests/acceptance/mcp_http_session_close.py` prints what it recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_python_sdk_closes_a_session_without_a_warning() {
    let Some(python) = mcp_python() else {
        return;
    };
    let context = TestContext::new();
    fixtures(&context);
    let token = new_token(&context);
    let mut server = Server::start(&context, &[], &[("TOOLSMITH_TOKEN", &token)]).await;
    let script = repository_root().join("tests/acceptance/mcp_http_session_close.py");
    let client = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(server.url())
        .arg(&token)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(PATIENCE * 2, client)
        .await
        .expect("the Python client finished")
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    // The server's whole log up to its shutdown, which the test asks for (SIGTERM) and which
    // the server announces as a warning.
    let (_status, log) = server.terminate().await;
    let log = log.split(" WARN shutting down").next().unwrap();
    assert!(
        output.status.success(),
        "{stdout}\n{stderr}\nserver:\n{log}"
    );
    for line in [
        "ok legacy: 2025-11-25, a session, listed and called",
        "ok legacy closed",
        "ok modern: 2026-07-28, no session, listed and called",
        "ok modern closed",
        "ok no warning",
    ] {
        assert!(
            stdout.contains(line),
            "{line:?} missing from:\n{stdout}\n{stderr}"
        );
    }
    // A warning the SDK printed without its logging (or before the handler was installed).
    assert!(!stderr.to_lowercase().contains("warning"), "{stderr}");
    let warnings: Vec<&str> = log
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            line.starts_with("WARN") || line.starts_with("ERROR")
        })
        .collect();
    assert!(warnings.is_empty(), "the server warned:\n{log}");
}

/// How many calls run when the server gets SIGTERM: the brief ones finish within the grace
/// period, the stuck ones outlive it.
const BRIEF_CALLS: usize = 6;
const STUCK_CALLS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sigterm_lets_running_calls_finish_then_kills_the_rest() {
    let context = TestContext::new();
    let started = context.outbox().join("started");
    let released = context.outbox().join("released");
    let stuck_pids = context.outbox().join("stuck.pids");
    // A brief call runs until the test releases it, right after the signal: all ten calls
    // are running when the server gets it, whatever the machine's speed.
    context.tool(
        "brief",
        &shell_tool(
            "brief",
            r#"{"type": "object"}"#,
            &format!(
                "echo >> {}; while [ ! -e {} ]; do sleep 0.05; done; echo finished",
                started.display(),
                released.display()
            ),
        ),
    );
    context.tool(
        "stuck",
        &shell_tool(
            "stuck",
            r#"{"type": "object"}"#,
            &format!(
                "sleep 60 & echo \"{}\" >> {}; echo >> {}; wait",
                pids_line("$$ $!"),
                stuck_pids.display(),
                started.display()
            ),
        ),
    );
    let config = context.root.join("config.toml");
    std::fs::write(&config, "[audit]\npath = \"audit.jsonl\"\n").unwrap();
    // Room for all ten at once (`serve` runs 4 per core by default; the rest would wait).
    let mut server = Server::start(
        &context,
        &["--shutdown-grace", "3s"],
        &[
            ("TOOLSMITH_MAX_CONCURRENT", "16"),
            ("TOOLSMITH_CONFIG", config.to_str().unwrap()),
        ],
    )
    .await;
    let (session, _events) = server.connect(None, legacy()).await;
    let calls: Vec<_> = (0..BRIEF_CALLS + STUCK_CALLS)
        .map(|index| {
            let peer = session.peer().clone();
            let name = if index < BRIEF_CALLS {
                "custom_tool_brief"
            } else {
                "custom_tool_stuck"
            };
            tokio::spawn(async move { peer.call_tool(call(name, json!({}))).await })
        })
        .collect();
    // Every call's program runs before the signal.
    let deadline = Instant::now() + PATIENCE;
    while std::fs::read_to_string(&started).map_or(0, |text| text.lines().count())
        < BRIEF_CALLS + STUCK_CALLS
    {
        assert!(
            Instant::now() < deadline,
            "not every call started: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pids: Vec<String> = std::fs::read_to_string(&stuck_pids)
        .unwrap()
        .lines()
        .flat_map(host_pids)
        .collect();
    assert_eq!(pids.len(), 2 * STUCK_CALLS, "{pids:?}");

    let server_pid = i32::try_from(server.child.id()).unwrap();
    // SAFETY: kill(2) on the server this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(server_pid, libc::SIGTERM) }, 0);
    // `kill` returns before the server has handled the signal: it says when it drains.
    let deadline = Instant::now() + PATIENCE;
    while !server
        .log()
        .contains("shutting down: waiting for the running calls")
    {
        assert!(
            Instant::now() < deadline,
            "the server did not start draining: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    std::fs::write(&released, "").unwrap();
    // No new call is taken while draining.
    let refused = session
        .call_tool(call("custom_tool_brief", json!({})))
        .await;
    assert!(
        refused.is_err(),
        "a call was taken after SIGTERM: {refused:?}"
    );
    // The calls that finish within the grace period are answered; the stuck ones are killed
    // after it, and each is answered with an error that says so.
    let mut answers = Vec::new();
    for call in calls {
        let answer = tokio::time::timeout(PATIENCE, call)
            .await
            .expect("a call was never answered")
            .unwrap();
        answers.push(answer);
    }
    for answer in &answers[..BRIEF_CALLS] {
        let result = answer.as_ref().expect("a brief call failed");
        assert_eq!(text(result), "finished");
    }
    for answer in &answers[BRIEF_CALLS..] {
        let error = answer.as_ref().expect_err("a stuck call succeeded");
        assert!(
            error.to_string().contains("shut down")
                && error.to_string().contains("processes were killed"),
            "{error}"
        );
    }
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not exit: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(0), "{}", server.log());
    let log = server.log();
    assert!(
        log.contains("shutting down")
            && log.contains(&format!("running={}", BRIEF_CALLS + STUCK_CALLS)),
        "{log}"
    );
    assert!(log.contains(&format!("killed={STUCK_CALLS}")), "{log}");
    // Nothing of the killed calls is left.
    wait_until_gone(&pids).await;
    // Each call that reached a handler has its line: the brief ones `ok`, the killed ones say
    // so. (The call after SIGTERM found the listener closed: no request reached the server.)
    let lines = audit_lines(&context.root.join("audit.jsonl"), 0).await;
    let count = |outcome: &str| {
        lines
            .iter()
            .filter(|line| line["outcome"] == outcome)
            .count()
    };
    assert_eq!(lines.len(), BRIEF_CALLS + STUCK_CALLS, "{lines:?}");
    assert_eq!(count("ok"), BRIEF_CALLS, "{lines:?}");
    assert_eq!(count("killed_at_shutdown"), STUCK_CALLS, "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_metrics_count_the_calls_made() {
    let context = TestContext::new();
    fixtures(&context);
    let token = new_token(&context);
    let server = Server::start(
        &context,
        &["--profile", "plan"],
        &[("TOOLSMITH_TOKEN", &token)],
    )
    .await;
    let (session, _events) = server.connect(Some(&token), modern()).await;
    for _ in 0..2 {
        let peek = session
            .call_tool(call("custom_tool_peek", json!({})))
            .await
            .unwrap();
        assert_eq!(text(&peek), "looked");
    }
    let denied = session
        .call_tool(call("custom_tool_wipe", json!({})))
        .await
        .unwrap();
    assert_eq!(meta(&denied, "toolsmith/error_code"), "POLICY_DENIED");
    let unknown = session.call_tool(call("custom_tool_nope", json!({}))).await;
    assert!(unknown.is_err());
    session.cancel().await.unwrap();

    let refused = server.request("GET", "/metrics", &[], "").await;
    assert_eq!(refused.status, 401, "{refused:?}");
    let bearer = format!("Bearer {token}");
    let scraped = server
        .request("GET", "/metrics", &[("Authorization", &bearer)], "")
        .await;
    assert_eq!(scraped.status, 200, "{scraped:?}");
    let body = scraped.body;
    for line in [
        r#"toolsmith_calls_total{tool="peek",outcome="ok"} 2"#,
        r#"toolsmith_calls_total{tool="wipe",outcome="POLICY_DENIED"} 1"#,
        r#"toolsmith_sandbox_refusals_total{tool="wipe"} 1"#,
        r#"toolsmith_call_duration_seconds_count{tool="peek"} 2"#,
        "toolsmith_calls_in_flight 0",
    ] {
        assert!(body.contains(line), "{line:?} missing from:\n{body}");
    }
    // A tool that does not exist adds no series: clients cannot grow the label set.
    assert!(!body.contains("nope"), "{body}");
    assert!(
        body.contains("toolsmith_discovery_duration_seconds "),
        "{body}"
    );
    assert!(body.contains("toolsmith_backend{backend="), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_a_client_over_its_concurrency_limit_is_told_and_loses_no_call() {
    let context = TestContext::new();
    let started = context.outbox().join("nap.started");
    context.tool(
        "nap",
        &shell_tool(
            "nap",
            r#"{"type": "object"}"#,
            &format!("echo x >> {}; sleep 1.5; echo rested", started.display()),
        ),
    );
    let server = Server::start(&context, &["--max-calls-per-client", "2"], &[]).await;
    let (session, _events) = server.connect(None, legacy()).await;
    let running: Vec<_> = (0..2)
        .map(|_| {
            let peer = session.peer().clone();
            tokio::spawn(async move { peer.call_tool(call("custom_tool_nap", json!({}))).await })
        })
        .collect();
    let deadline = Instant::now() + PATIENCE;
    while std::fs::read_to_string(&started).map_or(0, |text| text.lines().count()) < 2 {
        assert!(Instant::now() < deadline, "the two calls never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A third call at once: refused with the reason, never started.
    let over = session
        .call_tool(call("custom_tool_nap", json!({})))
        .await
        .unwrap_err();
    let ServiceError::McpError(error) = over else {
        panic!("expected a JSON-RPC error, got {over:?}");
    };
    assert!(
        error.message.contains("too many concurrent calls") && error.message.contains("at most 2"),
        "{error:?}"
    );
    // The two running calls are answered; nothing was lost or started twice.
    for call in running {
        let result = tokio::time::timeout(PATIENCE, call)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(text(&result), "rested");
    }
    assert_eq!(
        std::fs::read_to_string(&started).unwrap().lines().count(),
        2
    );
    // Under the limit again, the call is served.
    let again = session
        .call_tool(call("custom_tool_nap", json!({})))
        .await
        .unwrap();
    assert_eq!(text(&again), "rested");
    session.cancel().await.unwrap();
    let metrics = server.request("GET", "/metrics", &[], "").await;
    assert!(
        metrics
            .body
            .contains(r#"toolsmith_calls_refused_total{reason="concurrency"} 1"#),
        "{}",
        metrics.body
    );
}

/// The load test's clients, each its own connection and session.
const LOAD_CLIENTS: u64 = 8;

/// The calls each load client keeps in flight: 64 in all.
const LOAD_IN_FLIGHT_PER_CLIENT: usize = 8;

/// The server's limit on concurrent tool processes during the load test.
const LOAD_MAX_CONCURRENT: usize = 16;

/// Which tool call `n` of the HTTP load goes to: one in ten fails, the rest echo.
fn load_tool_of(n: u64) -> &'static str {
    if n % 10 == 3 { "failing" } else { "echo" }
}

/// Asserts that `result` is the answer to call `n` of the HTTP load.
fn check_load_answer(n: u64, result: &CallToolResult) {
    match load_tool_of(n) {
        "echo" => {
            assert_eq!(result.is_error, Some(false), "{n}: {result:?}");
            let value: Value = serde_json::from_str(&text(result)).unwrap();
            assert_eq!(value, json!({"n": n}), "call {n} got another call's answer");
        }
        _ => {
            assert_eq!(meta(result, "toolsmith/error_code"), "TOOL_CRASHED");
            assert_eq!(
                meta(result, "toolsmith/metadata")["stderr"],
                json!(format!("failed {n}\n")),
                "call {n} got another call's answer"
            );
        }
    }
}

/// A short tool that answers `{"n": n}`, one that fails naming `n`, both marked in their
/// environment so that a process that outlived its call is found.
fn load_fixtures(context: &TestContext, marker: &str) -> std::path::PathBuf {
    number_tool(context, "echo", r#"echo "{\"n\": $n}""#);
    number_tool(context, "failing", r#"echo "failed $n" >&2; exit 3"#);
    let config = context.root.join("load.toml");
    std::fs::write(
        &config,
        format!("[env]\nset = {{ {LOAD_MARKER} = \"{marker}\" }}\n"),
    )
    .unwrap();
    config
}

/// Connects `LOAD_CLIENTS` clients, half in each era, sends calls `range` spread over them
/// (`LOAD_IN_FLIGHT_PER_CLIENT` in flight each), checks that every call is answered once with
/// its own answer, and disconnects them.
async fn drive_http_load(server: &Server, range: std::ops::Range<u64>) {
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..LOAD_CLIENTS {
        let lifecycle = if client % 2 == 0 { legacy() } else { modern() };
        let (session, _events) = server.connect(None, lifecycle).await;
        let range = range.clone();
        clients.spawn(async move {
            let peer = Arc::new(session.peer().clone());
            let numbers = range.filter(|n| n % LOAD_CLIENTS == client);
            let answered = drive_calls(
                peer,
                numbers,
                LOAD_IN_FLIGHT_PER_CLIENT,
                load_tool_of,
                check_load_answer,
            )
            .await;
            session.cancel().await.unwrap();
            answered
        });
    }
    let mut answers: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
    while let Some(joined) = clients.join_next().await {
        for n in joined.unwrap() {
            *answers.entry(n).or_insert(0) += 1;
        }
    }
    assert_eq!(
        answers.keys().copied().collect::<Vec<u64>>(),
        range.collect::<Vec<u64>>(),
        "calls went unanswered"
    );
    assert!(
        answers.values().all(|&count| count == 1),
        "a call was answered twice"
    );
}

/// Acceptance 3 over HTTP: 8 clients (4 legacy sessions, 4 stateless 2026-07-28 clients),
/// 1000 calls, 64 in flight; every call answered once with its own answer; the server's fds,
/// threads, memory and processes back to their baseline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_load_eight_clients_a_thousand_calls_64_in_flight() {
    let context = TestContext::new();
    let marker = format!("http-load-{}", std::process::id());
    let config = load_fixtures(&context, &marker);
    let server = Server::start(
        &context,
        // All the clients are 127.0.0.1, one client for the per-client limits.
        &[
            "--config",
            config.to_str().unwrap(),
            "--max-calls-per-client",
            "64",
            "--max-call-rate",
            "0",
        ],
        &[("TOOLSMITH_MAX_CONCURRENT", &LOAD_MAX_CONCURRENT.to_string())],
    )
    .await;
    let pid = server.child.id();
    // A warm-up of the same shape: the runtime's threads, the leaf pool and the allocator's
    // arenas grow to their working size here. Its clients are gone before the baseline.
    drive_http_load(&server, 0..200).await;
    quiet(pid).await;
    fill_prepared(pid, MAX_PREPARED, async |n| {
        drive_http_load(&server, n..n + 1).await
    })
    .await;
    let baseline = footprint_at_rest(pid).await;
    let started = Instant::now();
    drive_http_load(&server, 200..1200).await;
    let elapsed = started.elapsed();
    fill_prepared(pid, baseline.prepared, async |n| {
        drive_http_load(&server, n..n + 1).await;
    })
    .await;
    let after = settle(pid, &baseline, LOAD_MAX_CONCURRENT).await;
    assert_eq!(
        marked(&format!("{LOAD_MARKER}={marker}")),
        [] as [u32; 0],
        "tool processes outlived their calls"
    );
    #[expect(
        clippy::print_stderr,
        reason = "the figures a load test measured are worth seeing"
    )]
    {
        eprintln!(
            "http load: 1000 calls, 8 clients, 64 in flight, in {elapsed:?}; baseline {baseline:?}; after {after:?}"
        );
    }
}

/// A client over its rate is told when to come back, and no call is lost: each call is either
/// run once and answered, or refused before it starts and then served when sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_a_client_over_its_rate_is_told_when_to_retry_and_loses_no_call() {
    const CALLS: u64 = 10;
    let context = TestContext::new();
    let ran = context.outbox().join("ran");
    context.tool(
        "tally",
        &shell_tool(
            "tally",
            r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#,
            &format!(
                r#"n=$(sed 's/[^0-9]//g'); echo "$n" >> {}; echo "$n""#,
                ran.display()
            ),
        ),
    );
    let server = Server::start(&context, &["--max-call-rate", "1"], &[]).await;
    let (session, _events) = server.connect(None, modern()).await;
    // Ten calls at once against a bucket of one: all but about one are refused.
    let first: Vec<_> = (0..CALLS)
        .map(|n| {
            let peer = session.peer().clone();
            tokio::spawn(async move {
                (
                    n,
                    peer.call_tool(call("custom_tool_tally", json!({"n": n})))
                        .await,
                )
            })
        })
        .collect();
    let mut refused = Vec::new();
    let mut answered = Vec::new();
    for handle in first {
        let (n, outcome) = handle.await.unwrap();
        match outcome {
            Ok(result) => {
                assert_eq!(text(&result), n.to_string());
                answered.push(n);
            }
            Err(ServiceError::McpError(error)) => {
                assert!(
                    error.message.contains("too many calls")
                        && error.message.contains("at most 1 per second"),
                    "{error:?}"
                );
                let data = error.data.unwrap();
                assert_eq!(data["limit_per_second"], 1, "{data}");
                let retry_after = data["retry_after_ms"].as_u64().unwrap();
                assert!((1..=1001).contains(&retry_after), "{data}");
                refused.push((n, retry_after));
            }
            Err(other) => panic!("call {n}: {other:?}"),
        }
    }
    assert!(
        !refused.is_empty(),
        "ten calls at once were all admitted at one per second"
    );
    let mut n_refused = refused.len();
    // Each refused call, sent again when told, is served in the end.
    for (n, mut retry_after) in refused {
        loop {
            tokio::time::sleep(Duration::from_millis(retry_after)).await;
            match session
                .call_tool(call("custom_tool_tally", json!({"n": n})))
                .await
            {
                Ok(result) => {
                    assert_eq!(text(&result), n.to_string());
                    answered.push(n);
                    break;
                }
                Err(ServiceError::McpError(error)) => {
                    n_refused += 1;
                    retry_after = error.data.unwrap()["retry_after_ms"].as_u64().unwrap();
                }
                Err(other) => panic!("call {n}: {other:?}"),
            }
        }
    }
    // Every call ran exactly once: a refused call never started.
    answered.sort_unstable();
    assert_eq!(answered, (0..CALLS).collect::<Vec<u64>>());
    let mut runs: Vec<u64> = std::fs::read_to_string(&ran)
        .unwrap()
        .lines()
        .map(|line| line.parse().unwrap())
        .collect();
    runs.sort_unstable();
    assert_eq!(runs, answered);
    session.cancel().await.unwrap();
    let metrics = server.request("GET", "/metrics", &[], "").await;
    // Every refusal is counted.
    let counted = format!(r#"toolsmith_calls_refused_total{{reason="rate"}} {n_refused}"#);
    assert!(
        metrics.body.contains(&counted),
        "{counted} missing from:\n{}",
        metrics.body
    );
}

/// `--log-format json`: every line the server writes on stderr, from its start to its exit
/// on SIGTERM, is one JSON object with the level, the target and the fields; a call's line
/// names the tool, the outcome and the client. `TOOLSMITH_LOG_FORMAT=json` does the same, an
/// error that stops the start included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_logs_are_json_lines_when_asked() {
    let context = TestContext::new();
    fixtures(&context);
    let mut server = Server::start(
        &context,
        &["--log-format", "json"],
        &[("TOOLSMITH_LOG", "debug")],
    )
    .await;
    let (session, _events) = server.connect(None, legacy()).await;
    let hello = session
        .call_tool(call("custom_tool_hello", json!({"name": "Ada"})))
        .await
        .unwrap();
    assert_eq!(text(&hello), "Hello, Ada!");
    let fail = session
        .call_tool(call("custom_tool_fail", json!({})))
        .await
        .unwrap();
    assert_eq!(fail.is_error, Some(true));
    session.cancel().await.unwrap();
    let (status, log) = server.terminate().await;
    assert_eq!(status.code(), Some(0), "{log}");

    let events: Vec<Value> = log
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("not a JSON line ({error}): {line:?}"));
            for key in ["timestamp", "level", "target"] {
                assert!(event[key].is_string(), "no {key}: {line}");
            }
            assert!(event["fields"]["message"].is_string(), "no message: {line}");
            event
        })
        .collect();
    let find = |message: &str| {
        events
            .iter()
            .filter(|event| event["fields"]["message"] == message)
            .collect::<Vec<&Value>>()
    };
    let serving = find("serving MCP");
    assert_eq!(serving.len(), 1, "{log}");
    assert_eq!(serving[0]["level"], "INFO");
    assert_eq!(serving[0]["fields"]["url"], server.url());
    let calls = find("call answered");
    let outcomes: Vec<(&Value, &Value)> = calls
        .iter()
        .map(|event| (&event["fields"]["tool"], &event["fields"]["outcome"]))
        .collect();
    assert_eq!(
        outcomes,
        [
            (&json!("hello"), &json!("ok")),
            (&json!("fail"), &json!("TOOL_CRASHED"))
        ],
        "{log}"
    );
    for event in calls {
        let client = event["fields"]["client"].as_str().unwrap();
        assert!(
            client.starts_with("127.0.0.1:") && client.ends_with(" (no token)"),
            "{event}"
        );
        assert!(event["fields"]["duration_ms"].is_u64(), "{event}");
    }
    assert_eq!(
        find("shutting down: waiting for the running calls").len(),
        1,
        "{log}"
    );

    // From the environment; an error that stops the start is a JSON line too.
    let output = context
        .with_tools()
        .args(["serve", "--http", "0.0.0.0:0"])
        .env("TOOLSMITH_LOG_FORMAT", "json")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    let lines: Vec<Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("{stderr}")))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(lines[0]["level"], "ERROR", "{stderr}");
    let message = lines[0]["fields"]["message"].as_str().unwrap();
    assert!(message.contains("without a token"), "{message}");
}

/// The audit log's lines, once there are `count` (a bound on liveness: some are written as
/// the server notices a cancellation or a client that left).
async fn audit_lines(path: &std::path::Path, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        if lines.len() >= count {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "{} audit lines, not {count}: {text}",
            lines.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 24 (findings 8, 18): every `tools/call` leaves exactly one audit line with its
/// outcome, whatever ends it: an answer, an unknown name, a generation, a cancellation, a
/// refusal over a per-client limit, a client that went away mid-call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_every_tool_request_leaves_one_audit_line_with_its_outcome() {
    let context = TestContext::new();
    fixtures(&context);
    slow_tool(&context);
    let config = context.root.join("config.toml");
    std::fs::write(&config, "[audit]\npath = \"audit.jsonl\"\n").unwrap();
    let audit = context.root.join("audit.jsonl");
    let server = Server::start(
        &context,
        &["--max-calls-per-client", "1"],
        &[("TOOLSMITH_CONFIG", config.to_str().unwrap())],
    )
    .await;
    let (session, _events) = server.connect(None, legacy()).await;
    let hello = session
        .call_tool(call("custom_tool_hello", json!({"name": "Ada"})))
        .await
        .unwrap();
    assert_eq!(text(&hello), "Hello, Ada!");
    let unknown = session.call_tool(call("custom_tool_nope", json!({}))).await;
    assert!(unknown.is_err(), "{unknown:?}");
    // A generation runs code (its test cases): audited too, whatever its fate.
    let _generated = session.call_tool(call("custom_tool", json!({}))).await;
    audit_lines(&audit, 3).await;
    cancelled_call_leaves_no_process(&context, session.peer()).await;
    audit_lines(&audit, 4).await;
    // A second client (same address) runs a call, so the first is over its limit of 1.
    let (other, _other_events) = server.connect(None, legacy()).await;
    let peer = other.peer().clone();
    let abandoned =
        tokio::spawn(async move { peer.call_tool(call("custom_tool_slow", json!({}))).await });
    let pids = slow_tool_pids(&context).await;
    let refused = session
        .call_tool(call("custom_tool_hello", json!({"name": "Bob"})))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    // The second client goes away mid-call: the call is killed, and audited. The session is
    // closed before its call's task is dropped, so no cancellation can reach the server first
    // (dropping the call's future first may send `notifications/cancelled`, audited as
    // `cancelled`, which made this test flaky).
    other.cancel().await.unwrap();
    abandoned.abort();
    wait_until_gone(&pids).await;
    let lines = audit_lines(&audit, 6).await;
    let outcomes: Vec<(&str, &str)> = lines
        .iter()
        .map(|line| {
            (
                line["tool"].as_str().unwrap(),
                line["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(outcomes.len(), 6, "{lines:?}");
    assert_eq!(outcomes[0], ("hello", "ok"));
    assert_eq!(outcomes[1], ("custom_tool_nope", "TOOL_NOT_FOUND"));
    assert_eq!(outcomes[2].0, "custom_tool", "{lines:?}");
    assert_eq!(outcomes[3], ("slow", "cancelled"));
    assert_eq!(
        outcomes[4],
        ("custom_tool_hello", "refused_concurrency"),
        "{lines:?}"
    );
    assert_eq!(outcomes[5], ("slow", "client_gone"), "{lines:?}");
    assert!(
        lines.iter().all(|line| line["client"]
            .as_str()
            .is_some_and(|client| client.starts_with("127.0.0.1:"))),
        "{lines:?}"
    );
    // Nothing more is written later: one line per call.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(audit_lines(&audit, 6).await.len(), 6);
    session.cancel().await.unwrap();
}

/// How many calls run when the shutdown comes, in each round of the test below.
const SHUTDOWN_CALLS: usize = 24;

/// Issue 24 (finding 7, acceptance 5): a SIGTERM during 24 calls of a second, with a grace of
/// 10 s, answers every call exactly once (half in a legacy session, half modern), ten rounds
/// in a row, and the server exits 0; the calls' audit lines all say `ok`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sigterm_answers_every_call_that_completed_ten_rounds() {
    let context = TestContext::new();
    let started = context.outbox().join("started");
    context.tool(
        "second",
        &shell_tool(
            "second",
            r#"{"type": "object"}"#,
            &format!("echo >> {}; sleep 1; echo finished", started.display()),
        ),
    );
    let max_concurrent = SHUTDOWN_CALLS.to_string();
    for round in 0..10 {
        let _ignored = std::fs::remove_file(&started);
        let mut server = Server::start(
            &context,
            &["--shutdown-grace", "10s", "--max-calls-per-client", "0"],
            &[("TOOLSMITH_MAX_CONCURRENT", &max_concurrent)],
        )
        .await;
        let (legacy_session, _legacy_events) = server.connect(None, legacy()).await;
        let (modern_session, _modern_events) = server.connect(None, modern()).await;
        let calls: Vec<_> = (0..SHUTDOWN_CALLS)
            .map(|index| {
                let peer = if index % 2 == 0 {
                    legacy_session.peer().clone()
                } else {
                    modern_session.peer().clone()
                };
                tokio::spawn(
                    async move { peer.call_tool(call("custom_tool_second", json!({}))).await },
                )
            })
            .collect();
        let deadline = Instant::now() + PATIENCE;
        while std::fs::read_to_string(&started).map_or(0, |text| text.lines().count())
            < SHUTDOWN_CALLS
        {
            assert!(
                Instant::now() < deadline,
                "round {round}: not every call started: {}",
                server.log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let pid = i32::try_from(server.child.id()).unwrap();
        // SAFETY: kill(2) on the server this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        for (index, call) in calls.into_iter().enumerate() {
            let answer = tokio::time::timeout(PATIENCE, call)
                .await
                .unwrap_or_else(|_| panic!("round {round}: call {index} never answered"))
                .unwrap();
            let result = answer.unwrap_or_else(|error| {
                panic!(
                    "round {round}: call {index} failed: {error}\n{}",
                    server.log()
                )
            });
            assert_eq!(text(&result), "finished", "round {round}: call {index}");
        }
        let (status, log) = server.terminate().await;
        assert_eq!(status.code(), Some(0), "round {round}: {log}");
        assert!(!log.contains("killed="), "round {round}: {log}");
    }
}

/// Raises this test process's open-file limit to `wanted` (within the hard limit), for the
/// floods below: they open their connections from the test process itself.
fn raise_own_descriptor_limit(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit), 0);
        limit.rlim_cur = limit.rlim_cur.max(wanted.min(limit.rlim_max));
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit), 0);
    }
}

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap()
}

/// A TCP connection to `server` from the loopback address `127.0.0.<last>`, so that a flood
/// comes from clients other than the well-behaved one (127.0.0.1); `None` if refused.
async fn connect_from(last: u8, server: std::net::SocketAddr) -> Option<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, last], 0)))
        .unwrap();
    socket.connect(server).await.ok()
}

/// The `Mcp-Session-Id` of a response head.
fn session_id(head: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    })
}

/// Initializes a legacy session on `stream` (`Connection: close`) and returns its id; `None`
/// when the server closed the connection instead (over a connection bound).
async fn initialize_on(mut stream: tokio::net::TcpStream, authority: &str) -> Option<String> {
    let request = format!(
        "POST /mcp HTTP/1.1\r\nConnection: close\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{INITIALIZE}",
        INITIALIZE.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut response))
        .await
        .ok()?
        .ok()?;
    let response = String::from_utf8_lossy(&response);
    session_id(response.split_once("\r\n\r\n")?.0)
}

/// The well-behaved client is answered within a second, and sees the whole catalog.
async fn answered_at_once(session: &Session, expected: &[String], when: &str) {
    let started = Instant::now();
    let tools = tokio::time::timeout(PATIENCE, session.list_all_tools())
        .await
        .unwrap_or_else(|_| panic!("{when}: never answered"))
        .unwrap_or_else(|error| panic!("{when}: {error}"));
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(1), "{when}: {elapsed:?}");
    let names: Vec<String> = tools.iter().map(|tool| tool.name.to_string()).collect();
    assert_eq!(names, expected, "{when}");
}

/// Issue 24 (findings 11, 12; acceptance 7): 2 000 idle and trickling connections (a lying
/// `Content-Length` among them), 10 000 abandoned legacy sessions and 100 SSE streams of one
/// client, all with the server's default bounds, leave a well-behaved client answered within a
/// second, the server's memory bounded and its catalog intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_floods_leave_a_good_client_answered_and_the_catalog_intact() {
    raise_own_descriptor_limit(8192);
    let context = TestContext::new();
    fixtures(&context);
    let server = Server::start(&context, &[], &[]).await;
    let address: std::net::SocketAddr = server.authority.parse().unwrap();
    let (good, _events) = server.connect(None, legacy()).await;
    let expected: Vec<String> = good
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert!(expected.len() > 2, "{expected:?}");
    let pid = server.child.id();
    let rss_before = rss_kib(pid);
    let flood_started = Instant::now();

    // 2 000 connections from 20 addresses: half say nothing, half promise a body that never
    // comes.
    let mut held = Vec::new();
    for index in 0..2000_u16 {
        let last = 2 + u8::try_from(index / 100).unwrap();
        if let Some(mut stream) = connect_from(last, address).await {
            if index % 2 == 1 {
                let head = format!(
                    "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{{",
                    server.authority
                );
                let _ignored = stream.write_all(head.as_bytes()).await;
            }
            held.push(stream);
        }
    }
    answered_at_once(&good, &expected, "after 2 000 connections").await;

    // 10 000 legacy sessions, initialized and abandoned, from one address.
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let authority = server.authority.clone();
            tokio::spawn(async move {
                let mut created = 0;
                for _ in 0..625 {
                    if let Some(stream) = connect_from(40, address).await
                        && initialize_on(stream, &authority).await.is_some()
                    {
                        created += 1;
                    }
                }
                created
            })
        })
        .collect();
    let mut created = 0;
    for worker in workers {
        created += worker.await.unwrap();
    }
    assert_eq!(created, 10_000, "sessions initialized");
    answered_at_once(&good, &expected, "after 10 000 sessions").await;

    // 100 SSE streams of one client: each a session of its own and its GET stream.
    let mut streams = Vec::new();
    for _ in 0..100 {
        let Some(stream) = connect_from(41, address).await else {
            continue;
        };
        let Some(id) = initialize_on(stream, &server.authority).await else {
            continue;
        };
        let Some(mut stream) = connect_from(41, address).await else {
            continue;
        };
        let request = format!(
            "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n",
            server.authority
        );
        let _ignored = stream.write_all(request.as_bytes()).await;
        streams.push(stream);
    }
    answered_at_once(&good, &expected, "with 100 streams open").await;
    let flood_time = flood_started.elapsed();

    let grown = rss_kib(pid).saturating_sub(rss_before);
    assert!(
        grown < 96 * 1024,
        "the server grew by {grown} KiB in the floods ({flood_time:?})"
    );
    drop(held);
    drop(streams);
    let hello = good
        .call_tool(call("custom_tool_hello", json!({"name": "Ada"})))
        .await
        .unwrap();
    assert_eq!(text(&hello), "Hello, Ada!");
    let ready = server.request("GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200, "{ready:?}");
    good.cancel().await.unwrap();
}

/// One `GET path` on a kept-alive connection: the status and the body.
async fn get_on(stream: &mut tokio::net::TcpStream, authority: &str, path: &str) -> (u16, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buffer = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = String::from_utf8_lossy(&buffer).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
                return (status, body.to_owned());
            }
        }
        assert!(Instant::now() < deadline, "no whole response: {text:?}");
        let mut chunk = [0_u8; 4096];
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(read > 0, "the connection closed: {text:?}");
        buffer.extend_from_slice(&chunk[..read]);
    }
}

/// Sets the soft open-file limit of process `pid`; returns the limit it had.
fn set_descriptor_limit(pid: u32, soft: u64) -> libc::rlimit {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit with valid pointers, on the server this test started.
    unsafe {
        assert_eq!(
            libc::prlimit(
                i32::try_from(pid).unwrap(),
                libc::RLIMIT_NOFILE,
                std::ptr::null(),
                &raw mut old
            ),
            0
        );
        let new = libc::rlimit {
            rlim_cur: soft,
            rlim_max: old.rlim_max,
        };
        assert_eq!(
            libc::prlimit(
                i32::try_from(pid).unwrap(),
                libc::RLIMIT_NOFILE,
                &raw const new,
                std::ptr::null_mut()
            ),
            0
        );
    }
    old
}

/// Issue 24 (finding 11, acceptance 7): a rescan that cannot open the tool directories (no
/// descriptor left: the test cuts the server's open-file limit to the descriptors it holds)
/// keeps the last good catalog, `/readyz` says so with 503, and the rescan is tried again
/// until it works, with the new tool and every old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_a_failed_rescan_keeps_the_catalog_and_readyz_says_so() {
    let context = TestContext::new();
    fixtures(&context);
    let server = Server::start(&context, &[], &[]).await;
    let (session, _events) = server.connect(None, legacy()).await;
    let before: Vec<String> = session
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    let mut kept = tokio::net::TcpStream::connect(&server.authority)
        .await
        .unwrap();
    assert_eq!(get_on(&mut kept, &server.authority, "/readyz").await.0, 200);
    let pid = server.child.id();
    // Every new descriptor would be numbered at least the lowest free one: none can open.
    let open: std::collections::HashSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let lowest_free = (0..).find(|fd| !open.contains(fd)).unwrap();
    let old = set_descriptor_limit(pid, lowest_free);
    context.tool(
        "later",
        &shell_tool("later", r#"{"type": "object"}"#, "echo later"),
    );
    let deadline = Instant::now() + PATIENCE;
    while !server
        .log()
        .contains("a rescan of the tool directories failed")
    {
        assert!(
            Instant::now() < deadline,
            "no failed rescan: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = get_on(&mut kept, &server.authority, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("the last good catalog is served"), "{body}");
    set_descriptor_limit(pid, old.rlim_cur);
    // Tried again until it works: ready, with every tool, the new one too.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, _) = get_on(&mut kept, &server.authority, "/readyz").await;
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never ready again: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after: Vec<String> = session
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    let mut expected = before.clone();
    expected.push("custom_tool_later".to_owned());
    expected.sort();
    let mut sorted = after.clone();
    sorted.sort();
    assert_eq!(sorted, expected, "{after:?}");
    session.cancel().await.unwrap();
}

/// `toolsmith ARGS` run by `unshare --pid --fork --mount-proc` in a PID namespace of its own
/// (with the context's environment), or `None` where this machine cannot make one.
fn in_own_pid_namespace(context: &TestContext, args: &[&str]) -> Option<std::process::Command> {
    let toolsmith = context.with_tools();
    #[expect(
        clippy::disallowed_methods,
        reason = "unshare starts the binary under test in a PID namespace of its own"
    )]
    let probe = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .status();
    if !probe.is_ok_and(|status| status.success()) {
        return None;
    }
    #[expect(
        clippy::disallowed_methods,
        reason = "unshare starts the binary under test in a PID namespace of its own"
    )]
    let mut command = std::process::Command::new("unshare");
    command
        .env_clear()
        .envs(
            toolsmith
                .get_envs()
                .filter_map(|(key, value)| Some((key, value?))),
        )
        .current_dir(toolsmith.get_current_dir().unwrap())
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(toolsmith.get_program())
        .args(toolsmith.get_args())
        .args(args);
    Some(command)
}

/// The cgroup directories of the toolsmith process `pid` (`toolsmith-<pid>-*` and their
/// leaves) below the test's cgroup, in every hierarchy.
fn cgroup_dirs_of(pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("toolsmith-{pid}-");
    crate::leaks::cgroup_dirs()
        .into_iter()
        .filter(|dir| {
            dir.components()
                .any(|part| part.as_os_str().to_string_lossy().starts_with(&prefix))
        })
        .collect()
}

/// Issue 22 finding 10, acceptance 4: two servers and a third toolsmith run in a PID namespace
/// of its own share a cgroup parent. The third one's sweep of stale cgroups judged the
/// servers' directories by `/proc/<pid>` in its own namespace, found nobody and removed them:
/// every later call of theirs failed. Both must keep answering, and a server whose cgroup is
/// removed by hand must recover on its next call; a directory of a provably dead owner still
/// goes.
#[expect(
    clippy::print_stderr,
    reason = "a machine without the mechanism must be announced loudly"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_servers_keep_their_cgroups_against_a_toolsmith_in_another_pid_namespace() {
    let context = TestContext::new();
    fixtures(&context);
    let Some(mut third) = in_own_pid_namespace(
        &context,
        &["run", "hello", "--input", r#"{"name": "third"}"#],
    ) else {
        eprintln!("WARNING: unshare --pid cannot run here: the cross-namespace sweep is UNTESTED");
        return;
    };
    let servers = [
        Server::start(&context, &[], &[]).await,
        Server::start(&context, &[], &[]).await,
    ];
    let mut sessions = Vec::new();
    for server in &servers {
        sessions.push(server.connect(None, legacy()).await.0);
    }
    let hello = async |session: &Session, name: &str| {
        let result = session
            .call_tool(call("custom_tool_hello", json!({"name": name})))
            .await
            .unwrap_or_else(|error| panic!("a bare error instead of an envelope: {error:?}"));
        assert_eq!(result.is_error, Some(false), "{result:?}");
        assert_eq!(text(&result), format!("Hello, {name}!"));
        result
    };
    let backend =
        meta(&hello(&sessions[0], "first").await, "toolsmith/metadata")["backend"].clone();
    if backend != json!("cgroup") {
        eprintln!(
            "WARNING: the servers run on the {backend} backend, not cgroups: the sweep is UNTESTED"
        );
        return;
    }
    hello(&sessions[1], "second").await;
    let server_dirs = [servers[0].child.id(), servers[1].child.id()].map(cgroup_dirs_of);
    assert!(
        server_dirs.iter().all(|dirs| !dirs.is_empty()),
        "{server_dirs:?}"
    );
    // A directory whose owner is provably dead (a pid above any pid_max, and no lease).
    let v2_parent = server_dirs[0]
        .iter()
        .find(|dir| {
            dir.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("toolsmith-"))
                && dir.join("cgroup.kill").exists()
        })
        .and_then(|dir| dir.parent())
        .unwrap()
        .to_path_buf();
    let stale = v2_parent.join("toolsmith-4294967295-0");
    std::fs::create_dir(&stale).unwrap();

    let output = third.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    for (index, session) in sessions.iter().enumerate() {
        hello(session, &format!("after the sweep {index}")).await;
    }
    assert!(
        !stale.exists(),
        "the stale directory of a dead owner is still there"
    );

    // By hand: every process killed, every directory of the first server removed.
    // The server's keeper thread may be retiring a leaf or making one meanwhile, and a leaf
    // is busy for a few milliseconds after its last process died: until none is left.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut dirs = cgroup_dirs_of(servers[0].child.id());
        if dirs.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "cannot remove {dirs:?}");
        dirs.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
        for dir in &dirs {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            let _ = std::fs::remove_dir(dir);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    hello(&sessions[0], "recovered").await;
    hello(&sessions[1], "untouched").await;
    assert!(
        !cgroup_dirs_of(servers[0].child.id()).is_empty(),
        "made again"
    );
}

/// Issue 22 finding 10, another way: two toolsmiths, each in a PID namespace of its own, have
/// the same pid (1) at once, so the same directory name `toolsmith-1-0`. The second found the
/// name taken and ran without cgroups (or, judging `/proc/1` in its namespace, took the
/// other's directory for its own). Each must run in a cgroup of its own.
#[expect(
    clippy::print_stderr,
    reason = "a machine without the mechanism must be announced loudly"
)]
#[test]
fn two_toolsmiths_with_the_same_pid_in_other_pid_namespaces_each_get_their_cgroups() {
    let context = TestContext::new();
    context.tool(
        "nap",
        &shell_tool(
            "nap",
            r#"{"type": "object"}"#,
            r#"sleep 1; echo '{"slept": true}'"#,
        ),
    );
    let args = ["run", "nap", "--input", "{}"];
    let Some(mut first) = in_own_pid_namespace(&context, &args) else {
        eprintln!(
            "WARNING: unshare --pid cannot run here: cgroup names across PID namespaces are UNTESTED"
        );
        return;
    };
    let mut second = in_own_pid_namespace(&context, &args).unwrap();
    let runs = [&mut first, &mut second].map(|command| {
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    });
    for run in runs {
        let output = run.wait_with_output().unwrap();
        assert!(output.status.success(), "{output:?}");
        let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
        let backend = &envelope["metadata"]["backend"];
        if backend != "cgroup" && std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none() {
            // Only a failure when the host has cgroups for this test's own toolsmith.
            let own = context
                .with_tools()
                .args(["run", "nap", "--input", "{}"])
                .output()
                .unwrap();
            let own: Value = serde_json::from_slice(&own.stdout).unwrap();
            if own["metadata"]["backend"] != "cgroup" {
                eprintln!(
                    "WARNING: no cgroup backend here: cgroup names across PID namespaces are UNTESTED"
                );
                return;
            }
        }
        assert_eq!(
            backend,
            "cgroup",
            "{envelope:#}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Issue 22, finding 3: the token file is toolsmith's own state. Kept inside the project, a
/// `filesystem = "project"` tool could rewrite it and choose the next server's token. Held: the
/// token file (and the TLS certificate and key) are protected paths of every call `serve
/// --http` makes; the tool still writes elsewhere in the project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_the_token_file_in_the_project_is_read_only_to_tools() {
    let context = TestContext::new();
    context.user_config("[sandbox]\nfilesystem = \"project\"\n");
    let token = new_token(&context);
    let file = context.project.join("secrets/token");
    let other = context.project.join("secrets/notes");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, format!("{token}\n")).unwrap();
    std::fs::write(&other, "").unwrap();
    install(
        &context,
        "rewrite",
        &shell_tool(
            "rewrite",
            r#"{"type": "object"}"#,
            &format!(
                "if (echo attacker-chosen-token-0123456789abcdef0123456789 > '{}') 2>/dev/null; then echo ESCAPED; else echo held; fi; echo written >> '{}' && echo wrote-project",
                file.display(),
                other.display()
            ),
        ),
    );
    let mut server = Server::start(&context, &["--token-file", file.to_str().unwrap()], &[]).await;
    let (session, _events) = server.connect(Some(&token), legacy()).await;
    let result = session
        .call_tool(call("custom_tool_rewrite", json!({})))
        .await
        .unwrap();
    let shown = text(&result);
    assert!(
        shown.contains("held") && shown.contains("wrote-project"),
        "{shown}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{token}\n")
    );
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "written\n");
    session.cancel().await.unwrap();
    server.terminate().await;
}
