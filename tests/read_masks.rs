//! Issue 23, read masks: with no config at all (plain `--tools-dir`, as root, `filesystem =
//! "full"`), a tool reads none of the credentials of the homes it could read nor toolsmith's
//! own state, changes none of what governs later calls, reaches no other call's TMPDIR, and
//! nothing under `/proc/1` reveals or changes toolsmith. Each attack is a hostile program
//! (`tests/hostile/c*`, with a header saying what it tries) checked from outside, and the leak
//! oracle runs after each call.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::context::TestContext;
use crate::leaks::{HostState, Window};

/// The corpus directory in the repository.
fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hostile")
}

/// True when the test runs as root, the case the masks exist for (a root tool reads every
/// file); otherwise says so loudly (or fails under `TOOLSMITH_REQUIRE_BACKENDS`).
fn as_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let message = format!("WARNING: {test} needs root (a tool that reads every file); SKIPPED");
    assert!(
        std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
        "{message}"
    );
    #[expect(clippy::print_stderr, reason = "a skipped test must say so loudly")]
    {
        eprintln!("{message}");
    }
    false
}

/// A fake home with a secret in each credential location and toolsmith's own state, and the
/// corpus file `file` in the tools directory (whose `.history.git` holds a secret too).
fn world(file: &str) -> TestContext {
    let context = TestContext::new();
    fs::copy(corpus().join(file), context.tools.join(file)).unwrap();
    let home = context.root.join("home");
    for (path, text) in [
        (".ssh/id_ed25519", "SECRET ssh key\n"),
        (".aws/credentials", "SECRET aws\n"),
        (".netrc", "machine a login b password SECRET\n"),
        (".docker/config.json", "{\"auths\": \"SECRET\"}\n"),
        (".cargo/credentials.toml", "token = \"SECRET\"\n"),
        (
            ".local/state/toolsmith/trust.json",
            "{\"version\": 1, \"trusted\": [{\"path\": \"/SECRET-trust\", \"config\": \"absent\", \"trusted_at\": 0}]}\n",
        ),
    ] {
        let path = home.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    context.user_config("# SECRET user config\n");
    let history = context.tools.join(".history.git");
    fs::create_dir_all(&history).unwrap();
    fs::write(history.join("SECRET-notes"), "SECRET history\n").unwrap();
    context
}

/// `toolsmith --tools-dir TOOLS run TOOL` (no config but the user config `world` wrote), with
/// the leak oracle around it.
fn run(context: &TestContext, tool: &str) -> (Value, Output) {
    let window = Window::open(true);
    let before = HostState::capture(&context.tmpdir());
    let child = context
        .with_tools()
        .args(["run", tool, "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    let leaks = before.leaks(pid, &context.root);
    drop(window);
    assert!(leaks.is_empty(), "the call left: {leaks:#?}");
    let envelope: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not an envelope ({error}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (envelope, output)
}

/// The attempts of `envelope`'s result, by line: `(held, escaped)`.
fn verdicts(envelope: &Value) -> (Vec<String>, Vec<String>) {
    let text = envelope["result"].as_str().unwrap_or_default();
    let held = text
        .lines()
        .filter_map(|line| line.strip_prefix("held: "))
        .map(str::to_owned)
        .collect();
    let escaped = text
        .lines()
        .filter_map(|line| line.strip_prefix("ESCAPED: "))
        .map(str::to_owned)
        .collect();
    (held, escaped)
}

/// Every file the attacks target is as the test wrote it, and nothing was planted or moved.
fn assert_untouched(context: &TestContext) {
    let home = context.root.join("home");
    assert!(home.is_dir(), "the home was moved");
    assert_eq!(
        fs::read_to_string(home.join(".ssh/id_ed25519")).unwrap(),
        "SECRET ssh key\n"
    );
    assert_eq!(
        fs::read_to_string(home.join(".config/toolsmith/config.toml")).unwrap(),
        "# SECRET user config\n"
    );
    assert!(
        fs::read_to_string(home.join(".local/state/toolsmith/trust.json"))
            .unwrap()
            .contains("SECRET-trust")
    );
    assert_eq!(
        fs::read_to_string(context.tools.join(".history.git/SECRET-notes")).unwrap(),
        "SECRET history\n"
    );
    for planted in ["netrc-link", ".cache/toolsmith/planted"] {
        assert!(!home.join(planted).exists(), "{planted} was planted");
    }
}

#[test]
fn c01_credentials_and_toolsmiths_state_are_out_of_reach_with_no_config() {
    if !as_root("c01") {
        return;
    }
    let context = world("c01-read-masks");
    let (envelope, output) = run(&context, "c01_read_masks");
    assert_eq!(envelope["tool_success"], json!(true), "{envelope:#}");
    assert_eq!(output.status.code(), Some(0));
    let (held, escaped) = verdicts(&envelope);
    assert_eq!(escaped, Vec::<String>::new(), "{envelope:#}");
    assert_eq!(held.len(), 27, "{envelope:#}");
    assert!(
        !envelope["result"].as_str().unwrap().contains("SECRET"),
        "{envelope:#}"
    );
    let hidden = envelope["metadata"]["sandbox"]["hidden"].as_u64().unwrap();
    assert!(hidden >= 9, "{envelope:#}");
    assert_untouched(&context);
}

/// The credential masks are what `[sandbox] profile = "compat"` turns off: the same attacks
/// then read the fake home's key (so the test above can fail), while toolsmith's own state
/// stays hidden.
#[test]
fn c01_under_compat_only_toolsmiths_state_stays_hidden() {
    if !as_root("c01 compat") {
        return;
    }
    let context = world("c01-read-masks");
    context.user_config("# SECRET user config\n[sandbox]\nprofile = \"compat\"\n");
    let (envelope, _) = run(&context, "c01_read_masks");
    let (held, escaped) = verdicts(&envelope);
    for attempt in ["ssh key", "aws credentials", "netrc", "hard link"] {
        assert!(escaped.iter().any(|line| line == attempt), "{envelope:#}");
    }
    for attempt in [
        "user config",
        "trust store",
        "history",
        "rewrite user config",
        "plant trust store",
        "oom_score_adj",
        "proc 1 cmdline",
        "move the home",
    ] {
        assert!(held.iter().any(|line| line == attempt), "{envelope:#}");
    }
    fs::remove_file(context.root.join("home/netrc-link")).unwrap();
}
