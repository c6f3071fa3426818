//! The live registry: the current catalog as a snapshot readers take without blocking, kept up to date by a file watcher, with change events.
//!
//! - Readers call [`LiveRegistry::snapshot`] and get an `Arc<Catalog>` (an `arc-swap` load, no
//!   lock): a call in flight keeps the catalog it started with, whatever happens on disk.
//! - A watcher (`notify`, debounced by `notify-debouncer-mini` for [`SETTLE`]) watches every
//!   layer directory, or, for a directory that does not exist yet, its nearest existing
//!   ancestor, so that creating `.toolsmith/tools` later is noticed.
//! - On an event the registry rescans the layers: listing the directories and reading each
//!   file's metadata is cheap; only files whose fingerprint changed are probed (the
//!   [`DiscoveryCache`] holds every other result, failures included, for the registry's life).
//! - A changed file modified less than [`SETTLE`] ago is not probed yet: it may still be being
//!   written. The registry keeps what it knew of that file (nothing, for a new one) and
//!   rescans once it has settled, so a half-written file is never registered, whatever its
//!   writer's pace between writes shorter than [`SETTLE`]. Writers that rename a complete file
//!   into place (as the generator does) are never seen half-written at all.
//! - [`LiveRegistry::refresh`] is an explicit full re-discovery: every file is probed again.
//! - Subscribers get a [`ChangeEvent`] (names added, removed, changed) after each rescan that
//!   changed the catalog.
//! - A rescan that fails for lack of resources (no descriptor or memory left to open a
//!   directory or a file) never replaces a good catalog: the last good one stays, the failure
//!   is reported ([`LiveRegistry::scan_failure`]) and the rescan is tried again every
//!   [`SCAN_RETRY`] until it succeeds.
//! - Dropping the registry stops the watcher thread and the rescan task.
//!
//! The design, with a diagram and the decisions behind it, is in `docs/discovery.md`.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use notify::RecursiveMode;
use notify_debouncer_mini::{DebounceEventResult, DebouncedEventKind, Debouncer};
use tokio::sync::{broadcast, mpsc};

use crate::context::Context;
use crate::discovery::cache::DiscoveryCache;
use crate::discovery::catalog::{Catalog, ProblemError};
use crate::discovery::discover::{Freshness, discover_matching};
use crate::discovery::layers::{LayerDir, tool_dirs};
use crate::discovery::probe::resolve_config;
use crate::error::Error;
use crate::layer::BUNDLE_TOOLS_DIR;
use crate::name::ToolName;
use crate::overrides::RunConfig;
use crate::tool::Tool;

/// How long a file must have been left alone before the watcher probes it, and the debounce of
/// the file-system events.
pub const SETTLE: Duration = Duration::from_millis(200);

/// How many change events a slow subscriber may fall behind before it misses some (it is then
/// told it lagged, and should take a fresh [`LiveRegistry::snapshot`]).
const EVENT_CAPACITY: usize = 64;

/// What one rescan changed, by tool name (each list sorted).
///
/// A tool is `changed` when what the LLM sees or where it runs from differs: its description,
/// input schema, format, file or layer. A file edited without changing any of these (say, the
/// body of `run`) is not an event: the next call runs the new file anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeEvent {
    /// Names that appeared.
    pub added: Vec<ToolName>,
    /// Names that disappeared.
    pub removed: Vec<ToolName>,
    /// Names whose tool changed.
    pub changed: Vec<ToolName>,
}

impl ChangeEvent {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }

    /// The difference between two catalogs.
    pub fn between(old: &Catalog, new: &Catalog) -> ChangeEvent {
        let old_tools: BTreeMap<&ToolName, &Tool> =
            old.tools().iter().map(|tool| (tool.name(), tool)).collect();
        let new_tools: BTreeMap<&ToolName, &Tool> =
            new.tools().iter().map(|tool| (tool.name(), tool)).collect();
        let mut event = ChangeEvent::default();
        for (name, new_tool) in &new_tools {
            match old_tools.get(name) {
                None => event.added.push((*name).clone()),
                Some(old_tool) if !same_definition(old_tool, new_tool) => {
                    event.changed.push((*name).clone());
                }
                Some(_) => {}
            }
        }
        for name in old_tools.keys() {
            if !new_tools.contains_key(name) {
                event.removed.push((*name).clone());
            }
        }
        event
    }
}

