//! The registry's error type.

use std::path::PathBuf;

use crate::call::audit::AuditError;
use crate::discovery::cache::CacheError;
use crate::discovery::catalog::ProblemError;
use crate::formats::ikigai::ToolSchemaError;
use crate::formats::kodelet::{ConfigError, DescriptionError};
use crate::name::NameError;
use crate::oob::ArgumentFileError;
use crate::schema::SchemaError;

/// Everything that can go wrong in the registry.
///
/// Most failures of tools are not errors: a tool that cannot be loaded is a
/// [`Problem`](crate::discovery::catalog::Problem) in the catalog, and a call that fails is an
/// [`Envelope`](crate::envelope::Envelope) with an error code. What remains is invalid
/// input to the API and failures of the executor's own plumbing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A string is not a valid tool name.
    #[error(transparent)]
    Name(#[from] NameError),
    /// An input schema was refused.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A tool's description was refused.
    #[error(transparent)]
    Description(#[from] DescriptionError),
    /// A tool's `--schema` output was refused.
    #[error(transparent)]
    ToolSchema(#[from] ToolSchemaError),
    /// A tool's `config` output was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A candidate tool could not be loaded.
    #[error(transparent)]
    Problem(#[from] ProblemError),
    /// The audit log could not be written.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The discovery cache could not be written.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// A large argument could not be written to its file.
    #[error(transparent)]
    ArgumentFile(#[from] ArgumentFileError),
    /// The tool directories could not be watched.
    #[error("cannot watch the tool directories")]
    Watch {
        /// The watcher's error.
        #[source]
        source: notify::Error,
    },
    /// The executor could not start (see [`Executor::new`](toolsmith_executor::Executor::new)).
    #[error("the executor could not start")]
    Start {
        /// The executor's error.
        #[source]
        source: toolsmith_executor::Error,
    },
    /// The executor failed to run a tool for a reason of its own (not the
    /// tool's fault, e.g. a cgroup could not be created).
    #[error("the executor failed to run `{program}`", program = program.display())]
    Executor {
        /// The tool's program.
        program: PathBuf,
        /// The executor's error.
        #[source]
        source: toolsmith_executor::Error,
    },
}
