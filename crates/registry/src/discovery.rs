//! Discovery: scanning tool directories, probing each candidate's `description` in parallel, and building the catalog.
//!
//! Rules, in the order they apply:
//! - Dotfiles, directories, non-executable files and other special files are skipped silently.
//!   A symbolic link counts as the file it points to; a broken one is a problem.
//! - A file whose name (after mapping `-` to `_`) is not a valid [`ToolName`] is a problem and is never run.
//! - Two files with one tool name in one directory: the first in sorted order is probed, the other is a problem.
//! - A `NAME.md` file is a manifest: it is read and parsed, never run.
//! - A `NAME-tool` executable is an ikigai tool, probed with `--schema`.
//! - Any other executable is probed with `description` (Kodelet) and, when that fails in a way
//!   an ikigai tool would, with `--schema`; a Kodelet tool is then asked for its optional
//!   `config` (a requested timeout). Each probe runs under [`PROBE_TIMEOUT`] and
//!   [`PROBE_MAX_OUTPUT`]; any failure (spawn error, timeout, non-zero exit, oversized or
//!   invalid output) is a problem.
//! - The name a tool declares must be its file's name: a mismatch is a problem, so that the file a user sees is the tool the LLM calls.
//! - Among the tools that passed, a later directory shadows an earlier one by name, and the shadowed tool is recorded.
//!   A candidate that failed its probe shadows nothing.
//! - A candidate whose file is unchanged since the [`DiscoveryCache`] saw it is not probed: its cached output is loaded again.
//! - A missing directory is skipped silently, unless the user named it (`--tools-dir`, `[discovery] dirs`).

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use toolsmith_executor::{Command, Executor, LimitKind, Limits, Termination};

use crate::cache::{ConfigAnswer, Fingerprint, ProbeRecord, Probed};
use crate::ikigai::{self, ToolSchemaError};
use crate::kodelet::{self, ConfigError, DescriptionError};
use crate::manifest::{self, ManifestErrors};
use crate::sandbox::{probe_sandbox, probe_sandbox_key};
use crate::tool::{Runner, ToolParts};
use crate::{
    Annotations, Denial, DiscoveryCache, Layer, LayerDir, NameError, Policy, RunConfig, Tool,
    ToolName,
};

/// The file-name suffix of a Nanocoder manifest; the stem is the tool name.
const MANIFEST_SUFFIX: &str = ".md";

/// The tool name a file of this name would provide, whatever its format.
pub(crate) fn file_tool_name(file_name: &str) -> Option<ToolName> {
    tool_of_file(file_name).ok().map(|(name, _)| name)
}

/// The wall-clock budget of one probe (`description`, `config`, `--schema`).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The most output a `description` probe may print.
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

/// An error and its causes as one line, joined by `: `: the form of every message
/// toolsmith shows (problems, reports, MCP errors).
pub fn error_chain(error: &dyn std::error::Error) -> String {
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
    /// A script (it starts with `#!`) without the execute bit.
    #[error("it starts with `#!` but is not executable (chmod +x it)")]
    NotExecutable,
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
    /// The probe's task was cancelled before it finished: the runtime is
    /// shutting down (a `serve` whose client left mid-discovery).
    #[error("the probe was cancelled: toolsmith is shutting down")]
    Cancelled,
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

/// A file that would provide a tool policy refuses to run, so discovery never ran it: only
/// what its path tells is known, not its description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedTool {
    /// The tool its file name gives.
    pub name: ToolName,
    /// The file.
    pub path: PathBuf,
    /// The tool directory it is in.
    pub source: PathBuf,
    /// The layer of that directory.
    pub layer: Layer,
    /// Why policy refuses it.
    pub denial: Denial,
}

/// Everything discovery found: the usable tools (sorted by name), the
/// problems (in directory and file order), the shadowed tools, and the files
/// policy kept discovery from running (sorted by name).
#[derive(Debug)]
pub struct Catalog {
    tools: Vec<Tool>,
    problems: Vec<Problem>,
    shadowed: Vec<Shadowed>,
    denied: Vec<DeniedTool>,
}

impl Catalog {
    /// A catalog with nothing in it.
    pub(crate) fn empty() -> Catalog {
        Catalog {
            tools: Vec::new(),
            problems: Vec::new(),
            shadowed: Vec::new(),
            denied: Vec::new(),
        }
    }

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

    /// The files policy refuses to run, which discovery did not probe, sorted by name.
    ///
    /// Each is the one that would provide its name: a refused file in a later directory hides
    /// the tools of that name below it (they are [`shadowed`](Catalog::shadowed)), as a tool
    /// would, so that a profile never changes which file a name stands for.
    pub fn denied(&self) -> &[DeniedTool] {
        &self.denied
    }

    /// The refused file that would provide `name`, if policy refuses it.
    pub fn get_denied(&self, name: &ToolName) -> Option<&DeniedTool> {
        self.denied.iter().find(|denied| &denied.name == name)
    }
}

/// The format of a candidate file, decided from its name and mode alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// An executable probed with `description` (Kodelet), then with `--schema` if it does
    /// not answer that the way a Kodelet tool would.
    Kodelet,
    /// A `NAME.md` manifest (Nanocoder), parsed without running anything.
    Manifest,
    /// An executable named `NAME-tool`, probed with `--schema` (ikigai).
    Ikigai,
}

