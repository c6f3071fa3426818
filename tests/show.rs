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
    sandbox:       network allow, filesystem full, syscalls filter
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
    ----- stderr -----
    "#);
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
      "path": "[EXAMPLES]/hello",
      "source": "[EXAMPLES]",
      "layer": "explicit",
      "probed": false,
      "policy": {
        "allowed": false,
        "profile": "plan",
        "reason": "profile plan admits only read-only tools, and this one is not",
        "reason_code": "plan_needs_read_only"
      }
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