fn same_definition(left: &Tool, right: &Tool) -> bool {
    left.description() == right.description()
        && left.input_schema().as_json() == right.input_schema().as_json()
        && left.kind() == right.kind()
        && left.path() == right.path()
        && left.layer() == right.layer()
}

/// A catalog that follows the tool directories while the program runs.
///
/// Must be created inside a tokio runtime, which runs its rescans.
#[derive(Debug)]
pub struct LiveRegistry {
    shared: Arc<Shared>,
    watch_task: tokio::task::JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    /// The executor, the run configuration, and the policy that decides what discovery may
    /// run: a file policy refuses is never probed, in any rescan.
    context: Context,
    layers: Vec<LayerDir>,
    current: ArcSwap<Catalog>,
    /// Held for the whole of a rescan, so rescans never interleave.
    cache: tokio::sync::Mutex<DiscoveryCache>,
    events: broadcast::Sender<ChangeEvent>,
    /// Why the last scan failed, while it did.
    scan_failure: std::sync::Mutex<Option<String>>,
    /// Whether `current` came from a scan that did not fail.
    current_is_good: std::sync::atomic::AtomicBool,
}

/// How a [`LiveRegistry`] learns that its directories changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watching {
    /// The kernel's file events (inotify): a change is seen as it happens.
    Events,
    /// A scan of the directories' entries every interval instead of the kernel's events,
    /// which never come for changes another machine makes on a shared network filesystem
    /// (NFS, a Kubernetes ReadWriteMany volume): replicas on several machines see each
    /// other's tools this way.
    Polls(Duration),
}

impl LiveRegistry {
    /// Starts watching `layers` as `watching` says, then discovers them (with `cache`) before
    /// returning; [`Toolsmith::live`](crate::Toolsmith::live) is the public door.
    ///
    /// The watch is set up first, so a change during the first discovery is not missed.
    /// No discovery, first or later, runs a file the context's policy refuses.
    pub(crate) async fn start(
        context: Context,
        layers: Vec<LayerDir>,
        cache: DiscoveryCache,
        watching: Watching,
    ) -> Result<LiveRegistry, Error> {
        let (sender, receiver) = mpsc::unbounded_channel();
        // The receiver is gone only when the registry is dropped; nothing is left to tell.
        let forward = move |result: DebounceEventResult| {
            let _ignored = sender.send(result);
        };
        let debouncer = match watching {
            Watching::Events => Watch::Events(
                notify_debouncer_mini::new_debouncer_opt::<_, ChangesOnly>(
                    notify_debouncer_mini::Config::default().with_timeout(SETTLE),
                    forward,
                )
                .map_err(|source| Error::Watch { source })?,
            ),
            Watching::Polls(interval) => Watch::Polls(
                notify_debouncer_mini::new_debouncer_opt::<_, notify::PollWatcher>(
                    notify_debouncer_mini::Config::default()
                        .with_timeout(SETTLE)
                        .with_notify_config(notify::Config::default().with_poll_interval(interval)),
                    forward,
                )
                .map_err(|source| Error::Watch { source })?,
            ),
        };
        LiveRegistry::start_with(context, layers, cache, debouncer, receiver).await
    }

    async fn start_with(
        context: Context,
        layers: Vec<LayerDir>,
        cache: DiscoveryCache,
        mut debouncer: Watch,
        receiver: mpsc::UnboundedReceiver<DebounceEventResult>,
    ) -> Result<LiveRegistry, Error> {
        let targets = watch_targets(&layers, &context.config);
        let mut watched = HashSet::new();
        update_watches(&mut debouncer, &targets, &HashSet::new(), &mut watched)?;

        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        let shared = Arc::new(Shared {
            context,
            layers,
            current: ArcSwap::from_pointee(Catalog::empty()),
            cache: tokio::sync::Mutex::new(cache),
            events,
            scan_failure: std::sync::Mutex::new(None),
            current_is_good: std::sync::atomic::AtomicBool::new(false),
        });
        shared.rescan(Freshness::UseCache).await;
        let watch_task = tokio::spawn(watch_loop(
            Arc::clone(&shared),
            debouncer,
            receiver,
            watched,
        ));
        Ok(LiveRegistry { shared, watch_task })
    }

