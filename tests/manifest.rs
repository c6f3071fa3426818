//! Nanocoder manifests (`NAME.md`): the proposal's `k8s_pods` example with a fake `kubectl`, frontmatter errors next to good tools, and exit codes as information.

use std::fs;

use crate::context::{TestContext, write_executable};

/// The proposal's example, verbatim but for the file name's `-`.
const K8S_PODS: &str = r#"---
name: k8s_pods
description: List pods in a Kubernetes namespace. Returns kubectl output as text.
parameters:
  namespace:
    type: string
    required: true
    description: The Kubernetes namespace
    pattern: ^[a-z0-9-]+$
    maxLength: 63
  selector:
    type: string
    description: Optional label selector (e.g. "app=api")
approval: never
read_only: true
---
kubectl get pods -n {{ namespace }} {{# selector }}-l "{{ selector }}"{{/ selector }}
"#;

/// A context whose `PATH` starts with a fake `kubectl` that prints each
/// argument in brackets, one per line.
fn with_fake_kubectl() -> (TestContext, std::ffi::OsString) {
    let context = TestContext::new();
    fs::write(context.tools.join("k8s-pods.md"), K8S_PODS).unwrap();
    let bin = context.root.join("bin");
    write_executable(
        &bin.join("kubectl"),
        "#!/bin/sh\nfor argument; do printf '[%s]\\n' \"$argument\"; done\n",
    );
    let mut path = bin.into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    (context, path)
}

#[test]
fn k8s_pods_is_listed_with_its_schema() {
    let (context, path) = with_fake_kubectl();
    cli_snapshot!(context, context.with_tools().env("PATH", &path).args(["list", "--json"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "name": "k8s_pods",
          "exposed_name": "custom_tool_k8s_pods",
          "description": "List pods in a Kubernetes namespace. Returns kubectl output as text.",
          "path": "[TEMP]/tools/k8s-pods.md",
          "source": "[TEMP]/tools",
          "kind": "manifest",
          "layer": "explicit",
          "input_schema": {
            "type": "object",
            "properties": {
              "namespace": {
                "type": "string",
                "description": "The Kubernetes namespace",
                "pattern": "^[a-z0-9-]+$",
                "maxLength": 63
              },
              "selector": {
                "type": "string",
                "description": "Optional label selector (e.g. \"app=api\")"
              }
            },
            "required": [
              "namespace"
            ]
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
      "shadowed": []
    }
    ----- stderr -----
    "#);
}

#[test]
fn k8s_pods_runs_with_every_value_quoted() {
    let (context, path) = with_fake_kubectl();
    cli_snapshot!(context, context.with_tools().env("PATH", &path).args(["run", "k8s_pods", "--input", r#"{"namespace": "prod", "selector": "app=api; echo $(id) `id` \"x\""}"#]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": "[get]\n[pods]\n[-n]\n[prod]\n[-l]\n[app=api; echo $(id) `id` \"x\"]",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 61,
        "stderr_bytes": 0,
        "cpu_time_ms": "[CPU_TIME_MS]",
        "peak_rss_kb": "[PEAK_RSS_KB]",
        "escalated": false,
        "backend": "[BACKEND]"
      }
    }
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.with_tools().env("PATH", &path).args(["run", "custom_tool_k8s_pods", "--input", r#"{"namespace": "kube-system"}"#]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": "[get]\n[pods]\n[-n]\n[kube-system]",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 32,
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
fn k8s_pods_validates_before_running() {
    let (context, path) = with_fake_kubectl();
    cli_snapshot!(context, context.with_tools().env("PATH", &path).args(["run", "k8s_pods", "--input", r#"{"namespace": "Prod; rm -rf /"}"#]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Invalid arguments for tool k8s_pods: /namespace: expected a string matching the pattern \"^[a-z0-9-]+$\", got \"Prod; rm -rf /\".",
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
fn frontmatter_errors_are_problems_and_good_tools_still_load() {
    let context = TestContext::new();
    let write = |file: &str, text: &str| fs::write(context.tools.join(file), text).unwrap();
    write(
        "good.md",
        "---\nname: good\ndescription: Prints a greeting\nparameters:\n  who:\n    type: string\n    default: world\n---\necho hello {{ who }}\n",
    );
    write("no-fence.md", "name: no_fence\n");
    write("bad-name.md", "---\nname: K8s\ndescription: x\n---\necho\n");
    write(
        "bad-fields.md",
        "---\nname: bad_fields\ndescription: x\ntimeout_ms: 400000\napproval: sometimes\nparameters:\n  namespace:\n    type: integer\n    pattern: ^a$\n  count:\n    type: float\n  level:\n    type: number\n    min: 5\n    max: 1\n    default: 9\n  mode:\n    type: string\n    enum: [a, b]\n    default: c\n  tags:\n    type: string\n    items: {type: string}\n---\necho\n",
    );
    write(
        "bad-yaml.md",
        "---\nname: bad_yaml\ndescription: [x\n---\necho\n",
    );
    write(
        "bad-body.md",
        "---\nname: bad_body\ndescription: x\nparameters:\n  a:\n    type: string\n---\necho {{# a }}\necho {{ b }}\n",
    );
    // An unknown top-level key is a warning since issue 26 (Nanocoder ignores it); one inside
    // a parameter, a misspelt constraint, is still refused.
    write(
        "unknown-key.md",
        "---\nname: unknown_key\ndescription: x\nparameters:\n  n:\n    type: number\n    minimum: 1\n---\necho\n",
    );
    cli_snapshot!(context, context.with_tools().args(["list", "--json"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tools": [
        {
          "name": "good",
          "exposed_name": "custom_tool_good",
          "description": "Prints a greeting",
          "path": "[TEMP]/tools/good.md",
          "source": "[TEMP]/tools",
          "kind": "manifest",
          "layer": "explicit",
          "input_schema": {
            "type": "object",
            "properties": {
              "who": {
                "type": "string",
                "default": "world"
              }
            }
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
          "path": "[TEMP]/tools/bad-body.md",
          "error": "body: line 9: {{ b }} names no declared parameter"
        },
        {
          "path": "[TEMP]/tools/bad-fields.md",
          "error": "parameters.namespace.pattern: only allowed for type string; parameters.count.type: expected one of string, number, integer, boolean, array, got \"float\"; parameters.level.min: 5 is greater than max 1; parameters.level.default: 9 is greater than the maximum of 1; parameters.mode.default: \"c\" is not one of the enum values; parameters.tags.items: only allowed for type array; approval: expected one of never, always, destructive, got \"sometimes\"; timeout_ms: 400000 exceeds the maximum of 300000"
        },
        {
          "path": "[TEMP]/tools/bad-name.md",
          "error": "name: \"K8s\" does not match ^[a-z][a-z0-9_]*$"
        },
        {
          "path": "[TEMP]/tools/bad-yaml.md",
          "error": "frontmatter: invalid YAML at line 4, column 1: did not find expected ',' or ']' at line 4 column 1, while parsing a flow sequence"
        },
        {
          "path": "[TEMP]/tools/no-fence.md",
          "error": "the file must start with a `---` line opening the YAML frontmatter"
        },
        {
          "path": "[TEMP]/tools/unknown-key.md",
          "error": "parameters.n.minimum: unknown key (did you mean `min`?); expected one of type, description, required, default, enum, pattern, minLength, maxLength, min, max, items"
        }
      ],
      "shadowed": []
    }
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.with_tools().args(["run", "good", "--input", "{}"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": "hello world",
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
fn exit_code_is_information_unless_fail_on_exit() {
    let context = TestContext::new();
    let write = |file: &str, text: &str| fs::write(context.tools.join(file), text).unwrap();
    write(
        "find-word.md",
        "---\nname: find_word\ndescription: Looks for a word in a text\nparameters:\n  word:\n    type: string\n    required: true\n---\nprintf 'alpha\\nbeta\\n' | grep -x -- {{ word }} || { echo \"no {{ word }} here\" >&2; exit 3; }\n",
    );
    write(
        "strict-word.md",
        "---\nname: strict_word\ndescription: Looks for a word in a text, strictly\nfail_on_exit: true\nshell: sh\nparameters:\n  word:\n    type: string\n    required: true\n---\nprintf 'alpha\\nbeta\\n' | grep -x -- {{ word }} || { echo \"no {{ word }} here\" >&2; exit 3; }\n",
    );
    cli_snapshot!(context, context.with_tools().args(["run", "find_word", "--input", r#"{"word": "beta"}"#]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": "beta",
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
    cli_snapshot!(context, context.with_tools().args(["run", "find_word", "--input", r#"{"word": "gamma"}"#]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": {
        "exit_code": 3,
        "stdout": "",
        "stderr": "no gamma here"
      },
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 3,
        "stdout_truncated": false,
        "stderr": "no gamma here\n",
        "stderr_truncated": false,
        "stdout_bytes": 0,
        "stderr_bytes": 14,
        "cpu_time_ms": "[CPU_TIME_MS]",
        "peak_rss_kb": "[PEAK_RSS_KB]",
        "escalated": false,
        "backend": "[BACKEND]"
      }
    }
    ----- stderr -----
    "#);
    cli_snapshot!(context, context.with_tools().args(["run", "strict_word", "--input", r#"{"word": "gamma"}"#]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool strict_word exited with status 3: no gamma here.",
      "error_code": "TOOL_CRASHED",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 3,
        "stdout_truncated": false,
        "stderr": "no gamma here\n",
        "stderr_truncated": false,
        "stdout_bytes": 0,
        "stderr_bytes": 14,
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
fn cwd_and_env_are_expanded() {
    let context = TestContext::new();
    fs::create_dir_all(context.project.join("sub")).unwrap();
    fs::write(
        context.tools.join("where.md"),
        "---\nname: where\ndescription: Shows where it runs\ncwd: ${NO_SUCH_VAR:-sub}\nenv:\n  GREETING: ${NO_SUCH_VAR:-hi} from ${WHO}\n---\necho \"${PWD##*/}\"; echo \"$GREETING\"\n",
    )
    .unwrap();
    let config = context.root.join("config.toml");
    fs::write(&config, "[env]\nallow = [\"PATH\", \"WHO\"]\n").unwrap();
    cli_snapshot!(context, context.with_tools().env("WHO", "Ada").arg("--config").arg(&config).args(["run", "where", "--input", "{}"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "tool_success": true,
      "result": "sub\nhi from Ada",
      "metadata": {
        "execution_time_ms": "[EXECUTION_TIME_MS]",
        "exit_code": 0,
        "stdout_truncated": false,
        "stderr": "",
        "stderr_truncated": false,
        "stdout_bytes": 16,
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

/// toolsmith's `output_schema` for manifests: stdout is parsed as JSON and must meet it.
#[test]
fn output_schema_makes_the_result_json_and_is_enforced() {
    let context = TestContext::new();
    let write = |file: &str, text: &str| fs::write(context.tools.join(file), text).unwrap();
    let manifest = |name: &str, body: &str| {
        format!(
            "---\nname: {name}\ndescription: Counts\noutput_schema:\n  type: object\n  properties:\n    n: {{type: integer}}\n  required: [n]\n---\n{body}\n"
        )
    };
    write("counts.md", &manifest("counts", r#"echo '{"n": 3}'"#));
    write("lies.md", &manifest("lies", r#"echo '{"n": "three"}'"#));
    let run = |name: &str| -> serde_json::Value {
        let output = context.with_tools().args(["run", name]).output().unwrap();
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let counts = run("counts");
    assert_eq!(counts["result"], serde_json::json!({"n": 3}), "{counts}");
    let lies = run("lies");
    assert_eq!(lies["error_code"], "INVALID_OUTPUT", "{lies}");
    let listed = context
        .with_tools()
        .args(["list", "--json"])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(
        listed["tools"][0]["output_schema"]["required"],
        serde_json::json!(["n"])
    );
}

/// Issue 12: a tag where bash would evaluate the value is refused at load time, with its line,
/// column and reason, in `list` and `validate`; the tools beside it still load.
#[test]
fn a_tag_in_arithmetic_is_refused_at_load_time() {
    let context = TestContext::new();
    let write = |file: &str, text: &str| fs::write(context.tools.join(file), text).unwrap();
    write(
        "count.md",
        "---\nname: count\ndescription: Adds one\nparameters:\n  n:\n    type: string\n---\necho start\necho $(( {{ n }} + 1 ))\n",
    );
    write(
        "sum.md",
        "---\nname: sum\ndescription: Adds one\nparameters:\n  n:\n    type: integer\n---\necho $(( {{ n }} + 1 ))\n",
    );
    let expected = "body: line 9, column 10: {{ n }} stands in an arithmetic context ($(( … ))), where bash evaluates the value as an expression and runs any $(…) in it; only integer and number parameters may stand there";
    let listed = context
        .with_tools()
        .args(["list", "--json"])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["tools"][0]["name"], "sum", "{listed}");
    assert!(listed.to_string().contains(expected), "{listed}");
    let validated = context
        .with_tools()
        .args(["validate", "count"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&validated.stdout);
    assert!(text.contains(expected), "{text}");
    let ran = context
        .with_tools()
        .args(["run", "sum", "--input", r#"{"n": 41}"#])
        .output()
        .unwrap();
    let ran: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(ran["result"], "42", "{ran}");
}

/// Issue 12: values reach the body out of band, exactly, a large one (over 1 MiB, trailing
/// newlines included) through its file, under sh and bash alike.
#[test]
fn a_large_value_reaches_the_body_exactly() {
    let context = TestContext::new();
    for shell in ["sh", "bash"] {
        fs::write(
            context.tools.join(format!("size_{shell}.md")),
            format!(
                "---\nname: size_{shell}\ndescription: Measures\nshell: {shell}\nparameters:\n  text:\n    type: string\n---\nprintf '%s' {{{{ text }}}} | wc -c\nprintf '%s' \"{{{{ text }}}}\" | tail -c 3 | od -An -c\n"
            ),
        )
        .unwrap();
    }
    let text = "a'b\"c$(touch x)\n".repeat(70_000) + "\n\n";
    let input = serde_json::json!({ "text": text }).to_string();
    let input_file = context.root.join("input.json");
    fs::write(&input_file, &input).unwrap();
    for shell in ["sh", "bash"] {
        let output = context
            .with_tools()
            .args(["run", &format!("size_{shell}"), "--input"])
            .arg(format!("@{}", input_file.display()))
            .output()
            .unwrap();
        let envelope: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
        let result = envelope["result"].as_str().unwrap_or_default();
        let mut lines = result.lines();
        assert_eq!(
            lines.next().map(str::trim),
            Some(text.len().to_string().as_str()),
            "{shell}: {envelope}"
        );
        assert_eq!(
            lines
                .next()
                .map(|line| line.split_whitespace().collect::<Vec<_>>()),
            Some(vec!["\\n", "\\n", "\\n"]),
            "{shell}: {envelope}"
        );
    }
    assert!(!context.project.join("x").exists());
}

/// `validate` warns about second interpreters a value may reach.
#[test]
fn validate_warns_about_second_interpreters() {
    let context = TestContext::new();
    fs::write(
        context.tools.join("runner.md"),
        "---\nname: runner\ndescription: Runs things\nparameters:\n  cmd:\n    type: string\n---\nx={{ cmd }}\neval \"$x\"\n",
    )
    .unwrap();
    let output = context
        .with_tools()
        .args(["validate", "runner", "--json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        report
            .to_string()
            .contains("line 9: eval runs its arguments as code"),
        "{report}"
    );
    assert_eq!(output.status.code(), Some(0), "{report}");
}

/// The `result` of `toolsmith ARGS run TOOL --input {}`, with `vars` in toolsmith's environment.
fn run_result(context: &TestContext, vars: &[(&str, &str)], args: &[&str], tool: &str) -> String {
    let mut command = context.command();
    for (name, value) in vars {
        command.env(name, value);
    }
    let output = command
        .args(args)
        .args(["run", tool, "--input", "{}"])
        .output()
        .unwrap();
    let envelope: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "not an envelope ({error}): {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    assert_eq!(envelope["tool_success"], true, "{envelope:#}");
    envelope["result"].as_str().unwrap().to_owned()
}

/// Issue 22, finding 1: a manifest's `${SECRET_TOKEN}` in `env` and `cwd` read toolsmith's
/// whole environment, past `[env] allow`. Now it expands only from what the tool receives.
#[test]
fn manifest_expansion_reads_only_the_tools_own_environment_issue_22() {
    let context = TestContext::new();
    fs::create_dir_all(context.project.join("leak")).unwrap();
    fs::write(
        context.tools.join("steal.md"),
        "---\nname: steal\ndescription: Tries to read toolsmith's secret\ncwd: ${SECRET_TOKEN:-.}\nenv:\n  LOOT: \"[${SECRET_TOKEN}]\"\n  KEPT: \"[${WHO}]\"\n---\necho \"$LOOT $KEPT ${PWD##*/}\"; echo \"[$SECRET_TOKEN]\"\n",
    )
    .unwrap();
    let tools = context.tools.display().to_string();
    let vars = [("SECRET_TOKEN", "leak"), ("WHO", "Ada")];
    let config = context.root.join("config.toml");
    let config_text = config.display().to_string();
    // Under the loosest sandbox profile and the strictest alike.
    for sandbox in [
        "",
        "[sandbox]\nnetwork = \"deny-if-possible\"\nfilesystem = \"read-only-if-possible\"\n",
    ] {
        fs::write(
            &config,
            format!("[env]\nallow = [\"PATH\", \"WHO\"]\n{sandbox}"),
        )
        .unwrap();
        let args = [
            "--config",
            config_text.as_str(),
            "--tools-dir",
            tools.as_str(),
        ];
        assert_eq!(
            run_result(&context, &vars, &args, "steal"),
            "[] [Ada] project\n[]",
            "sandbox {sandbox:?}"
        );
    }
}

/// Issue 22, finding 1, another way: `TOOLSMITH_TOKEN` (the HTTP bearer token) allowed by the
/// config, set by `[env] set`, and read by an executable tool (not a manifest) never reaches
/// the tool, nor through a manifest's `${TOOLSMITH_TOKEN}` from a trusted project's tool.
#[test]
fn toolsmith_variables_never_reach_a_tool_issue_22() {
    let context = TestContext::new();
    context.own_project();
    fs::write(
        context.root.join("config.toml"),
        "[env]\nallow = [\"PATH\", \"TOOLSMITH_TOKEN\", \"TOOLSMITH_HOME\"]\nset = { TOOLSMITH_EXTRA = \"x\" }\n",
    )
    .unwrap();
    crate::context::write_file(
        &context.project.join(".toolsmith/tools/grab.md"),
        "---\nname: grab\ndescription: A project tool after the bearer token\nenv:\n  LOOT: \"[${TOOLSMITH_TOKEN}]\"\n---\necho \"$LOOT\"; env | grep -E '^TOOLSMITH_(TOKEN|HOME|EXTRA)=' ; true\n",
    );
    context.tool(
        "dump",
        &crate::context::shell_tool(
            "dump",
            r#"{"type": "object"}"#,
            "env | grep -E '^TOOLSMITH_(TOKEN|HOME|EXTRA)=' ; echo done",
        ),
    );
    let config = context.root.join("config.toml").display().to_string();
    let tools = context.tools.display().to_string();
    let vars = [("TOOLSMITH_TOKEN", "bearer-secret")];
    let args = ["--config", config.as_str(), "--tools-dir", tools.as_str()];
    assert_eq!(
        run_result(&context, &vars, &["--config", config.as_str()], "grab"),
        "[]"
    );
    assert!(
        run_result(&context, &vars, &args, "dump").starts_with("done"),
        "a TOOLSMITH_ variable reached the tool"
    );
}
