//! The advisory lock on a tools directory (`<tools_dir>/.toolsmith.lock`, `flock`), held by a generation or rollback while it puts its file in place and records its version, so that processes sharing the directory (replicas of `serve --http`, a `toolsmith generate` next to a server) take turns.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
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

/// Takes the lock on `tools_dir` (which must exist), waiting for another holder at most
/// `patience`. The wait is a blocking `flock` on a detached thread of its own (so waiters show
/// in `/proc/locks`), not on the runtime's blocking pool: when the patience runs out the
/// command ends at once, since nothing waits for that thread, and if it gets the lock later
/// it lets go at once, nobody being there to take it.
pub(crate) async fn lock(tools_dir: &Path, patience: Duration) -> Result<DirLock, Error> {
    let path = tools_dir.join(LOCK_FILE);
    let file = open_lock_file(&path)?;
    // `File::try_lock` and `File::lock` are `flock(LOCK_EX[|LOCK_NB])` on Linux; on NFS the
    // kernel maps them onto the protocol's byte-range locks, so the lock holds across
    // machines that mount the directory.
    match file.try_lock() {
        Ok(()) => return Ok(DirLock { _file: file }),
        Err(TryLockError::WouldBlock) => {}
        Err(TryLockError::Error(source)) => return Err(Error::Io { path, source }),
    }
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("toolsmith-lock".to_owned())
        .spawn(move || {
            let locked = file.lock().map(|()| file);
            // A receiver gone (the patience ran out) drops the file, and the lock with it.
            let _gone = sender.send(locked);
        })
        .map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
    match tokio::time::timeout(patience, receiver).await {
        Ok(Ok(Ok(file))) => Ok(DirLock { _file: file }),
        Ok(Ok(Err(source))) => Err(Error::Io { path, source }),
        Ok(Err(_thread_gone)) => Err(Error::Io {
            path,
            source: std::io::Error::other("the thread waiting for the lock ended"),
        }),
        Err(_elapsed) => Err(Error::Locked {
            path,
            waited: patience,
        }),
    }
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

    /// A wait that ran out of patience ends the command: the runtime shuts down at once
    /// while another holder keeps the lock (it used to wait for the blocked waiter, that is
    /// for the holder).
    #[test]
    fn patience_that_runs_out_ends_the_command() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join(LOCK_FILE);
        let holder = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .unwrap();
        holder.lock().unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(10));
            drop(holder);
        });
        let started = std::time::Instant::now();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_time()
            .build()
            .unwrap();
        let error = runtime
            .block_on(lock(temp.path(), Duration::from_millis(100)))
            .unwrap_err();
        assert!(matches!(error, Error::Locked { .. }), "{error:?}");
        drop(runtime);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the command outlived its patience: {:?}",
            started.elapsed()
        );
        releaser.join().unwrap();
    }
}
