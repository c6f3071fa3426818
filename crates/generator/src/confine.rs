//! Keeping the generator's writes inside the tools directory: no target of the generator (the tools directory and its hidden parents such as `.toolsmith`, the staging area, the history repository and its directories, the lock file) is followed through a symbolic link, since a link planted in a cloned project would send generated tools, staging directories or history writes anywhere.

use std::fs;
use std::path::{Component, Path};

use crate::Error;

/// Refuses `path` when it is a symbolic link (a missing path is fine: it will be created as a
/// directory or file, never followed).
fn not_a_link(path: &Path) -> Result<(), Error> {
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_symlink() => Err(Error::Link {
            path: path.to_path_buf(),
        }),
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Checks the tools directory and what the generator keeps in it: the directory itself and
/// each hidden directory it sits in (`.toolsmith` of `<project>/.toolsmith/tools`), the
/// staging area, the lock file, and the history repository with its directories. The
/// project's own directory and what lies above it are the user's choice and are followed.
pub(crate) fn check_tools_dir(tools_dir: &Path) -> Result<(), Error> {
    not_a_link(tools_dir)?;
    let mut current = tools_dir.parent();
    while let Some(dir) = current {
        let hidden = dir
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with('.'));
        if !hidden
            || matches!(
                dir.components().next_back(),
                Some(Component::RootDir) | None
            )
        {
            break;
        }
        not_a_link(dir)?;
        current = dir.parent();
    }
    for inside in [
        crate::staging::STAGING_DIR,
        crate::lock::LOCK_FILE,
        crate::history::HISTORY_DIR,
    ] {
        not_a_link(&tools_dir.join(inside))?;
    }
    let history = tools_dir.join(crate::history::HISTORY_DIR);
    for inside in [
        "objects",
        "refs",
        "refs/tools",
        "HEAD",
        "config",
        "packed-refs",
    ] {
        not_a_link(&history.join(inside))?;
    }
    // Each object directory and ref too: a link there would receive libgit2's writes.
    for dir in ["objects", "refs/tools"] {
        if let Ok(entries) = fs::read_dir(history.join(dir)) {
            for entry in entries.flatten() {
                not_a_link(&entry.path())?;
            }
        }
    }
    Ok(())
}
