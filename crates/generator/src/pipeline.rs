//! The pipeline of a request: check it, render it into a staging directory, check the staged tool as the registry would and run it in the sandbox, and only then move it into place atomically, record the version and tell the live registry; plus the `new` skeletons.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use toolsmith_executor::Executor;
use toolsmith_registry::{
    Catalog, DiscoveryCache, LayerDir, LiveRegistry, Policy, Registration, RunConfig, Tool,
    ToolName, Toolsmith, discover_one, error_chain,
};

use crate::history;
use crate::lock;
use crate::recovery;
use crate::render::{self, RenderedTool};
use crate::staged_checks::{carry_learned, check_staged};
use crate::staging::{
    Staging, install, remove_other_formats, sync_file, tool_files, write_file, write_new_dir,
    write_unsynced,
};
use crate::{Error, Language, Request};

/// Where the generator reads templates and writes tools.
#[derive(Debug, Clone)]
pub struct GeneratorConfig {
    /// Where registered tools go (default `<project>/.toolsmith/tools`); the history
    /// repository and the staging area live inside it, hidden from discovery.
    pub tools_dir: PathBuf,
    /// Where scaffolds (requests without an implementation) go, one directory per tool.
    pub drafts_dir: PathBuf,
    /// A directory whose `*.tera` files replace the embedded templates of the same name
    /// (`$TOOLSMITH_HOME/templates`).
    pub templates_dir: Option<PathBuf>,
    /// The hand-written tools a request may replace (`[generator] may_replace`): the
    /// operator's consent. A tool the generator did not write is replaced (or shadowed from
    /// another layer) only when named here; a generated one needs no consent.
    pub may_replace: Vec<ToolName>,
}

impl GeneratorConfig {
    /// The generator of `toolsmith` in the project `dir` without a config file: tools go to
    /// `<dir>/.toolsmith/tools`, scaffolds to `<dir>/.toolsmith/drafts`, the embedded
    /// templates are used, and no hand-written tool may be replaced.
    pub fn in_project(dir: impl AsRef<Path>) -> GeneratorConfig {
        let dir = dir.as_ref();
        GeneratorConfig {
            tools_dir: dir.join(".toolsmith/tools"),
            drafts_dir: dir.join(".toolsmith/drafts"),
            templates_dir: None,
            may_replace: Vec::new(),
        }
    }
}

/// The outcome of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every check passed; the tool is in place, recorded and registered.
    Registered,
    /// A check failed; nothing was registered or left on disk.
    Rejected,
    /// No implementation was given; the rendered files are in the drafts area.
    Scaffolded,
}

/// One check of the pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The check's name, e.g. `schema` or `test: counts words`.
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
    /// What explains a failure (the diff, the stderr), or a note on a pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl CheckReport {
    pub(crate) fn passed(name: &str, detail: Option<String>) -> CheckReport {
        CheckReport {
            name: name.to_owned(),
            ok: true,
            detail,
        }
    }

    pub(crate) fn failed(name: &str, detail: String) -> CheckReport {
        CheckReport {
            name: name.to_owned(),
            ok: false,
            detail: Some(detail),
        }
    }
}

/// The report of a request, for people and agents: a rejected request's failing check
/// explains what to repair before resubmitting with `replace: true`.
///
/// A registered tool comes back with it ([`tool`](Report::tool)), loaded from the file its
/// checks probed, so a caller can call it at once without discovering again.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// What happened.
    pub status: Status,
    /// The tool's name (as requested, when the request was refused before it was checked).
    pub name: String,
    /// The name the LLM sees, `custom_tool_<name>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exposed_name: Option<String>,
    /// The tool's file (registered) or draft directory (scaffolded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The recorded version, when registered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// The history commit of that version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Every check, in order.
    pub checks: Vec<CheckReport>,
    /// What a crash had left in the tools directory and this request repaired first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<String>,
    /// The registered tool, as the registry loaded it from [`path`](Report::path) (from the
    /// record of the probe the checks ran: registering probes nothing else). With a live
    /// registry it is the tool of the live catalog; `None` when not registered, or when the
    /// live catalog does not serve the file (a policy or a higher layer hides it).
    #[serde(skip)]
    pub tool: Option<Tool>,
}

