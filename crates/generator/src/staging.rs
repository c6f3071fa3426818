//! The staging directory a request's tool is rendered into, and the file operations that
//! move it into the tools directory: written unsynced, synced off the checks' path, renamed
//! into place.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use toolsmith_registry::ToolName;

use crate::Error;
use crate::render::RenderedTool;

/// The files in `dir` that would provide the tool `name`, in any format.
pub(crate) fn tool_files(dir: &Path, name: &ToolName) -> Vec<PathBuf> {
    let name = name.as_str();
    let dashed = name.replace('_', "-");
    let mut files = vec![
        dir.join(name),
        dir.join(format!("{name}.md")),
        dir.join(format!("{name}-tool")),
    ];
    if dashed != name {
        files.push(dir.join(&dashed));
        files.push(dir.join(format!("{dashed}.md")));
        files.push(dir.join(format!("{dashed}-tool")));
    }
    files
}

/// Moves the staged file into `tools_dir` with one `rename` (atomic: a reader sees the old
/// file or the new one) and waits until the directory's new entry is on the disk. This is the
/// registration's commit point: the history records the version before it. On failure the
/// live tool is as it was.
pub(crate) fn install(
    tools_dir: &Path,
    staged: &Path,
    rendered: &RenderedTool,
) -> Result<PathBuf, Error> {
    let target = tools_dir.join(&rendered.file_name);
    fs::rename(staged, &target).map_err(|source| Error::NotInstalled {
        path: target.clone(),
        source,
    })?;
    Ok(target)
}

/// After the commit point: removes the tool's files of other formats (a manifest replaced
/// by an executable), and syncs the directory.
pub(crate) fn remove_other_formats(
    tools_dir: &Path,
    name: &ToolName,
    kept: &Path,
) -> Result<(), Error> {
    for other in tool_files(tools_dir, name) {
        if other != kept && fs::symlink_metadata(&other).is_ok() {
            fs::remove_file(&other).map_err(|source| Error::Io {
                path: other.clone(),
                source,
            })?;
        }
    }
    crate::durable::sync_path(tools_dir)
}

pub(crate) fn write_new_dir(dir: &Path) -> Result<(), Error> {
    fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes a new file (never replacing one) with the tool's mode, and waits until it is on
/// the disk. The file appears whole or not at all: it is written and synced under a hidden
/// temporary name, then linked to its name (which fails if the name exists), so a full disk
/// or a crash never leaves a partial file that would refuse the retry.
pub(crate) fn write_file(path: &Path, rendered: &RenderedTool) -> Result<(), Error> {
    let io_error = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file_name = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("tool");
    let temporary = path.with_file_name(format!(".{file_name}.{}.partial", std::process::id()));
    let _stale = fs::remove_file(&temporary);
    let written = write_unsynced(&temporary, rendered).and_then(|()| sync_file(&temporary));
    let linked = written.and_then(|()| fs::hard_link(&temporary, path).map_err(io_error));
    let _gone = fs::remove_file(&temporary);
    linked?;
    match path.parent() {
        Some(dir) => crate::durable::sync_path(dir),
        None => Ok(()),
    }
}

/// Writes a new file (never replacing one) with the tool's mode, without waiting for it to
/// reach the disk: the pipeline syncs it ([`sync_file`]) while the checks run.
///
/// Its modification time is set [`SETTLED_AGE`] in the past, once the file is whole: the
/// record of the probe the checks run is then trusted by the discovery cache (a file modified
/// within `RACY_MARGIN` of its probe is probed again, git's "racily clean"), so the registration
/// hands that record to the live registry instead of a second probe. Nothing is lost: the
/// generator writes the file once, and any later write sets a modification time far from this
/// one, which the cache sees.
pub(crate) fn write_unsynced(path: &Path, rendered: &RenderedTool) -> Result<(), Error> {
    let io_error = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(io_error)?;
    file.write_all(rendered.contents.as_bytes())
        .map_err(io_error)?;
    let mode = if rendered.executable { 0o755 } else { 0o644 };
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io_error)?;
    file.set_modified(std::time::SystemTime::now() - SETTLED_AGE)
        .map_err(io_error)
}

/// How far in the past [`write_unsynced`] dates a file it wrote: twice the discovery cache's
/// racy margin.
pub(crate) const SETTLED_AGE: std::time::Duration =
    std::time::Duration::from_secs(2 * toolsmith_registry::RACY_MARGIN.as_secs());

