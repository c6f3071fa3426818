//! Invoking tools through a real executor: the paths that need a process,
//! such as a tool that changed on disk between discovery and the call.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolsmith_executor::{BackendChoice, Executor, ExecutorConfig, Limits, filtered_env};
use toolsmith_registry::{Policy, RunConfig, SandboxSettings, Toolsmith};

const TOOL: &str = r#"#!/bin/sh
case "$1" in
description) echo '{"name": "echo_args", "description": "Echoes its arguments", "input_schema": {"type": "object", "properties": {}}}' ;;
run) cat ;;
esac
"#;

fn write_tool(dir: &Path) -> PathBuf {
    let path = dir.join("echo_args");
    fs::write(&path, TOOL).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Discovers the tool, lets `change` alter it on disk, then calls it and
/// returns the envelope as JSON.
async fn call_after(change: impl FnOnce(&Path)) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let tool = write_tool(dir.path());
    let executor = Arc::new(
        Executor::new(ExecutorConfig {
            backend: BackendChoice::Auto,
            max_concurrent: None,
        })
        .unwrap(),
    );
    let config = RunConfig {
        cwd: dir.path().to_path_buf(),
        env: filtered_env(&["PATH".to_owned()], &[]),
        limits: Limits::recommended(),
        max_timeout: std::time::Duration::from_secs(300),
        overrides: Default::default(),
        sandbox: SandboxSettings::unrestricted(),
        project_dir: dir.path().to_path_buf(),
        protected: Vec::new(),
        project_gate: None,
        tool_caches: None,
        read_masks: toolsmith_registry::ReadMasks::none(),
        secrets: Default::default(),
    };
    let catalog = Toolsmith::from_parts(Arc::clone(&executor), config.clone(), Policy::allow_all())
        .discover(&[dir.path().to_path_buf()])
        .await;
    assert_eq!(catalog.tools().len(), 1, "{:?}", catalog.problems());
    change(&tool);
    let envelope =
        Toolsmith::from_parts(Arc::clone(&executor), config.clone(), Policy::allow_all())
            .call(&catalog, "echo_args", &json!({"x": 1}))
            .await
            .unwrap();
    serde_json::to_value(&envelope).unwrap()
}