impl Format {
    /// The protocols whose cached output a file of this format may reuse: an output is
    /// reused only by a protocol this format may be answered by.
    fn protocols(self) -> &'static [&'static str] {
        match self {
            Format::Kodelet => &[kodelet::PROTOCOL, ikigai::PROTOCOL],
            Format::Manifest => &[MANIFEST_PROTOCOL],
            Format::Ikigai => &[ikigai::PROTOCOL],
        }
    }
}

/// The tool name a file provides, and its format: `k8s-pods.md` is the manifest `k8s_pods`,
/// `word-stats-tool` the ikigai tool `word_stats`, `file-read` the Kodelet tool `file_read`.
pub(crate) fn tool_of_file(file_name: &str) -> Result<(ToolName, Format), NameError> {
    if let Some(stem) = file_name.strip_suffix(MANIFEST_SUFFIX) {
        return ToolName::new(stem).map(|name| (name, Format::Manifest));
    }
    match file_name.strip_suffix(ikigai::FILE_SUFFIX) {
        Some(stem) => ToolName::new(stem).map(|name| (name, Format::Ikigai)),
        None => ToolName::new(file_name).map(|name| (name, Format::Kodelet)),
    }
}

/// The cache's name for reading a manifest; its records stay in memory (see
/// [`crate::cache`]), since reading the file again costs no more than reading its entry.
pub(crate) const MANIFEST_PROTOCOL: &str = "manifest-read";

/// The "probe" of a manifest, for messages: it is read, never run.
const MANIFEST_READ: &str = "read";

/// A file that may be a tool.
#[derive(Debug)]
pub(crate) struct Candidate {
    pub(crate) path: PathBuf,
    pub(crate) source: PathBuf,
    pub(crate) layer: Layer,
    pub(crate) expected: ToolName,
    pub(crate) format: Format,
    pub(crate) fingerprint: Fingerprint,
}

impl Candidate {
    /// Whether policy lets discovery look at this file: run it (an executable), or read it
    /// (a manifest, whose profile check waits for what it declares).
    pub(crate) fn denial(&self, policy: &Policy) -> Result<(), Denial> {
        policy.check_unprobed(&self.expected, self.format != Format::Manifest)
    }
}

/// How far discovery has come: `probed` of `total` candidates answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscoveryProgress {
    /// Candidates whose probe has finished.
    pub probed: usize,
    /// Candidates that needed a probe (those the cache answered are not counted).
    pub total: usize,
}

/// How discovery treats files it has seen before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Reuse the cached result of every unchanged file.
    UseCache,
    /// Probe every file again (an explicit refresh), refilling the cache.
    ProbeAll,
    /// Reuse cached results, and leave a changed file modified less than this long ago for
    /// later: it may still be being written (the live registry's rescans).
    Settle(Duration),
}

/// What a discovery found, and when a file it left for later will have settled.
#[derive(Debug)]
pub(crate) struct Discovery {
    pub(crate) catalog: Catalog,
    /// The earliest moment a file left for later has settled, if any was.
    pub(crate) retry_at: Option<SystemTime>,
}

/// Scans `dirs` (relative ones are taken from `config.cwd`) and probes every
/// candidate, at most as many at once as the machine has cores.
///
/// The directories are [`Layer::Explicit`], nothing is cached and every file is probed
/// ([`Policy::allow_all`]); [`discover_layers`] takes layers, a [`DiscoveryCache`] and the
/// policy in force.
/// Never fails: whatever cannot be loaded is a [`Problem`] in the catalog.
/// Cancel-safe: dropping the future kills the probes still running.
pub async fn discover(executor: &Arc<Executor>, dirs: &[PathBuf], config: &RunConfig) -> Catalog {
    let mut cache = DiscoveryCache::in_memory();
    discover_layers(
        executor,
        &LayerDir::explicit(dirs),
        &mut cache,
        config,
        &Policy::allow_all(),
        &|_| {},
    )
    .await
}

