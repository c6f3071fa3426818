//! The "generated vs hand-written" part of `cargo xtask bench`: the per-call cost through `invoke` of a generated bash and python tool, each against a hand-written tool of the same language doing the same work.
//!
//! The work is upper-casing a string. The generated tools come from the embedded templates
//! (as `toolsmith generate` writes them); the hand-written ones are what a person would
//! write in a few lines: the bash one reads its argument from `TOOLSMITH_ARG_text` (it
//! declares `env_arguments`, so it needs no jq either), the python one parses stdin with
//! `json`. Both declare the sandbox the generated ones declare (no network, a read-only
//! filesystem), since a network namespace costs as much as the tool. The four tools are
//! called in interleaved rounds in the same run, so the ratios compare like with like.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use std::future::IntoFuture as _;
use toolsmith_executor::{Executor, Limits, filtered_env};
use toolsmith_generator::{Request, render, templates};

use toolsmith_registry::{Catalog, Policy, RunConfig, SandboxSettings, Toolsmith};

use crate::CheckFailed;
use crate::measure::render_table;

/// The input of every call, and the answer every tool must give.
const INPUT: &str = "hello bench";
const ANSWER: &str = "HELLO BENCH";

const HAND_WRITTEN_BASH: &str = r#"#!/usr/bin/env bash
case "$1" in
description)
    echo '{"name": "hand_bash", "description": "Upper-cases a text.", "env_arguments": true, "sandbox": {"network": "deny", "filesystem": "read-only"}, "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}'
    ;;
config) echo '{}' ;;
run) printf '%s\n' "$TOOLSMITH_ARG_text" | tr a-z A-Z ;;
esac
"#;

const HAND_WRITTEN_PYTHON: &str = r#"#!/usr/bin/env python3
import json
import sys

