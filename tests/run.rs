//! `toolsmith run`: the example tools, argument sources, validation, failures and the environment policy.

use std::io::Write;
use std::process::Stdio;

use serde_json::Value;

use crate::context::{TestContext, ikigai_tool, shell_tool};

const EMPTY_SCHEMA: &str = r#"{"type": "object"}"#;

#[test]
fn hello_success() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "hello", "--input", r#"{"name": "Ada", "age": 36}"#]), @r#"
        exit_code: 0
        ----- stdout -----
        {
          "tool_success": true,
          "result": "Hello, Ada! You are 36 years old.",
          "metadata": {
            "execution_time_ms": "[EXECUTION_TIME_MS]",
            "exit_code": 0,
            "stdout_truncated": false,
            "stderr": "",
            "stderr_truncated": false,
            "stdout_bytes": 34,
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
fn exposed_name_prefix() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "custom_tool_hello", "--input", r#"{"name": "Bob"}"#]), @r#"
        exit_code: 0
        ----- stdout -----
        {
          "tool_success": true,
          "result": "Hello, Bob!",
          "metadata": {
            "execution_time_ms": "[EXECUTION_TIME_MS]",
            "exit_code": 0,
            "stdout_truncated": false,
            "stderr": "",
            "stderr_truncated": false,
            "stdout_bytes": 12,
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
fn git_info_outside_a_repository_is_a_tool_level_error() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "git_info", "--input", "{}"]), @r#"
        exit_code: 0
        ----- stdout -----
        {
          "tool_success": true,
          "result": {
            "error": "not a git repository: ."
          },
          "metadata": {
            "execution_time_ms": "[EXECUTION_TIME_MS]",
            "exit_code": 0,
            "stdout_truncated": false,
            "stderr": "",
            "stderr_truncated": false,
            "stdout_bytes": 37,
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
fn git_info_inside_a_repository() {
    let context = TestContext::new();
    let git = |args: &[&str]| {
        #[expect(
            clippy::disallowed_methods,
            reason = "setting up a git fixture is not a tool run"
        )]
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&context.project)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "--quiet", "--initial-branch", "trunk"]);
    context.project_file("a.txt", "a\n");
    git(&["add", "a.txt"]);
    git(&[
        "-c",
        "user.name=T",
        "-c",
        "user.email=t@example.invalid",
        "commit",
        "--quiet",
        "-m",
        "first",
    ]);
    context.project_file("b.txt", "b\n");
    let output = context
        .with_examples()
        .args(["run", "git_info"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(envelope["tool_success"], true);
    assert_eq!(envelope["result"]["branch"], "trunk");
    assert_eq!(envelope["result"]["uncommitted_changes"], 1);
    assert_eq!(envelope["result"]["commit"].as_str().unwrap().len(), 40);
}

#[test]
fn error_tool_success() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "error_tool", "--input", r#"{"should_fail": false}"#]), @r#"
        exit_code: 0
        ----- stdout -----
        {
          "tool_success": true,
          "result": {
            "status": "ok",
            "message": "the tool ran without error"
          },
          "metadata": {
            "execution_time_ms": "[EXECUTION_TIME_MS]",
            "exit_code": 0,
            "stdout_truncated": false,
            "stderr": "",
            "stderr_truncated": false,
            "stdout_bytes": 58,
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
fn error_tool_failure_carries_its_structured_error() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "error_tool", "--input", r#"{"should_fail": true, "message": "disk on fire"}"#]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "disk on fire",
      "error_code": "TOOL_CRASHED",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 1,
        "stdout_truncated": false,
        "stdout": "{\"error\": \"disk on fire\", \"details\": \"should_fail was true\"}\n",
        "stderr": "error_tool: failing on request\n",
        "stderr_truncated": false,
        "stdout_bytes": 61,
        "stderr_bytes": 31,
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
fn unknown_tool() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "nope"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "No tool named \"nope\" was found in the tool directories.",
      "error_code": "TOOL_NOT_FOUND",
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
    hint: `toolsmith list --all` shows every tool, and the files that failed to load
    "#);
}

#[test]
fn invalid_params_missing_required_name() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "hello", "--input", r#"{"age": "old"}"#]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Invalid arguments for tool hello: /: missing required property \"name\"; /age: expected integer, got \"old\" (a string).",
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
    ----- stderr -----
    "#);
}

#[test]
fn input_from_stdin() {
    let context = TestContext::new();
    let mut child = context
        .with_examples()
        .args(["run", "hello", "--input", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"name": "Stdin"}"#)
        .unwrap();
    let output = child.wait_with_output().unwrap();
    context.insta_settings().bind(|| {
        insta::assert_snapshot!(context.render_output(&output), @r#"
            exit_code: 0
            ----- stdout -----
            {
              "tool_success": true,
              "result": "Hello, Stdin!",
              "metadata": {
                "execution_time_ms": "[EXECUTION_TIME_MS]",
                "exit_code": 0,
                "stdout_truncated": false,
                "stderr": "",
                "stderr_truncated": false,
                "stdout_bytes": 14,
                "stderr_bytes": 0,
                "cpu_time_ms": "[CPU_TIME_MS]",
                "peak_rss_kb": "[PEAK_RSS_KB]",
                "escalated": false,
                "backend": "[BACKEND]"
              }
            }
            ----- stderr -----
            "#);
    });
}

#[test]
fn input_from_file() {
    let context = TestContext::new();
    context.project_file("args.json", r#"{"name": "File", "age": 7}"#);
    cli_snapshot!(context, context.with_examples().args(["run", "hello", "--input", "@args.json"]), @r#"
        exit_code: 0
        ----- stdout -----
        {
          "tool_success": true,
          "result": "Hello, File! You are 7 years old.",
          "metadata": {
            "execution_time_ms": "[EXECUTION_TIME_MS]",
            "exit_code": 0,
            "stdout_truncated": false,
            "stderr": "",
            "stderr_truncated": false,
            "stdout_bytes": 34,
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
fn input_file_missing() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "hello", "--input", "@missing.json"]), @r#"
        exit_code: 2
        ----- stdout -----
        ----- stderr -----
        error: cannot read input file missing.json: No such file or directory (os error 2)
        "#);
}

#[test]
fn input_not_json_is_a_usage_error() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "hello", "--input", "{name: Ada}"]), @r#"
        exit_code: 2
        ----- stdout -----
        ----- stderr -----
        error: the input from --input is not valid JSON: key must be a string at line 1 column 2
        hint: pass a JSON object, e.g. --input '{"name": "Ada"}'
        "#);
}

#[test]
fn bad_flag_value_is_a_usage_error() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "hello", "--timeout", "5 parsecs"]), @r#"
        exit_code: 2
        ----- stdout -----
        ----- stderr -----
        error: invalid value '5 parsecs' for '--timeout <DUR>': expected a duration such as `500ms`, `30s`, `2m` or `1h` (a plain number is seconds)

        For more information, try '--help'.
        "#);
}

