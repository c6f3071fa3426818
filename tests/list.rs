//! `toolsmith list`: the examples, broken tools reported as problems, shadowing and the default directories.

use std::time::{Duration, Instant};

use crate::context::{TestContext, ikigai_tool, shell_tool, write_executable};

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
          },
          "sandbox": {
            "declared": {},
            "network": "deny-if-possible",
            "filesystem": "project-if-possible",
            "denied": []
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
          },
          "sandbox": {
            "declared": {},
            "network": "deny-if-possible",
            "filesystem": "project-if-possible",
            "denied": []
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
          },
          "sandbox": {
            "declared": {},
            "network": "deny-if-possible",
            "filesystem": "project-if-possible",
            "denied": []
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
          },
          "sandbox": {
            "declared": {},
            "network": "deny-if-possible",
            "filesystem": "project-if-possible",
            "denied": []
          }
        },
        {
          "name": "word_stats",
          "exposed_name": "custom_tool_word_stats",
          "description": "Count the words, lines and characters of a text",
          "path": "[EXAMPLES]/word-stats-tool",
          "source": "[EXAMPLES]",
          "kind": "ikigai",
          "layer": "explicit",
          "input_schema": {
            "type": "object",
            "properties": {
              "text": {
                "type": "string",
                "description": "The text to measure"
              },
              "top": {
                "type": "integer",
                "description": "How many of the most frequent words to list",
                "minimum": 0,
                "default": 3
              }
            },
            "required": [
              "text"
            ]
          },
          "sandbox": {
            "declared": {},
            "network": "deny-if-possible",
            "filesystem": "project-if-possible",
            "denied": []
          },
          "output_schema": {
            "type": "object",
            "properties": {
              "words": {
                "type": "integer"
              },
              "lines": {
                "type": "integer"
              },
              "characters": {
                "type": "integer"
              },
              "most_frequent": {
                "type": "array",
                "items": {
                  "type": "string"
                }
              }
            },
            "required": [
              "words",
              "lines",
              "characters",
              "most_frequent"
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
    [EXAMPLES]:
      NAME        KIND      DESCRIPTION
      error_tool  kodelet   A tool that demonstrates error handling: fails on request
      git_info    kodelet   Get git repository information: current branch, HEAD commit and the number of uncommitted changes
      hello       kodelet   Say hello to a person
      word_count  manifest  Count the lines, words and bytes of a file in the project, or only the lines.
      word_stats  ikigai    Count the words, lines and characters of a text
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
          },
          "sandbox": {
            "declared": {},
            "network": "deny-if-possible",
            "filesystem": "project-if-possible",
            "denied": []
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
          "error": "invalid `description` output: field `input_schema` is invalid: the schema is not valid JSON Schema: /properties/a/type: expected a JSON Schema type name (array, boolean, integer, null, number, object or string), got 5"
        },
        {
          "path": "[TEMP]/tools/fails",
          "error": "`description` exited with status 4 (stderr: cannot describe myself); `--schema` also failed: `--schema` exited with status 4 (stderr: cannot describe myself)"
        },
        {
          "path": "[TEMP]/tools/garbage",
          "error": "invalid `description` output: output is not JSON (starts with \"this is not json\"): expected ident at line 1 column 2; `--schema` also failed: invalid `--schema` output: output is not JSON (starts with \"this is not json\"): expected ident at line 1 column 2"
        },
        {
          "path": "[TEMP]/tools/hangs",
          "error": "`description` did not finish within 3s and was killed"
        },
        {
          "path": "[TEMP]/tools/misnamed",
          "error": "declares name `other_name` but its file name makes it `misnamed`; rename the file or fix the name"
        },
        {
          "path": "[TEMP]/tools/nameless",
          "error": "invalid `description` output: field `name` is missing; `--schema` also failed: invalid `--schema` output: field `name` is missing"
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
    cli_snapshot!(context, context.command().arg("--tools-dir").arg(&first).arg("--tools-dir").arg(&second).arg("list"), @"
    exit_code: 0
    ----- stdout -----
    [TEMP]/second:
      NAME       KIND     DESCRIPTION
      file_read  kodelet  The file_read fixture
      greet      kodelet  The greet fixture
    ----- stderr -----
     WARN not listed: 1 tool shadowed, 1 file that could not be loaded; `toolsmith list --all` shows them
    ");
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
    context.own_project();
    write_executable(
        &context.project.join(".toolsmith/tools/greet"),
        &shell_tool("greet", EMPTY_SCHEMA, "echo project"),
    );
    cli_snapshot!(context, context.command().arg("list"), @"
    exit_code: 0
    ----- stdout -----
    [TEMP]/home/.config/toolsmith/tools:
      NAME       KIND     DESCRIPTION
      user_only  kodelet  The user_only fixture

    [TEMP]/project/.toolsmith/tools:
      NAME       KIND     DESCRIPTION
      greet      kodelet  The greet fixture
    ----- stderr -----
     WARN not listed: 1 tool shadowed; `toolsmith list --all` shows them
    ");
}

#[test]
fn missing_tools_dir_is_a_problem() {
    let context = TestContext::new();
    cli_snapshot!(context, context.command().args(["--tools-dir", "does-not-exist", "list"]), @"
    exit_code: 0
    ----- stdout -----
    ----- stderr -----
     WARN no tools found (searched: no tool directory exists)
     WARN not listed: 1 file that could not be loaded; `toolsmith list --all` shows them
    ");
}

/// The `--schema` answer of the ikigai seed, per-parameter `required` included.
const DB_QUERY_SCHEMA: &str = r#"{
  "name": "db_query",
  "description": "Query the customer database",
  "parameters": {
    "query": {
      "type": "string",
      "description": "What to look for",
      "required": true
    },
    "limit": {
      "type": "integer",
      "description": "At most this many rows",
      "default": 10
    }
  },
  "returns": {
    "type": "object",
    "properties": {
      "results": {"type": "array", "description": "The rows found"},
      "count": {"type": "integer", "description": "How many rows"}
    }
  }
}"#;

#[test]
fn ikigai_tool_is_listed_with_a_json_schema() {
    let context = TestContext::new();
    context.tool("db-query-tool", &ikigai_tool(DB_QUERY_SCHEMA, "cat"));
    cli_snapshot!(context, context.with_tools().args(["list", "--json"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "name": "db_query",
          "exposed_name": "custom_tool_db_query",
          "description": "Query the customer database",
          "path": "[TEMP]/tools/db-query-tool",
          "source": "[TEMP]/tools",
          "kind": "ikigai",
          "layer": "explicit",
          "input_schema": {
            "type": "object",
            "properties": {
              "query": {
                "type": "string",
                "description": "What to look for"
              },
              "limit": {
                "type": "integer",
                "description": "At most this many rows",
                "default": 10
              }
            },
            "required": [
              "query"
            ]
          },
          "sandbox": {
            "declared": {},
            "network": "deny-if-possible",
            "filesystem": "project-if-possible",
            "denied": []
          },
          "output_schema": {
            "type": "object",
            "properties": {
              "results": {
                "type": "array",
                "description": "The rows found"
              },
              "count": {
                "type": "integer",
                "description": "How many rows"
              }
            }
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
fn ikigai_tool_without_the_suffix_is_found_after_description_fails() {
    let context = TestContext::new();
    context.tool("db-query", &ikigai_tool(DB_QUERY_SCHEMA, "cat"));
    context.tool(
        "neither",
        "#!/bin/sh\necho \"unknown argument $1\" >&2\nexit 3\n",
    );
    cli_snapshot!(context, context.with_tools().arg("list"), @"
    exit_code: 0
    ----- stdout -----
    [TEMP]/tools:
      NAME      KIND    DESCRIPTION
      db_query  ikigai  Query the customer database
    ----- stderr -----
     WARN not listed: 1 file that could not be loaded; `toolsmith list --all` shows them
    ");
}

#[test]
fn bad_schemas_are_problems_and_good_tools_still_list() {
    let context = TestContext::new();
    context.tool("good", &shell_tool("good", EMPTY_SCHEMA, "echo ok"));
    context.tool(
        "no-schema",
        "#!/bin/sh\n[ \"$1\" = description ] && echo '{\"name\": \"no_schema\", \"description\": \"Takes anything\"}'\n",
    );
    context.tool(
        "string-root",
        &shell_tool("string_root", r#"{"type": "string"}"#, "true"),
    );
    context.tool(
        "one-of-root",
        &shell_tool(
            "one_of_root",
            r#"{"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}"#,
            "true",
        ),
    );
    context.tool(
        "misspelt-type",
        &shell_tool(
            "misspelt_type",
            r#"{"type": "object", "properties": {"a": {"type": "strnig"}}}"#,
            "true",
        ),
    );
    context.tool(
        "negative-length",
        &shell_tool(
            "negative_length",
            r#"{"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}"#,
            "true",
        ),
    );
    context.tool(
        "bad-returns-tool",
        &ikigai_tool(
            r#"{"name": "bad_returns", "description": "d", "returns": {"type": "strnig"}}"#,
            "true",
        ),
    );
    context.tool(
        "bad-required-tool",
        &ikigai_tool(
            r#"{"name": "bad_required", "description": "d", "parameters": {"p": {"type": "string", "required": "yes"}}}"#,
            "true",
        ),
    );
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
          },
          "sandbox": {
            "declared": {},
            "network": "deny-if-possible",
            "filesystem": "project-if-possible",
            "denied": []
          }
        },
        {
          "name": "no_schema",
          "exposed_name": "custom_tool_no_schema",
          "description": "Takes anything",
          "path": "[TEMP]/tools/no-schema",
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
      "problems": [
        {
          "path": "[TEMP]/tools/bad-required-tool",
          "error": "invalid `--schema` output: parameter `p`: `required` must be true or false, not a string"
        },
        {
          "path": "[TEMP]/tools/bad-returns-tool",
          "error": "invalid `--schema` output: field `returns` is invalid: the schema is not valid JSON Schema: /type: expected a JSON Schema type name (array, boolean, integer, null, number, object or string), got \"strnig\""
        },
        {
          "path": "[TEMP]/tools/misspelt-type",
          "error": "invalid `description` output: field `input_schema` is invalid: the schema is not valid JSON Schema: /properties/a/type: expected a JSON Schema type name (array, boolean, integer, null, number, object or string), got \"strnig\""
        },
        {
          "path": "[TEMP]/tools/negative-length",
          "error": "invalid `description` output: field `input_schema` is invalid: the schema is not valid JSON Schema: /properties/a/minLength: expected at least 0, got -1"
        },
        {
          "path": "[TEMP]/tools/one-of-root",
          "error": "invalid `description` output: field `input_schema` is invalid: the schema's root may not use `oneOf` (LLM APIs reject oneOf, anyOf and allOf at the top level); move it into a property"
        },
        {
          "path": "[TEMP]/tools/string-root",
          "error": "invalid `description` output: field `input_schema` is invalid: the schema's root must have \"type\": \"object\" (LLM APIs require it), found \"string\""
        }
      ],
      "shadowed": []
    }
    ----- stderr -----
    "#);
}

#[test]
fn kodelet_config_timeout_is_checked() {
    let context = TestContext::new();
    let with_config = |name: &str, config: &str| {
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  description) echo '{{\"name\": \"{name}\", \"description\": \"d\"}}' ;;\n  config) echo '{config}' ;;\n  *) echo \"usage\" >&2; exit 2 ;;\nesac\n"
        )
    };
    context.tool(
        "asks-minutes",
        &with_config("asks_minutes", r#"{"timeout": "30m"}"#),
    );
    context.tool(
        "asks-nothing",
        &with_config("asks_nothing", r#"{"other": 1}"#),
    );
    context.tool(
        "asks-badly",
        &with_config("asks_badly", r#"{"timeout": "soon"}"#),
    );
    context.tool(
        "asks-number",
        &with_config("asks_number", r#"{"timeout": 30}"#),
    );
    context.tool("no-config", &shell_tool("no_config", EMPTY_SCHEMA, "true"));
    cli_snapshot!(context, context.with_tools().arg("list"), @r#"
    exit_code: 0
    ----- stdout -----
    [TEMP]/tools:
      NAME          KIND     DESCRIPTION
      asks_badly    kodelet  d
      asks_minutes  kodelet  d
      asks_nothing  kodelet  d
      asks_number   kodelet  d
      no_config     kodelet  The no_config fixture
    ----- stderr -----
    "#);
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
    context.own_project();
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
        // Probes are confined (read-only): Landlock is off so that the probe can count itself.
        let output = context
            .with_tools()
            .env("TOOLSMITH_DISABLE_FEATURES", "landlock")
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

/// Acceptance 4 of the registry issue in one listing: shadowing, duplicates, a reserved name,
/// a script without the execute bit and three kinds of bad schema are each reported, and
/// none of them keeps the good tools from listing.
#[test]
fn acceptance_4_every_broken_case_is_reported_and_good_tools_still_list() {
    let context = TestContext::new();
    let higher = context.root.join("higher");
    context.tool("good", &shell_tool("good", EMPTY_SCHEMA, "echo ok"));
    context.tool("shared", &shell_tool("shared", EMPTY_SCHEMA, "echo lower"));
    write_executable(
        &higher.join("shared"),
        &shell_tool("shared", EMPTY_SCHEMA, "echo higher"),
    );
    context.tool("file-read", &shell_tool("file_read", EMPTY_SCHEMA, "true"));
    context.tool("file_read", &shell_tool("file_read", EMPTY_SCHEMA, "true"));
    context.tool(
        "custom_tool",
        &shell_tool("custom_tool", EMPTY_SCHEMA, "true"),
    );
    let forgot = context.tools.join("forgot");
    std::fs::write(&forgot, shell_tool("forgot", EMPTY_SCHEMA, "true")).unwrap();
    context.tool(
        "string_schema",
        &shell_tool("string_schema", r#"{"type": "string"}"#, "true"),
    );
    context.tool(
        "one_of",
        &shell_tool(
            "one_of",
            r#"{"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}"#,
            "true",
        ),
    );
    context.tool(
        "bad_keyword",
        &shell_tool(
            "bad_keyword",
            r#"{"type": "object", "properties": {"a": {"type": "strnig"}}}"#,
            "true",
        ),
    );
    let output = context
        .command()
        .arg("--tools-dir")
        .arg(&context.tools)
        .arg("--tools-dir")
        .arg(&higher)
        .args(["list", "--all", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let listing: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let names = |section: &str, key: &str| -> Vec<String> {
        listing[section]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| entry[key].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("tools", "name"), ["file_read", "good", "shared"]);
    let shared = &listing["tools"][2];
    assert!(shared["path"].as_str().unwrap().ends_with("higher/shared"));
    assert_eq!(names("shadowed", "name"), ["shared"]);
    let problems: Vec<(String, String)> = listing["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|problem| {
            let path = problem["path"].as_str().unwrap();
            let file = path.rsplit('/').next().unwrap().to_owned();
            (file, problem["error"].as_str().unwrap().to_owned())
        })
        .collect();
    let expect = [
        ("bad_keyword", "not valid JSON Schema"),
        ("custom_tool", "reserved"),
        ("file_read", "already provided by"),
        ("forgot", "not executable (chmod +x it)"),
        ("one_of", "oneOf"),
        ("string_schema", "\"type\": \"object\""),
    ];
    assert_eq!(problems.len(), expect.len(), "{problems:#?}");
    for (file, fragment) in expect {
        let message = problems
            .iter()
            .find(|(problem_file, _)| problem_file == file)
            .map(|(_, message)| message.as_str())
            .unwrap_or_else(|| panic!("no problem reported for {file}: {problems:#?}"));
        assert!(message.contains(fragment), "{file}: {message}");
    }
}
