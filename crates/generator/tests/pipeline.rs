//! The generator's pipeline through a real executor: requests in each language are registered and callable, wrong ones are rejected with nothing left on disk, hostile strings cannot inject code, and versions are recorded without touching the user's git state.

use std::fs;
use std::future::IntoFuture as _;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use toolsmith_executor::{BackendChoice, Executor, ExecutorConfig, Limits, filtered_env};
use toolsmith_generator::{
    GeneratorConfig, Report, Request, Status, generate, history, render, rollback, templates,
};
use toolsmith_registry::{Body, Catalog, Policy, RunConfig, SandboxSettings, ToolName, Toolsmith};

struct World {
    temp: tempfile::TempDir,
    executor: Arc<Executor>,
    run_config: RunConfig,
    /// The front door over `executor` and `run_config`, admitting every tool.
    toolsmith: Toolsmith,
    config: GeneratorConfig,
}

impl World {
    fn new() -> World {
        let temp = tempfile::tempdir().unwrap();
        let executor = Arc::new(
            Executor::new(ExecutorConfig {
                backend: BackendChoice::Auto,
                max_concurrent: None,
            })
            .unwrap(),
        );
        let mut limits = Limits::recommended();
        limits.timeout = std::time::Duration::from_secs(10);
        let run_config = RunConfig {
            cwd: temp.path().to_path_buf(),
            // The system directories first: a version manager's `python3` shim (pyenv) costs
            // hundreds of milliseconds per start, which a loaded machine can stretch past the
            // registry's 1 s probe timeout.
            env: filtered_env(
                &["HOME".to_owned()],
                &[(
                    "PATH".to_owned(),
                    format!(
                        "/usr/bin:/bin:{}",
                        std::env::var("PATH").unwrap_or_default()
                    ),
                )],
            ),
            limits,
            max_timeout: std::time::Duration::from_secs(30),
            overrides: Default::default(),
            sandbox: SandboxSettings::unrestricted(),
            project_dir: temp.path().to_path_buf(),
            protected: Vec::new(),
            project_gate: None,
            tool_caches: None,
            read_masks: toolsmith_registry::ReadMasks::none(),
            secrets: Default::default(),
        };
        let config = GeneratorConfig {
            tools_dir: temp.path().join(".toolsmith/tools"),
            drafts_dir: temp.path().join(".toolsmith/drafts"),
            templates_dir: None,
            may_replace: Vec::new(),
        };
        let toolsmith = Toolsmith::from_parts(
            Arc::clone(&executor),
            run_config.clone(),
            Policy::allow_all(),
        );
        World {
            temp,
            executor,
            run_config,
            toolsmith,
            config,
        }
    }

    async fn catalog(&self) -> Catalog {
        Toolsmith::from_parts(
            Arc::clone(&self.executor),
            self.run_config.clone(),
            Policy::allow_all(),
        )
        .discover(std::slice::from_ref(&self.config.tools_dir))
        .await
    }

    async fn generate(&self, request: Value) -> Report {
        let existing = self.catalog().await;
        let request = match Request::from_json(&request) {
            Ok(request) => request,
            Err(error) => return Report::invalid_request(&request, &error),
        };
        generate(&self.toolsmith, &request, &existing, None, &self.config)
            .await
            .unwrap()
    }

    async fn call(&self, name: &str, arguments: Value) -> Value {
        let catalog = self.catalog().await;
        let envelope = self
            .toolsmith
            .call(&catalog, name, &arguments)
            .await
            .unwrap();
        serde_json::to_value(&envelope).unwrap()
    }
}

fn failing_checks(report: &Report) -> Vec<(String, String)> {
    report
        .checks
        .iter()
        .filter(|check| !check.ok)
        .map(|check| (check.name.clone(), check.detail.clone().unwrap_or_default()))
        .collect()
}

fn word_count(language: &str, implementation: &str) -> Value {
    let mut request = json!({
        "name": "count_words",
        "description": "Counts the words of a text.",
        "parameters": {
            "text": "The text",
            "minimum": {"type": "integer", "description": "Only words this long", "default": 1, "minimum": 1},
        },
        "category": "analysis",
        "language": language,
        "implementation": implementation,
        "tests": [
            {"name": "two words", "input": {"text": "hello world"}, "expect": {"result": 2}},
            {"input": {"text": "a bb ccc", "minimum": 2}, "expect": {"result": 2}},
            {"name": "wrong type", "input": {"text": 3}, "expect": {"error_code": "INVALID_PARAMS"}},
        ],
    });
    if language == "manifest" {
        // A manifest's stdout is text unless it declares an output schema.
        request["output_schema"] = json!({"type": "integer"});
    }
    request
}

