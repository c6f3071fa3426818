//! Policy: disabled and allowed lists, the `plan` and `unattended` profiles, and per-tool overrides.

use crate::context::{TestContext, ikigai_tool, shell_tool};

const EMPTY_SCHEMA: &str = r#"{"type": "object"}"#;

/// A tool that leaves a marker file behind when it runs, so a test can prove
/// that a denied call started no process.
fn marker_tool(context: &TestContext, name: &str) -> std::path::PathBuf {
    let marker = context.outbox().join(format!("{name}.ran"));
    context.tool(
        name,
        &shell_tool(
            name,
            EMPTY_SCHEMA,
            &format!("touch {} && echo done", marker.display()),
        ),
    );
    marker
}

#[test]
fn plan_profile_denies_a_tool_that_is_not_read_only_and_runs_nothing() {
    let context = TestContext::new();
    let marker = marker_tool(&context, "writer");
    cli_snapshot!(context, context.with_tools().args(["run", "writer", "--profile", "plan"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool writer may not be called: profile plan admits only read-only tools, and this one is not.",
      "error_code": "POLICY_DENIED",
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
    ----- stderr -----
    "#);
    assert!(!marker.exists(), "a denied call must start no process");

    // Without the profile, the same call runs, which proves the marker works.
    let output = context
        .with_tools()
        .args(["run", "writer"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(marker.exists());
}

/// Issue 25, finding 6: an executable declares `read_only` and `approval` as a manifest does
/// (Kodelet in its description, ikigai in its schema); `plan` admits the one that says it only
/// reads, and `unattended` refuses the one that needs approval; MCP sees the hints.
#[test]
fn executables_declare_annotations_that_profiles_honour() {
    let context = TestContext::new();
    context.tool(
        "reader",
        "#!/bin/sh\ncase \"$1\" in\n  description) echo '{\"name\": \"reader\", \"description\": \"Reads.\", \"input_schema\": {\"type\": \"object\"}, \"read_only\": true}' ;;\n  run) echo read ;;\nesac\n",
    );
    context.tool(
        "careful-tool",
        &ikigai_tool(
            r#"{"name": "careful", "description": "Asks first.", "parameters": {}, "approval": "always"}"#,
            "echo careful",
        ),
    );
    let marker = marker_tool(&context, "writer");
    cli_snapshot!(context, context.with_tools().args(["list", "--profile", "plan", "--all"]), @"
    exit_code: 0
    ----- stdout -----
    [TEMP]/tools:
      NAME    KIND     DESCRIPTION
      reader  kodelet  Reads.

    denied:
      careful at [TEMP]/tools/careful-tool: profile plan admits only read-only tools, and this one is not
      writer at [TEMP]/tools/writer: profile plan admits only read-only tools, and this one is not
    ----- stderr -----
    ");
    let output = context
        .with_tools()
        .args(["run", "reader", "--profile", "plan"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("\"result\": \"read\""));
    cli_snapshot!(context, context.with_tools().args(["list", "--profile", "unattended", "--all"]), @"
    exit_code: 0
    ----- stdout -----
    [TEMP]/tools:
      NAME    KIND     DESCRIPTION
      reader  kodelet  Reads.
      writer  kodelet  The writer fixture

    denied:
      careful at [TEMP]/tools/careful-tool: profile unattended admits only tools that never need approval, and this one's approval is `always`
    ----- stderr -----
    ");
    cli_snapshot!(context, context.with_tools().args(["export", "--format", "mcp"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "name": "custom_tool_careful",
          "description": "Asks first.",
          "inputSchema": {
            "type": "object",
            "properties": {}
          },
          "annotations": {
            "destructiveHint": false
          }
        },
        {
          "name": "custom_tool_reader",
          "description": "Reads.",
          "inputSchema": {
            "type": "object"
          },
          "annotations": {
            "readOnlyHint": true
          }
        },
        {
          "name": "custom_tool_writer",
          "description": "The writer fixture",
          "inputSchema": {
            "type": "object"
          }
        }
      ]
    }
    ----- stderr -----
    "#);
    assert!(!marker.exists(), "no listing runs a tool");
}

#[test]
fn profile_from_environment_and_config_and_flag_none_lifts_it() {
    let context = TestContext::new();
    let marker = marker_tool(&context, "writer");
    let status = |command: &mut std::process::Command| command.output().unwrap().status.code();
    assert_eq!(
        status(
            context
                .with_tools()
                .env("TOOLSMITH_PROFILE", "plan")
                .args(["run", "writer"])
        ),
        Some(1)
    );
    context.project_file(".toolsmith/config.toml", "[policy]\nprofile = \"plan\"\n");
    assert_eq!(
        status(context.with_tools().args(["run", "writer"])),
        Some(1)
    );
    assert!(!marker.exists());
    assert_eq!(
        status(
            context
                .with_tools()
                .args(["run", "writer", "--profile", "none"])
        ),
        Some(0)
    );
    assert!(marker.exists());
}

#[test]
fn unattended_profile_admits_tools_without_approval() {
    // Executables declare no annotations, so they never need approval.
    let context = TestContext::new();
    marker_tool(&context, "writer");
    let output = context
        .with_tools()
        .args(["run", "writer", "--profile", "unattended"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn disabled_and_not_allowed_tools_are_denied_and_listed_only_with_all() {
    let context = TestContext::new();
    let disabled_marker = marker_tool(&context, "off");
    marker_tool(&context, "on");
    marker_tool(&context, "other");
    context.tool("broken", "#!/bin/sh\necho nope\n");
    context.project_file(
        ".toolsmith/config.toml",
        "[policy]\nallowed = [\"on\", \"off\"]\n\n[tools.off]\ndisabled = true\n",
    );
    cli_snapshot!(context, context.with_tools().args(["run", "off"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool off may not be called: disabled by config.",
      "error_code": "POLICY_DENIED",
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
    ----- stderr -----
    "#);
    assert!(!disabled_marker.exists());
    cli_snapshot!(context, context.with_tools().arg("list"), @r#"
    exit_code: 0
    ----- stdout -----
    [TEMP]/tools:
      NAME  KIND     DESCRIPTION
      on    kodelet  The on fixture
    ----- stderr -----
     WARN not listed: 3 tools denied by policy; `toolsmith list --all` shows them
    "#);
    cli_snapshot!(context, context.with_tools().args(["list", "--all"]), @r#"
    exit_code: 0
    ----- stdout -----
    [TEMP]/tools:
      NAME  KIND     DESCRIPTION
      on    kodelet  The on fixture

    denied:
      broken at [TEMP]/tools/broken: not in the allowed list (not run: no description)
      off at [TEMP]/tools/off: disabled by config (not run: no description)
      other at [TEMP]/tools/other: not in the allowed list (not run: no description)
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.with_tools().args(["list", "--all", "--json"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "name": "on",
          "exposed_name": "custom_tool_on",
          "description": "The on fixture",
          "path": "[TEMP]/tools/on",
          "source": "[TEMP]/tools",
          "kind": "kodelet",
          "layer": "explicit",
          "input_schema": {
            "type": "object"
          },
          "sandbox": {
            "declared": {},
            "network": "deny-if-possible",
            "filesystem": "project-if-possible",
            "denied": []
          }
        }
      ],
      "problems": [],
      "shadowed": [],
      "denied": [
        {
          "name": "broken",
          "exposed_name": "custom_tool_broken",
          "path": "[TEMP]/tools/broken",
          "source": "[TEMP]/tools",
          "layer": "explicit",
          "probed": false,
          "reason": "not in the allowed list",
          "reason_code": "not_allowed"
        },
        {
          "name": "off",
          "exposed_name": "custom_tool_off",
          "path": "[TEMP]/tools/off",
          "source": "[TEMP]/tools",
          "layer": "explicit",
          "probed": false,
          "reason": "disabled by config",
          "reason_code": "disabled"
        },
        {
          "name": "other",
          "exposed_name": "custom_tool_other",
          "path": "[TEMP]/tools/other",
          "source": "[TEMP]/tools",
          "layer": "explicit",
          "probed": false,
          "reason": "not in the allowed list",
          "reason_code": "not_allowed"
        }
      ]
    }
    ----- stderr -----
    "#);
}

#[test]
fn tool_timeout_override_beats_limits_timeout() {
    let context = TestContext::new();
    context.tool("sleepy", &shell_tool("sleepy", EMPTY_SCHEMA, "sleep 5"));
    context.project_file(
        ".toolsmith/config.toml",
        "[limits]\ntimeout = \"30s\"\n\n[tools.sleepy]\ntimeout = \"300ms\"\ngrace = \"100ms\"\n",
    );
    let output = context
        .with_tools()
        .args(["run", "sleepy"])
        .output()
        .unwrap();
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(envelope["error_code"], "TOOL_TIMEOUT", "{envelope}");
    assert_eq!(
        envelope["error"],
        "Tool sleepy did not finish within 300ms and was killed."
    );
    // A `run` flag beats the tool's section in turn.
    let output = context
        .with_tools()
        .args(["run", "sleepy", "--timeout", "200ms"])
        .output()
        .unwrap();
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        envelope["error"],
        "Tool sleepy did not finish within 200ms and was killed."
    );
}

#[test]
fn tool_env_override() {
    let context = TestContext::new();
    context.tool(
        "env_dump",
        &shell_tool("env_dump", EMPTY_SCHEMA, "echo \"$GREETING-$LC_ALL\""),
    );
    context.project_file(
        ".toolsmith/config.toml",
        "[env]\nset = { LC_ALL = \"C\", GREETING = \"hi\" }\n\n[tools.env-dump]\nenv = { set = { GREETING = \"hello\" } }\n",
    );
    let output = context
        .with_tools()
        .args(["run", "env_dump"])
        .output()
        .unwrap();
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(envelope["result"], "hello-C", "{envelope}");
}

#[test]
fn bad_policy_config_names_the_key() {
    let context = TestContext::new();
    context.project_file(".toolsmith/config.toml", "[policy]\nprofile = \"yolo\"\n");
    cli_snapshot!(context, context.with_tools().arg("list"), @r#"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: invalid value "yolo" for policy.profile in ./.toolsmith/config.toml: unknown profile `yolo` (expected plan or unattended)
    "#);
}