/// Scans the directories of `layers`, lowest precedence first, and probes every candidate
/// whose file changed since `cache` last saw it; the others spawn no process.
///
/// A missing directory is skipped, unless its layer is one the user named
/// ([`Layer::missing_is_problem`]). The cache is updated, not saved. `progress` is called
/// once the files to probe are known and after each probe, so that a long discovery can show
/// how far it is.
///
/// A file that `policy` would refuse to run is never run, not even to ask for its
/// description: it is one of the catalog's [`denied`](Catalog::denied) files.
pub async fn discover_layers(
    executor: &Arc<Executor>,
    layers: &[LayerDir],
    cache: &mut DiscoveryCache,
    config: &RunConfig,
    policy: &Policy,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Catalog {
    discover_matching(
        executor,
        layers,
        None,
        cache,
        Freshness::UseCache,
        config,
        policy,
        progress,
    )
    .await
    .catalog
}

/// Like [`discover_layers`], but looks only at the files that would provide `name`, so
/// that calling one tool does not wait for every other tool's probe.
///
/// Problems of other files are not reported; those of `name`'s files are.
pub async fn discover_one(
    executor: &Arc<Executor>,
    layers: &[LayerDir],
    cache: &mut DiscoveryCache,
    name: &ToolName,
    config: &RunConfig,
    policy: &Policy,
) -> Catalog {
    discover_matching(
        executor,
        layers,
        Some(name),
        cache,
        Freshness::UseCache,
        config,
        policy,
        &|_| {},
    )
    .await
    .catalog
}

#[expect(
    clippy::too_many_arguments,
    reason = "the internal entry point of the three public discoveries; each caller names every argument"
)]
pub(crate) async fn discover_matching(
    executor: &Arc<Executor>,
    layers: &[LayerDir],
    only: Option<&ToolName>,
    cache: &mut DiscoveryCache,
    freshness: Freshness,
    config: &RunConfig,
    policy: &Policy,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Discovery {
    let (candidates, mut problems) = scan_dirs(layers, only, config);
    let sandbox_key = probe_sandbox_key(executor.features());

    // Each candidate gets a record from the cache, from a fresh probe, or (when it is left
    // for later) the last record known for its path, which may be none.
    let now = SystemTime::now();
    let mut retry_at: Option<SystemTime> = None;
    let mut records: Vec<Option<Result<Probed, ProblemError>>> = Vec::new();
    let mut denials: Vec<Option<Denial>> = Vec::new();
    let mut to_probe = Vec::new();
    for (index, candidate) in candidates.iter().enumerate() {
        // Policy is checked before anything else, the cache included: a refused file is
        // neither run nor described, whatever an earlier discovery learnt of it.
        let denial = candidate.denial(policy).err();
        denials.push(denial);
        if denial.is_some() {
            records.push(None);
            continue;
        }
        let cached = match freshness {
            Freshness::ProbeAll => None,
            Freshness::UseCache | Freshness::Settle(_) => cache.get(
                &candidate.path,
                &candidate.fingerprint,
                candidate.format.protocols(),
                &sandbox_key,
            ),
        };
        if let Some(record) = cached {
            records.push(Some(Ok(record.clone())));
            continue;
        }
        // A modification time further in the future than the settle time is a skewed clock,
        // not a write in progress: waiting for it could take forever.
        if let Freshness::Settle(settle) = freshness
            && let Some(settled_at) = candidate
                .fingerprint
                .modified()
                .map(|modified| modified + settle)
                .filter(|settled_at| *settled_at > now && *settled_at <= now + settle)
        {
            retry_at = Some(retry_at.map_or(settled_at, |earlier| earlier.min(settled_at)));
            records.push(cache.last(&candidate.path).cloned().map(Ok));
            continue;
        }
        records.push(None);
        to_probe.push(index);
    }
    let probe_candidates: Vec<&Candidate> =
        to_probe.iter().map(|&index| &candidates[index]).collect();
    let probed = probe_all(executor, &probe_candidates, config, progress).await;
    for (index, (result, probed_at)) in to_probe.into_iter().zip(probed) {
        let candidate = &candidates[index];
        // The file may have been rewritten between the look at its metadata and the probe's
        // execve, in which case the probe saw some other content, perhaps half of it. Such a
        // result describes no version of the file: it is never cached, and the live registry
        // keeps what it had and looks again once the file settles.
        let unchanged = fs::metadata(&candidate.path)
            .is_ok_and(|metadata| Fingerprint::of(&metadata) == candidate.fingerprint);
        // ETXTBSY says the same in the kernel's words: someone had the file open for writing
        // at the probe's execve (a writer in this very process included, whose descriptor a
        // concurrent spawn may briefly hold too).
        if !unchanged || is_being_written(&result) {
            if let Freshness::Settle(settle) = freshness {
                let settled_at = SystemTime::now() + settle;
                retry_at = Some(retry_at.map_or(settled_at, |earlier| earlier.min(settled_at)));
                records[index] = cache.last(&candidate.path).cloned().map(Ok);
                continue;
            }
        } else if let Ok(probed) = &result {
            cache.insert(
                candidate.path.clone(),
                candidate.fingerprint,
                probed_at,
                sandbox_key.clone(),
                probed.clone(),
            );
        }
        records[index] = Some(result);
    }

    // A single tool is looked up to be called or shown: its `config` is asked now if it never
    // was, and the answer kept with its description.
    if only.is_some() {
        let indices: Vec<usize> = records
            .iter()
            .enumerate()
            .filter(|(_, record)| matches!(record, Some(Ok(_))))
            .map(|(index, _)| index)
            .collect();
        let answerable: Vec<&Candidate> = indices.iter().map(|&index| &candidates[index]).collect();
        let mut results: Vec<Result<Probed, ProblemError>> = indices
            .iter()
            .filter_map(|&index| match &records[index] {
                Some(Ok(probed)) => Some(Ok(probed.clone())),
                _ => None,
            })
            .collect();
        for answered in ask_configs(executor, &answerable, &mut results, config).await {
            let index = indices[answered];
            if let Ok(probed) = &results[answered] {
                cache.set_config(
                    &candidates[index].path,
                    &candidates[index].fingerprint,
                    probed.config.clone(),
                );
                records[index] = Some(Ok(probed.clone()));
            }
        }
    }

    let mut by_name: HashMap<ToolName, Resolved> = HashMap::new();
    let mut shadowed = Vec::new();
    for ((candidate, record), denial) in candidates.into_iter().zip(records).zip(denials) {
        let resolved = if let Some(denial) = denial {
            Resolved::Denied(DeniedTool {
                name: candidate.expected,
                path: candidate.path.clone(),
                source: candidate.source,
                layer: candidate.layer,
                denial,
            })
        } else {
            let Some(record) = record else {
                continue;
            };
            match record.and_then(|probed| load(&probed, &candidate)) {
                Ok(tool) => Resolved::Tool(Box::new(tool)),
                Err(error) => {
                    problems.push(Problem {
                        path: candidate.path,
                        error,
                    });
                    continue;
                }
            }
        };
        // A refused file hidden by a later one is dropped: it was never a tool to call.
        if let Some(Resolved::Tool(previous)) = by_name.insert(resolved.name().clone(), resolved) {
            shadowed.push(Shadowed {
                tool: *previous,
                by: candidate.path,
            });
        }
    }
    let mut tools = Vec::new();
    let mut denied = Vec::new();
    for resolved in by_name.into_values() {
        match resolved {
            Resolved::Tool(tool) => tools.push(*tool),
            Resolved::Denied(refused) => denied.push(refused),
        }
    }
    tools.sort_by(|left, right| left.name().cmp(right.name()));
    denied.sort_by(|left, right| left.name.cmp(&right.name));
    Discovery {
        catalog: Catalog {
            tools,
            problems,
            shadowed,
            denied,
        },
        retry_at,
    }
}

/// What a tool name stands for after discovery: a tool, or a file policy refused to run.
enum Resolved {
    Tool(Box<Tool>),
    Denied(DeniedTool),
}

impl Resolved {
    fn name(&self) -> &ToolName {
        match self {
            Resolved::Tool(tool) => tool.name(),
            Resolved::Denied(denied) => &denied.name,
        }
    }
}

/// The candidates and problems of `layers` (relative directories taken from `config.cwd`),
/// only those concerning `only` when it is given.
pub(crate) fn scan_dirs(
    layers: &[LayerDir],
    only: Option<&ToolName>,
    config: &RunConfig,
) -> (Vec<Candidate>, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut candidates = Vec::new();
    for layer_dir in layers {
        let dir = config.cwd.join(&layer_dir.dir);
        scan_dir(&dir, layer_dir.layer, &mut candidates, &mut problems);
    }
    if let Some(only) = only {
        candidates.retain(|candidate| &candidate.expected == only);
        problems.retain(|problem| problem_concerns(problem, only));
    }
    (candidates, problems)
}

/// Whether the probe failed because the file was open for writing when it was run.
fn is_being_written(result: &Result<Probed, ProblemError>) -> bool {
    matches!(
        result,
        Err(ProblemError::Spawn {
            source: toolsmith_executor::Error::Spawn { source, .. },
            ..
        }) if source.kind() == io::ErrorKind::ExecutableFileBusy
    )
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
            .and_then(file_tool_name)
            .is_some_and(|file_tool| &file_tool == name),
    }
}

