//! Supervised creations: the names a run may not make in its writable roots
//! (issue 22, finding 2), refused whether or not they exist, at any depth.
//!
//! Under `filesystem = "project"` (or a list of writable paths) the mount
//! layout keeps what exists of the protected paths read-only, but a name that
//! does not exist has no mount to hold it: a tool could make a `docs/.git`
//! whose `core.fsmonitor` the user's next `git status` in `docs/` runs, an
//! implicit bare repository (`HEAD`, `objects/`, `refs/`: git discovers one
//! wherever it works, `safe.bareRepository` defaults to `all`), or a
//! `.toolsmith/tools/deploy` that the next `run deploy` would run. Landlock
//! cannot refuse a name, and a filter that looks at a path and lets the
//! kernel go on is unsound: the kernel reads the path again, after another
//! thread of the tool changed it (`seccomp_unotify(2)`).
//!
//! So in such a run every call that makes a name (`seccomp::CREATING`, and
//! `open`/`openat` with `O_CREAT`) goes to toolsmith's supervisor, which makes
//! the name itself and never lets the kernel continue:
//!
//! 1. it copies the path (and the other arguments) once from the caller's
//!    memory, takes the caller's directory descriptor (`pidfd_getfd`, or its
//!    working directory and root through toolsmith's `/proc`), and checks that
//!    the notification is still live, so all of it was the caller's;
//! 2. on its own thread, whose root and working directory are its own
//!    (`unshare(CLONE_FS)`), it enters the caller's root (`chroot`), takes the
//!    caller's identity (`identity.rs`) and umask, and opens the directory
//!    the new name goes in (the path but its last component, resolved as the
//!    kernel would for the caller: the run's mounts, its symbolic links);
//! 3. it decides on that descriptor and the last component, which no thread
//!    of the tool can change any more: inside a writable root, an entry named
//!    `.git` or `HEAD` (ASCII case ignored) is refused, and so is the first
//!    missing component of each missing protected path, in its own directory;
//! 4. it makes the name relative to that descriptor (`mkdirat`, `openat`,
//!    `mknodat`, `symlinkat`, `linkat`, `renameat2`), hands an opened file to
//!    the caller (`SECCOMP_IOCTL_NOTIF_ADDFD`), and answers with the result.
//!    An `open` that would create through a dangling symbolic link follows it
//!    itself, one link at a time, so the name finally made is checked too.
//!
//! What the supervisor makes is bounded as the caller is: the run's mount
//! layout (read-only outside the writable roots) and the caller's uid, gid,
//! groups and capabilities. A refusal fails with `EACCES` and is reported
//! ([`WriteAttempt`]).

mod calls;
mod make;

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub(crate) use self::calls::{Shape, View, shape};
pub(crate) use self::make::{Made, make};
use self::make::{open_at, stat};

/// At most this many refused creations of one run are recorded (each is still refused).
pub const MAX_WRITE_ATTEMPTS: usize = 32;

/// The longest path the kernel takes (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// Symbolic links an `open` with `O_CREAT` follows before `ELOOP`, as the kernel.
const MAX_LINKS: usize = 40;

/// A run's attempt to make a name it may not make.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WriteAttempt {
    /// The name as toolsmith sees it: the directory's path in the run's view, and the name.
    pub path: PathBuf,
    /// Why it is refused.
    pub reason: WriteRefusal,
}

/// Why a name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteRefusal {
    /// `.git` or `HEAD` in a writable root: a repository git would find and obey.
    Repository,
    /// The first missing component of a protected path (the project's
    /// `.toolsmith`, a peer's tool directory, toolsmith's own state).
    Protected,
}

/// What a run with supervised creations may not make: planned by the parent,
/// read by the supervisor.
#[derive(Debug, Clone, Default)]
pub(crate) struct Creations {
    /// Device and inode of each writable root.
    roots: Vec<(u64, u64)>,
    /// Device and inode of a directory, and the name it may not get: the
    /// first missing component of a missing protected path.
    reserved: Vec<(u64, u64, Vec<u8>)>,
}

fn identity_of(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.dev(), metadata.ino()))
}

impl Creations {
    /// The plan for `roots`, with `protected` (existing or not) below them.
    pub(crate) fn plan(roots: &[&Path], protected: &[PathBuf]) -> Creations {
        let exists = |path: &Path| path.symlink_metadata().is_ok();
        let mut reserved = Vec::new();
        for path in protected.iter().filter(|path| !exists(path)) {
            let Some(nearest) = path.ancestors().skip(1).find(|ancestor| exists(ancestor)) else {
                continue;
            };
            let Some(first) = path
                .strip_prefix(nearest)
                .ok()
                .and_then(|rest| rest.components().next())
            else {
                continue;
            };
            if let Some((device, inode)) = identity_of(nearest) {
                reserved.push((device, inode, first.as_os_str().as_bytes().to_vec()));
            }
        }
        Creations {
            roots: roots.iter().filter_map(|root| identity_of(root)).collect(),
            reserved,
        }
    }

