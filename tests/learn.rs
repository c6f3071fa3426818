//! Learned grants (issue 23, acceptance 4): `toolsmith learn` prints the narrowest declaration
//! under which a tool's tests pass, and the generator registers every generated tool with
//! the declaration learned from its tests; its destinations are a declaration, not a grant.
//!
//! The network half runs against test hosts in a network namespace the test creates (its
//! thread's own; `toolsmith` is spawned from that thread, so it starts there), names given to
//! the egress proxy through `TOOLSMITH_EGRESS_HOSTS`.

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::context::TestContext;
use crate::egress::{enter_test_network, serve};

const A: &str = "203.0.113.10";
const B: &str = "203.0.113.20";

/// A manifest tool whose one test runs `body` and expects `result`.
fn manifest(name: &str, body: &str, result: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: The {name} fixture.\ntests:\n- name: works\n  input: {{}}\n  expect: {{result: \"{result}\"}}\n---\n{body}\n"
    )
}

fn learn(context: &TestContext, name: &str) -> (Output, Value) {
    let output = context
        .with_tools()
        .args(["learn", name, "--json"])
        .output()
        .unwrap();
    let printed = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, printed)
}

#[test]
fn learn_finds_the_narrowest_filesystem_under_which_the_tests_pass() {
    let context = TestContext::new();
    std::fs::create_dir_all(context.project.join("out")).unwrap();
    std::fs::write(
        context.tools.join("tmp_writer.md"),
        manifest(
            "tmp_writer",
            "printf hi > \"$TMPDIR/scratch\" && cat \"$TMPDIR/scratch\"",
            "hi",
        ),
    )
    .unwrap();
    std::fs::write(
        context.tools.join("project_writer.md"),
        manifest(
            "project_writer",
            "printf hi > out/written && cat out/written",
            "hi",
        ),
    )
    .unwrap();
    std::fs::write(
        context.tools.join("always_wrong.md"),
        manifest("always_wrong", "printf right", "wrong"),
    )
    .unwrap();

    let (output, printed) = learn(&context, "tmp_writer");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        printed,
        json!({"sandbox": {"network": "none", "filesystem": "read-only"}})
    );

    let (output, printed) = learn(&context, "project_writer");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        printed,
        json!({"sandbox": {"network": "none", "filesystem": "project"}})
    );
    // The learned level is proven: under read-only, the same test fails.
    std::fs::remove_file(context.project.join("out/written")).unwrap();
    let text = context
        .with_tools()
        .args(["learn", "project_writer"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&text.stdout),
        "network = \"none\"\nfilesystem = \"project\"\n"
    );

    let (output, printed) = learn(&context, "always_wrong");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(printed, Value::Null, "no declaration is printed");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("test always_wrong: works fails even in the recording sandbox"),
        "{stderr}"
    );
}

/// A server of the test namespace: answers each HTTP request with its label, counting them.
struct Server {
    hits: Arc<AtomicUsize>,
}

