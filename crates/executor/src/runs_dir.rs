//! The host directory that holds every run's private TMPDIR, out of every run's reach.
//!
//! Each run's TMPDIR used to be a directory of the shared temporary directory, on which the
//! run's `tmpfs` was mounted. A tool that may write there (`filesystem = "full"`) could remove
//! the directory on which a prepared sandbox's TMPDIR was mounted (removing a mount point of
//! another mount namespace detaches that mount) and put its own in its place: the next call
//! then wrote its temporary files where the tool reads them (issue 23, Why 3).
//!
//! Now every TMPDIR lives in one directory of the temporary directory shared by every
//! toolsmith of the uid (`toolsmith-runs-<euid>`): each executor holds a shared `flock` on it
//! from before its first run until it is dropped, and the last one to let go removes it, so
//! that it exists before any run starts and for as long as one may run, in this process or
//! another. Every run with a mount namespace covers it with a `tmpfs` of its own
//! (`masks.rs`) in which its TMPDIR's mount point is made: no run sees another's TMPDIR or the
//! host's directory, and nothing a process does on the host reaches the mounts of a run that
//! has started. The directory is checked (type, owner, mode, inode) when taken and before each
//! run is planned, so a replaced one fails the run rather than serving it.
//!
//! What stays out of reach: a toolsmith given another `TMPDIR` uses another directory, which
//! this one's runs do not hide.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::Error;

/// The directory of the runs' TMPDIRs (see the module's documentation).
#[derive(Debug)]
pub(crate) struct RunsDir {
    path: PathBuf,
    device: u64,
    inode: u64,
    /// The directory, open and share-locked while this process uses it.
    locked: OwnedFd,
}

/// The directory in use, shared by every executor of the process and every TMPDIR in it.
static CURRENT: Mutex<Weak<RunsDir>> = Mutex::new(Weak::new());

impl RunsDir {
    /// The uid's directory, made (mode 0711, owned by the executor's uid) where missing, and
    /// share-locked.
    pub(crate) fn acquire() -> Result<Arc<RunsDir>, Error> {
        let mut current = CURRENT
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(dir) = current.upgrade() {
            return Ok(dir);
        }
        let uid = nix::unistd::geteuid().as_raw();
        let path = std::env::temp_dir().join(format!("toolsmith-runs-{uid}"));
        // The last user of an old directory may remove it between our open and our lock:
        // then the path names a new one (or none), and the next round takes that.
        for _ in 0..8 {
            if let Some(dir) = RunsDir::take(&path, uid)? {
                let dir = Arc::new(dir);
                *current = Arc::downgrade(&dir);
                return Ok(dir);
            }
        }
        Err(Error::RunsDirReplaced { path })
    }

    /// One round of [`RunsDir::acquire`]: `None` when the directory went away meanwhile.
    fn take(path: &Path, uid: u32) -> Result<Option<RunsDir>, Error> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        let sys = |call| move |source| Error::Sys { call, source };
        match std::fs::DirBuilder::new().mode(0o711).create(path) {
            Ok(()) => {
                // Traversable, not listable, whatever the umask: a run switched to
                // `[sandbox] user` reaches its own TMPDIR on a kernel without mount namespaces.
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o711))
                    .map_err(sys("chmod(the runs' directory)"))?;
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(sys("mkdir(the runs' directory)")(source)),
        }
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(path)
        {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(_) => {
                return Err(Error::RunsDirReplaced {
                    path: path.to_path_buf(),
                });
            }
        };
        let metadata = file.metadata().map_err(sys("fstat(the runs' directory)"))?;
        if metadata.uid() != uid || metadata.mode() & 0o022 != 0 {
            return Err(Error::RunsDirReplaced {
                path: path.to_path_buf(),
            });
        }
        let locked = OwnedFd::from(file);
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(locked.as_raw_fd(), libc::LOCK_SH) } != 0 {
            return Err(sys("flock(the runs' directory)")(
                std::io::Error::last_os_error(),
            ));
        }
        let still = path
            .symlink_metadata()
            .is_ok_and(|now| now.dev() == metadata.dev() && now.ino() == metadata.ino());
        Ok(still.then(|| RunsDir {
            path: path.to_path_buf(),
            device: metadata.dev(),
            inode: metadata.ino(),
            locked,
        }))
    }

    /// The directory's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Fails unless the path still names the directory made by [`RunsDir::acquire`]: not a
    /// symbolic link, the same inode, owned by the executor's uid and writable by it alone.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let metadata = self.path.symlink_metadata().map_err(|source| Error::Sys {
            call: "lstat(the runs' directory)",
            source,
        })?;
        let same = metadata.is_dir()
            && metadata.dev() == self.device
            && metadata.ino() == self.inode
            && metadata.uid() == nix::unistd::geteuid().as_raw()
            && metadata.mode() & 0o022 == 0;
        if same {
            Ok(())
        } else {
            Err(Error::RunsDirReplaced {
                path: self.path.clone(),
            })
        }
    }
}

impl Drop for RunsDir {
    fn drop(&mut self) {
        // The last user anywhere removes it: an exclusive lock means no other holds it.
        // SAFETY: flock on a descriptor the value owns.
        let last =
            unsafe { libc::flock(self.locked.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if last
            && self.check().is_ok()
            && let Err(error) = std::fs::remove_dir(&self.path)
            && !matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::DirectoryNotEmpty
            )
        {
            tracing::warn!(path = %self.path.display(), %error, "could not remove the runs' directory");
        }
    }
}
