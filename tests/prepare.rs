//! Issue 26: each tool's own cache, `toolsmith prepare`, and probe problems that name the
//! probes' sandbox, with the corpus of `tests/peers/prepare/` (tools in Kodelet's conventions)
//! discovered through Kodelet's own folder (`~/.kodelet/tools`, with `[discovery] peers`).
//!
//! Everything is checked from outside: the files in the caches, the secret that must not
//! leave one, the envelopes. The uv test needs uv and a reachable package index: CI installs
//! uv (`.ci/run`, `TOOLSMITH_TEST_UV`) and has PyPI; where either is missing it says so in a
//! WARNING line and checks nothing else.

#![expect(
    clippy::print_stderr,
    reason = "a test that cannot run here must say so loudly"
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::context::TestContext;
use crate::leaks::{HostState, Window};
use crate::serve::{call, connect_to_child, legacy, text};

/// The corpus directory in the repository.
fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/prepare/kodelet-tools")
}

/// Kodelet's global tools folder in the test's home.
fn kodelet_tools(context: &TestContext) -> PathBuf {
    context.root.join("home/.kodelet/tools")
}

/// Copies corpus tool `name` into Kodelet's folder, unchanged.
fn install(context: &TestContext, name: &str) -> PathBuf {
    let dir = kodelet_tools(context);
    fs::create_dir_all(&dir).unwrap();
    let target = dir.join(name);
    fs::copy(corpus().join(name), &target).unwrap();
    target
}

/// The user config: peers on, plus `extra`.
fn config(context: &TestContext, extra: &str) {
    context.user_config(&format!("[discovery]\npeers = true\n\n{extra}"));
}

