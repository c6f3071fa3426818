//! What a crash can leave, found and repaired under the tools directory's lock before each registration or rollback (and by `toolsmith history`): staging directories of generations that ended, lock and temporary files libgit2 left in the history, a tool whose recorded version never went live, and files of a tool's older format that a registration had not removed yet.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use toolsmith_registry::ToolName;

use crate::Error;
use crate::history::{self, HISTORY_DIR};
use crate::lock::DirLock;
use crate::objects::ChainCommit;
use crate::staging::{STAGING_DIR, tool_files};

/// Repairs what a crash left in `tools_dir`; returns one sentence per repair. Runs under the
/// directory's lock (`_locked`): every writer of the history holds it, so any lock file in
/// the repository belongs to a process that is gone.
pub(crate) fn recover(tools_dir: &Path, _locked: &DirLock) -> Result<Vec<String>, Error> {
    let mut repairs = sweep_staging(tools_dir);
    let repository = tools_dir.join(HISTORY_DIR);
    if repository.is_dir() {
        repairs.extend(remove_stale_files(&repository)?);
        repairs.extend(reconcile(tools_dir)?);
    }
    for repair in &repairs {
        tracing::warn!(tools_dir = %tools_dir.display(), "repaired: {repair}");
    }
    Ok(repairs)
}

/// Removes the staging directories whose owner is gone: each owner holds a `flock` on its
/// directory for its whole life, and the kernel drops it when the owner dies, in whatever PID
/// namespace. Needs no other lock: an owner checks, once it holds its directory's lock, that
/// the directory is still the one at its path ([`crate::staging::Staging::create`]).
pub(crate) fn sweep_staging(tools_dir: &Path) -> Vec<String> {
    let area = tools_dir.join(STAGING_DIR);
    let mut repairs = Vec::new();
    let Ok(entries) = fs::read_dir(&area) else {
        return repairs;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        if !is_dir {
            if fs::remove_file(&path).is_ok() {
                repairs.push(format!(
                    "removed {}, which is not a staging directory",
                    path.display()
                ));
            }
            continue;
        }
        let owner = fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW)
            .open(&path);
        let Ok(owner) = owner else { continue };
        if owner.try_lock().is_err() {
            continue;
        }
        match fs::remove_dir_all(&path) {
            Ok(()) => repairs.push(format!(
                "removed the staging directory {} of a generation that ended",
                path.display()
            )),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(dir = %path.display(), %error, "cannot remove a staging directory")
            }
        }
    }
    let _busy_or_gone = fs::remove_dir(&area);
    repairs
}

/// Removes the `*.lock` files (a ref's lock left by a killed commit refuses every later update
/// of that ref) and libgit2's temporary object files.
pub(crate) fn remove_stale_files(repository: &Path) -> Result<Vec<String>, Error> {
    let mut repairs = Vec::new();
    let mut pending = vec![repository.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".lock") || name.starts_with("tmp_obj_") {
                fs::remove_file(&path).map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?;
                repairs.push(format!(
                    "removed {}, left by a history write that never finished",
                    path.display()
                ));
            }
        }
    }
    Ok(repairs)
}

/// Whether the file at `path` holds exactly `contents` with the given executable bit (a link
/// is never a match: the generator writes no links).
fn holds(path: &Path, contents: &[u8], executable: bool) -> bool {
    let Ok(metadata) = fs::symlink_metadata(path) else {
        return false;
    };
    metadata.is_file()
        && (metadata.permissions().mode() & 0o111 != 0) == executable
        && metadata.size() == contents.len() as u64
        && fs::read(path).is_ok_and(|found| found == contents)
}

/// The file a commit of the chain records, its contents and executable bit.
fn recorded(
    tools_dir: &Path,
    name: &ToolName,
    commit: &ChainCommit,
) -> Result<(String, Vec<u8>, bool), Error> {
    let tool = history::contents(tools_dir, name, 0, commit)?;
    Ok((tool.file_name, tool.contents.into_bytes(), tool.executable))
}

/// Brings each tool's history in line with its live file: a version recorded whose file
/// never went live (the crash came between the history's write and the `rename`) is
/// withdrawn, and files of an older format left next to the live one are removed. A tool
/// whose file differs from both (edited by hand) is left as it is, with a warning.
fn reconcile(tools_dir: &Path) -> Result<Vec<String>, Error> {
    let mut repairs = Vec::new();
    let Ok(refs) = fs::read_dir(tools_dir.join(HISTORY_DIR).join("refs").join("tools")) else {
        return Ok(repairs);
    };
    for entry in refs.flatten() {
        let Some(name) = entry
            .file_name()
            .to_str()
            .and_then(|name| ToolName::new(name).ok())
        else {
            continue;
        };
        let chain = match history::chain(tools_dir, &name) {
            Ok(chain) => chain,
            Err(error) => {
                tracing::warn!(tool = name.as_str(), error = %toolsmith_registry::error_chain(&error), "cannot check the tool's history");
                continue;
            }
        };
        let Some(head) = chain.last() else { continue };
        let (file_name, contents, executable) = recorded(tools_dir, &name, head)?;
        let live = tools_dir.join(&file_name);
        if holds(&live, &contents, executable) {
            for other in tool_files(tools_dir, &name) {
                if other != live && fs::symlink_metadata(&other).is_ok() {
                    fs::remove_file(&other).map_err(|source| Error::Io {
                        path: other.clone(),
                        source,
                    })?;
                    repairs.push(format!(
                        "removed {}, a file of an older format of `{name}`",
                        other.display()
                    ));
                }
            }
            continue;
        }
        let previous_is_live = match chain
            .len()
            .checked_sub(2)
            .and_then(|index| chain.get(index))
        {
            Some(parent) => {
                let (file_name, contents, executable) = recorded(tools_dir, &name, parent)?;
                holds(&tools_dir.join(file_name), &contents, executable)
            }
            None => tool_files(tools_dir, &name)
                .iter()
                .all(|file| fs::symlink_metadata(file).is_err()),
        };
        let version = u32::try_from(chain.len()).unwrap_or(u32::MAX);
        if previous_is_live {
            history::withdraw(tools_dir, &name, head, version)?;
            repairs.push(format!(
                "withdrew version {version} of `{name}` from its history: a registration ended before its file went live"
            ));
        } else {
            tracing::warn!(
                tool = name.as_str(),
                version,
                "the tool's file differs from its recorded version (edited by hand?); left as it is"
            );
        }
    }
    Ok(repairs)
}
