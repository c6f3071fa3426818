//! The generator part of `cargo xtask bench` (`--only generate` alone): from a `custom_tool` request to a tool registered in a live registry, with 0 and with 100 other tools in the catalog, on the pipeline's predicted-answers path and on its plain one, against running the test case alone.
//!
//! Each generation registers a bash tool with one test case, as `serve` does for
//! `custom_tool`: the registry's probe, the test case, the missing-argument call, the file, a
//! git commit, and the live registry told. Issue 25: registration hands the live registry the
//! record of the staged probe, so its time should not grow with the catalog (target: the
//! 100-tool catalog within 1.2 times the empty one).
//!
//! The pipeline can check a tool rendered from an embedded template with the answers it
//! predicts for the file's `description` and `config` (its test runs start with nothing
//! probed, and the one probe of the final file confirms the prediction), or, as for an
//! overriding template, after discovery and a `config` probe (the plain path, which probes
//! the file twice).
//! The plain path is measured with an overriding template that is the embedded one.
//!
//! The four variants run in interleaved rounds, in rotating order, each with its own live
//! registry and tools directory; the baseline is one `invoke` of a registered tool (the one
//! the report returns) with the test case's input. The first request of the process (which
//! compiles the request schema and the template once) is a row of its own. A few
//! repetitions are taken even in `--quick` mode: one costs tens of milliseconds, and a single
//! sample of a few sandboxed processes on a shared machine says little.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use serde_json::{Value, json};
use std::future::IntoFuture as _;
use toolsmith_executor::{Executor, Limits, filtered_env};
use toolsmith_generator::{EMBEDDED_TEMPLATES, GeneratorConfig, Request, Status, generate};
use toolsmith_registry::{
    DiscoveryCache, LayerDir, LiveRegistry, Policy, RunConfig, SandboxSettings, Toolsmith, Watching,
};

use crate::CheckFailed;
use crate::measure::render_table;

/// The tools of the large catalog.
const CATALOG: usize = 100;

/// The fewest repetitions measured per variant, whatever the settings ask.
const MIN_REPETITIONS: usize = 7;

/// The medians, in milliseconds.
#[derive(Debug)]
pub(crate) struct GenerateReport {
    repetitions: usize,
    first_generate_ms: f64,
    /// By variant, in [`VARIANTS`] order.
    generate_ms: Vec<f64>,
    test_case_ms: f64,
}

/// One way of generating: the catalog's size and whether the predicted answers are used.
#[derive(Debug, Clone, Copy)]
struct Variant {
    catalog: usize,
    predicted: bool,
}

const VARIANTS: [Variant; 4] = [
    Variant {
        catalog: 0,
        predicted: true,
    },
    Variant {
        catalog: CATALOG,
        predicted: true,
    },
    Variant {
        catalog: 0,
        predicted: false,
    },
    Variant {
        catalog: CATALOG,
        predicted: false,
    },
];

/// A temporary directory that is removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ignored = fs::remove_dir_all(&self.0);
    }
}

/// A variant's world: its live registry (over its catalog and its tools directory) and the
/// generator's configuration.
struct World {
    live: LiveRegistry,
    config: GeneratorConfig,
}

/// Writes `size` Kodelet tools into `dir`, an hour old, so the cache trusts their records.
fn write_catalog(dir: &Path, size: usize) -> anyhow::Result<()> {
    fs::create_dir_all(dir).context("could not create the catalog")?;
    for index in 0..size {
        let name = format!("catalog_{index:03}");
        let path = dir.join(&name);
        let script = format!(
            "#!/bin/sh\ncase \"$1\" in\n  description) printf '%s\\n' '{{\"name\": \"{name}\", \"description\": \"A catalog tool\", \"input_schema\": {{\"type\": \"object\"}}}}' ;;\n  run) echo ran ;;\n  *) exit 2 ;;\nesac\n"
        );
        fs::write(&path, script).context("could not write a catalog tool")?;
        let file = fs::File::options()
            .write(true)
            .open(&path)
            .context("could not open a catalog tool")?;
        file.set_permissions(fs::Permissions::from_mode(0o755))
            .context("could not make a catalog tool executable")?;
        file.set_modified(SystemTime::now() - Duration::from_secs(3600))
            .context("could not date a catalog tool")?;
    }
    Ok(())
}

