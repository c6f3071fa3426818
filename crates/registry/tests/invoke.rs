//! Invoking tools through a real executor: the paths that need a process,
//! such as a tool that changed on disk between discovery and the call.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolsmith_executor::{BackendChoice, Executor, ExecutorConfig, Limits, filtered_env};
use toolsmith_registry::{Policy, RunConfig, SandboxSettings, discover, invoke_named};

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
    };
    let catalog = discover(&executor, &[dir.path().to_path_buf()], &config).await;
    assert_eq!(catalog.tools().len(), 1, "{:?}", catalog.problems());
    change(&tool);
    let envelope = invoke_named(
        &executor,
        &catalog,
        "echo_args",
        &json!({"x": 1}),
        &config,
        &Policy::allow_all(),
    )
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
