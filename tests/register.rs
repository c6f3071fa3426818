//! Issue 25: a registration is one probe. The generator hands the live registry the tool its
//! staged checks loaded (with the record of their probe), so a `custom_tool` registration
//! probes no other tool file, and no file twice; counted from outside, by the files' own marks.

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

/// Acceptance 2: over a catalog of 100 unchanged tools, a `custom_tool` registration starts
/// exactly one `description` probe, of the new file, in its staged checks; the live registry
/// takes that record (no rescan of the catalog, none of the new file, not even the watcher's
/// after the file's `rename`), and the tool's first call asks nothing again.
///
/// The generated tool counts its own probes: the bash template is overridden
/// (`$TOOLSMITH_HOME/templates/bash.tera`) by the embedded one plus a line that leaves a mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_over_a_hundred_tools_probes_only_the_new_file() {
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
    let embedded = include_str!("../templates/bash.tera");
    let (first_line, rest) = embedded.split_once('\n').unwrap();
    let counting = format!(
        "{first_line}\necho x >> \"{}/$(basename \"$0\").${{1:-}}\" 2>/dev/null\n{rest}",
        markers.display()
    );
    crate::context::write_file(
        &context
            .root
            .join("home/.config/toolsmith/templates/bash.tera"),
        &counting,
    );

    let mut command = context.with_tools();
    command
        .arg("serve")
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
    // The watcher sees the `rename` and rescans after its debounce: give it time to (wrongly)
    // probe, well past the settle time.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(session.list_all_tools().await.unwrap().len(), CATALOG + 2);

    assert_eq!(
        catalog_probes(&markers),
        CATALOG,
        "a registration probed unchanged tools again"
    );
    // Two probes, both of the new file: the staged file's, and the one of the file rewritten
    // with the declaration its tests were learned under (`carry_learned`), whose record the
    // live registry adopts. The first could go when the final probe's tool is compared with
    // the predicted one in full; issue 25 keeps that open.
    assert_eq!(
        runs(&markers, "tell_answer", "description"),
        2,
        "the new tool is probed by its staged checks and once more after its learned declaration is written"
    );
    assert_eq!(
        runs(&markers, "tell_answer", "config"),
        2,
        "its `config` is asked with each probe of the new file, not again at its first call"
    );
    session.cancel().await.unwrap();
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
