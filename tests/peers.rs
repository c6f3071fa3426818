//! Issue 26: the peers' own tools, written in their conventions (`tests/peers/`), run unchanged
//! from the peers' own folders: Kodelet executables in Python and in bash with jq (in
//! `./kodelet-tools`, `.kodelet/tools` and a plugin's `tools/`, one a `uv run --script`
//! script), Nanocoder manifests (in a skill bundle and in `.nanocoder/tools`) and an ikigai
//! tool in C (in `~/.ikigai/tools`, built here with `cc`). Each is listed from its folder and
//! called through `toolsmith run` and over MCP; a Kodelet tool that needs
//! `KODELET_CONVERSATION_ID` sees one value per MCP session.

#![expect(
    clippy::print_stderr,
    reason = "a tool of the corpus this machine cannot run (no uv) must be announced loudly"
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::context::{TestContext, repository_root, shell_tool, write_executable};
use crate::serve::{call, connect_to_child, legacy, text};
use crate::serve_http::Server;

/// Where the corpus is, in the repository.
fn corpus() -> PathBuf {
    repository_root().join("tests/peers")
}

/// The `uv` binary: `$TOOLSMITH_TEST_UV` (what .ci/run installs), else the first `uv` on `PATH`;
/// `None`, with a loud warning, when there is none.
fn uv_binary() -> Option<PathBuf> {
    let from_env = std::env::var_os("TOOLSMITH_TEST_UV").map(PathBuf::from);
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("uv"))
            .find(|uv| uv.is_file())
    });
    match from_env.or(on_path) {
        Some(uv) => Some(uv.canonicalize().unwrap_or(uv)),
        None => {
            eprintln!(
                "WARNING: uv is not installed (.ci/run installs it and sets TOOLSMITH_TEST_UV): the \
                 `uv run --script` Kodelet tool of tests/peers is not tested"
            );
            None
        }
    }
}

/// A test's world: the corpus laid out as a user's project and home, peers switched on.
struct Peers {
    context: TestContext,
    /// `PATH` for toolsmith, with uv's directory in front when uv is installed.
    path: std::ffi::OsString,
    /// Whether the uv tool is in the project.
    uv: bool,
}

impl Peers {
    fn new() -> Peers {
        let context = TestContext::new();
        copy_dir(&corpus().join("project"), &context.project);
        let ikigai_tools = context.root.join("home/.ikigai/tools");
        fs::create_dir_all(&ikigai_tools).unwrap();
        #[expect(
            clippy::disallowed_methods,
            reason = "the test builds the ikigai tool of its corpus with the C compiler"
        )]
        let built = Command::new("cc")
            .arg("-O2")
            .arg("-o")
            .arg(ikigai_tools.join("sum-tool"))
            .arg(corpus().join("ikigai/sum-tool.c"))
            .status()
            .unwrap();
        assert!(built.success(), "cc failed to build sum-tool.c");
        // uv alone goes on `PATH` (a directory holding only a link to it): the venv .ci/run
        // installs it in must not put its python in front of the system's.
        let uv = uv_binary().map(|binary| {
            let dir = context.root.join("uv-bin");
            fs::create_dir_all(&dir).unwrap();
            std::os::unix::fs::symlink(binary, dir.join("uv")).unwrap();
            dir
        });
        if uv.is_none() {
            fs::remove_dir_all(context.project.join(".kodelet/plugins")).unwrap();
        }
        let mut dirs: Vec<PathBuf> = uv.iter().cloned().collect();
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        // The uv tool runs with uv's cache off (a temporary one in the call's TMPDIR, since
        // the probe's filesystem is read-only) and offline: the script has no dependency.
        context.user_config(&format!(
            "[trust]\npaths = [{:?}]\n\n[discovery]\npeers = true\n\n[env]\nset = {{ UV_NO_CACHE = \"1\", UV_OFFLINE = \"1\", UV_PYTHON_DOWNLOADS = \"never\" }}\n",
            context.project.display().to_string()
        ));
        Peers {
            path: std::env::join_paths(dirs).unwrap(),
            uv: uv.is_some(),
            context,
        }
    }

    fn command(&self) -> Command {
        let mut command = self.context.command();
        command.env("PATH", &self.path);
        command
    }

    /// `toolsmith run NAME --input ARGUMENTS`'s envelope.
    fn run(&self, name: &str, arguments: &Value) -> Value {
        let output = self
            .command()
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
}

