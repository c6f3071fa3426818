//! Discovery's probes (issue 12): policy keeps discovery from running a file it refuses, every
//! probe runs in the strictest sandbox the kernel allows, the cache keys records by that
//! sandbox, and a Kodelet tool's `config` is asked at its first call.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::context::{TestContext, write_executable};
use crate::serve::{call, connect_to_child, legacy, text};

/// Every sandbox mechanism off, so that a probe may leave a marker behind: the tests of policy
/// prove that a refused file's probes never *start*, not that the sandbox stopped them.
const UNCONFINED: &str = "landlock,netns,private-proc";

/// A Kodelet tool that appends a line to `<markers>/<name>.<argument>` each time it is run,
/// whatever the argument: `description`, `config` (asking for `timeout`), `--schema`, `run`.
fn marker_tool(context: &TestContext, name: &str, timeout: &str, run_body: &str) -> PathBuf {
    let markers = context.root.join("markers");
    fs::create_dir_all(&markers).unwrap();
    context.tool(
        name,
        &format!(
            "#!/bin/sh\necho x >> \"{markers}/{name}.$1\" 2>/dev/null\ncase \"$1\" in\n  description) printf '%s\\n' '{{\"name\": \"{name}\", \"description\": \"The {name} fixture\", \"input_schema\": {{\"type\": \"object\"}}}}' ;;\n  config) printf '%s\\n' '{{\"timeout\": \"{timeout}\"}}' ;;\n  run) {run_body} ;;\n  *) exit 2 ;;\nesac\n",
            markers = markers.display()
        ),
    );
    // An hour old, as a tool not written a moment ago: the cache trusts its records at once
    // (a file written within a second of its probe is probed again, git's "racily clean").
    let file = fs::File::options()
        .write(true)
        .open(context.tools.join(name))
        .unwrap();
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
    markers
}

