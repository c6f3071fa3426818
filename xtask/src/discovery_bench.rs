//! The discovery part of `cargo xtask bench`: cold and warm discovery of 500 tiny tools, against the physical floor of probing them.
//!
//! The floor is what no discovery that runs every tool can beat on this machine: 500
//! sequential plain `std::process::Command` runs of `tool description`, divided by the number
//! of cores (discovery probes in parallel, two per core so that waiting probes leave no core
//! idle). Cold discovery probes every tool through the executor and writes the cache; warm discovery reads the cache and, since no
//! tool changed, spawns nothing, so it may beat the floor by far. Both are reported as ratios
//! to the floor measured in the same run. A last measurement times hot reload: how long after
//! a watched tool is rewritten the live registry reports the change.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use toolsmith_executor::{Executor, Limits, filtered_env};
use toolsmith_registry::{
    DiscoveryCache, Layer, LayerDir, Policy, RunConfig, SandboxSettings, Toolsmith, Watching,
    discover_layers,
};

use crate::CheckFailed;
use crate::measure::{median, render_table};

/// How many tools are discovered.
const N_TOOLS: usize = 500;

/// How far in the past the tools' modification times are set: beyond the cache's racy margin,
/// as for tools that were not written a moment ago.
const TOOL_AGE: Duration = Duration::from_secs(3600);

/// How many edits the hot-reload measurement makes.
const N_EDITS: usize = 10;

/// What the issue promises for hot reload: an edit is visible within this.
const RELOAD_TARGET_MS: f64 = 1000.0;

/// The medians of the three measurements, in milliseconds, and the hot-reload latencies.
#[derive(Debug)]
pub(crate) struct DiscoveryReport {
    n_cpus: usize,
    repetitions: usize,
    floor_ms: f64,
    cold_ms: f64,
    warm_ms: f64,
    /// From the end of a tool's rewrite to the live registry's change event, sorted.
    reload_ms: Vec<f64>,
}

/// A temporary directory that is removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ignored = fs::remove_dir_all(&self.0);
    }
}

/// Writes the tools, then measures floor, cold and warm `repetitions` times each, interleaved.
pub(crate) fn measure(
    runtime: &tokio::runtime::Runtime,
    executor: &Arc<Executor>,
    repetitions: usize,
    n_cpus: usize,
) -> anyhow::Result<DiscoveryReport> {
    let scratch = Scratch(
        std::env::temp_dir().join(format!("toolsmith-bench-discovery-{}", std::process::id())),
    );
    let tools = scratch.0.join("tools");
    let cache_dir = scratch.0.join("cache");
    fs::create_dir_all(&tools).context("could not create the bench's tool directory")?;
    let mut paths = Vec::with_capacity(N_TOOLS);
    for index in 0..N_TOOLS {
        paths.push(write_tool(&tools, &format!("tool_{index}"))?);
    }
    let layers = [LayerDir {
        layer: Layer::User,
        dir: tools.clone(),
    }];
    let config = RunConfig {
        cwd: scratch.0.clone(),
        env: filtered_env(&["PATH".to_owned()], &[]),
        limits: Limits::recommended(),
        max_timeout: Duration::from_secs(300),
        overrides: Default::default(),
        sandbox: SandboxSettings::unrestricted(),
        project_dir: scratch.0.clone(),
        protected: Vec::new(),
        project_gate: None,
        // As the CLI does: every probe gets its tool's own cache (issue 26), so a probe
        // session's init serves the probes of one tool file.
        tool_caches: Some(cache_dir.join("tool-cache")),
        read_masks: toolsmith_registry::ReadMasks::none(),
        secrets: Default::default(),
    };
    eprintln!("bench: discovery of {N_TOOLS} tools, {repetitions} repetitions");

    let mut floor = Vec::new();
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    // Each measurement starts on a settled machine (`bench::settle`): a cold discovery's
    // deferred kernel work would otherwise slow the floor measured after it.
    for _ in 0..repetitions {
        crate::measure::settle();
        floor.push(plain_spawns(&paths)? / n_cpus as f64);
        let _ignored = fs::remove_dir_all(&cache_dir);
        crate::measure::settle();
        cold.push(timed_discovery(
            runtime, executor, &layers, &cache_dir, &config,
        )?);
        crate::measure::settle();
        warm.push(timed_discovery(
            runtime, executor, &layers, &cache_dir, &config,
        )?);
    }
    let mut reload_ms = reload_latencies(runtime, executor, &scratch.0.join("live"), &config)?;
    reload_ms.sort_by(f64::total_cmp);
    Ok(DiscoveryReport {
        n_cpus,
        repetitions,
        floor_ms: median(&mut floor),
        cold_ms: median(&mut cold),
        warm_ms: median(&mut warm),
        reload_ms,
    })
}

