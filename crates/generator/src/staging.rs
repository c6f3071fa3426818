//! The staging directory a request's tool is rendered into, and the file operations that
//! move it into the tools directory: written unsynced, synced off the checks' path, renamed
//! into place.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
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
/// file or the new one), then removes the tool's files of other formats.
pub(crate) fn install(
    tools_dir: &Path,
    name: &ToolName,
    staged: &Path,
    rendered: &RenderedTool,
) -> Result<PathBuf, Error> {
    let target = tools_dir.join(&rendered.file_name);
    fs::rename(staged, &target).map_err(|source| Error::Io {
        path: target.clone(),
        source,
    })?;
    for other in tool_files(tools_dir, name) {
        if other != target && other.exists() {
            fs::remove_file(&other).map_err(|source| Error::Io {
                path: other.clone(),
                source,
            })?;
        }
    }
    Ok(target)
}

pub(crate) fn write_new_dir(dir: &Path) -> Result<(), Error> {
    fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes a new file (never replacing one) with the tool's mode, and waits until it is on
/// the disk.
pub(crate) fn write_file(path: &Path, rendered: &RenderedTool) -> Result<(), Error> {
    write_unsynced(path, rendered)?;
    sync_file(path)
}

/// Writes a new file (never replacing one) with the tool's mode, without waiting for it to
/// reach the disk: the pipeline syncs it ([`sync_file`]) while the checks run.
pub(crate) fn write_unsynced(path: &Path, rendered: &RenderedTool) -> Result<(), Error> {
    let io_error = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_error)?;
    file.write_all(rendered.contents.as_bytes())
        .map_err(io_error)?;
    let mode = if rendered.executable { 0o755 } else { 0o644 };
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io_error)
}

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
/// the directories it created.
pub(crate) struct Staging {
    pub(crate) dir: PathBuf,
    created: Vec<PathBuf>,
    /// Set when the staging directory is removed, for a blocking task that may still be
    /// writing in it (see [`Staging::sweeper`]).
    removed: Arc<AtomicBool>,
}

/// The staging area's name inside the tools directory.
pub(crate) const STAGING_DIR: &str = ".staging";

impl Staging {
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
        let dir = area.join(format!(
            "{}-{}-{}",
            name.as_str(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(Staging {
            dir,
            created,
            removed: Arc::new(AtomicBool::new(false)),
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
