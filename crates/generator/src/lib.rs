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
//! Generate a tool and call it through the same front door, without a second discovery:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let project = tempfile::tempdir()?;
//! # let project = project.path();
//! use toolsmith_generator::{GeneratorConfig, Request, Status, generate};
//! use toolsmith_registry::Toolsmith;
//!
//! let toolsmith = Toolsmith::new()?.with_project_dir(project);
//! let config = GeneratorConfig::in_project(project);
//! let request = Request::from_json(&serde_json::json!({
//!     "name": "add_numbers",
//!     "description": "Adds two numbers.",
//!     "parameters": {"a": {"type": "number", "required": true}, "b": {"type": "number", "required": true}},
//!     "implementation": "return args['a'] + args['b']",
//!     "tests": [{"input": {"a": 1, "b": 2}, "expect": {"result": 3}}],
//! }))?;
//! let existing = toolsmith.discover(&[&config.tools_dir]).await;
//! let report = generate(&toolsmith, &request, &existing, None, &config).await?;
//! assert_eq!(report.status, Status::Registered, "{report:?}");
//! // The registered tool comes back with the report, ready to call.
//! let tool = report.tool.as_ref().expect("a registered report carries its tool");
//! let envelope = toolsmith.call_tool(tool, &serde_json::json!({"a": 2, "b": 3})).await?;
//! assert_eq!(serde_json::to_value(&envelope)?["result"], 5, "{envelope:?}");
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
