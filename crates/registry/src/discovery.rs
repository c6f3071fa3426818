//! Discovery: scanning tool directories, probing each candidate in its format in parallel, and building the catalog.
//!
//! Rules, in the order they apply:
//! - Dotfiles, directories, non-executable files and other special files are skipped silently.
//!   A symbolic link counts as the file it points to; a broken one is a problem.
//! - An executable named `NAME-tool` is an ikigai tool called `NAME`; any other executable is a Kodelet tool named after its file.
//! - A file whose tool name (after mapping `-` to `_`) is not a valid [`ToolName`] is a problem and is never run.
//! - Two files with one tool name in one directory: the first in sorted order is probed, the other is a problem.
//! - Each remaining candidate is probed under [`PROBE_TIMEOUT`] and [`PROBE_MAX_OUTPUT`] per probe:
//!   - an ikigai tool with `--schema`;
//!   - any other executable with `description`, then, if that worked, with `config` for the timeout it asks for
//!     (one more process per tool at every cold discovery; the discovery cache is what makes warm starts free of it).
//!     A tool that does not implement `config` (non-zero exit, no JSON object, no `timeout`) asks for nothing;
//!     a `timeout` that is not a positive Go duration is a problem.
//!     When `description` fails without giving a Kodelet answer (it exited non-zero, was killed, printed too much, or printed something other than a JSON object with a `name`),
//!     the file may be an ikigai tool without the `-tool` suffix (ikigai's own binaries, e.g. `file-read`), so `--schema` is tried;
//!     if that fails too, the problem says both why `description` failed and why `--schema` did.
//!   - any other failure (spawn error, timeout, non-zero exit, oversized or invalid output, a schema that breaks the rules of [`InputSchema`](crate::InputSchema)) is a problem.
//! - The name a tool declares must be its file's tool name: a mismatch is a problem, so that the file a user sees is the tool the LLM calls.
//! - Among the tools that passed, a later directory shadows an earlier one by name, and the shadowed tool is recorded.
//!   A candidate that failed its probe shadows nothing.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolsmith_executor::{Command, Executor, LimitKind, Limits, Termination};

use crate::ikigai::{self, ToolSchemaError};
use crate::kodelet::{self, ConfigError, DescriptionError};
use crate::manifest::{self, ManifestErrors};
use crate::tool::{Runner, ToolParts};
use crate::{Annotations, NameError, RunConfig, Tool, ToolName};

/// The file-name suffix of a Nanocoder manifest; the stem is the tool name.
const MANIFEST_SUFFIX: &str = ".md";

/// The tool name a file of this name would provide, whatever its format.
pub(crate) fn file_tool_name(file_name: &str) -> Option<ToolName> {
    tool_of_file(file_name).ok().map(|(name, _)| name)
}

/// The wall-clock budget of one probe (`description`, `config`, `--schema`).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The most output one probe may print.
pub const PROBE_MAX_OUTPUT: u64 = 64 * 1024;

/// The longest grace period between SIGTERM and SIGKILL for a probe.
const PROBE_MAX_GRACE: Duration = Duration::from_millis(500);

/// A file that looked like a tool but could not be loaded, and why.
#[derive(Debug)]
pub struct Problem {
    /// The file (or directory) at fault.
    pub path: PathBuf,
    /// What is wrong with it.
    pub error: ProblemError,
}

impl Problem {
    /// The error and its causes as one line, e.g.
    /// `invalid description output: field `name` is missing`.
    pub fn message(&self) -> String {
        error_chain(&self.error)
    }
}

