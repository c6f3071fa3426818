//! Issue 25: a registration is one probe. The generator hands the live registry the tool its
//! staged checks loaded (with the record of their probe), so a `custom_tool` registration
//! probes no other tool file, and a file of an embedded template once; counted from outside,
//! by the catalog files' own marks and a counting `bash` in the tools' `PATH`.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::context::{TestContext, write_executable};
use crate::serve::{PATIENCE, call, connect_to_child, legacy, text};

/// Every sandbox mechanism that would stop a probe from leaving its mark off: the test counts
/// the probes that *start*, not what the sandbox lets them do.
const UNCONFINED: &str = "landlock";

/// How many unchanged tools the catalog holds.
const CATALOG: usize = 100;

/// A Kodelet tool that appends a line to `<markers>/<name>.<argument>` at each run, an hour
/// old (so the cache trusts its record at once).
fn counting_tool(dir: &Path, markers: &Path, name: &str) {
    let path = write_executable(
        &dir.join(name),
        &format!(
            "#!/bin/sh\necho x >> \"{markers}/{name}.$1\" 2>/dev/null\ncase \"$1\" in\n  description) printf '%s\\n' '{{\"name\": \"{name}\", \"description\": \"The {name} fixture\", \"input_schema\": {{\"type\": \"object\"}}}}' ;;\n  run) echo ran ;;\n  *) exit 2 ;;\nesac\n",
            markers = markers.display()
        ),
    );
    let file = fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

/// How many times the tool `name` was run with `argument`.
fn runs(markers: &Path, name: &str, argument: &str) -> usize {
    fs::read_to_string(markers.join(format!("{name}.{argument}")))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// The catalog's `description` probes, all tools together.
fn catalog_probes(markers: &Path) -> usize {
    (0..CATALOG)
        .map(|index| runs(markers, &format!("tool_{index:03}"), "description"))
        .sum()
}

/// A `bash` first in the `PATH` the tools receive (`[env] allow` passes `PATH` by default),
/// which logs the script and the subcommand of every run to `<markers>/bash.log` and execs the
/// real bash: the generated bash tool starts with `#!/usr/bin/env bash`, so every probe and
/// run of it is counted from outside, whatever its file prints. Returns the `PATH` to give.
fn counting_bash(root: &Path, markers: &Path) -> std::ffi::OsString {
    let real = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("bash"))
        .find(|path| path.is_file())
        .expect("bash in PATH");
    let bin = root.join("counting-bin");
    write_executable(
        &bin.join("bash"),
        &format!(
            "#!/bin/sh\nprintf '%s %s\\n' \"$(basename \"${{1:-}}\")\" \"${{2:-}}\" >> '{log}' 2>/dev/null || :\nexec '{real}' \"$@\"\n",
            log = markers.join("bash.log").display(),
            real = real.display()
        ),
    );
    let mut path = vec![bin];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(path).unwrap()
}

/// How many times bash ran the tool file `name` with the subcommand `argument`, by the
/// counting `bash`'s log.
fn bash_runs(markers: &Path, name: &str, argument: &str) -> usize {
    let wanted = format!("{name} {argument}");
    fs::read_to_string(markers.join("bash.log"))
        .unwrap_or_default()
        .lines()
        .filter(|line| *line == wanted)
        .count()
}

/// What one `custom_tool` registration over a catalog of 100 unchanged tools cost in probes,
/// counted from outside: the catalog's `description` probes, and the new file's `description`
/// and `config` probes. With `override_template`, the bash template is overridden
/// (`$TOOLSMITH_HOME/templates/bash.tera`) by the embedded one, unchanged: the same file, but
/// answers the generator cannot know.
///
/// The registered tool is listed (`list_changed`) and callable in the same session; the
/// watcher, which sees the file's `rename`, gets well past its settle time to (wrongly) probe.
async fn registration_probes(override_template: bool) -> (usize, usize, usize) {
    let context = TestContext::new();
    // The generator writes into the directory this server serves, beside the catalog.
    context.project_file(
        ".toolsmith/config.toml",
        &format!(
            "[generator]\ntools_dir = {:?}\n",
            context.tools.display().to_string()
        ),
    );
    // Landlock is off so that the tools can leave their marks; their runs do without it.
    context.user_config(&format!(
        "[trust]\npaths = [{:?}]\nproject_may_loosen = true\n[sandbox]\nfilesystem = \"read-only-if-possible\"\n",
        context.project.display().to_string()
    ));
    let markers = context.root.join("markers");
    fs::create_dir_all(&markers).unwrap();
    for index in 0..CATALOG {
        counting_tool(&context.tools, &markers, &format!("tool_{index:03}"));
    }
    if override_template {
        crate::context::write_file(
            &context
                .root
                .join("home/.config/toolsmith/templates/bash.tera"),
            include_str!("../templates/bash.tera"),
        );
    }

    let mut command = context.with_tools();
    command
        .arg("serve")
        .env("PATH", counting_bash(&context.root, &markers))
        .env("TOOLSMITH_DISABLE_FEATURES", UNCONFINED);
    let (session, mut changes, _pid) = connect_to_child(command, legacy()).await;
    assert_eq!(
        session.list_all_tools().await.unwrap().len(),
        CATALOG + 1,
        "the catalog and custom_tool"
    );
    // The marks work: the first discovery probed every tool once.
    assert_eq!(catalog_probes(&markers), CATALOG);

    let result = session
        .call_tool(call(
            "custom_tool",
            json!({
                "name": "tell_answer",
                "description": "Tells the answer to a question.",
                "parameters": {"question": "What to answer"},
                "language": "bash",
                "implementation": "printf '%s: 42\\n' \"$ARG_QUESTION\"",
                "tests": [{"input": {"question": "why"}, "expect": {"result": "why: 42"}}],
            }),
        ))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    assert_eq!(
        result.structured_content.as_ref().unwrap()["status"],
        "registered"
    );
    tokio::time::timeout(PATIENCE, changes.recv())
        .await
        .expect("no notifications/tools/list_changed")
        .unwrap();
    let answer = session
        .call_tool(call("custom_tool_tell_answer", json!({"question": "how"})))
        .await
        .unwrap();
    assert_eq!(text(&answer), "how: 42");
    // The counting bash saw the tool run: its log is not empty by accident.
    assert!(
        bash_runs(&markers, "tell_answer", "run") >= 2,
        "the checks' run and the call"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(session.list_all_tools().await.unwrap().len(), CATALOG + 2);
    session.cancel().await.unwrap();
    (
        catalog_probes(&markers),
        bash_runs(&markers, "tell_answer", "description"),
        bash_runs(&markers, "tell_answer", "config"),
    )
}

/// Acceptance 2: over a catalog of 100 unchanged tools, a `custom_tool` registration starts
/// exactly one probe, counted from outside: one `description` probe of the new file, the one
/// of the file rewritten with its learned declaration (its checks ran on the tool the
/// generator predicted from the embedded template, which that probe proved it is), and no
/// `config` probe, not even at the tool's first call (the predicted answer is in the record
/// the live registry adopts). No catalog tool is probed again, no rescan probes the new file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_over_a_hundred_tools_probes_only_the_new_file() {
    let (catalog, description, config) = registration_probes(false).await;
    assert_eq!(
        catalog, CATALOG,
        "a registration probed unchanged tools again"
    );
    assert_eq!(description, 1, "the new file's `description` probes");
    assert_eq!(config, 0, "the new file's `config` probes");
}

/// The price of a template the generator does not know (an override): its answers are the
/// file's, so the staged file is probed (`description`, then `config`) before its checks, and
/// the file rewritten with its learned declaration once more (`description`; its `config`
/// again at the tool's first call): two of each. Still no catalog tool is probed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overriding_template_costs_a_second_probe_of_the_new_file() {
    let (catalog, description, config) = registration_probes(true).await;
    assert_eq!(
        catalog, CATALOG,
        "a registration probed unchanged tools again"
    );
    assert_eq!(description, 2, "the new file's `description` probes");
    assert_eq!(config, 2, "the new file's `config` probes");
}

