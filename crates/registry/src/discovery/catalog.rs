//! What discovery produces: the [`Catalog`] of tools, the [`Problem`]s of the files that could
//! not be loaded (each with its [`ProblemError`]), and the tools shadowed or denied.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use toolsmith_executor::LimitKind;

use crate::discovery::discover::PROBE_MAX_OUTPUT;
use crate::formats::ikigai::ToolSchemaError;
use crate::formats::kodelet::{ConfigError, DescriptionError};
use crate::formats::manifest::error::ManifestErrors;
use crate::layer::Layer;
use crate::message::error_chain;
use crate::name::{NameError, ToolName};
use crate::policy::Denial;
use crate::project_trust::Distrust;
use crate::tool::{MAX_DESCRIPTION_BYTES, Tool};

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
    /// A project's tool directory (`.toolsmith/tools`, a peer's) is, or lies in, a symbolic
    /// link: whoever wrote the project could point it anywhere (the user's own layer), so it is
    /// not read (issue 22, finding 2).
    #[error(
        "a project's tool directory is reached through a symbolic link, which toolsmith does not follow"
    )]
    LinkedLayer,
    /// A project's layer that is no longer trusted: skipped until `toolsmith trust` again.
    #[error(
        "the project's layer is skipped: {distrust}; run `toolsmith trust` in it again (after reading its .toolsmith/) to use it"
    )]
    UntrustedLayer {
        /// Why.
        distrust: Distrust,
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
    /// A FIFO, device or socket among the tools (or a link to one): never opened, since
    /// reading it would block or never end.
    #[error("not a regular file but a {kind}")]
    NotRegular {
        /// What it is.
        kind: &'static str,
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
        "`{probe}` exited with status {code}{}{}",
        stderr_suffix(first_stderr_line),
        blocked_suffix(blocked)
    )]
    Exited {
        /// The probe's argument.
        probe: &'static str,
        /// The exit status.
        code: i32,
        /// The first non-empty line of stderr, if any.
        first_stderr_line: Option<String>,
        /// What its stderr says the probes' sandbox refused it, if anything.
        blocked: Option<ProbeBlocked>,
    },
    /// The probe was killed by a signal.
    #[error("`{probe}` was killed by signal {signal}")]
    Signaled {
        /// The probe's argument.
        probe: &'static str,
        /// The signal number.
        signal: i32,
    },
    /// The probe printed more than `PROBE_MAX_OUTPUT` bytes.
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
    /// The tool's description is longer than `MAX_DESCRIPTION_BYTES`: it would be sent in
    /// every listing.
    #[error(
        "the tool's description takes {bytes} bytes, more than the limit of {MAX_DESCRIPTION_BYTES}"
    )]
    DescriptionTooLong {
        /// Its length.
        bytes: usize,
    },
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

/// What a failed probe's stderr says the probes' sandbox refused it: the cause the message
/// of the tool's interpreter does not name (uv says `Failed to initialize cache`, never that
/// the probe could not write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeBlocked {
    /// A write outside the probe's TMPDIR and the tool's cache (`EROFS`, `EACCES`).
    Write,
    /// The network (a name that did not resolve, an unreachable network, a package manager
    /// kept offline), for the tool named: its dependencies are not prepared.
    Network {
        /// The tool, as `toolsmith prepare` takes it.
        name: ToolName,
    },
}

/// The sentence a blocked probe's problem ends with: the cause and the fix.
fn blocked_suffix(blocked: &Option<ProbeBlocked>) -> String {
    match blocked {
        None => String::new(),
        Some(ProbeBlocked::Write) => "; the probe could not write: discovery probes run in a \
            read-only sandbox where only its TMPDIR and the tool's own cache \
            ($TOOLSMITH_TOOL_CACHE, which XDG_CACHE_HOME, UV_CACHE_DIR, PIP_CACHE_DIR and \
            npm_config_cache point into) are writable; fix: have the tool write its state there"
            .to_owned(),
        Some(ProbeBlocked::Network { name }) => format!(
            "; the probe could not reach the network: discovery probes run in a read-only \
             sandbox without network; fix: run `toolsmith prepare {name}` once to fetch the \
             tool's dependencies into its cache"
        ),
    }
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
    pub(crate) tools: Vec<Tool>,
    pub(crate) problems: Vec<Problem>,
    pub(crate) shadowed: Vec<Shadowed>,
    pub(crate) denied: Vec<DeniedTool>,
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