/// `error` and its causes as one line, joined by `: `.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Why a candidate is not a tool.
#[derive(Debug, thiserror::Error)]
pub enum ProblemError {
    /// The directory could not be listed.
    #[error("cannot read tool directory")]
    ReadDir {
        /// The IO failure.
        #[source]
        source: io::Error,
    },
    /// A symbolic link points nowhere.
    #[error("broken symbolic link")]
    BrokenLink {
        /// The IO failure when following it.
        #[source]
        source: io::Error,
    },
    /// The file's metadata could not be read.
    #[error("cannot read file metadata")]
    Metadata {
        /// The IO failure.
        #[source]
        source: io::Error,
    },
    /// The file name is not valid UTF-8.
    #[error("file name is not valid UTF-8")]
    NonUtf8FileName,
    /// The file name is not a valid tool name.
    #[error("file name is not a valid tool name")]
    FileName {
        /// Why.
        #[source]
        source: NameError,
    },
    /// Another file in the same directory provides the same tool name.
    #[error("tool `{name}` is already provided by `{winner}` in the same directory", winner = winner.display())]
    Duplicate {
        /// The tool name.
        name: ToolName,
        /// The file that won (first in sorted order).
        winner: PathBuf,
    },
    /// The probe could not be started.
    #[error("`{probe}` could not be started")]
    Spawn {
        /// The probe's argument, e.g. `description`.
        probe: &'static str,
        /// The executor's error.
        #[source]
        source: toolsmith_executor::Error,
    },
    /// The probe did not finish in time.
    #[error("`{probe}` did not finish within {timeout:?} and was killed")]
    Timeout {
        /// The probe's argument.
        probe: &'static str,
        /// The probe's timeout.
        timeout: Duration,
    },
    /// The probe hit a CPU or memory limit.
    #[error("`{probe}` was killed by the {limit} limit")]
    Limit {
        /// The probe's argument.
        probe: &'static str,
        /// The limit.
        limit: LimitKind,
    },
    /// The probe exited with a non-zero status.
    #[error(
        "`{probe}` exited with status {code}{}",
        stderr_suffix(first_stderr_line)
    )]
    Exited {
        /// The probe's argument.
        probe: &'static str,
        /// The exit status.
        code: i32,
        /// The first non-empty line of stderr, if any.
        first_stderr_line: Option<String>,
    },
    /// The probe was killed by a signal.
    #[error("`{probe}` was killed by signal {signal}")]
    Signaled {
        /// The probe's argument.
        probe: &'static str,
        /// The signal number.
        signal: i32,
    },
    /// The probe printed more than [`PROBE_MAX_OUTPUT`] bytes.
    #[error("`{probe}` printed {total} bytes, more than the {PROBE_MAX_OUTPUT} allowed")]
    OutputTooLarge {
        /// The probe's argument.
        probe: &'static str,
        /// How much it printed.
        total: u64,
    },
    /// The output of `description` is not a valid description.
    #[error("invalid `description` output")]
    Description {
        /// Why.
        #[source]
        source: DescriptionError,
    },
    /// A manifest could not be read.
    #[error("cannot read the manifest")]
    ReadManifest {
        /// The IO failure.
        #[source]
        source: io::Error,
    },
    /// A manifest's frontmatter or body is invalid; the message lists every
    /// error with the field it is about.
    #[error(transparent)]
    Manifest(#[from] ManifestErrors),
    /// The output of `--schema` is not a valid ikigai tool schema.
    #[error("invalid `--schema` output")]
    SchemaOutput {
        /// Why.
        #[source]
        source: ToolSchemaError,
    },
    /// The output of `config` asks for a timeout that is not valid.
    #[error("invalid `config` output")]
    Config {
        /// Why.
        #[source]
        source: ConfigError,
    },
    /// Neither `description` nor `--schema` gave a usable answer.
    ///
    /// Both causes are rendered in the message, each with its own chain,
    /// because a single `source` chain can only hold one of them.
    #[error("{}; `--schema` also failed: {}", error_chain(description.as_ref()), error_chain(schema.as_ref()))]
    NeitherProtocol {
        /// Why `description` failed.
        description: Box<ProblemError>,
        /// Why `--schema` failed.
        schema: Box<ProblemError>,
    },
    /// The tool's description is empty: the LLM would not know what it does.
    #[error("the tool's description is empty")]
    EmptyDescription,
    /// The declared name differs from the file's name.
    #[error(
        "declares name `{declared}` but its file name makes it `{expected}`; rename the file or fix the name"
    )]
    NameMismatch {
        /// The name in the description.
        declared: ToolName,
        /// The name from the file name.
        expected: ToolName,
    },
}

fn stderr_suffix(line: &Option<String>) -> String {
    match line {
        Some(line) => format!(" (stderr: {line})"),
        None => String::new(),
    }
}

/// A tool hidden by a tool of the same name in a later directory.
#[derive(Debug, Clone)]
pub struct Shadowed {
    /// The tool that is hidden.
    pub tool: Tool,
    /// The file of the tool that hides it.
    pub by: PathBuf,
}

/// Everything discovery found: the usable tools (sorted by name), the
/// problems (in directory and file order) and the shadowed tools.
#[derive(Debug)]
pub struct Catalog {
    tools: Vec<Tool>,
    problems: Vec<Problem>,
    shadowed: Vec<Shadowed>,
}