    /// The current catalog. Holding it keeps it alive and unchanged.
    pub fn snapshot(&self) -> Arc<Catalog> {
        self.shared.current.load_full()
    }

    /// Why the last scan of the tool directories failed (it could not open them or their
    /// files for lack of resources), while it does: the catalog is then the last good one.
    pub fn scan_failure(&self) -> Option<String> {
        self.shared
            .scan_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A receiver of the change events that happen from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ChangeEvent> {
        self.shared.events.subscribe()
    }

    /// Discovers every layer again, probing every file (also the unchanged ones), and returns
    /// what changed; subscribers get the same event.
    pub async fn refresh(&self) -> ChangeEvent {
        self.shared.rescan(Freshness::ProbeAll).await.0
    }

    /// Starts the registration of files written into the watched directories by this process
    /// (the generator): until the [`Registration`] is published or dropped, no rescan runs, so
    /// none probes a file before its record is filed.
    pub async fn begin_registration(&self) -> Registration<'_> {
        Registration {
            shared: &self.shared,
            cache: self.shared.cache.lock().await,
        }
    }

    /// The layers watched, lowest precedence first.
    pub fn layers(&self) -> &[LayerDir] {
        &self.shared.layers
    }

    /// `tool` (from a [`snapshot`](LiveRegistry::snapshot)) ready to be called: a Kodelet tool
    /// whose `config` was never asked is asked now, once per version of its file (the answer
    /// is cached and saved with its description), so the timeout it requests applies from its
    /// first call on. An invalid answer is the error, and the call should not run.
    pub(crate) async fn ready_for_call(&self, tool: &Tool) -> Result<Tool, ProblemError> {
        if !tool.config_pending() {
            return Ok(tool.clone());
        }
        let mut cache = self.shared.cache.lock().await;
        let context = &self.shared.context;
        let ready = resolve_config(&context.executor, tool, &mut cache, &context.config).await;
        if let Err(error) = cache.save() {
            tracing::warn!(
                error = %crate::message::error_chain(&error),
                "the discovery cache was not saved; a tool's `config` will be asked again next start"
            );
        }
        ready
    }
}

/// A registration in progress: the live registry's cache, locked, to file the records of the
/// files being registered before any rescan sees them.
///
/// A registration enters the catalog without probing any other tool file: the records of
/// the registered files are [`adopt`](Registration::adopt)ed from the probes that checked
/// them, and [`publish`](Registration::publish) rescans from the cache, which knows every
/// unchanged file already.
#[derive(Debug)]
pub struct Registration<'a> {
    shared: &'a Shared,
    cache: tokio::sync::MutexGuard<'a, DiscoveryCache>,
}

impl Registration<'_> {
    /// Files the record `from` holds for `staged` under `installed`, the path it was renamed
    /// to ([`DiscoveryCache::adopt`]), as this registry's scans name it (its layer directory
    /// may be spelt otherwise, say relative to the working directory). Returns that path if the
    /// record was filed; if not, the next rescan probes the file.
    pub fn adopt(
        &mut self,
        from: &DiscoveryCache,
        staged: &Path,
        installed: &Path,
    ) -> Option<PathBuf> {
        let scanned = self.scanned_path(installed)?;
        self.cache.adopt(from, staged, &scanned).then_some(scanned)
    }

    /// `file` as the scans of the registry's layers name it: in the layer directory that is
    /// its parent directory (the same directory, however spelt). `None` outside the layers.
    fn scanned_path(&self, file: &Path) -> Option<PathBuf> {
        use std::os::unix::fs::MetadataExt as _;
        let parent = file.parent()?;
        let file_name = file.file_name()?;
        let identity = |dir: &Path| {
            std::fs::metadata(dir)
                .ok()
                .map(|metadata| (metadata.dev(), metadata.ino()))
        };
        let wanted = identity(parent)?;
        self.shared
            .layers
            .iter()
            .filter(|layer_dir| !layer_dir.layer.holds_bundles())
            .map(|layer_dir| self.shared.context.config.cwd.join(&layer_dir.dir))
            .find(|root| root == parent || identity(root) == Some(wanted))
            .map(|root| root.join(file_name))
    }

    /// Rescans from the cache and publishes the new catalog: only files the cache does not
    /// know (changed by someone else meanwhile) are probed, once settled, as the watcher's
    /// rescans do. Subscribers get the change event; the caller gets it too, with the catalog
    /// current after the rescan.
    pub async fn publish(self) -> (ChangeEvent, Arc<Catalog>) {
        let shared = self.shared;
        let (event, _settles_at) = shared
            .rescan_locked(self.cache, Freshness::Settle(SETTLE))
            .await;
        (event, shared.current.load_full())
    }
}

