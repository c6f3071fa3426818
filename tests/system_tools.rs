//! The bundled system tools (`system-tools/`): each loads cleanly and does its job.

use std::path::PathBuf;

use serde_json::Value;

use crate::context::{TestContext, repository_root};

fn system_tools() -> PathBuf {
    repository_root().join("system-tools")
}

fn run(context: &TestContext, tool: &str, input: &str) -> Value {
    let output = context
        .command()
        .arg("--tools-dir")
        .arg(system_tools())
        .args(["run", tool, "--input", input])
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn every_system_tool_validates_and_is_read_only() {
    let context = TestContext::new();
    let output = context
        .command()
        .arg("--tools-dir")
        .arg(system_tools())
        .arg("validate")
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // `plan` admits only read-only tools: every system tool must be one.
    let output = context
        .command()
        .arg("--tools-dir")
        .arg(system_tools())
        .args(["list", "--json", "--all", "--profile", "plan"])
        .output()
        .unwrap();
    let listing: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["list_dir", "read_file", "search_text"]);
    assert_eq!(listing["denied"], serde_json::json!([]));
    assert_eq!(listing["problems"], serde_json::json!([]));
}

#[test]
fn read_file_numbers_a_range_of_lines() {
    let context = TestContext::new();
    context.project_file("notes.txt", "one\ntwo\nthree\nfour\n");
    let envelope = run(
        &context,
        "read_file",
        r#"{"path": "notes.txt", "start": 2, "count": 2}"#,
    );
    assert_eq!(envelope["tool_success"], true, "{envelope}");
    assert_eq!(envelope["result"], "     2  two\n     3  three");
}

#[test]
fn read_file_of_a_missing_file_fails_with_the_reason() {
    let context = TestContext::new();
    let envelope = run(&context, "read_file", r#"{"path": "-missing"}"#);
    assert_eq!(envelope["tool_success"], false, "{envelope}");
    assert_eq!(envelope["error_code"], "TOOL_CRASHED");
    assert!(
        envelope["error"]
            .as_str()
            .unwrap()
            .contains("not a file: -missing"),
        "{envelope}"
    );
}

#[test]
fn list_dir_marks_directories_and_hides_dot_files() {
    let context = TestContext::new();
    context.project_file("src/main.rs", "");
    context.project_file(".hidden", "");
    context.project_file("README", "");
    let envelope = run(&context, "list_dir", "{}");
    assert_eq!(envelope["result"], "README\nsrc/", "{envelope}");
    let envelope = run(&context, "list_dir", r#"{"hidden": true}"#);
    assert_eq!(envelope["result"], ".hidden\nREADME\nsrc/", "{envelope}");
}

#[test]
fn search_text_finds_fixed_strings() {
    let context = TestContext::new();
    context.project_file("a.txt", "needle (1)\nhay\n");
    context.project_file("sub/b.txt", "NEEDLE (1)\n");
    let envelope = run(&context, "search_text", r#"{"text": "needle (1)"}"#);
    assert_eq!(envelope["result"], "./a.txt:1:needle (1)", "{envelope}");
    let envelope = run(
        &context,
        "search_text",
        r#"{"text": "needle (1)", "ignore_case": true, "path": "sub"}"#,
    );
    assert_eq!(envelope["result"], "sub/b.txt:1:NEEDLE (1)", "{envelope}");
    let envelope = run(&context, "search_text", r#"{"text": "absent"}"#);
    assert_eq!(envelope["result"], "no match", "{envelope}");
}