const PYTHON_COUNT: &str = "progress(0, 1, 'counting')\nreturn len([w for w in args['text'].split() if len(w) >= args['minimum']])";
const BASH_COUNT: &str = "n=0\nfor word in $ARG_TEXT; do\n  if [ \"${#word}\" -ge \"$ARG_MINIMUM\" ]; then n=$((n + 1)); fi\ndone\necho \"$n\"";
const MANIFEST_COUNT: &str = "n=0\nmin={{ minimum }}\ntext={{ text }}\nfor word in $text; do\n  if [ \"${#word}\" -ge \"$min\" ]; then n=$((n + 1)); fi\ndone\necho \"$n\"";

/// Acceptance 1: for each language, a request with an implementation and tests is
/// registered, callable, passes validation, and keeps its tests for `toolsmith test`.
#[tokio::test]
async fn each_language_registers_a_callable_tool() {
    for (language, implementation) in [
        ("python", PYTHON_COUNT),
        ("bash", BASH_COUNT),
        ("manifest", MANIFEST_COUNT),
    ] {
        let world = World::new();
        let report = world.generate(word_count(language, implementation)).await;
        assert_eq!(
            report.status,
            Status::Registered,
            "{language}: {:?}",
            failing_checks(&report)
        );
        assert_eq!(report.version, Some(1));
        let path = report.path.clone().unwrap();
        assert!(path.starts_with(&world.config.tools_dir));
        let check_names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            check_names,
            [
                "request",
                "name",
                "render",
                "registry",
                "schema",
                "learned",
                "test: two words",
                "test: case 2",
                "test: wrong type",
                "missing_required",
                "no_leftovers",
                "network",
                "declaration",
            ]
        );

        // Issue 25: the report carries the registered tool, loaded from the installed file:
        // it is called without a second discovery.
        let registered = report
            .tool
            .clone()
            .expect("a registered report has its tool");
        assert_eq!(registered.path(), path);
        let envelope = world
            .toolsmith
            .call_tool(&registered, &json!({"text": "one two three"}))
            .await
            .unwrap();
        let envelope = serde_json::to_value(&envelope).unwrap();
        assert_eq!(envelope["result"], json!(3), "{language}: {envelope}");
        let envelope = world
            .call("custom_tool_count_words", json!({"text": "one two three"}))
            .await;
        assert_eq!(envelope["result"], json!(3), "{language}: {envelope}");

        let reports = world.toolsmith.validate_paths(&[path]).await;
        assert!(reports[0].passed(), "{language}: {reports:?}");

        let catalog = world.catalog().await;
        let tool = catalog.get(&ToolName::new("count_words").unwrap()).unwrap();
        // What discovery loads from the file is the tool the report returned.
        assert_eq!(tool.description(), registered.description());
        assert_eq!(
            tool.input_schema().as_json(),
            registered.input_schema().as_json()
        );
        assert_eq!(tool.sandbox(), registered.sandbox());
        assert_eq!(tool.annotations(), registered.annotations());
        assert_eq!(tool.path(), registered.path());
        let outcomes = world.toolsmith.run_tests(tool).await.unwrap();
        assert_eq!(outcomes.len(), 3);
        assert!(
            outcomes.iter().all(|outcome| outcome.passed()),
            "{outcomes:?}"
        );
        // Nothing but the tool, its history and the lock of the tools directory is there.
        let mut entries: Vec<String> = fs::read_dir(&world.config.tools_dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        entries.sort();
        let file = if language == "manifest" {
            "count_words.md"
        } else {
            "count_words"
        };
        assert_eq!(entries, [".history.git", ".toolsmith.lock", file]);
    }
}

