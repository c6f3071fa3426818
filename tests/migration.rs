//! Issue 23, acceptance 5: the peers' documented example tools (`tests/peers/default/`:
//! Kodelet's `hello` and `git_info`, ikigai's `file_read`, `grep`, `glob` and `bash`, and
//! Nanocoder's `k8s_pods`) run under the least-privilege default with NO config at all, moved
//! into `~/.config/toolsmith/tools` unchanged (docs/migration.md). `k8s_pods` declares its API
//! server in its frontmatter and reaches it through toolsmith's egress proxy (a listener in a
//! network namespace this test creates); `[sandbox] profile = "compat"` gives back the peers'
//! behaviour: a write outside the project, refused by the default, lands. Every effect is
//! checked from outside (the files on disk, the listener's requests).

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::context::{TestContext, repository_root};
use crate::egress::enter_test_network;
use crate::serve::{call, connect_to_child, legacy, text};

/// The test host standing for the Kubernetes API server (TEST-NET-3).
const API_SERVER: &str = "203.0.113.30";

/// A context whose user tools directory holds the peers' example tools, copied unchanged,
/// and whose project is a git repository with one commit; no config file anywhere.
fn migrated() -> TestContext {
    let context = TestContext::new();
    let tools = context.root.join("home/.config/toolsmith/tools");
    fs::create_dir_all(&tools).unwrap();
    for peer in ["kodelet", "ikigai", "nanocoder"] {
        for entry in fs::read_dir(repository_root().join("tests/peers/default").join(peer)).unwrap()
        {
            let entry = entry.unwrap();
            fs::copy(entry.path(), tools.join(entry.file_name())).unwrap();
        }
    }
    fs::write(context.project.join("README.md"), "# pods\n").unwrap();
    fs::create_dir_all(context.project.join("src")).unwrap();
    fs::write(
        context.project.join("src/main.c"),
        "int main(void) { return 0; } /* pods */\n",
    )
    .unwrap();
    git(&context.project, &["init", "-q", "-b", "main"]);
    git(&context.project, &["add", "-A"]);
    git(
        &context.project,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
    assert!(
        !context
            .root
            .join("home/.config/toolsmith/config.toml")
            .exists(),
        "the default is tested with no config"
    );
    context
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test makes its project a git repository, not running a tool"
)]
fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// `toolsmith run NAME --input ARGUMENTS`'s envelope.
fn run(command: &mut Command, name: &str, arguments: &Value) -> Value {
    let output = command
        .args(["run", name, "--input", &arguments.to_string()])
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "{name}: not JSON ({error}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Whether `envelope` ran under the default's filesystem (`project`); when Landlock or mount
/// namespaces are missing the default falls back, and the test says so loudly.
fn confined(envelope: &Value) -> bool {
    let sandbox = &envelope["metadata"]["sandbox"];
    if sandbox["filesystem"] == "project" {
        return true;
    }
    assert!(
        std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
        "the default's filesystem is required: {sandbox:#}"
    );
    #[expect(clippy::print_stderr, reason = "a skipped check says so loudly")]
    {
        eprintln!(
            "WARNING: the default's filesystem did not apply ({sandbox}): writes are not checked"
        );
    }
    false
}

/// Each call of the read-only tools and what it answers, the same through `run` and MCP.
fn read_only_calls(head: &str) -> Vec<(&'static str, Value, Value)> {
    vec![
        (
            "hello",
            json!({"name": "Alice", "age": 30}),
            json!("Hello, Alice! You are 30 years old."),
        ),
        (
            "git_info",
            json!({}),
            json!({"branch": "main", "commit": head, "uncommitted_changes": 0}),
        ),
        (
            "file_read",
            json!({"path": "README.md"}),
            json!({"content": "# pods\n"}),
        ),
        (
            "grep",
            json!({"pattern": "pods", "path": "src"}),
            json!({"matches": ["src/main.c:1:int main(void) { return 0; } /* pods */"]}),
        ),
        (
            "glob",
            json!({"pattern": "src/**/*.c"}),
            json!({"paths": ["src/main.c"]}),
        ),
    ]
}

/// With no config, Kodelet's `hello` and `git_info` and ikigai's `file_read`, `grep`, `glob`
/// and `bash` answer as under their peer, through `toolsmith run` and over MCP; `bash` writes
/// in the project (seen on disk), under the default's `project` filesystem and no network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peers_example_tools_run_unchanged_under_the_default() {
    let context = migrated();
    let head = git(&context.project, &["rev-parse", "HEAD"]);
    let calls = read_only_calls(&head);
    for (name, arguments, expected) in &calls {
        let envelope = run(&mut context.command(), name, arguments);
        assert_eq!(envelope["tool_success"], true, "{name}: {envelope:#}");
        assert_eq!(envelope["result"], *expected, "{name}: {envelope:#}");
        assert_eq!(
            envelope["metadata"]["sandbox"]["network"], "deny",
            "{envelope:#}"
        );
    }
    let envelope = run(
        &mut context.command(),
        "bash",
        &json!({"command": "echo built > src/build.log && cat src/build.log"}),
    );
    assert_eq!(
        envelope["result"],
        json!({"output": "built\n", "exit_code": 0}),
        "{envelope:#}"
    );
    if confined(&envelope) {
        assert_eq!(
            fs::read_to_string(context.project.join("src/build.log")).unwrap(),
            "built\n"
        );
    }

    let mut command = context.command();
    command.arg("serve");
    let (session, _changes, _pid) = connect_to_child(command, legacy()).await;
    for (name, arguments, expected) in &calls {
        let exposed = format!("custom_tool_{name}");
        let result = session
            .call_tool(call(&exposed, arguments.clone()))
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(false), "{name}: {result:?}");
        let answer = match expected {
            Value::String(_) => Value::String(text(&result)),
            _ => serde_json::from_str(&text(&result)).unwrap(),
        };
        // `src/build.log` is now an uncommitted change.
        let expected = if *name == "git_info" {
            json!({"branch": "main", "commit": head, "uncommitted_changes": 1})
        } else {
            expected.clone()
        };
        assert_eq!(answer, expected, "{name}");
    }
    session.cancel().await.unwrap();
}