impl Catalog {
    /// The usable tools, sorted by name.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The files that could not be loaded.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// The tools hidden by a later directory.
    pub fn shadowed(&self) -> &[Shadowed] {
        &self.shadowed
    }

    /// The tool called `name`.
    pub fn get(&self, name: &ToolName) -> Option<&Tool> {
        self.tools.iter().find(|tool| tool.name() == name)
    }
}

/// The format of a candidate file, decided from its name and mode alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// An executable probed with `description` (Kodelet), then with
    /// `--schema` if it does not answer that.
    Kodelet,
    /// A `NAME.md` manifest (Nanocoder), parsed without running anything.
    Manifest,
    /// An executable named `NAME-tool`, probed with `--schema` (ikigai).
    Ikigai,
}

/// The tool name a file provides, and its format: `k8s-pods.md` is the
/// manifest `k8s_pods`, `word-stats-tool` the ikigai tool `word_stats`,
/// `file-read` the Kodelet tool `file_read`.
pub(crate) fn tool_of_file(file_name: &str) -> Result<(ToolName, Format), NameError> {
    if let Some(stem) = file_name.strip_suffix(MANIFEST_SUFFIX) {
        return ToolName::new(stem).map(|name| (name, Format::Manifest));
    }
    match file_name.strip_suffix(ikigai::FILE_SUFFIX) {
        Some(stem) => ToolName::new(stem).map(|name| (name, Format::Ikigai)),
        None => ToolName::new(file_name).map(|name| (name, Format::Kodelet)),
    }
}

/// A file that may be a tool.
#[derive(Debug)]
pub(crate) struct Candidate {
    pub(crate) path: PathBuf,
    pub(crate) source: PathBuf,
    pub(crate) expected: ToolName,
    pub(crate) format: Format,
}

/// How far discovery has come: `probed` of `total` candidates answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscoveryProgress {
    /// Candidates whose probe has finished.
    pub probed: usize,
    /// Candidates found in the directories.
    pub total: usize,
}

/// Scans `dirs` (relative ones are taken from `config.cwd`) and probes every
/// candidate, at most as many at once as the machine has cores.
///
/// Never fails: whatever cannot be loaded is a [`Problem`] in the catalog.
/// Cancel-safe: dropping the future kills the probes still running.
pub async fn discover(executor: &Arc<Executor>, dirs: &[PathBuf], config: &RunConfig) -> Catalog {
    discover_matching(executor, dirs, None, config, &|_| {}).await
}