/// How many times the tool `name` was run with `argument`.
fn runs(markers: &Path, name: &str, argument: &str) -> usize {
    fs::read_to_string(markers.join(format!("{name}.{argument}")))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// Every run of the tool `name`, whatever the argument.
fn any_runs(markers: &Path, name: &str) -> usize {
    ["description", "config", "--schema", "run"]
        .iter()
        .map(|argument| runs(markers, name, argument))
        .sum()
}

/// Writes `text` as a config file outside the project and returns `toolsmith --tools-dir
/// <fixtures> --config <it>` with the sandbox mechanisms switched off.
fn unconfined(context: &TestContext, config: &str) -> Command {
    let file = context.root.join("config.toml");
    fs::write(&file, config).unwrap();
    let mut command = context.with_tools();
    command
        .arg("--config")
        .arg(&file)
        .env("TOOLSMITH_DISABLE_FEATURES", UNCONFINED);
    command
}

fn json_stdout(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "stdout is not JSON ({error}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Issue 12, finding 1: a tool in `[policy] disabled` (or `[tools.X] disabled`) was refused at
/// `run`, yet its `description` and `config` probes ran on `list` and `run`.
#[test]
fn a_disabled_tools_probes_never_run() {
    let context = TestContext::new();
    let markers = marker_tool(&context, "off", "5s", "echo ran");
    marker_tool(&context, "gone", "5s", "echo ran");
    marker_tool(&context, "on", "5s", "echo ran");
    let config = "[policy]\ndisabled = [\"gone\"]\n\n[tools.off]\ndisabled = true\n";
    let command = || unconfined(&context, config);

    // `list`: the refused tools are counted, and shown by `--all` without a description.
    let output = command().arg("list").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("2 tools denied by policy"),
        "stderr: {stderr}"
    );
    let output = command()
        .args(["list", "--all", "--json"])
        .output()
        .unwrap();
    let listing = json_stdout(&output);
    let names: Vec<&str> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["on"]);
    assert_eq!(
        listing["denied"],
        json!([
            {
                "name": "gone",
                "exposed_name": "custom_tool_gone",
                "path": context.tools.join("gone"),
                "source": context.tools,
                "layer": "explicit",
                "probed": false,
                "reason": "disabled by config",
                "reason_code": "disabled"
            },
            {
                "name": "off",
                "exposed_name": "custom_tool_off",
                "path": context.tools.join("off"),
                "source": context.tools,
                "layer": "explicit",
                "probed": false,
                "reason": "disabled by config",
                "reason_code": "disabled"
            }
        ])
    );
    let output = command().args(["list", "--all"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("off at ")
            && stdout.contains("disabled by config (not run: no description)"),
        "{stdout}"
    );

    // `run`: POLICY_DENIED, and nothing was asked of the tool.
    let output = command()
        .args(["run", "off", "--input", "{}"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let envelope = json_stdout(&output);
    assert_eq!(envelope["error_code"], "POLICY_DENIED", "{envelope}");
    assert_eq!(
        envelope["error"],
        "Tool off may not be called: disabled by config."
    );

    // `show`: the verdict, without a description.
    let output = command().args(["show", "off", "--json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let shown = json_stdout(&output);
    assert_eq!(shown["probed"], false);
    assert_eq!(shown["policy"]["allowed"], false);
    assert_eq!(shown["policy"]["reason_code"], "disabled");
    assert!(shown.get("description").is_none(), "{shown}");
    let output = command().args(["show", "off"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("denied: disabled by config"), "{stdout}");

    // `validate`: every file, the named tool, and the file by path.
    for args in [
        vec!["validate".to_owned()],
        vec!["validate".to_owned(), "off".to_owned()],
        vec![
            "validate".to_owned(),
            context.tools.join("off").display().to_string(),
        ],
    ] {
        let output = command().args(&args).arg("--json").output().unwrap();
        let report = json_stdout(&output);
        let off = report["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|file| file["name"] == "off")
            .unwrap_or_else(|| panic!("{args:?}: {report}"))
            .clone();
        let last = off["checks"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["check"], "policy", "{args:?}: {off}");
        assert_eq!(last["status"], "denied", "{args:?}: {off}");
        assert_eq!(off["ok"], true, "a refused file is not a broken one: {off}");
    }

    // `serve`: the first discovery, then a listing.
    let output = command()
        .arg("serve")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));

    for name in ["off", "gone"] {
        assert_eq!(
            any_runs(&markers, name),
            0,
            "the refused tool {name} was run"
        );
    }
    // The same probes of the admitted twin did run: the markers work.
    assert!(runs(&markers, "on", "description") >= 1);
}

/// `serve` lists over MCP, rescans on a change, and never runs a refused file in any rescan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_never_probes_a_disabled_tool_listing_or_rescanning() {
    let context = TestContext::new();
    let markers = marker_tool(&context, "off", "5s", "echo ran");
    marker_tool(&context, "on", "5s", "echo ran");
    let mut command = unconfined(&context, "[policy]\ndisabled = [\"off\", \"later\"]\n");
    command.arg("serve");
    let (session, mut changes, _pid) = connect_to_child(command, legacy()).await;
    let tools = session.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    // `custom_tool` is the generator, which serve offers without a profile.
    assert_eq!(names, ["custom_tool", "custom_tool_on"]);
    let denied = session
        .call_tool(call("custom_tool_off", json!({})))
        .await
        .unwrap();
    assert_eq!(denied.is_error, Some(true));

    // A rescan: a refused file and an admitted one appear together.
    marker_tool(&context, "later", "5s", "echo ran");
    marker_tool(&context, "fresh", "5s", "echo ran");
    tokio::time::timeout(std::time::Duration::from_secs(20), changes.recv())
        .await
        .expect("the new tool is announced")
        .unwrap();
    let tools = session.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        ["custom_tool", "custom_tool_fresh", "custom_tool_on"]
    );
    session.cancel().await.unwrap();

    assert_eq!(any_runs(&markers, "off"), 0);
    assert_eq!(any_runs(&markers, "later"), 0);
    assert!(runs(&markers, "fresh", "description") >= 1);
}

/// An allowed list keeps every other file from being run, even to describe itself. The
/// `plan` profile judges what a tool declares, so an executable is probed under it (in the
/// probes' sandbox: it may declare `read_only`, issue 25 finding 6), and one that declares
/// nothing is denied and never run.
#[test]
fn profiles_and_allowed_lists_keep_probes_from_running() {
    let context = TestContext::new();
    let markers = marker_tool(&context, "writer", "5s", "echo ran");
    marker_tool(&context, "listed", "5s", "echo ran");
    let output = unconfined(&context, "[policy]\nallowed = [\"listed\"]\n")
        .arg("list")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(any_runs(&markers, "writer"), 0);
    assert_eq!(runs(&markers, "listed", "description"), 1);

    let output = unconfined(&context, "")
        .args(["list", "--profile", "plan", "--all", "--json"])
        .output()
        .unwrap();
    let listing = json_stdout(&output);
    assert_eq!(listing["tools"], json!([]));
    assert_eq!(
        listing["denied"][0]["reason_code"], "plan_needs_read_only",
        "{listing}"
    );
    assert!(runs(&markers, "writer", "description") >= 1);
    let output = unconfined(&context, "")
        .args(["run", "writer", "--profile", "plan", "--input", "{}"])
        .output()
        .unwrap();
    assert_eq!(json_stdout(&output)["error_code"], "POLICY_DENIED");
    assert_eq!(runs(&markers, "writer", "run"), 0);
    assert_eq!(runs(&markers, "listed", "run"), 0);
}

/// Whether the kernel gives the probes' sandbox its network namespace and Landlock.
#[expect(
    clippy::print_stderr,
    reason = "an untestable kernel mechanism is said loudly, not passed silently"
)]
fn probes_are_confined(context: &TestContext) -> bool {
    let output = context
        .command()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report = json_stdout(&output);
    let probes = &report["sandbox"]["probes"];
    let confined = probes["network"] == "deny" && probes["filesystem"] == "read-only";
    if !confined {
        eprintln!(
            "WARNING: the probes' sandbox is not enforced on this kernel ({}); the confinement is not tested",
            probes["not_enforced"]
        );
    }
    confined
}

/// Issue 12, finding 2: with the operator's sandbox wide open (the defaults, written out), a
/// probe reached 127.0.0.1 and wrote outside. It is refused both, and the tool is still
/// listed, since its description is fine.
#[test]
fn a_probe_gets_no_network_and_writes_nothing() {
    let context = TestContext::new();
    if !probes_are_confined(&context) {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = context.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let description = |name: &str| {
        format!(
            "printf '%s\\n' '{{\"name\": \"{name}\", \"description\": \"The {name} fixture\", \"input_schema\": {{\"type\": \"object\"}}}}'"
        )
    };
    // Each does the same on `description` as on `run`: the run proves the act can succeed.
    let reach = format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached");
    write_executable(
        &context.tools.join("reach"),
        &format!(
            "#!/bin/bash\ncase \"$1\" in\n  description) {reach}; {} ;;\n  run) {reach} ;;\nesac\n",
            description("reach")
        ),
    );
    let scribble = format!(
        "echo x > {outside}/written 2>/dev/null; echo x > {project}/written 2>/dev/null",
        outside = outside.display(),
        project = context.project.display(),
    );
    write_executable(
        &context.tools.join("scribble"),
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n  description) {scribble}; {} ;;\n  run) {scribble}; echo wrote ;;\nesac\n",
            description("scribble")
        ),
    );
    let config = context.root.join("config.toml");
    fs::write(
        &config,
        "[sandbox]\nnetwork = \"allow\"\nfilesystem = \"full\"\n",
    )
    .unwrap();
    let toolsmith = || {
        let mut command = context.with_tools();
        command.arg("--config").arg(&config);
        command
    };

    let output = toolsmith().args(["list", "--json"]).output().unwrap();
    let listing = json_stdout(&output);
    let names: Vec<&str> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["reach", "scribble"], "{listing}");
    assert!(
        listener.accept().is_err(),
        "a probe reached the host's loopback"
    );
    for written in [outside.join("written"), context.project.join("written")] {
        assert!(!written.exists(), "a probe wrote {}", written.display());
    }

    // The calls themselves run in the operator's open sandbox, and succeed at the same acts.
    let output = toolsmith()
        .args(["run", "reach", "--input", "{}"])
        .output()
        .unwrap();
    assert_eq!(json_stdout(&output)["result"], "reached");
    let mut accepted = false;
    for _ in 0..50 {
        if listener.accept().is_ok() {
            accepted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(accepted, "the call should have reached the listener");
    let output = toolsmith()
        .args(["run", "scribble", "--input", "{}"])
        .output()
        .unwrap();
    assert_eq!(json_stdout(&output)["result"], "wrote");
    assert!(outside.join("written").exists());
}

/// A record probed in one sandbox is not reused by a process whose probes run in another: a
/// description cached by a confined probe is asked again when probes lose their confinement.
#[test]
fn the_cache_is_keyed_by_the_probes_sandbox() {
    let context = TestContext::new();
    if !probes_are_confined(&context) {
        return;
    }
    let markers = marker_tool(&context, "counted", "5s", "echo ran");
    let cache = context.root.join("cache");
    let list = |features: Option<&str>| {
        let mut command = context.with_tools();
        command.env("XDG_CACHE_HOME", &cache).arg("list");
        if let Some(features) = features {
            command.env("TOOLSMITH_DISABLE_FEATURES", features);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&output.stdout).contains("counted"));
    };
    // Confined, the probe cannot leave its marker; the cache file records the sandbox.
    list(None);
    assert_eq!(runs(&markers, "counted", "description"), 0);
    let file = fs::read_to_string(cache.join("toolsmith/discovery.json")).unwrap();
    assert!(file.contains("network=deny"), "{file}");
    // Unconfined: a different sandbox, so the probe runs again (and can leave its marker).
    list(Some(UNCONFINED));
    assert_eq!(runs(&markers, "counted", "description"), 1);
    // Same sandbox again: the cache answers.
    list(Some(UNCONFINED));
    assert_eq!(runs(&markers, "counted", "description"), 1);
}

