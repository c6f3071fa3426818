//! The generator part of `cargo xtask bench`: from a `custom_tool` request to a registered tool (a bash tool with one test case), against running that test case alone through the registry.
//!
//! The pipeline runs the registry's probe, the test case, the missing-argument call, and
//! writes the file and a git commit; the baseline is one `invoke` of the registered tool with
//! the test case's input. Both are timed in the same run, each repetition in a fresh tools
//! directory, and reported as medians and their ratio.
//!
//! The baseline's executor is warm (earlier sections used it), so the medians are of warm
//! generations too: the first request of the process, which also compiles the request
//! schema and the template once, is reported on a row of its own and left out of them. A
//! few repetitions are taken even in `--quick` mode: one costs tens of milliseconds, and a
//! single sample of a few sandboxed processes on a shared machine says little.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::{Executor, Limits, filtered_env};
use toolsmith_generator::{GeneratorConfig, Status, generate};
use toolsmith_registry::{Policy, RunConfig, SandboxSettings, discover, invoke_named};

use crate::CheckFailed;
use crate::measure::render_table;

/// The medians, in milliseconds.
#[derive(Debug)]
pub(crate) struct GenerateReport {
    repetitions: usize,
    first_generate_ms: f64,
    generate_ms: f64,
    test_case_ms: f64,
}

/// The fewest repetitions measured, whatever the settings ask (`--quick` asks for one).
const MIN_REPETITIONS: usize = 5;

/// A temporary directory that is removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ignored = fs::remove_dir_all(&self.0);
    }
}

/// Generates the tool once to warm up, then `repetitions` times (at least
/// [`MIN_REPETITIONS`]), each in a new directory, and runs its test case alone after each.
pub(crate) fn measure(
    runtime: &tokio::runtime::Runtime,
    executor: &Arc<Executor>,
    repetitions: usize,
) -> anyhow::Result<GenerateReport> {
    let scratch = Scratch(
        std::env::temp_dir().join(format!("toolsmith-bench-generate-{}", std::process::id())),
    );
    fs::create_dir_all(&scratch.0).context("could not create the bench's directory")?;
    let run_config = RunConfig {
        cwd: scratch.0.clone(),
        env: filtered_env(&["PATH".to_owned()], &[]),
        limits: Limits::recommended(),
        max_timeout: Duration::from_secs(300),
        overrides: Default::default(),
        sandbox: SandboxSettings::unrestricted(),
        project_dir: scratch.0.clone(),
        protected: Vec::new(),
        project_gate: None,
        tool_caches: None,
        secrets: Default::default(),
    };
    let input = json!({"text": "hello bench"});
    let request = json!({
        "name": "shout_text",
        "description": "Upper-cases a text.",
        "parameters": {"text": "The text"},
        "language": "bash",
        "implementation": "printf '%s\\n' \"$ARG_TEXT\" | tr a-z A-Z",
        "tests": [{"input": input, "expect": {"result": "HELLO BENCH"}}],
    });
    eprintln!("bench: generate a bash tool with one test case, {repetitions} repetitions");
    // Nothing exists yet: the request's name is free.
    let existing = runtime.block_on(discover(executor, &[], &run_config));
    let repetitions = repetitions.max(MIN_REPETITIONS);
    let mut first_generate_ms = None;
    let mut generate_samples = Vec::new();
    let mut test_case_samples = Vec::new();
    // Repetition 0 is the first request of the process, reported apart.
    for repetition in 0..=repetitions {
        let tools_dir = scratch.0.join(format!("tools-{repetition}"));
        let config = GeneratorConfig {
            tools_dir: tools_dir.clone(),
            drafts_dir: scratch.0.join("drafts"),
            templates_dir: None,
            may_replace: Vec::new(),
        };
        let started = Instant::now();
        let report = runtime.block_on(generate(
            executor,
            &request,
            &existing,
            None,
            &config,
            &run_config,
        ))?;
        let generate_ms = started.elapsed().as_secs_f64() * 1000.0;
        if repetition == 0 {
            first_generate_ms = Some(generate_ms);
        } else {
            generate_samples.push(generate_ms);
        }
        if report.status != Status::Registered {
            return Err(CheckFailed(format!(
                "the bench's request was not registered: {}",
                serde_json::to_string(&report).unwrap_or_default()
            ))
            .into());
        }
        let catalog = runtime.block_on(discover(executor, &[tools_dir], &run_config));
        let started = Instant::now();
        let envelope = runtime.block_on(invoke_named(
            executor,
            &catalog,
            "shout_text",
            &input,
            &run_config,
            &Policy::allow_all(),
        ))?;
        if repetition > 0 {
            test_case_samples.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        if !envelope.tool_success() {
            return Err(CheckFailed("the generated tool's test case failed".to_owned()).into());
        }
    }
    Ok(GenerateReport {
        repetitions,
        first_generate_ms: first_generate_ms.unwrap_or_default(),
        generate_ms: crate::measure::median(&mut generate_samples),
        test_case_ms: crate::measure::median(&mut test_case_samples),
    })
}

impl GenerateReport {
    /// The section of the bench report.
    pub(crate) fn render(&self) -> String {
        let mut report = format!(
            "toolsmith generator bench: a bash tool with one test case, ms (median of {})\n\
             baseline: its test case alone (one invoke of the registered tool); ratio = median / baseline\n\
             the first request of the process (cold: the request schema and the template are compiled) is apart\n\n",
            self.repetitions
        );
        let header: Vec<String> = ["run", "median ms", "ratio to baseline"]
            .iter()
            .map(|cell| (*cell).to_owned())
            .collect();
        let row = |label: &str, millis: f64| {
            [
                label.to_owned(),
                format!("{millis:.1}"),
                format!("{:.2}", millis / self.test_case_ms),
            ]
        };
        let rows = [
            row("the test case alone", self.test_case_ms),
            row(
                "request to registered (render, probe, test, checks, rename, commit)",
                self.generate_ms,
            ),
            row(
                "the first request of the process, one sample",
                self.first_generate_ms,
            ),
        ];
        report.push_str(&render_table(&header, &rows, 1));
        report
    }
}