/// Like [`discover`], calling `progress` once the candidates are known and
/// after each probe, so that a long discovery can show how far it is.
pub async fn discover_with_progress(
    executor: &Arc<Executor>,
    dirs: &[PathBuf],
    config: &RunConfig,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Catalog {
    discover_matching(executor, dirs, None, config, progress).await
}

/// Like [`discover`], but probes only the files that would provide `name`, so
/// that calling one tool does not wait for every other tool's probe.
///
/// Problems of other files are not reported; those of `name`'s files are.
pub async fn discover_one(
    executor: &Arc<Executor>,
    dirs: &[PathBuf],
    name: &ToolName,
    config: &RunConfig,
) -> Catalog {
    discover_matching(executor, dirs, Some(name), config, &|_| {}).await
}

async fn discover_matching(
    executor: &Arc<Executor>,
    dirs: &[PathBuf],
    only: Option<&ToolName>,
    config: &RunConfig,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Catalog {
    let (candidates, mut problems) = scan_dirs(dirs, only, config);
    let probe_results = probe_all(executor, &candidates, config, progress).await;

    let mut by_name: HashMap<ToolName, Tool> = HashMap::new();
    let mut shadowed = Vec::new();
    for (candidate, result) in candidates.into_iter().zip(probe_results) {
        match result {
            Ok(tool) => {
                if let Some(previous) = by_name.insert(tool.name().clone(), tool) {
                    shadowed.push(Shadowed {
                        tool: previous,
                        by: candidate.path,
                    });
                }
            }
            Err(error) => problems.push(Problem {
                path: candidate.path,
                error,
            }),
        }
    }
    let mut tools: Vec<Tool> = by_name.into_values().collect();
    tools.sort_by(|left, right| left.name().cmp(right.name()));
    Catalog {
        tools,
        problems,
        shadowed,
    }
}

/// The candidates and problems of `dirs` (relative ones taken from
/// `config.cwd`), only those concerning `only` when it is given.
pub(crate) fn scan_dirs(
    dirs: &[PathBuf],
    only: Option<&ToolName>,
    config: &RunConfig,
) -> (Vec<Candidate>, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut candidates = Vec::new();
    for dir in dirs {
        let dir = config.cwd.join(dir);
        scan_dir(&dir, &mut candidates, &mut problems);
    }
    if let Some(only) = only {
        candidates.retain(|candidate| &candidate.expected == only);
        problems.retain(|problem| problem_concerns(problem, only));
    }
    (candidates, problems)
}

/// Whether `problem` is about a file that would provide `name`, or about a whole directory.
fn problem_concerns(problem: &Problem, name: &ToolName) -> bool {
    match &problem.error {
        ProblemError::ReadDir { .. } => true,
        ProblemError::Duplicate {
            name: duplicate, ..
        } => duplicate == name,
        _ => problem
            .path
            .file_name()
            .and_then(|file_name| file_name.to_str())
            .and_then(|file_name| tool_of_file(file_name).ok())
            .is_some_and(|(file_tool, _)| &file_tool == name),
    }
}

/// Adds the candidates of `dir` in sorted file-name order.
fn scan_dir(dir: &Path, candidates: &mut Vec<Candidate>, problems: &mut Vec<Problem>) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(source) => {
            problems.push(Problem {
                path: dir.to_path_buf(),
                error: ProblemError::ReadDir { source },
            });
            return;
        }
    };
    let mut paths = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => paths.push(entry.path()),
            Err(source) => problems.push(Problem {
                path: dir.to_path_buf(),
                error: ProblemError::ReadDir { source },
            }),
        }
    }
    paths.sort();

    let mut winners: HashMap<ToolName, PathBuf> = HashMap::new();
    for path in paths {
        match classify(&path) {
            Ok(Some((expected, format))) => {
                if let Some(winner) = winners.get(&expected) {
                    problems.push(Problem {
                        error: ProblemError::Duplicate {
                            name: expected,
                            winner: winner.clone(),
                        },
                        path,
                    });
                    continue;
                }
                winners.insert(expected.clone(), path.clone());
                candidates.push(Candidate {
                    path,
                    source: dir.to_path_buf(),
                    expected,
                    format,
                });
            }
            Ok(None) => {}
            Err(error) => problems.push(Problem { path, error }),
        }
    }
}

/// The tool name and format of `path` if it is a candidate, `None` if it is
/// silently skipped.
pub(crate) fn classify(path: &Path) -> Result<Option<(ToolName, Format)>, ProblemError> {
    let Some(file_name) = path.file_name() else {
        return Ok(None);
    };
    if file_name.as_encoded_bytes().starts_with(b".") || is_documentation(file_name) {
        return Ok(None);
    }
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(source) => {
            let is_link = fs::symlink_metadata(path)
                .map(|link| link.file_type().is_symlink())
                .unwrap_or(false);
            return Err(if is_link {
                ProblemError::BrokenLink { source }
            } else {
                ProblemError::Metadata { source }
            });
        }
    };
    if !metadata.is_file() {
        return Ok(None);
    }
    let is_manifest = file_name
        .as_encoded_bytes()
        .ends_with(MANIFEST_SUFFIX.as_bytes());
    if !is_manifest && metadata.permissions().mode() & 0o111 == 0 {
        return Ok(None);
    }
    let file_name = file_name.to_str().ok_or(ProblemError::NonUtf8FileName)?;
    tool_of_file(file_name)
        .map(Some)
        .map_err(|source| ProblemError::FileName { source })
}

/// True for the documentation files people keep next to their tools
/// (`README.md`, `CHANGELOG.md`, ...): markdown, but not manifests, and never
/// worth a problem report. Any other `.md` file whose name is not a valid
/// tool name is still reported, so a misnamed manifest is not silently lost.
fn is_documentation(file_name: &std::ffi::OsStr) -> bool {
    const DOCUMENTATION: [&str; 5] = ["README", "CHANGELOG", "LICENSE", "CONTRIBUTING", "NOTES"];
    file_name.to_str().is_some_and(|file_name| {
        file_name.strip_suffix(MANIFEST_SUFFIX).is_some_and(|stem| {
            DOCUMENTATION
                .iter()
                .any(|doc| stem.eq_ignore_ascii_case(doc))
        })
    })
}