/// Edits one tool of a watched directory [`N_EDITS`] times (a new description each time,
/// written in place) and times each edit until the live registry reports the change.
fn reload_latencies(
    runtime: &tokio::runtime::Runtime,
    executor: &Arc<Executor>,
    dir: &Path,
    config: &RunConfig,
) -> anyhow::Result<Vec<f64>> {
    fs::create_dir_all(dir).context("could not create the bench's live directory")?;
    let tool = write_tool(dir, "edited")?;
    for index in 0..4 {
        write_tool(dir, &format!("steady_{index}"))?;
    }
    eprintln!("bench: hot reload, {N_EDITS} edits");

    runtime.block_on(async {
        let registry = Toolsmith::from_parts(Arc::clone(executor), config.clone(), Policy::allow_all())
            .live(
                vec![LayerDir {
                    layer: Layer::Project,
                    dir: dir.to_path_buf(),
                }],
                DiscoveryCache::in_memory(),
                Watching::Events,
            )
            .await?;
        let mut events = registry.subscribe();
        let mut latencies = Vec::with_capacity(N_EDITS);
        for edit in 0..N_EDITS {
            let script = format!(
                "#!/bin/sh\nprintf '%s\\n' '{{\"name\": \"edited\", \"description\": \"Edit {edit}\", \"input_schema\": {{\"type\": \"object\"}}}}'\n"
            );
            fs::write(&tool, script).context("could not edit the bench tool")?;
            let written = Instant::now();
            let seen = tokio::time::timeout(Duration::from_secs(10), async {
                loop {
                    match events.recv().await {
                        Ok(event) if event.changed.iter().any(|name| name.as_str() == "edited") => {
                            return true;
                        }
                        Ok(_) => {}
                        Err(_) => return false,
                    }
                }
            })
            .await;
            if seen != Ok(true) {
                return Err(CheckFailed(format!("edit {edit} was not reported within 10 s")).into());
            }
            latencies.push(written.elapsed().as_secs_f64() * 1e3);
        }
        Ok(latencies)
    })
}

fn write_tool(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' '{{\"name\": \"{name}\", \"description\": \"A bench tool\", \"input_schema\": {{\"type\": \"object\"}}}}'\n"
    );
    let write = || -> std::io::Result<()> {
        fs::write(&path, script)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755))?;
        fs::File::options()
            .write(true)
            .open(&path)?
            .set_modified(SystemTime::now() - TOOL_AGE)
    };
    write().with_context(|| format!("could not write the bench tool {}", path.display()))?;
    Ok(path)
}

/// Milliseconds for one plain `description` run of every tool, one after the other.
fn plain_spawns(paths: &[PathBuf]) -> anyhow::Result<f64> {
    let started = Instant::now();
    for path in paths {
        #[expect(
            clippy::disallowed_methods,
            reason = "plain std::process::Command is the floor being measured"
        )]
        let output = std::process::Command::new(path)
            .arg("description")
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("could not run {}", path.display()))?;
        if !output.status.success() {
            return Err(CheckFailed(format!(
                "the bench tool {} failed: {}",
                path.display(),
                output.status
            ))
            .into());
        }
    }
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// Milliseconds for a discovery as one `toolsmith list` does it: load the cache, discover,
/// save the cache.
fn timed_discovery(
    runtime: &tokio::runtime::Runtime,
    executor: &Arc<Executor>,
    layers: &[LayerDir],
    cache_dir: &Path,
    config: &RunConfig,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let catalog = runtime.block_on(async {
        let mut cache = DiscoveryCache::load(cache_dir);
        let catalog = discover_layers(
            executor,
            layers,
            &mut cache,
            config,
            &Policy::allow_all(),
            &|_| {},
        )
        .await;
        cache.save().map(|()| catalog)
    })?;
    let elapsed = started.elapsed().as_secs_f64() * 1e3;
    if catalog.tools().len() != N_TOOLS {
        return Err(CheckFailed(format!(
            "discovery found {} of {N_TOOLS} bench tools; first problem: {:?}",
            catalog.tools().len(),
            catalog.problems().first().map(|problem| problem.message())
        ))
        .into());
    }
    Ok(elapsed)
}

impl DiscoveryReport {
    /// The section of the bench report, in the spawn table's style.
    pub(crate) fn render(&self) -> String {
        let mut report = format!(
            "toolsmith discovery bench: {N_TOOLS} tiny `#!/bin/sh` tools, ms (median of {})\n\
             floor: {N_TOOLS} sequential std::process::Command runs of `tool description` / {} cpus; ratio = median / floor\n\n",
            self.repetitions, self.n_cpus
        );
        let header: Vec<String> = ["discovery", "tools", "median ms", "ratio to floor"]
            .iter()
            .map(|cell| (*cell).to_owned())
            .collect();
        let row = |label: &str, millis: f64| {
            [
                label.to_owned(),
                N_TOOLS.to_string(),
                format!("{millis:.1}"),
                format!("{:.2}", millis / self.floor_ms),
            ]
        };
        let rows = [
            row("physical floor", self.floor_ms),
            row("cold (probe every tool, write the cache)", self.cold_ms),
            row("warm (unchanged tools: no process)", self.warm_ms),
        ];
        report.push_str(&render_table(&header, &rows, 1));
        let percentile = |fraction: f64| {
            let index = ((self.reload_ms.len() as f64 - 1.0) * fraction).round() as usize;
            self.reload_ms.get(index).copied().unwrap_or(f64::NAN)
        };
        report.push_str(&format!(
            "\nhot reload: {N_EDITS} edits of a watched tool, from the write to the change event: \
             median {:.0} ms, max {:.0} ms (target {RELOAD_TARGET_MS:.0} ms: median at {:.2} of it); \
             the watcher's debounce ({} ms) is part of it by design\n",
            percentile(0.5),
            percentile(1.0),
            percentile(0.5) / RELOAD_TARGET_MS,
            toolsmith_registry::SETTLE.as_millis(),
        ));
        report
    }
}