if sys.argv[1] == "description":
    print(json.dumps({"name": "hand_python", "description": "Upper-cases a text.", "sandbox": {"network": "deny", "filesystem": "read-only"}, "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}))
elif sys.argv[1] == "config":
    print("{}")
else:
    print(json.dumps(json.load(sys.stdin)["text"].upper()))
"#;

/// The medians per call, in milliseconds.
#[derive(Debug)]
pub(crate) struct GeneratedReport {
    calls: usize,
    generated_bash_ms: f64,
    hand_bash_ms: f64,
    generated_python_ms: f64,
    hand_python_ms: f64,
}

/// A temporary directory that is removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ignored = fs::remove_dir_all(&self.0);
    }
}

fn write_executable(path: &Path, contents: &str) -> anyhow::Result<()> {
    fs::write(path, contents).with_context(|| format!("could not write {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("could not make {} executable", path.display()))
}

/// Writes the generated tool `name` in `language` into `dir`.
fn write_generated(
    dir: &Path,
    name: &str,
    language: &str,
    implementation: &str,
) -> anyhow::Result<()> {
    let request = Request::from_json(&json!({
        "name": name,
        "description": "Upper-cases a text.",
        "parameters": {"text": "The text"},
        "language": language,
        "implementation": implementation,
    }))
    .map_err(|error| CheckFailed(format!("the bench's request was refused: {error}")))?;
    let tera = templates(None)?;
    let rendered = render(&tera, &request, implementation)?;
    write_executable(&dir.join(rendered.file_name), &rendered.contents)
}

/// Calls each of the four tools `calls` times, in interleaved rounds, after a warm-up.
pub(crate) fn measure(
    runtime: &tokio::runtime::Runtime,
    executor: &Arc<Executor>,
    calls: usize,
) -> anyhow::Result<GeneratedReport> {
    let scratch = Scratch(
        std::env::temp_dir().join(format!("toolsmith-bench-generated-{}", std::process::id())),
    );
    let tools_dir = scratch.0.join("tools");
    fs::create_dir_all(&tools_dir).context("could not create the bench's directory")?;
    write_generated(
        &tools_dir,
        "gen_bash",
        "bash",
        "printf '%s\\n' \"$ARG_TEXT\" | tr a-z A-Z",
    )?;
    write_generated(
        &tools_dir,
        "gen_python",
        "python",
        "return args['text'].upper()",
    )?;
    write_executable(&tools_dir.join("hand_bash"), HAND_WRITTEN_BASH)?;
    write_executable(&tools_dir.join("hand_python"), HAND_WRITTEN_PYTHON)?;
    let run_config = RunConfig {
        cwd: scratch.0.clone(),
        // The system directories first: a version manager's shim (pyenv) costs hundreds of
        // milliseconds per start, which would swamp what is measured.
        env: filtered_env(
            &[],
            &[(
                "PATH".to_owned(),
                format!(
                    "/usr/bin:/bin:{}",
                    std::env::var("PATH").unwrap_or_default()
                ),
            )],
        ),
        limits: Limits::recommended(),
        max_timeout: Duration::from_secs(300),
        overrides: Default::default(),
        sandbox: SandboxSettings::unrestricted(),
        project_dir: scratch.0.clone(),
        protected: Vec::new(),
        project_gate: None,
        tool_caches: None,
        read_masks: toolsmith_registry::ReadMasks::none(),
        secrets: Default::default(),
    };
    let catalog = runtime.block_on(
        Toolsmith::from_parts(
            Arc::clone(executor),
            run_config.clone(),
            Policy::allow_all(),
        )
        .discover(&[tools_dir]),
    );
    if let Some(problem) = catalog.problems().first() {
        return Err(CheckFailed(format!(
            "a bench tool did not load: {}: {}",
            problem.path.display(),
            problem.message()
        ))
        .into());
    }
    let names = ["gen_bash", "hand_bash", "gen_python", "hand_python"];
    let toolsmith = Toolsmith::from_parts(
        Arc::clone(executor),
        run_config.clone(),
        Policy::allow_all(),
    );
    let call = |catalog: &Catalog, name: &str| -> anyhow::Result<f64> {
        let started = Instant::now();
        let arguments = json!({"text": INPUT});
        let envelope = runtime.block_on(toolsmith.call(catalog, name, &arguments).into_future())?;
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        let value = serde_json::to_value(&envelope)?;
        if value["result"] != json!(ANSWER) {
            return Err(CheckFailed(format!("bench tool {name} answered {value}")).into());
        }
        Ok(millis)
    };
    let calls = calls.max(2);
    let rounds = calls.min(10);
    eprintln!("bench: generated vs hand-written tools, {calls} calls each");
    for name in names {
        for _ in 0..3 {
            call(&catalog, name)?;
        }
    }
    let mut samples: [Vec<f64>; 4] = Default::default();
    for round in 0..rounds {
        let in_round = calls / rounds + usize::from(round < calls % rounds);
        for (index, name) in names.iter().enumerate() {
            for _ in 0..in_round {
                samples[index].push(call(&catalog, name)?);
            }
        }
    }
    let [generated_bash, hand_bash, generated_python, hand_python] = &mut samples;
    Ok(GeneratedReport {
        calls,
        generated_bash_ms: crate::measure::median(generated_bash),
        hand_bash_ms: crate::measure::median(hand_bash),
        generated_python_ms: crate::measure::median(generated_python),
        hand_python_ms: crate::measure::median(hand_python),
    })
}

impl GeneratedReport {
    /// The section of the bench report.
    pub(crate) fn render(&self) -> String {
        let mut report = format!(
            "generated vs hand-written tools: one call through invoke that upper-cases a string, ms (median of {})\n\
             baseline: a hand-written tool of the same language; ratio = generated / hand-written\n\n",
            self.calls
        );
        let header: Vec<String> = ["language", "hand-written ms", "generated ms", "ratio"]
            .iter()
            .map(|cell| (*cell).to_owned())
            .collect();
        let row = |language: &str, hand: f64, generated: f64| {
            [
                language.to_owned(),
                format!("{hand:.2}"),
                format!("{generated:.2}"),
                format!("{:.2}", generated / hand),
            ]
        };
        let rows = [
            row("bash", self.hand_bash_ms, self.generated_bash_ms),
            row("python", self.hand_python_ms, self.generated_python_ms),
        ];
        report.push_str(&render_table(&header, &rows, 1));
        report
    }
}
