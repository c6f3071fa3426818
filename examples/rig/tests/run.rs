//! Runs `toolsmith-rig` as a user would, on toolsmith's `examples/tools`, and checks what it
//! prints: the definitions rig would send to a model carry each tool's JSON Schema, and a call
//! through rig's `ToolSet` returns what the tool computed, or the envelope's code and sentence.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools")
}

/// Runs the example with `args` in a fresh project directory (its working directory, the only
/// place a tool may write).
fn run_in_fresh_project(args: &[&OsStr]) -> Output {
    let project = tempfile::tempdir().expect("a temporary project directory");
    #[expect(
        clippy::disallowed_methods,
        reason = "a black-box test starts the program under test"
    )]
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toolsmith-rig"));
    command
        .args(args)
        .current_dir(project.path())
        .output()
        .expect("toolsmith-rig runs")
}

/// Runs the example on toolsmith's `examples/tools`, with `args` after the directory.
fn toolsmith_rig(args: &[&str]) -> Output {
    let dir = tools_dir();
    let mut all: Vec<&OsStr> = vec![dir.as_os_str()];
    all.extend(args.iter().map(OsStr::new));
    run_in_fresh_project(&all)
}

/// A word no tool could know in advance.
fn fresh_word() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .subsec_nanos();
    format!("Grace{}x{nanos}", std::process::id())
}

/// The definitions printed before the call, and what follows the call's line.
fn split_output(output: &Output) -> (Vec<Value>, String) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (head, rest) = stdout
        .split_once('\n')
        .unwrap_or_else(|| panic!("no header line in {stdout:?}"));
    assert!(head.starts_with("rig tool definitions ("), "{stdout}");
    let (json, after) = rest
        .split_once("\nrig ToolSet call: ")
        .unwrap_or_else(|| panic!("no call line in {stdout:?}"));
    let definitions: Vec<Value> = serde_json::from_str(json).expect("the definitions are JSON");
    let count: usize = head["rig tool definitions (".len()..]
        .split(' ')
        .next()
        .and_then(|count| count.parse().ok())
        .expect("the header counts the tools");
    assert_eq!(definitions.len(), count, "{stdout}");
    let result = after.split_once('\n').map_or("", |(_, result)| result);
    (definitions, result.to_owned())
}

fn definition<'a>(definitions: &'a [Value], name: &str) -> &'a Value {
    definitions
        .iter()
        .find(|definition| definition["name"] == name)
        .unwrap_or_else(|| panic!("no definition of {name} in {definitions:#?}"))
}

#[test]
fn definitions_carry_each_tools_schema_and_the_call_returns_the_tools_result() {
    let name = fresh_word();
    let arguments = json!({ "name": name, "age": 36 }).to_string();
    let output = toolsmith_rig(&["hello", &arguments]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{output:?}");
    let (definitions, result) = split_output(&output);

    // A Kodelet tool's schema as its `description` printed it.
    let hello = definition(&definitions, "hello");
    assert_eq!(hello["description"], "Say hello to a person");
    assert_eq!(hello["parameters"]["required"], json!(["name"]));
    assert_eq!(hello["parameters"]["properties"]["age"]["type"], "integer");
    // A manifest's parameters as the JSON Schema toolsmith compiles them to.
    let word_count = definition(&definitions, "word_count");
    assert_eq!(word_count["parameters"]["type"], "object");
    assert_eq!(word_count["parameters"]["required"], json!(["path"]));
    assert_eq!(
        word_count["parameters"]["properties"]["lines_only"]["default"],
        false
    );
    // Every definition is one rig can send: a name, a description, an object schema.
    for definition in &definitions {
        assert!(
            definition["name"]
                .as_str()
                .is_some_and(|name| !name.is_empty())
        );
        assert!(definition["description"].is_string(), "{definition}");
        assert_eq!(definition["parameters"]["type"], "object", "{definition}");
    }

    assert_eq!(
        result.trim_end(),
        format!("Hello, {name}! You are 36 years old."),
        "stderr: {stderr}"
    );
}

#[test]
fn the_default_run_calls_hello_through_the_tool_set() {
    let output = run_in_fresh_project(&[]);
    assert!(output.status.success(), "{output:?}");
    let (definitions, result) = split_output(&output);
    assert!(definitions.len() >= 2, "{definitions:#?}");
    assert_eq!(result.trim_end(), "Hello, Ada!");
}

#[test]
fn a_failed_tool_is_a_rig_error_with_the_envelopes_code_and_sentence() {
    let message = fresh_word();
    let arguments = json!({ "should_fail": true, "message": message }).to_string();
    let output = toolsmith_rig(&["error_tool", &arguments]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let (_, result) = split_output(&output);
    assert_eq!(result, "", "a failed call prints no result");
    // The sentence is the error the tool reported on its way out.
    assert!(
        stderr.contains(&format!("the call failed (TOOL_CRASHED): {message}")),
        "{stderr}"
    );
}

#[test]
fn arguments_that_break_the_schema_are_invalid_params_and_run_nothing() {
    let word = fresh_word();
    let arguments = json!({ "age": word }).to_string();
    let output = toolsmith_rig(&["hello", &arguments]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stderr.contains("the call failed (INVALID_PARAMS): "),
        "{stderr}"
    );
    assert!(
        stderr.contains("name"),
        "the missing parameter is named: {stderr}"
    );
    assert!(!stderr.contains("Hello"), "{stderr}");
}