/// The cache directory toolsmith made for the tool file `name`, found from outside.
fn cache_of(context: &TestContext, name: &str) -> PathBuf {
    let caches = context.root.join("home/.cache/toolsmith/tool-cache");
    let found: Vec<PathBuf> = fs::read_dir(&caches)
        .unwrap_or_else(|error| panic!("{}: {error}", caches.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{name}-"))
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().unwrap()
}

fn envelope(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not an envelope ({error}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Acceptance 2: a probe that cannot write gets a problem naming the read-only probe
/// sandbox and the fix, and nothing was written on the host.
#[test]
fn a_probe_that_cannot_write_names_the_read_only_probe_sandbox_and_the_fix() {
    let context = TestContext::new();
    config(&context, "");
    let tool = install(&context, "state_writer");
    let output = context.command().args(["list", "--all"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find(|line| line.contains(&tool.display().to_string()))
        .unwrap_or_else(|| panic!("no problem for {}: {stdout}", tool.display()));
    for expected in [
        "`description` exited with status 1",
        "Read-only file system",
        "the probe could not write",
        "discovery probes run in a read-only sandbox",
        "$TOOLSMITH_TOOL_CACHE",
        "fix: have the tool write its state there",
    ] {
        assert!(line.contains(expected), "{expected:?} not in: {line}");
    }
    // The `--schema` fallback would be refused the same: it is not tried.
    assert!(!line.contains("--schema"), "{line}");
    assert!(!context.root.join("home/.state_writer").exists());
}

/// A probe may write its tool's own cache (and `XDG_CACHE_HOME` points into it), so a tool
/// that keeps a cache loads; what it wrote is there afterwards, seen from outside.
#[test]
fn a_probe_writes_its_own_cache() {
    let context = TestContext::new();
    config(&context, "");
    install(&context, "cache_owner");
    let output = context.command().args(["list", "--json"]).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(listed.to_string().contains("cache_owner"), "{listed}");
    let cache = cache_of(&context, "cache_owner");
    assert_eq!(
        fs::read_to_string(cache.join("probed")).unwrap(),
        "probed\n"
    );
}

/// Hostile (issue 26): tool B cannot list, read or write tool A's cache, nor see it next to
/// its own, under every filesystem profile; checked from outside (the secret stays out of
/// B's output, nothing is planted in A's cache, B's own cache got its file) and by the leak
/// oracle.
#[test]
fn another_tools_cache_is_out_of_reach_under_every_profile() {
    for profile in ["full", "project", "read-only"] {
        let context = TestContext::new();
        config(
            &context,
            &format!("[sandbox]\nfilesystem = \"{profile}\"\n"),
        );
        install(&context, "cache_owner");
        install(&context, "cache_spy");
        let secret = format!("s3cret-{}-{profile}", std::process::id());
        let owner = context
            .command()
            .args(["run", "cache_owner", "--input"])
            .arg(json!({ "secret": secret }).to_string())
            .output()
            .unwrap();
        assert_eq!(envelope(&owner)["tool_success"], json!(true), "{owner:?}");
        let victim = cache_of(&context, "cache_owner");
        assert_eq!(fs::read_to_string(victim.join("secret")).unwrap(), secret);

        let window = Window::open(false);
        let before = HostState::capture(&context.tmpdir());
        let child = context
            .command()
            .args(["run", "cache_spy", "--input"])
            .arg(json!({ "victim": victim }).to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let toolsmith_pid = child.id();
        let spy = child.wait_with_output().unwrap();
        let leaks = before.leaks(toolsmith_pid, &context.root);
        drop(window);
        let result = envelope(&spy);
        assert_eq!(result["tool_success"], json!(true), "{profile}: {result}");
        let report = result["result"].as_str().unwrap_or_default().to_owned();
        assert!(!report.contains("ESCAPED"), "{profile}: {report}");
        assert!(!report.contains(&secret), "{profile}: {report}");
        assert_eq!(report.matches("held:").count(), 5, "{profile}: {report}");
        assert!(
            report.contains("own cache: writable"),
            "{profile}: {report}"
        );
        assert!(!victim.join("planted").exists(), "{profile}");
        assert_eq!(
            fs::read_to_string(cache_of(&context, "cache_spy").join("mine")).unwrap(),
            "mine\n",
            "{profile}"
        );
        assert!(leaks.is_empty(), "{profile}: {leaks:?}");
    }
}

/// My own attack on the caches, with no config at all (what ships): the owner and the spy
/// are plain executables in a `--tools-dir`, toolsmith runs as root, and no user config
/// exists. The owner leaves a secret in its cache; the spy, told the host path, tries to
/// list, read and plant in it, reach it through `..` and see its siblings.
#[test]
fn with_no_config_another_tools_cache_is_out_of_reach() {
    let context = TestContext::new();
    assert!(
        !context
            .root
            .join("home/.config/toolsmith/config.toml")
            .exists(),
        "the test must run without a user config"
    );
    let tools = context.root.join("plain-tools");
    fs::create_dir_all(&tools).unwrap();
    for name in ["cache_owner", "cache_spy"] {
        fs::copy(corpus().join(name), tools.join(name)).unwrap();
    }
    let run = |name: &str, input: Value| {
        context
            .command()
            .arg("--tools-dir")
            .arg(&tools)
            .args(["run", name, "--input"])
            .arg(input.to_string())
            .output()
            .unwrap()
    };
    let secret = format!("s3cret-{}-no-config", std::process::id());
    let owner = run("cache_owner", json!({ "secret": secret }));
    assert_eq!(envelope(&owner)["tool_success"], json!(true), "{owner:?}");
    let victim = cache_of(&context, "cache_owner");
    assert_eq!(fs::read_to_string(victim.join("secret")).unwrap(), secret);

    let spy = run("cache_spy", json!({ "victim": victim }));
    let result = envelope(&spy);
    assert_eq!(result["tool_success"], json!(true), "{result}");
    let report = result["result"].as_str().unwrap_or_default().to_owned();
    assert!(!report.contains("ESCAPED"), "{report}");
    assert!(!report.contains(&secret), "{report}");
    assert_eq!(report.matches("held:").count(), 5, "{report}");
    assert!(report.contains("own cache: writable"), "{report}");
    assert!(!victim.join("planted").exists());
    assert_eq!(fs::read_to_string(victim.join("secret")).unwrap(), secret);
}

/// `prepare` of a name no tool has is a usage error; of a tool no package runner starts,
/// a note and nothing to do.
#[test]
fn prepare_refuses_unknown_names_and_skips_tools_that_need_nothing() {
    let context = TestContext::new();
    config(&context, "");
    install(&context, "cache_owner");
    let unknown = context
        .command()
        .args(["prepare", "nope"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("no tool named nope"),
        "{unknown:?}"
    );
    let nothing = context
        .command()
        .args(["prepare", "cache_owner", "--json"])
        .output()
        .unwrap();
    assert!(nothing.status.success(), "{nothing:?}");
    assert_eq!(
        serde_json::from_slice::<Value>(&nothing.stdout).unwrap(),
        json!({"prepared": []})
    );
    assert!(
        String::from_utf8_lossy(&nothing.stderr).contains("cache_owner needs no preparation"),
        "{nothing:?}"
    );
}

/// The variables of the machine's network set-up a package manager needs (a proxy, a TLS
/// inspecting gateway's CA, a mirror), passed on to the tools when the test has them, as an
/// operator would with `[env] allow`.
const NETWORK_VARS: [&str; 11] = [
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "PIP_INDEX_URL",
];

/// uv for the test: `TOOLSMITH_TEST_UV`, else `uv` on `PATH`.
fn find_uv() -> Option<PathBuf> {
    if let Some(uv) = std::env::var_os("TOOLSMITH_TEST_UV") {
        return Some(PathBuf::from(uv)).filter(|uv| uv.is_file());
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("uv"))
        .find(|uv| uv.is_file())
}

fn network_env() -> Vec<(&'static str, String)> {
    NETWORK_VARS
        .iter()
        .filter_map(|name| Some((*name, std::env::var(name).ok()?)))
        .collect()
}

/// Whether uv reaches the package index from here: the tool's own dependencies synced into a
/// scratch cache, outside toolsmith.
fn index_reachable(uv: &Path, context: &TestContext) -> Result<(), String> {
    let script = context.root.join("probe-index/humanize_size");
    fs::create_dir_all(script.parent().unwrap()).unwrap();
    fs::copy(corpus().join("humanize_size"), &script).unwrap();
    #[expect(
        clippy::disallowed_methods,
        reason = "the test checks the index with uv itself, outside toolsmith"
    )]
    let output = Command::new(uv)
        .env_clear()
        .envs(network_env())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", context.root.join("probe-index"))
        .env("UV_CACHE_DIR", context.root.join("probe-index/cache"))
        .args(["sync", "--script"])
        .arg(&script)
        .output()
        .map_err(|error| error.to_string())?;
    fs::remove_dir_all(context.root.join("probe-index")).unwrap();
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// Acceptance 1's second uv tool: a Kodelet `uv run --script` tool with a pure-Python
/// dependency from PyPI, in Kodelet's folder, does not load before `toolsmith prepare` (and
/// its problem says to run it), is prepared once, then is listed, called through `run` and
/// over MCP with no network at all (`[sandbox] network = "deny"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uv_script_with_a_pypi_dependency_runs_offline_after_one_prepare() {
    let Some(uv) = find_uv() else {
        eprintln!(
            "WARNING: uv is not installed (set TOOLSMITH_TEST_UV or put uv on PATH): \
             the uv tool of issue 26 was NOT tested"
        );
        return;
    };
    let context = TestContext::new();
    if let Err(error) = index_reachable(&uv, &context) {
        eprintln!(
            "WARNING: uv cannot reach the package index from here: the uv tool of issue 26 \
             was NOT tested ({})",
            error.trim()
        );
        return;
    }
    let bin = context.root.join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(&uv, bin.join("uv")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let network = network_env();
    let allow: Vec<String> = ["PATH", "HOME", "LANG"]
        .iter()
        .map(|name| format!("{name:?}"))
        .chain(network.iter().map(|(name, _)| format!("{name:?}")))
        .collect();
    let env_section = format!("[env]\nallow = [{}]\n", allow.join(", "));
    config(&context, &env_section);
    let command = || {
        let mut command = context.command();
        command.env("PATH", &path).envs(network.iter().cloned());
        command
    };
    install(&context, "humanize_size");

    let before = command().args(["list", "--all"]).output().unwrap();
    let listed = String::from_utf8_lossy(&before.stdout);
    assert!(
        listed.contains("the probe could not reach the network")
            && listed.contains("run `toolsmith prepare humanize_size`"),
        "{before:?}"
    );

    let prepared = command().args(["prepare", "--json"]).output().unwrap();
    assert!(prepared.status.success(), "{prepared:?}");
    let report: Value = serde_json::from_slice(&prepared.stdout).unwrap();
    let entry = &report["prepared"][0];
    assert_eq!(
        report["prepared"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(entry["name"], json!("humanize_size"), "{report}");
    assert_eq!(entry["ok"], json!(true), "{report}");
    assert_eq!(entry["runner"], json!("uv run --script"), "{report}");
    assert_eq!(entry["network"]["granted"], json!("any"), "{report}");
    assert!(
        String::from_utf8_lossy(&prepared.stderr)
            .contains("preparing humanize_size: uv sync --script"),
        "{prepared:?}"
    );

    // Offline from here on: no network for calls either.
    config(
        &context,
        &format!("{env_section}\n[sandbox]\nnetwork = \"deny\"\n"),
    );
    let run = command()
        .args(["run", "humanize_size", "--input", r#"{"bytes": 1500000}"#])
        .output()
        .unwrap();
    let result = envelope(&run);
    assert_eq!(result["tool_success"], json!(true), "{result}");
    assert_eq!(result["result"]["size"], json!("1.5 MB"), "{result}");
    assert_eq!(result["result"]["humanize"], json!("4.11.0"), "{result}");
    assert_eq!(
        result["metadata"]["sandbox"]["network"],
        json!("deny"),
        "{result}"
    );

    let mut serve = command();
    serve.arg("serve");
    let (session, _changes, _pid) = connect_to_child(serve, legacy()).await;
    let answer = session
        .call_tool(call(
            "custom_tool_humanize_size",
            json!({"bytes": 2048, "binary": true}),
        ))
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&text(&answer)).unwrap();
    assert_eq!(answer["size"], json!("2.0 KiB"), "{answer}");
    session.cancel().await.unwrap();
}
