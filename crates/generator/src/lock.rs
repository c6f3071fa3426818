//! The advisory lock on a tools directory (`<tools_dir>/.toolsmith.lock`, `flock`), held by a generation or rollback while it puts its file in place and records its version, so that processes sharing the directory (replicas of `serve --http`, a `toolsmith generate` next to a server) take turns.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::Error;

/// The lock file's name inside the tools directory (hidden, so discovery skips it).
pub const LOCK_FILE: &str = ".toolsmith.lock";

/// How long a generation waits for another process's registration before giving up. A
/// registration holds the lock for a `rename` and a git commit, milliseconds; a holder that
/// keeps it this long is stuck (a hung network filesystem), and waiting forever would hang
/// the `custom_tool` call too.
pub(crate) const LOCK_PATIENCE: Duration = Duration::from_secs(60);

/// The held lock: released when dropped (the descriptor is closed), or when the process
/// dies, whatever way it dies, in whatever PID namespace: a lock is never stale.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

/// The lock file, opened without following a link and without writing when it exists:
/// `flock` needs no write access, and closing a descriptor opened for writing is an event
/// for every watcher of the directory.
fn open_lock_file(path: &Path) -> Result<File, Error> {
    let io_error = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let no_follow = nix::libc::O_NOFOLLOW;
    match OpenOptions::new()
        .read(true)
        .custom_flags(no_follow)
        .open(path)
    {
        Ok(file) => Ok(file),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => OpenOptions::new()
            .append(true)
            .create(true)
            .custom_flags(no_follow)
            .open(path)
            .map_err(io_error),
        Err(error) if error.raw_os_error() == Some(nix::libc::ELOOP) => Err(Error::Link {
            path: path.to_path_buf(),
        }),
        Err(error) => Err(io_error(error)),
    }
}

/// One attempt: `Ok(None)` while another holder has it.
fn try_take(file: &File, path: &Path) -> Result<bool, Error> {
    // `File::try_lock` is `flock(LOCK_EX | LOCK_NB)` on Linux; on NFS the kernel maps it onto
    // the protocol's byte-range locks, so it holds across machines that mount the directory.
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(source)) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Takes the lock on `tools_dir` (which must exist), waiting for another holder at most
/// `patience`. It polls rather than blocks, so no thread stays behind waiting: when the
/// patience runs out, the command ends.
pub(crate) async fn lock(tools_dir: &Path, patience: Duration) -> Result<DirLock, Error> {
    let path = tools_dir.join(LOCK_FILE);
    let file = open_lock_file(&path)?;
    let deadline = Instant::now() + patience;
    let mut pause = Duration::from_millis(1);
    loop {
        if try_take(&file, &path)? {
            return Ok(DirLock { _file: file });
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Locked {
                path,
                waited: patience,
            });
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second taker waits for the first, and times out with a clear error when the first
    /// never lets go, leaving no waiter behind; once the first lets go, the lock is free.
    #[tokio::test]
    async fn a_held_lock_makes_others_wait_then_frees() {
        let temp = tempfile::tempdir().unwrap();
        let held = lock(temp.path(), LOCK_PATIENCE).await.unwrap();
        // Another descriptor of the same file is another `flock` owner, as another process.
        let busy = File::open(temp.path().join(LOCK_FILE)).unwrap();
        assert!(matches!(
            busy.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        let error = lock(temp.path(), Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::Locked { waited, .. } if waited == Duration::from_millis(100)),
            "{error:?}"
        );
        drop(held);
        // The waiter that timed out left nothing behind: the lock is free at once.
        busy.try_lock().unwrap();
        busy.unlock().unwrap();
        let again = lock(temp.path(), Duration::from_secs(5)).await.unwrap();
        drop(again);
    }
}
