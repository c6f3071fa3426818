//! Waiting for the disk: the fsync discipline of git and SQLite (a file is synced before it is renamed into place, and a directory after an entry in it changed), so that a power cut leaves either the old state or the new one.

use std::fs;
use std::path::Path;

use crate::Error;

/// Waits until the file or directory at `path` is on the disk (a read-only descriptor: a
/// writable one held while a process is spawned would make a tool file busy for `execve`).
pub(crate) fn sync_path(path: &Path) -> Result<(), Error> {
    fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Syncs every file and directory below `root` (a new repository before it moves into place),
/// directories after their entries.
pub(crate) fn sync_tree(root: &Path) -> Result<(), Error> {
    let entries = fs::read_dir(root).map_err(|source| Error::Io {
        path: root.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| Error::Io {
            path: root.to_path_buf(),
            source,
        })?;
        let file_type = entry.file_type().map_err(|source| Error::Io {
            path: entry.path(),
            source,
        })?;
        if file_type.is_dir() {
            sync_tree(&entry.path())?;
        } else if file_type.is_file() {
            sync_path(&entry.path())?;
        }
    }
    sync_path(root)
}