/// Copies `from` into `to`, keeping the execute bits of the tools.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Each tool of the corpus, the folder it is found in (relative to the temp root), its layer,
/// a call and the result of that call.
fn corpus_calls(uv: bool) -> Vec<(&'static str, &'static str, &'static str, Value, Value)> {
    let mut calls = vec![
        (
            "word_stats",
            "project/kodelet-tools",
            "kodelet-project",
            json!({"text": "The cat saw the dog.\nThe end", "top": 2}),
            json!({"words": 7, "lines": 2, "characters": 28, "most_frequent": ["the", "cat"]}),
        ),
        (
            "json_keys",
            "project/.kodelet/tools",
            "kodelet-project",
            json!({"object": {"b": [1], "a": "x"}}),
            json!([{"key": "a", "type": "string"}, {"key": "b", "type": "array"}]),
        ),
        (
            "shout",
            "project/.nanocoder/skills/text-tools/tools",
            "nanocoder-skill-project",
            json!({"text": "hey", "times": 2}),
            json!("HEY!\nHEY!"),
        ),
        (
            "line_count",
            "project/.nanocoder/tools",
            "nanocoder-project",
            json!({"text": "one\ntwo\nthree"}),
            json!("3"),
        ),
        (
            "sum",
            "home/.ikigai/tools",
            "ikigai-user",
            json!({"a": 2.5, "b": 4}),
            json!({"sum": 6.5}),
        ),
    ];
    if uv {
        calls.push((
            "session_note",
            "project/.kodelet/plugins/acme@notes/tools",
            "kodelet-plugin-project",
            json!({"note": "remember the milk"}),
            // The conversation id is random: checked apart, see `without_conversation`.
            json!({"note": "remember the milk"}),
        ));
    }
    calls
}

/// `result` without its random `conversation_id` (after checking it is a non-empty string).
fn without_conversation(mut result: Value) -> Value {
    if let Some(object) = result.as_object_mut()
        && let Some(conversation) = object.remove("conversation_id")
    {
        assert!(
            conversation.as_str().is_some_and(|id| !id.is_empty()),
            "{conversation}"
        );
    }
    result
}

/// Every tool of the corpus is listed from its peer's folder, in that folder's layer, and a
/// Nanocoder manifest follows Nanocoder's rules: named by its frontmatter, list-form
/// parameters, an unknown key ignored; `validate` says so in warnings.
#[test]
fn the_peers_tools_are_found_in_the_peers_folders() {
    let peers = Peers::new();
    let output = peers.command().args(["list", "--json"]).output().unwrap();
    let listing: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listing["problems"], json!([]), "{listing:#}");
    let tools = listing["tools"].as_array().unwrap();
    let mut expected = corpus_calls(peers.uv);
    expected.push((
        "conversation",
        "project/.kodelet/tools",
        "kodelet-project",
        json!({}),
        Value::Null,
    ));
    assert_eq!(tools.len(), expected.len(), "{listing:#}");
    for (name, folder, layer, _, _) in &expected {
        let tool = tools
            .iter()
            .find(|tool| tool["name"] == *name)
            .unwrap_or_else(|| panic!("{name} is not listed: {listing:#}"));
        assert_eq!(tool["layer"], *layer, "{tool:#}");
        assert_eq!(
            tool["source"],
            peers.context.root.join(folder).display().to_string(),
            "{tool:#}"
        );
    }
    let shout = tools.iter().find(|tool| tool["name"] == "shout").unwrap();
    assert_eq!(
        shout["input_schema"]["required"],
        json!(["text"]),
        "{shout:#}"
    );

    let output = peers
        .command()
        .args(["validate", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let warnings = |file: &str| -> Value {
        let entries = report
            .as_array()
            .or_else(|| report["files"].as_array())
            .unwrap_or_else(|| panic!("{report:#}"));
        entries
            .iter()
            .find(|entry| {
                entry["path"]
                    .as_str()
                    .is_some_and(|path| path.ends_with(file))
            })
            .map(|entry| entry["warnings"].clone())
            .unwrap_or_else(|| panic!("{file} not validated: {report:#}"))
    };
    assert_eq!(
        warnings("shout-text.md"),
        json!([
            "name: the tool is \"shout\", as its frontmatter says; its file name would make it \"shout_text\""
        ])
    );
    let line_count = warnings("line-count.md");
    assert!(
        line_count[0]
            .as_str()
            .is_some_and(|warning| warning.starts_with("subscribe: unknown key")
                && warning.ends_with("the key is ignored")),
        "{line_count:#}"
    );
}

/// Each tool of the corpus answers the same through `toolsmith run` and over MCP (stdio),
/// unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peers_tools_run_through_run_and_over_mcp() {
    let peers = Peers::new();
    let calls = corpus_calls(peers.uv);
    for (name, _, _, arguments, expected) in &calls {
        let envelope = peers.run(name, arguments);
        assert_eq!(envelope["tool_success"], true, "{name}: {envelope:#}");
        assert_eq!(
            without_conversation(envelope["result"].clone()),
            *expected,
            "{name}: {envelope:#}"
        );
    }
    // Kodelet's structured error (`{"error": ...}` on stdout, non-zero exit) keeps its message.
    let refused = peers.run("json_keys", &json!({"object": 3}));
    assert_eq!(refused["tool_success"], false, "{refused:#}");
    assert_eq!(refused["error"], "expected an object, got number");

    let mut command = peers.command();
    command.arg("serve");
    let (session, _changes, _pid) = connect_to_child(command, legacy()).await;
    let listed = session.list_all_tools().await.unwrap();
    for (name, _, _, arguments, expected) in &calls {
        let exposed = format!("custom_tool_{name}");
        assert!(
            listed.iter().any(|tool| tool.name == exposed),
            "{exposed} is not listed"
        );
        let result = session
            .call_tool(call(&exposed, arguments.clone()))
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(false), "{name}: {result:?}");
        // A manifest's result is its text; an executable's, JSON.
        let answer = match expected {
            Value::String(_) => Value::String(text(&result)),
            _ => serde_json::from_str(&text(&result)).unwrap(),
        };
        assert_eq!(without_conversation(answer), *expected, "{name}");
    }
    session.cancel().await.unwrap();
}