impl Drop for LiveRegistry {
    fn drop(&mut self) {
        // The task owns the debouncer: dropping it with the task stops the watcher thread, and
        // a rescan in progress is cancelled, which kills its probes.
        self.watch_task.abort();
    }
}

impl Shared {
    /// Rediscovers, publishes the new catalog and the change event, and says when a file left
    /// for later will have settled.
    async fn rescan(&self, freshness: Freshness) -> (ChangeEvent, Option<SystemTime>) {
        let cache = self.cache.lock().await;
        self.rescan_locked(cache, freshness).await
    }

    /// [`rescan`](Shared::rescan) with the cache already locked (by a registration, which
    /// filed its tool's record there first).
    async fn rescan_locked(
        &self,
        mut cache: tokio::sync::MutexGuard<'_, DiscoveryCache>,
        freshness: Freshness,
    ) -> (ChangeEvent, Option<SystemTime>) {
        // After a scan that failed for lack of resources, the probes it ran may have failed for
        // the same reason, and the cache holds those failures: every file is probed again.
        let recovering = self
            .scan_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some();
        let freshness = if recovering {
            Freshness::ProbeAll
        } else {
            freshness
        };
        let discovery = discover_matching(
            &self.context.executor,
            &self.layers,
            None,
            &mut cache,
            freshness,
            &self.context.config,
            &self.context.policy,
            &|_| {},
        )
        .await;
        if let Err(error) = cache.save() {
            tracing::warn!(
                error = %crate::message::error_chain(&error),
                "the discovery cache was not saved; unchanged tools will be probed again next start"
            );
        }
        drop(cache);
        let failure = resource_failure(&discovery.catalog);
        let mut retry_at = discovery.retry_at;
        if let Some(reason) = &failure {
            let again = SystemTime::now() + SCAN_RETRY;
            retry_at = Some(retry_at.map_or(again, |at| at.min(again)));
            if self
                .current_is_good
                .load(std::sync::atomic::Ordering::SeqCst)
            {
                tracing::error!(%reason, "a rescan of the tool directories failed: the last good catalog is kept, and the rescan tried again");
                self.set_scan_failure(failure);
                let current = self.current.load_full();
                return (ChangeEvent::between(&current, &current), retry_at);
            }
        }
        self.current_is_good
            .store(failure.is_none(), std::sync::atomic::Ordering::SeqCst);
        let new = Arc::new(discovery.catalog);
        let old = self.current.swap(Arc::clone(&new));
        // Cleared only once the new catalog is published: whoever sees the scan succeed
        // sees its catalog.
        self.set_scan_failure(failure);
        let event = ChangeEvent::between(&old, &new);
        if !event.is_empty() {
            tracing::debug!(?event, "tool catalog changed");
            // No subscriber is not a failure.
            let _ignored = self.events.send(event.clone());
        }
        (event, retry_at)
    }
}

impl Shared {
    fn set_scan_failure(&self, failure: Option<String>) {
        *self
            .scan_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = failure;
    }
}

/// How soon a scan that failed for lack of resources is tried again.
pub(crate) const SCAN_RETRY: Duration = Duration::from_secs(1);

/// Why `catalog`'s scan failed, if a problem in it is the lack of a resource (`EMFILE`,
/// `ENFILE`, `ENOMEM`) rather than something wrong with a tool or a directory: the catalog
/// then says nothing of the tools, only of the machine.
fn resource_failure(catalog: &Catalog) -> Option<String> {
    /// `EMFILE`, `ENFILE`, `ENOMEM` on Linux.
    const EXHAUSTED: [i32; 3] = [24, 23, 12];
    catalog.problems().iter().find_map(|problem| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&problem.error);
        while let Some(error) = source {
            if let Some(io) = error.downcast_ref::<std::io::Error>()
                && io
                    .raw_os_error()
                    .is_some_and(|code| EXHAUSTED.contains(&code))
            {
                return Some(format!("{}: {io}", problem.path.display()));
            }
            source = error.source();
        }
        None
    })
}

