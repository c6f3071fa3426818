//! The front door, as an embedder uses it: `Toolsmith` discovers `examples/tools` and calls
//! its tools; every refusal is an envelope from the one call path; `RunConfig::new` keeps the
//! documented defaults.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolsmith_registry::{
    ErrorCode, Limits, Policy, RunConfig, SandboxProfile, ToolName, Toolsmith,
};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tools")
}

fn toolsmith() -> Toolsmith {
    Toolsmith::new().unwrap()
}

#[tokio::test]
async fn discovers_and_calls_by_plain_and_exposed_name_and_by_tool() {
    let toolsmith = toolsmith();
    let catalog = toolsmith.discover(&[examples()]).await;
    let arguments = json!({"name": "Ada"});
    for name in ["hello", "custom_tool_hello"] {
        let envelope = toolsmith.call(&catalog, name, &arguments).await.unwrap();
        assert_eq!(
            serde_json::to_value(&envelope).unwrap()["result"],
            "Hello, Ada!",
            "{name}: {envelope:?}"
        );
    }
    let tool = catalog.get(&ToolName::new("hello").unwrap()).unwrap();
    let outcomes = toolsmith.run_tests(tool).await.unwrap();
    assert!(!outcomes.is_empty() && outcomes.iter().all(|outcome| outcome.passed()));
}

#[tokio::test]
async fn every_refusal_is_an_envelope_and_runs_nothing() {
    let toolsmith = toolsmith();
    let catalog = toolsmith.discover(&[examples()]).await;
    let code = |envelope: &toolsmith_registry::Envelope| {
        assert!(envelope.metadata.exit_code.is_none(), "{envelope:?}");
        envelope.error_code()
    };
    let unknown = toolsmith
        .call(&catalog, "no_such_tool", &json!({}))
        .await
        .unwrap();
    assert_eq!(code(&unknown), Some(ErrorCode::ToolNotFound));
    let invalid = toolsmith
        .call(&catalog, "hello", &json!({"age": "old"}))
        .await
        .unwrap();
    assert_eq!(code(&invalid), Some(ErrorCode::InvalidParams));

    // A policy that disables the tool: a catalog discovered under it has the file denied,
    // and a tool in hand from another catalog is refused at the call.
    let denying = toolsmith.clone().with_policy(Policy {
        disabled: vec![ToolName::new("hello").unwrap()],
        ..Policy::allow_all()
    });
    let denied_catalog = denying.discover(&[examples()]).await;
    let denied = denying
        .call(&denied_catalog, "hello", &json!({"name": "Ada"}))
        .await
        .unwrap();
    assert_eq!(code(&denied), Some(ErrorCode::PolicyDenied));
    let tool = catalog.get(&ToolName::new("hello").unwrap()).unwrap();
    let denied = denying
        .call_tool(tool, &json!({"name": "Ada"}))
        .await
        .unwrap();
    assert_eq!(code(&denied), Some(ErrorCode::PolicyDenied));
    // The original value is untouched by the builder of its clone.
    assert_eq!(toolsmith.policy(), &Policy::allow_all());
}

#[test]
fn run_config_defaults_are_the_documented_ones() {
    let config = RunConfig::new("relative/project");
    assert!(config.cwd.is_absolute() && config.cwd.ends_with("relative/project"));
    assert_eq!(config.project_dir, config.cwd);
    let names: Vec<String> = config
        .env
        .iter()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|name| ["PATH", "HOME", "USER", "LANG"].contains(&name.as_str())),
        "{names:?}"
    );
    assert_eq!(config.limits, Limits::recommended());
    assert_eq!(config.max_timeout, std::time::Duration::from_secs(300));
    assert_eq!(config.sandbox.profile, SandboxProfile::Default);
    assert!(config.overrides.is_empty() && config.project_gate.is_none());
    assert!(config.tool_caches.is_none());
}

#[tokio::test]
async fn progress_reaches_the_embedder() {
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("reporter");
    std::fs::write(
        &tool,
        "#!/bin/sh\ncase \"$1\" in\n  description) echo '{\"name\": \"reporter\", \"description\": \"Reports progress\", \"input_schema\": {\"type\": \"object\"}}' ;;\n  run) echo '{\"progress\": 1, \"total\": 2}' >&\"$TOOLSMITH_PROGRESS_FD\"; echo done ;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let toolsmith = toolsmith().with_project_dir(dir.path());
    let catalog = toolsmith.discover(&[dir.path()]).await;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let envelope = toolsmith
        .call(&catalog, "reporter", &Value::Object(Default::default()))
        .with_progress(sender)
        .await
        .unwrap();
    assert!(envelope.tool_success(), "{envelope:?}");
    let line = receiver.recv().await.expect("one progress line");
    let progress = toolsmith_registry::Progress::parse(&line).unwrap();
    assert!((progress.progress - 1.0).abs() < f64::EPSILON);
}
