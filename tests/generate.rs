//! `toolsmith generate`, `new`, `test`, `history` and `rollback`, and `custom_tool` over MCP: requests become registered tools (or reports of what to repair), in one connection.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::context::TestContext;

const PATIENCE: Duration = Duration::from_secs(30);

fn bash_request(answer: &str, replace: bool) -> Value {
    json!({
        "name": "tell_answer",
        "description": "Tells the answer to a question.",
        "parameters": {"question": "What to answer"},
        "language": "bash",
        "implementation": format!("printf '%s: %s\\n' \"$ARG_QUESTION\" {answer}"),
        "tests": [{"name": "answers", "input": {"question": "why"}, "expect": {"result_contains": answer}}],
        "replace": replace,
    })
}

fn write_request(context: &TestContext, request: &Value) {
    context.project_file("request.json", &request.to_string());
}

/// A test context whose snapshots hide what is random in a generation: commits (their hex)
/// and times.
///
/// The project is the user's own (trusted): toolsmith writes no tool into an untrusted one
/// (issue 22, finding 11; `trust::generate_in_an_untrusted_project_is_refused_and_records_no_trust`).
fn generate_context() -> TestContext {
    let mut context = TestContext::new();
    context.own_project();
    context.add_filter(r"\b[0-9a-f]{40}\b", "[COMMIT]");
    context.add_filter(r"\b[0-9a-f]{12}\b", "[SHORT]");
    context.add_filter(r#""time": \d+"#, r#""time": "[TIME]""#);
    context
}

#[test]
fn generate_registers_a_callable_tool_and_history_and_rollback_follow() {
    let context = generate_context();
    write_request(&context, &bash_request("forty-two", false));
    cli_snapshot!(context, context.command().args(["generate", "--request", "request.json"]), @r#"
    exit_code: 0
    ----- stdout -----
    registered tell_answer version 1 at [TEMP]/project/.toolsmith/tools/tell_answer
      ok   request
      ok   name
      ok   render
      ok   registry
      ok   schema
      ok   learned (every test passes under the declaration {"network":"none","filesystem":"read-only"})
      ok   test: answers
      ok   missing_required (a call without `question` is INVALID_PARAMS)
      ok   no_leftovers
      ok   network (network none)
      ok   declaration (the file declares {"network":"none","filesystem":"read-only"})
    history commit [COMMIT]
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.command().args(["run", "tell_answer", "--input", r#"{"question": "why"}"#]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": "why: forty-two",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 15,
        "stderr_bytes": 0,
        "cpu_time_ms": "[CPU_TIME_MS]",
        "peak_rss_kb": "[PEAK_RSS_KB]",
        "escalated": false,
        "backend": "[BACKEND]"
      }
    }
    ----- stderr -----
    "#);

    write_request(&context, &bash_request("forty-three", true));
    cli_snapshot!(context, context.command().args(["generate", "--request", "-"]).stdin(std::fs::File::open(context.project.join("request.json")).unwrap()), @r#"
    exit_code: 0
    ----- stdout -----
    registered tell_answer version 2 at [TEMP]/project/.toolsmith/tools/tell_answer
      ok   request
      ok   name (replaces [TEMP]/project/.toolsmith/tools/tell_answer)
      ok   render
      ok   registry
      ok   schema
      ok   learned (every test passes under the declaration {"network":"none","filesystem":"read-only"})
      ok   test: answers
      ok   missing_required (a call without `question` is INVALID_PARAMS)
      ok   no_leftovers
      ok   network (network none)
      ok   declaration (the file declares {"network":"none","filesystem":"read-only"})
    history commit [COMMIT]
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.command().args(["history", "tell_answer"]), @"
    exit_code: 0
    ----- stdout -----
    v1  [SHORT]  tell_answer v1: registered from a custom_tool request
    v2  [SHORT]  tell_answer v2: replaced from a custom_tool request
    ----- stderr -----
    ");
    cli_snapshot!(context, context.command().args(["rollback", "tell_answer", "--to", "1"]), @"
    exit_code: 0
    ----- stdout -----
    tell_answer is now version 3 (tell_answer v3: rollback to v1)
    ----- stderr -----
    ");
    cli_snapshot!(context, context.command().args(["test", "tell_answer"]), @"
    exit_code: 0
    ----- stdout -----
    ok   tell_answer: answers
    1 case, 0 failed
    ----- stderr -----
    ");
    cli_snapshot!(context, context.command().args(["history", "custom_tool_tell_answer", "--json"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "name": "tell_answer",
      "versions": [
        {
          "version": 1,
          "commit": "[COMMIT]",
          "time": "[TIME]",
          "message": "tell_answer v1: registered from a custom_tool request",
          "file_name": "tell_answer"
        },
        {
          "version": 2,
          "commit": "[COMMIT]",
          "time": "[TIME]",
          "message": "tell_answer v2: replaced from a custom_tool request",
          "file_name": "tell_answer"
        },
        {
          "version": 3,
          "commit": "[COMMIT]",
          "time": "[TIME]",
          "message": "tell_answer v3: rollback to v1",
          "file_name": "tell_answer"
        }
      ]
    }
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.command().args(["rollback", "tell_answer", "--to", "7"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: cannot roll back: tool `tell_answer` has no version 7 (versions 1 to 3)
    ");
}

#[test]
fn a_rejected_request_reports_the_failing_check_and_exits_1() {
    let context = generate_context();
    let mut request = bash_request("forty-two", false);
    request["implementation"] = json!("echo oops >&2\nexit 4");
    write_request(&context, &request);
    cli_snapshot!(context, context.command().args(["generate", "--request", "request.json", "--json"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "status": "rejected",
      "name": "tell_answer",
      "exposed_name": "custom_tool_tell_answer",
      "checks": [
        {
          "name": "request",
          "ok": true
        },
        {
          "name": "name",
          "ok": true
        },
        {
          "name": "render",
          "ok": true
        },
        {
          "name": "registry",
          "ok": true
        },
        {
          "name": "schema",
          "ok": true
        },
        {
          "name": "learned",
          "ok": false,
          "detail": "a test fails even in the recording sandbox (the grant of generated tools: `[generator] network` and the filesystem grant), so there is no declaration to learn"
        },
        {
          "name": "test: answers",
          "ok": false,
          "detail": "expected a result containing \"forty-two\", got TOOL_CRASHED (Tool tell_answer exited with status 4: oops.); stderr: oops"
        },
        {
          "name": "missing_required",
          "ok": true,
          "detail": "a call without `question` is INVALID_PARAMS"
        },
        {
          "name": "no_leftovers",
          "ok": true
        },
        {
          "name": "network",
          "ok": true,
          "detail": "network nothing learned"
        }
      ]
    }
    ----- stderr -----
    "#);
    assert!(!context.project.join(".toolsmith").exists());
    context.project_file("broken.json", "{not json");
    cli_snapshot!(context, context.command().args(["generate", "--request", "broken.json"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: the request from broken.json is not JSON: key must be a string at line 1 column 2
    ");
    cli_snapshot!(context, context.command().args(["generate"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: the following required arguments were not provided:
      --request <FILE|->

    Usage: toolsmith generate --request <FILE|->

    For more information, try '--help'.
    ");
}

/// Issue 25, finding 2: a request with no test cases and no required parameter registers;
/// the checks that need runs (network, leftovers) get one from a call with no arguments.
#[test]
fn a_request_without_tests_or_required_parameters_registers() {
    let context = generate_context();
    write_request(
        &context,
        &json!({
            "name": "say_hello",
            "description": "Says hello.",
            "language": "bash",
            "implementation": "printf hello",
        }),
    );
    cli_snapshot!(context, context.command().args(["generate", "--request", "request.json"]), @r#"
    exit_code: 0
    ----- stdout -----
    registered say_hello version 1 at [TEMP]/project/.toolsmith/tools/say_hello
      ok   request
      ok   name
      ok   render
      ok   registry
      ok   schema
      ok   learned (every test passes under the declaration {"network":"none","filesystem":"read-only"})
      ok   no_leftovers
      ok   network (network none)
      ok   declaration (the file declares {"network":"none","filesystem":"read-only"})
    history commit [COMMIT]
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.command().args(["run", "say_hello"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": "hello",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 5,
        "stderr_bytes": 0,
        "cpu_time_ms": "[CPU_TIME_MS]",
        "peak_rss_kb": "[PEAK_RSS_KB]",
        "escalated": false,
        "backend": "[BACKEND]"
      }
    }
    ----- stderr -----
    "#);
}

#[test]
fn print_schema_prints_the_request_schema() {
    let context = generate_context();
    let output = context
        .command()
        .args(["generate", "--print-schema"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let schema: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(schema["title"], "custom_tool request");
    assert_eq!(schema["required"], json!(["name", "description"]));
}

#[test]
fn new_writes_a_skeleton_that_validates_and_refuses_to_overwrite() {
    let context = generate_context();
    for (name, lang) in [
        ("py_tool", "python"),
        ("sh_tool", "bash"),
        ("md_tool", "manifest"),
    ] {
        let output = context
            .command()
            .args([
                "new",
                name,
                "--lang",
                lang,
                "--description",
                "A new tool.",
                "--param",
                "path:string:required:The file",
                "--param",
                "count:integer",
            ])
            .output()
            .unwrap();
        assert!(output.status.success(), "{lang}: {output:?}");
    }
    cli_snapshot!(context, context.command().args(["validate"]), @"
    exit_code: 0
    ----- stdout -----
    [TEMP]/project/.toolsmith/tools/md_tool.md (md_tool)
      ok is a regular file (a manifest: read, never run)
      ok the frontmatter's `name` (else the file name) is a valid tool name
      ok no other file in its directory provides the same tool
      ok the manifest file can be read
      ok the frontmatter fields and the body's template tags are valid
      ok the declared name is a valid tool name
      ok the input schema is a valid JSON Schema for an object
      ok no output schema is declared (optional)
      ok the description is not empty
    [TEMP]/project/.toolsmith/tools/py_tool (py_tool)
      ok is an executable file
      ok the file name is a valid tool name
      ok no other file in its directory provides the same tool
      ok `description` answered in time
      ok the `description` output is a JSON object with the required fields
      ok the declared name is a valid tool name
      ok the input schema is a valid JSON Schema for an object
      ok no output schema is declared (optional)
      ok the declared name matches the file name
      ok the description is not empty
      ok the timeout the tool asks for (`config`), if any, is valid
    [TEMP]/project/.toolsmith/tools/sh_tool (sh_tool)
      ok is an executable file
      ok the file name is a valid tool name
      ok no other file in its directory provides the same tool
      ok `description` answered in time
      ok the `description` output is a JSON object with the required fields
      ok the declared name is a valid tool name
      ok the input schema is a valid JSON Schema for an object
      ok no output schema is declared (optional)
      ok the declared name matches the file name
      ok the description is not empty
      ok the timeout the tool asks for (`config`), if any, is valid
    3 files checked, 0 failed
    ----- stderr -----
    ");
    cli_snapshot!(context, context.command().args(["run", "sh_tool", "--input", r#"{"path": "a b"}"#]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": {
        "path": "a b"
      },
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 15,
        "stderr_bytes": 0,
        "cpu_time_ms": "[CPU_TIME_MS]",
        "peak_rss_kb": "[PEAK_RSS_KB]",
        "escalated": false,
        "backend": "[BACKEND]"
      }
    }
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.command().args(["new", "sh_tool", "--lang", "manifest"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: cannot write the new tool: [TEMP]/project/.toolsmith/tools/sh_tool exists already; not overwriting it
    ");
    cli_snapshot!(context, context.command().args(["new", "custom_tool", "--lang", "bash"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: cannot write the new tool: invalid name: tool name `custom_tool` is reserved: `custom_tool` and names starting with `custom_tool_` belong to the meta-tool
    ");
    cli_snapshot!(context, context.command().args(["new", "x_tool", "--lang", "bash", "--param", "nocolon"]), @r#"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: --param "nocolon" must be NAME:TYPE[:required][:DESCRIPTION]
    "#);
}

#[test]
fn test_runs_declared_tests_one_line_per_case() {
    let context = generate_context();
    std::fs::write(
        context.tools.join("shout.md"),
        "---\nname: shout\ndescription: Shouts.\nparameters:\n  word:\n    type: string\n    required: true\ntests:\n- name: shouts\n  input: {word: hi}\n  expect: {result: \"HI\"}\n- name: wrong on purpose\n  input: {word: hi}\n  expect: {result: \"hi\"}\n- input: {}\n  expect: {error_code: INVALID_PARAMS}\n---\nprintf '%s' {{ word }} | tr a-z A-Z\n",
    )
    .unwrap();
    cli_snapshot!(context, context.with_tools().args(["test"]), @r#"
    exit_code: 1
    ----- stdout -----
    ok   shout: shouts
    FAIL shout: wrong on purpose: expected result "hi", got result "HI"
    ok   shout: case 3
    3 cases, 1 failed
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.with_tools().args(["test", "shout", "--json"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tools": [
        {
          "name": "shout",
          "path": "[TEMP]/tools/shout.md",
          "cases": [
            {
              "name": "shouts",
              "passed": true,
              "input": {
                "word": "hi"
              },
              "expect": {
                "result": "HI"
              },
              "mismatch": null,
              "envelope": {
                "tool_success": true,
                "result": "HI",
                "metadata": {
                  "execution_time_ms": "[EXECUTION_TIME_MS]",
                  "exit_code": 0,
                  "stdout_truncated": false,
                  "stderr": "",
                  "stderr_truncated": false,
                  "stdout_bytes": 2,
                  "stderr_bytes": 0,
                  "cpu_time_ms": "[CPU_TIME_MS]",
                  "peak_rss_kb": "[PEAK_RSS_KB]",
                  "escalated": false,
                  "backend": "[BACKEND]"
                }
              }
            },
            {
              "name": "wrong on purpose",
              "passed": false,
              "input": {
                "word": "hi"
              },
              "expect": {
                "result": "hi"
              },
              "mismatch": "expected result \"hi\", got result \"HI\"",
              "envelope": {
                "tool_success": true,
                "result": "HI",
                "metadata": {
                  "execution_time_ms": "[EXECUTION_TIME_MS]",
                  "exit_code": 0,
                  "stdout_truncated": false,
                  "stderr": "",
                  "stderr_truncated": false,
                  "stdout_bytes": 2,
                  "stderr_bytes": 0,
                  "cpu_time_ms": "[CPU_TIME_MS]",
                  "peak_rss_kb": "[PEAK_RSS_KB]",
                  "escalated": false,
                  "backend": "[BACKEND]"
                }
              }
            },
            {
              "name": "case 3",
              "passed": true,
              "input": {},
              "expect": {
                "error_code": "INVALID_PARAMS"
              },
              "mismatch": null,
              "envelope": {
                "tool_success": false,
                "error": "Invalid arguments for tool shout: /: missing required property \"word\".",
                "error_code": "INVALID_PARAMS",
                "metadata": {
                  "execution_time_ms": "[EXECUTION_TIME_MS]",
                  "stdout_truncated": false,
                  "stderr": "",
                  "stderr_truncated": false,
                  "stdout_bytes": 0,
                  "stderr_bytes": 0,
                  "escalated": false
                }
              }
            }
          ]
        }
      ],
      "cases": 3,
      "failed": 1
    }
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.with_tools().args(["test", "nothing_here"]), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: no tool named nothing_here
    ");
}

/// Issue 25, finding 3: a declared test compares JSON numbers by value, so a tool that prints
/// `212.0` (Python's `float`) meets a test expecting `212`; a different number still fails.
#[test]
fn test_compares_json_numbers_by_value() {
    let context = generate_context();
    context.tool(
        "boiling",
        "#!/bin/sh\ncase \"$1\" in\n  description) printf '%s\\n' '{\"name\": \"boiling\", \"description\": \"Boiling points.\", \"input_schema\": {\"type\": \"object\", \"properties\": {}}, \"tests\": [{\"name\": \"fahrenheit\", \"input\": {}, \"expect\": {\"result\": {\"f\": 212, \"c\": [100]}}}, {\"name\": \"kelvin\", \"input\": {}, \"expect\": {\"result\": {\"f\": 373.15, \"c\": [100]}}}]}' ;;\n  run) printf '{\"c\": [100.0], \"f\": 212.0}\\n' ;;\nesac\n",
    );
    cli_snapshot!(context, context.with_tools().args(["test", "boiling"]), @r#"
    exit_code: 1
    ----- stdout -----
    ok   boiling: fahrenheit
    FAIL boiling: kelvin: expected result {"f":373.15,"c":[100]}, got result {"c":[100.0],"f":212.0}
    2 cases, 1 failed
    ----- stderr -----
    "#);
}

#[derive(Debug, Clone)]
struct Client {
    changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        let _ignored = self.changed.send(());
    }
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

/// Acceptance 5: one connection lists `custom_tool`, calls it, hears `list_changed`, and
/// calls the new tool.
#[tokio::test]
async fn custom_tool_over_mcp_registers_a_tool_the_same_client_can_call() {
    let context = generate_context();
    context.project_file(
        ".toolsmith/config.toml",
        &format!(
            "[generator]\ntools_dir = {:?}\n",
            context.tools.display().to_string()
        ),
    );
    let mut command = context.with_tools();
    command.arg("serve");
    let transport = TokioChildProcess::new(tokio::process::Command::from(command)).unwrap();
    let (changed, mut changes) = mpsc::unbounded_channel();
    let session = Client { changed }
        .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
        .await
        .unwrap();

    let tools = session.list_all_tools().await.unwrap();
    let custom = tools
        .iter()
        .find(|tool| tool.name == "custom_tool")
        .unwrap();
    assert_eq!(
        custom.input_schema.get("required"),
        Some(&json!(["name", "description"]))
    );

    let rejected = session
        .call_tool(call("custom_tool", json!({"name": "tell_answer", "description": "d", "language": "bash", "implementation": "exit 3", "tests": [{"input": {}}]})))
        .await
        .unwrap();
    assert_eq!(rejected.is_error, Some(true));

    let result = session
        .call_tool(call("custom_tool", bash_request("forty-two", false)))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let report = result.structured_content.clone().unwrap();
    assert_eq!(report["status"], "registered");
    assert_eq!(report["exposed_name"], "custom_tool_tell_answer");

    tokio::time::timeout(PATIENCE, changes.recv())
        .await
        .expect("list_changed within the patience")
        .unwrap();
    let tools = session.list_all_tools().await.unwrap();
    assert!(
        tools
            .iter()
            .any(|tool| tool.name == "custom_tool_tell_answer")
    );
    let answer = session
        .call_tool(call("custom_tool_tell_answer", json!({"question": "why"})))
        .await
        .unwrap();
    let content = serde_json::to_value(&answer.content).unwrap();
    assert_eq!(content[0]["text"], "why: forty-two");
    session.cancel().await.unwrap();
}

/// Starts `toolsmith serve` from `command` and calls `custom_tool` with `request`; returns the
/// result and whether `list_changed` was heard within a short wait.
async fn generate_over_mcp(
    command: std::process::Command,
    request: Value,
) -> (rmcp::model::CallToolResult, bool) {
    let transport = TokioChildProcess::new(tokio::process::Command::from(command)).unwrap();
    let (changed, mut changes) = mpsc::unbounded_channel();
    let session = Client { changed }
        .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
        .await
        .unwrap();
    let result = session
        .call_tool(call("custom_tool", request))
        .await
        .unwrap();
    let heard = tokio::time::timeout(Duration::from_millis(500), changes.recv())
        .await
        .is_ok();
    session.cancel().await.unwrap();
    (result, heard)
}

fn result_text(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Issue 25, finding 1: over MCP, `custom_tool` ends in a callable tool or in a clear refusal,
/// never in a `registered` answer for a tool the session cannot call. In an untrusted project
/// it refuses with the CLI's `hint:` and writes nothing; with a generator directory the server
/// does not read, it refuses before writing; and a tool a higher layer shadows is reported as
/// not served, with no `registered`.
#[tokio::test]
async fn custom_tool_ends_in_a_callable_tool_or_a_clear_refusal() {
    // An untrusted project (a fresh clone): the same refusal as `toolsmith generate`.
    let context = TestContext::new();
    let mut command = context.command();
    command.arg("serve");
    let (result, heard) = generate_over_mcp(command, bash_request("forty-two", false)).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = result_text(&result);
    assert!(text.contains("is not trusted"), "{text}");
    assert!(text.contains("hint: run `toolsmith trust`"), "{text}");
    assert!(!heard);
    assert!(!context.project.join(".toolsmith").exists());

    // A generator directory the server does not read: refused before anything is written.
    let context = generate_context();
    let elsewhere = context.root.join("elsewhere");
    context.user_config(&format!(
        "[trust]\npaths = [{:?}]\n\n[generator]\ntools_dir = {:?}\n",
        context.project.display().to_string(),
        elsewhere.display().to_string()
    ));
    let mut command = context.command();
    command.arg("serve");
    let (result, heard) = generate_over_mcp(command, bash_request("forty-two", false)).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = result_text(&result);
    assert!(
        text.contains("reads no tools from the generator's directory"),
        "{text}"
    );
    assert!(text.contains("hint: "), "{text}");
    assert!(!heard);
    assert!(!elsewhere.join("tell_answer").exists());

    // A name policy denies: written, but not callable here, so the answer is no `registered`.
    let context = generate_context();
    context.project_file(
        ".toolsmith/config.toml",
        "[policy]\ndisabled = [\"tell_answer\"]\n",
    );
    let mut command = context.command();
    command.arg("serve");
    let (result, _heard) = generate_over_mcp(command, bash_request("forty-two", false)).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = result_text(&result);
    assert!(
        text.contains(
            "the tool tell_answer was registered but may not be called: disabled by config"
        ),
        "{text}"
    );
}

/// Issue 25, finding 5 (grants and replacement): `[tools.deploy]`'s grants (its environment,
/// its network) are for the tool the operator meant, so a *generated* `deploy` gets none of
/// them, neither in the generator's test runs (whose report an agent reads) nor in later
/// calls; a hand-written tool of a name keeps its grant. `replace` of a hand-written tool is
/// refused without `[generator] may_replace`, and a generated tool needs no consent.
#[test]
fn grants_bind_to_the_tool_the_operator_meant_and_replacing_needs_consent() {
    let context = generate_context();
    let grants = "[tools.deploy]\nnetwork = \"allow\"\n\n[tools.deploy.env]\nallow = [\"PATH\", \"DEPLOY_TOKEN\"]\n\n[tools.handmade]\nnetwork = \"allow\"\n\n[tools.handmade.env]\nallow = [\"PATH\", \"DEPLOY_TOKEN\"]\n";
    let user_config = |extra: &str| {
        context.user_config(&format!(
            "[trust]\npaths = [{:?}]\nproject_may_loosen = true\n\n[generator]\ntools_dir = {:?}\n{extra}\n{grants}",
            context.project.display().to_string(),
            context.tools.display().to_string(),
        ));
    };
    user_config("");
    let tell_token = |replace: bool| {
        json!({
            "name": "deploy",
            "description": "Deploys.",
            "language": "bash",
            "implementation": "printf '%s' \"${DEPLOY_TOKEN:-none}\"",
            "tests": [{"name": "no token", "input": {}, "expect": {"result": "none"}}],
            "replace": replace,
        })
    };
    let generate = |request: &Value| {
        write_request(&context, request);
        let output = context
            .with_tools()
            .env("DEPLOY_TOKEN", "s3cret")
            .args(["generate", "--json", "--request", "request.json"])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let run = |name: &str| {
        let output = context
            .with_tools()
            .env("DEPLOY_TOKEN", "s3cret")
            .args(["run", name])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };

    // A generated `deploy`: its test runs had no token and no network (both checks pass),
    // and so has every call.
    let report = generate(&tell_token(false));
    assert_eq!(report["status"], "registered", "{report}");
    let envelope = run("deploy");
    assert_eq!(envelope["result"], "none", "{envelope}");

    // A hand-written tool of a granted name gets its grant.
    context.tool(
        "handmade",
        &crate::context::shell_tool(
            "handmade",
            r#"{"type": "object"}"#,
            "printf '%s' \"${DEPLOY_TOKEN:-none}\"",
        ),
    );
    assert_eq!(run("handmade")["result"], "s3cret");

    // Replacing the hand-written tool needs the operator's consent.
    let mut request = tell_token(true);
    request["name"] = json!("handmade");
    let report = generate(&request);
    assert_eq!(report["status"], "rejected", "{report}");
    let name_check = &report["checks"][1];
    assert_eq!(name_check["name"], "name");
    assert!(
        name_check["detail"]
            .as_str()
            .unwrap()
            .contains("needs the operator's consent: `[generator] may_replace = [\"handmade\"]`"),
        "{report}"
    );
    assert_eq!(run("handmade")["result"], "s3cret");
    user_config("may_replace = [\"handmade\"]");
    let report = generate(&request);
    assert_eq!(report["status"], "registered", "{report}");
    // Now generated: it lost the grant of the name, and replacing it needs no consent.
    assert_eq!(run("handmade")["result"], "none");
    user_config("");
    let report = generate(&request);
    assert_eq!(report["status"], "registered", "{report}");
    // The generated `deploy` is replaced without consent too.
    let report = generate(&tell_token(true));
    assert_eq!(report["status"], "registered", "{report}");
}

/// A generated tool loses the operator's `[tools.NAME]`, but not what the caller sets for the
/// call itself: `run NAME --timeout` applies to it as to any tool.
#[test]
fn a_generated_tool_keeps_the_calls_own_flags() {
    let context = generate_context();
    let slow = context.root.join("slow");
    context.user_config(&format!(
        "[trust]\npaths = [{:?}]\n\n[generator]\ntools_dir = {:?}\n\n[tools.nap]\ntimeout = \"1h\"\n",
        context.project.display().to_string(),
        context.tools.display().to_string(),
    ));
    write_request(
        &context,
        &json!({
            "name": "nap",
            "description": "Naps when told to.",
            "language": "bash",
            "implementation": format!("if [ -e {:?} ]; then sleep 3; fi; printf done", slow.display().to_string()),
            "tests": [{"name": "awake", "input": {}, "expect": {"result": "done"}}],
        }),
    );
    let output = context
        .with_tools()
        .args(["generate", "--json", "--request", "request.json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["status"], "registered", "{report}");
    std::fs::write(&slow, "").unwrap();
    let output = context
        .with_tools()
        .args(["run", "nap", "--timeout", "500ms"])
        .output()
        .unwrap();
    let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(envelope["error_code"], "TOOL_TIMEOUT", "{envelope}");
}