/// Probes every candidate; the results are in the candidates' order.
pub(crate) async fn probe_all(
    executor: &Arc<Executor>,
    candidates: &[Candidate],
    config: &RunConfig,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Vec<Result<Tool, ProblemError>> {
    let total = candidates.len();
    progress(DiscoveryProgress { probed: 0, total });
    let parallelism = std::thread::available_parallelism().map_or(1, usize::from);
    let permits = Arc::new(tokio::sync::Semaphore::new(parallelism));
    let limits = probe_limits(&config.limits);
    let mut tasks = tokio::task::JoinSet::new();
    let mut index_of_task = HashMap::new();
    for (index, candidate) in candidates.iter().enumerate() {
        let executor = Arc::clone(executor);
        let permits = Arc::clone(&permits);
        let limits = limits.clone();
        let cwd = config.cwd.clone();
        let env = config.env.clone();
        let candidate = Candidate {
            path: candidate.path.clone(),
            source: candidate.source.clone(),
            expected: candidate.expected.clone(),
            format: candidate.format,
        };
        let handle = tasks.spawn(async move {
            // The semaphore is never closed, so acquiring only waits.
            let _permit = permits.acquire_owned().await;
            let probe = Probe {
                executor: &executor,
                cwd: &cwd,
                env: &env,
                limits: &limits,
            };
            load(&probe, &candidate).await
        });
        index_of_task.insert(handle.id(), index);
    }

    let mut results: Vec<Option<Result<Tool, ProblemError>>> =
        candidates.iter().map(|_| None).collect();
    let mut probed = 0;
    while let Some(joined) = tasks.join_next_with_id().await {
        match joined {
            Ok((task_id, result)) => {
                if let Some(&index) = index_of_task.get(&task_id) {
                    results[index] = Some(result);
                }
                probed += 1;
                progress(DiscoveryProgress { probed, total });
            }
            Err(join_error) if join_error.is_panic() => {
                std::panic::resume_unwind(join_error.into_panic());
            }
            Err(_cancelled) => {}
        }
    }
    results
        .into_iter()
        .map(|result| {
            result.expect("every probe task is joined: none is aborted and panics are resumed")
        })
        .collect()
}

/// The limits of a probe: the caller's, with the probe's timeout and output cap.
fn probe_limits(base: &Limits) -> Limits {
    Limits {
        timeout: PROBE_TIMEOUT,
        grace: base.grace.min(PROBE_MAX_GRACE),
        max_output: PROBE_MAX_OUTPUT,
        ..base.clone()
    }
}

/// What a probe needs to run a candidate.
struct Probe<'a> {
    executor: &'a Executor,
    cwd: &'a Path,
    env: &'a [(OsString, OsString)],
    limits: &'a Limits,
}

impl Probe<'_> {
    /// Runs `command` (the probe called `probe`, e.g. `description`) and
    /// returns what it printed, or why that is not a usable answer.
    async fn stdout(&self, probe: &'static str, command: Command) -> Result<Vec<u8>, ProblemError> {
        let outcome = self
            .executor
            .run(&command, self.limits)
            .await
            .map_err(|source| ProblemError::Spawn { probe, source })?;
        match outcome.limit {
            Some(LimitKind::Timeout) => {
                return Err(ProblemError::Timeout {
                    probe,
                    timeout: self.limits.timeout,
                });
            }
            Some(limit) => return Err(ProblemError::Limit { probe, limit }),
            None => {}
        }
        match outcome.termination {
            Termination::Exited(0) => {}
            Termination::Exited(code) => {
                return Err(ProblemError::Exited {
                    probe,
                    code,
                    first_stderr_line: first_line(&outcome.stderr.text_lossy()),
                });
            }
            Termination::Signaled(signal) => return Err(ProblemError::Signaled { probe, signal }),
        }
        if outcome.stdout.truncated {
            return Err(ProblemError::OutputTooLarge {
                probe,
                total: outcome.stdout.total,
            });
        }
        Ok(outcome.stdout.bytes)
    }
}

