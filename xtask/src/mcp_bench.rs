//! The MCP part of `cargo xtask bench`: one `tools/call` of a trivial tool through `toolsmith serve`, against `Executor::run` of the same tool's `run` command, measured in the same run.
//!
//! The server is the release `toolsmith` binary, spoken to in raw JSON lines over its stdin and
//! stdout (legacy `initialize`, then sequential `tools/call` requests), so the figure covers
//! what a client pays: JSON-RPC framing, argument validation, the executor run and the result
//! envelope. The direct run is the command the registry builds for the same call (`tool run`
//! with the arguments on stdin, in the sandbox the server gives the tool, prepared ahead as the
//! server does), on the same kind of runtime the server uses: the ratio is what serving over
//! MCP adds to a call. Both get
//! warm-ups and interleaved rounds, as the spawn table does.

use std::fs;
use std::io::{BufRead, BufReader, Lines, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use serde_json::{Value, json};
use toolsmith_executor::{Executor, Limits, filtered_env};
use toolsmith_registry::SandboxSettings;

use crate::CheckFailed;
use crate::bench::{BenchSettings, Stats, micros, render_table};

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
}

impl CallPath {
    const ALL: [CallPath; 2] = [CallPath::Direct, CallPath::Mcp];

    fn label(self) -> &'static str {
        match self {
            CallPath::Direct => "executor.run of `echo run`, same sandbox (baseline)",
            CallPath::Mcp => "MCP tools/call through toolsmith serve",
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
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("bench: building the release toolsmith binary");
    #[expect(
        clippy::disallowed_methods,
        reason = "xtask drives cargo; it runs no tools"
    )]
    let status = std::process::Command::new(&cargo)
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
    let mut discarded = Vec::new();
    direct_batch(warmups, &mut discarded)?;
    server.call_batch(warmups, &mut discarded)?;
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(n_calls); CallPath::ALL.len()];
    for round in 0..rounds {
        // Spread the remainder over the first rounds so the total is exactly `n_calls`.
        let calls_this_round = n_calls / rounds + usize::from(round < n_calls % rounds);
        for offset in 0..CallPath::ALL.len() {
            let path_idx = (round + offset) % CallPath::ALL.len();
            match CallPath::ALL[path_idx] {
                CallPath::Direct => direct_batch(calls_this_round, &mut samples[path_idx])?,
                CallPath::Mcp => server.call_batch(calls_this_round, &mut samples[path_idx])?,
            }
        }
    }
    server.close()?;
    Ok(McpReport {
        warmups,
        rounds,
        calls: n_calls,
        direct: Stats::of(&samples[0]),
        mcp: Stats::of(&samples[1]),
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

impl McpReport {
    /// The section of the bench report, in the spawn table's style.
    pub(crate) fn render(&self) -> String {
        let mut report = format!(
            "toolsmith MCP bench: one tools/call of a `#!/bin/sh` Kodelet tool that echoes its arguments, µs\n\
             server: release `toolsmith serve`, legacy session over stdin/stdout, one request at a time, timed from write to response\n\
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
        ];
        report.push_str(&render_table(&header, &rows, 1));
        report.push_str(&format!(
            "\nMCP overhead per call: median {:.1} µs\n",
            self.mcp.median - self.direct.median
        ));
        report
    }
}
