//! The live registry over a real directory: tools added, edited and deleted while calls run are
//! seen through `subscribe()` and `snapshot()` within a second, and no call in flight fails.
//!
//! The one-second bound is a liveness check with room to spare (the debounce is 200 ms), not a
//! speed claim.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::sync::broadcast;
use toolsmith_executor::{BackendChoice, Executor, ExecutorConfig, Limits, filtered_env};
use toolsmith_registry::{
    ChangeEvent, DiscoveryCache, Layer, LayerDir, LiveRegistry, Policy, RunConfig, SandboxSettings,
    ToolName, Toolsmith, Watching,
};

/// A hang guard, not a speed claim: on a quiet machine a change is reported in a few hundred
/// milliseconds (`cargo xtask bench` measures it against the 1 s target), but a loaded CI
/// machine must not turn that into a flaky failure.
const LIVENESS: Duration = Duration::from_secs(5);

fn script(name: &str, description: &str) -> String {
    format!(
        "#!/bin/sh\ncase \"$1\" in\ndescription) printf '%s\\n' '{{\"name\": \"{name}\", \"description\": \"{description}\", \"input_schema\": {{\"type\": \"object\"}}}}' ;;\nrun) cat ;;\nesac\n"
    )
}

/// Writes the tool beside its final place and renames it there, as an editor or the generator
/// does.
fn write_atomically(dir: &Path, name: &str, description: &str) {
    let temporary = dir.join(format!(".{name}.tmp"));
    fs::write(&temporary, script(name, description)).unwrap();
    fs::set_permissions(&temporary, fs::Permissions::from_mode(0o755)).unwrap();
    fs::rename(&temporary, dir.join(name)).unwrap();
}

fn name(text: &str) -> ToolName {
    ToolName::new(text).unwrap()
}