impl Report {
    fn rejected(name: String, exposed_name: Option<String>, checks: Vec<CheckReport>) -> Report {
        Report {
            status: Status::Rejected,
            name,
            exposed_name,
            path: None,
            version: None,
            commit: None,
            checks,
            repairs: Vec::new(),
            tool: None,
        }
    }

    /// The report rejecting a request that is not a [`Request`] (the JSON `value` the caller
    /// received, refused by [`Request::from_json`] with `error`): its `request` check says
    /// why, so an agent can repair it.
    pub fn invalid_request(value: &Value, error: &crate::RequestError) -> Report {
        let requested = value
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Report::rejected(
            requested.to_owned(),
            None,
            vec![CheckReport::failed("request", error_chain(error))],
        )
    }
}

/// One mutex per tool name in this process, held for the whole of a generation or rollback
/// of that name: concurrent requests for one name (an MCP client may send several) see each
/// other's tools, while requests for other names run their checks at the same time. Across
/// names and processes, the lock on the tools directory ([`lock::lock`]) serializes the
/// registration itself, and the history's compare-and-swap on the tool's ref stays as the
/// last guard.
pub(crate) async fn serialize_name(name: &str) -> tokio::sync::OwnedMutexGuard<()> {
    type Names = std::collections::BTreeMap<String, std::sync::Weak<tokio::sync::Mutex<()>>>;
    static NAMES: std::sync::Mutex<Names> = std::sync::Mutex::new(Names::new());
    // `a_b` and `a-b` are files of one tool (`tool_files`).
    let key = name
        .strip_prefix("custom_tool_")
        .unwrap_or(name)
        .replace('-', "_");
    let mutex = {
        let mut names = NAMES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        names.retain(|_, mutex| mutex.strong_count() > 0);
        match names.get(&key).and_then(std::sync::Weak::upgrade) {
            Some(mutex) => mutex,
            None => {
                let mutex = Arc::new(tokio::sync::Mutex::new(()));
                names.insert(key, Arc::downgrade(&mutex));
                mutex
            }
        }
    };
    mutex.lock_owned().await
}

/// Repairs what a crash left in `tools_dir` (under its lock, waiting at most the lock's
/// patience) and returns one sentence per repair: staging directories of generations that
/// ended, lock files in the history, recorded versions that never went live.
pub async fn recover(tools_dir: &Path) -> Result<Vec<String>, Error> {
    if !tools_dir.is_dir() {
        return Ok(Vec::new());
    }
    crate::confine::check_tools_dir(tools_dir)?;
    let locked = lock::lock(tools_dir, lock::LOCK_PATIENCE).await?;
    recovery::recover(tools_dir, &locked)
}

