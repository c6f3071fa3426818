//! `toolsmith list`: the examples, broken tools reported as problems, shadowing and the default directories.

use std::time::{Duration, Instant};

use crate::context::{TestContext, shell_tool, write_executable};

const EMPTY_SCHEMA: &str = r#"{"type": "object"}"#;

#[test]
fn examples_json() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().args(["list", "--json"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "name": "error_tool",
          "exposed_name": "custom_tool_error_tool",
          "description": "A tool that demonstrates error handling: fails on request",
          "path": "[EXAMPLES]/error_tool",
          "source": "[EXAMPLES]",
          "kind": "kodelet",
          "layer": "explicit",
          "input_schema": {
            "type": "object",
            "properties": {
              "should_fail": {
                "type": "boolean",
                "description": "Whether the tool should fail"
              },
              "message": {
                "type": "string",
                "description": "The error message to report"
              }
            },
            "required": [
              "should_fail"
            ]
          }
        },
        {
          "name": "git_info",
          "exposed_name": "custom_tool_git_info",
          "description": "Get git repository information: current branch, HEAD commit and the number of uncommitted changes",
          "path": "[EXAMPLES]/git_info",
          "source": "[EXAMPLES]",
          "kind": "kodelet",
          "layer": "explicit",
          "input_schema": {
            "type": "object",
            "properties": {
              "path": {
                "type": "string",
                "description": "Repository path (default: the current directory)"
              }
            }
          }
        },
        {
          "name": "hello",
          "exposed_name": "custom_tool_hello",
          "description": "Say hello to a person",
          "path": "[EXAMPLES]/hello",
          "source": "[EXAMPLES]",
          "kind": "kodelet",
          "layer": "explicit",
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
          }
        },
        {
          "name": "word_count",
          "exposed_name": "custom_tool_word_count",
          "description": "Count the lines, words and bytes of a file in the project, or only the lines.",
          "path": "[EXAMPLES]/word-count.md",
          "source": "[EXAMPLES]",
          "kind": "manifest",
          "layer": "explicit",
          "input_schema": {
            "type": "object",
            "properties": {
              "path": {
                "type": "string",
                "description": "The file, relative to the project directory",
                "minLength": 1
              },
              "lines_only": {
                "type": "boolean",
                "description": "Count only the lines",
                "default": false
              }
            },
            "required": [
              "path"
            ]
          }
        }
      ],
      "problems": [],
      "shadowed": []
    }
    ----- stderr -----
    "#);
}

#[test]
fn examples_table() {
    let context = TestContext::new();
    cli_snapshot!(context, context.with_examples().arg("list"), @"
    exit_code: 0
    ----- stdout -----
    NAME        DESCRIPTION                                                                                        PATH
    error_tool  A tool that demonstrates error handling: fails on request                                          [EXAMPLES]/error_tool
    git_info    Get git repository information: current branch, HEAD commit and the number of uncommitted changes  [EXAMPLES]/git_info
    hello       Say hello to a person                                                                              [EXAMPLES]/hello
    word_count  Count the lines, words and bytes of a file in the project, or only the lines.                      [EXAMPLES]/word-count.md
    ----- stderr -----
    ");
}

#[test]
fn broken_tools_are_problems_and_good_tools_still_list() {
    let context = TestContext::new();
    context.tool("good", &shell_tool("good", EMPTY_SCHEMA, "echo ok"));
    context.tool("hangs", "#!/bin/sh\nsleep 30\n");
    context.tool("garbage", "#!/bin/sh\necho 'this is not json'\n");
    context.tool(
        "nameless",
        "#!/bin/sh\necho '{\"description\": \"d\", \"input_schema\": {\"type\": \"object\"}}'\n",
    );
    context.tool(
        "fails",
        "#!/bin/sh\necho 'cannot describe myself' >&2\nexit 4\n",
    );
    context.tool("misnamed", &shell_tool("other_name", EMPTY_SCHEMA, "true"));
    context.tool("Bad.Name", &shell_tool("bad", EMPTY_SCHEMA, "true"));
    context.tool(
        "bad-schema",
        &shell_tool(
            "bad_schema",
            r#"{"type": "object", "properties": {"a": {"type": 5}}}"#,
            "true",
        ),
    );
    std::fs::write(context.tools.join("notes.txt"), "not executable").unwrap();
    context.tool(".hidden", "#!/bin/sh\nexit 1\n");
    let started = Instant::now();
    cli_snapshot!(context, context.with_tools().args(["list", "--json"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "name": "good",
          "exposed_name": "custom_tool_good",
          "description": "The good fixture",
          "path": "[TEMP]/tools/good",
          "source": "[TEMP]/tools",
          "kind": "kodelet",
          "layer": "explicit",
          "input_schema": {
            "type": "object"
          }
        }
      ],
      "problems": [
        {
          "path": "[TEMP]/tools/Bad.Name",
          "error": "file name is not a valid tool name: tool name `Bad.Name` must start with a lowercase letter"
        },
        {
          "path": "[TEMP]/tools/bad-schema",
          "error": "invalid `description` output: field `input_schema` is invalid: input_schema is not a valid JSON Schema: 5 is not valid under any of the schemas listed in the 'anyOf' keyword"
        },
        {
          "path": "[TEMP]/tools/fails",
          "error": "`description` exited with status 4 (stderr: cannot describe myself)"
        },
        {
          "path": "[TEMP]/tools/garbage",
          "error": "invalid `description` output: output is not JSON (starts with \"this is not json\"): expected ident at line 1 column 2"
        },
        {
          "path": "[TEMP]/tools/hangs",
          "error": "`description` did not finish within 1s and was killed"
        },
        {
          "path": "[TEMP]/tools/misnamed",
          "error": "declares name `other_name` but its file name makes it `misnamed`; rename the file or fix the name"
        },
        {
          "path": "[TEMP]/tools/nameless",
          "error": "invalid `description` output: field `name` is missing"
        }
      ],
      "shadowed": []
    }
    ----- stderr -----
    "#);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a hanging description must be cut at its probe timeout, took {:?}",
        started.elapsed()
    );
}

