//! Which directory is the project, and where that came from: `--project`, `TOOLSMITH_PROJECT`, the enclosing git work tree, or the current directory.
//!
//! The project is the directory whose `.toolsmith/` layer (tools and config) is read once
//! trusted, and where a `filesystem = "project"` tool may write. A directory the user names is
//! the project whatever it is; one found by looking around the current directory is not when
//! it is `$HOME`, `/` or another ancestor of `$HOME` (issue 22, finding 3), since a tool allowed
//! to write there could rewrite the user's shell start-up files.
//!
//! Outside a git work tree, the current directory stays the project when nothing is named:
//! many users keep their tools in directories that are not repositories, and asking each of
//! them for `--project .` would only train them to type it everywhere.

use std::path::{Path, PathBuf};

use toolsmith_registry::enclosing_work_tree;

use crate::env_vars::EnvVars;

/// Where the project directory came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProjectSource {
    /// `--project DIR`.
    Flag,
    /// `TOOLSMITH_PROJECT`.
    Env,
    /// The work tree of the git repository enclosing the current directory.
    Git,
    /// The current directory, outside a git work tree.
    CurrentDirectory,
}

impl ProjectSource {
    /// The source's name in `--show-settings` and `doctor --json`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ProjectSource::Flag => "flag",
            ProjectSource::Env => "env",
            ProjectSource::Git => "git",
            ProjectSource::CurrentDirectory => "current-directory",
        }
    }

    /// How the source reads after the project's path: `from --project`, `the enclosing git
    /// work tree`, ...
    pub(crate) fn describe(self) -> &'static str {
        match self {
            ProjectSource::Flag => "from --project",
            ProjectSource::Env => "from TOOLSMITH_PROJECT",
            ProjectSource::Git => "the enclosing git work tree",
            ProjectSource::CurrentDirectory => "the current directory",
        }
    }

    /// Whether the user named the directory, rather than toolsmith finding it.
    pub(crate) fn is_named(self) -> bool {
        matches!(self, ProjectSource::Flag | ProjectSource::Env)
    }
}

/// The project directory and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Project {
    /// The directory, absolute; canonical when named.
    pub(crate) dir: PathBuf,
    pub(crate) source: ProjectSource,
}

/// Why a named project directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProjectError {
    /// The directory does not exist or cannot be resolved.
    #[error("cannot use {path} as the project (from {origin})", path = path.display())]
    Resolve {
        path: PathBuf,
        origin: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The path exists but is not a directory.
    #[error("the project {path} (from {origin}) is not a directory", path = path.display())]
    NotADirectory { path: PathBuf, origin: &'static str },
}

impl Project {
    /// The project of a command run in `cwd`: `flag`, else `TOOLSMITH_PROJECT` (from `lookup`,
    /// when not empty), both taken from `cwd` when relative; else the enclosing git work tree,
    /// else `cwd` itself.
    pub(crate) fn resolve(
        flag: Option<&Path>,
        lookup: &dyn Fn(&str) -> Option<String>,
        cwd: &Path,
    ) -> Result<Project, ProjectError> {
        let env = lookup(EnvVars::TOOLSMITH_PROJECT)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from);
        let named = match (flag, env) {
            (Some(dir), _) => Some((dir.to_path_buf(), ProjectSource::Flag)),
            (None, Some(dir)) => Some((dir, ProjectSource::Env)),
            (None, None) => None,
        };
        if let Some((dir, source)) = named {
            let origin = match source {
                ProjectSource::Flag => "--project",
                _ => EnvVars::TOOLSMITH_PROJECT,
            };
            let path = cwd.join(&dir);
            let canonical = path
                .canonicalize()
                .map_err(|source| ProjectError::Resolve {
                    path: path.clone(),
                    origin,
                    source,
                })?;
            if !canonical.is_dir() {
                return Err(ProjectError::NotADirectory { path, origin });
            }
            return Ok(Project {
                dir: canonical,
                source,
            });
        }
        Ok(match enclosing_work_tree(cwd) {
            Some(dir) => Project {
                dir,
                source: ProjectSource::Git,
            },
            None => Project {
                dir: cwd.to_path_buf(),
                source: ProjectSource::CurrentDirectory,
            },
        })
    }

    /// Whether the project may be used as one: a named directory always; a found one unless it
    /// is `$HOME`, `/` or another ancestor of `$HOME`.
    pub(crate) fn is_usable(&self, home: Option<&Path>) -> bool {
        self.source.is_named() || is_project(&self.dir, home)
    }

    /// Whether the user named a directory that toolsmith would never take as a project by
    /// itself (`$HOME`, `/`, an ancestor of `$HOME`): allowed, and `doctor` warns about it.
    pub(crate) fn named_over_home(&self, home: Option<&Path>) -> bool {
        self.source.is_named() && !is_project(&self.dir, home)
    }

    /// The directory whose `.toolsmith/config.toml` is read: the current directory when it
    /// lies in the project (its config may sit below the project's root), else the project.
    pub(crate) fn config_dir<'dir>(&'dir self, cwd: &'dir Path) -> &'dir Path {
        let canonical = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if canonical(cwd).starts_with(canonical(&self.dir)) {
            cwd
        } else {
            &self.dir
        }
    }
}