/// Acceptance 2: wrong implementations are rejected, the failing check explains why, and
/// nothing is registered or left on disk.
#[tokio::test]
async fn wrong_implementations_are_rejected_and_leave_nothing() {
    let cases = [
        (
            "a failing test",
            word_count("python", "return 42"),
            "test: two words",
            "expected result 2, got result 42",
        ),
        (
            "a crash",
            word_count("python", "raise ValueError('no words here')"),
            "test: two words",
            "ValueError: no words here",
        ),
        (
            "a bash crash",
            word_count("bash", "echo broken >&2\nexit 3"),
            "test: two words",
            "broken",
        ),
        (
            "non-JSON where JSON is declared",
            json!({
                "name": "list_things", "description": "Lists things.", "language": "bash",
                "output_schema": {"type": "object"},
                "implementation": "echo 'not json'",
                "tests": [{"input": {}}],
            }),
            "test: case 1",
            "INVALID_OUTPUT",
        ),
        (
            "a daemon left behind",
            json!({
                "name": "start_daemon", "description": "Leaves a process behind.", "language": "bash",
                "implementation": "setsid sleep 30 </dev/null >/dev/null 2>&1 &\necho started",
                "tests": [{"input": {}, "expect": {"result": "started"}}],
            }),
            "no_leftovers",
            "left 1 process",
        ),
        (
            "a schema mismatch from a request that is not a request",
            json!({"name": "x", "description": "d", "language": "cobol", "implementation": "x"}),
            "request",
            "/language",
        ),
    ];
    for (what, request, check, detail) in cases {
        let world = World::new();
        let report = world.generate(request).await;
        assert_eq!(report.status, Status::Rejected, "{what}: {report:?}");
        let failing = failing_checks(&report);
        assert!(
            failing
                .iter()
                .any(|(name, text)| name == check && text.contains(detail)),
            "{what}: {failing:?}"
        );
        assert!(
            !world.temp.path().join(".toolsmith").exists(),
            "{what}: something was left on disk"
        );
    }
}

/// The registry's own check runs first: a manifest body that uses an undeclared
/// placeholder is refused by the registry check, with its message.
#[tokio::test]
async fn the_registry_check_explains_a_broken_manifest() {
    let world = World::new();
    let report = world
        .generate(json!({
            "name": "greet", "description": "Greets.", "language": "manifest",
            "implementation": "echo {{ who }}",
        }))
        .await;
    assert_eq!(report.status, Status::Rejected);
    let failing = failing_checks(&report);
    assert_eq!(failing[0].0, "registry", "{failing:?}");
    assert!(failing[0].1.contains("who"), "{failing:?}");
}

/// An executable that discovery refuses fails the `registry` check alone, though its test
/// cases ran first on the tool predicted from the template's answers: a failed check has the
/// file probed all the same, a Python body that does not compile fails its `description`
/// probe, and nothing is registered or left on disk.
#[tokio::test]
async fn the_registry_check_refuses_an_executable_whose_probe_fails() {
    let world = World::new();
    let report = world.generate(word_count("python", "return (1 +")).await;
    assert_eq!(report.status, Status::Rejected);
    let failing = failing_checks(&report);
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0].0, "registry", "{failing:?}");
    assert!(failing[0].1.contains("description"), "{failing:?}");
    assert!(
        !report
            .checks
            .iter()
            .any(|check| check.name.starts_with("test: ")),
        "{:?}",
        report.checks
    );
    assert!(!world.temp.path().join(".toolsmith").exists());
}

/// An overriding template is asked what it answers rather than trusted to answer what the
/// generator rendered: this one asks for a 1 s timeout whatever the request says, and the
/// test case that sleeps longer times out.
#[tokio::test]
async fn an_overriding_templates_config_is_asked() {
    let mut world = World::new();
    let embedded = toolsmith_generator::EMBEDDED_TEMPLATES
        .iter()
        .find(|(name, _)| *name == "bash.tera")
        .unwrap()
        .1;
    let asked = "printf '{\"timeout\": \"%s\"}\\n' {{ timeout | shell_quote }}";
    assert!(embedded.contains(asked));
    let overrides = world.temp.path().join("templates");
    fs::create_dir(&overrides).unwrap();
    fs::write(
        overrides.join("bash.tera"),
        embedded.replace(asked, "printf '{\"timeout\": \"1s\"}\\n'"),
    )
    .unwrap();
    world.config.templates_dir = Some(overrides);
    let report = world
        .generate(json!({
            "name": "wait_long", "description": "Waits.", "language": "bash",
            "implementation": "sleep 2\necho done",
            "tests": [{"input": {}, "expect": {"result": "done"}}],
        }))
        .await;
    assert_eq!(report.status, Status::Rejected);
    // The `sleep` the timeout interrupted may also count as a process left behind.
    let failing = failing_checks(&report);
    assert!(
        failing
            .iter()
            .any(|(name, detail)| name == "test: case 1" && detail.contains("TIMEOUT")),
        "{failing:?}"
    );
    assert!(!world.config.tools_dir.join("wait_long").exists());
}