/// Answers every request with a PodList, recording each request line.
fn api_server(address: &str) -> Arc<Mutex<Vec<String>>> {
    let listener = TcpListener::bind((address, 443)).unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let _ignored = reader.read_line(&mut line);
            recorded.lock().unwrap().push(line.trim_end().to_owned());
            line.clear();
            while reader.read_line(&mut line).is_ok_and(|read| read > 2) {
                line.clear();
            }
            let body = r#"{"kind":"PodList","items":[{"metadata":{"name":"api-0"}}]}"#;
            let _ignored = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    requests
}

/// Nanocoder's `k8s_pods`, declaring `sandbox: {network: ["k8s.test:443"]}` in its
/// frontmatter, reaches its API server through the egress proxy (`HTTPS_PROXY`, CONNECT) with
/// no config; the envelope's `metadata.sandbox.egress` shows the connection, the listener
/// saw the request; a namespace its `pattern` refuses never reaches the server.
#[test]
fn k8s_pods_reaches_its_declared_api_server_under_the_default() {
    std::thread::spawn(|| {
        if !enter_test_network("k8s_pods", &[API_SERVER]) {
            return;
        }
        let requests = api_server(API_SERVER);
        let context = migrated();
        let hosts = context.root.join("hosts");
        fs::write(&hosts, format!("{API_SERVER} k8s.test\n")).unwrap();
        let mut command = context.command();
        command.env("TOOLSMITH_EGRESS_HOSTS", &hosts);
        let envelope = run(
            &mut command,
            "k8s_pods",
            &json!({"namespace": "default", "selector": "app=api"}),
        );
        assert_eq!(envelope["tool_success"], true, "{envelope:#}");
        assert_eq!(
            envelope["result"], r#"{"kind":"PodList","items":[{"metadata":{"name":"api-0"}}]}"#,
            "{envelope:#}"
        );
        assert_eq!(
            *requests.lock().unwrap(),
            ["GET /api/v1/namespaces/default/pods?labelSelector=app=api HTTP/1.1"]
        );
        // The envelope says what applied: a namespace whose only way out is the proxy.
        assert_eq!(
            envelope["metadata"]["sandbox"]["network"], "proxy",
            "{envelope:#}"
        );
        let egress = &envelope["metadata"]["sandbox"]["egress"];
        assert_eq!(egress.as_array().map(Vec::len), Some(1), "{envelope:#}");
        assert_eq!(egress[0]["protocol"], "http-connect", "{egress:#}");
        assert_eq!(egress[0]["destination"], "k8s.test", "{egress:#}");
        assert_eq!(egress[0]["port"], 443, "{egress:#}");
        assert_eq!(egress[0]["resolved"], API_SERVER, "{egress:#}");
        assert_eq!(egress[0]["verdict"], "allowed", "{egress:#}");
        assert!(egress[0]["bytes_in"].as_u64().unwrap() > 0, "{egress:#}");

        let mut command = context.command();
        command.env("TOOLSMITH_EGRESS_HOSTS", &hosts);
        let refused = run(
            &mut command,
            "k8s_pods",
            &json!({"namespace": "../../nodes"}),
        );
        assert_eq!(refused["error_code"], "INVALID_PARAMS", "{refused:#}");
        assert_eq!(requests.lock().unwrap().len(), 1);
    })
    .join()
    .unwrap();
}

/// ikigai's `bash` writing outside the project (a directory of the test's root): refused by
/// the default (nothing on disk, the write's error in the result the model reads), written
/// under the one line `[sandbox] profile = "compat"` in the user config.
#[test]
fn compat_restores_the_peers_writes_outside_the_project() {
    let context = migrated();
    let outside = context.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let marker = outside.join("marker");
    let arguments = json!({"command": format!("echo escaped > {}", marker.display())});
    let envelope = run(&mut context.command(), "bash", &arguments);
    assert_eq!(envelope["tool_success"], true, "{envelope:#}");
    if confined(&envelope) {
        assert_ne!(envelope["result"]["exit_code"], 0, "{envelope:#}");
        assert!(
            envelope["result"]["output"]
                .as_str()
                .is_some_and(|output| output.contains("Read-only file system")),
            "{envelope:#}"
        );
        assert!(
            !marker.exists(),
            "the default let a write outside the project through"
        );
    }

    context.user_config("[sandbox]\nprofile = \"compat\"\n");
    let envelope = run(&mut context.command(), "bash", &arguments);
    assert_eq!(
        envelope["result"],
        json!({"output": "", "exit_code": 0}),
        "{envelope:#}"
    );
    assert_eq!(
        envelope["metadata"]["sandbox"]["filesystem"], "full",
        "{envelope:#}"
    );
    assert_eq!(fs::read_to_string(&marker).unwrap(), "escaped\n");
}
