//! The MCP part of `cargo xtask bench`: one `tools/call` of a trivial tool through `toolsmith serve`, on stdio and over HTTP, against `Executor::run` of the same tool's `run` command, measured in the same run.
//!
//! The server is the release `toolsmith` binary, spoken to in raw JSON lines over its stdin and
//! stdout (legacy `initialize`, then sequential `tools/call` requests), and, as a second server,
//! `toolsmith serve --http 127.0.0.1:0` spoken to in raw HTTP/1.1 on one keep-alive connection
//! (stateless 2026-07-28 requests, each answered as an SSE stream, as a client gets it), so the
//! figures cover what a client pays: framing, argument validation, the executor run and the
//! result envelope. The direct run is the command the registry builds for the same call (`tool run`
//! with the arguments on stdin, in the sandbox the server gives the tool, prepared ahead as the
//! server does), on the same kind of runtime the server uses: the ratio is what serving over
//! MCP adds to a call. Both get
//! warm-ups and interleaved rounds, as the spawn table does.

use std::fs;
use std::io::{BufRead, BufReader, Lines, Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use toolsmith_executor::{Executor, Limits, filtered_env};
use toolsmith_registry::SandboxSettings;

use crate::CheckFailed;
use crate::bench::BenchSettings;
use crate::measure::{Stats, micros, render_table};

/// The tool's name on disk and in its description.
const TOOL: &str = "echo";

/// The tool's name as the server exposes it (the default prefix).
const EXPOSED_TOOL: &str = "custom_tool_echo";

/// What every call asks the tool to echo.
const MESSAGE: &str = "ping";

/// A Kodelet tool whose `run` echoes its arguments with shell builtins only, so that the one
/// process per call is the tool itself.
const SCRIPT: &str = r#"#!/bin/sh
case "$1" in
  description) printf '%s\n' '{"name": "echo", "description": "Echoes its arguments", "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}' ;;
  run) IFS= read -r line; printf '%s\n' "$line" ;;
esac
"#;

/// The two measured paths of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallPath {
    /// `Executor::run` of `echo run`, arguments on stdin.
    Direct,
    /// A `tools/call` through `toolsmith serve`, from the request's write to its response.
    Mcp,
    /// A `tools/call` through `toolsmith serve --http` on loopback, from the request's write
    /// to the end of its response.
    Http,
}

impl CallPath {
    const ALL: [CallPath; 3] = [CallPath::Direct, CallPath::Mcp, CallPath::Http];

    fn label(self) -> &'static str {
        match self {
            CallPath::Direct => "executor.run of `echo run`, same sandbox (baseline)",
            CallPath::Mcp => "MCP tools/call through toolsmith serve (stdio)",
            CallPath::Http => "MCP tools/call through toolsmith serve --http (loopback)",
        }
    }
}

/// The measured distributions, ready to render.
#[derive(Debug)]
pub(crate) struct McpReport {
    warmups: usize,
    rounds: usize,
    calls: usize,
    direct: Stats,
    mcp: Stats,
    http: Stats,
}

/// A temporary directory that is removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ignored = fs::remove_dir_all(&self.0);
    }
}

/// Builds the release `toolsmith` binary and returns its path: next to this (release) xtask
/// binary, in whatever target directory cargo uses (`CARGO_TARGET_DIR` included).
pub(crate) fn build_server(root: &Path) -> anyhow::Result<PathBuf> {
    let cargo = crate::cargo::program();
    eprintln!("bench: building the release toolsmith binary");
    let status = crate::cargo::command()
        .args([
            "build",
            "--release",
            "--quiet",
            "--package",
            "toolsmith",
            "--bin",
            "toolsmith",
        ])
        .current_dir(root)
        .status()
        .with_context(|| format!("could not start `{}`", cargo.to_string_lossy()))?;
    if !status.success() {
        return Err(CheckFailed(format!(
            "the release build of toolsmith exited with {status}"
        ))
        .into());
    }
    let xtask = std::env::current_exe().context("could not locate the xtask binary")?;
    let binary = xtask
        .parent()
        .context("the xtask binary has no parent directory")?
        .join("toolsmith");
    if !binary.is_file() {
        return Err(CheckFailed(format!(
            "no toolsmith binary at {} after the release build",
            binary.display()
        ))
        .into());
    }
    Ok(binary)
}

/// Keeps `executor`'s sandboxes prepared ahead while it lives.
struct KeepPrepared<'a>(&'a Executor);