/// A generation dropped part-way (an MCP client that gave up) leaves nothing either, at
/// whatever point it is dropped: the first history of the tools directory, written aside
/// while the checks run, may still be being written when the staging directory goes.
#[tokio::test]
async fn a_cancelled_generation_leaves_nothing() {
    for after_ms in [1, 3, 5, 8, 12, 20, 40] {
        let world = World::new();
        let existing = world.catalog().await;
        let request = Request::from_json(&json!({
            "name": "wait_long", "description": "Waits.", "language": "bash",
            "implementation": "sleep 5\necho done",
            "tests": [{"input": {}, "expect": {"result": "done"}}],
        }))
        .unwrap();
        let cancelled = tokio::time::timeout(
            std::time::Duration::from_millis(after_ms),
            generate(&world.toolsmith, &request, &existing, None, &world.config),
        )
        .await;
        assert!(cancelled.is_err(), "{after_ms} ms: {cancelled:?}");
        let left = world.temp.path().join(".toolsmith");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while left.exists() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(!left.exists(), "{after_ms} ms: something was left on disk");
    }
}

#[tokio::test]
async fn existing_names_need_replace_and_reserved_names_are_refused() {
    let world = World::new();
    let request = word_count("python", PYTHON_COUNT);
    assert_eq!(
        world.generate(request.clone()).await.status,
        Status::Registered
    );
    let again = world.generate(request).await;
    assert_eq!(again.status, Status::Rejected);
    assert!(
        failing_checks(&again)[0]
            .1
            .contains("send \"replace\": true")
    );
    let reserved = world
        .generate(
            json!({"name": "custom_tool_x", "description": "d", "implementation": "return 1"}),
        )
        .await;
    assert_eq!(failing_checks(&reserved)[0].0, "request");
    assert!(failing_checks(&reserved)[0].1.contains("reserved"));
}

#[tokio::test]
async fn a_request_without_implementation_is_scaffolded_as_a_draft() {
    let world = World::new();
    let report = world
        .generate(json!({"name": "plan_trip", "description": "Plans a trip.", "language": "bash"}))
        .await;
    assert_eq!(report.status, Status::Scaffolded);
    let draft = world.config.drafts_dir.join("plan_trip");
    assert_eq!(report.path.as_deref(), Some(draft.as_path()));
    assert!(draft.join("plan_trip").is_file());
    assert!(draft.join("request.json").is_file());
    assert!(!world.config.tools_dir.exists());
}

/// A Python tool that tries the host's loopback: `refused` or `connected`.
fn reach_port(port: u16, requires_network: bool, expect: &str) -> Value {
    json!({
        "name": "reach_port",
        "description": "Tries a TCP connection to the host's loopback.",
        "language": "python",
        "requires_network": requires_network,
        "implementation": format!(
            "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n    return 'connected'\nexcept OSError:\n    return 'refused'\n"
        ),
        "tests": [{"input": {}, "expect": {"result": expect}}],
    })
}

#[tokio::test]
async fn generated_tools_reach_nothing_but_through_the_egress_proxy() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();

    let world = World::new();
    let report = world.generate(reach_port(port, false, "refused")).await;
    assert_eq!(
        report.status,
        Status::Registered,
        "{:?}",
        failing_checks(&report)
    );
    let network = report
        .checks
        .iter()
        .find(|check| check.name == "network")
        .unwrap();
    assert_eq!(network.detail.as_deref(), Some("network none"));
    // The same tool expecting a connection is rejected: the test case explains why.
    let world = World::new();
    let report = world.generate(reach_port(port, false, "connected")).await;
    let refused = [
        (
            "learned".to_owned(),
            "a test fails even in the recording sandbox (the grant of generated tools: `[generator] network` and the filesystem grant), so there is no declaration to learn".to_owned(),
        ),
        (
            "test: case 1".to_owned(),
            "expected result \"connected\", got result \"refused\"".to_owned(),
        ),
    ];
    assert_eq!(report.status, Status::Rejected);
    assert_eq!(failing_checks(&report), refused);

    // Even a request that requires the network, with the host's network granted to
    // generated tools (the compat profile), learns only through the egress proxy: a program
    // that ignores the proxy reaches nothing, and the host's loopback is never learned.
    let world = World::new();
    let report = world.generate(reach_port(port, true, "connected")).await;
    assert_eq!(report.status, Status::Rejected);
    assert_eq!(failing_checks(&report), refused);
}

