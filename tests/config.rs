//! The config file, environment variables and flags: limits, precedence and errors naming the key.

use crate::context::{TestContext, shell_tool};

const EMPTY_SCHEMA: &str = r#"{"type": "object"}"#;

#[test]
fn show_settings_defaults() {
    let context = TestContext::new();
    cli_snapshot!(context, context.command().args(["--show-settings", "list"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "cwd": "[TEMP]/project",
      "config_file": null,
      "user_config_file": null,
      "layers": [
        {
          "layer": "system",
          "path": "[PREFIX]/libexec/toolsmith"
        },
        {
          "layer": "user",
          "path": "[TEMP]/home/.config/toolsmith/tools"
        }
      ],
      "cache_dir": "[TEMP]/home/.cache/toolsmith",
      "executor": {
        "backend": "auto",
        "max_concurrent": null
      },
      "env": {
        "allow": [
          "PATH",
          "HOME",
          "USER",
          "LANG"
        ],
        "set": {}
      },
      "limits": {
        "timeout": "30s",
        "grace": "2s",
        "cpu": "unlimited",
        "memory": "1GiB",
        "max_processes": "256",
        "max_file_size": "1GiB",
        "max_open_files": "1024",
        "max_output": "1MiB",
        "tmp_size": "64MiB"
      },
      "max_timeout": "5m",
      "policy": {
        "disabled": null,
        "allowed": null,
        "profile": null
      },
      "sandbox": {
        "profile": "default",
        "network": "declared",
        "generated_network": "none",
        "filesystem": "project-if-possible",
        "syscalls": "filter",
        "user": null,
        "project_dir": "[TEMP]/project",
        "project_source": "current-directory"
      },
      "tools": {},
      "audit": null
    }
    ----- stderr -----
    "#);
}

#[test]
fn show_settings_precedence_flags_over_env_over_file() {
    let context = TestContext::new();
    context.project_file(
        "custom.toml",
        "[limits]\ntimeout = \"60s\"\ncpu = \"10s\"\nmemory = \"512MiB\"\nmax_output = \"64KiB\"\nmax_processes = 32\n\n[executor]\nbackend = \"pgroup\"\nmax_concurrent = 2\n",
    );
    cli_snapshot!(context, context
        .command()
        .env("TOOLSMITH_CPU", "3s")
        .env("TOOLSMITH_MEMORY", "unlimited")
        .args(["--config", "custom.toml", "--show-settings", "run", "hello", "--timeout", "2s"]), @r#"
    exit_code: 0
    ----- stdout -----
    {
      "cwd": "[TEMP]/project",
      "config_file": "custom.toml",
      "user_config_file": null,
      "layers": [
        {
          "layer": "system",
          "path": "[PREFIX]/libexec/toolsmith"
        },
        {
          "layer": "user",
          "path": "[TEMP]/home/.config/toolsmith/tools"
        }
      ],
      "cache_dir": "[TEMP]/home/.cache/toolsmith",
      "executor": {
        "backend": "pgroup",
        "max_concurrent": 2
      },
      "env": {
        "allow": [
          "PATH",
          "HOME",
          "USER",
          "LANG"
        ],
        "set": {}
      },
      "limits": {
        "timeout": "2s",
        "grace": "2s",
        "cpu": "3s",
        "memory": "unlimited",
        "max_processes": "32",
        "max_file_size": "1GiB",
        "max_open_files": "1024",
        "max_output": "64KiB",
        "tmp_size": "64MiB"
      },
      "max_timeout": "5m",
      "policy": {
        "disabled": null,
        "allowed": null,
        "profile": null
      },
      "sandbox": {
        "profile": "default",
        "network": "declared",
        "generated_network": "none",
        "filesystem": "project-if-possible",
        "syscalls": "filter",
        "user": null,
        "project_dir": "[TEMP]/project",
        "project_source": "current-directory"
      },
      "tools": {},
      "audit": null
    }
    ----- stderr -----
    "#);
}

#[test]
fn file_timeout_applies() {
    let context = TestContext::new();
    context.tool("sleepy", &shell_tool("sleepy", EMPTY_SCHEMA, "sleep 30"));
    context.project_file(
        ".toolsmith/config.toml",
        "[limits]\ntimeout = \"1s\"\ngrace = \"200ms\"\n",
    );
    cli_snapshot!(context, context.with_tools().args(["run", "sleepy"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool sleepy did not finish within 1s and was killed.",
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
fn flag_beats_file() {
    let context = TestContext::new();
    context.tool("sleepy", &shell_tool("sleepy", EMPTY_SCHEMA, "sleep 30"));
    context.project_file("slow.toml", "[limits]\ntimeout = \"60s\"\n");
    cli_snapshot!(context, context.with_tools().args(["--config", "slow.toml", "run", "sleepy", "--timeout", "1s"]), @r#"
    exit_code: 1
    ----- stdout -----
    {
      "tool_success": false,
      "error": "Tool sleepy did not finish within 1s and was killed.",
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
fn bad_value_names_the_key() {
    let context = TestContext::new();
    context.project_file("x.toml", "[limits]\ntimeout = \"5 parsecs\"\n");
    cli_snapshot!(context, context.with_examples().args(["--config", "x.toml", "run", "hello"]), @r#"
        exit_code: 2
        ----- stdout -----
        ----- stderr -----
        error: invalid value "5 parsecs" for limits.timeout in x.toml: expected a duration such as `500ms`, `30s`, `2m` or `1h` (a plain number is seconds)
        "#);
}

#[test]
fn unknown_key_is_an_error() {
    let context = TestContext::new();
    context.project_file(
        ".toolsmith/config.toml",
        "[limits]\ntimeout = \"5s\"\nwall_clock = \"5s\"\n",
    );
    cli_snapshot!(context, context.with_examples().arg("list"), @"
    exit_code: 2
    ----- stdout -----
    ----- stderr -----
    error: invalid config file ./.toolsmith/config.toml at line 3: unknown field `wall_clock`, expected one of `timeout`, `grace`, `cpu`, `memory`, `max_processes`, `max_file_size`, `max_open_files`, `max_output`, `max_timeout`, `tmp_size`
    hint: the sections are [limits], [env], [executor], [policy], [sandbox], [tools.NAME], [audit], [discovery], [generator], [trust] and [secrets.NAME]; see the key list in the message
    ");
}

#[test]
fn missing_config_file() {
    let context = TestContext::new();
    cli_snapshot!(context, context.command().args(["--config", "nowhere.toml", "list"]), @r#"
        exit_code: 2
        ----- stdout -----
        ----- stderr -----
        error: cannot read config file nowhere.toml: No such file or directory (os error 2)
        "#);
}

#[test]
fn bad_env_value() {
    let context = TestContext::new();
    cli_snapshot!(context, context.command().env("TOOLSMITH_BACKEND", "docker").arg("list"), @r#"
        exit_code: 2
        ----- stdout -----
        ----- stderr -----
        error: invalid value "docker" for environment variable TOOLSMITH_BACKEND: unknown containment backend `docker` (expected auto, cgroup, pidns, subreaper or pgroup)
        "#);
}

/// A user config that a dotfile manager links from a repository elsewhere is read: the link
/// is the user's own choice (only a FIFO, a device or another non-regular target is refused).
#[test]
fn a_user_config_linked_from_elsewhere_is_read() {
    let context = TestContext::new();
    context.tool("sleepy", &shell_tool("sleepy", EMPTY_SCHEMA, "sleep 30"));
    let linked = context.user_config("[limits]\ntimeout = \"1s\"\ngrace = \"200ms\"\n");
    let dotfiles = context.root.join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    let real = dotfiles.join("toolsmith.toml");
    std::fs::rename(&linked, &real).unwrap();
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    let output = context
        .with_tools()
        .args(["run", "sleepy"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("\"error_code\": \"TOOL_TIMEOUT\""),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
