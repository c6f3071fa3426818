//! Issue 23's grants through the binary: with no config at all a tool rewrites nothing that
//! governs later calls and reaches no loopback server (Why 1 and 2, as root); a tool that
//! declares a destination or a writable path the operator does not grant is `POLICY_DENIED`
//! with the line to add; a granted list of writable paths is all a tool may write.

#![expect(
    clippy::print_stderr,
    reason = "a test that cannot run here must say so loudly"
)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::context::{TestContext, shell_tool};
use crate::serve_http::Server;

fn hostile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("hostile/sandbox")
        .join(name)
}

fn run_json(command: &mut std::process::Command) -> Value {
    let output = command.output().unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "not an envelope: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// True when the kernel gives calls Landlock and mount namespaces and toolsmith runs as root;
/// otherwise says so loudly.
fn root_with_landlock(context: &TestContext) -> bool {
    let output = context
        .command()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let doctor: Value = serde_json::from_slice(&output.stdout).unwrap();
    let available = |mechanism: &str| {
        doctor["sandbox"]["support"]
            .as_array()
            .unwrap()
            .iter()
            .any(|support| support["mechanism"] == mechanism && support["available"] == true)
    };
    let root = toolsmith_uid() == 0;
    let ready = root && available("landlock") && available("mount namespace");
    if !ready {
        eprintln!(
            "WARNING: the default-profile attacks need root, Landlock and mount namespaces; SKIPPED"
        );
    }
    ready
}

fn toolsmith_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self").unwrap().uid()
}

/// The targets of `rewrite-governance.sh`, outside the tool's reach under the default.
struct Targets {
    user_config: PathBuf,
    trust_store: PathBuf,
    binary: PathBuf,
    bashrc: PathBuf,
    etc: PathBuf,
}

impl Targets {
    fn new(context: &TestContext) -> Targets {
        let home = context.root.join("home");
        let binary = context.root.join("bin/toolsmith");
        fs::create_dir_all(binary.parent().unwrap()).unwrap();
        fs::copy(env!("CARGO_BIN_EXE_toolsmith-dup"), &binary).unwrap();
        fs::write(home.join(".bashrc"), "# the user's own\n").unwrap();
        Targets {
            user_config: home.join(".config/toolsmith/config.toml"),
            trust_store: home.join(".local/state/toolsmith/trust.json"),
            binary,
            bashrc: home.join(".bashrc"),
            etc: PathBuf::from(format!("/etc/toolsmith-test-{}", std::process::id())),
        }
    }

    /// What the tool changed, as seen from outside; removes what it planted under /etc.
    fn changed(&self) -> Vec<&'static str> {
        let mut changed = Vec::new();
        if self.user_config.exists() {
            changed.push("user config");
        }
        if self.trust_store.exists() {
            changed.push("trust store");
        }
        if fs::read(&self.binary).unwrap() != fs::read(env!("CARGO_BIN_EXE_toolsmith-dup")).unwrap()
        {
            changed.push("binary");
        }
        if fs::read_to_string(&self.bashrc).unwrap() != "# the user's own\n" {
            changed.push("bashrc");
        }
        if self.etc.exists() {
            fs::remove_file(&self.etc).unwrap();
            changed.push("etc");
        }
        changed
    }
}