/// Loads one candidate in its format, then applies the checks every format shares.
async fn load(probe: &Probe<'_>, candidate: &Candidate) -> Result<Tool, ProblemError> {
    let parts = match candidate.format {
        Format::Manifest => load_manifest(candidate)?,
        Format::Ikigai => load_ikigai(probe, candidate).await?,
        Format::Kodelet => match load_kodelet(probe, candidate).await {
            Ok(parts) => parts,
            Err(description) if !worth_trying_schema(&description) => return Err(description),
            Err(description) => load_ikigai(probe, candidate).await.map_err(|schema| {
                ProblemError::NeitherProtocol {
                    description: Box::new(description),
                    schema: Box::new(schema),
                }
            })?,
        },
    };
    register(parts, &candidate.expected)
}

/// Whether a failure to load a file as a Kodelet tool leaves room for it to
/// be an ikigai tool, so that `--schema` is worth a probe.
///
/// Not when the answer was a Kodelet description with a mistake in it (the
/// mistake is the whole story), nor when the file could not be started (it
/// would not start for `--schema` either), nor when `description` hung: an
/// ikigai tool given an argument it ignores reads an empty stdin and ends,
/// and a second hanging probe would double the cost of a broken file.
fn worth_trying_schema(error: &ProblemError) -> bool {
    match error {
        ProblemError::Description { source } => !source.is_kodelet_answer(),
        ProblemError::Exited { .. }
        | ProblemError::Signaled { .. }
        | ProblemError::OutputTooLarge { .. }
        | ProblemError::Limit { .. } => true,
        _ => false,
    }
}

async fn load_kodelet(probe: &Probe<'_>, candidate: &Candidate) -> Result<ToolParts, ProblemError> {
    let command =
        kodelet::description_command(&candidate.path, probe.cwd, probe.env).map_err(|source| {
            ProblemError::Spawn {
                probe: kodelet::DESCRIPTION_ARG,
                source,
            }
        })?;
    let stdout = probe.stdout(kodelet::DESCRIPTION_ARG, command).await?;
    let description = kodelet::parse_description(&stdout)
        .map_err(|source| ProblemError::Description { source })?;
    let requested_timeout = requested_timeout(probe, candidate).await?;
    Ok(ToolParts {
        name: description.name,
        description: description.description,
        input_schema: description.input_schema,
        output_schema: description.output_schema,
        annotations: Annotations::undeclared(),
        requested_timeout,
        path: candidate.path.clone(),
        source: candidate.source.clone(),
        runner: Runner::Kodelet,
    })
}

/// Reads and parses a manifest; nothing is run.
fn load_manifest(candidate: &Candidate) -> Result<ToolParts, ProblemError> {
    let text = fs::read_to_string(&candidate.path)
        .map_err(|source| ProblemError::ReadManifest { source })?;
    let manifest = manifest::parse(&text, &candidate.expected)?;
    Ok(ToolParts {
        name: manifest.name.clone(),
        description: manifest.description.clone(),
        input_schema: manifest.input_schema.clone(),
        output_schema: None,
        annotations: Annotations {
            title: None,
            approval: manifest.approval,
            read_only: manifest.read_only,
        },
        requested_timeout: Some(manifest.timeout),
        path: candidate.path.clone(),
        source: candidate.source.clone(),
        runner: Runner::Manifest(Box::new(manifest)),
    })
}

/// The timeout a Kodelet tool asks for with its optional `config` subcommand.
///
/// A probe that fails (non-zero exit, timeout, ...) means the tool does not
/// implement `config`, which is not a problem; only a `timeout` the tool
/// printed and got wrong is.
async fn requested_timeout(
    probe: &Probe<'_>,
    candidate: &Candidate,
) -> Result<Option<Duration>, ProblemError> {
    let command = match kodelet::config_command(&candidate.path, probe.cwd, probe.env) {
        Ok(command) => command,
        Err(error) => {
            tracing::debug!(path = %candidate.path.display(), %error, "no `config` probe");
            return Ok(None);
        }
    };
    match probe.stdout(kodelet::CONFIG_ARG, command).await {
        Ok(stdout) => {
            kodelet::parse_config(&stdout).map_err(|source| ProblemError::Config { source })
        }
        Err(error) => {
            tracing::debug!(path = %candidate.path.display(), error = %error_chain(&error), "`config` not implemented");
            Ok(None)
        }
    }
}

