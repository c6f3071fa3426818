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
    /// An object of the history repository is missing or damaged.
    #[error(
        "history repository {} is damaged: object {object} {damage}; move it aside (`mv {} {}.damaged`) to start a new history, or restore it from a backup (`toolsmith doctor` checks it)",
        repository.display(), repository.display(), repository.display()
    )]
    HistoryDamaged {
        /// The repository.
        repository: PathBuf,
        /// The object's id.
        object: String,
        /// What is wrong with it.
        damage: Damage,
    },
    /// An object libgit2 reported written is not on the disk when read back (libgit2 1.9.7
    /// loses a write on a full disk without an error): nothing names it, the history is intact.
    #[error(
        "cannot record the version in history repository {}: object {object}, which libgit2 reported written, {damage}; {cause}",
        repository.display()
    )]
    HistoryWriteLost {
        /// The repository.
        repository: PathBuf,
        /// The object's id.
        object: String,
        /// What reading it back found.
        damage: Damage,
        /// What a probe write to the same directory found (the full disk's own error).
        cause: String,
    },
    /// A target of the generator is a symbolic link.
    #[error("{} is a symbolic link; the generator writes only inside the tools directory and follows no link there", path.display())]
    Link {
        /// The link.
        path: PathBuf,
    },
    /// A recorded version that the generator did not record after its checks: no provenance
    /// trailer (made by hand, or planted in a cloned history).
    #[error(
        "version {version} of `{name}` (commit {commit}) was not recorded by toolsmith's generator after its checks (it has no Toolsmith-Checks trailer), so it is not restored; the live tool is unchanged"
    )]
    UncheckedVersion {
        /// The tool.
        name: String,
        /// The version asked for.
        version: u32,
        /// The commit's id.
        commit: String,
    },
    /// A recorded version that fails the generator's checks now (what it depends on changed).
    #[error(
        "version {version} of `{name}` fails its checks now, so it is not restored (the live tool is unchanged): {failed}"
    )]
    RestoredVersionFails {
        /// The tool.
        name: String,
        /// The version asked for.
        version: u32,
        /// The failed checks, each with what explains it.
        failed: String,
    },
    /// A recorded version names a file the generator would never write for that tool.
    #[error(
        "version {version} of `{name}` names the file {file_name:?}, which is not a file of that tool; the history was not written by toolsmith's generator and is not restored"
    )]
    ForeignVersion {
        /// The tool.
        name: String,
        /// The version.
        version: u32,
        /// The name recorded in its tree.
        file_name: String,
    },
    /// The new version could not be moved into place; the history was put back.
    #[error("cannot move the new version into place at {}", path.display())]
    NotInstalled {
        /// The tool file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A registration or rollback failed before its version went live.
    #[error("`{name}` was not changed: the live tool is what it was, and its history records it")]
    NotRegistered {
        /// The tool.
        name: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A lock file of the history that a killed write left.
    #[error("{} was left by a history write that never finished; the next `toolsmith generate`, `rollback` or `history` removes it", path.display())]
    StaleLock {
        /// The lock file.
        path: PathBuf,
    },
    /// A registry operation failed.
    #[error(transparent)]
    Registry(#[from] toolsmith_registry::Error),
}

/// What is wrong with an object of the history.
#[derive(Debug)]
pub enum Damage {
    /// It is not in the repository.
    Missing,
    /// It is only in a pack file (`git gc` ran in the repository).
    Packed,
    /// Its compressed data ends early or does not check.
    Truncated,
    /// It could not be read.
    Unreadable(std::io::Error),
    /// It is not a well-formed object.
    Malformed(&'static str),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Missing => formatter.write_str("is missing"),
            Damage::Packed => formatter.write_str(
                "is only in a pack file (toolsmith keeps every object loose; `git unpack-objects` restores them)",
            ),
            Damage::Truncated => formatter.write_str("is truncated or its compressed data is corrupt"),
            Damage::Unreadable(error) => write!(formatter, "cannot be read ({error})"),
            Damage::Malformed(what) => write!(formatter, "is malformed ({what})"),
        }
    }
}