/// Runs the whole pipeline for `request` ([`Request::from_json`] checked it against the
/// request schema once). `existing` is the catalog the name is checked against; `live`, when
/// given, gets the registered tool (with the record of the probe the checks ran, so no other
/// tool file is probed again) and its subscribers (and MCP clients) hear of it. A registered
/// report carries the tool ([`Report::tool`]), ready to call through the same `toolsmith`
/// ([`Toolsmith::call_tool`]). The checks run with `toolsmith`'s executor and run
/// configuration, under no operator's policy list (they are the generator's own calls).
pub async fn generate(
    toolsmith: &Toolsmith,
    request: &Request,
    existing: &Catalog,
    live: Option<&LiveRegistry>,
    config: &GeneratorConfig,
) -> Result<Report, Error> {
    let (executor, run_config) = (toolsmith.executor(), toolsmith.config());
    let _serialized = serialize_name(request.name.as_str()).await;
    let mut checks = match checked_request(request, existing, config) {
        Ok(checks) => checks,
        Err(rejected) => return Ok(*rejected),
    };
    let name = request.name.clone();
    let exposed = Some(name.exposed());
    let tera = render::template_of(config.templates_dir.as_deref(), request.language)?;
    let Some(implementation) = request.implementation.clone() else {
        return scaffold(&tera, request, config, checks);
    };
    let rendered = render::render(&tera, request, &implementation)?;
    checks.push(CheckReport::passed("render", None));

    let message = if request.replace {
        "replaced from a custom_tool request"
    } else {
        "registered from a custom_tool request"
    };
    crate::confine::check_tools_dir(&config.tools_dir)?;
    recovery::sweep_staging(&config.tools_dir);
    let staging = Staging::create(&config.tools_dir, &name)?;
    let staged = staging.dir.join(&rendered.file_name);
    write_unsynced(&staged, &rendered)?;
    // Off the checks' path, on the blocking pool: the file's fsync (through a read-only
    // descriptor, since a process that holds a writable one cannot be executed) and, for a
    // tools directory without history, the new repository holding this version. Both are
    // awaited before anything else happens to the staging directory.
    let synced = tokio::task::spawn_blocking({
        let staged = staged.clone();
        move || sync_file(&staged)
    });
    let scratch = staging.dir.join(history::HISTORY_DIR);
    // Only the empty repository: its first version is written once the checks passed, with
    // their provenance.
    let fresh_history = (!history::exists(&config.tools_dir)).then(|| {
        tokio::task::spawn_blocking({
            let scratch = scratch.clone();
            let sweep = staging.sweeper();
            move || {
                let initialized = history::init_fresh(&scratch);
                sweep();
                initialized
            }
        })
    });

    // An embedded template prints exactly what the generator rendered; an overriding one may
    // print anything, so its file is asked.
    let overridden = config
        .templates_dir
        .as_deref()
        .is_some_and(|dir| dir.join(request.language.template()).is_file());
    let answers = if overridden {
        None
    } else {
        render::kodelet_answers(request)
    };
    let mut probes = DiscoveryCache::in_memory();
    let staged_checks = check_staged(
        executor,
        &staging.dir,
        &staged,
        request,
        answers,
        run_config,
        &mut probes,
    )
    .await;
    let synced = joined(synced, &staged).await;
    let fresh_history = match fresh_history {
        Some(task) => Some(joined(task, &scratch).await),
        None => None,
    };
    let sandboxed = staged_checks?;
    if sandboxed.checks.iter().any(|check| !check.ok) {
        // Not `predicted`: the checks start with `registry`.
        checks.extend(sandboxed.checks);
        return Ok(Report::rejected(name.as_str().to_owned(), exposed, checks));
    }
    synced?;
    // The registered file carries the declaration its tests were learned under; the checks
    // from `registry` on are final once its probe compared it with the predicted tool.
    let (rendered, staged_checks) = carry_learned(
        executor,
        &tera,
        (request, &implementation),
        sandboxed,
        (&staging.dir, &staged),
        (run_config, &mut probes),
    )
    .await?;
    checks.extend(staged_checks);
    if checks.iter().any(|check| !check.ok) {
        return Ok(Report::rejected(name.as_str().to_owned(), exposed, checks));
    }
    let staged = Staged {
        staging,
        file: staged,
        rendered,
        fresh_history,
        message,
        probes,
    };
    register(executor, request, staged, config, live, run_config, checks).await
}

/// The request parsed and its name checked against `existing` and the tools directory: the
/// request with the checks passed so far, or the report rejecting it.
fn checked_request(
    request: &Request,
    existing: &Catalog,
    config: &GeneratorConfig,
) -> Result<Vec<CheckReport>, Box<Report>> {
    let name = &request.name;
    let mut checks = vec![CheckReport::passed("request", None)];
    let existing_file = tool_files(&config.tools_dir, name)
        .into_iter()
        .find(|path| path.exists());
    // A file policy refuses was not probed, but it is there all the same.
    let existing_tool = existing
        .get(name)
        .map(|tool| tool.path().to_path_buf())
        .or_else(|| existing.get_denied(name).map(|denied| denied.path.clone()));
    match (existing_tool.or(existing_file), request.replace) {
        (Some(path), false) => {
            checks.push(CheckReport::failed(
                "name",
                format!(
                    "tool `{name}` exists already ({}); send \"replace\": true to replace it",
                    path.display()
                ),
            ));
            return Err(Box::new(Report::rejected(
                name.as_str().to_owned(),
                Some(name.exposed()),
                checks,
            )));
        }
        (Some(path), true)
            if !toolsmith_registry::is_generated(&path, name)
                && !config.may_replace.contains(name) =>
        {
            checks.push(CheckReport::failed(
                "name",
                format!(
                    "tool `{name}` ({}) was not written by the generator; replacing or shadowing it needs the operator's consent: `[generator] may_replace = [\"{name}\"]`",
                    path.display()
                ),
            ));
            return Err(Box::new(Report::rejected(
                name.as_str().to_owned(),
                Some(name.exposed()),
                checks,
            )));
        }
        (Some(path), true) => checks.push(CheckReport::passed(
            "name",
            Some(format!("replaces {}", path.display())),
        )),
        (None, _) => checks.push(CheckReport::passed("name", None)),
    }
    Ok(checks)
}