fn check(envelope: &Value, expect_code: Option<&str>, expect_error_contains: &str) {
    assert_eq!(envelope["error_code"].as_str(), expect_code, "{envelope}");
    if let Some(error) = envelope["error"].as_str() {
        assert!(error.contains(expect_error_contains), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unchanged_tool_runs() {
    let envelope = call_after(|_| {}).await;
    check(&envelope, None, "");
    assert_eq!(envelope["result"], json!({"x": 1}));
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_made_non_executable_after_discovery_is_spawn_failed() {
    let envelope = call_after(|tool| {
        fs::set_permissions(tool, fs::Permissions::from_mode(0o644)).unwrap();
    })
    .await;
    check(&envelope, Some("SPAWN_FAILED"), "Permission denied");
    assert!(
        envelope["metadata"].get("exit_code").is_none(),
        "{envelope}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_that_lost_its_shebang_is_spawn_failed() {
    let envelope = call_after(|tool| fs::write(tool, "cat\n").unwrap()).await;
    check(&envelope, Some("SPAWN_FAILED"), "Exec format error");
}

#[tokio::test(flavor = "multi_thread")]
async fn deleted_tool_is_spawn_failed() {
    let envelope = call_after(|tool| fs::remove_file(tool).unwrap()).await;
    check(&envelope, Some("SPAWN_FAILED"), "No such file");
}

/// A Kodelet tool that declares `env_arguments` (or not) and prints, as JSON, its stdin and
/// every `TOOLSMITH_ARG*` variable it got; for a `_FILE`, whether the file holds exactly the
/// value of the same argument on stdin, and its mode.
fn env_tool(env_arguments: &str) -> String {
    format!(
        r#"#!/usr/bin/python3
import json, os, sys
if sys.argv[1] == "description":
    print(json.dumps({{"name": "env_args", "description": "Shows its argument variables", {env_arguments} "input_schema": {{"type": "object", "properties": {{"s": {{"type": "string"}}, "n": {{"type": "integer", "default": 7}}, "l": {{"type": "array"}}}}}}}}))
    sys.exit(0)
stdin = json.load(sys.stdin)
out = {{}}
for name, value in sorted(os.environ.items()):
    if name.startswith("TOOLSMITH_ARG"):
        out[name] = value
        if name.endswith("_FILE"):
            with open(value, "rb") as f:
                contents = f.read().decode()
            argument = name[len("TOOLSMITH_ARG_"):-len("_FILE")]
            out[name + ":exact"] = contents == stdin[argument]
            out[name + ":mode"] = oct(os.stat(value).st_mode & 0o777)
if len(json.dumps(stdin)) < 4096:
    out["stdin"] = stdin
print(json.dumps(out))
"#
    )
}

/// Discovers `tool` (written as `env_args`) and calls it with `arguments`; `extra_env` is
/// set in the tool's environment as the operator's whitelist would.
async fn call_env_tool(tool: &str, arguments: Value, extra_env: &[(&str, &str)]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("env_args");
    fs::write(&path, tool).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    let executor = Arc::new(
        Executor::new(ExecutorConfig {
            backend: BackendChoice::Auto,
            max_concurrent: None,
        })
        .unwrap(),
    );
    let set: Vec<(String, String)> = extra_env
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    let config = RunConfig {
        cwd: dir.path().to_path_buf(),
        env: filtered_env(&["PATH".to_owned()], &set),
        limits: Limits::recommended(),
        max_timeout: std::time::Duration::from_secs(300),
        overrides: Default::default(),
        sandbox: SandboxSettings::unrestricted(),
        project_dir: dir.path().to_path_buf(),
        protected: Vec::new(),
        project_gate: None,
        tool_caches: None,
        read_masks: toolsmith_registry::ReadMasks::none(),
        secrets: Default::default(),
    };
    let catalog = Toolsmith::from_parts(Arc::clone(&executor), config.clone(), Policy::allow_all())
        .discover(&[dir.path().to_path_buf()])
        .await;
    assert_eq!(catalog.tools().len(), 1, "{:?}", catalog.problems());
    let envelope =
        Toolsmith::from_parts(Arc::clone(&executor), config.clone(), Policy::allow_all())
            .call(&catalog, "env_args", &arguments)
            .await
            .unwrap();
    serde_json::to_value(&envelope).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn env_arguments_are_passed_out_of_band_with_defaults() {
    let envelope = call_env_tool(
        &env_tool(r#""env_arguments": True,"#),
        json!({"s": "it's \"$(x)\"\n", "l": ["a", 1]}),
        &[("TOOLSMITH_ARG_stale", "from the operator")],
    )
    .await;
    assert_eq!(
        envelope["result"],
        json!({
            "stdin": {"s": "it's \"$(x)\"\n", "l": ["a", 1], "n": 7},
            "TOOLSMITH_ARGS": "env",
            "TOOLSMITH_ARG_s": "it's \"$(x)\"\n",
            "TOOLSMITH_ARG_n": "7",
            "TOOLSMITH_ARG_l": "[\"a\",1]",
        }),
        "{envelope}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_that_do_not_ask_get_no_argument_variables() {
    let envelope = call_env_tool(
        &env_tool(""),
        json!({"s": "x"}),
        &[("TOOLSMITH_ARG_s", "forged")],
    )
    .await;
    assert_eq!(
        envelope["result"],
        json!({"stdin": {"s": "x", "n": 7}}),
        "{envelope}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_value_arrives_exactly_in_a_file_removed_after_the_call() {
    // Over 1 MiB, with trailing newlines and every byte class a shell could stumble on.
    let mut big = String::new();
    while big.len() < (1 << 20) + 10 {
        big.push_str("line 'q' \"d\" $(x) `y` \\ é\u{2028}\t\r\n");
    }
    big.push_str("\n\n");
    let envelope = call_env_tool(
        &env_tool(r#""env_arguments": True,"#),
        json!({"s": big}),
        &[],
    )
    .await;
    let result = &envelope["result"];
    assert_eq!(
        result["TOOLSMITH_ARG_s_FILE:exact"],
        json!(true),
        "{result}"
    );
    assert_eq!(result["TOOLSMITH_ARG_s_FILE:mode"], json!("0o444"));
    assert!(result.get("TOOLSMITH_ARG_s").is_none(), "{result}");
    assert_eq!(result["TOOLSMITH_ARG_n"], json!("7"));
    let path = result["TOOLSMITH_ARG_s_FILE"].as_str().unwrap();
    assert!(!Path::new(path).exists(), "{path} was left behind");
    assert!(!Path::new(path).parent().unwrap().exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn nul_in_a_value_is_invalid_params() {
    let envelope = call_env_tool(
        &env_tool(r#""env_arguments": True,"#),
        json!({"s": "a\u{0}b"}),
        &[],
    )
    .await;
    check(
        &envelope,
        Some("INVALID_PARAMS"),
        "argument `s` contains a NUL character",
    );
}