/// A Kodelet tool's `config` is not asked when listing (one process per tool), but at its
/// first call, and the answer is cached: the timeout it requests applies from that call on.
#[test]
fn config_is_asked_at_the_first_call_and_cached() {
    let context = TestContext::new();
    let markers = marker_tool(&context, "slow", "5s", "sleep 1.5; echo slept");
    let cache = context.root.join("cache");
    let toolsmith = || {
        let mut command = unconfined(&context, "[limits]\ntimeout = \"1s\"\n");
        command.env("XDG_CACHE_HOME", &cache);
        command
    };
    let output = toolsmith().arg("list").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(runs(&markers, "slow", "description"), 1);
    assert_eq!(
        runs(&markers, "slow", "config"),
        0,
        "listing asked `config`"
    );

    // The first call asks, and runs within the 5 s the tool requests, not the 1 s default.
    let output = toolsmith()
        .args(["run", "slow", "--input", "{}"])
        .output()
        .unwrap();
    let envelope = json_stdout(&output);
    assert_eq!(envelope["result"], "slept", "{envelope}");
    assert_eq!(runs(&markers, "slow", "config"), 1);
    assert_eq!(runs(&markers, "slow", "description"), 1);

    // The second call and `show` take the answer from the cache.
    let output = toolsmith()
        .args(["run", "slow", "--input", "{}"])
        .output()
        .unwrap();
    assert_eq!(json_stdout(&output)["result"], "slept");
    let output = toolsmith()
        .args(["show", "slow", "--json"])
        .output()
        .unwrap();
    let shown = json_stdout(&output);
    assert_eq!(shown["limits"]["timeout"], "5s", "{shown}");
    assert_eq!(shown["limits"]["timeout_source"]["from"], "requested");
    assert_eq!(runs(&markers, "slow", "config"), 1);
    assert_eq!(runs(&markers, "slow", "description"), 1);
}