/// A request without an implementation: its skeleton and the request itself written to a
/// draft directory, for a person or an agent to fill in.
fn scaffold(
    tera: &tera::Tera,
    request: &Request,
    config: &GeneratorConfig,
    checks: Vec<CheckReport>,
) -> Result<Report, Error> {
    let name = &request.name;
    let rendered = render::render(tera, request, &skeleton(request))?;
    let draft_dir = config.drafts_dir.join(name.as_str());
    write_new_dir(&draft_dir)?;
    let path = draft_dir.join(&rendered.file_name);
    write_file(&path, &rendered)?;
    fs::write(
        draft_dir.join("request.json"),
        serde_json::to_string_pretty(&request_json(request))
            .unwrap_or_default()
            .as_bytes(),
    )
    .map_err(|source| Error::Io {
        path: draft_dir.join("request.json"),
        source,
    })?;
    Ok(Report {
        status: Status::Scaffolded,
        name: name.as_str().to_owned(),
        exposed_name: Some(name.exposed()),
        path: Some(draft_dir),
        version: None,
        commit: None,
        checks,
        repairs: Vec::new(),
        tool: None,
    })
}

/// A registration of the live registry in progress, with the path it names the installed
/// file by, if it filed the file's record.
pub(crate) type LiveRegistration<'live> = (Registration<'live>, Option<PathBuf>);

/// A tool that passed its checks in the staging directory, ready to move into place.
struct Staged {
    staging: Staging,
    file: PathBuf,
    rendered: RenderedTool,
    /// The new, empty repository that will hold this version, for a tools directory without
    /// history.
    fresh_history: Option<Result<PathBuf, Error>>,
    message: &'static str,
    /// What the checks' probes of the staged file printed: the record the registration hands
    /// to the live registry.
    probes: DiscoveryCache,
}

/// Moves `staged` into the tools directory and records its version, under the directory's
/// lock, then tells `live`.
async fn register(
    executor: &Arc<Executor>,
    request: &Request,
    staged: Staged,
    config: &GeneratorConfig,
    live: Option<&LiveRegistry>,
    run_config: &RunConfig,
    mut checks: Vec<CheckReport>,
) -> Result<Report, Error> {
    let name = &request.name;
    let exposed = Some(name.exposed());
    // Other processes sharing the tools directory take turns from here: the name is checked
    // again on disk (another replica may have registered it since the first check), the file
    // goes in place and the version is recorded, all under the lock.
    let locked = lock::lock(&config.tools_dir, lock::LOCK_PATIENCE).await?;
    let repairs = recovery::recover(&config.tools_dir, &locked)?;
    crate::confine::check_tools_dir(&config.tools_dir)?;
    if !request.replace
        && let Some(path) = tool_files(&config.tools_dir, name)
            .into_iter()
            .find(|path| path.exists())
    {
        let detail = format!(
            "tool `{name}` was registered meanwhile by another process ({}); send \"replace\": true to replace it",
            path.display()
        );
        for check in checks.iter_mut().filter(|check| check.name == "name") {
            *check = CheckReport::failed("name", detail.clone());
        }
        return Ok(Report::rejected(name.as_str().to_owned(), exposed, checks));
    }

    // Write-ahead: the version's objects and the tool's ref are written and synced before
    // the file goes live with one `rename` (the commit point); if the `rename` fails, the ref
    // is put back, and a crash in between is undone by the next recovery.
    let Staged {
        staging,
        file,
        rendered,
        fresh_history,
        message,
        probes,
    } = staged;
    let recorded = match fresh_history {
        None => record(&config.tools_dir, name, &rendered, message, &checks),
        Some(fresh) => fresh
            .and_then(|scratch| history::record_fresh(&scratch, name, &rendered, message, &checks))
            .and_then(|fresh| match history::adopt(fresh, &config.tools_dir)? {
                Some(adopted) => Ok(adopted),
                None => record(&config.tools_dir, name, &rendered, message, &checks),
            }),
    };
    let pending = match recorded {
        Ok(pending) => pending,
        Err(error) => return Err(not_registered(&config.tools_dir, name, error)),
    };
    let installed =
        go_live_into(live, &config.tools_dir, &file, &rendered, &pending, &probes).await;
    let (path, registration) = match installed {
        Ok(installed) => installed,
        Err(error) => return Err(not_registered(&config.tools_dir, name, error)),
    };
    after_commit(&config.tools_dir, name, &path);
    // Publishing rescans from the cache: other processes need not wait for it.
    drop(locked);
    drop(staging);
    let tool = registered_tool(
        executor,
        registration,
        &config.tools_dir,
        (&file, &path),
        &probes,
        name,
        run_config,
    )
    .await;
    Ok(Report {
        status: Status::Registered,
        name: name.as_str().to_owned(),
        exposed_name: exposed,
        path: Some(path),
        version: Some(pending.version),
        commit: Some(pending.commit()),
        checks,
        repairs,
        tool,
    })
}

