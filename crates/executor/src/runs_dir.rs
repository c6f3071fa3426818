//! The host directory that holds every run's private TMPDIR, out of every run's reach.
//!
//! Each run's TMPDIR used to be a directory of the shared temporary directory, on which the
//! run's `tmpfs` was mounted. A tool that may write there (`filesystem = "full"`) could remove
//! the directory on which a prepared sandbox's TMPDIR was mounted (removing a mount point of
//! another mount namespace detaches that mount) and put its own in its place: the next call
//! then wrote its temporary files where the tool reads them (issue 23, Why 3).
//!
//! Now every TMPDIR lives in one directory per process, made with `mkdtemp` when the first
//! executor starts and kept until the last one is dropped, so that it exists before any run
//! starts and for as long as one may run. Every run with a mount namespace covers it with a
//! `tmpfs` of its own (`masks.rs`) in which its TMPDIR's mount point is made: no run sees
//! another's TMPDIR or the host's directory, and nothing a process does on the host reaches
//! the mounts of a run that has started. The directory is checked (type, owner, inode)
//! before each run is planned, so a replaced one fails the run rather than serving it.

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
}

/// The directory in use, shared by every executor of the process and every TMPDIR in it.
static CURRENT: Mutex<Weak<RunsDir>> = Mutex::new(Weak::new());

impl RunsDir {
    /// The process's directory, made (mode 0711, owned by the executor's uid) when no live
    /// executor or TMPDIR holds one.
    pub(crate) fn acquire() -> Result<Arc<RunsDir>, Error> {
        let mut current = CURRENT
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(dir) = current.upgrade() {
            return Ok(dir);
        }
        let sys = |call| move |source| Error::Sys { call, source };
        let template =
            std::env::temp_dir().join(format!("toolsmith-runs-{}-XXXXXX", std::process::id()));
        let path = nix::unistd::mkdtemp(&template)
            .map_err(|errno| std::io::Error::from_raw_os_error(errno as i32))
            .map_err(sys("mkdtemp(the runs' directory)"))?;
        // Traversable, not listable: a run switched to `[sandbox] user` reaches its own TMPDIR
        // on a kernel without mount namespaces.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o711))
            .map_err(sys("chmod(the runs' directory)"))?;
        let metadata = path
            .symlink_metadata()
            .map_err(sys("lstat(the runs' directory)"))?;
        let dir = Arc::new(RunsDir {
            path,
            device: metadata.dev(),
            inode: metadata.ino(),
        });
        *current = Arc::downgrade(&dir);
        Ok(dir)
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
        if let Err(error) = std::fs::remove_dir(&self.path)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), %error, "could not remove the runs' directory");
        }
    }
}
