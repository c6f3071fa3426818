//! Scale-out: processes sharing one tools directory. Generations in two processes take turns on the directory's lock; replicas of `serve --http` see each other's tools and announce them; two replicas behind HAProxy survive the loss of one.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::context::TestContext;
use crate::serve::PATIENCE;

/// A request for a bash tool `name` that prints `answer`.
fn request(name: &str, answer: &str) -> Value {
    json!({
        "name": name,
        "description": "Tells the answer.",
        "language": "bash",
        "implementation": format!("echo {answer}"),
        "tests": [{"input": {}, "expect": {"result_contains": answer}}],
    })
}

/// The pids `/proc/locks` shows waiting for a lock (the lines marked `->`).
fn lock_waiters() -> Vec<u32> {
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks
        .lines()
        .filter(|line| line.contains("->"))
        .filter_map(|line| {
            line.split_whitespace()
                .skip_while(|field| *field != "->")
                .nth(4)
                .and_then(|pid| pid.parse().ok())
        })
        .collect()
}

/// Waits until every child of `children` waits for a lock (it has passed its checks and is
/// about to register), failing with what they printed when one ends first.
fn wait_until_all_wait_for_the_lock(children: &mut [Child]) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let waiters = lock_waiters();
        if children.iter().all(|child| waiters.contains(&child.id())) {
            return;
        }
        for child in children.iter_mut() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "generator {} ended ({status}) without waiting for the lock",
                    child.id()
                );
            }
        }
        assert!(
            Instant::now() < deadline,
            "the generators never waited for the lock: {waiters:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `toolsmith generate --json` for each request file, all at once.
fn spawn_generators(context: &TestContext, request_files: &[&str]) -> Vec<Child> {
    request_files
        .iter()
        .map(|file| {
            context
                .command()
                .args(["generate", "--json", "--request", file])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect()
}

fn report(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not a JSON report ({error}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Holds the tools directory's lock as another process would, creating the directory.
fn hold_lock(tools_dir: &Path) -> File {
    std::fs::create_dir_all(tools_dir).unwrap();
    let file = File::create(tools_dir.join(".toolsmith.lock")).unwrap();
    file.lock().unwrap();
    file
}

fn history(context: &TestContext, name: &str) -> Vec<Value> {
    let output = context
        .command()
        .args(["history", name, "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let history: Value = serde_json::from_slice(&output.stdout).unwrap();
    history["versions"].as_array().unwrap().clone()
}

/// Two `toolsmith generate` processes registering two tools into one tools directory at
/// once: both wait on the directory's lock (the test holds it until both do), then both
/// register, and the history has both versions.
#[test]
fn generations_in_two_processes_take_turns_on_the_lock_and_both_register() {
    let context = TestContext::new();
    context.own_project();
    let tools_dir = context.project.join(".toolsmith/tools");
    context.project_file("first.json", &request("first", "one").to_string());
    context.project_file("second.json", &request("second", "two").to_string());
    let held = hold_lock(&tools_dir);
    let mut children = spawn_generators(&context, &["first.json", "second.json"]);
    wait_until_all_wait_for_the_lock(&mut children);
    drop(held);
    for (child, name) in children.into_iter().zip(["first", "second"]) {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{output:?}");
        let report = report(&output);
        assert_eq!(report["status"], "registered", "{report}");
        let versions = history(&context, name);
        assert_eq!(versions.len(), 1, "{versions:?}");
        assert_eq!(versions[0]["commit"], report["commit"]);
    }
    for (name, answer) in [("first", "one"), ("second", "two")] {
        let output = context
            .command()
            .args(["run", name, "--input", "{}"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        assert_eq!(report(&output)["result"], answer);
    }
    // The lock file is no tool.
    let listed = context.command().args(["list", "--json"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("toolsmith.lock"),
        "{listed:?}"
    );
}

/// Two processes registering the same new name at once: both pass the first name check,
/// then take turns on the lock; the second sees the first's file and is rejected with the
/// reason, so nothing is replaced without `replace`, and the history has one version, the
/// file's.
#[test]
fn a_name_registered_meanwhile_by_another_process_is_not_replaced() {
    let context = TestContext::new();
    context.own_project();
    let tools_dir = context.project.join(".toolsmith/tools");
    context.project_file("one.json", &request("same", "one").to_string());
    context.project_file("two.json", &request("same", "two").to_string());
    let held = hold_lock(&tools_dir);
    let mut children = spawn_generators(&context, &["one.json", "two.json"]);
    wait_until_all_wait_for_the_lock(&mut children);
    drop(held);
    let reports: Vec<Value> = children
        .into_iter()
        .map(|child| report(&child.wait_with_output().unwrap()))
        .collect();
    let (registered, rejected): (Vec<&Value>, Vec<&Value>) = reports
        .iter()
        .partition(|report| report["status"] == "registered");
    assert_eq!((registered.len(), rejected.len()), (1, 1), "{reports:?}");
    assert_eq!(rejected[0]["status"], "rejected");
    let name_check = rejected[0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "name")
        .unwrap();
    assert_eq!(name_check["ok"], false);
    assert!(
        name_check["detail"]
            .as_str()
            .unwrap()
            .contains("registered meanwhile by another process"),
        "{name_check}"
    );
    let versions = history(&context, "same");
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert_eq!(versions[0]["commit"], registered[0]["commit"]);
    let file = std::fs::read_to_string(tools_dir.join("same")).unwrap();
    let winner = if file.contains("echo one") {
        "one"
    } else {
        "two"
    };
    let output = context
        .command()
        .args(["run", "same", "--input", "{}"])
        .output()
        .unwrap();
    assert_eq!(report(&output)["result"], winner);
    // Nothing of the loser is left in the staging area.
    assert!(!tools_dir.join(".staging").exists());
}
