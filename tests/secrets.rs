//! Per-tool secrets (issue 23, acceptance 3): a secret reaches only the tool it is granted to, never a probe or another tool, whatever they read, and the audit log and every log name it, never its value.
//!
//! Every check is made from outside: the value is made by the test (a prefix the hostile
//! fixture knows, a random tail it does not), and after the calls the test greps everything
//! toolsmith wrote (each process's stdout and stderr at `RUST_LOG=debug`, the audit log, every
//! file under the test's directory) for the value. The leak oracle runs after the hostile
//! call and its neighbours.

use std::fs;
use std::path::Path;
use std::process::{Child, Output, Stdio};

use serde_json::{Value, json};

use crate::context::{TestContext, repository_root, shell_tool, write_file};
use crate::leaks::{HostState, Window};

const EMPTY_SCHEMA: &str = r#"{"type": "object"}"#;

/// A value no one can guess: the prefix the hostile fixture looks for, and a random tail.
fn secret_value() -> String {
    let bytes = fs::read("/proc/sys/kernel/random/uuid").unwrap();
    let tail: String = String::from_utf8(bytes)
        .unwrap()
        .trim()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    format!("ghp_TEST{tail}")
}

/// ROT13 of the letters and ROT5 of the digits of `text`, as `tr` computes it in the tool: a
/// tool proves it received the value without printing it.
fn rotated(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'a'..='z' => char::from(b'a' + (c as u8 - b'a' + 13) % 26),
            'A'..='Z' => char::from(b'A' + (c as u8 - b'A' + 13) % 26),
            '0'..='9' => char::from(b'0' + (c as u8 - b'0' + 5) % 10),
            other => other,
        })
        .collect()
}

/// A tool that prints `$VAR` rotated (see [`rotated`]; or `unset`), then sleeps `sleep` seconds holding it.
fn digest_tool(name: &str, variable: &str, sleep: u32) -> String {
    shell_tool(
        name,
        EMPTY_SCHEMA,
        &format!(
            "if [ -n \"${{{variable}+x}}\" ]; then printf '%s\\n' \"${variable}\" | tr 'A-Za-z0-9' 'N-ZA-Mn-za-m5-90-4'; else echo unset; fi; sleep {sleep}"
        ),
    )
}