fn world(
    runtime: &tokio::runtime::Runtime,
    executor: &Arc<Executor>,
    scratch: &Path,
    variant: Variant,
    run_config: &RunConfig,
) -> anyhow::Result<World> {
    let label = format!("{}-{}", variant.catalog, variant.predicted);
    let catalog = scratch.join(format!("catalog-{label}"));
    write_catalog(&catalog, variant.catalog)?;
    let tools_dir = scratch.join(format!("tools-{label}"));
    fs::create_dir_all(&tools_dir).context("could not create a tools directory")?;
    let templates_dir = if variant.predicted {
        None
    } else {
        let dir = scratch.join("templates");
        fs::create_dir_all(&dir).context("could not create the templates directory")?;
        for (name, text) in EMBEDDED_TEMPLATES {
            fs::write(dir.join(name), text).context("could not write a template")?;
        }
        Some(dir)
    };
    let toolsmith = Toolsmith::from_parts(
        Arc::clone(executor),
        run_config.clone(),
        Policy::allow_all(),
    );
    let live = runtime.block_on(toolsmith.live(
        LayerDir::explicit(&[catalog, tools_dir.clone()]),
        DiscoveryCache::in_memory(),
        Watching::Events,
    ))?;
    let listed = live.snapshot().tools().len();
    if listed != variant.catalog {
        return Err(CheckFailed(format!(
            "the bench's catalog lists {listed} tools, not {}",
            variant.catalog
        ))
        .into());
    }
    Ok(World {
        live,
        config: GeneratorConfig {
            tools_dir,
            drafts_dir: scratch.join("drafts"),
            templates_dir,
            may_replace: Vec::new(),
        },
    })
}

/// The request of repetition `index`: a new name each time.
fn request(index: usize, input: &Value) -> anyhow::Result<Request> {
    Request::from_json(&json!({
        "name": format!("shout_text_{index}"),
        "description": "Upper-cases a text.",
        "parameters": {"text": "The text"},
        "language": "bash",
        "implementation": "printf '%s\\n' \"$ARG_TEXT\" | tr a-z A-Z",
        "tests": [{"input": input, "expect": {"result": "HELLO BENCH"}}],
    }))
    .context("the bench's request is invalid")
}

/// Generates one request in `world`, returns its time in milliseconds and the registered
/// tool's test case time.
fn generate_once(
    runtime: &tokio::runtime::Runtime,
    executor: &Arc<Executor>,
    world: &World,
    request: &Request,
    input: &Value,
    run_config: &RunConfig,
) -> anyhow::Result<(f64, f64)> {
    let existing = world.live.snapshot();
    let started = Instant::now();
    let toolsmith = Toolsmith::from_parts(
        Arc::clone(executor),
        run_config.clone(),
        Policy::allow_all(),
    );
    let report = runtime.block_on(generate(
        &toolsmith,
        request,
        &existing,
        Some(&world.live),
        &world.config,
    ))?;
    let generate_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (Status::Registered, Some(tool)) = (report.status, &report.tool) else {
        return Err(CheckFailed(format!(
            "the bench's request was not registered and served: {}",
            serde_json::to_string(&report).unwrap_or_default()
        ))
        .into());
    };
    let started = Instant::now();
    let envelope = runtime.block_on(toolsmith.call_tool(tool, input).into_future())?;
    let test_case_ms = started.elapsed().as_secs_f64() * 1000.0;
    if !envelope.tool_success() {
        return Err(CheckFailed("the generated tool's test case failed".to_owned()).into());
    }
    Ok((generate_ms, test_case_ms))
}