fn git(repo: &Path) -> (String, Vec<u8>, Vec<String>) {
    let repository = git2::Repository::open(repo).unwrap();
    let head = repository.head().unwrap().target().unwrap().to_string();
    let index = fs::read(repo.join(".git/index")).unwrap();
    let mut options = git2::StatusOptions::new();
    options.include_untracked(true).recurse_untracked_dirs(true);
    let status = repository
        .statuses(Some(&mut options))
        .unwrap()
        .iter()
        .map(|entry| format!("{:?} {}", entry.status(), entry.path().unwrap()))
        .filter(|line| !line.contains(".toolsmith/tools/"))
        .collect();
    (head, index, status)
}

/// Acceptance 4: `replace` bumps the version, history lists both, rollback restores the
/// first and the registry serves it; the user's branch, index and working tree outside
/// the tools directory are unchanged.
#[tokio::test]
async fn replace_history_and_rollback_leave_the_users_git_alone() {
    let world = World::new();
    let root = world.temp.path();
    let repository = git2::Repository::init(root).unwrap();
    fs::write(root.join("committed.txt"), "one\n").unwrap();
    fs::write(root.join("staged.txt"), "two\n").unwrap();
    fs::write(root.join("untracked.txt"), "three\n").unwrap();
    let mut index = repository.index().unwrap();
    index.add_path(Path::new("committed.txt")).unwrap();
    let tree = repository.find_tree(index.write_tree().unwrap()).unwrap();
    let signature = git2::Signature::now("user", "user@example.invalid").unwrap();
    repository
        .commit(Some("HEAD"), &signature, &signature, "first", &tree, &[])
        .unwrap();
    index.add_path(Path::new("staged.txt")).unwrap();
    index.write().unwrap();
    let before = git(root);

    let version = |answer: &str, replace: bool| {
        json!({
            "name": "tell_version", "description": "Tells its version.", "language": "bash",
            "implementation": format!("echo {answer}"),
            "tests": [{"input": {}, "expect": {"result": answer}}],
            "replace": replace,
        })
    };
    let first = world.generate(version("first", false)).await;
    assert_eq!(first.version, Some(1), "{:?}", failing_checks(&first));
    let second = world.generate(version("second", true)).await;
    assert_eq!(second.version, Some(2), "{:?}", failing_checks(&second));
    assert_eq!(
        world.call("tell_version", json!({})).await["result"],
        json!("second")
    );

    let name = ToolName::new("tell_version").unwrap();
    let versions = history(&world.config.tools_dir, &name).unwrap();
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(versions[0].commit, first.commit.clone().unwrap());
    assert_eq!(versions[1].commit, second.commit.clone().unwrap());

    let restored = rollback(&world.toolsmith, &world.config.tools_dir, &name, None, None)
        .await
        .unwrap();
    assert_eq!(restored.version, 3);
    assert_eq!(restored.message, "tell_version v3: rollback to v1");
    assert_eq!(
        world.call("tell_version", json!({})).await["result"],
        json!("first")
    );
    assert!(matches!(
        rollback(
            &world.toolsmith,
            &world.config.tools_dir,
            &name,
            Some(9),
            None
        )
        .await,
        Err(toolsmith_generator::Error::NoSuchVersion {
            version: 9,
            latest: 3,
            ..
        })
    ));

    assert_eq!(git(root), before);
}

const MARKER: &str = "/tmp/toolsmith-generator-injection-marker";

fn hostile() -> impl Strategy<Value = String> {
    let fragments = prop::sample::select(vec![
        "\"".to_owned(),
        "'".to_owned(),
        "\\".to_owned(),
        "\\n".to_owned(),
        "{{ text }}".to_owned(),
        "{% if true %}x{% endif %}".to_owned(),
        "{{# text }}y{{/ text }}".to_owned(),
        "\"\"\"".to_owned(),
        "'''".to_owned(),
        format!("$(touch {MARKER})"),
        format!("`touch {MARKER}`"),
        format!("'; touch {MARKER}; '"),
        format!("\"\"\"\nimport os; os.system('touch {MARKER}')\n\"\"\""),
        format!("\n---\nname: x\n---\ntouch {MARKER}\n"),
        "\n".to_owned(),
        "\r\n".to_owned(),
        "\t".to_owned(),
        "# not a comment".to_owned(),
        ": colon".to_owned(),
        "- dash".to_owned(),
        "é中🦀\u{2028}".to_owned(),
        "null".to_owned(),
        "%s%n".to_owned(),
    ]);
    (prop::collection::vec(fragments, 0..6), "[a-zA-Z0-9 ]{0,8}")
        .prop_map(|(fragments, plain)| format!("{plain}{}", fragments.concat()))
}

