//! `toolsmith doctor`: names the backend and every feature check, in text and JSON.

use serde_json::Value;

use crate::context::TestContext;

const BACKENDS: &[&str] = &["cgroup", "pidns", "subreaper", "pgroup"];

#[test]
fn doctor_text() {
    let context = TestContext::new();
    let output = context.command().arg("doctor").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let backend = stdout
        .lines()
        .find_map(|line| line.strip_prefix("backend: "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap();
    assert!(BACKENDS.contains(&backend), "{stdout}");
    assert!(stdout.contains("kernel:"), "{stdout}");
    assert!(stdout.contains("cgroup.kill"), "{stdout}");
    assert!(stdout.contains("config file: none"), "{stdout}");
    assert!(stdout.ends_with("no problems found\n"), "{stdout}");
}

#[test]
fn doctor_json() {
    let context = TestContext::new();
    context.project_file(".toolsmith/config.toml", "[executor]\nbackend = \"auto\"\n");
    let output = context
        .command()
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        BACKENDS.contains(&report["backend"].as_str().unwrap()),
        "{report}"
    );
    let features = report["features"].as_array().unwrap();
    assert!(!features.is_empty());
    for feature in features {
        assert!(feature["name"].is_string(), "{feature}");
        assert!(feature["available"].is_boolean(), "{feature}");
        assert!(feature["detail"].is_string(), "{feature}");
    }
    assert_eq!(report["config_file"], "./.toolsmith/config.toml");
    let layers: Vec<&str> = report["tool_dirs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|dir| dir["layer"].as_str().unwrap())
        .collect();
    assert_eq!(layers, ["system", "user", "project"], "{report}");
    assert_eq!(
        report["tool_dirs"][2]["path"],
        context
            .project
            .join(".toolsmith/tools")
            .display()
            .to_string()
    );
    assert_eq!(report["tool_dirs"][2]["exists"], false);
    assert_eq!(
        report["cache"]["file"],
        context
            .root
            .join("home/.cache/toolsmith/discovery.json")
            .display()
            .to_string()
    );
}

#[test]
fn doctor_pinned_backend() {
    let context = TestContext::new();
    let output = context
        .command()
        .env("TOOLSMITH_BACKEND", "pgroup")
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["backend"], "pgroup");
}
