//! The discovery cache through a real executor: a warm discovery of 500 unchanged tools spawns no process.
//!
//! Every fixture tool appends a line to a counter file when it is probed, so the count of
//! spawns is observed outside the registry.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use toolsmith_executor::{BackendChoice, Executor, ExecutorConfig, Limits, filtered_env};
use toolsmith_registry::{
    Catalog, DiscoveryCache, Layer, LayerDir, Policy, RunConfig, SandboxSettings, discover_layers,
    discover_one,
};

const N_TOOLS: usize = 500;

/// A tiny tool that counts its probes in `counter` and describes itself with `description`.
fn write_tool(dir: &Path, name: &str, description: &str, counter: &Path, age: Duration) {
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\ndescription) echo probed >> '{counter}'; printf '%s\\n' '{{\"name\": \"{name}\", \"description\": \"{description}\", \"input_schema\": {{\"type\": \"object\"}}}}' ;;\nrun) cat ;;\nesac\n",
        counter = counter.display()
    );
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    // Older than the racy margin, as tools are when a session starts.
    let file = fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

fn probes(counter: &Path) -> usize {
    fs::read_to_string(counter).map_or(0, |text| text.lines().count())
}

struct World {
    _temp: tempfile::TempDir,
    tools: PathBuf,
    cache_dir: PathBuf,
    counter: PathBuf,
    executor: Arc<Executor>,
    config: RunConfig,
}

impl World {
    fn new() -> World {
        let temp = tempfile::tempdir().unwrap();
        let tools = temp.path().join("tools");
        fs::create_dir(&tools).unwrap();
        // The fixtures count their probes in a file outside any writable root, and a probe's
        // sandbox is read-only: without Landlock (and so without the read-only mounts that
        // come with it) the count can be kept. Every test of this binary wants the same.
        // SAFETY: the tests of this binary read the environment only here and in the
        // executor's probes, which run after this.
        unsafe {
            std::env::set_var(toolsmith_executor::DISABLE_FEATURES_VAR, "landlock");
        }
        let executor = Arc::new(
            Executor::new(ExecutorConfig {
                backend: BackendChoice::Auto,
                max_concurrent: None,
            })
            .unwrap(),
        );
        let config = RunConfig {
            cwd: temp.path().to_path_buf(),
            env: filtered_env(&["PATH".to_owned()], &[]),
            limits: Limits::recommended(),
            max_timeout: Duration::from_secs(300),
            overrides: Default::default(),
            sandbox: SandboxSettings::unrestricted(),
            project_dir: temp.path().to_path_buf(),
            protected: Vec::new(),
            project_gate: None,
            tool_caches: None,
            read_masks: toolsmith_registry::ReadMasks::none(),
            secrets: Default::default(),
        };
        World {
            cache_dir: temp.path().join("cache"),
            counter: temp.path().join("probes.log"),
            tools,
            _temp: temp,
            executor,
            config,
        }
    }

    fn layers(&self) -> Vec<LayerDir> {
        vec![LayerDir {
            layer: Layer::User,
            dir: self.tools.clone(),
        }]
    }

    /// Discovers with the cache stored on disk, as one `toolsmith` process does.
    async fn discover(&self) -> Catalog {
        let mut cache = DiscoveryCache::load(&self.cache_dir);
        let catalog = discover_layers(
            &self.executor,
            &self.layers(),
            &mut cache,
            &self.config,
            &Policy::allow_all(),
            &|_| {},
        )
        .await;
        cache.save().unwrap();
        catalog
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn warm_discovery_of_500_tools_spawns_no_process() {
    let world = World::new();
    for index in 0..N_TOOLS {
        write_tool(
            &world.tools,
            &format!("tool_{index}"),
            "Counts its probes",
            &world.counter,
            Duration::from_secs(3600),
        );
    }

    let cold = world.discover().await;
    assert_eq!(cold.tools().len(), N_TOOLS, "{:?}", cold.problems().first());
    assert_eq!(probes(&world.counter), N_TOOLS);
    assert!(cold.tools().iter().all(|tool| tool.layer() == Layer::User));

    let warm = world.discover().await;
    assert_eq!(warm.tools().len(), N_TOOLS);
    assert_eq!(probes(&world.counter), N_TOOLS, "a warm discovery spawned");

    // One edited tool is probed again, and only it.
    write_tool(
        &world.tools,
        "tool_7",
        "Edited",
        &world.counter,
        Duration::from_secs(1800),
    );
    let edited = world.discover().await;
    assert_eq!(probes(&world.counter), N_TOOLS + 1);
    let name = toolsmith_registry::ToolName::new("tool_7").unwrap();
    assert_eq!(edited.get(&name).unwrap().description(), "Edited");

    // Calling one tool consults the cache too.
    let mut cache = DiscoveryCache::load(&world.cache_dir);
    let one = discover_one(
        &world.executor,
        &world.layers(),
        &mut cache,
        &name,
        &world.config,
        &Policy::allow_all(),
    )
    .await;
    assert_eq!(one.tools().len(), 1);
    assert_eq!(probes(&world.counter), N_TOOLS + 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_output_is_cached_but_a_failing_exit_is_probed_again() {
    let world = World::new();
    let garbage = world.tools.join("garbage");
    fs::write(
        &garbage,
        format!(
            "#!/bin/sh\necho probed >> '{}'\necho 'not json'\n",
            world.counter.display()
        ),
    )
    .unwrap();
    let failing = world.tools.join("failing");
    fs::write(
        &failing,
        format!(
            "#!/bin/sh\necho probed >> '{}'\nexit 3\n",
            world.counter.display()
        ),
    )
    .unwrap();
    for path in [&garbage, &failing] {
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
        let file = fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
    }
    let first = world.discover().await;
    assert_eq!(first.problems().len(), 2);
    // Each fails `description` the way an ikigai tool would, so `--schema` is tried too.
    assert_eq!(probes(&world.counter), 4);
    let second = world.discover().await;
    let messages: Vec<String> = second
        .problems()
        .iter()
        .map(|problem| problem.message())
        .collect();
    assert_eq!(messages.len(), 2);
    assert!(
        messages.iter().any(|message| message.contains("not JSON")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|message| message.contains("status 3")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .all(|message| message.contains("`--schema` also failed")),
        "a warm start reports what the cold one did: {messages:?}"
    );
    // The invalid output (of both probes) came from the cache; the non-zero exit, which a
    // missing interpreter could cause, was probed again (both protocols).
    assert_eq!(probes(&world.counter), 6);
}