fn envelope(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not an envelope ({error}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn result_text(envelope: &Value) -> String {
    envelope["result"]
        .as_str()
        .map_or_else(|| envelope.to_string(), str::to_owned)
}

/// Every file under `dir` whose bytes hold `value`.
fn files_holding(dir: &Path, value: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let file_type = entry.file_type().unwrap();
        if file_type.is_dir() {
            found.extend(files_holding(&path, value));
        } else if file_type.is_file()
            && fs::read(&path)
                .unwrap_or_default()
                .windows(value.len())
                .any(|window| window == value.as_bytes())
        {
            found.push(path.display().to_string());
        }
    }
    found
}

/// The user config of the secret tests: `GITHUB_TOKEN` from `GH_PAT`, granted to `alpha`
/// (whose TMPDIR is then a private tmpfs), an audit log, and an `[env] allow` that names
/// the source and the secret's name too (the operator's slip that must not leak it).
fn config(context: &TestContext, extra: &str) -> std::path::PathBuf {
    context.user_config(&format!(
        "[env]\nallow = [\"PATH\", \"HOME\", \"GH_PAT\", \"GITHUB_TOKEN\", \"SCAN_ROOT\"]\n\n[audit]\npath = \"audit.jsonl\"\n\n[secrets.GITHUB_TOKEN]\nenv = \"GH_PAT\"\n\n[tools.alpha]\nsecrets = [\"GITHUB_TOKEN\"]\nfilesystem = \"read-only\"\n{extra}"
    ))
}

fn start(context: &TestContext, value: &str, tool: &str) -> Child {
    context
        .with_tools()
        .env("GH_PAT", value)
        // A variable named like the secret, in toolsmith's environment: not the secret, and
        // not passed to any tool either.
        .env("GITHUB_TOKEN", format!("{value}-decoy"))
        .env("SCAN_ROOT", &context.root)
        .env("RUST_LOG", "debug")
        .args(["run", tool, "--input", "{}"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Tool A granted `GITHUB_TOKEN` receives it; tool B (`c01-secret-thief`, run while A holds
/// the secret) finds it nowhere: not in its environment, any `/proc/*/environ`, `/proc/1`,
/// toolsmith's environ or memory, any TMPDIR or file of toolsmith's; a third tool that merely
/// has `[env] allow` for the source and the name gets neither. The audit log names the secret
/// for A's call only, and no output, log or file holds the value.
#[test]
fn a_secret_reaches_only_the_tool_it_is_granted_to() {
    let context = TestContext::new();
    let value = secret_value();
    let config_path = config(&context, "");
    context.tool("alpha", &digest_tool("alpha", "GITHUB_TOKEN", 4));
    context.tool("gamma", &digest_tool("gamma", "GITHUB_TOKEN", 0));
    context.tool("delta", &digest_tool("delta", "GH_PAT", 0));
    fs::copy(
        repository_root().join("tests/hostile/c01-secret-thief"),
        context.tools.join("c01-secret-thief"),
    )
    .unwrap();
    // The thief tries to leave nothing, but is an attack: the leak oracle's window is ours.
    let window = Window::open(true);
    let before = HostState::capture(&context.tmpdir());
    let mut pids = Vec::new();
    let mut wait = |child: Child| {
        pids.push(child.id());
        child.wait_with_output().unwrap()
    };
    let alpha = start(&context, &value, "alpha");
    // Tool B runs while alpha holds the secret (alpha sleeps 4 s after receiving it).
    std::thread::sleep(std::time::Duration::from_millis(800));
    let thief = wait(start(&context, &value, "c01_secret_thief"));
    let alpha = wait(alpha);
    let gamma = wait(start(&context, &value, "gamma"));
    let delta = wait(start(&context, &value, "delta"));
    let leaks: Vec<String> = pids
        .iter()
        .flat_map(|pid| before.leaks(*pid, &context.root))
        .collect();
    drop(window);
    assert_eq!(leaks, Vec::<String>::new());

    let alpha_envelope = envelope(&alpha);
    assert_eq!(
        result_text(&alpha_envelope).trim(),
        rotated(&value),
        "{alpha_envelope:#}"
    );
    assert_eq!(
        alpha_envelope["metadata"]["sandbox"]["secrets"],
        json!(["GITHUB_TOKEN"])
    );
    for (output, name) in [(&gamma, "gamma"), (&delta, "delta")] {
        let envelope = envelope(output);
        assert_eq!(
            result_text(&envelope).trim(),
            "unset",
            "{name}: {envelope:#}"
        );
        assert!(envelope["metadata"]["sandbox"].get("secrets").is_none());
    }
    let thief_envelope = envelope(&thief);
    let text = result_text(&thief_envelope);
    assert!(!text.contains("ESCAPED"), "{thief_envelope:#}");
    for way in [
        "its own environment",
        "/proc/*/environ",
        "/proc/1/environ",
        "files (TMPDIRs, toolsmith's state)",
        "/proc/self/mountinfo",
        "the host's /proc/*/environ",
    ] {
        assert!(
            text.lines().any(|line| line == format!("held: {way}")),
            "`{way}` was not tried: {thief_envelope:#}"
        );
    }

    let audit: Vec<Value> = fs::read_to_string(config_path.with_file_name("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let secrets_of = |tool: &str| -> Value {
        audit
            .iter()
            .find(|line| line["tool"] == tool)
            .unwrap_or_else(|| panic!("no audit line for {tool}: {audit:#?}"))
            .get("secrets")
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(secrets_of("alpha"), json!(["GITHUB_TOKEN"]));
    for tool in ["c01_secret_thief", "gamma", "delta"] {
        assert_eq!(secrets_of(tool), Value::Null, "{tool}");
    }
    // From outside: the value is in no output of toolsmith but alpha's own digest, no log
    // line at debug level, and no file under the test's directory (the audit log, the
    // config, the caches, every TMPDIR).
    for (output, name) in [
        (&alpha, "alpha"),
        (&thief, "thief"),
        (&gamma, "gamma"),
        (&delta, "delta"),
    ] {
        for stream in [&output.stdout, &output.stderr] {
            let text = String::from_utf8_lossy(stream);
            assert!(!text.contains(&value), "{name} printed the value: {text}");
        }
    }
    assert_eq!(files_holding(&context.root, &value), Vec::<String>::new());
}

/// A probe never receives a secret, even the probe of the tool it is granted to: a tool whose
/// `description` prints its whole environment into its description shows neither the value
/// nor the variable, in `list --json` or `show`.
#[test]
fn probes_never_receive_a_secret() {
    let context = TestContext::new();
    let value = secret_value();
    config(&context, "");
    context.tool(
        "alpha",
        "#!/bin/sh\ncase \"$1\" in\n  description) printf '{\"name\": \"alpha\", \"description\": \"env: %s\", \"input_schema\": {\"type\": \"object\"}}\\n' \"$(env | tr -d '\"\\\\' | tr '\\n' ' ')\" ;;\n  run) env ;;\nesac\n",
    );
    let run = |args: &[&str]| {
        context
            .with_tools()
            .env("GH_PAT", &value)
            .args(args)
            .output()
            .unwrap()
    };
    let list = run(&["list", "--json"]);
    let listing: Value = serde_json::from_slice(&list.stdout).unwrap();
    let description = listing["tools"][0]["description"].as_str().unwrap();
    assert!(description.starts_with("env: "), "{listing:#}");
    assert!(description.contains("PATH="), "{description}");
    assert!(!description.contains(&value), "{description}");
    assert!(!description.contains("GITHUB_TOKEN="), "{description}");
    assert_eq!(
        listing["tools"][0]["secrets"],
        json!({"granted": ["GITHUB_TOKEN"], "declared": []})
    );
    let show = run(&["show", "alpha"]);
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(!shown.contains(&value), "{shown}");
    assert!(shown.contains("granted GITHUB_TOKEN"), "{shown}");
    // The call itself does get it (so the probe's lack of it is the probe's sandbox).
    let call = envelope(&run(&["run", "alpha", "--input", "{}"]));
    assert!(
        result_text(&call).contains(&format!("GITHUB_TOKEN={value}")),
        "{call:#}"
    );
    assert_eq!(files_holding(&context.root, &value), Vec::<String>::new());
}

/// `file` and `command` sources are read at each call; a file is read only as a regular file
/// (never through a symbolic link), and a command's stdout loses one trailing newline.
#[test]
fn file_and_command_sources_are_read_at_call_time() {
    let context = TestContext::new();
    let secrets_dir = context.root.join("secrets");
    write_file(&secrets_dir.join("token"), "from-the-file\n");
    context.user_config(&format!(
        "[secrets.FILE_TOKEN]\nfile = {:?}\n\n[secrets.COMMAND_TOKEN]\ncommand = [\"sh\", \"-c\", \"cat {}/counter; echo x >> {}/counter\"]\n\n[tools.both]\nsecrets = [\"FILE_TOKEN\", \"COMMAND_TOKEN\"]\n",
        secrets_dir.join("token").display().to_string(),
        secrets_dir.display(),
        secrets_dir.display(),
    ));
    write_file(&secrets_dir.join("counter"), "x\n");
    context.tool(
        "both",
        &shell_tool(
            "both",
            EMPTY_SCHEMA,
            "printf '%s|%s' \"$FILE_TOKEN\" \"$COMMAND_TOKEN\"",
        ),
    );
    let call = || {
        envelope(
            &context
                .with_tools()
                .args(["run", "both", "--input", "{}"])
                .output()
                .unwrap(),
        )
    };
    assert_eq!(call()["result"], json!("from-the-file|x"));
    // Both are read again at the next call: nothing is cached.
    write_file(&secrets_dir.join("token"), "rotated");
    assert_eq!(call()["result"], json!("rotated|x\nx"));
}

/// A `[secrets.NAME] file` is toolsmith's to read, for the tools granted it: hidden from every
/// tool (read masks), a tool under `filesystem = "full"` with no grant and the granted tool
/// itself alike, which find the path empty (docs/security.md, "Read masks").
#[test]
fn a_secret_file_is_hidden_from_every_tool() {
    let context = TestContext::new();
    let token = context.root.join("secrets").join("token");
    let value = secret_value();
    write_file(&token, &value);
    context.user_config(&format!(
        "[secrets.FILE_TOKEN]\nfile = {:?}\n\n[tools.granted]\nsecrets = [\"FILE_TOKEN\"]\n\n[tools.thief]\nfilesystem = \"full\"\n",
        token.display().to_string(),
    ));
    let reader = format!(
        "printf 'env='; printf '%s\\n' \"${{FILE_TOKEN:-}}\" | tr 'A-Za-z0-9' 'N-ZA-Mn-za-m5-90-4'; printf 'read=['; cat {:?} 2>&1; printf ']'",
        token.display().to_string()
    );
    for name in ["granted", "thief"] {
        context.tool(name, &shell_tool(name, EMPTY_SCHEMA, &reader));
    }
    let call = |name: &str| {
        let output = context
            .with_tools()
            .args(["run", name, "--input", "{}"])
            .output()
            .unwrap();
        result_text(&envelope(&output))
    };
    let granted = call("granted");
    assert!(
        granted.contains(&format!("env={}", rotated(&value))),
        "the granted tool lost its secret: {granted}"
    );
    for (name, text) in [("granted", granted), ("thief", call("thief"))] {
        assert!(
            text.contains("read=[]") && !text.contains(&value),
            "{name} read the secret's file: {text}"
        );
    }
}

/// Each failing source fails the call with a sentence naming the secret and its source, never
/// a value: a variable unset at start, a missing file, a file that is a symbolic link, a
/// command that fails (whose stdout and stderr are not shown).
#[test]
fn a_source_that_cannot_be_read_fails_the_call_naming_the_secret() {
    let context = TestContext::new();
    let secrets_dir = context.root.join("secrets");
    write_file(&secrets_dir.join("real"), "linked-value");
    write_file(
        &secrets_dir.join("fail.sh"),
        "echo leaked-stderr >&2; printf leaked-stdout; exit 3\n",
    );
    std::os::unix::fs::symlink(secrets_dir.join("real"), secrets_dir.join("link")).unwrap();
    context.user_config(&format!(
        "[secrets.FROM_ENV]\nenv = \"NOT_SET_ANYWHERE\"\n[secrets.MISSING_FILE]\nfile = {:?}\n[secrets.LINKED_FILE]\nfile = {:?}\n[secrets.FAILING]\ncommand = [\"sh\", {:?}]\n\n[tools.t_env]\nsecrets = [\"FROM_ENV\"]\n[tools.t_missing]\nsecrets = [\"MISSING_FILE\"]\n[tools.t_link]\nsecrets = [\"LINKED_FILE\"]\n[tools.t_command]\nsecrets = [\"FAILING\"]\n",
        secrets_dir.join("nothing-here").display().to_string(),
        secrets_dir.join("link").display().to_string(),
        secrets_dir.join("fail.sh").display().to_string(),
    ));
    for name in ["t_env", "t_missing", "t_link", "t_command"] {
        context.tool(name, &shell_tool(name, EMPTY_SCHEMA, "echo ran"));
    }
    let error = |tool: &str| {
        let envelope = envelope(
            &context
                .with_tools()
                .args(["run", tool, "--input", "{}"])
                .output()
                .unwrap(),
        );
        assert_eq!(envelope["error_code"], "SPAWN_FAILED", "{envelope:#}");
        envelope["error"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        error("t_env"),
        "Tool t_env could not be started: secret FROM_ENV: variable NOT_SET_ANYWHERE was not set when toolsmith started."
    );
    let missing = error("t_missing");
    assert!(
        missing.contains("secret MISSING_FILE: cannot read file")
            && missing.contains("nothing-here"),
        "{missing}"
    );
    let linked = error("t_link");
    assert!(
        linked.contains("secret LINKED_FILE: cannot read file") && !linked.contains("linked-value"),
        "{linked}"
    );
    let failing = error("t_command");
    assert_eq!(
        failing,
        "Tool t_command could not be started: secret FAILING: command sh failed (exit status 3)."
    );
    // doctor reports every source that cannot be read, by name and kind, and is a problem.
    let doctor = context
        .with_tools()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let checks = report["secrets"].as_array().unwrap();
    assert_eq!(checks.len(), 4, "{checks:#?}");
    for check in checks {
        assert_eq!(check["status"], "problem", "{check:#}");
    }
    let text = report.to_string();
    assert!(
        !text.contains("leaked-") && !text.contains("linked-value"),
        "{text}"
    );
}

/// A tool that declares a secret it is not granted is refused before it runs, with
/// `metadata.sandbox.denied` naming the key that would grant it; `show` makes the need
/// visible. A granted but undeclared secret is still delivered (the operator's word).
#[test]
fn a_declared_secret_that_is_not_granted_is_policy_denied() {
    let context = TestContext::new();
    context.user_config("[secrets.GITHUB_TOKEN]\nenv = \"GH_PAT\"\n");
    context.tool(
        "needs",
        "#!/bin/sh\ncase \"$1\" in\n  description) echo '{\"name\": \"needs\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"}, \"sandbox\": {\"secrets\": [\"GITHUB_TOKEN\"]}}' ;;\n  run) echo ran ;;\nesac\n",
    );
    let output = context
        .with_tools()
        .env("GH_PAT", "ghp_TESTdenied")
        .args(["run", "needs", "--input", "{}"])
        .output()
        .unwrap();
    let envelope = envelope(&output);
    assert_eq!(envelope["error_code"], "POLICY_DENIED", "{envelope:#}");
    assert_eq!(
        envelope["metadata"]["sandbox"]["denied"],
        json!([{
            "kind": "secret",
            "target": "GITHUB_TOKEN",
            "reason": "not granted to this tool",
            "grant": "[tools.needs] secrets = [\"GITHUB_TOKEN\"]",
        }])
    );
    assert!(
        envelope["error"]
            .as_str()
            .unwrap()
            .contains("[tools.needs] secrets = [\"GITHUB_TOKEN\"]"),
        "{envelope:#}"
    );
    let show = context
        .with_tools()
        .args(["show", "needs", "--json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(
        shown["sandbox"]["declared"]["secrets"],
        json!(["GITHUB_TOKEN"])
    );
    assert_eq!(shown["sandbox"]["secrets"], json!([]));
}

/// `[sandbox] secrets` and a grant of an undefined secret are config errors; a project config
/// that defines or grants a secret is reported and ignored, even with `project_may_loosen`.
#[test]
fn secrets_are_the_user_configs_alone() {
    let context = TestContext::new();
    context.tool("alpha", &digest_tool("alpha", "GITHUB_TOKEN", 0));
    let run = |config: &str| {
        context.user_config(config);
        context
            .with_tools()
            .env("GH_PAT", "ghp_TESTproject")
            .args(["run", "alpha", "--input", "{}"])
            .output()
            .unwrap()
    };
    let refused = run("[sandbox]\nsecrets = [\"GITHUB_TOKEN\"]\n");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("never to every tool"), "{stderr}");
    let undefined = run("[tools.alpha]\nsecrets = [\"GITHUB_TOKEN\"]\n");
    let stderr = String::from_utf8_lossy(&undefined.stderr);
    assert_eq!(undefined.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no [secrets.GITHUB_TOKEN] defines"),
        "{stderr}"
    );

    // The project is trusted and may loosen, and still cannot define or grant a secret.
    context.own_project();
    write_file(
        &context.project.join(".toolsmith/config.toml"),
        "[secrets.GITHUB_TOKEN]\nenv = \"GH_PAT\"\n\n[tools.alpha]\nsecrets = [\"GITHUB_TOKEN\"]\n",
    );
    let output = context
        .with_tools()
        .env("GH_PAT", "ghp_TESTproject")
        .args(["run", "alpha", "--input", "{}"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("secrets.GITHUB_TOKEN is ignored")
            && stderr.contains("tools.alpha.secrets is ignored"),
        "{stderr}"
    );
    assert_eq!(result_text(&envelope(&output)).trim(), "unset");
}

/// Issue 22, finding 1, kept: a manifest's `${VAR}` expands only from what its tool receives.
/// A manifest granted `GITHUB_TOKEN` expands `${GITHUB_TOKEN}`; one that is not granted it
/// expands neither `${GITHUB_TOKEN}` nor the source `${GH_PAT}` (though `[env] allow` names
/// both): they are empty.
#[test]
fn a_manifest_expands_only_a_secret_it_is_granted() {
    let context = TestContext::new();
    let value = secret_value();
    config(&context, "[tools.granted]\nsecrets = [\"GITHUB_TOKEN\"]\n");
    let manifest = |name: &str| {
        format!(
            "---\nname: {name}\ndescription: Expands the secret\nenv:\n  COPY: \"[${{GITHUB_TOKEN}}][${{GH_PAT}}]\"\n---\nprintf '%s\\n' \"$COPY\" | tr 'A-Za-z0-9' 'N-ZA-Mn-za-m5-90-4'\n"
        )
    };
    write_file(&context.tools.join("granted.md"), &manifest("granted"));
    write_file(&context.tools.join("other.md"), &manifest("other"));
    let run = |tool: &str| {
        let output = context
            .with_tools()
            .env("GH_PAT", &value)
            .env("GITHUB_TOKEN", "decoy")
            .args(["run", tool, "--input", "{}"])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&output.stdout).contains(&value),
            "{tool} printed the value"
        );
        result_text(&envelope(&output))
    };
    assert_eq!(run("granted").trim(), rotated(&format!("[{value}][]")));
    assert_eq!(run("other").trim(), "[][]");
}
