//! The generator's error type: what stops the generator itself (I/O, templates, git), as opposed to a rejected request, which is a report.

use std::path::PathBuf;

/// What prevented the generator from doing its job.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory operation failed.
    #[error("{}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A template did not parse or render.
    #[error("template `{name}`{}: {message}", path.as_ref().map(|path| format!(" ({})", path.display())).unwrap_or_default())]
    Template {
        /// The template's name.
        name: String,
        /// The overriding file, when the template came from one.
        path: Option<PathBuf>,
        /// Tera's explanation.
        message: String,
    },
    /// The manifest frontmatter could not be serialized.
    #[error("cannot write the manifest frontmatter: {message}")]
    Yaml {
        /// Why.
        message: String,
    },
    /// The history repository could not be read or written.
    #[error("history repository {}", path.display())]
    Git {
        /// The repository.
        path: PathBuf,
        /// Why.
        #[source]
        source: git2::Error,
    },
    /// The tool has no recorded version.
    #[error("tool `{name}` has no generated history")]
    NoHistory {
        /// The tool.
        name: String,
    },
    /// The version asked for does not exist.
    #[error("tool `{name}` has no version {version} (versions 1 to {latest})")]
    NoSuchVersion {
        /// The tool.
        name: String,
        /// The version asked for.
        version: u32,
        /// The latest version.
        latest: u32,
    },
    /// A file that `new` would write exists already.
    #[error("{} exists already; not overwriting it", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// Another process held the tools directory's lock for too long.
    #[error("the lock {} was held by another process for more than {}s", path.display(), waited.as_secs())]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// How long this process waited.
        waited: std::time::Duration,
    },
    /// A registry operation failed.
    #[error(transparent)]
    Registry(#[from] toolsmith_registry::Error),
}
