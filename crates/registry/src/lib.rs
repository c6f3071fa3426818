//! Tool formats, discovery, validation and invocation for toolsmith.
//!
//! The front door is [`Toolsmith`]: one value holding the executor, the [`RunConfig`] and the
//! [`Policy`]. [`Toolsmith::discover`] scans tool directories and probes every candidate,
//! producing a [`Catalog`] of [`Tool`]s (each with a [`ToolName`], a description and a
//! compiled [`InputSchema`]) and of [`Problem`]s for the files that could not be loaded.
//! [`Toolsmith::call`] checks the policy, asks a Kodelet tool's pending `config`, fills the
//! declared defaults, validates the arguments against the tool's schema, runs it under the
//! [`RunConfig`]'s limits, sandbox and environment, and returns an [`Envelope`]: the tool's
//! result, or an [`ErrorCode`] with a sentence (every refusal is one), plus [`Metadata`]
//! about the run. [`Toolsmith::live`] keeps a catalog up to date while the program runs (a
//! [`LiveRegistry`]: readers take an `Arc<Catalog>` snapshot without blocking, a file watcher
//! rescans what changed, and subscribers get a [`ChangeEvent`] per change).
//!
//! Discover a directory and call a tool, after one `use`:
//!
//! ```standalone_crate
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))?;
//! use toolsmith_registry::Toolsmith;
//!
//! let toolsmith = Toolsmith::new()?;
//! let catalog = toolsmith.discover(&["examples/tools"]).await;
//! let envelope = toolsmith.call(&catalog, "hello", &serde_json::json!({"name": "Ada"})).await?;
//! # assert_eq!(serde_json::to_value(&envelope)?["result"], "Hello, Ada!", "{envelope:?}");
//! # Ok(()) }
//! ```
//!
//! Around a call: [`ToolOverride`]s in the [`RunConfig`] give single tools their own limits
//! and environment, and an [`AuditLog`] keeps one [`AuditRecord`] line per call.
//! [`Toolsmith::validate_paths`] and [`Toolsmith::validate_dirs`] report every check discovery applies to a file,
//! one [`Check`] at a time. Tool directories come in layers ([`layer_dirs`]: system, user,
//! project, config, and optionally the peers' directories), each a [`LayerDir`];
//! [`Toolsmith::discover_layers`] consults a [`DiscoveryCache`] so that an unchanged tool is
//! never probed twice.
//!
//! The registry runs processes only through the executor and knows nothing of command lines,
//! terminals or exit codes. The executor's types that appear in this crate's signatures
//! ([`Executor`], [`Limits`], [`ReportSink`], ...) are re-exported here, so that one crate and
//! one `use` suffice.
#![warn(missing_docs)]

mod access;
mod call;
mod context;
mod definitions;
mod discovery;
mod envelope;
mod error;
mod formats;
mod front;
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
pub use crate::call::declared_tests::CaseOutcome;
pub use crate::call::identity::{
    CALL_ID_VAR, CallIdentity, Id, KODELET_CONVERSATION_VAR, SESSION_ID_VAR,
};
pub use crate::call::learn::Learning;
pub use crate::call::prepare::{Preparation, PrepareError, PrepareStep, preparations};
pub use crate::call::progress::{PROGRESS_FD_VAR, Progress};
pub use crate::definitions::{DefinitionChange, Definitions};
pub use crate::discovery::cache::{CACHE_FILE, CacheError, DiscoveryCache, RACY_MARGIN};
pub use crate::discovery::catalog::{
    Catalog, DeniedTool, ProbeBlocked, Problem, ProblemError, Shadowed,
};
pub use crate::discovery::discover::{DiscoveryProgress, discover_layers, discover_one};
pub use crate::discovery::layers::{
    LayerDir, LayerInputs, enclosing_work_tree, layer_dirs, project_dir,
};
pub use crate::discovery::live::{ChangeEvent, LiveRegistry, Registration, SETTLE, Watching};
pub use crate::discovery::load::load_answered;
pub use crate::discovery::probe::resolve_config;
pub use crate::discovery::validate::{Check, CheckKind, CheckStatus, FileReport};
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

pub use crate::formats::manifest::model::{DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, ParamType};
pub use crate::formats::manifest::render::TemplateError;
pub use crate::formats::package_runner::PackageRunner;
pub use crate::front::{Call, Toolsmith};
pub use crate::grant::{DenialKind, InvalidTarget, NetworkTarget, SandboxDenial};
pub use crate::layer::{Layer, Peer};
pub use crate::limit_keys::{DEFAULT_MAX_TIMEOUT, LimitKind, Loosens, limit_kind};
pub use crate::masks::{ReadMasks, RevealDenied, credential_paths, homes, reveals_own_state};
pub use crate::message::{error_chain, format_duration};
pub use crate::name::{EXPOSED_PREFIX, NameError, RESERVED_NAME, ToolName};
pub use crate::oob::{ArgumentFileError, OutOfBandError};
pub use crate::overrides::{CallConfig, RunConfig, TimeoutSource, ToolOverride};
pub use crate::policy::{Denial, Policy, Profile, UnknownProfile};
pub use crate::project_trust::{Distrust, ProjectGate, TrustVerdict};
pub use crate::regular_file::{
    Links, MAX_CONFIG_BYTES, MAX_TRUST_STORE_BYTES, RegularFileError, read_regular, read_start,
};
pub use crate::sandbox::{
    AppliedReport, ProbeSandboxReport, SandboxDeclaration, SandboxDeclarationError, SandboxProfile,
    SandboxReport, SandboxSettings, SyscallsSetting, probe_sandbox_report, protected_paths,
};
pub use crate::schema::{InputSchema, OutputSchema, SchemaError, Violation};
pub use crate::secrets::{
    SecretError, SecretName, SecretNameError, SecretSource, SecretValue, Secrets, snapshot_value,
};
pub use crate::tool::{GENERATED_HISTORY_DIR, Tool, is_generated};
pub use crate::tool_cache::{Index, TOOL_CACHE_VAR, TOOL_CACHES_DIR, ToolCache};

pub use toolsmith_executor::{
    BackendChoice, DEFAULT_ENV_ALLOW, Executor, ExecutorConfig, Limits, ReportSink, filtered_env,
};