/// Adds the candidates of `dir` in sorted file-name order.
fn scan_dir(
    dir: &Path,
    layer: Layer,
    candidates: &mut Vec<Candidate>,
    problems: &mut Vec<Problem>,
) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(source) if source.kind() == io::ErrorKind::NotFound && !layer.missing_is_problem() => {
            return;
        }
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
            Ok(Some(Classified {
                name: expected,
                format,
                fingerprint,
            })) => {
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
                    layer,
                    expected,
                    format,
                    fingerprint,
                });
            }
            Ok(None) => {}
            Err(error) => problems.push(Problem { path, error }),
        }
    }
}

/// What [`classify`] tells of a candidate file.
#[derive(Debug)]
pub(crate) struct Classified {
    pub(crate) name: ToolName,
    pub(crate) format: Format,
    pub(crate) fingerprint: Fingerprint,
}

/// The tool name, format and fingerprint of `path` if it is a candidate, `None` if it is
/// silently skipped.
pub(crate) fn classify(path: &Path) -> Result<Option<Classified>, ProblemError> {
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
        // A script someone forgot to make executable is the commonest reason a tool does not
        // show up; any other file without the execute bit (notes, data) is not a tool.
        return if starts_with_shebang(path) {
            Err(ProblemError::NotExecutable)
        } else {
            Ok(None)
        };
    }
    let file_name = file_name.to_str().ok_or(ProblemError::NonUtf8FileName)?;
    let (name, format) =
        tool_of_file(file_name).map_err(|source| ProblemError::FileName { source })?;
    Ok(Some(Classified {
        name,
        format,
        fingerprint: Fingerprint::of(&metadata),
    }))
}

/// True when the file at `path` starts with `#!`.
fn starts_with_shebang(path: &Path) -> bool {
    let mut start = [0_u8; 2];
    fs::File::open(path)
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut start))
        .is_ok_and(|()| &start == b"#!")
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