/// [`go_live`], with `live`'s cache locked across the `rename` and the record of the staged
/// file's probe (in `probes`) filed under the installed path before the lock is released: no
/// rescan of `live` ever probes the registered file, and none of a registration probes another
/// tool file. Returns the installed path and the registration to publish, with the path the
/// live registry names the file by (`None` when it keeps no record of it).
pub(crate) async fn go_live_into<'live>(
    live: Option<&'live LiveRegistry>,
    tools_dir: &Path,
    staged: &Path,
    rendered: &RenderedTool,
    pending: &history::Pending,
    probes: &DiscoveryCache,
) -> Result<(PathBuf, Option<LiveRegistration<'live>>), Error> {
    let registration = match live {
        Some(live) => Some(live.begin_registration().await),
        None => None,
    };
    let path = go_live(tools_dir, staged, rendered, pending)?;
    let registration = registration.map(|mut registration| {
        let served = registration.adopt(probes, staged, &path);
        if served.is_none() {
            tracing::debug!(path = %path.display(), "the staged probe's record was not kept; the live registry probes the file");
        }
        (registration, served)
    });
    Ok((path, registration))
}

/// The tool registered at `path`, loaded from the record of its staged probe: with a live
/// registry, the tool its published catalog serves from `path`; without, the one discovery
/// loads from `path` alone (from that record: a Kodelet tool's `config` not asked yet is asked
/// now, as at its first call). `None` when `path` does not provide the tool. `staged` is where
/// the file was probed.
pub(crate) async fn registered_tool(
    executor: &Arc<Executor>,
    registration: Option<LiveRegistration<'_>>,
    tools_dir: &Path,
    (staged, path): (&Path, &Path),
    probes: &DiscoveryCache,
    name: &ToolName,
    run_config: &RunConfig,
) -> Option<Tool> {
    if let Some((registration, served)) = registration {
        let (_event, catalog) = registration.publish().await;
        let served = served?;
        return catalog
            .get(name)
            .filter(|tool| tool.path() == served)
            .cloned();
    }
    let mut cache = DiscoveryCache::in_memory();
    cache.adopt(probes, staged, path);
    let catalog = discover_one(
        executor,
        &LayerDir::explicit(&[tools_dir.to_path_buf()]),
        &mut cache,
        name,
        run_config,
        &Policy::allow_all(),
    )
    .await;
    catalog
        .get(name)
        .filter(|tool| tool.path() == path)
        .cloned()
}

/// Writes and publishes the next version of `name` in the existing history, with the
/// provenance of `checks`, which all passed.
pub(crate) fn record(
    tools_dir: &Path,
    name: &ToolName,
    rendered: &RenderedTool,
    message: &str,
    checks: &[CheckReport],
) -> Result<history::Pending, Error> {
    let pending = history::prepare(tools_dir, name, rendered, message, checks)?;
    history::publish(&pending)?;
    Ok(pending)
}