#[test]
fn with_no_config_a_tool_rewrites_nothing_that_governs_later_calls() {
    let context = TestContext::new();
    if !root_with_landlock(&context) {
        return;
    }
    let targets = Targets::new(&context);
    context.tool(
        "rewrite",
        &shell_tool(
            "rewrite",
            r#"{"type": "object"}"#,
            &format!(
                "exec {} {} {}",
                hostile("rewrite-governance.sh").display(),
                targets.binary.display(),
                targets.etc.display()
            ),
        ),
    );
    let envelope = run_json(context.with_tools().args(["run", "rewrite"]));
    assert_eq!(envelope["tool_success"], true, "{envelope}");
    let printed = envelope["result"].as_str().unwrap();
    assert!(!printed.contains("ESCAPED"), "{printed}");
    assert_eq!(printed.matches("held: ").count(), 5, "{printed}");
    assert_eq!(targets.changed(), Vec::<&str>::new(), "{printed}");
    assert_eq!(envelope["metadata"]["sandbox"]["filesystem"], "project");

    // `profile = "compat"` is toolsmith before issue 23: every attack lands (this is what the
    // test saw on the old default) but on the trust store, which the read masks hide under every
    // profile (docs/security.md, "Read masks"; a missing user config can still be created).
    let compat = context.root.join("compat.toml");
    fs::write(&compat, "[sandbox]\nprofile = \"compat\"\n").unwrap();
    let envelope = run_json(
        context
            .with_tools()
            .arg("--config")
            .arg(&compat)
            .args(["run", "rewrite"]),
    );
    let printed = envelope["result"].as_str().unwrap();
    assert_eq!(
        targets.changed(),
        ["user config", "binary", "bashrc", "etc"],
        "{printed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_config_a_tool_cannot_reach_toolsmiths_http_port() {
    let context = TestContext::new();
    let mut server = Server::start(&context, &[], &[]).await;
    let port = server.port();
    context.tool(
        "dial",
        &shell_tool(
            "dial",
            r#"{"type": "object"}"#,
            &format!("exec {} {port}", hostile("connect.sh").display()),
        ),
    );
    let envelope = run_json(context.with_tools().args(["run", "dial"]));
    let applied = &envelope["metadata"]["sandbox"];
    if applied["network"] != "deny" {
        eprintln!("WARNING: no network namespace for calls here: {envelope}");
    } else {
        assert_eq!(envelope["result"], "refused", "{envelope}");
    }
    // Declaring the port does not open it: a literal address is the operator's to grant.
    context.tool(
        "dial_declared",
        &shell_tool(
            "dial_declared",
            &format!(r#"{{"type": "object"}}, "sandbox": {{"network": ["127.0.0.1:{port}"]}}"#),
            &format!("exec {} {port}", hostile("connect.sh").display()),
        ),
    );
    let envelope = run_json(context.with_tools().args(["run", "dial_declared"]));
    assert_eq!(envelope["error_code"], "POLICY_DENIED", "{envelope}");
    assert_eq!(
        envelope["metadata"]["sandbox"]["denied"][0]["grant"],
        format!("[tools.dial_declared] network = [\"127.0.0.1:{port}\"]")
    );
    // The operator's explicit `network = "any"` is the host's network: the port is there.
    let any = context.root.join("any.toml");
    fs::write(&any, "[sandbox]\nnetwork = \"any\"\n").unwrap();
    let envelope = run_json(
        context
            .with_tools()
            .arg("--config")
            .arg(&any)
            .args(["run", "dial"]),
    );
    assert_eq!(envelope["result"], "connected", "{envelope}");
    server.terminate().await;
}

/// A tool `name` declaring `sandbox` that touches `marker` (so a refused call shows it never ran).
fn declaring_tool(context: &TestContext, name: &str, sandbox: &str, body: &str) {
    context.tool(
        name,
        &shell_tool(
            name,
            &format!(r#"{{"type": "object"}}, "sandbox": {sandbox}"#),
            body,
        ),
    );
}

#[test]
fn a_declared_destination_the_operator_does_not_grant_is_policy_denied_naming_the_key() {
    let context = TestContext::new();
    let marker = context.root.join("ran");
    declaring_tool(
        &context,
        "fetch",
        r#"{"network": ["a.test:443"]}"#,
        &format!("touch {}; echo ok", marker.display()),
    );
    let config = context.root.join("config.toml");
    fs::write(
        &config,
        "[sandbox]\nnetwork = [\"b.test\"]\nfilesystem = \"full\"\n",
    )
    .unwrap();
    let denied = run_json(
        context
            .with_tools()
            .arg("--config")
            .arg(&config)
            .args(["run", "fetch"]),
    );
    assert_eq!(denied["error_code"], "POLICY_DENIED", "{denied}");
    assert_eq!(
        denied["error"],
        "Tool fetch declares a.test:443 that the operator does not grant; to grant it, add to the config: [tools.fetch] network = [\"a.test:443\"]."
    );
    assert_eq!(
        denied["metadata"]["sandbox"]["denied"],
        json!([{
            "kind": "network",
            "target": "a.test:443",
            "reason": "the tool declares a.test:443, not in the operator's network list",
            "grant": "[tools.fetch] network = [\"a.test:443\"]",
        }])
    );
    assert!(!marker.exists(), "a refused call must start nothing");

    // The line the refusal names is the one that lets it run.
    fs::write(
        &config,
        "[sandbox]\nnetwork = [\"b.test\"]\nfilesystem = \"full\"\n\n[tools.fetch]\nnetwork = [\"a.test:443\"]\n",
    )
    .unwrap();
    let granted = run_json(
        context
            .with_tools()
            .arg("--config")
            .arg(&config)
            .args(["run", "fetch"]),
    );
    assert_eq!(granted["tool_success"], true, "{granted}");
    assert!(marker.exists());
}

#[test]
fn a_declared_writable_path_is_policy_denied_until_granted_and_then_the_only_place_written() {
    let context = TestContext::new();
    if !root_with_landlock(&context) {
        return;
    }
    let outside = context.root.join("srv/cache");
    fs::create_dir_all(&outside).unwrap();
    fs::create_dir_all(context.project.join("out")).unwrap();
    declaring_tool(
        &context,
        "writer",
        &format!(r#"{{"filesystem": ["{}"]}}"#, outside.display()),
        &format!(
            "echo cached > {}/entry && echo written; echo more > {}/out/entry 2>/dev/null && echo ESCAPED; exit 0",
            outside.display(),
            context.project.display()
        ),
    );
    let denied = run_json(context.with_tools().args(["run", "writer"]));
    assert_eq!(denied["error_code"], "POLICY_DENIED", "{denied}");
    let line = format!("[tools.writer] filesystem = [\"{}\"]", outside.display());
    assert_eq!(denied["metadata"]["sandbox"]["denied"][0]["kind"], "write");
    assert_eq!(denied["metadata"]["sandbox"]["denied"][0]["grant"], line);
    assert!(
        denied["error"].as_str().unwrap().contains(&line),
        "{denied}"
    );
    assert!(!outside.join("entry").exists());

    let config = context.root.join("config.toml");
    fs::write(
        &config,
        format!("[tools.writer]\nfilesystem = [\"{}\"]\n", outside.display()),
    )
    .unwrap();
    let granted = run_json(
        context
            .with_tools()
            .arg("--config")
            .arg(&config)
            .args(["run", "writer"]),
    );
    assert_eq!(granted["result"], "written", "{granted}");
    assert_eq!(granted["metadata"]["sandbox"]["filesystem"], "paths");
    assert_eq!(
        fs::read_to_string(outside.join("entry")).unwrap(),
        "cached\n"
    );
    assert!(!context.project.join("out/entry").exists(), "{granted}");
}