/// Probes every candidate; the results, each with the moment its probe started, are in the
/// candidates' order. `progress` hears of the total at once and of each finished probe.
pub(crate) async fn probe_all(
    executor: &Arc<Executor>,
    candidates: &[&Candidate],
    config: &RunConfig,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Vec<(Result<Probed, ProblemError>, SystemTime)> {
    let total = candidates.len();
    progress(DiscoveryProgress { probed: 0, total });
    let permits = Arc::new(tokio::sync::Semaphore::new(probes_in_flight()));
    let sessions = Arc::new(Sessions::default());
    let limits = probe_limits(&config.limits);
    let mut tasks = tokio::task::JoinSet::new();
    let mut index_of_task = HashMap::new();
    for (index, candidate) in candidates.iter().enumerate() {
        let executor = Arc::clone(executor);
        let sessions = Arc::clone(&sessions);
        let permits = Arc::clone(&permits);
        let limits = limits.clone();
        let cwd = config.cwd.clone();
        let env = config.env.clone();
        let sandbox = probe_sandbox();
        let path = candidate.path.clone();
        let format = candidate.format;
        let handle = tasks.spawn(async move {
            // The semaphore is never closed, so acquiring only waits.
            let _permit = permits.acquire_owned().await;
            let directory = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let session = sessions.take(&directory, &executor);
            let probe = Probe {
                session: &session,
                cwd: &cwd,
                env: &env,
                limits: &limits,
                sandbox: &sandbox,
            };
            // Taken before the probe reads the file, so a write after the read has a later
            // modification time than this (see `RACY_MARGIN`).
            let probed_at = SystemTime::now();
            let probed = probe.run(format, &path).await;
            sessions.put(directory, session);
            (probed, probed_at)
        });
        index_of_task.insert(handle.id(), index);
    }

    let mut results: Vec<Option<(Result<Probed, ProblemError>, SystemTime)>> =
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
    // Panics are resumed above and no task is aborted here, but a runtime that shuts
    // down cancels the tasks it owns while this future may still be polled.
    results
        .into_iter()
        .map(|result| result.unwrap_or_else(|| (Err(ProblemError::Cancelled), SystemTime::now())))
        .collect()
}

/// The executor sessions of one discovery's probes, by tool directory: the probes of one
/// directory (one author, one trust decision) take turns in a few inits (one per probe in
/// flight), so that their namespaces, mounts and filter are set up a few times rather than
/// once per probe. Probes of different directories never share one. Each probe still runs in
/// a cgroup of its own, killed at its end; what a probe leaves in its TMPDIR, a later probe
/// of the same directory may see (`docs/discovery.md`).
#[derive(Default)]
struct Sessions {
    idle: std::sync::Mutex<Vec<(PathBuf, toolsmith_executor::Session)>>,
}

impl Sessions {
    /// An idle session of `directory`, or a new one.
    fn take(&self, directory: &Path, executor: &Arc<Executor>) -> toolsmith_executor::Session {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match idle.iter().position(|(dir, _)| dir == directory) {
            Some(index) => idle.swap_remove(index).1,
            None => executor.session(),
        }
    }

    fn put(&self, directory: PathBuf, session: toolsmith_executor::Session) {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((directory, session));
    }
}

/// How many probes run at once: two per core. A probe spends much of its time waiting (for the
/// spawner thread, its init, the program's exit), so one per core leaves cores idle; `cargo
/// xtask bench` (discovery) measured 500 cold probes at 0.85 s with one per core and 0.65 s
/// with two on 2 cores, and no further gain with more.
fn probes_in_flight() -> usize {
    2 * std::thread::available_parallelism().map_or(1, usize::from)
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
    /// Probes run in sessions, never as calls: a session's runs prepare no sandbox ahead
    /// (`Executor::keep_prepared`), so the probes' sandbox never waits in the place of a
    /// call's. A lone probe has a session of its own.
    session: &'a toolsmith_executor::Session,
    cwd: &'a Path,
    env: &'a [(OsString, OsString)],
    limits: &'a Limits,
    /// [`probe_sandbox`]: the strictest the kernel allows, whatever the operator grants calls,
    /// since a probe runs the tool's program only to ask for its description.
    sandbox: &'a toolsmith_executor::Sandbox,
}

impl Probe<'_> {
    /// Runs the probes of `format` on the file at `path`. Only a failure to run a probe at all
    /// is an error; whatever the program did is a record, which [`load`] interprets.
    async fn run(&self, format: Format, path: &Path) -> Result<Probed, ProblemError> {
        match format {
            // A manifest is read, not run: its record is its contents, which the live registry
            // keeps like any other while a changed manifest settles.
            Format::Manifest => fs::read(path)
                .map(|contents| Probed::only(MANIFEST_PROTOCOL, ProbeRecord::Output(contents)))
                .map_err(|source| ProblemError::ReadManifest { source }),
            Format::Ikigai => Ok(Probed::only(ikigai::PROTOCOL, self.schema(path).await?)),
            Format::Kodelet => self.kodelet(path).await,
        }
    }

    /// `description`; when it fails the way an ikigai tool would, `--schema` as well. The
    /// optional `config` is not asked here but at the tool's first call ([`ask_configs`]).
    async fn kodelet(&self, path: &Path) -> Result<Probed, ProblemError> {
        let command = kodelet::description_command(path, self.cwd, self.env).map_err(|source| {
            ProblemError::Spawn {
                probe: kodelet::DESCRIPTION_ARG,
                source,
            }
        })?;
        let description = self.record(kodelet::DESCRIPTION_ARG, command).await?;
        let described = probe_stdout(kodelet::DESCRIPTION_ARG, &description).and_then(|stdout| {
            kodelet::parse_description(stdout)
                .map(drop)
                .map_err(|source| ProblemError::Description { source })
        });
        match described {
            Ok(()) => Ok(Probed::only(kodelet::PROTOCOL, description)),
            Err(error) if !worth_trying_schema(&error) => {
                Ok(Probed::only(kodelet::PROTOCOL, description))
            }
            Err(_) => {
                let schema = self.schema(path).await?;
                let answered = probe_stdout(ikigai::SCHEMA_ARG, &schema)
                    .is_ok_and(|stdout| ikigai::parse_schema(stdout).is_ok());
                if answered {
                    Ok(Probed::only(ikigai::PROTOCOL, schema))
                } else {
                    Ok(Probed {
                        fallback: Some(Box::new(schema)),
                        ..Probed::only(kodelet::PROTOCOL, description)
                    })
                }
            }
        }
    }

    /// The `--schema` probe.
    async fn schema(&self, path: &Path) -> Result<ProbeRecord, ProblemError> {
        let command = ikigai::schema_command(path, self.cwd, self.env).map_err(|source| {
            ProblemError::Spawn {
                probe: ikigai::SCHEMA_ARG,
                source,
            }
        })?;
        self.record(ikigai::SCHEMA_ARG, command).await
    }

    /// What the optional `config` subcommand answered: what it printed, or that the tool does
    /// not implement it (a non-zero exit, a timeout, ...), which is not a problem.
    async fn config(&self, path: &Path) -> ConfigAnswer {
        let command = match kodelet::config_command(path, self.cwd, self.env) {
            Ok(command) => command,
            Err(error) => {
                tracing::debug!(path = %path.display(), %error, "no `config` probe");
                return ConfigAnswer::NotImplemented;
            }
        };
        match self.record(kodelet::CONFIG_ARG, command).await {
            Ok(ProbeRecord::Output(stdout)) => ConfigAnswer::Printed(stdout),
            Ok(record) => {
                tracing::debug!(path = %path.display(), ?record, "`config` not implemented");
                ConfigAnswer::NotImplemented
            }
            Err(error) => {
                tracing::debug!(path = %path.display(), error = %error_chain(&error), "`config` not implemented");
                ConfigAnswer::NotImplemented
            }
        }
    }

    /// Runs `command` (the probe called `probe`, e.g. `description`) and records how it ended.
    async fn record(
        &self,
        probe: &'static str,
        mut command: Command,
    ) -> Result<ProbeRecord, ProblemError> {
        command.sandbox(self.sandbox.clone());
        let outcome = self
            .session
            .run(&command, self.limits)
            .await
            .map_err(|source| ProblemError::Spawn { probe, source })?;
        match outcome.limit {
            Some(LimitKind::Timeout) => return Ok(ProbeRecord::Timeout(self.limits.timeout)),
            Some(limit) => return Ok(ProbeRecord::Limit(limit)),
            None => {}
        }
        match outcome.termination {
            Termination::Exited(0) => {}
            Termination::Exited(code) => {
                return Ok(ProbeRecord::Exited {
                    code,
                    first_stderr_line: first_line(&outcome.stderr.text_lossy()),
                });
            }
            Termination::Signaled(signal) => return Ok(ProbeRecord::Signaled(signal)),
        }
        if outcome.stdout.truncated {
            return Ok(ProbeRecord::OutputTooLarge(outcome.stdout.total));
        }
        Ok(ProbeRecord::Output(outcome.stdout.bytes))
    }
}