/// The commit point: the staged file moves into place. If it cannot, the recorded version is
/// withdrawn again (and if even that fails, the next recovery withdraws it).
pub(crate) fn go_live(
    tools_dir: &Path,
    staged: &Path,
    rendered: &RenderedTool,
    pending: &history::Pending,
) -> Result<PathBuf, Error> {
    let installed = install(tools_dir, staged, rendered)
        .and_then(|path| crate::durable::sync_path(tools_dir).map(|()| path));
    if installed.is_err()
        && let Err(error) = history::unpublish(pending)
    {
        tracing::warn!(error = %toolsmith_registry::error_chain(&error), "cannot withdraw a version that did not go live; the next registration will");
    }
    installed
}

/// After the commit point nothing fails the registration: leftovers of the tool's older
/// format are removed now or by the next recovery.
pub(crate) fn after_commit(tools_dir: &Path, name: &ToolName, path: &Path) {
    if let Err(error) = remove_other_formats(tools_dir, name, path) {
        tracing::warn!(error = %toolsmith_registry::error_chain(&error), "cannot remove the tool's files of another format; the next registration will");
    }
}

/// A registration that failed before its commit point: the live tool is unchanged. What the
/// failure left in the history (a ref's lock file) is removed while the lock is still held.
pub(crate) fn not_registered(tools_dir: &Path, name: &ToolName, error: Error) -> Error {
    let _best_effort = recovery::remove_stale_files(&tools_dir.join(history::HISTORY_DIR));
    Error::NotRegistered {
        name: name.as_str().to_owned(),
        source: Box::new(error),
    }
}

/// The result of a blocking task working on `path`; a panic in it is resumed here.
async fn joined<T>(
    task: tokio::task::JoinHandle<Result<T, Error>>,
    path: &Path,
) -> Result<T, Error> {
    match task.await {
        Ok(result) => result,
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Blocking tasks are never aborted: only a runtime shutting down cancels one.
            Err(_cancelled) => Err(Error::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "cancelled with the runtime",
                ),
            }),
        },
    }
}

/// Writes a working skeleton of a tool into `dir` (for `toolsmith new` and
/// `cargo xtask new-tool`): the request's template with a body that returns its arguments.
/// Refuses to overwrite. Returns the file written.
pub fn new_tool(
    dir: &Path,
    request: &Value,
    templates_dir: Option<&Path>,
) -> Result<PathBuf, NewToolError> {
    let request = Request::from_json(request).map_err(NewToolError::Request)?;
    let tera =
        render::template_of(templates_dir, request.language).map_err(NewToolError::Generator)?;
    let rendered =
        render::render(&tera, &request, &skeleton(&request)).map_err(NewToolError::Generator)?;
    for path in tool_files(dir, &request.name) {
        if path.exists() {
            return Err(NewToolError::Generator(Error::Exists { path }));
        }
    }
    fs::create_dir_all(dir).map_err(|source| {
        NewToolError::Generator(Error::Io {
            path: dir.to_path_buf(),
            source,
        })
    })?;
    let path = dir.join(&rendered.file_name);
    write_file(&path, &rendered).map_err(NewToolError::Generator)?;
    Ok(path)
}

/// Why `new_tool` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum NewToolError {
    /// The name, description or parameters were refused.
    #[error(transparent)]
    Request(crate::RequestError),
    /// Writing failed, or the file exists.
    #[error(transparent)]
    Generator(Error),
}

/// The body of a skeleton: it returns (prints) the arguments it was given.
fn skeleton(request: &Request) -> String {
    match request.language {
        Language::Python => {
            "# Replace this body: return any JSON-serializable value.\nreturn {\"arguments\": args}"
                .to_owned()
        }
        Language::Bash => {
            "# Replace this fragment: print the result on stdout. Each argument is in ARG_<NAME>;\n# the JSON object of the call is on stdin.\ncat\necho"
                .to_owned()
        }
        Language::Manifest => {
            let mut body =
                String::from("# Replace this body: print the result on stdout.\n");
            if request.parameters.is_empty() {
                body.push_str(&format!("echo '{} ran'\n", request.name.as_str()));
            }
            for parameter in &request.parameters {
                body.push_str(&format!(
                    "printf '%s=%s\\n' {} {{{{ {} }}}}\n",
                    parameter.name, parameter.name
                ));
            }
            body
        }
    }
}