/// Acceptance 3: for arbitrary description, parameter description and example strings,
/// every language's generated tool declares them exactly and no injected code runs.
#[test]
fn hostile_strings_are_declared_exactly_and_run_nothing() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let world = World::new();
    let tera = templates(None).unwrap();
    let _absent = fs::remove_file(MARKER);
    let mut config = ProptestConfig::with_cases(24);
    config.failure_persistence = None;
    proptest!(config, |(description in hostile(), parameter in hostile(), example in hostile(), usage in hostile())| {
        let description = format!("d{description}");
        for (index, language) in ["python", "bash", "manifest"].into_iter().enumerate() {
            let implementation = match language {
                "python" => "return args.get('text')",
                "bash" => "echo \"$ARG_TEXT\"",
                _ => "echo {{ text }}",
            };
            let request = Request::from_json(&json!({
                "name": "echo_text",
                "description": description,
                "usage": usage,
                "examples": [example],
                "parameters": {"text": {"type": "string", "description": parameter}},
                "language": language,
                "implementation": implementation,
            })).unwrap();
            let rendered = render(&tera, &request, implementation).unwrap();
            let dir = world.temp.path().join(format!("probe-{index}"));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            let path = dir.join(&rendered.file_name);
            fs::write(&path, &rendered.contents).unwrap();
            if rendered.executable {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
            }
            let catalog = runtime.block_on(Toolsmith::from_parts(Arc::clone(&world.executor), world.run_config.clone(), Policy::allow_all()).discover(std::slice::from_ref(&dir)));
            prop_assert!(catalog.problems().is_empty(), "{language}: {:?}\n{}", catalog.problems().iter().map(|p| p.message()).collect::<Vec<_>>(), rendered.contents);
            let tool = catalog.get(&request.name).unwrap();
            let full_description = request.full_description();
            prop_assert_eq!(tool.description(), full_description.as_str());
            // Verbatim, but for the trailing whitespace of the whole text.
            prop_assert!(tool.description().contains(description.trim_end()));
            prop_assert!(tool.description().contains(example.trim_end()));
            prop_assert_eq!(
                &tool.input_schema().as_json()["properties"]["text"]["description"],
                &Value::from(parameter.clone())
            );
            let arguments = json!({"text": "ok"});
            let envelope = runtime.block_on(
                world.toolsmith.call(&catalog, "echo_text", &arguments).into_future(),
            ).unwrap();
            prop_assert!(matches!(envelope.body, Body::Success { .. }), "{language}: {:?}", envelope);
            prop_assert!(!Path::new(MARKER).exists(), "{language}: injected code ran");
        }
    });
}

/// A directory of links to bash and the coreutils programs, and nothing else (no jq).
fn bash_and_coreutils(dir: &Path) -> String {
    const PROGRAMS: &[&str] = &[
        "bash",
        "cat",
        "tr",
        "head",
        "tail",
        "wc",
        "sort",
        "cut",
        "printf",
        "echo",
        "env",
        "sha256sum",
        "mktemp",
        "rm",
        "ls",
        "basename",
        "dirname",
        "date",
        "sleep",
        "tee",
        "uniq",
        "od",
        "true",
        "false",
        "test",
        "mkdir",
        "cp",
        "mv",
        "seq",
    ];
    fs::create_dir_all(dir).unwrap();
    for program in PROGRAMS {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|prefix| Path::new(prefix).join(program))
            .find(|path| path.exists());
        if let Some(found) = found {
            std::os::unix::fs::symlink(found, dir.join(program)).unwrap();
        }
    }
    assert!(dir.join("bash").exists() && dir.join("tr").exists());
    assert!(!dir.join("jq").exists());
    dir.display().to_string()
}

/// A message no naive JSON writer survives.
const NASTY_MESSAGE: &str =
    "say \"hi\" \\ back\\slash\nline two\r\n\ttabbed \u{1}\u{1f}\u{7f} é中🦀\u{2028}$(x) `y` 'z'";

