//! The generator of toolsmith: `custom_tool` requests become tools, written from templates, proven in the sandbox, registered live, with history.
//!
//! The principal types: a [`Request`] (checked against the published
//! [`REQUEST_SCHEMA`]) is rendered by the tera templates of `templates/`
//! (embedded, overridable from a directory) into a [`RenderedTool`];
//! [`generate`] stages it, checks it as the registry would, runs its test
//! cases and the pipeline's own checks through the executor, and only when
//! every check passed moves it into the [`GeneratorConfig`]'s tools
//! directory with one `rename`, records the version in the history
//! repository ([`history`], [`rollback`]) and hands the live registry the
//! tool with the record of the probe its checks ran (no other tool file is
//! probed). The [`Report`] lists every check, so an agent can repair a
//! rejected request, and carries the registered [`Report::tool`], ready to
//! call.
//!
//! The generator runs processes only through the registry and the executor,
//! and knows nothing of command lines or MCP.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::path::PathBuf;
//! use std::sync::Arc;
//! use toolsmith_executor::{BackendChoice, Executor, ExecutorConfig, Limits, filtered_env};
//! use toolsmith_generator::{GeneratorConfig, Request, generate};
//! use toolsmith_registry::{Policy, RunConfig, SandboxSettings, discover, invoke};
//!
//! let executor = Arc::new(Executor::new(ExecutorConfig { backend: BackendChoice::Auto, max_concurrent: None })?);
//! let run_config = RunConfig {
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
//! let config = GeneratorConfig {
//!     tools_dir: PathBuf::from(".toolsmith/tools"),
//!     drafts_dir: PathBuf::from(".toolsmith/drafts"),
//!     templates_dir: None,
//!     may_replace: Vec::new(),
//! };
//! let request = Request::from_json(&serde_json::json!({
//!     "name": "add_numbers",
//!     "description": "Adds two numbers.",
//!     "parameters": {"a": {"type": "number", "required": true}, "b": {"type": "number", "required": true}},
//!     "implementation": "return args['a'] + args['b']",
//!     "tests": [{"input": {"a": 1, "b": 2}, "expect": {"result": 3}}],
//! }))?;
//! let existing = discover(&executor, &[config.tools_dir.clone()], &run_config).await;
//! let report = generate(&executor, &request, &existing, None, &config, &run_config).await?;
//! println!("{}", serde_json::to_string(&report)?);
//! // The registered tool comes back with the report: no second discovery to call it.
//! if let Some(tool) = &report.tool {
//!     let arguments = serde_json::json!({"a": 2, "b": 3});
//!     let envelope = invoke(&executor, tool, &arguments, &run_config, &Policy::allow_all()).await?;
//!     println!("{}", serde_json::to_string(&envelope)?);
//! }
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod confine;
mod durable;
mod error;
mod history;
mod lock;
mod objects;
mod pipeline;
mod recovery;
mod render;
mod request;
mod rollback;
mod staged_checks;
mod staging;

pub use crate::error::{Damage, Error};
pub use crate::history::{HISTORY_DIR, Version, check_histories, history};
pub use crate::lock::LOCK_FILE;
pub use crate::pipeline::{
    CheckReport, GeneratorConfig, NewToolError, Report, Status, generate, new_tool, recover,
};
pub use crate::render::{EMBEDDED_TEMPLATES, RenderedTool, override_dir, render, templates};
pub use crate::request::{
    Language, Parameter, REQUEST_SCHEMA, Request, RequestError, request_schema,
};
pub use crate::rollback::rollback;