/// The request as JSON again, saved next to a draft so it can be completed and sent.
fn request_json(request: &Request) -> Value {
    let mut parameters = serde_json::Map::new();
    for parameter in &request.parameters {
        let mut spec = parameter.schema.clone();
        if parameter.required {
            spec.insert("required".to_owned(), Value::Bool(true));
        }
        parameters.insert(parameter.name.clone(), Value::Object(spec));
    }
    serde_json::json!({
        "name": request.name.as_str(),
        "description": request.description,
        "language": request.language.as_str(),
        "parameters": parameters,
        "tests": request.tests.iter().map(|case| case.to_json()).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use toolsmith_executor::{BackendChoice, ExecutorConfig, Limits, filtered_env};
    use toolsmith_registry::{SandboxSettings, load_answered};

    use super::*;
    use crate::staged_checks::carry_learned;
    use crate::staged_checks::{configured, described_difference, discover_staged};

    struct Staged {
        _temp: tempfile::TempDir,
        dir: PathBuf,
        file: PathBuf,
        request: Request,
        executor: Arc<Executor>,
        run_config: RunConfig,
    }

    /// `request` rendered from the embedded template into a staging directory of its own.
    fn stage(request: Value) -> Staged {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("staging");
        fs::create_dir(&dir).unwrap();
        let request = Request::from_json(&request).unwrap();
        let tera = render::template_of(None, request.language).unwrap();
        let implementation = request.implementation.clone().unwrap();
        let rendered = render::render(&tera, &request, &implementation).unwrap();
        let file = dir.join(&rendered.file_name);
        write_file(&file, &rendered).unwrap();
        let executor = Arc::new(
            Executor::new(ExecutorConfig {
                backend: BackendChoice::Auto,
                max_concurrent: None,
            })
            .unwrap(),
        );
        let mut limits = Limits::recommended();
        limits.timeout = Duration::from_secs(10);
        let run_config = RunConfig {
            cwd: temp.path().to_path_buf(),
            env: filtered_env(&[], &[("PATH".to_owned(), "/usr/bin:/bin".to_owned())]),
            limits,
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
        Staged {
            _temp: temp,
            dir,
            file,
            request,
            executor,
            run_config,
        }
    }

    /// The pipeline calls a generated executable before discovery has probed it, with the
    /// answers it expects from the embedded template: they must be exactly what the file
    /// answers, `config` included (which discovery asks only at a tool's first call).
    #[tokio::test]
    async fn the_answers_are_what_the_embedded_templates_print() {
        for (language, implementation) in [("bash", "echo hi"), ("python", "return 'hi'")] {
            let staged = stage(json!({
                "name": "say_hi", "description": "Says hi.", "language": language,
                "parameters": {"who": {"type": "integer", "default": 3}},
                "output_schema": {"type": "string"}, "requires_network": true,
                "timeout_seconds": 45, "implementation": implementation,
                "tests": [{"input": {}, "expect": {"result": "hi"}}],
            }));
            let mut probes = DiscoveryCache::in_memory();
            let discovered = discover_staged(
                &staged.executor,
                &staged.dir,
                &staged.request.name,
                &staged.run_config,
                &mut probes,
            )
            .await
            .unwrap();
            let discovered = configured(
                &staged.executor,
                &discovered,
                &staged.run_config,
                &mut probes,
            )
            .await
            .unwrap();
            let (description, config) = render::kodelet_answers(&staged.request).unwrap();
            let answered = load_answered(&staged.file, description.as_bytes(), config.as_bytes())
                .unwrap()
                .unwrap();
            assert_eq!(
                described_difference(&discovered, &answered),
                None,
                "{language}"
            );
            assert_eq!(
                discovered.requested_timeout(),
                Some(Duration::from_secs(45)),
                "{language}"
            );
            assert_eq!(answered.requested_timeout(), discovered.requested_timeout());
            assert!(!answered.config_pending() && !discovered.config_pending());
        }
    }

    /// The checks of `staged` from `registry` on, as the pipeline runs them: `answers` for the
    /// checks before learning, then the file rewritten from `tera` with the learned declaration
    /// and probed once.
    async fn staged_and_carried(
        staged: &Staged,
        answers: (String, String),
        tera: &tera::Tera,
    ) -> Vec<CheckReport> {
        let mut probes = DiscoveryCache::in_memory();
        let sandboxed = check_staged(
            &staged.executor,
            &staged.dir,
            &staged.file,
            &staged.request,
            Some(answers),
            &staged.run_config,
            &mut probes,
        )
        .await
        .unwrap();
        // Every check passed on the predicted tool, and nothing was probed yet.
        assert!(sandboxed.predicted.is_some(), "{:?}", sandboxed.checks);
        assert!(probes.is_empty());
        let implementation = staged.request.implementation.clone().unwrap();
        let (_rendered, checks) = carry_learned(
            &staged.executor,
            tera,
            (&staged.request, &implementation),
            sandboxed,
            (&staged.dir, &staged.file),
            (&staged.run_config, &mut probes),
        )
        .await
        .unwrap();
        assert_eq!(checks[0].name, "registry", "{checks:?}");
        assert_eq!(checks.last().unwrap().name, "declaration", "{checks:?}");
        checks
    }

    /// When the checks ran on a predicted tool that discovery does not load from the file (the
    /// answers forged: another description), they prove nothing: the file's `config` is asked
    /// and they run again on discovery's tool, which passes them here.
    #[tokio::test]
    async fn checks_are_discoverys_when_the_answers_differ() {
        let staged = stage(json!({
            "name": "say_hi", "description": "Says hi.", "language": "bash",
            "implementation": "echo hi",
            "tests": [{"input": {}, "expect": {"result": "hi"}}],
        }));
        let (description, config) = render::kodelet_answers(&staged.request).unwrap();
        let mut forged: Value = serde_json::from_str(&description).unwrap();
        forged["description"] = json!("Says bye.");
        let tera = render::template_of(None, Language::Bash).unwrap();
        let checks = staged_and_carried(&staged, (forged.to_string(), config), &tera).await;
        let failing: Vec<&CheckReport> = checks.iter().filter(|check| !check.ok).collect();
        assert!(failing.is_empty(), "{failing:?}");
        let network = checks.iter().find(|check| check.name == "network").unwrap();
        assert_eq!(network.detail.as_deref(), Some("network none"));
    }

    /// A file that, rewritten with its learned declaration, is not the predicted tool (here a
    /// template that changes the description and the behaviour) is checked again as
    /// discovery loads it, so the request is rejected by its failing test: a wrong prediction
    /// never registers a tool nobody checked.
    #[tokio::test]
    async fn a_wrong_prediction_never_registers_an_unchecked_tool() {
        let staged = stage(json!({
            "name": "say_hi", "description": "Says hi.", "language": "bash",
            "implementation": "echo hi",
            "tests": [{"input": {}, "expect": {"result": "hi"}}],
        }));
        let answers = render::kodelet_answers(&staged.request).unwrap();
        let embedded = include_str!("../../../templates/bash.tera")
            .replace(
                "{{ description_json | shell_quote }}",
                "{{ description_json | replace(from=\"Says hi.\", to=\"Says bye.\") | shell_quote }}",
            )
            .replace("{{ implementation }}", "echo bye");
        let templates = tempfile::tempdir().unwrap();
        fs::write(templates.path().join(Language::Bash.template()), embedded).unwrap();
        let tera = render::template_of(Some(templates.path()), Language::Bash).unwrap();
        let checks = staged_and_carried(&staged, answers, &tera).await;
        assert!(checks[0].ok, "{checks:?}");
        let test = checks
            .iter()
            .find(|check| check.name.starts_with("test: "))
            .unwrap();
        assert!(!test.ok, "{checks:?}");
        assert!(
            test.detail.as_deref().unwrap_or_default().contains("bye"),
            "{checks:?}"
        );
        assert!(!checks.last().unwrap().ok, "{checks:?}");
    }
}