fn shout_request() -> Value {
    json!({
        "name": "shout_text",
        "description": "Upper-cases a text.",
        "parameters": {
            "text": "The text",
            "mode": {"type": "string", "description": "shout or fail", "default": "shout"},
            "times": {"type": "integer", "description": "How many times", "default": 1, "minimum": 1},
        },
        "language": "bash",
        "implementation": "progress 1 2 \"$ARG_TEXT\"\nif [ \"$ARG_MODE\" = fail ]; then fail \"$ARG_TEXT\"; fi\nfor _ in $(seq \"$ARG_TIMES\"); do printf '%s\\n' \"$ARG_TEXT\" | tr a-z A-Z; done",
        "tests": [
            {"input": {"text": "hello"}, "expect": {"result": "HELLO"}},
            {"input": {"text": "x", "mode": "fail"}, "expect": {"error_code": "TOOL_CRASHED"}},
        ],
    })
}

/// Issue 15: a generated bash tool needs bash and coreutils only. With a `PATH` that has
/// no jq, it registers, answers, writes a structured error that holds any text exactly,
/// and reports progress.
#[tokio::test]
async fn a_generated_bash_tool_needs_no_jq() {
    let mut world = World::new();
    let path = bash_and_coreutils(&world.temp.path().join("bin"));
    world.run_config.env.retain(|(name, _)| name != "PATH");
    world.run_config.env.push(("PATH".into(), path.into()));
    let report = world.generate(shout_request()).await;
    assert_eq!(
        report.status,
        Status::Registered,
        "{:?}",
        failing_checks(&report)
    );
    assert_eq!(
        world
            .call("shout_text", json!({"text": "a \"b\" é", "times": 2}))
            .await["result"],
        json!("A \"B\" é\nA \"B\" é")
    );

    let catalog = world.catalog().await;
    let tool = catalog.get(&ToolName::new("shout_text").unwrap()).unwrap();
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let arguments = json!({"text": NASTY_MESSAGE, "mode": "fail"});
    let envelope = world
        .toolsmith
        .call_tool(tool, &arguments)
        .with_progress(sender)
        .await
        .unwrap();
    let mut reports = Vec::new();
    while let Some(line) = receiver.recv().await {
        reports.extend(toolsmith_registry::Progress::parse(&line));
    }
    let envelope = serde_json::to_value(&envelope).unwrap();
    assert_eq!(envelope["tool_success"], json!(false), "{envelope}");
    assert_eq!(envelope["error_code"], json!("TOOL_CRASHED"), "{envelope}");
    assert_eq!(envelope["error"], json!(NASTY_MESSAGE), "{envelope}");
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].progress, 1.0);
    assert_eq!(reports[0].total, Some(2.0));
    assert_eq!(reports[0].message.as_deref(), Some(NASTY_MESSAGE));
}

/// Issue 15: run by hand (no `TOOLSMITH_ARGS`), a generated bash tool reads its arguments
/// from `TOOLSMITH_ARG_<name>` variables, applies the defaults, and refuses a missing or
/// mistyped argument with a structured error; it still needs no jq.
#[tokio::test]
async fn a_generated_bash_tool_run_by_hand_checks_its_arguments() {
    let world = World::new();
    let path = bash_and_coreutils(&world.temp.path().join("bin"));
    let tera = templates(None).unwrap();
    let request = Request::from_json(&shout_request()).unwrap();
    let implementation = request.implementation.clone().unwrap();
    let rendered = render(&tera, &request, &implementation).unwrap();
    let tool = world.temp.path().join("shout_text");
    fs::write(&tool, &rendered.contents).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&tool, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = |variables: &[(&str, &str)]| {
        #[expect(
            clippy::disallowed_methods,
            reason = "the test runs a generated tool by hand, as a user would"
        )]
        let mut command = std::process::Command::new(&tool);
        command
            .arg("run")
            .env_clear()
            .env("PATH", &path)
            .stdin(std::process::Stdio::null());
        for (name, value) in variables {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        (
            output.status.code(),
            String::from_utf8(output.stdout).unwrap(),
        )
    };
    let (code, stdout) = run(&[]);
    assert_eq!(code, Some(1));
    let error: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("missing required argument(s): text (run by hand, this tool reads each argument from a variable TOOLSMITH_ARG_<name>"),
        "{stdout}"
    );
    assert_eq!(
        run(&[("TOOLSMITH_ARG_text", "it's \"ok\"")]),
        (Some(0), "IT'S \"OK\"\n".to_owned())
    );
    let (code, stdout) = run(&[("TOOLSMITH_ARG_text", "x"), ("TOOLSMITH_ARG_times", "two")]);
    assert_eq!(code, Some(1));
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap(),
        json!({"error": "argument times must be an integer, not: two"})
    );
    let (code, stdout) = run(&[
        ("TOOLSMITH_ARG_text", NASTY_MESSAGE),
        ("TOOLSMITH_ARG_mode", "fail"),
    ]);
    assert_eq!(code, Some(1));
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap(),
        json!({"error": NASTY_MESSAGE})
    );
}

