//! The project a command works on: named with `--project` or `TOOLSMITH_PROJECT`, else the enclosing git work tree, else the current directory (issue 22, finding 3).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::context::{TestContext, shell_tool, write_executable};

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not JSON ({error}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A Kodelet tool that leaves `marker` behind whenever anything executes it.
fn marking_tool(name: &str, marker: &Path) -> String {
    format!(
        "#!/bin/sh\ntouch '{}'\ncase \"$1\" in\n  description) printf '%s\\n' '{{\"name\": \"{name}\", \"description\": \"The {name} fixture\", \"input_schema\": {{\"type\": \"object\"}}}}' ;;\n  run) echo \"ran {name}\" ;;\nesac\n",
        marker.display()
    )
}

fn listed(output: &Output) -> Vec<String> {
    stdout_json(output)["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {}", stderr(output)))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `--show-settings`' `sandbox.project_dir` and `sandbox.project_source`.
fn project_of(
    context: &TestContext,
    cwd: &Path,
    args: &[&str],
    vars: &[(&str, &Path)],
) -> (PathBuf, String) {
    let mut command = context.command();
    command.current_dir(cwd).args(args);
    for (key, value) in vars {
        command.env(key, value);
    }
    let output = command.args(["list", "--show-settings"]).output().unwrap();
    let settings = stdout_json(&output);
    (
        PathBuf::from(settings["sandbox"]["project_dir"].as_str().unwrap()),
        settings["sandbox"]["project_source"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

/// `--project DIR` names the project from anywhere: its layer is the one read, and only once
/// trusted (`toolsmith --project DIR trust` trusts that directory), whatever the current
/// directory is.
#[test]
fn the_project_flag_picks_the_layer_and_trust_applies_to_it() {
    let context = TestContext::new();
    let named = context.root.join("named");
    let marker = context.root.join("MARKER");
    write_executable(
        &named.join(".toolsmith/tools/named_tool"),
        &marking_tool("named_tool", &marker),
    );
    let flag = ["--project", named.to_str().unwrap()];

    let before = context
        .command()
        .args(flag)
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert_eq!(before.status.code(), Some(0), "{}", stderr(&before));
    assert!(!listed(&before).contains(&"named_tool".to_owned()));
    let hint = format!(
        "hint: skipped the untrusted project layer of {}",
        named.display()
    );
    assert!(stderr(&before).contains(&hint), "{}", stderr(&before));
    assert!(
        !marker.exists(),
        "an untrusted named project's tool was probed"
    );

    let trusted = context.command().args(flag).arg("trust").output().unwrap();
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    assert!(String::from_utf8_lossy(&trusted.stdout).contains(&named.display().to_string()));

    // From the default project (another directory), the named project's layer is read.
    let after = context
        .command()
        .args(flag)
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert!(
        listed(&after).contains(&"named_tool".to_owned()),
        "{}",
        stderr(&after)
    );
    let without = context.command().args(["list", "--json"]).output().unwrap();
    assert!(!listed(&without).contains(&"named_tool".to_owned()));

    // A relative name is taken from the current directory.
    let (dir, source) = project_of(&context, &context.root, &["--project", "named"], &[]);
    assert_eq!((dir, source.as_str()), (named.clone(), "flag"));

    // A name that is not a directory is a usage error, not a silent fallback.
    let missing = context
        .command()
        .args(["--project", "missing", "list"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("missing"), "{}", stderr(&missing));
}

/// `TOOLSMITH_PROJECT` names the project as `--project` does, and the flag wins over it;
/// with neither, the project is the enclosing work tree, else the current directory, and
/// `--show-settings` says which.
#[test]
fn the_project_env_var_names_the_project_and_the_flag_wins() {
    let context = TestContext::new();
    let from_env = context.root.join("from-env");
    let from_flag = context.root.join("from-flag");
    std::fs::create_dir_all(&from_env).unwrap();
    std::fs::create_dir_all(&from_flag).unwrap();
    let project = context.project.clone();
    let env = [("TOOLSMITH_PROJECT", from_env.as_path())];
    assert_eq!(
        project_of(&context, &project, &[], &env),
        (from_env.clone(), "env".to_owned())
    );
    assert_eq!(
        project_of(
            &context,
            &project,
            &["--project", from_flag.to_str().unwrap()],
            &env
        ),
        (from_flag, "flag".to_owned())
    );
    assert_eq!(
        project_of(&context, &project, &[], &[]),
        (project.clone(), "current-directory".to_owned())
    );
    git2::Repository::init(&project).unwrap();
    std::fs::create_dir_all(project.join("src")).unwrap();
    assert_eq!(
        project_of(&context, &project.join("src"), &[], &[]),
        (project, "git".to_owned())
    );
}

/// `$HOME` is never a project by default (`home_is_never_a_project_by_default`), but the user
/// may name it: a `project` tool then writes there, `doctor` warns, and toolsmith's own state
/// (user config, trust store, cache) stays read-only all the same.
#[test]
fn home_named_as_the_project_works_and_warns() {
    let context = TestContext::new();
    let home = context.root.join("home");
    context.user_config("[sandbox]\nfilesystem = \"project\"\n");
    let targets = [
        "$HOME/notes.txt",
        "$HOME/.config/toolsmith/config.toml",
        "$HOME/.local/state/toolsmith/trust.json",
        "$HOME/.cache/toolsmith/discovery.json",
    ];
    let attempts: String = targets
        .iter()
        .map(|target| {
            format!(
                "mkdir -p \"$(dirname \"{target}\")\" 2>/dev/null; if (echo planted >> \"{target}\") 2>/dev/null; then echo \"wrote: {target}\"; else echo \"held: {target}\"; fi; "
            )
        })
        .collect();
    context.tool(
        "writer",
        &shell_tool("writer", r#"{"type": "object"}"#, &attempts),
    );
    let run = |args: &[&str], vars: &[(&str, &Path)]| {
        let mut command = context.with_tools();
        command.current_dir(&home).args(args);
        for (key, value) in vars {
            command.env(key, value);
        }
        let output = command
            .args(["run", "writer", "--input", "{}"])
            .output()
            .unwrap();
        let envelope = stdout_json(&output);
        assert_eq!(envelope["tool_success"], true, "{envelope:#}");
        envelope["result"].as_str().unwrap().to_owned()
    };

    // An existing file: a `project` tool cannot create new entries next to a missing `.git`.
    std::fs::write(home.join("notes.txt"), "").unwrap();
    // Not named: $HOME is no project, the tool writes nowhere.
    let found = run(&[], &[]);
    assert_eq!(found.matches("held: ").count(), 4, "{found}");
    assert_eq!(std::fs::read_to_string(home.join("notes.txt")).unwrap(), "");

    // Named with the flag or the variable: it is the project, but toolsmith's state is not.
    for (args, vars) in [
        (vec!["--project", home.to_str().unwrap()], vec![]),
        (vec![], vec![("TOOLSMITH_PROJECT", home.as_path())]),
    ] {
        let named = run(&args, &vars);
        let wrote = format!("wrote: {}", home.join("notes.txt").display());
        assert!(named.contains(&wrote), "{named}");
        assert_eq!(named.matches("held: ").count(), 3, "{named}");
        assert_eq!(
            std::fs::read_to_string(home.join("notes.txt"))
                .unwrap()
                .lines()
                .count(),
            if vars.is_empty() { 1 } else { 2 }
        );
    }
    assert_eq!(
        std::fs::read_to_string(home.join(".config/toolsmith/config.toml")).unwrap(),
        "[sandbox]\nfilesystem = \"project\"\n"
    );

    let doctor = context
        .command()
        .current_dir(&home)
        .args(["--project", home.to_str().unwrap(), "doctor", "--json"])
        .output()
        .unwrap();
    let report = stdout_json(&doctor);
    let warning = report["trust"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == home.display().to_string() && check["status"] == "warn")
        .unwrap_or_else(|| panic!("no warning about $HOME: {report:#}"));
    assert!(
        warning["detail"]
            .as_str()
            .unwrap()
            .contains("from --project"),
        "{warning:#}"
    );
    assert_eq!(report["sandbox"]["project_source"], "flag");
    let text = context
        .command()
        .current_dir(&home)
        .args(["--project", home.to_str().unwrap(), "doctor"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("holds $HOME"));
}