/// Waits for an event that satisfies `wanted`, failing after [`LIVENESS`].
async fn expect_event(
    events: &mut broadcast::Receiver<ChangeEvent>,
    what: &str,
    wanted: impl Fn(&ChangeEvent) -> bool,
) {
    let waited = tokio::time::timeout(LIVENESS, async {
        loop {
            let event = events.recv().await.unwrap();
            if wanted(&event) {
                return;
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "no event for {what} within {LIVENESS:?}");
}

struct World {
    _temp: tempfile::TempDir,
    tools: PathBuf,
    executor: Arc<Executor>,
    config: RunConfig,
}

impl World {
    fn new() -> World {
        let temp = tempfile::tempdir().unwrap();
        let tools = temp.path().join("project/.toolsmith/tools");
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
            tools,
            _temp: temp,
            executor,
            config,
        }
    }

    async fn start(&self) -> LiveRegistry {
        Toolsmith::from_parts(
            Arc::clone(&self.executor),
            self.config.clone(),
            Policy::allow_all(),
        )
        .live(
            vec![LayerDir {
                layer: Layer::Project,
                dir: self.tools.clone(),
            }],
            DiscoveryCache::in_memory(),
            Watching::Events,
        )
        .await
        .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn add_edit_delete_while_calls_run() {
    let world = World::new();
    fs::create_dir_all(&world.tools).unwrap();
    write_atomically(&world.tools, "steady", "Always there");
    let registry = Arc::new(world.start().await);
    let mut events = registry.subscribe();
    assert_eq!(registry.snapshot().tools().len(), 1);

    // Calls run back to back for the whole test, each on the snapshot it started with.
    let stop = Arc::new(AtomicBool::new(false));
    let calls = {
        let registry = Arc::clone(&registry);
        let executor = Arc::clone(&world.executor);
        let config = world.config.clone();
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut n_calls = 0_u32;
            while !stop.load(Ordering::Relaxed) {
                let snapshot = registry.snapshot();
                let envelope = Toolsmith::from_parts(
                    Arc::clone(&executor),
                    config.clone(),
                    Policy::allow_all(),
                )
                .call(&snapshot, "steady", &json!({"n": n_calls}))
                .await
                .unwrap();
                let envelope = serde_json::to_value(&envelope).unwrap();
                assert_eq!(envelope["tool_success"], true, "{envelope}");
                assert_eq!(envelope["result"], json!({"n": n_calls}));
                n_calls += 1;
            }
            n_calls
        })
    };

    let volatile = name("volatile");
    write_atomically(&world.tools, "volatile", "First version");
    expect_event(&mut events, "the added tool", |event| {
        event.added == [volatile.clone()]
    })
    .await;
    assert_eq!(
        registry.snapshot().get(&volatile).unwrap().description(),
        "First version"
    );

    // A snapshot taken now keeps the first version whatever happens next.
    let before_edit = registry.snapshot();
    write_atomically(&world.tools, "volatile", "Second version");
    expect_event(&mut events, "the edited tool", |event| {
        event.changed == [volatile.clone()]
    })
    .await;
    assert_eq!(
        registry.snapshot().get(&volatile).unwrap().description(),
        "Second version"
    );
    assert_eq!(
        before_edit.get(&volatile).unwrap().description(),
        "First version"
    );

    fs::remove_file(world.tools.join("volatile")).unwrap();
    expect_event(&mut events, "the deleted tool", |event| {
        event.removed == [volatile.clone()]
    })
    .await;
    assert!(registry.snapshot().get(&volatile).is_none());

    stop.store(true, Ordering::Relaxed);
    let n_calls = calls.await.unwrap();
    assert!(n_calls > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_created_later_is_watched() {
    let world = World::new();
    // Not even `.toolsmith` exists yet: the registry watches the nearest ancestor.
    fs::create_dir_all(world.tools.parent().unwrap().parent().unwrap()).unwrap();
    let registry = world.start().await;
    let mut events = registry.subscribe();
    assert!(registry.snapshot().tools().is_empty());
    assert!(registry.snapshot().problems().is_empty());

    fs::create_dir_all(&world.tools).unwrap();
    write_atomically(&world.tools, "late", "Arrived later");
    expect_event(&mut events, "a tool in a new directory", |event| {
        event.added == [name("late")]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_written_slowly_is_never_registered_half_written() {
    let world = World::new();
    fs::create_dir_all(&world.tools).unwrap();
    let registry = world.start().await;
    let mut events = registry.subscribe();

    // Written in three parts 100 ms apart, none of which is a usable tool on its own.
    let text = script("slow", "Written slowly");
    let path = world.tools.join("slow");
    let thirds = [&text[..20], &text[20..90], &text[90..]];
    let started = SystemTime::now();
    for (index, part) in thirds.iter().enumerate() {
        let mut contents = fs::read(&path).unwrap_or_default();
        contents.extend_from_slice(part.as_bytes());
        fs::write(&path, contents).unwrap();
        if index == 0 {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
        for _ in 0..10 {
            let snapshot = registry.snapshot();
            assert!(snapshot.problems().is_empty(), "{:?}", snapshot.problems());
            assert!(snapshot.tools().is_empty());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    expect_event(&mut events, "the finished tool", |event| {
        event.added == [name("slow")]
    })
    .await;
    assert!(registry.snapshot().problems().is_empty());
    assert_eq!(
        registry
            .snapshot()
            .get(&name("slow"))
            .unwrap()
            .description(),
        "Written slowly"
    );
    assert!(started.elapsed().unwrap() >= Duration::from_millis(300));
}

#[tokio::test(flavor = "multi_thread")]
async fn refresh_probes_again_and_drop_stops_the_watcher() {
    let world = World::new();
    fs::create_dir_all(&world.tools).unwrap();
    write_atomically(&world.tools, "steady", "Always there");
    let registry = world.start().await;
    assert_eq!(registry.refresh().await, ChangeEvent::default());
    assert_eq!(registry.snapshot().tools().len(), 1);

    drop(registry);
    // The rescan task held the only other reference to the executor; once it is gone, so is
    // the debouncer it owned.
    let released = tokio::time::timeout(LIVENESS, async {
        while Arc::strong_count(&world.executor) > 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(released.is_ok(), "the watcher task outlived the registry");
}

/// Regression (found by `cargo xtask bench`): edits written in place right after the previous
/// change was reported raced the rescan, which probed the file between its metadata read and
/// a rewrite, saw half of it, and briefly removed the tool. Every edit must be one `changed`
/// event, and the tool must never be reported removed.
#[tokio::test(flavor = "multi_thread")]
async fn rapid_in_place_edits_never_remove_the_tool() {
    let world = World::new();
    fs::create_dir_all(&world.tools).unwrap();
    write_atomically(&world.tools, "edited", "Edit start");
    let registry = world.start().await;
    let mut events = registry.subscribe();
    let tool = world.tools.join("edited");
    for edit in 0..10 {
        fs::write(&tool, script("edited", &format!("Edit {edit}"))).unwrap();
        let waited = tokio::time::timeout(LIVENESS, async {
            loop {
                let event = events.recv().await.unwrap();
                assert!(
                    !event.removed.iter().any(|name| name.as_str() == "edited"),
                    "edit {edit}: the tool was removed while it was rewritten: {event:?}"
                );
                if event.changed.iter().any(|name| name.as_str() == "edited") {
                    break;
                }
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "edit {edit} was not reported within {LIVENESS:?}"
        );
        let snapshot = registry.snapshot();
        let described = snapshot
            .tools()
            .iter()
            .find(|listed| listed.name().as_str() == "edited")
            .map(|listed| listed.description().to_owned());
        assert!(
            described.is_some(),
            "edit {edit}: the tool is missing from the snapshot"
        );
    }
}