/// What the probe called `probe` printed, or why that is not a usable answer.
fn probe_stdout<'a>(
    probe: &'static str,
    record: &'a ProbeRecord,
) -> Result<&'a [u8], ProblemError> {
    match record {
        ProbeRecord::Output(stdout) => Ok(stdout),
        ProbeRecord::Timeout(timeout) => Err(ProblemError::Timeout {
            probe,
            timeout: *timeout,
        }),
        ProbeRecord::Limit(limit) => Err(ProblemError::Limit {
            probe,
            limit: *limit,
        }),
        ProbeRecord::Exited {
            code,
            first_stderr_line,
        } => Err(ProblemError::Exited {
            probe,
            code: *code,
            first_stderr_line: first_stderr_line.clone(),
        }),
        ProbeRecord::Signaled(signal) => Err(ProblemError::Signaled {
            probe,
            signal: *signal,
        }),
        ProbeRecord::OutputTooLarge(total) => Err(ProblemError::OutputTooLarge {
            probe,
            total: *total,
        }),
    }
}

/// Loads one candidate in its format from its probes' records, then applies the checks every
/// format shares.
fn load(probed: &Probed, candidate: &Candidate) -> Result<Tool, ProblemError> {
    let parts = if candidate.format == Format::Manifest {
        load_manifest(probe_stdout(MANIFEST_READ, &probed.record)?, candidate)?
    } else if probed.protocol == ikigai::PROTOCOL {
        load_ikigai(probe_stdout(ikigai::SCHEMA_ARG, &probed.record)?, candidate)?
    } else {
        match load_kodelet(probed, candidate) {
            Ok(parts) => parts,
            Err(description) => {
                let Some(schema) = &probed.fallback else {
                    return Err(description);
                };
                let schema_error = match probe_stdout(ikigai::SCHEMA_ARG, schema)
                    .and_then(|stdout| load_ikigai(stdout, candidate))
                {
                    // A fallback that answers is filed under ikigai's protocol, so this
                    // cannot happen; should it, the answer is taken.
                    Ok(parts) => return register(parts, &candidate.expected),
                    Err(error) => error,
                };
                return Err(ProblemError::NeitherProtocol {
                    description: Box::new(description),
                    schema: Box::new(schema_error),
                });
            }
        }
    };
    register(parts, &candidate.expected)
}