/// Runs the Python SDK's `custom_tool` script against `toolsmith serve` in the project,
/// expecting `expect` (`refused` or `registered`); returns its stdout.
fn python_custom_tool(python: &Path, context: &TestContext, expect: &str) -> String {
    #[expect(
        clippy::disallowed_methods,
        reason = "the test runs the MCP Python SDK's client"
    )]
    let output = std::process::Command::new(python)
        .arg(crate::context::repository_root().join("tests/acceptance/mcp_custom_tool.py"))
        .arg(env!("CARGO_BIN_EXE_toolsmith-dup"))
        .arg(&context.project)
        .arg(expect)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", context.root.join("home"))
        .env(
            "TOOLSMITH_HOME",
            context.root.join("home/.config/toolsmith"),
        )
        .env("TMPDIR", context.tmpdir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the Python SDK's client failed ({expect}):\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Issue 25, finding 1 and acceptance 1 (first point), with the official Python SDK:
/// `custom_tool` in a project that is not trusted (a fresh clone) ends in a clear refusal with
/// a `hint:`, the very refusal `toolsmith generate` gives in the same set-up, and nothing is
/// written; once the project is trusted, both register a tool, and over MCP it is announced
/// (`list_changed`), listed and callable in the same session.
#[test]
fn custom_tool_over_the_python_sdk_ends_like_generate_from_the_cli() {
    let Some(python) = crate::serve_http::mcp_python() else {
        return;
    };
    let context = TestContext::new();
    let request = json!({
        "name": "tell_cli", "description": "Tells.", "language": "bash",
        "implementation": "echo told",
        "tests": [{"input": {}, "expect": {"result": "told"}}],
    });
    crate::context::write_file(&context.root.join("request.json"), &request.to_string());
    let generate = || {
        context
            .command()
            .arg("generate")
            .arg("--request")
            .arg(context.root.join("request.json"))
            .output()
            .unwrap()
    };

    let cli = generate();
    assert_eq!(cli.status.code(), Some(2));
    let cli_stderr = String::from_utf8_lossy(&cli.stderr).into_owned();
    let mcp = python_custom_tool(&python, &context, "refused");
    let refusal: Vec<&str> = mcp
        .lines()
        .filter_map(|line| line.strip_prefix("refusal: "))
        .collect();
    // The same sentence and the same hint, word for word.
    let reason = refusal
        .iter()
        .find(|line| line.contains("is not trusted"))
        .unwrap_or_else(|| panic!("no reason in {refusal:?}"));
    let hint = refusal
        .iter()
        .find(|line| line.starts_with("hint: "))
        .unwrap();
    assert!(cli_stderr.contains(reason), "{cli_stderr}\nvs {reason}");
    assert!(cli_stderr.contains(hint), "{cli_stderr}\nvs {hint}");
    assert!(!context.project.join(".toolsmith").exists());

    assert!(context.command().arg("trust").status().unwrap().success());
    let mcp = python_custom_tool(&python, &context, "registered");
    assert!(mcp.contains("ok list_changed"), "{mcp}");
    let cli = generate();
    assert_eq!(
        cli.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let tools = context.project.join(".toolsmith/tools");
    assert!(tools.join("tell_answer").is_file() && tools.join("tell_cli").is_file());
}