impl KeepPrepared<'_> {
    fn on(executor: &Executor) -> KeepPrepared<'_> {
        executor.keep_prepared(true);
        KeepPrepared(executor)
    }
}

impl Drop for KeepPrepared<'_> {
    fn drop(&mut self) {
        self.0.keep_prepared(false);
    }
}

/// Writes the tool, starts the server, and measures both paths.
pub(crate) fn measure(
    runtime: &tokio::runtime::Runtime,
    executor: &Arc<Executor>,
    server_binary: &Path,
    settings: &BenchSettings,
) -> anyhow::Result<McpReport> {
    let scratch =
        Scratch(std::env::temp_dir().join(format!("toolsmith-bench-mcp-{}", std::process::id())));
    let tools = scratch.0.join("tools");
    let home = scratch.0.join("home");
    for dir in [&tools, &home] {
        fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    }
    let tool = tools.join(TOOL);
    fs::write(&tool, SCRIPT)
        .and_then(|()| fs::set_permissions(&tool, fs::Permissions::from_mode(0o755)))
        .with_context(|| format!("could not write the bench tool {}", tool.display()))?;

    let mut command = toolsmith_executor::Command::new(&tool, &scratch.0)
        .context("could not describe the direct run")?;
    command
        .arg("run".as_ref())
        .envs(filtered_env(&["PATH".to_owned()], &[]))
        .stdin(arguments().to_string().into_bytes())
        // The sandbox the server gives this tool (the default grant; the tool declares none),
        // so that the ratio is what MCP adds, not what the sandbox costs.
        .sandbox(SandboxSettings::unrestricted().to_executor(&scratch.0, &[]));
    // Prepared ahead, as the server runs its calls; restored when the measurement ends.
    let _prepared = KeepPrepared::on(executor);
    let limits = Limits::recommended();
    let direct_batch = |n_calls: usize, samples: &mut Vec<f64>| -> anyhow::Result<()> {
        runtime.block_on(async {
            for _ in 0..n_calls {
                let started = Instant::now();
                let result = executor.run(&command, &limits).await;
                let elapsed = started.elapsed();
                let outcome = result.context("executor.run of the bench tool failed")?;
                let stdout = outcome.stdout.text_lossy();
                if !outcome.success() || !stdout.contains(MESSAGE) {
                    return Err(CheckFailed(format!(
                        "the direct run of the bench tool did not succeed: termination {:?}, stdout {stdout:?}, stderr {:?}",
                        outcome.termination,
                        outcome.stderr.text_lossy(),
                    ))
                    .into());
                }
                samples.push(micros(elapsed));
            }
            Ok(())
        })
    };

    let n_calls = settings.calls_small_parent();
    let (warmups, rounds) = (settings.warmups(), settings.rounds());
    eprintln!("bench: MCP tools/call, {n_calls} calls per path in {rounds} rounds");
    let mut server = Server::start(server_binary, &scratch.0, &tools, &home)?;
    let mut http = HttpServer::start(server_binary, &scratch.0, &tools, &home)?;
    let mut discarded = Vec::new();
    direct_batch(warmups, &mut discarded)?;
    server.call_batch(warmups, &mut discarded)?;
    http.call_batch(warmups, &mut discarded)?;
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(n_calls); CallPath::ALL.len()];
    for round in 0..rounds {
        // Spread the remainder over the first rounds so the total is exactly `n_calls`.
        let calls_this_round = n_calls / rounds + usize::from(round < n_calls % rounds);
        for offset in 0..CallPath::ALL.len() {
            let path_idx = (round + offset) % CallPath::ALL.len();
            crate::measure::settle();
            match CallPath::ALL[path_idx] {
                CallPath::Direct => direct_batch(calls_this_round, &mut samples[path_idx])?,
                CallPath::Mcp => server.call_batch(calls_this_round, &mut samples[path_idx])?,
                CallPath::Http => http.call_batch(calls_this_round, &mut samples[path_idx])?,
            }
        }
    }
    server.close()?;
    http.close()?;
    Ok(McpReport {
        warmups,
        rounds,
        calls: n_calls,
        direct: Stats::of(&samples[0]),
        mcp: Stats::of(&samples[1]),
        http: Stats::of(&samples[2]),
    })
}

fn arguments() -> Value {
    json!({"text": MESSAGE})
}

/// A running `toolsmith serve`, spoken to in JSON lines.
struct Server {
    child: Child,
    /// `None` once closed, which ends the server.
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// Where the server's stderr goes, quoted when something fails.
    log: PathBuf,
}

