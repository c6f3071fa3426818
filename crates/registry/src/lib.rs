//! Tool formats, discovery, validation and invocation for toolsmith.
//!
//! The principal types: [`discover`] scans tool directories and probes every
//! candidate through a [`toolsmith_executor::Executor`], producing a
//! [`Catalog`] of [`Tool`]s (each with a [`ToolName`] and a compiled
//! [`InputSchema`]) and of [`Problem`]s for the files that could not be
//! loaded. [`invoke`] (or [`invoke_named`]) validates a call's arguments
//! against the tool's schema, runs it under the [`RunConfig`]'s limits and
//! environment, and returns an [`Envelope`]: the tool's result, or an
//! [`ErrorCode`] with a sentence, plus [`Metadata`] about the run.
//!
//! Around a call: a [`Policy`] decides which tools may be listed and called
//! (a denied call is `POLICY_DENIED` and runs nothing), [`ToolOverride`]s in
//! the [`RunConfig`] give single tools their own limits and environment, and
//! an [`AuditLog`] keeps one [`AuditRecord`] line per call.
//! [`validate_paths`] and [`validate_dirs`] report every check discovery
//! applies to a file, one [`Check`] at a time.
//! Tool directories come in layers ([`layer_dirs`]: system, user, project,
//! config, and optionally the peers' directories), each a [`LayerDir`];
//! [`discover_layers`] consults a [`DiscoveryCache`] so that an unchanged tool
//! is never probed twice, and a [`LiveRegistry`] keeps a catalog up to date
//! while the program runs: readers take an `Arc<Catalog>` snapshot without
//! blocking, a file watcher rescans what changed, and subscribers get a
//! [`ChangeEvent`] per change.
//!
//! The registry runs processes only through the executor and knows nothing of
//! command lines, terminals or exit codes.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::path::PathBuf;
//! use std::sync::Arc;
//! use toolsmith_executor::{BackendChoice, Executor, ExecutorConfig, Limits, filtered_env};
//! use toolsmith_registry::{Policy, RunConfig, SandboxSettings, discover, invoke_named};
//!
//! let executor = Arc::new(Executor::new(ExecutorConfig { backend: BackendChoice::Auto, max_concurrent: None })?);
//! let config = RunConfig {
//!     cwd: std::env::current_dir()?,
//!     env: filtered_env(&["PATH".to_owned()], &[]),
//!     limits: Limits::recommended(),
//!     max_timeout: std::time::Duration::from_secs(300),
//!     overrides: Default::default(),
//!     sandbox: SandboxSettings::unrestricted(),
//!     project_dir: std::env::current_dir()?,
//!     protected: Vec::new(),
//!     project_gate: None,
//!     tool_caches: None,
//!     read_masks: toolsmith_registry::ReadMasks::none(),
//!     secrets: Default::default(),
//! };
//! let catalog = discover(&executor, &[PathBuf::from("examples/tools")], &config).await;
//! for problem in catalog.problems() {
//!     eprintln!("{}: {}", problem.path.display(), problem.message());
//! }
//! let arguments = serde_json::json!({"name": "Ada"});
//! let envelope = invoke_named(&executor, &catalog, "custom_tool_hello", &arguments, &config, &Policy::allow_all()).await?;
//! println!("{}", serde_json::to_string(&envelope)?);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod access;
mod call;
mod definitions;
mod discovery;
mod envelope;
mod error;
mod formats;
mod grant;
mod layer;
#[macro_use]
mod limit_keys;
mod masks;
mod message;
mod name;
mod oob;
mod overrides;
mod policy;
mod project_trust;
mod regular_file;
mod sandbox;
mod schema;
mod secrets;
mod tool;
mod tool_cache;