/// `show` asks `config` on demand, so it prints the timeout a tool requests before any call.
#[test]
fn show_asks_config_on_demand() {
    let context = TestContext::new();
    let markers = marker_tool(&context, "patient", "45s", "echo ran");
    let output = unconfined(&context, "")
        .args(["show", "patient", "--json"])
        .output()
        .unwrap();
    let shown = json_stdout(&output);
    assert_eq!(shown["limits"]["timeout"], "45s", "{shown}");
    assert_eq!(
        shown["limits"]["timeout_source"],
        json!({"from": "requested", "requested": "45s", "ceiling": "5m"})
    );
    assert_eq!(runs(&markers, "patient", "config"), 1);
}

/// Over MCP, the first call asks `config` through the live registry's cache, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_asks_config_once_at_the_first_call() {
    let context = TestContext::new();
    let markers = marker_tool(&context, "slow", "5s", "sleep 1.5; echo slept");
    let mut command = unconfined(&context, "[limits]\ntimeout = \"1s\"\n");
    command.arg("serve");
    let (session, _changes, _pid) = connect_to_child(command, legacy()).await;
    session.list_all_tools().await.unwrap();
    assert_eq!(runs(&markers, "slow", "config"), 0);
    for _ in 0..2 {
        let result = session
            .call_tool(call("custom_tool_slow", json!({})))
            .await
            .unwrap();
        assert_eq!(text(&result), "slept", "{result:?}");
    }
    session.cancel().await.unwrap();
    assert_eq!(runs(&markers, "slow", "config"), 1);
    assert_eq!(runs(&markers, "slow", "description"), 1);
}

