//! Registrations are transactions: `generate` and `rollback` killed at every file-system operation of a registration (an LD_PRELOAD shim built here with `cc`), and histories damaged on purpose (a truncated, a missing object, a deleted commit, a stale ref lock). After each fault the next command succeeds or fails clearly and promptly, the live tool is the old or the new version, the history records exactly what is live, and nothing is left in staging.

#![expect(
    clippy::print_stderr,
    reason = "a fault that this machine cannot stage must be announced loudly"
)]

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::context::TestContext;

fn request(answer: &str, replace: bool) -> Value {
    json!({
        "name": "tell_answer",
        "description": "Tells the answer.",
        "language": "bash",
        "implementation": format!("echo {answer}"),
        "tests": [{"input": {}, "expect": {"result_contains": answer}}],
        "replace": replace,
    })
}

fn tools_dir(context: &TestContext) -> PathBuf {
    context.project.join(".toolsmith").join("tools")
}

fn run(command: &mut Command) -> Output {
    command.output().unwrap()
}

fn generate(context: &TestContext, answer: &str, replace: bool) -> Command {
    context.project_file("request.json", &request(answer, replace).to_string());
    let mut command = context.command();
    command.args(["--no-cache", "generate", "--request", "request.json"]);
    command
}

fn rollback(context: &TestContext) -> Command {
    let mut command = context.command();
    command.args(["rollback", "tell_answer"]);
    command
}

fn must(output: &Output) {
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Builds the crash shim with the system's C compiler, once per test run.
fn shim() -> Option<PathBuf> {
    let out = crate::context::target_dir().join("ts-crash-shim.so");
    let source = crate::context::repository_root().join("tests/transactions/crash_shim.c");
    #[expect(clippy::disallowed_methods, reason = "the test builds its shim with cc")]
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&source)
        .arg("-ldl")
        .status();
    match built {
        Ok(status) if status.success() => Some(out),
        other => {
            eprintln!("WARNING: cannot build the crash shim with cc ({other:?}): the crash test did not run");
            None
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The contents of a recorded commit's tool file, read by git itself.
fn recorded(tools: &Path, commit: &str) -> String {
    #[expect(clippy::disallowed_methods, reason = "git itself reads the history")]
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(tools.join(".history.git"))
        .args(["show", &format!("{commit}:tell_answer")])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// The state after a fault: the live file is `old` or `new`, the history (read after
/// `toolsmith history` repaired what the crash left) records exactly it, and staging is empty.
fn check_consistent(context: &TestContext, old: Option<&str>, new: &str, point: usize) {
    let tools = tools_dir(context);
    let history = run(context.command().args(["history", "tell_answer", "--json"]));
    let live = fs::read_to_string(tools.join("tell_answer")).ok();
    match &live {
        Some(live) => {
            assert!(
                old == Some(live.as_str()) || live == new,
                "point {point}: the live tool is neither the old nor the new version"
            );
            must(&history);
            let versions: Value = serde_json::from_slice(&history.stdout).unwrap();
            let latest = versions["versions"].as_array().unwrap().last().unwrap();
            assert_eq!(
                &recorded(&tools, latest["commit"].as_str().unwrap()),
                live,
                "point {point}: the history's latest version is not what is live"
            );
        }
        None => {
            assert_eq!(old, None, "point {point}: the live tool vanished");
            let stderr = String::from_utf8_lossy(&history.stderr);
            assert!(
                stderr.contains("has no generated history"),
                "point {point}: a tool that is not live has history: {stderr}"
            );
        }
    }
    let staging = tools.join(".staging");
    let left: Vec<_> = fs::read_dir(&staging)
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "point {point}: staging left {left:?}");
}

/// Kills `command` at each of its file-system operations below the tools directory, from a
/// copy of the same starting state each time, and checks the state after each kill; then
/// the same command runs to the end.
fn crash_everywhere(
    context: &TestContext,
    shim: &Path,
    command: &dyn Fn(&TestContext) -> Command,
    next: &dyn Fn(&TestContext) -> Command,
) -> usize {
    let tools = tools_dir(context);
    let template = context.root.join("template");
    if tools.exists() {
        copy_tree(&tools, &template);
    }
    let restore = || {
        let _absent = fs::remove_dir_all(&tools);
        if template.exists() {
            copy_tree(&template, &tools);
        }
    };
    let old = fs::read_to_string(tools.join("tell_answer")).ok();
    let count_file = context.root.join("count");
    let counted = run(command(context)
        .env("LD_PRELOAD", shim)
        .env("TS_CRASH_DIR", &tools)
        .env("TS_CRASH_AT", "0")
        .env("TS_CRASH_COUNT", &count_file));
    must(&counted);
    let new = fs::read_to_string(tools.join("tell_answer")).unwrap();
    let points: usize = fs::read_to_string(&count_file).unwrap().trim().parse().unwrap();
    assert!(points > 5, "the shim saw only {points} operations");
    for point in 1..=points {
        restore();
        let output = run(command(context)
            .env("LD_PRELOAD", shim)
            .env("TS_CRASH_DIR", &tools)
            .env("TS_CRASH_AT", point.to_string()));
        assert_eq!(
            output.status.signal(),
            Some(9),
            "point {point}: not killed: {output:?}"
        );
        check_consistent(context, old.as_deref(), &new, point);
    }
    // After the last kill, the next command succeeds.
    must(&run(&mut next(context)));
    check_consistent(context, old.as_deref(), &new, points + 1);
    points
}

/// `generate` (a first tool in a fresh directory, a new name next to another tool, a
/// replacement) and `rollback`, each killed at every file-system operation of its
/// registration.
#[test]
fn a_registration_killed_anywhere_leaves_old_or_new_recorded_and_nothing_stuck() {
    let Some(shim) = shim() else { return };
    let started = Instant::now();

    let fresh = TestContext::new();
    fresh.own_project();
    let fresh_points = crash_everywhere(&fresh, &shim, &|context| generate(context, "fresh", false), &|context| generate(context, "fresh", true));

    let new_name = TestContext::new();
    new_name.own_project();
    let mut other = request("other", false);
    other["name"] = json!("other_tool");
    new_name.project_file("other.json", &other.to_string());
    must(&run(new_name.command().args(["generate", "--request", "other.json"])));
    let new_name_points = crash_everywhere(&new_name, &shim, &|context| generate(context, "named", false), &|context| generate(context, "named", true));

    let replace = TestContext::new();
    replace.own_project();
    must(&run(&mut generate(&replace, "first", false)));
    let replace_points = crash_everywhere(&replace, &shim, &|context| generate(context, "second", true), &|context| generate(context, "second", true));

    let rolled = TestContext::new();
    rolled.own_project();
    must(&run(&mut generate(&rolled, "first", false)));
    must(&run(&mut generate(&rolled, "second", true)));
    let rollback_points = crash_everywhere(&rolled, &shim, &rollback, &rollback);

    eprintln!(
        "crash points: fresh {fresh_points}, new name {new_name_points}, replace {replace_points}, rollback {rollback_points}; {:?}",
        started.elapsed()
    );
}