/// The `conversation_id` a Kodelet tool of `session` reports, in `rounds` calls.
async fn conversations<S: rmcp::service::Service<rmcp::RoleClient>>(
    session: &rmcp::service::RunningService<rmcp::RoleClient, S>,
    tool: &str,
    arguments: &Value,
) -> Vec<String> {
    let mut seen = Vec::new();
    for _ in 0..2 {
        let result = session
            .call_tool(call(tool, arguments.clone()))
            .await
            .unwrap_or_else(|error| panic!("{tool}: {error}"));
        assert_eq!(result.is_error, Some(false), "{tool}: {result:?}");
        let answer: Value = serde_json::from_str(&text(&result)).unwrap();
        seen.push(answer["conversation_id"].as_str().unwrap().to_owned());
    }
    seen
}

/// Acceptance 3: a Kodelet tool that requires `KODELET_CONVERSATION_ID` sees the same value in
/// two calls of one MCP session and another in another session, over stdio (a server process
/// per session) and over HTTP (two `Mcp-Session-Id` sessions of one server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kodelet_tool_sees_one_conversation_per_mcp_session() {
    let peers = Peers::new();
    let mut tools = vec![("custom_tool_conversation", json!({}))];
    if peers.uv {
        tools.push(("custom_tool_session_note", json!({"note": "n"})));
    }
    let mut stdio_sessions = Vec::new();
    for _ in 0..2 {
        let mut command = peers.command();
        command.arg("serve");
        let (session, _changes, _pid) = connect_to_child(command, legacy()).await;
        let mut seen = Vec::new();
        for (tool, arguments) in &tools {
            seen.extend(conversations(&session, tool, arguments).await);
        }
        session.cancel().await.unwrap();
        assert!(
            seen.iter().all(|id| id == &seen[0]),
            "one stdio session, several conversations: {seen:?}"
        );
        stdio_sessions.push(seen[0].clone());
    }
    assert_ne!(stdio_sessions[0], stdio_sessions[1]);

    // Over HTTP: the same Kodelet tool, named on the command line.
    let context = &peers.context;
    fs::copy(
        context.project.join(".kodelet/tools/conversation"),
        context.tools.join("conversation"),
    )
    .unwrap();
    let server = Server::start(context, &[], &[]).await;
    let (first, _events) = server.connect(None, legacy()).await;
    let (second, _events) = server.connect(None, legacy()).await;
    let first_seen = conversations(&first, "custom_tool_conversation", &json!({})).await;
    let second_seen = conversations(&second, "custom_tool_conversation", &json!({})).await;
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
    assert_eq!(first_seen[0], first_seen[1]);
    assert_eq!(second_seen[0], second_seen[1]);
    assert_ne!(first_seen[0], second_seen[0]);
    assert!(!stdio_sessions.contains(&first_seen[0]));
}