pub use crate::access::{FilesystemSetting, NetworkSetting, UnknownSetting};
pub use crate::call::audit::{AuditError, AuditLog, AuditRecord, AuditedCall, arguments_sha256};
pub use crate::call::declared_tests::{CaseOutcome, run_cases, run_tests};
pub use crate::call::identity::{
    CALL_ID_VAR, CallIdentity, Id, KODELET_CONVERSATION_VAR, SESSION_ID_VAR,
};
pub use crate::call::invoke::{invoke, invoke_named, invoke_with_progress, unavailable};
pub use crate::call::learn::{Learning, learn, learn_cases};
pub use crate::call::prepare::{
    DEFAULT_NPM_REGISTRY, DEFAULT_PYTHON_INDEX, PREPARE_TIMEOUT, Preparation, PrepareError,
    PrepareStep, preparations,
};
pub use crate::call::progress::{PROGRESS_FD_VAR, Progress};
pub use crate::definitions::{DEFINITIONS_FILE, DefinitionChange, Definitions, definition_sha256};
pub use crate::discovery::cache::{
    CACHE_FILE, CACHE_VERSION, CacheError, DiscoveryCache, RACY_MARGIN,
};
pub use crate::discovery::catalog::{
    Catalog, DeniedTool, ProbeBlocked, Problem, ProblemError, Shadowed,
};
pub use crate::discovery::discover::{
    DiscoveryProgress, PROBE_MAX_OUTPUT, PROBE_RUNNER_TIMEOUT, PROBE_TIMEOUT, discover,
    discover_layers, discover_one,
};
pub use crate::discovery::layers::{
    LayerDir, LayerInputs, enclosing_work_tree, layer_dirs, project_dir,
};
pub use crate::discovery::live::{ChangeEvent, LiveRegistry, Registration, SETTLE};
pub use crate::discovery::load::load_answered;
pub use crate::discovery::probe::resolve_config;
pub use crate::discovery::validate::{
    Check, CheckKind, CheckStatus, FileReport, validate_dirs, validate_paths,
};
pub use crate::envelope::{
    Body, Envelope, ErrorCode, METADATA_STDERR_LIMIT, METADATA_STDOUT_LIMIT, Metadata,
};
pub use crate::error::Error;
pub use crate::formats::annotations::{Annotations, Approval};
pub use crate::formats::declared_tests::{Expectation, TestCase, TestsError, parse_tests};
pub use crate::formats::format::Format;
pub use crate::formats::ikigai::ToolSchemaError;
pub use crate::formats::kodelet::go_duration::DurationError;
pub use crate::formats::kodelet::{ConfigError, DescriptionError};
pub use crate::formats::manifest::error::{ManifestError, ManifestErrors};
pub use crate::formats::manifest::expand::ExpandError;
pub use crate::formats::manifest::frontmatter::{MAX_YAML_DEPTH, MAX_YAML_INDENT};
pub use crate::formats::manifest::model::{DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, ParamType};
pub use crate::formats::manifest::render::{MAX_COMMAND_WORDS, MAX_SHELL_NESTING, TemplateError};
pub use crate::formats::package_runner::PackageRunner;
pub use crate::grant::{DenialKind, InvalidTarget, NetworkTarget, SandboxDenial};
pub use crate::layer::{Layer, Peer};
pub use crate::limit_keys::{DEFAULT_MAX_TIMEOUT, LimitKind, Loosens, limit_kind};
pub use crate::masks::{
    CREDENTIALS, ReadMasks, RevealDenied, credential_paths, homes, reveals_own_state,
};
pub use crate::message::{error_chain, format_duration};
pub use crate::name::{EXPOSED_PREFIX, MAX_EXPOSED_LEN, NameError, RESERVED_NAME, ToolName};
pub use crate::oob::{
    ARG_VAR_PREFIX, ARGS_ENV, ARGS_VAR, ArgumentFileError, FILE_SUFFIX, ITEM_VAR_PREFIX, MAX_FILES,
    MAX_ITEMS, MAX_TOTAL_BYTES, MAX_VARIABLE_BYTES, OutOfBandError,
};
pub use crate::overrides::{CallConfig, RunConfig, TimeoutSource, ToolOverride};
pub use crate::policy::{Denial, Policy, Profile, UnknownProfile};
pub use crate::project_trust::{Distrust, ProjectGate, TrustVerdict};
pub use crate::regular_file::{
    Links, MAX_CACHE_BYTES, MAX_CONFIG_BYTES, MAX_TOOL_FILE_BYTES, MAX_TRUST_STORE_BYTES,
    RegularFileError, open_append_regular, read_regular, read_start,
};
pub use crate::sandbox::{
    AppliedReport, ProbeSandboxReport, SandboxDeclaration, SandboxDeclarationError, SandboxProfile,
    SandboxReport, SandboxSettings, SyscallsSetting, probe_sandbox_report, protected_paths,
};
pub use crate::schema::{
    InputSchema, MAX_ARGUMENTS_BYTES, MAX_ARGUMENTS_DEPTH, MAX_PATTERN_BYTES, MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH, MAX_VIOLATIONS, OutputSchema, PATTERN_BACKTRACK_LIMIT, SchemaError,
    Violation,
};
pub use crate::secrets::{
    COMMAND_TIMEOUT, MAX_SECRET_BYTES, SecretError, SecretName, SecretNameError, SecretSource,
    SecretValue, Secrets, snapshot_value,
};
pub use crate::tool::{GENERATED_HISTORY_DIR, MAX_DESCRIPTION_BYTES, Tool, is_generated};
pub use crate::tool_cache::{Index, TOOL_CACHE_VAR, TOOL_CACHES_DIR, ToolCache};
