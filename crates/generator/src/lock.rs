//! The advisory lock on a tools directory (`<tools_dir>/.toolsmith.lock`, `flock`), held by a generation or rollback while it puts its file in place and records its version, so that processes sharing the directory (replicas of `serve --http`, a `toolsmith generate` next to a server) take turns.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Error;

/// The lock file's name inside the tools directory (hidden, so discovery skips it).
pub const LOCK_FILE: &str = ".toolsmith.lock";

/// How long a generation waits for another process's registration before giving up. A
/// registration holds the lock for a `rename` and a git commit, milliseconds; a holder that
/// keeps it this long is stuck (a hung network filesystem), and waiting forever would hang
/// the `custom_tool` call too.
pub(crate) const LOCK_PATIENCE: Duration = Duration::from_secs(60);

/// The held lock: released when dropped (the descriptor is closed), or when the process
/// dies, whatever way it dies.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

/// Takes the lock on `tools_dir` (which must exist), waiting for another holder at most
/// `patience`, off the async threads.
pub(crate) async fn lock(tools_dir: &Path, patience: Duration) -> Result<DirLock, Error> {
    let path = tools_dir.join(LOCK_FILE);
    let waiting = tokio::task::spawn_blocking({
        let path = path.clone();
        move || lock_blocking(&path)
    });
    match tokio::time::timeout(patience, waiting).await {
        Ok(Ok(locked)) => locked,
        Ok(Err(join_error)) => Err(Error::Io {
            path,
            source: std::io::Error::other(join_error),
        }),
        // The blocking task takes the lock when the holder lets go, and drops it at once,
        // since nobody awaits its result any more.
        Err(_elapsed) => Err(Error::Locked {
            path,
            waited: patience,
        }),
    }
}

fn lock_blocking(path: &PathBuf) -> Result<DirLock, Error> {
    let io_error = |source| Error::Io {
        path: path.clone(),
        source,
    };
    // Opened read-only when it exists: `flock` needs no write access, and closing a
    // descriptor opened for writing is an event for every watcher of the directory.
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(io_error)?,
        Err(error) => return Err(io_error(error)),
    };
    // `File::lock` is `flock(LOCK_EX)` on Linux; on NFS the kernel maps it onto the
    // protocol's byte-range locks, so it holds across machines that mount the directory.
    file.lock().map_err(io_error)?;
    Ok(DirLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second taker waits for the first, and times out with a clear error when the first
    /// never lets go; once it does, the lock is free.
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
        // The waiter that timed out still takes the lock once it is free, and lets it go at
        // once: the lock is free again within moments, not necessarily at this instant.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match busy.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(error) => panic!("the lock was never freed: {error:?}"),
            }
        }
        busy.unlock().unwrap();
        let again = lock(temp.path(), Duration::from_secs(5)).await.unwrap();
        drop(again);
    }
}
