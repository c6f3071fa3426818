//! `toolsmith show`: one tool in full, its effective limits and the policy verdict.

use crate::context::{TestContext, shell_tool};

#[test]
fn show_text() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["show", "hello"]), @r#"
    exit_code: 0
    ----- stdout -----
    name:          hello
    exposed name:  custom_tool_hello
    kind:          kodelet
    description:   Say hello to a person
    path:          [EXAMPLES]/hello
    source:        [EXAMPLES]
    annotations:   approval never, read_only false
    policy:        allowed
    sandbox:       network deny-if-possible, filesystem project-if-possible, syscalls filter
    isolation:     [ISOLATION]
    limits:
      timeout         30s ([limits])
      grace           2s
      cpu             unlimited
      memory          1GiB
      max_processes   256
      max_file_size   1GiB
      max_open_files  1024
      max_output      1MiB
      tmp_size        64MiB
    input schema:
      {
        "type": "object",
        "properties": {
          "name": {
            "type": "string",
            "description": "The name of the person"
          },
          "age": {
            "type": "integer",
            "description": "The age of the person"
          }
        },
        "required": [
          "name"
        ]
      }
    output schema: none
    tests:
      a name: input {"name":"Ada"}, expect {"result":"Hello, Ada!"}
      a name and an age: input {"name":"Ada","age":36}, expect {"result":"Hello, Ada! You are 36 years old."}
      no name: input {}, expect {"error_code":"INVALID_PARAMS"}
    ----- stderr -----
    "#);
}

/// `show` (text and `--json`) lists the tests a tool declares, each as declared: its name (or
/// `case N`), its input and what it expects (an omitted `expect` is its default, `success`).
#[test]
fn show_lists_declared_tests() {
    let context = TestContext::new();
    let tests = serde_json::json!([
        {"name": "two words", "input": {"text": "hello world"}, "expect": {"result": 2}},
        {"input": {"text": "hello"}, "expect": {"result_contains": "1"}},
        {"input": {}, "expect": {"error_code": "INVALID_PARAMS"}},
        {"input": {"text": ""}}
    ]);
    let description = serde_json::json!({
        "name": "count_words",
        "description": "Counts the words of a text.",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "tests": tests,
    });
    context.tool(
        "count-words",
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n  description) cat <<'JSON'\n{description}\nJSON\n  ;;\n  run) echo 2 ;;\nesac\n"
        ),
    );
    let output = context
        .with_tools()
        .args(["show", "count_words"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    let listed = stdout
        .split_once("\ntests:\n")
        .unwrap_or_else(|| panic!("no tests section: {stdout}"))
        .1;
    assert_eq!(
        listed,
        concat!(
            "  two words: input {\"text\":\"hello world\"}, expect {\"result\":2}\n",
            "  case 2: input {\"text\":\"hello\"}, expect {\"result_contains\":\"1\"}\n",
            "  case 3: input {}, expect {\"error_code\":\"INVALID_PARAMS\"}\n",
            "  case 4: input {\"text\":\"\"}, expect \"success\"\n",
        ),
        "{stdout}"
    );
    let output = context
        .with_tools()
        .args(["show", "count_words", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut declared = tests;
    declared[3]["expect"] = serde_json::json!("success");
    assert_eq!(document["tests"], declared, "{document}");
    // A tool that declares none says so (an ikigai tool cannot declare any).
    let output = context
        .with_examples()
        .args(["show", "word_stats", "--json"])
        .output()
        .unwrap();
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(document["tests"], serde_json::json!([]), "{document}");
}

#[test]
fn show_json_with_override_and_profile() {
    let context = TestContext::new();
    context.project_file(
        ".toolsmith/config.toml",
        "[limits]\ntimeout = \"20s\"\n\n[tools.hello]\ntimeout = \"5s\"\nmemory = \"unlimited\"\n",
    );
    cli_snapshot!(context, context.with_examples().args(["show", "custom_tool_hello", "--json", "--profile", "plan"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "name": "hello",
      "exposed_name": "custom_tool_hello",
      "kind": "kodelet",
      "description": "Say hello to a person",
      "path": "[EXAMPLES]/hello",
      "source": "[EXAMPLES]",
      "annotations": {
        "title": null,
        "approval": "never",
        "read_only": false
      },
      "input_schema": {
        "type": "object",
        "properties": {
          "name": {
            "type": "string",
            "description": "The name of the person"
          },
          "age": {
            "type": "integer",
            "description": "The age of the person"
          }
        },
        "required": [
          "name"
        ]
      },
      "output_schema": null,
      "tests": [
        {
          "name": "a name",
          "input": {
            "name": "Ada"
          },
          "expect": {
            "result": "Hello, Ada!"
          }
        },
        {
          "name": "a name and an age",
          "input": {
            "name": "Ada",
            "age": 36
          },
          "expect": {
            "result": "Hello, Ada! You are 36 years old."
          }
        },
        {
          "name": "no name",
          "input": {},
          "expect": {
            "error_code": "INVALID_PARAMS"
          }
        }
      ],
      "policy": {
        "allowed": false,
        "profile": "plan",
        "reason": "profile plan admits only read-only tools, and this one is not",
        "reason_code": "plan_needs_read_only"
      },
      "limits": {
        "timeout": "5s",
        "grace": "2s",
        "cpu": "unlimited",
        "memory": "unlimited",
        "max_processes": "256",
        "max_file_size": "1GiB",
        "max_open_files": "1024",
        "max_output": "1MiB",
        "tmp_size": "64MiB",
        "timeout_source": {
          "from": "override"
        }
      },
      "sandbox": {
        "network": "deny-if-possible",
        "filesystem": "project-if-possible",
        "syscalls": "filter",
        "user": null,
        "declared": {
          "network": null,
          "filesystem": null,
          "secrets": []
        },
        "secrets": [],
        "denied": [],
        "isolation": "[ISOLATION]",
        "not_enforced": "[NOT_ENFORCED]"
      },
      "shadowed": []
    }
    ----- stderr -----
    "#);
}

#[test]
fn show_unknown_tool() {
    let context = TestContext::new();
    context.tool("broken", "#!/bin/sh\nexit 3\n");
    context.tool("fine", &shell_tool("fine", r#"{"type": "object"}"#, "true"));
    cli_snapshot!(context, context.with_tools().args(["show", "broken"]), @r#"
    exit_code: 1
    ----- stdout -----
    ----- stderr -----
    error: no tool named "broken" in the tool directories
      [TEMP]/tools/broken: `description` exited with status 3; `--schema` also failed: `--schema` exited with status 3
    hint: `toolsmith list --all` shows every tool, and the files that failed to load
    "#);
}