/// The directories to watch: each layer directory, or its nearest ancestor that exists and can
/// be read.
///
/// An unreadable directory cannot be watched (inotify needs read access), but its parent sees
/// its permissions change back (`IN_ATTRIB` names the child), which rescans and moves the watch
/// back onto it; without that, a directory once unreadable would never be followed again.
///
/// With a project gate, each path whose change may change its verdict (the project directory
/// itself, its `.toolsmith/config.toml`, the trust store) is watched through its parent: a
/// config edited, a trust withdrawn or the project replaced while the registry runs rescans at
/// once, and the layer is skipped.
fn watch_targets(layers: &[LayerDir], config: &RunConfig) -> HashSet<PathBuf> {
    let nearest = |dir: &Path| {
        dir.ancestors()
            .find(|ancestor| ancestor.is_dir() && std::fs::read_dir(ancestor).is_ok())
            .map(Path::to_path_buf)
    };
    let watched = Watched::of(layers, config);
    let gate_parents = watched.exact.iter().filter_map(|path| path.parent());
    let mut targets: HashSet<PathBuf> = watched
        .dirs
        .iter()
        .map(|(dir, _)| dir.as_path())
        .chain(gate_parents)
        .filter_map(nearest)
        .collect();
    // A bundles directory is watched with each bundle in it (which sees its `tools/` folder
    // come and go) and each bundle's `tools/` folder.
    for layer_dir in layers
        .iter()
        .filter(|layer_dir| layer_dir.layer.holds_bundles())
    {
        for tools in tool_dirs(layer_dir, &config.cwd).unwrap_or_default() {
            targets.extend(tools.parent().map(Path::to_path_buf));
            targets.insert(tools);
        }
    }
    targets
}

/// Watches the new targets, stops watching the old ones, and watches again a target that an
/// event named (it may have been removed and created again, which ends an inotify watch).
fn update_watches(
    debouncer: &mut Watch,
    targets: &HashSet<PathBuf>,
    touched: &HashSet<PathBuf>,
    watched: &mut HashSet<PathBuf>,
) -> Result<(), Error> {
    let stale: Vec<PathBuf> = watched.difference(targets).cloned().collect();
    for dir in stale {
        // The directory may be gone, which already ended the watch.
        let _ignored = debouncer.watcher().unwatch(&dir);
        watched.remove(&dir);
    }
    for dir in targets {
        if watched.contains(dir) && !touched.contains(dir) {
            continue;
        }
        if watched.contains(dir) {
            let _ignored = debouncer.watcher().unwatch(dir);
        }
        match debouncer.watcher().watch(dir, RecursiveMode::NonRecursive) {
            Ok(()) => {
                watched.insert(dir.clone());
            }
            // Removed between the check and the watch: the next event recomputes the targets.
            Err(error) if matches!(error.kind, notify::ErrorKind::PathNotFound) => {
                watched.remove(dir);
            }
            Err(source) => return Err(Error::Watch { source }),
        }
    }
    Ok(())
}

/// Whether an event at `path` can change the catalog: a file in a layer directory, a layer
/// directory or one of its ancestors appearing or disappearing, a bundle or its `tools/` folder
/// (or a file in it) in a bundles directory, or one of the project gate's paths (or an
/// ancestor) changing.
fn is_relevant(path: &Path, watched: &Watched) -> bool {
    watched.dirs.iter().any(|(dir, holds_bundles)| {
        if path.parent() == Some(dir.as_path()) || dir.starts_with(path) {
            return true;
        }
        *holds_bundles
            && path.strip_prefix(dir).is_ok_and(|inside| {
                let parts: Vec<_> = inside.components().collect();
                match parts.as_slice() {
                    [_bundle] => true,
                    [_bundle, tools] | [_bundle, tools, _] => tools.as_os_str() == BUNDLE_TOOLS_DIR,
                    _ => false,
                }
            })
    }) || watched.exact.iter().any(|exact| exact.starts_with(path))
}

/// What a live registry follows.
struct Watched {
    /// The layer directories, absolute, each with whether it holds bundles: a change of any
    /// entry in them counts (in a bundles directory, of a bundle's `tools/` folder).
    dirs: Vec<(PathBuf, bool)>,
    /// The project gate's paths: only a change of the path itself (or an ancestor) counts.
    exact: Vec<PathBuf>,
}