/// The tool the Kodelet executable at `path` is, had its `description` probe printed
/// `description` and its `config` probe printed `config`: the same classification, parsing
/// and registration checks as [`discover`] applies to a probed file (in [`Layer::Explicit`],
/// from the file's directory), with nothing run. `Ok(None)` when discovery would not probe
/// the file as a Kodelet tool (a manifest, an ikigai `NAME-tool`, a skipped file).
///
/// For a caller that wrote the file and knows what it answers (the generator), so that it
/// can call the tool while discovery's own probes of the file run. It proves nothing about
/// what the file really answers: compare the result with the tool [`discover`] loads.
pub fn load_answered(
    path: &Path,
    description: &[u8],
    config: &[u8],
) -> Result<Option<Tool>, ProblemError> {
    let Some(classified) = classify(path)? else {
        return Ok(None);
    };
    if classified.format != Format::Kodelet {
        return Ok(None);
    }
    let candidate = Candidate {
        path: path.to_path_buf(),
        source: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        layer: Layer::Explicit,
        expected: classified.name,
        format: classified.format,
        fingerprint: classified.fingerprint,
    };
    let probed = Probed {
        config: ConfigAnswer::Printed(config.to_vec()),
        ..Probed::only(kodelet::PROTOCOL, ProbeRecord::Output(description.to_vec()))
    };
    load(&probed, &candidate).map(Some)
}

/// Probes the candidates (ignoring any cache) and loads each: what `validate` reports.
pub(crate) async fn load_fresh(
    executor: &Arc<Executor>,
    candidates: &[&Candidate],
    config: &RunConfig,
) -> Vec<Result<Tool, ProblemError>> {
    let mut results: Vec<Result<Probed, ProblemError>> =
        probe_all(executor, candidates, config, &|_| {})
            .await
            .into_iter()
            .map(|(result, _probed_at)| result)
            .collect();
    ask_configs(executor, candidates, &mut results, config).await;
    results
        .into_iter()
        .zip(candidates)
        .map(|(result, candidate)| result.and_then(|probed| load(&probed, candidate)))
        .collect()
}

/// Asks `config` of every candidate whose result is a Kodelet description that loads and
/// whose `config` was never asked, in parallel (at most two probes per core), and records the
/// answers in `results`; returns the indices answered.
///
/// Listing never asks: a cold discovery then spawns one process per tool, not two. A tool's
/// first call asks ([`discover_one`], [`LiveRegistry::ready_for_call`](crate::LiveRegistry::ready_for_call)),
/// and the cache keeps the answer with the description, so the timeout a tool requests
/// applies from its first call on.
pub(crate) async fn ask_configs(
    executor: &Arc<Executor>,
    candidates: &[&Candidate],
    results: &mut [Result<Probed, ProblemError>],
    config: &RunConfig,
) -> Vec<usize> {
    let pending: Vec<usize> = results
        .iter()
        .zip(candidates)
        .enumerate()
        .filter(|(_, (result, candidate))| {
            result.as_ref().is_ok_and(|probed| {
                probed.protocol == kodelet::PROTOCOL
                    && probed.config == ConfigAnswer::NotAsked
                    && load_kodelet(probed, candidate).is_ok()
            })
        })
        .map(|(index, _)| index)
        .collect();
    if pending.is_empty() {
        return pending;
    }
    let permits = Arc::new(tokio::sync::Semaphore::new(probes_in_flight()));
    let limits = probe_limits(&config.limits);
    let mut tasks = tokio::task::JoinSet::new();
    for &index in &pending {
        let executor = Arc::clone(executor);
        let permits = Arc::clone(&permits);
        let limits = limits.clone();
        let cwd = config.cwd.clone();
        let env = config.env.clone();
        let path = candidates[index].path.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let session = executor.session();
            let probe = Probe {
                session: &session,
                cwd: &cwd,
                env: &env,
                limits: &limits,
                sandbox: &probe_sandbox(),
            };
            (index, probe.config(&path).await)
        });
    }
    let mut answered = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, answer)) => {
                if let Some(Ok(probed)) = results.get_mut(index) {
                    probed.config = answer;
                    answered.push(index);
                }
            }
            Err(join_error) if join_error.is_panic() => {
                std::panic::resume_unwind(join_error.into_panic());
            }
            // Cancelled with the runtime: the tool keeps its `config` pending.
            Err(_cancelled) => {}
        }
    }
    answered
}