impl Server {
    /// Starts the server with a scrubbed environment and completes the legacy handshake.
    fn start(binary: &Path, cwd: &Path, tools: &Path, home: &Path) -> anyhow::Result<Server> {
        let log = cwd.join("serve.log");
        let stderr = fs::File::create(&log)
            .with_context(|| format!("could not create {}", log.display()))?;
        #[expect(
            clippy::disallowed_methods,
            reason = "the server under measurement is a separate program, started as a client would"
        )]
        let mut child = std::process::Command::new(binary)
            .arg("--tools-dir")
            .arg(tools)
            .arg("serve")
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("could not start {}", binary.display()))?;
        let stdin = child.stdin.take().context("the server has no stdin pipe")?;
        let stdout = child
            .stdout
            .take()
            .context("the server has no stdout pipe")?;
        let mut server = Server {
            child,
            stdin: Some(stdin),
            lines: BufReader::new(stdout).lines(),
            next_id: 1,
            log,
        };
        let initialized = server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "xtask-bench", "version": "1"}}),
        )?;
        if initialized.get("result").is_none() {
            return Err(server.failure(&format!("initialize was refused: {initialized}")));
        }
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(server)
    }

    fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .context("the server's stdin is already closed")?;
        writeln!(stdin, "{message}")
            .and_then(|()| stdin.flush())
            .context("could not write to the server's stdin")
    }

    /// Sends a request and returns its response, skipping notifications and other lines.
    fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let Some(line) = self.lines.next() else {
                return Err(self.failure(&format!(
                    "the server closed stdout before answering {method} {id}"
                )));
            };
            let line = line.context("could not read the server's stdout")?;
            let message: Value = serde_json::from_str(&line)
                .with_context(|| format!("the server wrote a line that is not JSON: {line:?}"))?;
            if message.get("id") == Some(&json!(id)) {
                return Ok(message);
            }
        }
    }

    /// Makes `n_calls` sequential calls, appending each one's round trip in µs to `samples`.
    fn call_batch(&mut self, n_calls: usize, samples: &mut Vec<f64>) -> anyhow::Result<()> {
        let params = json!({"name": EXPOSED_TOOL, "arguments": arguments()});
        for _ in 0..n_calls {
            let started = Instant::now();
            let response = self.request("tools/call", params.clone())?;
            let elapsed = started.elapsed();
            let result = &response["result"];
            let text = result["content"][0]["text"].as_str().unwrap_or("");
            if result["isError"] != json!(false) || !text.contains(MESSAGE) {
                return Err(self.failure(&format!("a tools/call did not succeed: {response}")));
            }
            samples.push(micros(elapsed));
        }
        Ok(())
    }

    /// Closes stdin, which ends the server, and checks that it exited cleanly.
    fn close(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        let status = self.child.wait().context("could not wait for the server")?;
        if status.success() {
            Ok(())
        } else {
            Err(CheckFailed(format!(
                "toolsmith serve exited with {status}; its stderr: {}",
                fs::read_to_string(&self.log).unwrap_or_default()
            ))
            .into())
        }
    }

    /// A failed check, with the server's stderr so far.
    fn failure(&self, what: &str) -> anyhow::Error {
        CheckFailed(format!(
            "{what}; the server's stderr: {}",
            fs::read_to_string(&self.log).unwrap_or_default()
        ))
        .into()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // After `close` the server has exited and this does nothing; on an error path, a
        // server that is not answering must not outlive the bench.
        let _ignored = self.child.kill();
        let _ignored = self.child.wait();
    }
}

/// How long the HTTP server may take to say where it listens and to be ready.
const HTTP_START_PATIENCE: Duration = Duration::from_secs(30);

/// The protocol revision of the HTTP requests: stateless, no session.
const HTTP_PROTOCOL: &str = "2026-07-28";

/// A running `toolsmith serve --http 127.0.0.1:0`, spoken to in HTTP/1.1 on one keep-alive
/// connection.
struct HttpServer {
    child: Child,
    /// `127.0.0.1:PORT`, as the server printed it.
    authority: String,
    /// The keep-alive connection of the calls, once the server is ready.
    connection: Option<BufReader<TcpStream>>,
    next_id: u64,
    /// Where the server's stderr goes, quoted when something fails.
    log: PathBuf,
}

/// One HTTP response: the status and the body, unchunked.
struct HttpResponse {
    status: u16,
    body: Vec<u8>,
}