/// A probe slower than its one-second budget (a loaded machine) runs once more with a
/// longer one, so a good tool is not dropped from a catalog for the life of a server; a
/// tool whose description truly hangs is still a problem, named with the longer budget.
#[test]
fn a_probe_that_times_out_once_gets_a_second_longer_try() {
    let context = TestContext::new();
    context.tool(
        "slow",
        "#!/bin/sh\nif [ \"$1\" = description ]; then sleep 1.5; echo '{\"name\": \"slow\", \"description\": \"Slow to describe\", \"input_schema\": {\"type\": \"object\"}}'; else echo done; fi\n",
    );
    context.tool("hangs", "#!/bin/sh\nsleep 30\n");
    let output = context
        .with_tools()
        .args(["list", "--json"])
        .output()
        .unwrap();
    let listing = json_stdout(&output);
    let names: Vec<&str> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["slow"], "{listing}");
    assert_eq!(
        listing["problems"][0]["error"], "`description` did not finish within 3s and was killed",
        "{listing}"
    );
}

/// Issue 25, acceptance 4: an MCP call asks a Kodelet tool's `config` once, through the front
/// door, even when the answer is invalid. The handler used to ask through the live registry
/// first, then, the answer being invalid, the call asked again with a cache of its own (and
/// again at every later call): the `config` ran three times for two calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_asks_an_invalid_config_once() {
    let context = TestContext::new();
    let markers = marker_tool(&context, "broken", "forever", "echo ran");
    let mut command = unconfined(&context, "[limits]\ntimeout = \"1s\"\n");
    command.arg("serve");
    let (session, _changes, _pid) = connect_to_child(command, legacy()).await;
    session.list_all_tools().await.unwrap();
    for _ in 0..2 {
        let result = session
            .call_tool(call("custom_tool_broken", json!({})))
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true), "{result:?}");
        assert!(
            text(&result).contains("could not be loaded")
                && text(&result).contains("TOOL_NOT_FOUND"),
            "{result:?}"
        );
    }
    session.cancel().await.unwrap();
    assert_eq!(runs(&markers, "broken", "config"), 1);
    assert_eq!(runs(&markers, "broken", "run"), 0);
}