impl Watched {
    fn of(layers: &[LayerDir], config: &RunConfig) -> Watched {
        Watched {
            dirs: layers
                .iter()
                .map(|layer_dir| {
                    (
                        config.cwd.join(&layer_dir.dir),
                        layer_dir.layer.holds_bundles(),
                    )
                })
                .collect(),
            exact: config
                .project_gate
                .iter()
                .flat_map(|gate| gate.watched().iter().cloned())
                .collect(),
        }
    }
}

/// How the directories are watched: the kernel's events, or a scan every interval.
enum Watch {
    Events(Debouncer<ChangesOnly>),
    Polls(Debouncer<notify::PollWatcher>),
}

impl Watch {
    fn watcher(&mut self) -> &mut dyn notify::Watcher {
        match self {
            Watch::Events(debouncer) => debouncer.watcher(),
            Watch::Polls(debouncer) => debouncer.watcher(),
        }
    }
}

/// The kernel's watcher, passing on only the events of a change: a directory listed, a file
/// opened or read (as every rescan does) is no reason to rescan, and reacting to it made an
/// idle registry rescan for ever, each rescan's reads the cause of the next.
///
/// inotify's `IN_OPEN` (and `IN_CLOSE_NOWRITE`, `IN_ACCESS` where asked) arrive as
/// [`EventKind::Access`](notify::EventKind::Access); of those only the close of a file open
/// for writing tells of a change.
struct ChangesOnly(notify::RecommendedWatcher);

impl notify::Watcher for ChangesOnly {
    fn new<F: notify::EventHandler>(
        mut event_handler: F,
        config: notify::Config,
    ) -> notify::Result<ChangesOnly> {
        let filtered = move |result: notify::Result<notify::Event>| {
            if result.as_ref().is_ok_and(|event| !is_change(&event.kind)) {
                return;
            }
            event_handler.handle_event(result);
        };
        notify::RecommendedWatcher::new(filtered, config).map(ChangesOnly)
    }

    fn watch(&mut self, path: &Path, recursive_mode: RecursiveMode) -> notify::Result<()> {
        self.0.watch(path, recursive_mode)
    }

    fn unwatch(&mut self, path: &Path) -> notify::Result<()> {
        self.0.unwatch(path)
    }

    fn configure(&mut self, option: notify::Config) -> notify::Result<bool> {
        self.0.configure(option)
    }

    fn kind() -> notify::WatcherKind {
        notify::RecommendedWatcher::kind()
    }
}

/// Whether an event of `kind` can mean that a tool file or directory changed.
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        notify::EventKind::Access(_) => false,
        _ => true,
    }
}