impl HttpServer {
    /// Starts the server with a scrubbed environment, waits until `/readyz` says ready, and
    /// opens the connection the calls go over.
    fn start(binary: &Path, cwd: &Path, tools: &Path, home: &Path) -> anyhow::Result<HttpServer> {
        let log = cwd.join("serve-http.log");
        let stderr = fs::File::create(&log)
            .with_context(|| format!("could not create {}", log.display()))?;
        #[expect(
            clippy::disallowed_methods,
            reason = "the server under measurement is a separate program, started as an operator would"
        )]
        let child = std::process::Command::new(binary)
            .arg("--tools-dir")
            .arg(tools)
            // One client calling as fast as it can is over the default per-client rate.
            .args(["serve", "--http", "127.0.0.1:0", "--max-call-rate", "0"])
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("could not start {}", binary.display()))?;
        let mut server = HttpServer {
            child,
            authority: String::new(),
            connection: None,
            next_id: 1,
            log,
        };
        let deadline = Instant::now() + HTTP_START_PATIENCE;
        server.authority = loop {
            let text = fs::read_to_string(&server.log).unwrap_or_default();
            if let Some(authority) = text.lines().find_map(|line| {
                line.strip_prefix("toolsmith: serving MCP on http://")?
                    .split_whitespace()
                    .next()?
                    .strip_suffix("/mcp")
            }) {
                break authority.to_owned();
            }
            if Instant::now() > deadline || server.child.try_wait()?.is_some() {
                return Err(server.failure("the HTTP server never said where it listens"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        loop {
            let mut probe = server.connect()?;
            write!(
                probe.get_mut(),
                "GET /readyz HTTP/1.1\r\nHost: {}\r\n\r\n",
                server.authority
            )
            .context("could not ask the HTTP server whether it is ready")?;
            if read_response(&mut probe)?.status == 200 {
                break;
            }
            if Instant::now() > deadline {
                return Err(server.failure("the HTTP server never became ready"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        server.connection = Some(server.connect()?);
        Ok(server)
    }

    fn connect(&self) -> anyhow::Result<BufReader<TcpStream>> {
        let stream = TcpStream::connect(&self.authority)
            .with_context(|| format!("could not connect to {}", self.authority))?;
        stream
            .set_nodelay(true)
            .context("could not set TCP_NODELAY")?;
        stream
            .set_read_timeout(Some(HTTP_START_PATIENCE))
            .context("could not set a read timeout")?;
        Ok(BufReader::new(stream))
    }

    /// Makes `n_calls` sequential calls, appending each one's round trip in µs to `samples`.
    fn call_batch(&mut self, n_calls: usize, samples: &mut Vec<f64>) -> anyhow::Result<()> {
        for _ in 0..n_calls {
            let id = self.next_id;
            self.next_id += 1;
            let body = json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": "tools/call",
                "params": {
                    "name": EXPOSED_TOOL,
                    "arguments": arguments(),
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": HTTP_PROTOCOL,
                        "io.modelcontextprotocol/clientInfo": {"name": "xtask-bench", "version": "1"},
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                },
            })
            .to_string();
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {HTTP_PROTOCOL}\r\n\
                 Mcp-Method: tools/call\r\nMcp-Name: {EXPOSED_TOOL}\r\nContent-Length: {}\r\n\r\n{body}",
                self.authority,
                body.len()
            );
            let connection = self
                .connection
                .as_mut()
                .context("the HTTP server is not ready")?;
            let started = Instant::now();
            connection
                .get_mut()
                .write_all(request.as_bytes())
                .context("could not send a request to the HTTP server")?;
            let response = read_response(connection)?;
            let elapsed = started.elapsed();
            let text = String::from_utf8_lossy(&response.body);
            // The answer is one SSE event whose data is the JSON-RPC response.
            let answer: Option<Value> = text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str(data.trim_start()).ok())
                .find(|message: &Value| message.get("id") == Some(&json!(id)));
            let succeeded = answer.as_ref().is_some_and(|answer| {
                answer["result"]["isError"] == json!(false)
                    && answer["result"]["content"][0]["text"]
                        .as_str()
                        .is_some_and(|text| text.contains(MESSAGE))
            });
            if response.status != 200 || !succeeded {
                return Err(self.failure(&format!(
                    "a tools/call over HTTP did not succeed: status {}, body {text:?}",
                    response.status
                )));
            }
            samples.push(micros(elapsed));
        }
        Ok(())
    }

    /// Sends SIGTERM, which ends the server gracefully, and checks that it exited cleanly.
    fn close(mut self) -> anyhow::Result<()> {
        let pid =
            libc::pid_t::try_from(self.child.id()).context("the server's pid is too large")?;
        // SAFETY: kill(2) on the server this bench started and has not reaped.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return Err(std::io::Error::last_os_error()).context("could not stop the HTTP server");
        }
        let status = self
            .child
            .wait()
            .context("could not wait for the HTTP server")?;
        if status.success() {
            Ok(())
        } else {
            Err(self.failure(&format!("toolsmith serve --http exited with {status}")))
        }
    }

    /// A failed check, with the server's stderr so far.
    fn failure(&self, what: &str) -> anyhow::Error {
        CheckFailed(format!(
            "{what}; the server's stderr: {}",
            fs::read_to_string(&self.log).unwrap_or_default()
        ))
        .into()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        // After `close` the server has exited and this does nothing; on an error path, a
        // server that is not answering must not outlive the bench.
        let _ignored = self.child.kill();
        let _ignored = self.child.wait();
    }
}

/// Reads one HTTP/1.1 response: a `Content-Length` or chunked body, read to its end.
fn read_response(connection: &mut BufReader<TcpStream>) -> anyhow::Result<HttpResponse> {
    let mut line = String::new();
    let read_line = |line: &mut String, connection: &mut BufReader<TcpStream>| {
        line.clear();
        match connection.read_line(line) {
            Ok(0) => Err(anyhow::anyhow!("the HTTP server closed the connection")),
            Ok(_) => Ok(()),
            Err(error) => Err(error).context("could not read from the HTTP server"),
        }
    };
    read_line(&mut line, connection)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("not an HTTP status line: {line:?}"))?;
    let mut content_length = None;
    let mut chunked = false;
    loop {
        read_line(&mut line, connection)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                content_length = Some(value.parse::<usize>().context("a bad Content-Length")?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            read_line(&mut line, connection)?;
            let size = usize::from_str_radix(line.trim_end().split(';').next().unwrap_or(""), 16)
                .with_context(|| format!("a bad chunk size: {line:?}"))?;
            if size == 0 {
                // The empty line after the last chunk (no trailers are sent).
                read_line(&mut line, connection)?;
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            connection
                .read_exact(&mut body[start..])
                .context("could not read a chunk")?;
            read_line(&mut line, connection)?;
        }
    } else if let Some(length) = content_length {
        body.resize(length, 0);
        connection
            .read_exact(&mut body)
            .context("could not read a response body")?;
    }
    Ok(HttpResponse { status, body })
}

impl McpReport {
    /// The section of the bench report, in the spawn table's style.
    pub(crate) fn render(&self) -> String {
        let mut report = format!(
            "toolsmith MCP bench: one tools/call of a `#!/bin/sh` Kodelet tool that echoes its arguments, µs\n\
             servers: release `toolsmith serve`, legacy session over stdin/stdout; release `toolsmith serve --http` on 127.0.0.1, stateless 2026-07-28 requests on one keep-alive HTTP/1.1 connection, SSE responses\n\
             one request at a time, timed from the request's write to the end of its response; targets: stdio <= 1.15, HTTP <= 1.30\n\
             method: {} warm-ups per path, then {} interleaved rounds; ratio = median / median of the direct run\n\n",
            self.warmups, self.rounds
        );
        let header: Vec<String> = ["path", "calls", "median µs", "p90 µs", "p99 µs", "ratio"]
            .iter()
            .map(|cell| (*cell).to_owned())
            .collect();
        let row = |path: CallPath, stats: &Stats| {
            [
                path.label().to_owned(),
                self.calls.to_string(),
                format!("{:.1}", stats.median),
                format!("{:.1}", stats.p90),
                format!("{:.1}", stats.p99),
                format!("{:.2}", stats.median / self.direct.median),
            ]
        };
        let rows = [
            row(CallPath::Direct, &self.direct),
            row(CallPath::Mcp, &self.mcp),
            row(CallPath::Http, &self.http),
        ];
        report.push_str(&render_table(&header, &rows, 1));
        report.push_str(&format!(
            "\nMCP overhead per call: median {:.1} µs on stdio, {:.1} µs over HTTP\n",
            self.mcp.median - self.direct.median,
            self.http.median - self.direct.median
        ));
        report
    }
}
