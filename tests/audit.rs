//! The audit log: one JSON line per call, off by default, and what happens when it cannot be written.

use serde_json::Value;

use crate::context::{TestContext, shell_tool};

const EMPTY_SCHEMA: &str = r#"{"type": "object", "properties": {"a": {}, "b": {}}}"#;

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn one_line_per_call_with_a_stable_digest() {
    let context = TestContext::new();
    context.tool("echo_ok", &shell_tool("echo_ok", EMPTY_SCHEMA, "echo ok"));
    context.tool("crash", &shell_tool("crash", EMPTY_SCHEMA, "exit 3"));
    // The path is relative to the config file's directory, not the current one.
    context.project_file(
        ".toolsmith/config.toml",
        "[audit]\npath = \"audit.jsonl\"\n",
    );
    let log = context.project.join(".toolsmith/audit.jsonl");
    let run = |name: &str, input: &str| {
        context
            .with_tools()
            .args(["run", name, "--input", input])
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(run("echo_ok", r#"{"a": 1, "b": [true, null]}"#), Some(0));
    assert_eq!(run("crash", r#"{"b": [true, null], "a": 1}"#), Some(1));
    let lines = lines(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let keys: Vec<&str> = lines[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "time",
            "tool",
            "arguments_sha256",
            "outcome",
            "duration_ms",
            "exit_code",
            "signal",
            "backend",
            "call_id"
        ]
    );
    // Issue 26: the id the tool received as TOOLSMITH_CALL_ID, one per call.
    assert_eq!(lines[0]["call_id"].as_str().map(str::len), Some(36));
    assert_ne!(lines[0]["call_id"], lines[1]["call_id"]);
    assert_eq!(lines[0]["tool"], "echo_ok");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(lines[0]["exit_code"], 0);
    assert_eq!(lines[1]["tool"], "crash");
    assert_eq!(lines[1]["outcome"], "TOOL_CRASHED");
    assert_eq!(lines[1]["exit_code"], 3);
    assert_eq!(lines[0]["arguments_sha256"], lines[1]["arguments_sha256"]);
    assert_eq!(lines[0]["arguments_sha256"].as_str().unwrap().len(), 64);
    let time = lines[0]["time"].as_str().unwrap();
    assert!(
        time.ends_with('Z') && time.len() == "2025-01-02T03:04:05.678Z".len(),
        "{time}"
    );
    assert!(lines[0]["duration_ms"].is_u64());
}

#[test]
fn off_by_default() {
    let context = TestContext::new();
    context.tool("echo_ok", &shell_tool("echo_ok", EMPTY_SCHEMA, "echo ok"));
    let output = context
        .with_tools()
        .args(["run", "echo_ok"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let mut found = Vec::new();
    for entry in walk(&context.root) {
        if entry
            .extension()
            .is_some_and(|extension| extension == "jsonl")
        {
            found.push(entry);
        }
    }
    assert!(found.is_empty(), "{found:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            paths.extend(walk(&path));
        } else {
            paths.push(path);
        }
    }
    paths
}

#[test]
fn unwritable_log_stops_the_call_before_it_runs() {
    let context = TestContext::new();
    let marker = context.root.join("ran");
    context.tool(
        "writer",
        &shell_tool(
            "writer",
            EMPTY_SCHEMA,
            &format!("touch {}", marker.display()),
        ),
    );
    context.project_file(
        ".toolsmith/config.toml",
        "[audit]\npath = \"no/such/dir/audit.jsonl\"\n",
    );
    cli_snapshot!(context, context.with_tools().args(["run", "writer"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: cannot open audit log [TEMP]/project/.toolsmith/no/such/dir/audit.jsonl: No such file or directory (os error 2)
    ");
    assert!(!marker.exists());
}