impl Server {
    fn start(address: &str, label: &'static str) -> Server {
        Server {
            hits: serve(address, label),
        }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Runs `test` on a thread in a network namespace of its own where a.test and b.test answer
/// on port 80, or says loudly why it cannot.
fn in_test_network(test: impl FnOnce(&Server, &Server) + Send + 'static) {
    let thread = std::thread::spawn(move || {
        if !enter_test_network("learned-network", &[A, B]) {
            return;
        }
        let a = Server::start(A, "hello from a");
        let b = Server::start(B, "hello from b");
        test(&a, &b);
    });
    thread.join().unwrap();
}

/// What the generated Kodelet tool at `file` describes itself as (`FILE description`).
#[expect(
    clippy::disallowed_methods,
    reason = "asking the generated file for the description it carries"
)]
fn described(file: &std::path::Path) -> Value {
    let output = Command::new(file).arg("description").output().unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The body of both fetchers: fetches `$ARG_URL` (or `{{ url }}`) through the proxy the
/// call is given, keeping the page in its TMPDIR.
const FETCH: &str = "curl -sf -m 5 \"$URL\" -o \"$TMPDIR/page\" && cat \"$TMPDIR/page\"";

#[test]
fn a_generated_tool_carries_its_learned_destinations_as_a_declaration_not_a_grant() {
    in_test_network(|a, b| {
        let context = TestContext::new();
        context.own_project();
        let hosts = context.root.join("hosts");
        std::fs::write(&hosts, format!("{A} a.test\n{B} b.test\n")).unwrap();
        let trust =
            std::fs::read_to_string(context.root.join("home/.config/toolsmith/config.toml"))
                .unwrap();
        let with_grant = |grant: &str| context.user_config(&format!("{trust}{grant}"));
        // The fixture tools' directory for the hand-written tool; the layers (the project's
        // `.toolsmith/tools` among them) for the generated one.
        let toolsmith_in = |mut command: Command, args: &[&str]| {
            command.env("TOOLSMITH_EGRESS_HOSTS", &hosts).args(args);
            command.output().unwrap()
        };
        let by_hand = |args: &[&str]| toolsmith_in(context.with_tools(), args);
        let toolsmith = |args: &[&str]| toolsmith_in(context.command(), args);

        // A hand-written tool: `toolsmith learn` records a.test:80 and a TMPDIR-only writer.
        std::fs::write(
            context.tools.join("fetch_by_hand.md"),
            "---\nname: fetch_by_hand\ndescription: Fetches a page.\nparameters:\n  url:\n    type: string\n    required: true\ntests:\n- name: fetches a\n  input: {url: \"http://a.test/\"}\n  expect: {result: \"hello from a\"}\n---\nURL={{ url }}; ".to_owned() + FETCH + "\n",
        )
        .unwrap();
        let output = by_hand(&["learn", "fetch_by_hand", "--json"]);
        assert!(output.status.success(), "{output:?}");
        let learned: Value = serde_json::from_slice(&output.stdout).unwrap();
        let expected = json!({"sandbox": {"network": ["a.test:80"], "filesystem": "read-only"}});
        assert_eq!(learned, expected);
        assert!(a.hits() >= 2, "recorded, then proven under the declaration");

        // The generator learns the same for the same tool, within `[generator] network`.
        with_grant("[generator]\nnetwork = \"any\"\n");
        let request = json!({
            "name": "fetch_page",
            "description": "Fetches a page.",
            "parameters": {"url": "The page"},
            "language": "bash",
            "requires_network": true,
            "implementation": format!("URL=\"$ARG_URL\"; {FETCH}"),
            "tests": [{"name": "fetches a", "input": {"url": "http://a.test/"}, "expect": {"result": "hello from a"}}],
        });
        context.project_file("request.json", &request.to_string());
        let output = toolsmith(&["generate", "--request", "request.json", "--json"]);
        assert!(output.status.success(), "{output:?}");
        let report = String::from_utf8_lossy(&output.stdout);
        assert!(report.contains("\"learned\""), "{report}");
        let file = context.project.join(".toolsmith/tools/fetch_page");
        assert_eq!(described(&file)["sandbox"], expected["sandbox"]);

        // With the operator's grant for generated tools, it reaches a.test and never b.test.
        let hits_before = a.hits();
        let output = toolsmith(&[
            "run",
            "fetch_page",
            "--json",
            "--input",
            r#"{"url": "http://a.test/"}"#,
        ]);
        let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(envelope["result"], "hello from a", "{envelope}");
        assert_eq!(a.hits(), hits_before + 1);
        let output = toolsmith(&[
            "run",
            "fetch_page",
            "--json",
            "--input",
            r#"{"url": "http://b.test/"}"#,
        ]);
        let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_ne!(envelope["result"], "hello from b", "{envelope}");
        assert_eq!(b.hits(), 0, "b.test is not in the declaration");

        // Without it, a call of the tool that declares a destination is POLICY_DENIED, naming
        // the key to add.
        with_grant("");
        let output = toolsmith(&[
            "run",
            "fetch_page",
            "--json",
            "--input",
            r#"{"url": "http://a.test/"}"#,
        ]);
        let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(envelope["error_code"], "POLICY_DENIED", "{envelope}");
        let error = envelope["error"].as_str().unwrap();
        assert!(error.contains("[generator] network"), "{error}");
        assert_eq!(
            envelope["metadata"]["sandbox"]["denied"][0]["grant"],
            "[generator] network = [\"a.test:80\"]"
        );
        assert_eq!(b.hits(), 0);
    });
}