/// Every call gets `TOOLSMITH_CALL_ID` and `TOOLSMITH_SESSION_ID` from toolsmith, never from
/// toolsmith's own environment, even when the operator passes variables of those names
/// through; a CLI invocation is a session of its own; the audit line names the call id the
/// tool saw.
#[test]
fn call_and_session_ids_are_toolsmiths_own_per_call() {
    let peers = Peers::new();
    let context = &peers.context;
    let audit = context.root.join("audit.jsonl");
    context.user_config(&format!(
        "[trust]\npaths = [{:?}]\n\n[discovery]\npeers = true\n\n[env]\nallow = [\"PATH\", \"HOME\", \"TOOLSMITH_CALL_ID\", \"TOOLSMITH_SESSION_ID\", \"KODELET_CONVERSATION_ID\"]\n\n[audit]\npath = {:?}\n",
        context.project.display().to_string(),
        audit.display().to_string()
    ));
    write_executable(
        &context.project.join(".toolsmith/tools/ids"),
        &shell_tool(
            "ids",
            r#"{"type": "object"}"#,
            r#"printf '{"call": "%s", "session": "%s"}' "$TOOLSMITH_CALL_ID" "$TOOLSMITH_SESSION_ID""#,
        ),
    );
    let forged = [
        ("TOOLSMITH_CALL_ID", "forged"),
        ("TOOLSMITH_SESSION_ID", "forged"),
        ("KODELET_CONVERSATION_ID", "forged"),
    ];
    let run = |name: &str| -> Value {
        let output = peers
            .command()
            .envs(forged)
            .args(["run", name, "--input", "{}"])
            .output()
            .unwrap();
        let envelope: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stderr)));
        assert_eq!(envelope["tool_success"], true, "{envelope:#}");
        envelope["result"].clone()
    };
    let first = run("ids");
    let second = run("ids");
    let conversation = run("conversation")["conversation_id"].clone();
    for ids in [&first, &second] {
        for key in ["call", "session"] {
            let id = ids[key].as_str().unwrap();
            assert_eq!(id.len(), 36, "{ids}");
            assert_ne!(id, "forged", "{ids}");
        }
    }
    assert_ne!(first["call"], second["call"]);
    assert_ne!(first["session"], second["session"]);
    assert_ne!(conversation, "forged");
    assert_ne!(conversation, first["session"]);

    let lines: Vec<Value> = fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(lines[0]["call_id"], first["call"]);
    assert_eq!(lines[1]["call_id"], second["call"]);
}

/// A project's bundle is the project's only when no directory between the project and its
/// `tools/` folder is a symbolic link: a clone (or a tool under `filesystem = "project"`) that
/// plants `.nanocoder/skills -> ~/elsewhere` or `.kodelet/plugins/x -> ~/elsewhere` must not
/// make toolsmith read, with the project's trust, tools that are not the project's.
#[test]
fn a_bundle_reached_through_a_link_is_not_read() {
    let peers = Peers::new();
    let context = &peers.context;
    let outside = context.root.join("outside");
    write_executable(
        &outside.join("tools/planted"),
        &shell_tool("planted", r#"{"type": "object"}"#, "echo planted"),
    );
    let skills = context.project.join(".nanocoder/skills");
    fs::remove_dir_all(&skills).unwrap();
    std::os::unix::fs::symlink(context.root.join("outside-skills"), &skills).unwrap();
    fs::create_dir_all(context.root.join("outside-skills")).unwrap();
    std::os::unix::fs::symlink(&outside, context.root.join("outside-skills/linked")).unwrap();
    let plugins = context.project.join(".kodelet/plugins");
    fs::create_dir_all(&plugins).unwrap();
    std::os::unix::fs::symlink(&outside, plugins.join("org@linked")).unwrap();

    let output = peers.command().args(["list", "--json"]).output().unwrap();
    let listing: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(!names.contains(&"planted"), "{listing:#}");
    assert!(!names.contains(&"shout"), "{listing:#}");
    let linked: Vec<&str> = listing["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|problem| {
            problem["error"]
                .as_str()
                .is_some_and(|error| error.contains("symbolic link"))
        })
        .filter_map(|problem| problem["path"].as_str())
        .collect();
    assert_eq!(
        linked,
        [
            plugins.join("org@linked/tools").display().to_string(),
            skills.display().to_string()
        ],
        "{listing:#}"
    );
}

/// A skill bundle that appears while `serve` runs is read, and its tool announced and callable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_skill_bundle_is_announced_while_serving() {
    let peers = Peers::new();
    let mut command = peers.command();
    command.arg("serve");
    let (session, mut changes, _pid) = connect_to_child(command, legacy()).await;
    let before = session.list_all_tools().await.unwrap().len();
    // Written aside, then renamed into place whole, as a package manager or `git` would.
    let staging = peers.context.root.join("staging-skill");
    crate::context::write_file(
        &staging.join("tools/greet.md"),
        "---\nname: greet\ndescription: Greet someone\nparameters:\n  - name: who\n    type: string\n    required: true\napproval: never\n---\nprintf 'hello %s' {{ who }}\n",
    );
    fs::rename(
        &staging,
        peers.context.project.join(".nanocoder/skills/greeting"),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + crate::serve::PATIENCE;
    loop {
        tokio::time::timeout(crate::serve::PATIENCE, changes.recv())
            .await
            .expect("no notifications/tools/list_changed")
            .unwrap();
        if session.list_all_tools().await.unwrap().len() > before {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "greet never listed");
    }
    let greeted = session
        .call_tool(call("custom_tool_greet", json!({"who": "Ada"})))
        .await
        .unwrap();
    assert_eq!(text(&greeted), "hello Ada");
    session.cancel().await.unwrap();
}
