//! A running `serve` checks the project's trust whenever it reads the project layer, not once at start (issue 22, finding 11), over stdio and HTTP.

use std::path::Path;
use std::time::Instant;

use rmcp::service::RunningService;
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;

use crate::context::{TestContext, shell_tool, write_executable, write_file};
use crate::serve::{PATIENCE, call, connect_to_child, legacy, text};
use crate::serve_http::Server;

const FIRST_CONFIG: &str = "[policy]\ndisabled = [\"other\"]\n";
/// The config a `git pull` brings while serving. Were it applied, `local` would be disabled.
const CHANGED_CONFIG: &str = "[policy]\ndisabled = [\"local\"]\n";

/// A trusted project with one tool in its layer and a config.
fn trusted_project(context: &TestContext) {
    write_project(&context.project);
    trust(context);
}

fn write_project(project: &Path) {
    write_executable(
        &project.join(".toolsmith/tools/local"),
        &shell_tool("local", r#"{"type": "object"}"#, "echo local-ran"),
    );
    write_file(&project.join(".toolsmith/config.toml"), FIRST_CONFIG);
}

fn trust(context: &TestContext) {
    let output = context.command().arg("trust").output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Waits until `custom_tool_local` is listed (or not), a bound on liveness.
async fn wait_listed<H: ClientHandler>(session: &RunningService<RoleClient, H>, listed: bool) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let tools = session.list_all_tools().await.unwrap();
        let names: Vec<String> = tools.iter().map(|tool| tool.name.to_string()).collect();
        if names.contains(&"custom_tool_local".to_owned()) == listed {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "custom_tool_local listed should be {listed}: {names:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Calls `local`: `Ok(text)` when it ran, `Err(text)` when it was refused: by the call's own
/// trust check (an error result that says why) or, once a rescan dropped the tool, as an
/// unknown tool (a JSON-RPC error).
async fn call_local<H: ClientHandler>(
    session: &RunningService<RoleClient, H>,
) -> Result<String, String> {
    match session
        .call_tool(call("custom_tool_local", json!({})))
        .await
    {
        Ok(result) if result.is_error == Some(true) => Err(text(&result)),
        Ok(result) => Ok(text(&result)),
        Err(error) => Err(error.to_string()),
    }
}

/// A refusal says why, or that the tool is gone.
#[track_caller]
fn assert_refused(refused: Result<String, String>, why: &str) {
    match refused {
        Err(text) => assert!(
            text.contains(why) || text.contains("Unknown tool"),
            "{text}"
        ),
        Ok(text) => panic!("the call ran: {text}"),
    }
}

/// The whole story over one session: the project's config changes (skipped, the call refused,
/// the changed config not applied once trusted again), then the project directory is swapped
/// for a copy that matches its trust record, then for a link to the original.
async fn trust_follows_the_project<H: ClientHandler>(
    context: &TestContext,
    session: &RunningService<RoleClient, H>,
) {
    wait_listed(session, true).await;
    assert!(call_local(session).await.unwrap().contains("local-ran"));

    write_file(
        &context.project.join(".toolsmith/config.toml"),
        CHANGED_CONFIG,
    );
    assert_refused(call_local(session).await, "changed since it was trusted");
    wait_listed(session, false).await;
    // `list` and `doctor`, started now, say so too.
    let listed = context.command().arg("list").output().unwrap();
    let hint = String::from_utf8_lossy(&listed.stderr);
    assert!(hint.contains("changed since it was trusted"), "{hint}");
    let doctor = context
        .command()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(
        report["trust"]["dirs"][0]["status"], "config-changed",
        "{report:#}"
    );

    trust(context);
    wait_listed(session, true).await;
    let ran = call_local(session).await;
    assert!(
        ran.as_ref().is_ok_and(|text| text.contains("local-ran")),
        "trusted again, but {ran:?} (the changed config must not be applied while serving)"
    );

    // A copy with the same path and config digest: the trust record matches, the directory
    // does not.
    let original = context.root.join("project.old");
    std::fs::rename(&context.project, &original).unwrap();
    write_project(&context.project);
    write_file(
        &context.project.join(".toolsmith/config.toml"),
        CHANGED_CONFIG,
    );
    assert_refused(call_local(session).await, "replaced");
    wait_listed(session, false).await;

    // A link to the original in its place is not the original either.
    std::fs::remove_dir_all(&context.project).unwrap();
    std::os::unix::fs::symlink(&original, &context.project).unwrap();
    assert_refused(call_local(session).await, "replaced");
}

/// Issue 22, finding 11 over stdio: `serve` read a trusted project's layer for its whole life,
/// whatever became of the project's config and directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_serve_skips_a_project_whose_config_changed_or_that_was_replaced() {
    let context = TestContext::new();
    trusted_project(&context);
    let mut command = context.command();
    command.arg("serve");
    let (session, _changes, _pid) = connect_to_child(command, legacy()).await;
    trust_follows_the_project(&context, &session).await;
    session.cancel().await.unwrap();
}

/// Issue 22, finding 11 over HTTP, with the skip in the server's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_serve_skips_a_project_whose_config_changed_or_that_was_replaced() {
    let context = TestContext::new();
    trusted_project(&context);
    let mut server = Server::start_command(context.command(), &[]).await;
    let (session, _events) = server.connect(None, legacy()).await;
    trust_follows_the_project(&context, &session).await;
    session.cancel().await.unwrap();
    let (_status, log) = server.terminate().await;
    assert!(
        log.contains("skipped the project layer")
            && log.contains("changed since it was trusted")
            && log.contains("replaced"),
        "{log}"
    );
}