/// Waits for file-system events (or for a file left for later to settle), then rescans.
async fn watch_loop(
    shared: Arc<Shared>,
    mut debouncer: Watch,
    mut receiver: mpsc::UnboundedReceiver<DebounceEventResult>,
    mut watched: HashSet<PathBuf>,
) {
    let mut retry_at: Option<tokio::time::Instant> = None;
    loop {
        let mut touched = HashSet::new();
        let mut relevant = false;
        let retry = async {
            match retry_at {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            received = receiver.recv() => {
                let Some(first) = received else {
                    return;
                };
                // Everything already queued is handled by the same rescan.
                let relevant_dirs = Watched::of(&shared.layers, &shared.context.config);
                let mut batch = vec![first];
                while let Ok(more) = receiver.try_recv() {
                    batch.push(more);
                }
                for result in batch {
                    match result {
                        Ok(events) => {
                            for event in events {
                                // A file still being written is reported again once it is quiet.
                                if event.kind == DebouncedEventKind::AnyContinuous {
                                    continue;
                                }
                                if is_relevant(&event.path, &relevant_dirs) {
                                    relevant = true;
                                    touched.insert(event.path);
                                }
                            }
                        }
                        Err(error) => {
                            // Events may have been lost (e.g. the inotify queue overflowed), so
                            // the directories are rescanned rather than trusting the rest.
                            tracing::warn!(%error, "the tool directory watcher reported an error");
                            relevant = true;
                        }
                    }
                }
            }
            () = retry => {
                relevant = true;
            }
        }
        if !relevant {
            continue;
        }
        let targets = watch_targets(&shared.layers, &shared.context.config);
        if let Err(error) = update_watches(&mut debouncer, &targets, &touched, &mut watched) {
            tracing::warn!(error = %crate::message::error_chain(&error), "a tool directory cannot be watched; its changes need an explicit refresh");
        }
        // One line per rescan the watcher starts, so that rescans can be counted from outside.
        tracing::debug!(
            paths = touched.len(),
            "rescanning the tool directories after a change"
        );
        let (_event, settles_at) = shared.rescan(Freshness::Settle(SETTLE)).await;
        retry_at = settles_at.map(|settles_at| {
            let wait = settles_at
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            tokio::time::Instant::now() + wait
        });
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::discovery::layers::LayerDir;
    use crate::discovery::live::{Watched, is_relevant};
    use crate::layer::{Layer, Peer};

    fn check(path: &str, expect: bool) {
        let layers = [
            LayerDir {
                layer: Layer::User,
                dir: PathBuf::from("/home/ada/.config/toolsmith/tools"),
            },
            LayerDir {
                layer: Layer::Project,
                dir: PathBuf::from(".toolsmith/tools"),
            },
            LayerDir {
                layer: Layer::PeerProjectBundles(Peer::Nanocoder),
                dir: PathBuf::from(".nanocoder/skills"),
            },
        ];
        let watched = Watched {
            dirs: layers
                .iter()
                .map(|layer_dir| {
                    (
                        Path::new("/src/app").join(&layer_dir.dir),
                        layer_dir.layer.holds_bundles(),
                    )
                })
                .collect(),
            exact: vec![
                PathBuf::from("/src/app"),
                PathBuf::from("/src/app/.toolsmith/config.toml"),
                PathBuf::from("/home/ada/.local/state/toolsmith/trust.json"),
            ],
        };
        assert_eq!(is_relevant(Path::new(path), &watched), expect, "{path}");
    }

    #[test]
    fn files_in_layer_dirs_are_relevant() {
        check("/home/ada/.config/toolsmith/tools/hello", true);
        check("/src/app/.toolsmith/tools/hello", true);
    }

    #[test]
    fn layer_dirs_and_their_ancestors_are_relevant() {
        check("/src/app/.toolsmith/tools", true);
        check("/src/app/.toolsmith", true);
        check("/home/ada/.config", true);
    }

    #[test]
    fn bundles_and_their_tools_are_relevant() {
        check("/src/app/.nanocoder/skills/k8s", true);
        check("/src/app/.nanocoder/skills/k8s/tools", true);
        check("/src/app/.nanocoder/skills/k8s/tools/pods.md", true);
        check("/src/app/.nanocoder/skills/k8s/SKILL.md", false);
        check("/src/app/.nanocoder/skills/k8s/docs/notes.md", false);
        check("/src/app/.nanocoder/skills/k8s/tools/sub/deep.md", false);
    }

    #[test]
    fn neighbours_are_not() {
        check("/home/ada/.bash_history", false);
        check("/src/app/README.md", false);
        check("/src/app/.toolsmith/tools/sub/deep", false);
        check("/src/app/.toolsmith/drafts", false);
        check("/src/other", false);
        check("/home/ada/.local/state/toolsmith/audit.jsonl", false);
    }

    /// Issue 22, finding 11: the project gate's paths count, and only they.
    #[test]
    fn the_project_gates_paths_are_relevant() {
        check("/src/app/.toolsmith/config.toml", true);
        check("/home/ada/.local/state/toolsmith/trust.json", true);
        check("/src/app", true);
        check("/src", true);
    }

    /// Issue 24: an idle `serve` rescanned five times a second, each rescan's own reads (the
    /// directory listed, the manifests opened) the events of the next.
    #[test]
    fn reads_are_not_changes() {
        use notify::EventKind;
        use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RemoveKind};

        use crate::discovery::live::is_change;

        let reads = [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Open(AccessMode::Read)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Any),
        ];
        for kind in reads {
            assert!(!is_change(&kind), "{kind:?}");
        }
        let changes = [
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Any),
            EventKind::Remove(RemoveKind::File),
            EventKind::Any,
        ];
        for kind in changes {
            assert!(is_change(&kind), "{kind:?}");
        }
    }
}