/// Waits until the file at `path` is on the disk, through a read-only descriptor: a
/// writable one, held while a process is spawned, would make the file busy for `execve`.
pub(crate) fn sync_file(path: &Path) -> Result<(), Error> {
    fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// A staging directory inside the tools directory (so the final `rename` stays on one
/// filesystem), hidden from discovery, removed on drop with everything in it, along with
/// the directories it created. Its owner holds a `flock` on it for its whole life, so a
/// staging directory whose lock is free belongs to a generation that ended (killed, in any
/// PID namespace) and is swept ([`crate::recovery`]).
pub(crate) struct Staging {
    pub(crate) dir: PathBuf,
    created: Vec<PathBuf>,
    /// Set when the staging directory is removed, for a blocking task that may still be
    /// writing in it (see [`Staging::sweeper`]).
    removed: Arc<AtomicBool>,
    _owner: fs::File,
}

/// The locked descriptor of the new directory `dir`, or `None` when a sweep took it first
/// (the lock was taken, or the directory at the path is no longer the one locked).
fn own(dir: &Path) -> Result<Option<fs::File>, Error> {
    let io_error = |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    let owner = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW)
        .open(dir)
    {
        Ok(owner) => owner,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error(error)),
    };
    match owner.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Ok(None),
        Err(fs::TryLockError::Error(error)) => return Err(io_error(error)),
    }
    let locked = owner.metadata().map_err(io_error)?;
    let same = fs::symlink_metadata(dir)
        .is_ok_and(|at_path| at_path.dev() == locked.dev() && at_path.ino() == locked.ino());
    Ok(same.then_some(owner))
}

/// The staging area's name inside the tools directory.
pub(crate) const STAGING_DIR: &str = ".staging";

impl Staging {
    /// Creates a staging directory and takes its `flock`. A sweep may take the lock of a
    /// directory just created and remove it before its owner holds it: the owner then finds
    /// its locked descriptor no longer at the path, and makes another.
    pub(crate) fn create(tools_dir: &Path, name: &ToolName) -> Result<Staging, Error> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let area = tools_dir.join(STAGING_DIR);
        // The directories this creates, innermost first, to remove again when left empty.
        let created: Vec<PathBuf> = area
            .ancestors()
            .take_while(|dir| !dir.exists())
            .map(Path::to_path_buf)
            .collect();
        fs::create_dir_all(&area).map_err(|source| Error::Io {
            path: area.clone(),
            source,
        })?;
        crate::confine::check_tools_dir(tools_dir)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or_default();
        // A name never reused: a PID 1 of a container has the same pid in every run, and a
        // directory left by a killed run must not refuse the next one.
        let mut attempts = 0;
        let (dir, owner) = loop {
            let dir = area.join(format!(
                "{}-{}-{}-{nanos:x}",
                name.as_str(),
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                // Another process removed the staging area when it left it empty.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound && attempts < 100 => {
                    attempts += 1;
                    fs::create_dir_all(&area).map_err(|source| Error::Io {
                        path: area.clone(),
                        source,
                    })?;
                    continue;
                }
                Err(source) => return Err(Error::Io { path: dir, source }),
            }
            if let Some(owner) = own(&dir)? {
                break (dir, owner);
            }
        };
        Ok(Staging {
            dir,
            created,
            removed: Arc::new(AtomicBool::new(false)),
            _owner: owner,
        })
    }

    /// For a blocking task writing inside the staging directory: the pipeline awaits it
    /// before dropping the staging directory, but a cancelled generation (an MCP client
    /// that gave up) drops it at once, maybe while the task still writes. The task calls the
    /// sweeper when done, which then removes what the drop could not.
    pub(crate) fn sweeper(&self) -> impl FnOnce() + Send + 'static {
        let removed = Arc::clone(&self.removed);
        let dir = self.dir.clone();
        let created = self.created.clone();
        move || {
            if removed.load(Ordering::SeqCst) {
                remove_staging(&dir, &created);
            }
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.removed.store(true, Ordering::SeqCst);
        remove_staging(&self.dir, &self.created);
    }
}

/// Removes a staging directory; the staging area itself goes when empty, and so do the
/// tools directory and its parents when this run created them and left nothing in them (a
/// rejected first request).
fn remove_staging(dir: &Path, created: &[PathBuf]) {
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot remove a staging directory");
        }
    }
    if let Some(area) = dir.parent() {
        let _empty_or_busy = fs::remove_dir(area);
    }
    for dir in created {
        let _not_empty = fs::remove_dir(dir);
    }
}