#[test]
fn later_directory_shadows_earlier_and_duplicates_are_problems() {
    let context = TestContext::new();
    let first = context.root.join("first");
    let second = context.root.join("second");
    write_executable(
        &first.join("greet"),
        &shell_tool("greet", EMPTY_SCHEMA, "echo first"),
    );
    write_executable(
        &second.join("greet"),
        &shell_tool("greet", EMPTY_SCHEMA, "echo second"),
    );
    write_executable(
        &second.join("file-read"),
        &shell_tool("file_read", EMPTY_SCHEMA, "true"),
    );
    write_executable(
        &second.join("file_read"),
        &shell_tool("file_read", EMPTY_SCHEMA, "true"),
    );
    cli_snapshot!(context, context.command().arg("--tools-dir").arg(&first).arg("--tools-dir").arg(&second).arg("list"), @r#"
        exit_code: 0
        ----- stdout -----
        NAME       DESCRIPTION            PATH
        file_read  The file_read fixture  [TEMP]/second/file-read
        greet      The greet fixture      [TEMP]/second/greet

        shadowed:
          greet at [TEMP]/first/greet (by [TEMP]/second/greet)

        problems:
          [TEMP]/second/file_read: tool `file_read` is already provided by `[TEMP]/second/file-read` in the same directory
        ----- stderr -----
        "#);
    cli_snapshot!(context, context.command().arg("--tools-dir").arg(&first).arg("--tools-dir").arg(&second).args(["run", "greet"]), @r#"
        exit_code: 0
        ----- stdout -----
        {
          "tool_success": true,
          "result": "second",
          "metadata": {
            "execution_time_ms": "[EXECUTION_TIME_MS]",
            "exit_code": 0,
            "stdout_truncated": false,
            "stderr": "",
            "stderr_truncated": false,
            "stdout_bytes": 7,
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
fn default_directories_user_then_project() {
    let context = TestContext::new();
    write_executable(
        &context.root.join("home/.config/toolsmith/tools/greet"),
        &shell_tool("greet", EMPTY_SCHEMA, "echo user"),
    );
    write_executable(
        &context.root.join("home/.config/toolsmith/tools/user_only"),
        &shell_tool("user_only", EMPTY_SCHEMA, "echo user"),
    );
    write_executable(
        &context.project.join(".toolsmith/tools/greet"),
        &shell_tool("greet", EMPTY_SCHEMA, "echo project"),
    );
    cli_snapshot!(context, context.command().arg("list"), @r#"
        exit_code: 0
        ----- stdout -----
        NAME       DESCRIPTION            PATH
        greet      The greet fixture      [TEMP]/project/.toolsmith/tools/greet
        user_only  The user_only fixture  [TEMP]/home/.config/toolsmith/tools/user_only

        shadowed:
          greet at [TEMP]/home/.config/toolsmith/tools/greet (by [TEMP]/project/.toolsmith/tools/greet)
        ----- stderr -----
        "#);
}

#[test]
fn missing_tools_dir_is_a_problem() {
    let context = TestContext::new();
    cli_snapshot!(context, context.command().args(["--tools-dir", "does-not-exist", "list"]), @"
    exit_code: 0
    ----- stdout -----
    problems:
      [TEMP]/project/does-not-exist: cannot read tool directory: No such file or directory (os error 2)
    ----- stderr -----
     WARN no tools found (searched: no tool directory exists)
    ");
}

/// Layer name and path of every tool, then of every shadowed tool, from `list --json`.
fn layers_of(context: &TestContext, command: &mut std::process::Command) -> Vec<String> {
    let output = command.args(["list", "--json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let listing: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let root = context.root.display().to_string();
    let mut rows = Vec::new();
    for (section, entries) in [
        ("tool", &listing["tools"]),
        ("shadowed", &listing["shadowed"]),
    ] {
        for entry in entries.as_array().unwrap() {
            rows.push(format!(
                "{section} {} {} {}",
                entry["name"].as_str().unwrap(),
                entry["layer"].as_str().unwrap(),
                entry["path"].as_str().unwrap().replace(&root, "[TEMP]"),
            ));
        }
    }
    rows
}

#[test]
fn layers_user_peers_project_config() {
    let context = TestContext::new();
    let tool = |path: &str, name: &str| {
        write_executable(
            &context.root.join(path).join(name),
            &shell_tool(name, EMPTY_SCHEMA, "echo hi"),
        );
    };
    tool("home/.config/toolsmith/tools", "greet");
    tool("home/.kodelet/tools", "greet");
    tool("home/.kodelet/tools", "kodelet_only");
    tool("project/.ikigai/tools", "greet");
    tool("project/.toolsmith/tools", "greet");
    tool("project/extra", "greet");
    context.project_file(
        ".toolsmith/config.toml",
        "[discovery]\ndirs = [\"../extra\"]\npeers = true\n",
    );
    assert_eq!(
        layers_of(&context, &mut context.command()),
        [
            "tool greet config [TEMP]/project/.toolsmith/../extra/greet",
            "tool kodelet_only kodelet-user [TEMP]/home/.kodelet/tools/kodelet_only",
            "shadowed greet kodelet-user [TEMP]/home/.kodelet/tools/greet",
            "shadowed greet user [TEMP]/home/.config/toolsmith/tools/greet",
            "shadowed greet ikigai-project [TEMP]/project/.ikigai/tools/greet",
            "shadowed greet project [TEMP]/project/.toolsmith/tools/greet",
        ]
    );

    // Peers are off by default.
    context.project_file(
        ".toolsmith/config.toml",
        "[discovery]\ndirs = [\"../extra\"]\n",
    );
    assert_eq!(
        layers_of(&context, &mut context.command()),
        [
            "tool greet config [TEMP]/project/.toolsmith/../extra/greet",
            "shadowed greet user [TEMP]/home/.config/toolsmith/tools/greet",
            "shadowed greet project [TEMP]/project/.toolsmith/tools/greet",
        ]
    );
}

#[test]
fn project_layer_is_the_git_work_tree() {
    let context = TestContext::new();
    std::fs::create_dir(context.project.join(".git")).unwrap();
    // A minimal repository: git2 recognizes HEAD, objects and refs.
    context.project_file(".git/HEAD", "ref: refs/heads/main\n");
    std::fs::create_dir_all(context.project.join(".git/objects")).unwrap();
    std::fs::create_dir_all(context.project.join(".git/refs")).unwrap();
    write_executable(
        &context.project.join(".toolsmith/tools/greet"),
        &shell_tool("greet", EMPTY_SCHEMA, "echo hi"),
    );
    let nested = context.project.join("src/deep");
    std::fs::create_dir_all(&nested).unwrap();
    assert_eq!(
        layers_of(&context, context.command().current_dir(&nested)),
        ["tool greet project [TEMP]/project/.toolsmith/tools/greet"]
    );
}

#[test]
fn second_listing_probes_nothing_unless_the_cache_is_off() {
    let context = TestContext::new();
    let counter = context.root.join("probes.log");
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\n  description) echo probed >> '{}'; printf '%s\\n' '{{\"name\": \"counted\", \"description\": \"Counts probes\", \"input_schema\": {{\"type\": \"object\"}}}}' ;;\nesac\n",
        counter.display()
    );
    let path = context.tool("counted", &script);
    // Older than the cache's racy margin, as a tool is when a session starts.
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let probes = || {
        std::fs::read_to_string(&counter)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let list = |extra: &[&str]| {
        let output = context
            .with_tools()
            .args(extra)
            .arg("list")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&output.stdout).contains("counted"));
    };
    list(&[]);
    assert_eq!(probes(), 1);
    assert!(
        context
            .root
            .join("home/.cache/toolsmith/discovery.json")
            .is_file()
    );
    list(&[]);
    assert_eq!(probes(), 1, "the warm listing probed");
    list(&["--no-cache"]);
    assert_eq!(probes(), 2);
    context.project_file(".toolsmith/config.toml", "[discovery]\ncache = false\n");
    list(&[]);
    assert_eq!(probes(), 3);
}
