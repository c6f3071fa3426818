//! The pipeline of a request: check it, render it into a staging directory, check the staged tool as the registry would and run it in the sandbox, and only then move it into place atomically, record the version and tell the live registry; plus rollback and the `new` skeletons.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Serialize;
use serde_json::Value;
use toolsmith_executor::Executor;
use toolsmith_registry::{
    Catalog, DiscoveryCache, Envelope, ErrorCode, LiveRegistry, Policy, Problem, RunConfig, Tool,
    ToolName, discover, error_chain, invoke, load_answered, resolve_config, run_cases,
};

use crate::history::{self, Version};
use crate::lock;
use crate::render::{self, RenderedTool};
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
    fn passed(name: &str, detail: Option<String>) -> CheckReport {
        CheckReport {
            name: name.to_owned(),
            ok: true,
            detail,
        }
    }

    fn failed(name: &str, detail: String) -> CheckReport {
        CheckReport {
            name: name.to_owned(),
            ok: false,
            detail: Some(detail),
        }
    }
}

/// The report of a request, for people and agents: a rejected request's failing check
/// explains what to repair before resubmitting with `replace: true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
        }
    }
}

/// Held for the whole of a generation or rollback in this process, so that concurrent
/// requests (an MCP client may send several) see each other's tools: the name check, the
/// `rename` and the history commit of one never interleave with another's. Across processes,
/// the lock on the tools directory ([`lock::lock`]) serializes the `rename` and the commit,
/// and the history's compare-and-swap on the tool's ref stays as the last guard.
static PIPELINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs the whole pipeline for `request` (JSON). `existing` is the catalog the name is
/// checked against; `live`, when given, is refreshed after registration so that its
/// subscribers (and MCP clients) hear of the new tool.
pub async fn generate(
    executor: &Arc<Executor>,
    request: &Value,
    existing: &Catalog,
    live: Option<&LiveRegistry>,
    config: &GeneratorConfig,
    run_config: &RunConfig,
) -> Result<Report, Error> {
    let _serialized = PIPELINE.lock().await;
    let requested_name = request
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let request = match Request::from_json(request) {
        Ok(request) => request,
        Err(error) => {
            return Ok(Report::rejected(
                requested_name,
                None,
                vec![CheckReport::failed("request", error_chain(&error))],
            ));
        }
    };
    let name = request.name.clone();
    let mut checks = vec![CheckReport::passed("request", None)];
    let exposed = Some(name.exposed());

    let existing_file = tool_files(&config.tools_dir, &name)
        .into_iter()
        .find(|path| path.exists());
    // A file policy refuses was not probed, but it is there all the same.
    let existing_tool = existing
        .get(&name)
        .map(|tool| tool.path().to_path_buf())
        .or_else(|| existing.get_denied(&name).map(|denied| denied.path.clone()));
    match (existing_tool.or(existing_file), request.replace) {
        (Some(path), false) => {
            checks.push(CheckReport::failed(
                "name",
                format!(
                    "tool `{name}` exists already ({}); send \"replace\": true to replace it",
                    path.display()
                ),
            ));
            return Ok(Report::rejected(name.as_str().to_owned(), exposed, checks));
        }
        (Some(path), true) => checks.push(CheckReport::passed(
            "name",
            Some(format!("replaces {}", path.display())),
        )),
        (None, _) => checks.push(CheckReport::passed("name", None)),
    }

    let tera = render::template_of(config.templates_dir.as_deref(), request.language)?;
    let Some(implementation) = request.implementation.clone() else {
        let rendered = render::render(&tera, &request, &skeleton(&request))?;
        let draft_dir = config.drafts_dir.join(name.as_str());
        write_new_dir(&draft_dir)?;
        let path = draft_dir.join(&rendered.file_name);
        write_file(&path, &rendered)?;
        fs::write(
            draft_dir.join("request.json"),
            serde_json::to_string_pretty(&request_json(&request))
                .unwrap_or_default()
                .as_bytes(),
        )
        .map_err(|source| Error::Io {
            path: draft_dir.join("request.json"),
            source,
        })?;
        return Ok(Report {
            status: Status::Scaffolded,
            name: name.as_str().to_owned(),
            exposed_name: exposed,
            path: Some(draft_dir),
            version: None,
            commit: None,
            checks,
        });
    };
    let rendered = render::render(&tera, &request, &implementation)?;
    checks.push(CheckReport::passed("render", None));

    let message = if request.replace {
        "replaced from a custom_tool request"
    } else {
        "registered from a custom_tool request"
    };
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
    let fresh_history = (!history::exists(&config.tools_dir)).then(|| {
        tokio::task::spawn_blocking({
            let scratch = scratch.clone();
            let name = name.clone();
            let rendered = rendered.clone();
            let sweep = staging.sweeper();
            move || {
                let pending = history::prepare_fresh(&scratch, &name, &rendered, message);
                sweep();
                pending
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
        render::kodelet_answers(&request)
    };
    let staged_checks = check_staged(
        executor,
        &staging.dir,
        &staged,
        &request,
        answers,
        run_config,
    )
    .await;
    let synced = joined(synced, &staged).await;
    let fresh_history = match fresh_history {
        Some(task) => Some(joined(task, &scratch).await),
        None => None,
    };
    checks.extend(staged_checks?);
    if checks.iter().any(|check| !check.ok) {
        return Ok(Report::rejected(name.as_str().to_owned(), exposed, checks));
    }
    synced?;

    // Other processes sharing the tools directory take turns from here: the name is checked
    // again on disk (another replica may have registered it since the first check), the file
    // goes in place and the version is recorded, all under the lock.
    let locked = lock::lock(&config.tools_dir, lock::LOCK_PATIENCE).await?;
    if !request.replace
        && let Some(path) = tool_files(&config.tools_dir, &name)
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

    // The version is recorded once the file is in place: an existing history gets its commit
    // first and its ref moved after the `rename`; a new one is moved into place whole.
    let (path, pending) = match fresh_history {
        None => {
            let pending = history::prepare(&config.tools_dir, &name, &rendered, message)?;
            let path = install(&config.tools_dir, &name, &staged, &rendered)?;
            history::publish(&pending)?;
            (path, pending)
        }
        Some(fresh) => {
            let fresh = fresh?;
            let path = install(&config.tools_dir, &name, &staged, &rendered)?;
            let pending = match history::adopt(fresh, &config.tools_dir)? {
                Some(adopted) => adopted,
                None => {
                    let pending = history::prepare(&config.tools_dir, &name, &rendered, message)?;
                    history::publish(&pending)?;
                    pending
                }
            };
            (path, pending)
        }
    };
    // The refresh below probes every file: other processes need not wait for it.
    drop(locked);
    drop(staging);
    if let Some(live) = live {
        live.refresh().await;
    }
    Ok(Report {
        status: Status::Registered,
        name: name.as_str().to_owned(),
        exposed_name: exposed,
        path: Some(path),
        version: Some(pending.version),
        commit: Some(pending.commit()),
        checks,
    })
}

/// The checks of the staged file from `registry` on: discovery loads it as any tool (its
/// `description` probe), and [`check_in_sandbox`] calls it as its first caller would (its
/// `config` answered, then its runs).
///
/// A file rendered from an embedded template answers its probes what the generator rendered
/// (`answers`: the description, and the request's timeout for `config`), so the registry's
/// own loader turns those answers into the tool at once and the sandbox checks run while
/// discovery probes the file. They count only if discovery then loads the very same tool from
/// the file; when it does not, its `config` is asked and the checks run again on the tool
/// discovery loaded. Without `answers` (a manifest, which discovery reads without running
/// anything; an overriding template, whose answers only the file knows) the file's
/// `config` is asked after its description and the checks run on discovery's tool.
/// When discovery refuses the file, the `registry` check says why and the runs still under
/// way are dropped (the executor kills them).
async fn check_staged(
    executor: &Arc<Executor>,
    staging_dir: &Path,
    staged: &Path,
    request: &Request,
    answers: Option<(String, String)>,
    run_config: &RunConfig,
) -> Result<Vec<CheckReport>, Error> {
    let discovery = discover_staged(executor, staging_dir, &request.name, run_config);
    let answered = answers.and_then(|(description, config)| {
        load_answered(staged, description.as_bytes(), config.as_bytes())
            .ok()
            .flatten()
    });
    let Some(answered) = answered else {
        let discovered = match discovery.await {
            Ok(tool) => configured(executor, &tool, run_config).await,
            Err(problem) => Err(problem),
        };
        return match discovered {
            Ok(tool) => with_registry(check_in_sandbox(executor, &tool, request, run_config).await),
            Err(problem) => Ok(vec![CheckReport::failed("registry", problem)]),
        };
    };
    let early = check_in_sandbox(executor, &answered, request, run_config);
    tokio::pin!(discovery, early);
    let (discovered, early) = tokio::select! {
        discovered = &mut discovery => match discovered {
            Ok(tool) => (tool, early.await),
            Err(problem) => return Ok(vec![CheckReport::failed("registry", problem)]),
        },
        early = &mut early => match discovery.await {
            Ok(tool) => (tool, early),
            Err(problem) => return Ok(vec![CheckReport::failed("registry", problem)]),
        },
    };
    match described_difference(&discovered, &answered) {
        None => with_registry(early),
        Some(field) => {
            tracing::debug!(
                field,
                "discovery loaded another tool than the generator rendered; checking it instead"
            );
            match configured(executor, &discovered, run_config).await {
                Ok(tool) => {
                    with_registry(check_in_sandbox(executor, &tool, request, run_config).await)
                }
                Err(problem) => Ok(vec![CheckReport::failed("registry", problem)]),
            }
        }
    }
}

/// The passed `registry` check followed by `checks`.
fn with_registry(checks: Result<Vec<CheckReport>, Error>) -> Result<Vec<CheckReport>, Error> {
    let mut all = vec![CheckReport::passed("registry", None)];
    all.extend(checks?);
    Ok(all)
}

/// The tool `name` as discovery loads it from the staging directory; or why not, for the
/// `registry` check.
async fn discover_staged(
    executor: &Arc<Executor>,
    staging_dir: &Path,
    name: &ToolName,
    run_config: &RunConfig,
) -> Result<Tool, String> {
    let catalog = discover(executor, &[staging_dir.to_path_buf()], run_config).await;
    match (catalog.get(name), catalog.problems().first()) {
        (Some(tool), None) => Ok(tool.clone()),
        (_, Some(problem)) => Err(problem.message()),
        (None, None) => Err(format!(
            "discovery found no tool `{name}` in the staged file"
        )),
    }
}

/// `tool` with its `config` asked, as at its first call; or why it cannot be called, for the
/// `registry` check.
async fn configured(
    executor: &Arc<Executor>,
    tool: &Tool,
    run_config: &RunConfig,
) -> Result<Tool, String> {
    resolve_config(executor, tool, &mut DiscoveryCache::in_memory(), run_config)
        .await
        .map_err(|error| {
            Problem {
                path: tool.path().to_path_buf(),
                error,
            }
            .message()
        })
}

/// The first property that a Kodelet tool's description determines in which two tools
/// differ; `None` when, their `config` aside, a call of one runs exactly as a call of the
/// other.
fn described_difference(left: &Tool, right: &Tool) -> Option<&'static str> {
    let output_schema = |tool: &Tool| tool.output_schema().map(|schema| schema.as_json().clone());
    [
        ("name", left.name() == right.name()),
        ("description", left.description() == right.description()),
        (
            "input schema",
            left.input_schema().as_json() == right.input_schema().as_json(),
        ),
        ("output schema", output_schema(left) == output_schema(right)),
        ("annotations", left.annotations() == right.annotations()),
        ("sandbox", left.sandbox() == right.sandbox()),
        ("path", left.path() == right.path()),
        ("source", left.source() == right.source()),
        ("layer", left.layer() == right.layer()),
        ("kind", left.kind() == right.kind()),
        ("tests", left.tests() == right.tests()),
        (
            "env arguments",
            left.env_arguments() == right.env_arguments(),
        ),
        ("shell", left.manifest_shell() == right.manifest_shell()),
    ]
    .into_iter()
    .find(|(_, same)| !same)
    .map(|(field, _)| field)
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

/// The checks that run the staged tool: its schema is the request's, every test case
/// passes, a call without a required argument is `INVALID_PARAMS`, no run leaves a
/// process behind, and the network was denied to it unless the request says
/// `requires_network`.
///
/// The runs get exactly the sandbox of every later call (a private PID namespace
/// included: toolsmith's init outlives the tool, so the executor counts what it
/// leaves behind there too).
///
/// Each check is one block pushing one [`CheckReport`]; a new check is one more block
/// here, using `tool`, `request` and `envelopes` (every envelope of the runs so far).
async fn check_in_sandbox(
    executor: &Arc<Executor>,
    tool: &Tool,
    request: &Request,
    run_config: &RunConfig,
) -> Result<Vec<CheckReport>, Error> {
    let policy = Policy::allow_all();
    let mut checks = Vec::new();
    let mut envelopes: Vec<Envelope> = Vec::new();

    let expected = request.input_schema();
    let declared = tool.input_schema().as_json();
    if *declared == expected {
        checks.push(CheckReport::passed("schema", None));
    } else {
        checks.push(CheckReport::failed(
            "schema",
            format!("expected the input schema {expected}, the tool declares {declared}"),
        ));
    }

    let outcomes = run_cases(executor, tool, &request.tests, run_config, &policy).await?;
    for outcome in outcomes {
        let name = format!("test: {}", outcome.name);
        checks.push(match &outcome.mismatch {
            None => CheckReport::passed(&name, None),
            Some(mismatch) => CheckReport::failed(&name, mismatch.clone()),
        });
        envelopes.push(outcome.envelope);
    }

    if let Some(missing) = request
        .parameters
        .iter()
        .find(|parameter| parameter.required)
    {
        let mut arguments = request
            .tests
            .first()
            .map(|case| case.input.clone())
            .unwrap_or_default();
        arguments.remove(&missing.name);
        let envelope = invoke(
            executor,
            tool,
            &Value::Object(arguments),
            run_config,
            &policy,
        )
        .await?;
        checks.push(match envelope.error_code() {
            Some(ErrorCode::InvalidParams) => CheckReport::passed(
                "missing_required",
                Some(format!(
                    "a call without `{}` is INVALID_PARAMS",
                    missing.name
                )),
            ),
            _ => CheckReport::failed(
                "missing_required",
                format!(
                    "a call without `{}` should be INVALID_PARAMS, got {}",
                    missing.name,
                    serde_json::to_string(&envelope).unwrap_or_default()
                ),
            ),
        });
        envelopes.push(envelope);
    }

    let leftovers: u64 = envelopes
        .iter()
        .filter_map(|envelope| envelope.metadata.leftovers_killed)
        .sum();
    checks.push(if leftovers == 0 {
        CheckReport::passed("no_leftovers", None)
    } else {
        CheckReport::failed(
            "no_leftovers",
            format!("the tool left {leftovers} process(es) running after it ended (killed)"),
        )
    });

    let wanted = if request.requires_network {
        "allow"
    } else {
        "deny"
    };
    let applied: Vec<&str> = envelopes
        .iter()
        .filter_map(|envelope| envelope.metadata.sandbox.as_ref())
        .map(|sandbox| sandbox.network)
        .collect();
    checks.push(
        if !applied.is_empty() && applied.iter().all(|network| *network == wanted) {
            CheckReport::passed("network", Some(format!("network {wanted} in every run")))
        } else {
            CheckReport::failed(
                "network",
                format!(
                    "every run should have network {wanted} (requires_network: {}), the runs had {applied:?}",
                    request.requires_network
                ),
            )
        },
    );
    Ok(checks)
}

/// Restores version `to` (default: the one before the latest) of `name` as a new version,
/// and refreshes `live` when given. Returns the new version.
pub async fn rollback(
    tools_dir: &Path,
    name: &ToolName,
    to: Option<u32>,
    live: Option<&LiveRegistry>,
) -> Result<Version, Error> {
    let _serialized = PIPELINE.lock().await;
    let versions = history::history(tools_dir, name)?;
    let latest = u32::try_from(versions.len()).unwrap_or(u32::MAX);
    let target = to.unwrap_or(latest.saturating_sub(1));
    let Some(version) = versions
        .iter()
        .find(|version| version.version == target && target >= 1)
    else {
        return Err(Error::NoSuchVersion {
            name: name.as_str().to_owned(),
            version: target,
            latest,
        });
    };
    let rendered = history::contents(tools_dir, version)?;
    let staging = Staging::create(tools_dir, name)?;
    let staged = staging.dir.join(&rendered.file_name);
    write_file(&staged, &rendered)?;
    let locked = lock::lock(tools_dir, lock::LOCK_PATIENCE).await?;
    let pending = history::prepare(
        tools_dir,
        name,
        &rendered,
        &format!("rollback to v{target}"),
    )?;
    install(tools_dir, name, &staged, &rendered)?;
    history::publish(&pending)?;
    drop(locked);
    drop(staging);
    if let Some(live) = live {
        live.refresh().await;
    }
    history::history(tools_dir, name)?
        .pop()
        .ok_or_else(|| Error::NoHistory {
            name: name.as_str().to_owned(),
        })
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

/// The files in `dir` that would provide the tool `name`, in any format.
fn tool_files(dir: &Path, name: &ToolName) -> Vec<PathBuf> {
    let name = name.as_str();
    let dashed = name.replace('_', "-");
    let mut files = vec![
        dir.join(name),
        dir.join(format!("{name}.md")),
        dir.join(format!("{name}-tool")),
    ];
    if dashed != name {
        files.push(dir.join(&dashed));
        files.push(dir.join(format!("{dashed}.md")));
        files.push(dir.join(format!("{dashed}-tool")));
    }
    files
}

/// Moves the staged file into `tools_dir` with one `rename` (atomic: a reader sees the old
/// file or the new one), then removes the tool's files of other formats.
fn install(
    tools_dir: &Path,
    name: &ToolName,
    staged: &Path,
    rendered: &RenderedTool,
) -> Result<PathBuf, Error> {
    let target = tools_dir.join(&rendered.file_name);
    fs::rename(staged, &target).map_err(|source| Error::Io {
        path: target.clone(),
        source,
    })?;
    for other in tool_files(tools_dir, name) {
        if other != target && other.exists() {
            fs::remove_file(&other).map_err(|source| Error::Io {
                path: other.clone(),
                source,
            })?;
        }
    }
    Ok(target)
}

fn write_new_dir(dir: &Path) -> Result<(), Error> {
    fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes a new file (never replacing one) with the tool's mode, and waits until it is on
/// the disk.
fn write_file(path: &Path, rendered: &RenderedTool) -> Result<(), Error> {
    write_unsynced(path, rendered)?;
    sync_file(path)
}

/// Writes a new file (never replacing one) with the tool's mode, without waiting for it to
/// reach the disk: the pipeline syncs it ([`sync_file`]) while the checks run.
fn write_unsynced(path: &Path, rendered: &RenderedTool) -> Result<(), Error> {
    let io_error = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_error)?;
    file.write_all(rendered.contents.as_bytes())
        .map_err(io_error)?;
    let mode = if rendered.executable { 0o755 } else { 0o644 };
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io_error)
}

/// Waits until the file at `path` is on the disk, through a read-only descriptor: a
/// writable one, held while a process is spawned, would make the file busy for `execve`.
fn sync_file(path: &Path) -> Result<(), Error> {
    fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// A staging directory inside the tools directory (so the final `rename` stays on one
/// filesystem), hidden from discovery, removed on drop with everything in it, along with
/// the directories it created.
struct Staging {
    dir: PathBuf,
    created: Vec<PathBuf>,
    /// Set when the staging directory is removed, for a blocking task that may still be
    /// writing in it (see [`Staging::sweeper`]).
    removed: Arc<AtomicBool>,
}

/// The staging area's name inside the tools directory.
const STAGING_DIR: &str = ".staging";

impl Staging {
    fn create(tools_dir: &Path, name: &ToolName) -> Result<Staging, Error> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let area = tools_dir.join(STAGING_DIR);
        // The directories this creates, innermost first, to remove again when left empty.
        let created: Vec<PathBuf> = area
            .ancestors()
            .take_while(|dir| !dir.exists())
            .map(Path::to_path_buf)
            .collect();
        fs::create_dir_all(&area).map_err(|source| Error::Io {
            path: area.clone(),
            source,
        })?;
        let dir = area.join(format!(
            "{}-{}-{}",
            name.as_str(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(Staging {
            dir,
            created,
            removed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// For a blocking task writing inside the staging directory: the pipeline awaits it
    /// before dropping the staging directory, but a cancelled generation (an MCP client
    /// that gave up) drops it at once, maybe while the task still writes. The task calls the
    /// sweeper when done, which then removes what the drop could not.
    fn sweeper(&self) -> impl FnOnce() + Send + 'static {
        let removed = Arc::clone(&self.removed);
        let dir = self.dir.clone();
        let created = self.created.clone();
        move || {
            if removed.load(Ordering::SeqCst) {
                remove_staging(&dir, &created);
            }
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.removed.store(true, Ordering::SeqCst);
        remove_staging(&self.dir, &self.created);
    }
}

/// Removes a staging directory; the staging area itself goes when empty, and so do the
/// tools directory and its parents when this run created them and left nothing in them (a
/// rejected first request).
fn remove_staging(dir: &Path, created: &[PathBuf]) {
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot remove a staging directory");
        }
    }
    if let Some(area) = dir.parent() {
        let _empty_or_busy = fs::remove_dir(area);
    }
    for dir in created {
        let _not_empty = fs::remove_dir(dir);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use toolsmith_executor::{BackendChoice, ExecutorConfig, Limits, filtered_env};
    use toolsmith_registry::SandboxSettings;

    use super::*;

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
            let discovered = discover_staged(
                &staged.executor,
                &staged.dir,
                &staged.request.name,
                &staged.run_config,
            )
            .await
            .unwrap();
            let discovered = configured(&staged.executor, &discovered, &staged.run_config)
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

    /// When discovery loads another tool than the answers describe, the checks are those of
    /// discovery's tool: here the answers claim the network, the file declares none, and the
    /// `network` check reports the runs of the file's own sandbox.
    #[tokio::test]
    async fn checks_are_discoverys_when_the_answers_differ() {
        let staged = stage(json!({
            "name": "say_hi", "description": "Says hi.", "language": "bash",
            "implementation": "echo hi",
            "tests": [{"input": {}, "expect": {"result": "hi"}}],
        }));
        let (description, config) = render::kodelet_answers(&staged.request).unwrap();
        let mut forged: Value = serde_json::from_str(&description).unwrap();
        forged["sandbox"]["network"] = json!("allow");
        let checks = check_staged(
            &staged.executor,
            &staged.dir,
            &staged.file,
            &staged.request,
            Some((forged.to_string(), config)),
            &staged.run_config,
        )
        .await
        .unwrap();
        let failing: Vec<&CheckReport> = checks.iter().filter(|check| !check.ok).collect();
        assert!(failing.is_empty(), "{failing:?}");
        let network = checks.iter().find(|check| check.name == "network").unwrap();
        assert_eq!(network.detail.as_deref(), Some("network deny in every run"));
        assert_eq!(checks[0].name, "registry");
    }
}