#[test]
fn plain_text_result_and_crash_with_stderr() {
    let context = TestContext::new();
    context.tool(
        "crasher",
        &shell_tool(
            "crasher",
            EMPTY_SCHEMA,
            "echo 'partial output'; echo 'fatal: the widget broke' >&2; exit 3",
        ),
    );
    cli_snapshot!(context, context.with_tools().args(["run", "crasher"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool crasher exited with status 3: fatal: the widget broke.",
      "error_code": "TOOL_CRASHED",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 3,
        "stdout_truncated": false,
        "stdout": "partial output\n",
        "stderr": "fatal: the widget broke\n",
        "stderr_truncated": false,
        "stdout_bytes": 15,
        "stderr_bytes": 24,
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
fn timeout_flag() {
    let context = TestContext::new();
    context.tool("sleepy", &shell_tool("sleepy", EMPTY_SCHEMA, "sleep 30"));
    cli_snapshot!(context, context.with_tools().args(["run", "sleepy", "--timeout", "500ms"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool sleepy did not finish within 500ms and was killed.",
      "error_code": "TOOL_TIMEOUT",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "signal": 15,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 0,
        "stderr_bytes": 0,
        "cpu_time_ms": "[CPU_TIME_MS]",
        "peak_rss_kb": "[PEAK_RSS_KB]",
        "limit": "timeout",
        "escalated": false,
        "backend": "[BACKEND]"
      }
    }
    ----- stderr -----
    "#);
}

#[test]
fn tool_that_cannot_start_explains_why_it_is_not_found() {
    let context = TestContext::new();
    context.tool("vanishing", "#!/nonexistent/interpreter\n");
    cli_snapshot!(context, context.with_tools().args(["run", "vanishing"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool vanishing could not be loaded from [TEMP]/tools/vanishing: `description` could not be started: failed to start `[TEMP]/tools/vanishing` (execve): No such file or directory (os error 2).",
      "error_code": "TOOL_NOT_FOUND",
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
    hint: `toolsmith list --all` shows every tool, and the files that failed to load
    "#);
}

#[test]
fn parent_environment_does_not_leak() {
    let context = TestContext::new();
    context.tool(
        "show_env",
        &shell_tool("show_env", EMPTY_SCHEMA, "env | sort"),
    );
    let output = context
        .with_tools()
        .env("SECRET_TOKEN", "hunter2")
        .args(["run", "show_env"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
    let environment = envelope["result"].as_str().unwrap();
    assert!(!environment.contains("SECRET_TOKEN"), "{environment}");
    assert!(!environment.contains("hunter2"), "{environment}");
    assert!(environment.contains("PATH="), "{environment}");
    assert!(environment.contains("HOME="), "{environment}");
}

#[test]
fn config_env_policy_allows_and_sets() {
    let context = TestContext::new();
    context.tool(
        "show_env",
        &shell_tool("show_env", EMPTY_SCHEMA, "env | sort"),
    );
    context.project_file(
        ".toolsmith/config.toml",
        "[env]\nallow = [\"PATH\", \"SECRET_TOKEN\"]\nset = { GREETING = \"hi\" }\n",
    );
    let output = context
        .with_tools()
        .env("SECRET_TOKEN", "hunter2")
        .args(["run", "show_env"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
    let environment = envelope["result"].as_str().unwrap();
    assert!(
        environment.contains("SECRET_TOKEN=hunter2"),
        "{environment}"
    );
    assert!(environment.contains("GREETING=hi"), "{environment}");
    // `XDG_CACHE_HOME` (the tool's own cache, issue 26) is toolsmith's, not the operator's.
    assert!(
        !environment.lines().any(|line| line.starts_with("HOME=")),
        "{environment}"
    );
}

/// An ikigai tool whose `returns` promises `{"count": <integer>}`; its body
/// decides what it really prints.
fn counting_tool(body: &str) -> String {
    ikigai_tool(
        r#"{"name": "counter", "description": "Counts", "parameters": {"text": {"type": "string", "required": true}}, "returns": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}}"#,
        body,
    )
}

#[test]
fn ikigai_tool_runs_without_argument_with_json_on_stdin() {
    let context = TestContext::new();
    context.tool(
        "echo-args-tool",
        &ikigai_tool(
            r#"{"name": "echo_args", "description": "Echoes its arguments", "parameters": {"text": {"type": "string", "required": true}, "times": {"type": "integer", "default": 2}}}"#,
            r#"printf '{"stdin": %s, "argc": %d}\n' "$(cat)" "$#""#,
        ),
    );
    cli_snapshot!(context, context.with_tools().args(["run", "echo_args", "--input", r#"{"text": "hi"}"#]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": {
        "stdin": {
          "text": "hi",
          "times": 2
        },
        "argc": 0
      },
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 46,
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
fn ikigai_example_fills_defaults_and_meets_its_returns() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["run", "custom_tool_word_stats", "--input", r#"{"text": "to be or not to be\nthat is the question"}"#]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": {
        "words": 10,
        "lines": 2,
        "characters": 39,
        "most_frequent": [
          "be",
          "to",
          "is"
        ]
      },
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 81,
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
fn result_that_breaks_returns_is_invalid_output() {
    let context = TestContext::new();
    context.tool(
        "counter-tool",
        &counting_tool(r#"echo '{"count": "three"}'"#),
    );
    cli_snapshot!(context, context.with_tools().args(["run", "counter", "--input", r#"{"text": "a b c"}"#]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool counter returned a result that does not match its output schema: /count: expected integer, got \"three\" (a string).",
      "error_code": "INVALID_OUTPUT",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 19,
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
fn ikigai_operation_error_with_exit_zero_is_a_success() {
    let context = TestContext::new();
    context.tool(
        "counter-tool",
        &counting_tool(
            r#"echo '{"error": "Database connection not configured", "error_code": "MISSING_CREDENTIALS"}'"#,
        ),
    );
    cli_snapshot!(context, context.with_tools().args(["run", "counter", "--input", r#"{"text": "a"}"#]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": {
        "error": "Database connection not configured",
        "error_code": "MISSING_CREDENTIALS"
      },
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 85,
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
fn invalid_params_list_every_violation_and_nothing_runs() {
    let context = TestContext::new();
    let marker = context.root.join("ran");
    context.tool(
        "strict",
        &shell_tool(
            "strict",
            r#"{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}, "color": {"enum": ["red", "green"]}}, "required": ["name"], "additionalProperties": false}"#,
            &format!("touch {}", marker.display()),
        ),
    );
    cli_snapshot!(context, context.with_tools().args(["run", "strict", "--input", r#"{"age": "x", "color": "blue", "nickname": "Al"}"#]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Invalid arguments for tool strict: /: unexpected property \"nickname\" (the schema allows no others); /: missing required property \"name\"; /age: expected integer, got \"x\" (a string); /color: expected one of [\"red\",\"green\"], got \"blue\".",
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
    ----- stderr -----
    "#);
    assert!(!marker.exists(), "the tool ran despite invalid arguments");
}

/// A Kodelet tool that asks for `timeout` with `config` and sleeps 3 s.
fn sleeper_asking_for(timeout: &str) -> String {
    format!(
        "#!/bin/sh\ncase \"$1\" in\n  description) echo '{{\"name\": \"sleeper\", \"description\": \"Sleeps 3 s\"}}' ;;\n  config) echo '{{\"timeout\": \"{timeout}\"}}' ;;\n  run) sleep 3; echo done ;;\nesac\n"
    )
}

/// Runs `sleeper` with `flags` and `env` and returns its envelope.
fn run_sleeper(context: &TestContext, flags: &[&str], env: &[(&str, &str)]) -> Value {
    let output = context
        .with_tools()
        .envs(env.iter().copied())
        .args(["run", "sleeper", "--input", "{}"])
        .args(flags)
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn operator_timeout_flag_beats_a_shorter_request() {
    let context = TestContext::new();
    context.tool("sleeper", &sleeper_asking_for("1s"));
    // The tool asks for 1 s and sleeps 3 s: finishing proves the operator's
    // explicit `--timeout` won over the tool's own request.
    let envelope = run_sleeper(&context, &["--timeout", "10s"], &[]);
    assert_eq!(envelope["tool_success"], true, "{envelope}");
    assert_eq!(envelope["result"], "done");
}

#[test]
fn tool_requested_timeout_applies_without_an_operator_timeout() {
    let context = TestContext::new();
    context.tool("sleeper", &sleeper_asking_for("1s"));
    // The tool sleeps 3 s: a timeout proves its own 1 s request replaced the
    // 30 s default.
    let envelope = run_sleeper(&context, &[], &[]);
    assert_eq!(
        envelope["error"], "Tool sleeper did not finish within 1s and was killed.",
        "{envelope}"
    );
}

#[test]
fn operator_timeout_flag_caps_a_longer_request() {
    let context = TestContext::new();
    context.tool("sleeper", &sleeper_asking_for("30m"));
    let envelope = run_sleeper(&context, &["--timeout", "500ms"], &[]);
    assert_eq!(
        envelope["error"], "Tool sleeper did not finish within 500ms and was killed.",
        "{envelope}"
    );
}

#[test]
fn tool_requested_timeout_replaces_the_configured_default() {
    let context = TestContext::new();
    context.tool("sleeper", &sleeper_asking_for("1m"));
    let envelope = run_sleeper(&context, &[], &[("TOOLSMITH_TIMEOUT", "1s")]);
    assert_eq!(envelope["tool_success"], true, "{envelope}");
    assert_eq!(envelope["result"], "done");
}

#[test]
fn max_timeout_caps_a_tool_request() {
    let context = TestContext::new();
    context.tool("sleeper", &sleeper_asking_for("1h"));
    context.project_file(
        ".toolsmith/config.toml",
        "[limits]\ntimeout = \"10s\"\nmax_timeout = \"1s\"\n",
    );
    let envelope = run_sleeper(&context, &[], &[]);
    assert_eq!(
        envelope["error"], "Tool sleeper did not finish within 1s and was killed.",
        "{envelope}"
    );
}