    /// Why `name` may not be made in `directory` (a descriptor in the
    /// caller's view, whose path there is `at`), or `None`.
    fn refusal(&self, directory: &OwnedFd, at: &Path, name: &[u8]) -> Option<WriteRefusal> {
        let (device, inode) = stat(directory.as_raw_fd()).ok()?;
        if self
            .reserved
            .iter()
            .any(|(d, i, reserved)| *d == device && *i == inode && reserved == name)
        {
            return Some(WriteRefusal::Protected);
        }
        let git = |name: &[u8]| name.eq_ignore_ascii_case(b".git");
        // A new name inside an existing `.git` (a nested repository's hooks
        // or config) is a repository's too; the project's own is read-only.
        let repository = git(name)
            || name.eq_ignore_ascii_case(b"HEAD")
            || at
                .components()
                .any(|component| git(component.as_os_str().as_bytes()));
        (repository && self.inside_a_root(directory)).then_some(WriteRefusal::Repository)
    }

    /// Whether `directory` is a writable root or below one: walks `..` up
    /// to the root of the caller's view.
    fn inside_a_root(&self, directory: &OwnedFd) -> bool {
        let Ok(mut here) = stat(directory.as_raw_fd()) else {
            return true;
        };
        let mut current = directory.try_clone().ok();
        for _ in 0..PATH_MAX {
            if self.roots.contains(&here) {
                return true;
            }
            let Some(parent) = current.as_ref().and_then(|fd| {
                open_at(fd.as_raw_fd(), c"..", libc::O_PATH | libc::O_DIRECTORY).ok()
            }) else {
                // Unreadable: count it as inside, the refusal is the safe side.
                return true;
            };
            let Ok(up) = stat(parent.as_raw_fd()) else {
                return true;
            };
            if up == here {
                return false;
            }
            here = up;
            current = Some(parent);
        }
        true
    }
}
#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;

    use super::make::parent;
    use super::{Creations, WriteRefusal};

    fn name_of(dirfd: i32, path: &str) -> (std::path::PathBuf, String) {
        let (directory, name) = parent(dirfd, &CString::new(path).unwrap()).unwrap();
        let at = std::fs::read_link(format!("/proc/self/fd/{}", directory.as_raw_fd())).unwrap();
        (at, String::from_utf8(name.as_bytes().to_vec()).unwrap())
    }

    /// The last component is the name (trailing slashes kept for the kernel), and
    /// the directory is resolved as the kernel resolves it (links followed).
    #[test]
    fn a_path_splits_into_its_directory_and_its_last_name() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("docs/sub")).unwrap();
        std::os::unix::fs::symlink("docs", root.path().join("link")).unwrap();
        let dir = std::fs::File::open(root.path()).unwrap();
        let fd = dir.as_raw_fd();
        let docs = root.path().join("docs");
        assert_eq!(name_of(fd, "docs/.git"), (docs.clone(), ".git".to_owned()));
        assert_eq!(
            name_of(fd, "docs/.git/"),
            (docs.clone(), ".git/".to_owned())
        );
        assert_eq!(super::make::bare(b".git//"), b".git");
        assert_eq!(
            name_of(fd, "docs//sub/x"),
            (docs.join("sub"), "x".to_owned())
        );
        assert_eq!(name_of(fd, "link/.git"), (docs.clone(), ".git".to_owned()));
        assert_eq!(
            name_of(fd, "x"),
            (root.path().to_path_buf(), "x".to_owned())
        );
        let absolute = format!("{}/HEAD", docs.display());
        assert_eq!(name_of(-1, &absolute), (docs, "HEAD".to_owned()));
        assert_eq!(
            parent(fd, &CString::new("").unwrap()).map(|_| ()),
            Err(libc::ENOENT)
        );
        assert_eq!(
            parent(fd, &CString::new("missing/x").unwrap()).map(|_| ()),
            Err(libc::ENOENT)
        );
    }

    /// `.git` and `HEAD`, in any case, are refused at any depth inside a root and
    /// nowhere else; a missing protected path's first missing component is
    /// refused in its own directory only.
    #[test]
    fn repositories_are_refused_inside_the_roots_and_protected_names_where_they_belong() {
        let top = tempfile::tempdir().unwrap();
        let project = top.path().join("project");
        let outside = top.path().join("outside");
        std::fs::create_dir_all(project.join("docs/deep")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let creations = Creations::plan(
            &[project.as_path()],
            &[project.join(".toolsmith"), project.join(".kodelet/tools")],
        );
        let open = |path: &std::path::Path| -> std::os::fd::OwnedFd {
            std::fs::File::open(path).unwrap().into()
        };
        let refusal = |path: &std::path::Path, name: &str| {
            creations.refusal(&open(path), path, name.as_bytes())
        };
        for name in [".git", ".GIT", ".Git", "HEAD", "head"] {
            assert_eq!(
                refusal(&project, name),
                Some(WriteRefusal::Repository),
                "{name}"
            );
            assert_eq!(
                refusal(&project.join("docs/deep"), name),
                Some(WriteRefusal::Repository)
            );
            assert_eq!(refusal(&outside, name), None, "{name} outside the roots");
        }
        assert_eq!(
            refusal(&project, ".toolsmith"),
            Some(WriteRefusal::Protected)
        );
        assert_eq!(refusal(&project, ".kodelet"), Some(WriteRefusal::Protected));
        assert_eq!(refusal(&project.join("docs"), ".toolsmith"), None);
        for name in [
            "README",
            ".gitignore",
            ".github",
            "git",
            "HEADS",
            "objects",
            "refs",
        ] {
            assert_eq!(refusal(&project, name), None, "{name}");
        }
    }
}