async fn load_ikigai(probe: &Probe<'_>, candidate: &Candidate) -> Result<ToolParts, ProblemError> {
    let command =
        ikigai::schema_command(&candidate.path, probe.cwd, probe.env).map_err(|source| {
            ProblemError::Spawn {
                probe: ikigai::SCHEMA_ARG,
                source,
            }
        })?;
    let stdout = probe.stdout(ikigai::SCHEMA_ARG, command).await?;
    let schema =
        ikigai::parse_schema(&stdout).map_err(|source| ProblemError::SchemaOutput { source })?;
    Ok(ToolParts {
        name: schema.name,
        description: schema.description,
        input_schema: schema.input_schema,
        output_schema: schema.output_schema,
        annotations: Annotations::undeclared(),
        requested_timeout: None,
        path: candidate.path.clone(),
        source: candidate.source.clone(),
        runner: Runner::Ikigai,
    })
}

/// The checks of registration that do not depend on the format: the name
/// the tool declares is its file's, and it says what it does.
fn register(parts: ToolParts, expected: &ToolName) -> Result<Tool, ProblemError> {
    if &parts.name != expected {
        return Err(ProblemError::NameMismatch {
            declared: parts.name,
            expected: expected.clone(),
        });
    }
    if parts.description.trim().is_empty() {
        return Err(ProblemError::EmptyDescription);
    }
    Ok(Tool::from_parts(parts))
}

/// The first non-empty line of `text`, trimmed and cut to 200 characters.
pub(crate) fn first_line(text: &str) -> Option<String> {
    const MAX_CHARS: usize = 200;
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(|line| line.chars().take(MAX_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use crate::discovery::{Format, classify, first_line, tool_of_file};

    fn check(file: &str, contents: Option<(&str, u32)>, expect: Result<Option<&str>, &str>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file);
        match contents {
            Some((text, mode)) => {
                fs::write(&path, text).unwrap();
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            }
            None => fs::create_dir(&path).unwrap(),
        }
        let actual = classify(&path)
            .map(|name| name.map(|name| name.0.as_str().to_owned()))
            .map_err(|error| error.to_string());
        let expect = expect
            .map(|name| name.map(str::to_owned))
            .map_err(str::to_owned);
        assert_eq!(actual, expect, "{file}");
    }

    #[test]
    fn executable_file_is_a_candidate() {
        check("hello", Some(("#!/bin/sh\n", 0o755)), Ok(Some("hello")));
        check(
            "file-read",
            Some(("#!/bin/sh\n", 0o700)),
            Ok(Some("file_read")),
        );
    }

    #[test]
    fn skipped_silently() {
        check("readme", Some(("text", 0o644)), Ok(None));
        check("README.md", Some(("# My tools", 0o644)), Ok(None));
        check("changelog.md", Some(("# Changes", 0o644)), Ok(None));
        check(".hidden", Some(("#!/bin/sh\n", 0o755)), Ok(None));
        check("subdir", None, Ok(None));
    }

    #[test]
    fn tool_suffix_is_ikigai() {
        check(
            "word-stats-tool",
            Some(("#!/bin/sh\n", 0o755)),
            Ok(Some("word_stats")),
        );
        check("tool", Some(("#!/bin/sh\n", 0o755)), Ok(Some("tool")));
        check("x_tool", Some(("#!/bin/sh\n", 0o755)), Ok(Some("x_tool")));
        check(
            "-tool",
            Some(("#!/bin/sh\n", 0o755)),
            Err("file name is not a valid tool name"),
        );
    }

    #[test]
    fn formats_from_file_names() {
        let format = |file_name: &str| tool_of_file(file_name).unwrap().1;
        assert_eq!(format("db-query-tool"), Format::Ikigai);
        assert_eq!(format("db-query"), Format::Kodelet);
        assert_eq!(format("tool"), Format::Kodelet);
    }

    #[test]
    fn invalid_file_name() {
        check(
            "Hello.py",
            Some(("#!/bin/sh\n", 0o755)),
            Err("file name is not a valid tool name"),
        );
    }

    #[test]
    fn broken_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("dangling");
        std::os::unix::fs::symlink(Path::new("/nonexistent/target"), &link).unwrap();
        let error = classify(&link).unwrap_err();
        assert_eq!(error.to_string(), "broken symbolic link");
    }

    #[test]
    fn symlink_to_executable() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real");
        fs::write(&target, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
        let link = dir.path().join("linked");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(classify(&link).unwrap().unwrap().0.as_str(), "linked");
    }

    #[test]
    fn first_stderr_line() {
        assert_eq!(first_line("\n  \n boom \nmore"), Some("boom".to_owned()));
        assert_eq!(first_line(""), None);
    }
}
