//! A tool's own persistent cache: one directory per tool file under toolsmith's cache
//! directory, the variables that point interpreters and package managers into it, and the
//! sandbox grant that makes it (and nothing else of toolsmith's) writable to the tool's
//! probes and calls.
//!
//! uv, pip and npm must write their caches even to start a script (`uv run --script`
//! resolves its inline dependencies before the script prints a line), and a probe's
//! filesystem is read-only: without a directory of its own such a tool cannot load. The
//! directory is the tool's alone: it is named after the tool file's path (its name and a
//! digest), so two tools never share one, and the executor hides every other tool's cache
//! from a run ([`Sandbox::own_dir`](toolsmith_executor::Sandbox::own_dir)).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The directory below toolsmith's cache directory that holds the tools' caches.
pub const TOOL_CACHES_DIR: &str = "tool-cache";

/// The variable naming a tool's cache directory, set by toolsmith for every probe and call.
pub const TOOL_CACHE_VAR: &str = "TOOLSMITH_TOOL_CACHE";

/// The cache directory of one tool file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCache {
    dir: PathBuf,
}

/// Whether a run may reach a package index: the variables that tell package managers to
/// stay offline are set when it may not, so that they fail at once with their own "the
/// network is disabled" message instead of retrying until the probe's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// The run has no network.
    Offline,
    /// The run may fetch packages (`toolsmith prepare`, a call whose network is allowed).
    Reachable,
}

impl ToolCache {
    /// The cache of the tool file at `tool_path`, inside `caches` (toolsmith's
    /// `$XDG_CACHE_HOME/toolsmith/tool-cache`). The name is the file's name (for people
    /// reading the directory) and the first 16 hex digits of the SHA-256 of its path (so
    /// that two files never share a cache, whatever their names).
    pub fn of_file(caches: &Path, tool_path: &Path) -> ToolCache {
        let digest = Sha256::digest(tool_path.as_os_str().as_encoded_bytes());
        let hex: String = digest[..8]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let file_name: String = tool_path
            .file_name()
            .map(|name| name.to_string_lossy())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        ToolCache {
            dir: caches.join(format!("{file_name}-{hex}")),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The variables of a run of the tool: [`TOOL_CACHE_VAR`], `XDG_CACHE_HOME` and the cache
    /// variables of uv, pip and npm pointed into the directory, and with [`Index::Offline`]
    /// uv's and npm's offline switches.
    pub fn env(&self, index: Index) -> Vec<(OsString, OsString)> {
        let inside = |sub: &str| self.dir.join(sub).into_os_string();
        let mut vars = vec![
            (TOOL_CACHE_VAR.into(), self.dir.clone().into_os_string()),
            ("XDG_CACHE_HOME".into(), self.dir.clone().into_os_string()),
            ("UV_CACHE_DIR".into(), inside("uv")),
            // A Python that uv downloads for a script lands here rather than in a
            // read-only `~/.local/share/uv`.
            ("UV_PYTHON_INSTALL_DIR".into(), inside("uv-python")),
            ("PIP_CACHE_DIR".into(), inside("pip")),
            ("npm_config_cache".into(), inside("npm")),
        ];
        if index == Index::Offline {
            vars.push(("UV_OFFLINE".into(), "1".into()));
            vars.push(("npm_config_offline".into(), "true".into()));
        }
        vars
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::tool_cache::{Index, ToolCache};

    #[test]
    fn one_cache_per_file_named_after_it() {
        let caches = Path::new("/c/tool-cache");
        let a = ToolCache::of_file(caches, Path::new("/p/.kodelet/tools/todo read"));
        let b = ToolCache::of_file(caches, Path::new("/q/.kodelet/tools/todo read"));
        assert_ne!(a, b);
        assert_eq!(a.dir().parent(), Some(caches));
        let name = a.dir().file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("todo_read-"), "{name}");
        assert_eq!(name.len(), "todo_read-".len() + 16);
    }

    #[test]
    fn offline_adds_the_switches() {
        let cache = ToolCache::of_file(Path::new("/c"), Path::new("/t/x"));
        let names = |index| -> Vec<String> {
            cache
                .env(index)
                .into_iter()
                .map(|(name, _)| name.to_string_lossy().into_owned())
                .collect()
        };
        assert!(!names(Index::Reachable).contains(&"UV_OFFLINE".to_owned()));
        assert!(names(Index::Offline).contains(&"UV_OFFLINE".to_owned()));
        assert!(names(Index::Offline).contains(&"TOOLSMITH_TOOL_CACHE".to_owned()));
    }
}