/// The tool's answer for a value: its SHA-256, computed by the tool from what it received.
fn digest(text: &str) -> String {
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(text.as_bytes());
    let hex: String = hash.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha:{hex}")
}

/// Renders and discovers the tool `request` in a directory of its own.
fn install(
    world: &World,
    runtime: &tokio::runtime::Runtime,
    request: &Request,
    index: usize,
) -> Catalog {
    let tera = templates(None).unwrap();
    let implementation = request.implementation.clone().unwrap();
    let rendered = render(&tera, request, &implementation).unwrap();
    let dir = world.temp.path().join(format!("echo-{index}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(&rendered.file_name);
    fs::write(&path, &rendered.contents).unwrap();
    if rendered.executable {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }
    runtime.block_on(
        Toolsmith::from_parts(
            Arc::clone(&world.executor),
            world.run_config.clone(),
            Policy::allow_all(),
        )
        .discover(std::slice::from_ref(&dir)),
    )
}

/// A tool in each language that answers the digest of its `text` argument.
fn digest_tools() -> Vec<Request> {
    [
        (
            "python",
            "import hashlib\nreturn 'sha:' + hashlib.sha256(args['text'].encode()).hexdigest()",
        ),
        (
            "bash",
            "printf 'sha:%s\\n' \"$(printf '%s' \"$ARG_TEXT\" | sha256sum | cut -d' ' -f1)\"",
        ),
        (
            "manifest",
            "printf 'sha:%s\\n' \"$(printf '%s' {{ text }} | sha256sum | cut -d' ' -f1)\"",
        ),
    ]
    .into_iter()
    .map(|(language, implementation)| {
        Request::from_json(&json!({
            "name": "digest_text",
            "description": "Digests a text.",
            "parameters": {"text": "The text"},
            "language": language,
            "implementation": implementation,
        }))
        .unwrap()
    })
    .collect()
}

/// Issue 15: argument values reach the tool exactly in every language, hostile ones and
/// ones too large for the environment (passed in a file) alike.
#[test]
fn argument_values_reach_the_tool_exactly() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let world = World::new();
    let _absent = fs::remove_file(MARKER);
    let catalogs: Vec<Catalog> = digest_tools()
        .iter()
        .enumerate()
        .map(|(index, request)| install(&world, &runtime, request, index))
        .collect();
    let call = |catalog: &Catalog, text: &str| {
        let envelope = runtime
            .block_on(
                world
                    .toolsmith
                    .call(catalog, "digest_text", &json!({"text": text}))
                    .into_future(),
            )
            .unwrap();
        serde_json::to_value(&envelope).unwrap()
    };
    // Over 1 MiB: beyond what the environment takes, so it travels in a file.
    let large = format!("{NASTY_MESSAGE}\n").repeat((1 << 20) / NASTY_MESSAGE.len() + 1);
    assert!(large.len() >= 1 << 20);
    for (catalog, language) in catalogs.iter().zip(["python", "bash", "manifest"]) {
        let envelope = call(catalog, &large);
        assert_eq!(
            envelope["result"],
            json!(digest(&large)),
            "{language}: {envelope}"
        );
    }
    let mut config = ProptestConfig::with_cases(24);
    config.failure_persistence = None;
    proptest!(config, |(text in hostile())| {
        for (catalog, language) in catalogs.iter().zip(["python", "bash", "manifest"]) {
            let envelope = call(catalog, &text);
            prop_assert_eq!(&envelope["result"], &json!(digest(&text)), "{}: {}", language, envelope);
        }
        prop_assert!(!Path::new(MARKER).exists(), "injected code ran");
    });
}