/// Generates once to warm up, then three times `repetitions` (at least [`MIN_REPETITIONS`]) per
/// variant in interleaved rounds, and runs each registered tool's test case alone.
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
        read_masks: toolsmith_registry::ReadMasks::none(),
        secrets: Default::default(),
    };
    let input = json!({"text": "hello bench"});
    let repetitions = (3 * repetitions).max(MIN_REPETITIONS);
    eprintln!(
        "bench: generate a bash tool with one test case into a live registry of 0 and {CATALOG} tools, {repetitions} repetitions per variant"
    );
    let worlds = VARIANTS
        .iter()
        .map(|variant| world(runtime, executor, &scratch.0, *variant, &run_config))
        .collect::<anyhow::Result<Vec<World>>>()?;
    let mut index = 0;
    let mut next_request = || {
        index += 1;
        request(index, &input)
    };
    let (first_generate_ms, _) = generate_once(
        runtime,
        executor,
        &worlds[0],
        &next_request()?,
        &input,
        &run_config,
    )?;
    let mut samples = vec![Vec::new(); VARIANTS.len()];
    let mut test_case_samples = Vec::new();
    for round in 0..repetitions {
        for offset in 0..VARIANTS.len() {
            let variant = (round + offset) % VARIANTS.len();
            let (generate_ms, test_case_ms) = generate_once(
                runtime,
                executor,
                &worlds[variant],
                &next_request()?,
                &input,
                &run_config,
            )?;
            samples[variant].push(generate_ms);
            test_case_samples.push(test_case_ms);
        }
    }
    drop(worlds);
    Ok(GenerateReport {
        repetitions,
        first_generate_ms,
        generate_ms: samples
            .iter_mut()
            .map(|samples| crate::measure::median(samples))
            .collect(),
        test_case_ms: crate::measure::median(&mut test_case_samples),
    })
}

impl GenerateReport {
    /// The section of the bench report.
    pub(crate) fn render(&self) -> String {
        let mut report = format!(
            "toolsmith generator bench: a bash tool with one test case registered into a live registry, ms (median of {})\n\
             baseline: its test case alone (one invoke of the tool the report returns); ratio = median / baseline\n\
             the first request of the process (cold: the request schema and the template are compiled) is apart\n\n",
            self.repetitions
        );
        let header: Vec<String> = ["run", "median ms", "ratio to baseline"]
            .iter()
            .map(|cell| (*cell).to_owned())
            .collect();
        let row = |label: String, millis: f64| {
            [
                label,
                format!("{millis:.1}"),
                format!("{:.2}", millis / self.test_case_ms),
            ]
        };
        let mut rows = vec![row("the test case alone".to_owned(), self.test_case_ms)];
        for (variant, millis) in VARIANTS.iter().zip(&self.generate_ms) {
            let path = if variant.predicted {
                "predicted answers"
            } else {
                "plain"
            };
            rows.push(row(
                format!(
                    "request to registered, {} other tools, {path} path",
                    variant.catalog
                ),
                *millis,
            ));
        }
        rows.push(row(
            "the first request of the process, one sample".to_owned(),
            self.first_generate_ms,
        ));
        report.push_str(&render_table(&header, &rows, 1));
        let ratio = |numerator: usize, denominator: usize| {
            self.generate_ms[numerator] / self.generate_ms[denominator]
        };
        report.push_str(&format!(
            "\ncatalog of {CATALOG} / empty catalog: {:.2} (predicted answers), {:.2} (plain); target <= 1.2\n\
             predicted answers / plain: {:.2} (empty catalog), {:.2} ({CATALOG} tools); below 1 means the prediction wins\n",
            ratio(1, 0),
            ratio(3, 2),
            ratio(0, 2),
            ratio(1, 3),
        ));
        report
    }
}
