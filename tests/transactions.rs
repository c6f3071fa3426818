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

mod disk_full;
mod served;

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
    #[expect(
        clippy::disallowed_methods,
        reason = "the test builds its shim with cc"
    )]
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&source)
        .arg("-ldl")
        .status();
    match built {
        Ok(status) if status.success() => Some(out),
        other => {
            eprintln!(
                "WARNING: cannot build the crash shim with cc ({other:?}): the crash test did not run"
            );
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
    let points: usize = fs::read_to_string(&count_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(points > 5, "the shim saw only {points} operations");
    // The number of operations varies a little between runs (a directory that exists or
    // not): the kills go on until a run ends on its own.
    let mut point = 0;
    loop {
        point += 1;
        assert!(point <= 2 * points + 20, "never ran to the end");
        restore();
        let output = run(command(context)
            .env("LD_PRELOAD", shim)
            .env("TS_CRASH_DIR", &tools)
            .env("TS_CRASH_AT", point.to_string()));
        if output.status.signal().is_none() {
            must(&output);
            assert!(
                point > points / 2,
                "point {point}: not killed, of about {points}"
            );
            break;
        }
        assert_eq!(output.status.signal(), Some(9), "point {point}: {output:?}");
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
    let fresh_points = crash_everywhere(
        &fresh,
        &shim,
        &|context| generate(context, "fresh", false),
        &|context| generate(context, "fresh", true),
    );

    let new_name = TestContext::new();
    new_name.own_project();
    let mut other = request("other", false);
    other["name"] = json!("other_tool");
    new_name.project_file("other.json", &other.to_string());
    must(&run(new_name.command().args([
        "generate",
        "--request",
        "other.json",
    ])));
    let new_name_points = crash_everywhere(
        &new_name,
        &shim,
        &|context| generate(context, "named", false),
        &|context| generate(context, "named", true),
    );

    let replace = TestContext::new();
    replace.own_project();
    must(&run(&mut generate(&replace, "first", false)));
    let replace_points = crash_everywhere(
        &replace,
        &shim,
        &|context| generate(context, "second", true),
        &|context| generate(context, "second", true),
    );

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

/// Runs `command`, killing it (by its own pid) if it outlives `deadline`: a hang is a
/// failure with a message, not a stuck test.
fn run_within(command: &mut Command, deadline: Duration) -> Output {
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    let watcher = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !watcher.is_finished() {
        if started.elapsed() > deadline {
            // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
            unsafe { libc::kill(i32::try_from(pid).unwrap(), libc::SIGKILL) };
            let _reaped = watcher.join();
            panic!("{command:?} did not return within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    watcher.join().unwrap()
}

fn git(tools: &Path, args: &[&str]) -> String {
    #[expect(
        clippy::disallowed_methods,
        reason = "git itself reads or plants the history"
    )]
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(tools.join(".history.git"))
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn loose(tools: &Path, id: &str) -> PathBuf {
    tools
        .join(".history.git/objects")
        .join(&id[..2])
        .join(&id[2..])
}

/// A tool with three versions.
fn three_versions() -> TestContext {
    let context = TestContext::new();
    context.own_project();
    must(&run(&mut generate(&context, "first", false)));
    must(&run(&mut generate(&context, "second", true)));
    must(&run(&mut generate(&context, "third", true)));
    context
}

const DEADLINE: Duration = Duration::from_secs(20);

fn assert_clear_error(output: &Output, expected: &[&str]) {
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for part in expected {
        assert!(stderr.contains(part), "no {part:?} in: {stderr}");
    }
}

/// A truncated loose object (what a power cut can leave; libgit2 1.9.7 spins forever
/// inflating one): `history`, `rollback` and `replace` return promptly with an error naming
/// the object and the repair, and the live tool is unchanged.
#[test]
fn a_truncated_object_is_a_prompt_clear_error_not_a_hang() {
    let context = three_versions();
    let tools = tools_dir(&context);
    let head = git(&tools, &["rev-parse", "refs/tools/tell_answer"]);
    let object = loose(&tools, &head);
    let bytes = fs::read(&object).unwrap();
    let mut permissions = fs::metadata(&object).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o644);
    fs::set_permissions(&object, permissions).unwrap();
    fs::write(&object, &bytes[..bytes.len() / 2]).unwrap();
    let live = fs::read_to_string(tools.join("tell_answer")).unwrap();
    let expected = [head.as_str(), "is truncated", "move it aside"];
    assert_clear_error(
        &run_within(context.command().args(["history", "tell_answer"]), DEADLINE),
        &expected,
    );
    assert_clear_error(&run_within(&mut rollback(&context), DEADLINE), &expected);
    assert_clear_error(
        &run_within(&mut generate(&context, "fourth", true), DEADLINE),
        &expected,
    );
    assert_eq!(fs::read_to_string(tools.join("tell_answer")).unwrap(), live);
}

/// A deleted middle commit: `history` is an error naming the missing object, never a history
/// of one version.
#[test]
fn a_deleted_middle_commit_is_an_error_not_a_shorter_history() {
    let context = three_versions();
    let tools = tools_dir(&context);
    let middle = git(&tools, &["rev-parse", "refs/tools/tell_answer~1"]);
    fs::remove_file(loose(&tools, &middle)).unwrap();
    let output = run_within(context.command().args(["history", "tell_answer"]), DEADLINE);
    assert_clear_error(&output, &[middle.as_str(), "is missing"]);
    // A missing blob likewise.
    let context = three_versions();
    let tools = tools_dir(&context);
    let blob = git(
        &tools,
        &["rev-parse", "refs/tools/tell_answer~2:tell_answer"],
    );
    fs::remove_file(loose(&tools, &blob)).unwrap();
    assert_clear_error(
        &run_within(&mut rollback(&context), DEADLINE),
        &[blob.as_str(), "is missing"],
    );
}

/// A ref lock a killed commit left (`refs/tools/NAME.lock`) used to refuse every later replace
/// or rollback of the tool: the next registration removes it, says so, and succeeds.
#[test]
fn a_stale_ref_lock_is_repaired_by_the_next_registration() {
    let context = three_versions();
    let tools = tools_dir(&context);
    fs::write(tools.join(".history.git/refs/tools/tell_answer.lock"), "").unwrap();
    let output = run_within(&mut generate(&context, "fourth", true), DEADLINE);
    must(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("repaired first: removed") && stdout.contains("tell_answer.lock"),
        "{stdout}"
    );
    must(&run_within(&mut rollback(&context), DEADLINE));
}

/// Twenty rounds of two concurrent rollbacks: each restores a distinct target and reports its
/// own new version (the target is read, and the version reported, under the lock).
#[test]
fn concurrent_rollbacks_restore_distinct_targets_and_report_their_own_versions() {
    let context = three_versions();
    for round in 0..20 {
        let children: Vec<_> = (0..2)
            .map(|_| {
                rollback(&context)
                    .arg("--json")
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut reported: Vec<Value> = children
            .into_iter()
            .map(|child| {
                let output = child.wait_with_output().unwrap();
                must(&output);
                serde_json::from_slice(&output.stdout).unwrap()
            })
            .collect();
        reported.sort_by_key(|version| version["version"].as_u64());
        let first = reported[0]["version"].as_u64().unwrap();
        assert_eq!(
            reported[1]["version"].as_u64(),
            Some(first + 1),
            "round {round}: {reported:?}"
        );
        // The later one restored the version before the earlier one's: distinct targets.
        assert_ne!(
            reported[0]["message"], reported[1]["message"],
            "round {round}"
        );
        let restored = |version: &Value| {
            let message = version["message"].as_str().unwrap();
            message.rsplit('v').next().unwrap().parse::<u64>().unwrap()
        };
        assert_eq!(
            restored(&reported[0]),
            first - 2,
            "round {round}: {reported:?}"
        );
        assert_eq!(
            restored(&reported[1]),
            first - 1,
            "round {round}: {reported:?}"
        );
    }
}

/// Hostile (22.13): a cloned project whose `.toolsmith/tools` is a link to the user's own layer
/// tries to have every generated tool written there. Held: the generator refuses the link and
/// writes nothing through it.
#[test]
fn hostile_a_tools_dir_link_is_refused() {
    let context = TestContext::new();
    context.own_project();
    let elsewhere = context.root.join("home/.config/toolsmith/tools");
    fs::create_dir_all(&elsewhere).unwrap();
    let link = tools_dir(&context);
    fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let output = run_within(&mut generate(&context, "linked", false), DEADLINE);
    assert_clear_error(&output, &["is a symbolic link"]);
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "written through the link"
    );
}

/// Hostile (22.13): a `.staging` link sends staging directories elsewhere; and (one more of
/// our own) a `.history.git/objects/xx` link would receive libgit2's object writes. Held: both
/// are refused before anything is written through them.
#[test]
fn hostile_staging_and_history_links_are_refused() {
    let context = TestContext::new();
    context.own_project();
    must(&run(&mut generate(&context, "first", false)));
    let tools = tools_dir(&context);
    let elsewhere = context.root.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, tools.join(".staging")).unwrap();
    let output = run_within(&mut generate(&context, "second", true), DEADLINE);
    assert_clear_error(&output, &[".staging", "is a symbolic link"]);
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    fs::remove_file(tools.join(".staging")).unwrap();
    let objects = tools.join(".history.git/objects");
    let planted = objects.join("ff");
    let _absent = fs::remove_dir_all(&planted);
    std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
    let output = run_within(&mut generate(&context, "second", true), DEADLINE);
    assert_clear_error(&output, &["objects/ff", "is a symbolic link"]);
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(
        fs::read_to_string(tools.join("tell_answer"))
            .unwrap()
            .contains("first")
    );
}

/// Hostile (22.12): a `.history.git` planted in a clone records a version whose tree entry
/// is an absolute path; `rollback` would write the attacker's executable there. Held: the
/// version is refused as not the generator's, nothing is written, the live tool is unchanged.
#[test]
fn hostile_a_planted_tree_entry_with_a_path_is_not_restored() {
    let context = TestContext::new();
    context.own_project();
    must(&run(&mut generate(&context, "first", false)));
    must(&run(&mut generate(&context, "second", true)));
    let tools = tools_dir(&context);
    let target = context.root.join("planted-executable");
    let blob = {
        let payload = context.root.join("payload");
        fs::write(&payload, "#!/bin/sh\necho owned\n").unwrap();
        git(&tools, &["hash-object", "-w", payload.to_str().unwrap()])
    };
    // A tree object by hand: `<mode> <name>\0<20-byte id>`, the name an absolute path.
    let mut tree = format!("100755 {}\0", target.display()).into_bytes();
    tree.extend(
        (0..20).map(|index| u8::from_str_radix(&blob[index * 2..index * 2 + 2], 16).unwrap()),
    );
    let tree_file = context.root.join("tree");
    fs::write(&tree_file, tree).unwrap();
    let tree = git(
        &tools,
        &[
            "hash-object",
            "-t",
            "tree",
            "--literally",
            "-w",
            tree_file.to_str().unwrap(),
        ],
    );
    let head = git(&tools, &["rev-parse", "refs/tools/tell_answer"]);
    let planted = git(
        &tools,
        &[
            "commit-tree",
            &tree,
            "-p",
            &head,
            "-m",
            "tell_answer v3: planted",
        ],
    );
    let top = git(
        &tools,
        &[
            "commit-tree",
            &git(&tools, &["rev-parse", &format!("{head}^{{tree}}")]),
            "-p",
            &planted,
            "-m",
            "tell_answer v4",
        ],
    );
    git(&tools, &["update-ref", "refs/tools/tell_answer", &top]);
    let output = run_within(
        context
            .command()
            .args(["rollback", "tell_answer", "--to", "3"]),
        DEADLINE,
    );
    assert_clear_error(&output, &["not a file of that tool"]);
    assert!(
        !target.exists(),
        "rollback wrote outside the tools directory"
    );
    assert!(
        fs::read_to_string(tools.join("tell_answer"))
            .unwrap()
            .contains("second")
    );
}

/// Plants, with git2, a commit on `tell_answer`'s chain after `parent` holding one file of
/// that tool with `contents`, whose message is `message`, then one more version on top (so
/// that the planted one is not the latest); returns the planted commit's id.
fn plant_version(tools: &Path, parent: &str, contents: &str, message: &str) -> String {
    let repository = git2::Repository::open_bare(tools.join(".history.git")).unwrap();
    let head = repository
        .find_commit(git2::Oid::from_str(parent).unwrap())
        .unwrap();
    let blob = repository.blob(contents.as_bytes()).unwrap();
    let mut tree = repository.treebuilder(None).unwrap();
    tree.insert("tell_answer", blob, 0o100_755).unwrap();
    let tree = repository.find_tree(tree.write().unwrap()).unwrap();
    let signature = git2::Signature::now("toolsmith", "toolsmith@localhost").unwrap();
    let planted = repository
        .commit(None, &signature, &signature, message, &tree, &[&head])
        .unwrap();
    let planted_commit = repository.find_commit(planted).unwrap();
    let top = repository
        .commit(
            None,
            &signature,
            &signature,
            "tell_answer v4: on top",
            &head.tree().unwrap(),
            &[&planted_commit],
        )
        .unwrap();
    repository
        .reference("refs/tools/tell_answer", top, true, "planted")
        .unwrap();
    planted.to_string()
}

fn live_answer(context: &TestContext) -> String {
    fs::read_to_string(tools_dir(context).join("tell_answer")).unwrap()
}

/// Hostile (22.12): `rollback` restored any version in the history, whoever wrote it. A commit
/// planted by hand (a cloned `.history.git`, or git run on it) holds a valid file of the tool
/// but was never checked. Held: a version without the generator's provenance trailers is
/// refused, naming the commit, and the live tool is unchanged. Another way: trailers that only
/// look like the generator's (no digest) are refused alike; and trailers forged in full still
/// do not make a version live, since the checks run again (the planted file fails its own
/// declared test here).
#[test]
fn hostile_a_version_without_the_generators_provenance_is_not_restored() {
    let context = TestContext::new();
    context.own_project();
    must(&run(&mut generate(&context, "first", false)));
    must(&run(&mut generate(&context, "second", true)));
    let tools = tools_dir(&context);
    let rendered = live_answer(&context);
    let payload = rendered.replace("echo second", "echo planted");
    assert_ne!(payload, rendered, "the fixture's body changed shape");
    let attempts = [
        (
            "tell_answer v3: planted\n".to_owned(),
            "no Toolsmith-Checks trailer",
        ),
        (
            "tell_answer v3: planted\n\nToolsmith-Checks: passed\n".to_owned(),
            "no Toolsmith-Checks trailer",
        ),
        (
            format!(
                "tell_answer v3: planted\n\nToolsmith-Checks: passed\nToolsmith-Check-Report: sha256:{}\n",
                "0".repeat(64)
            ),
            "fails its checks now",
        ),
    ];
    let second = git(&tools, &["rev-parse", "refs/tools/tell_answer"]);
    for (message, refusal) in attempts {
        let planted = plant_version(&tools, &second, &payload, &message);
        let output = run_within(
            context
                .command()
                .args(["rollback", "tell_answer", "--to", "3"]),
            DEADLINE,
        );
        assert_clear_error(&output, &[refusal]);
        if refusal.starts_with("no ") {
            assert_clear_error(&output, &[&planted]);
        }
        assert!(live_answer(&context).contains("echo second"), "{message}");
        assert!(!live_answer(&context).contains("planted"));
    }
}

/// `rollback` re-runs the checks on the version it restores: one whose tool now fails its
/// declared test (what it reads changed since it was registered) is refused, with the failing
/// check, and the live version stays; once the dependency is back, the same rollback works.
#[test]
fn a_version_that_fails_its_checks_now_is_not_restored() {
    let context = TestContext::new();
    context.own_project();
    let dependency = context.root.join("dependency");
    fs::write(&dependency, "first\n").unwrap();
    let reading = json!({
        "name": "tell_answer",
        "description": "Tells the answer.",
        "language": "bash",
        "implementation": format!("cat {}", dependency.display()),
        "tests": [{"input": {}, "expect": {"result_contains": "first"}}],
    });
    context.project_file("request.json", &reading.to_string());
    let mut first = context.command();
    first.args(["--no-cache", "generate", "--request", "request.json"]);
    must(&run(&mut first));
    must(&run(&mut generate(&context, "second", true)));

    fs::write(&dependency, "changed\n").unwrap();
    let output = run_within(
        context
            .command()
            .args(["rollback", "tell_answer", "--to", "1"]),
        DEADLINE,
    );
    assert_clear_error(
        &output,
        &["version 1 of `tell_answer` fails its checks now", "test: "],
    );
    assert!(live_answer(&context).contains("echo second"));
    let versions = git(
        &tools_dir(&context),
        &["rev-list", "refs/tools/tell_answer"],
    );
    assert_eq!(
        versions.lines().count(),
        2,
        "a refused rollback recorded a version"
    );

    fs::write(&dependency, "first\n").unwrap();
    must(&run_within(
        context
            .command()
            .args(["rollback", "tell_answer", "--to", "1"]),
        DEADLINE,
    ));
    assert!(live_answer(&context).contains(&dependency.display().to_string()));
    let head = git(
        &tools_dir(&context),
        &["log", "-1", "--format=%B", "refs/tools/tell_answer"],
    );
    assert!(head.contains("Toolsmith-Checks: passed"), "{head}");
}