/// `tool` ready to be called: for a Kodelet tool whose `config` was never asked
/// ([`Tool::config_pending`]), the answer `cache` holds for its file, else the answer of a
/// `config` probe run now (in the probes' sandbox) and recorded in `cache` (not saved).
///
/// A `config` that asks for an invalid timeout makes the tool a problem, as it would have
/// been had discovery asked: the error says why, and the caller runs nothing.
pub async fn resolve_config(
    executor: &Arc<Executor>,
    tool: &Tool,
    cache: &mut DiscoveryCache,
    config: &RunConfig,
) -> Result<Tool, ProblemError> {
    if !tool.config_pending() {
        return Ok(tool.clone());
    }
    let fingerprint = fs::metadata(tool.path()).map(|metadata| Fingerprint::of(&metadata));
    let sandbox_key = probe_sandbox_key(executor.features());
    let cached = fingerprint
        .as_ref()
        .ok()
        .and_then(|fingerprint| cache.config_of(tool.path(), fingerprint, &sandbox_key))
        .cloned();
    let answer = match cached {
        Some(answer) => answer,
        None => {
            let limits = probe_limits(&config.limits);
            let session = executor.session();
            let probe = Probe {
                session: &session,
                cwd: &config.cwd,
                env: &config.env,
                limits: &limits,
                sandbox: &probe_sandbox(),
            };
            let answer = probe.config(tool.path()).await;
            if let Ok(fingerprint) = &fingerprint {
                cache.set_config(tool.path(), fingerprint, answer.clone());
            }
            answer
        }
    };
    let requested = match answer {
        ConfigAnswer::Printed(printed) => {
            kodelet::parse_config(&printed).map_err(|source| ProblemError::Config { source })?
        }
        ConfigAnswer::NotImplemented | ConfigAnswer::NotAsked => None,
    };
    Ok(tool.with_requested_timeout(requested))
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

fn load_kodelet(probed: &Probed, candidate: &Candidate) -> Result<ToolParts, ProblemError> {
    let stdout = probe_stdout(kodelet::DESCRIPTION_ARG, &probed.record)?;
    let description = kodelet::parse_description(stdout)
        .map_err(|source| ProblemError::Description { source })?;
    let requested_timeout = match &probed.config {
        ConfigAnswer::Printed(config) => {
            kodelet::parse_config(config).map_err(|source| ProblemError::Config { source })?
        }
        ConfigAnswer::NotImplemented | ConfigAnswer::NotAsked => None,
    };
    Ok(ToolParts {
        name: description.name,
        description: description.description,
        input_schema: description.input_schema,
        output_schema: description.output_schema,
        annotations: Annotations::undeclared(),
        requested_timeout,
        config_pending: probed.config == ConfigAnswer::NotAsked,
        sandbox: description.sandbox,
        path: candidate.path.clone(),
        source: candidate.source.clone(),
        layer: candidate.layer,
        runner: Runner::Kodelet,
        tests: description.tests,
        env_arguments: description.env_arguments,
    })
}

fn load_ikigai(stdout: &[u8], candidate: &Candidate) -> Result<ToolParts, ProblemError> {
    let schema =
        ikigai::parse_schema(stdout).map_err(|source| ProblemError::SchemaOutput { source })?;
    Ok(ToolParts {
        name: schema.name,
        description: schema.description,
        input_schema: schema.input_schema,
        output_schema: schema.output_schema,
        annotations: Annotations::undeclared(),
        requested_timeout: None,
        config_pending: false,
        sandbox: schema.sandbox,
        path: candidate.path.clone(),
        source: candidate.source.clone(),
        layer: candidate.layer,
        runner: Runner::Ikigai,
        tests: Vec::new(),
        env_arguments: schema.env_arguments,
    })
}

/// Reads and parses a manifest; nothing is run.
fn load_manifest(contents: &[u8], candidate: &Candidate) -> Result<ToolParts, ProblemError> {
    let text = std::str::from_utf8(contents).map_err(|_| ProblemError::ReadManifest {
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ),
    })?;
    let manifest = manifest::parse(text, &candidate.expected)?;
    Ok(ToolParts {
        name: manifest.name.clone(),
        description: manifest.description.clone(),
        input_schema: manifest.input_schema.clone(),
        output_schema: manifest.output_schema.clone(),
        annotations: Annotations {
            title: None,
            approval: manifest.approval,
            read_only: manifest.read_only,
        },
        requested_timeout: Some(manifest.timeout),
        config_pending: false,
        sandbox: manifest.sandbox,
        path: candidate.path.clone(),
        source: candidate.source.clone(),
        layer: candidate.layer,
        tests: manifest.tests.clone(),
        env_arguments: true,
        runner: Runner::Manifest(Box::new(manifest)),
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

    use std::time::Duration;

    use crate::discovery::{ProblemError, classify, first_line, load_answered};

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
            .map(|name| name.map(|classified| classified.name.as_str().to_owned()))
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
        check("data.json", Some(("{}", 0o644)), Ok(None));
        check("README.md", Some(("# My tools", 0o644)), Ok(None));
        check("changelog.md", Some(("# Changes", 0o644)), Ok(None));
        check(".hidden", Some(("#!/bin/sh\n", 0o755)), Ok(None));
        check("subdir", None, Ok(None));
    }

    #[test]
    fn script_without_the_execute_bit_is_a_problem() {
        check(
            "forgot",
            Some(("#!/bin/sh\n", 0o644)),
            Err("it starts with `#!` but is not executable (chmod +x it)"),
        );
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
        assert_eq!(classify(&link).unwrap().unwrap().name.as_str(), "linked");
    }

    /// `load_answered` loads what discovery would from the same answers, and refuses what
    /// discovery would refuse, without running the file (which here would fail if run).
    #[test]
    fn answers_load_as_probes_would() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("say_hi");
        fs::write(&path, "#!/bin/sh\nexit 9\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        let description = br#"{"name": "say_hi", "description": "Says hi.", "input_schema": {"type": "object", "properties": {}}}"#;
        let tool = load_answered(&path, description, br#"{"timeout": "45s"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(tool.name().as_str(), "say_hi");
        assert_eq!(tool.description(), "Says hi.");
        assert_eq!(tool.requested_timeout(), Some(Duration::from_secs(45)));
        assert!(!tool.config_pending());
        assert_eq!(tool.source(), dir.path());

        let renamed = br#"{"name": "say_bye", "description": "Says bye.", "input_schema": {"type": "object"}}"#;
        let error = load_answered(&path, renamed, b"").unwrap_err();
        assert!(
            matches!(error, ProblemError::NameMismatch { .. }),
            "{error}"
        );

        let manifest = dir.path().join("say_hi.md");
        fs::write(&manifest, "---\nname: say_hi\n---\necho hi\n").unwrap();
        assert!(
            load_answered(&manifest, description, b"")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn first_stderr_line() {
        assert_eq!(first_line("\n  \n boom \nmore"), Some("boom".to_owned()));
        assert_eq!(first_line(""), None);
    }
}
