//! The lease an executor holds on each of its cgroup directories, and the
//! sweep of `toolsmith-<pid>-<n>` directories whose lease is gone.
//!
//! A directory's owner holds an exclusive `flock` on it for as long as it
//! lives. A lock belongs to the directory's inode, which every mount of the
//! hierarchy shares, and the kernel drops it when the last descriptor of its
//! holder closes, however that process ends. So a sweeper in another PID
//! namespace (a container, `unshare --pid`, bubblewrap) that shares the
//! cgroup parent still sees a live owner's lease, where `/proc/<pid>` in its
//! own namespace would name nobody, or a stranger.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Takes the lease of `dir`: an exclusive lock on the directory, held by the
/// returned descriptor (close-on-exec, so no program of a run inherits it).
/// Fails with `WouldBlock` when another holds it.
pub(crate) fn take(dir: &Path) -> io::Result<OwnedFd> {
    let handle = OwnedFd::from(fs::File::open(dir)?);
    // SAFETY: flock on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(handle)
}

static NEXT_EXECUTOR_DIR: AtomicU64 = AtomicU64::new(0);

/// Makes a `toolsmith-<pid>-<n>` directory under `base` and takes its lease.
/// A name taken already (another PID namespace's toolsmith of the same pid,
/// or a directory a sweeper is removing) moves on to the next `n`.
pub(crate) fn make_executor_dir(base: &Path) -> io::Result<(PathBuf, OwnedFd)> {
    let mut last_error = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..16 {
        let dir = base.join(format!(
            "toolsmith-{}-{}",
            std::process::id(),
            NEXT_EXECUTOR_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        if let Err(error) = fs::create_dir(&dir) {
            if error.kind() == io::ErrorKind::AlreadyExists {
                continue;
            }
            return Err(error);
        }
        match take(&dir) {
            Ok(lease) => return Ok((dir, lease)),
            // A sweeper took it between the two calls and removes it.
            Err(error) => last_error = error,
        }
    }
    Err(last_error)
}

/// Makes `dir` again where it vanished, and takes its lease.
pub(crate) fn restore_dir(dir: &Path) -> io::Result<OwnedFd> {
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    take(dir)
}

/// Removes `toolsmith-<pid>-<n>` directories under `base` whose owner is
/// provably gone: no process anywhere holds their lease. A directory made by
/// a toolsmith that held no lease (an older one) is also spared while a
/// process of its pid lives in this PID namespace. Whatever still runs in a
/// removed directory's leaves is killed first.
pub(crate) fn remove_stale_dirs(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|name| name.strip_prefix("toolsmith-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        // Held for the removal, so that no executor takes the directory meanwhile.
        let Ok(_lease) = take(&dir) else {
            continue;
        };
        if Path::new(&format!("/proc/{owner}")).exists() && !owned_by_a_leaseholder(owner) {
            continue;
        }
        for leaf in child_dirs(&dir) {
            let kill = leaf.join("cgroup.kill");
            if kill.exists() {
                let _ = fs::write(&kill, "1");
            }
            remove_dir_retrying(&leaf);
        }
        remove_dir_retrying(&dir);
        tracing::info!(path = %dir.display(), "removed a stale cgroup of a dead executor");
    }
}

/// True when the process `pid` of this namespace is a toolsmith that takes
/// leases: its directory's lease being free then proves the directory is
/// not its own (the pid is another namespace's, or was reused).
fn owned_by_a_leaseholder(pid: u32) -> bool {
    let own = fs::read_link("/proc/self/exe");
    let theirs = fs::read_link(format!("/proc/{pid}/exe"));
    matches!((own, theirs), (Ok(own), Ok(theirs)) if own == theirs)
}

/// The subdirectories (child cgroups) of a cgroup directory.
fn child_dirs(path: &Path) -> Vec<PathBuf> {
    fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
                .map(|entry| entry.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes a cgroup directory and, first, every cgroup a program made below
/// it (depth first: `rmdir` of a cgroup with children fails with EBUSY).
/// `rmdir` can also fail with EBUSY for a few milliseconds after the last
/// process died; retry briefly.
pub(crate) fn remove_dir_retrying(path: &Path) {
    remove_cgroup_tree(path, 0);
}

fn remove_cgroup_tree(path: &Path, depth: usize) {
    // A cgroup tree cannot be deeper than the kernel's limit; this bounds a
    // malicious one all the same.
    if depth < 64 {
        for child in child_dirs(path) {
            remove_cgroup_tree(&child, depth + 1);
        }
    }
    for attempt in 0..20 {
        match fs::remove_dir(path) {
            Ok(()) => return,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return,
            Err(_) if attempt < 19 => std::thread::sleep(Duration::from_millis(1)),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "could not remove a cgroup")
            }
        }
    }
}
