//! `toolsmith doctor`: names the backend and every feature check, in text and JSON.

use serde_json::Value;

use crate::context::{TestContext, shell_tool};

const BACKENDS: &[&str] = &["cgroup", "pidns", "subreaper", "pgroup"];

#[test]
fn doctor_text() {
    let context = TestContext::new();
    let output = context.command().arg("doctor").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let backend = stdout
        .lines()
        .find_map(|line| line.strip_prefix("backend: "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap();
    assert!(BACKENDS.contains(&backend), "{stdout}");
    assert!(stdout.contains("kernel:"), "{stdout}");
    assert!(stdout.contains("cgroup.kill"), "{stdout}");
    assert!(stdout.contains("config file: none"), "{stdout}");
    assert!(stdout.ends_with("no problems found\n"), "{stdout}");
}

/// A set-up with no problem, peers on: the fourteen optional tool directories that do not exist
/// (issue 26 added the peers' bundles directories and `./kodelet-tools`) are listed, each without a `fix:` and none counted a problem; a directory the config names
/// and that does not exist is still a problem with its fix.
#[test]
fn doctor_lists_missing_optional_directories_without_a_fix() {
    let context = TestContext::new();
    context.user_config(&format!(
        "[discovery]\npeers = true\n[trust]\npaths = [{:?}]\n",
        context.project.display().to_string()
    ));
    let output = context.command().arg("doctor").output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let optional: Vec<&str> = stdout
        .lines()
        .filter(|line| line.contains("(none; optional)"))
        .collect();
    assert_eq!(optional.len(), 14, "{stdout}");
    assert!(
        optional.iter().any(|line| line.contains("kodelet")),
        "the peers' directories are listed: {stdout}"
    );
    for bundles in [".kodelet/plugins", ".nanocoder/skills", "kodelet-tools"] {
        assert!(
            optional.iter().any(|line| line.contains(bundles)),
            "{bundles} is listed: {stdout}"
        );
    }
    assert!(!stdout.contains("fix:"), "{stdout}");
    assert!(!stdout.contains("missing"), "{stdout}");
    assert!(stdout.ends_with("no problems found\n"), "{stdout}");
    let output = context
        .command()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let missing: Vec<&Value> = report["directories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|check| {
            check["detail"]
                .as_str()
                .unwrap()
                .ends_with("(none; optional)")
        })
        .collect();
    assert_eq!(missing.len(), optional.len(), "{report}");
    for check in missing {
        assert_eq!(check["status"], "info", "{check}");
        assert!(check["fix"].is_null(), "{check}");
    }
    // A directory the config names is no longer optional.
    context.user_config("[discovery]\ndirs = [\"/nonexistent-toolsmith-dir\"]\n");
    let output = context.command().arg("doctor").output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("fix: create it (mkdir -p /nonexistent-toolsmith-dir)"),
        "{stdout}"
    );
}

#[test]
fn doctor_json() {
    let context = TestContext::new();
    context.project_file(".toolsmith/config.toml", "[executor]\nbackend = \"auto\"\n");
    let output = context
        .command()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        BACKENDS.contains(&report["backend"].as_str().unwrap()),
        "{report}"
    );
    let features = report["features"].as_array().unwrap();
    assert!(!features.is_empty());
    for feature in features {
        assert!(feature["name"].is_string(), "{feature}");
        assert!(feature["available"].is_boolean(), "{feature}");
        assert!(feature["detail"].is_string(), "{feature}");
    }
    assert_eq!(report["config_file"], "./.toolsmith/config.toml");
    let layers: Vec<&str> = report["tool_dirs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|dir| dir["layer"].as_str().unwrap())
        .collect();
    assert_eq!(layers, ["system", "user", "project"], "{report}");
    assert_eq!(
        report["tool_dirs"][2]["path"],
        context
            .project
            .join(".toolsmith/tools")
            .display()
            .to_string()
    );
    assert_eq!(report["tool_dirs"][2]["exists"], false);
    assert_eq!(
        report["cache"]["file"],
        context
            .root
            .join("home/.cache/toolsmith/discovery.json")
            .display()
            .to_string()
    );
}

#[test]
fn doctor_pinned_backend() {
    let context = TestContext::new();
    let output = context
        .command()
        .env("TOOLSMITH_BACKEND", "pgroup")
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["backend"], "pgroup");
}

/// A directory holding only a link to bash: a `PATH` without python3.
fn bash_only_path(context: &TestContext) -> std::path::PathBuf {
    let bin = context.root.join("bash-only-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let bash = ["/usr/bin/bash", "/bin/bash"]
        .into_iter()
        .find(|path| std::path::Path::new(path).exists())
        .unwrap();
    std::os::unix::fs::symlink(bash, bin.join("bash")).unwrap();
    bin
}

/// Issue 15: doctor lists the interpreters the discovered tools need (a `#!` line, an
/// `env` one, a manifest's shell), tools that failed to load because of one included, and
/// reports the one missing from the `PATH` tools get as a problem with the fix.
#[test]
fn doctor_reports_a_missing_interpreter() {
    let context = TestContext::new();
    context.tool(
        "greet",
        &shell_tool("greet", "{\"type\": \"object\"}", "echo hi")
            .replace("#!/bin/sh", "#!/usr/bin/env bash"),
    );
    context.tool(
        "shout",
        "#!/usr/bin/env python3\nimport sys\nif sys.argv[1] == 'description':\n    print('{\"name\": \"shout\", \"description\": \"d\"}')\nelse:\n    print('{}')\n",
    );
    std::fs::write(
        context.tools.join("hello.md"),
        "---\nname: hello\ndescription: Says hello.\nshell: bash\n---\necho hello\n",
    )
    .unwrap();
    let bin = bash_only_path(&context);

    let output = context
        .with_tools()
        .env("PATH", &bin)
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let interpreters = report["interpreters"].as_array().unwrap();
    let find = |name: &str| {
        interpreters
            .iter()
            .find(|check| check["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {interpreters:?}"))
    };
    let bash = find("bash");
    assert_eq!(bash["status"], "ok", "{bash}");
    assert!(
        bash["detail"]
            .as_str()
            .unwrap()
            .contains("2 tools: greet, hello"),
        "{bash}"
    );
    let python = find("python3");
    assert_eq!(python["status"], "problem", "{python}");
    assert!(
        python["detail"]
            .as_str()
            .unwrap()
            .starts_with("missing from PATH (1 tool: "),
        "{python}"
    );
    assert!(
        python["detail"].as_str().unwrap().contains("shout"),
        "{python}"
    );
    assert!(
        python["fix"]
            .as_str()
            .unwrap()
            .contains("apt-get install python3"),
        "{python}"
    );

    let output = context
        .with_tools()
        .env("PATH", &bin)
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("interpreters (what the tools run with):"),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .find(|line| line.trim_start().starts_with("python3"))
        .unwrap();
    assert!(
        line.contains("problem") && line.contains("missing from PATH"),
        "{stdout}"
    );
    assert!(
        stdout.contains("fix: install it (e.g. `apt-get install python3`)"),
        "{stdout}"
    );

    // With the usual PATH, python3 is found: the same tools need no fix.
    let output = context
        .with_tools()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let python = report["interpreters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "python3")
        .unwrap()
        .clone();
    assert_eq!(python["status"], "ok", "{python}");
}
