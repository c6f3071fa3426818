//! Registrations through `serve --http`'s `custom_tool`: a damaged history of one tool stalls
//! neither that request nor the server, and two clients generating different names at once
//! each wait only for their own test cases.

use std::fs;
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use super::{generate, git, loose, must, request, run};
use crate::context::TestContext;
use crate::serve::{call, legacy, modern, text};
use crate::serve_http::{Server, Session};

/// The liveness bound of each wait on the server.
const LIVENESS: Duration = Duration::from_secs(10);

/// A project whose generator writes into the fixture tools directory the server serves.
fn served_project() -> TestContext {
    let context = TestContext::new();
    context.project_file(
        ".toolsmith/config.toml",
        &format!(
            "[generator]\ntools_dir = {:?}\n",
            context.tools.display().to_string()
        ),
    );
    context
}

/// Calls `name` with `arguments`, failing (not hanging) if no answer comes within the bound;
/// returns the answer (a result or a JSON-RPC error) and how long it took.
async fn answer(
    session: &Session,
    name: &str,
    arguments: Value,
) -> (Result<CallToolResult, ServiceError>, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(LIVENESS, session.call_tool(call(name, arguments)))
        .await
        .unwrap_or_else(|_| panic!("{name}: no answer within {LIVENESS:?}"));
    (result, started.elapsed())
}

/// [`answer`], which must be a result.
async fn within(session: &Session, name: &str, arguments: Value) -> (CallToolResult, Duration) {
    let (result, took) = answer(session, name, arguments).await;
    (
        result.unwrap_or_else(|error| panic!("{name}: {error}")),
        took,
    )
}

/// Acceptance (issue 24, point 3, serve part): with a truncated loose object in the history,
/// `custom_tool` replacing that tool answers a clear error promptly; the server goes on
/// answering calls and registering another name, and exits on SIGTERM within its grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_history_does_not_stall_serve() {
    let context = served_project();
    must(&run(&mut generate(&context, "first", false)));
    must(&run(&mut generate(&context, "second", true)));
    let head = git(&context.tools, &["rev-parse", "refs/tools/tell_answer"]);
    let object = loose(&context.tools, &head);
    let bytes = fs::read(&object).unwrap();
    fs::remove_file(&object).unwrap();
    fs::write(&object, &bytes[..bytes.len() / 2]).unwrap();
    let live = fs::read(context.tools.join("tell_answer")).unwrap();

    let mut server = Server::start(&context, &["--shutdown-grace", "5s"], &[]).await;
    let (session, _events) = server.connect(None, legacy()).await;
    // A generator failure (not a rejected request) is the call's JSON-RPC error, as
    // `custom_tool` answers every failure of the generator itself.
    let (refused, waited) = answer(&session, "custom_tool", request("third", true)).await;
    let Err(ServiceError::McpError(refused)) = refused else {
        panic!("the replace was not refused: {refused:?}");
    };
    let message = refused.message;
    for part in [head.as_str(), "is truncated", "move it aside"] {
        assert!(message.contains(part), "no {part:?} in {message}");
    }
    assert_eq!(fs::read(context.tools.join("tell_answer")).unwrap(), live);

    let (answer, _) = within(&session, "custom_tool_tell_answer", json!({})).await;
    assert_eq!(text(&answer).trim(), "second", "{answer:?}");
    let mut other = request("other", false);
    other["name"] = json!("other_tool");
    let (registered, _) = within(&session, "custom_tool", other).await;
    assert_ne!(registered.is_error, Some(true), "{registered:?}");
    assert_eq!(
        registered.structured_content.unwrap()["status"],
        "registered"
    );
    let (again, _) = within(&session, "custom_tool_tell_answer", json!({})).await;
    assert_eq!(text(&again).trim(), "second");

    let asked = Instant::now();
    let (status, log) = server.terminate().await;
    let exited = asked.elapsed();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(exited < LIVENESS, "exited {exited:?} after SIGTERM");
    eprintln!("damaged history: refused in {waited:?}; exited {exited:?} after SIGTERM");
}

/// A request for `name` whose one test case sleeps `seconds`.
fn sleeping(name: &str, seconds: u64) -> Value {
    json!({
        "name": name,
        "description": "Sleeps, then tells its name.",
        "language": "bash",
        "implementation": format!("sleep {seconds}; echo {name}"),
        "tests": [{"input": {}, "expect": {"result_contains": name}}],
    })
}

/// Acceptance (issue 24, point 9): two clients (one server, two sessions) generating different
/// names at once each get their answer within their own test case's time (twice: recorded, then
/// under the learned declaration) plus a second: the
/// registrations wait for each other only for the brief commit under the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_generating_different_names_wait_only_for_their_own_tests() {
    const TEST_SECONDS: u64 = 2;
    let context = served_project();
    let mut server = Server::start(&context, &["--max-calls-per-client", "0"], &[]).await;
    let (first, _first_events) = server.connect(None, legacy()).await;
    let (second, _second_events) = server.connect(None, modern()).await;
    let calls: Vec<_> = [
        (first.peer().clone(), "sleepy_one"),
        (second.peer().clone(), "sleepy_two"),
    ]
    .into_iter()
    .map(|(peer, name)| {
        tokio::spawn(async move {
            let sent = Instant::now();
            let result = peer
                .call_tool(call("custom_tool", sleeping(name, TEST_SECONDS)))
                .await;
            (name, result, sent.elapsed())
        })
    })
    .collect();
    let mut figures = Vec::new();
    for joined in calls {
        let (name, result, took) = tokio::time::timeout(LIVENESS, joined)
            .await
            .expect("no answer within the liveness bound")
            .unwrap();
        let result = result.unwrap();
        assert_ne!(result.is_error, Some(true), "{name}: {result:?}");
        assert_eq!(result.structured_content.unwrap()["status"], "registered");
        // A generation runs its test twice: once recording, once under the learned
        // declaration (issue 23); waiting for the other's would take twice that again.
        assert!(
            took <= Duration::from_secs(2 * TEST_SECONDS + 1),
            "{name}: answered after {took:?}, more than its test's two runs of {TEST_SECONDS} s + 1 s\n{}",
            server.log()
        );
        figures.push(format!("{name} {took:?}"));
    }
    let (status, log) = server.terminate().await;
    assert_eq!(status.code(), Some(0), "{log}");
    eprintln!(
        "concurrent generation of two names, each test case {TEST_SECONDS} s: {}",
        figures.join(", ")
    );
}
