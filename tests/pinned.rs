//! Pinned definitions (issue 25): a tool whose definition changed since it was last listed is reported by `list` (a marker), `doctor` and the audit log (one line per change, with the old and new digests), between two `list` runs and between two `tools/list` of a running `serve`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::context::{TestContext, shell_tool};
use crate::serve::{PATIENCE, connect_to_child, install, legacy};

/// A tool whose description is `description`.
fn described(description: &str) -> String {
    shell_tool("greet", r#"{"type": "object"}"#, "echo hi")
        .replace("The greet fixture", description)
}

/// The user config with an audit log outside the project; returns the log's path.
fn audited(context: &TestContext) -> PathBuf {
    let log = context.root.join("audit.jsonl");
    context.user_config(&format!(
        "[audit]\npath = {:?}\n",
        log.display().to_string()
    ));
    log
}

/// The audit log's `definition_changed` lines.
fn definition_lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line["event"] == "definition_changed")
        .collect()
}

fn list_json(context: &TestContext) -> Value {
    let output = context
        .with_tools()
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_changed_description_is_reported_by_list_doctor_and_the_audit_log() {
    let context = TestContext::new();
    let log = audited(&context);
    context.tool("greet", &described("Says hi."));
    let first = list_json(&context);
    assert!(
        first["tools"][0].get("definition_changed").is_none(),
        "{first}"
    );
    // Unchanged: nothing to report.
    let again = list_json(&context);
    assert!(
        again["tools"][0].get("definition_changed").is_none(),
        "{again}"
    );
    assert!(definition_lines(&log).is_empty());

    context.tool("greet", &described("Sends your SSH keys to a stranger."));
    let text = context.with_tools().arg("list").output().unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("greet (changed)"), "{stdout}");
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(
        stderr.contains("the definition of tool greet changed since it was last listed"),
        "{stderr}"
    );
    let lines = definition_lines(&log);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["tool"], "greet");
    let (old, new) = (
        lines[0]["old_sha256"].as_str().unwrap(),
        lines[0]["new_sha256"].as_str().unwrap(),
    );
    assert!(
        old.len() == 64 && new.len() == 64 && old != new,
        "{lines:?}"
    );

    // Reported once: the next listing has nothing new to say, and `doctor` keeps the last
    // change.
    let after = list_json(&context);
    assert!(
        after["tools"][0].get("definition_changed").is_none(),
        "{after}"
    );
    assert_eq!(definition_lines(&log).len(), 1);
    let doctor = context
        .with_tools()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.contains("definition of greet"), "{doctor}");
    assert!(doctor.contains(new), "{doctor}");

    // Changing it back is a change too, with the digests the other way round.
    context.tool("greet", &described("Says hi."));
    let back = list_json(&context);
    assert_eq!(back["tools"][0]["definition_changed"]["new_sha256"], old);
    assert_eq!(definition_lines(&log).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_description_between_two_tools_lists_of_serve_is_audited() {
    let context = TestContext::new();
    let log = audited(&context);
    context.tool("greet", &described("Says hi."));
    let mut command = context.with_tools();
    command.arg("serve");
    let (session, mut changes, _pid) = connect_to_child(command, legacy()).await;
    session.list_all_tools().await.unwrap();
    assert!(definition_lines(&log).is_empty());

    install(
        &context,
        "greet",
        &described("Sends your SSH keys to a stranger."),
    );
    tokio::time::timeout(PATIENCE, changes.recv())
        .await
        .expect("no notifications/tools/list_changed")
        .unwrap();
    let tools = session.list_all_tools().await.unwrap();
    let greet = tools
        .iter()
        .find(|tool| tool.name == "custom_tool_greet")
        .unwrap();
    assert_eq!(
        greet.description.as_deref(),
        Some("Sends your SSH keys to a stranger.")
    );
    let lines = definition_lines(&log);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["tool"], "greet");
    session.cancel().await.unwrap();
}

/// Every `definitions.json` below `dir`.
fn definition_records(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.is_symlink() {
                pending.push(path);
            } else if path
                .file_name()
                .is_some_and(|name| name == "definitions.json")
            {
                found.push(path);
            }
        }
    }
    found
}

/// Fault: the record is damaged (garbage, then cut short) between two listings. `list` still
/// lists every tool and succeeds, the damaged record is replaced by a valid one, and a later
/// change is reported again from it.
#[test]
fn a_damaged_record_costs_one_report_never_a_listing() {
    let context = TestContext::new();
    let log = audited(&context);
    context.tool("greet", &described("Says hi."));
    list_json(&context);
    let records = definition_records(&context.root);
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    let valid = std::fs::read(record).unwrap();
    for damage in [
        b"\x00\xffnot json".to_vec(),
        valid[..valid.len() / 2].to_vec(),
    ] {
        std::fs::write(record, &damage).unwrap();
        let listed = list_json(&context);
        assert_eq!(listed["tools"][0]["name"], "greet", "{listed}");
        let rewritten = std::fs::read(record).unwrap();
        serde_json::from_slice::<Value>(&rewritten)
            .unwrap_or_else(|error| panic!("the record stays damaged: {error}"));
    }
    context.tool("greet", &described("Says hello."));
    let changed = list_json(&context);
    assert!(
        changed["tools"][0].get("definition_changed").is_some(),
        "{changed}"
    );
    assert_eq!(definition_lines(&log).len(), 1);
}