/// Whether `project` may be a project: not `/`, not `$HOME`, nor any other directory that
/// holds `$HOME` (a tool allowed to write there could rewrite the user's shell start-up files,
/// toolsmith's config and its trust store).
pub(crate) fn is_project(project: &Path, home: Option<&Path>) -> bool {
    let canonical = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let project = canonical(project);
    if project.parent().is_none() {
        return false;
    }
    home.is_none_or(|home| !canonical(home).starts_with(&project))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::settings::project::{Project, ProjectSource};

    fn check(flag: Option<&str>, env: Option<&str>, cwd: &Path, expect: (&Path, ProjectSource)) {
        let lookup = |name: &str| {
            (name == "TOOLSMITH_PROJECT")
                .then(|| env.map(str::to_owned))
                .flatten()
        };
        let project = Project::resolve(flag.map(Path::new), &lookup, cwd).unwrap();
        assert_eq!((project.dir.as_path(), project.source), expect);
    }

    #[test]
    fn the_flag_beats_the_env() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().canonicalize().unwrap();
        let cwd = root.join("cwd");
        for dir in ["a", "b", "cwd"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        check(
            None,
            Some("../b"),
            &cwd,
            (&root.join("b"), ProjectSource::Env),
        );
        check(
            Some("../a"),
            Some("../b"),
            &cwd,
            (&root.join("a"), ProjectSource::Flag),
        );
        // An empty variable names nothing: the project is found around `cwd` (the black-box
        // tests cover git and the current directory).
        let lookup = |_: &str| Some(String::new());
        let found = Project::resolve(None, &lookup, &cwd).unwrap();
        assert!(!found.source.is_named(), "{found:?}");
    }

    #[test]
    fn a_named_project_must_be_a_directory() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::write(temp.path().join("file"), "").unwrap();
        let lookup = |_: &str| None;
        for name in ["file", "missing"] {
            let error = Project::resolve(Some(Path::new(name)), &lookup, temp.path()).unwrap_err();
            assert!(error.to_string().contains(name), "{error}");
        }
    }

    #[test]
    fn home_is_usable_only_when_named() {
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path().canonicalize().unwrap();
        let found = Project {
            dir: home.clone(),
            source: ProjectSource::CurrentDirectory,
        };
        assert!(!found.is_usable(Some(&home)));
        assert!(!found.named_over_home(Some(&home)));
        let named = Project {
            dir: home.clone(),
            source: ProjectSource::Flag,
        };
        assert!(named.is_usable(Some(&home)));
        assert!(named.named_over_home(Some(&home)));
        let below = Project {
            dir: home.join("src"),
            source: ProjectSource::Flag,
        };
        assert!(!below.named_over_home(Some(&home)));
    }
}
