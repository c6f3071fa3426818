//! Read masks: the paths a run must not see ([`Sandbox::hidden`](crate::Sandbox::hidden)),
//! and the runs' directory (`runs_dir.rs`), hidden in the run's mount namespace.
//!
//! The parent decides everything ([`plan`]); the child ([`set_up`]) only makes system calls,
//! after the project and the protected paths are in place and before the run's own directory
//! and its TMPDIR are mounted:
//! 1. every existing ancestor of a hidden path (and of the runs' directory), `/` aside, is
//!    bound onto itself, shallowest first: a mount point cannot be renamed or removed in the
//!    namespace that holds it (`EBUSY`), so no run can move a hidden path out from under the
//!    mask that the next run would place on its old name;
//! 2. the runs' directory is covered by an empty `tmpfs`, in which the run's TMPDIR mount
//!    point and one empty file are made, then made read-only: the run sees no other run's
//!    TMPDIR, and nothing done on the host reaches its own;
//! 3. each hidden directory is covered by an empty read-only `tmpfs` (with, when the run's own
//!    directory lies inside, the directories that lead to it, so that its mount can be placed);
//! 4. each hidden file has the empty file bound over it, read-only.
//!
//! With the mask server (`mask_server.rs`), steps 3 and 4 attach the server's node for the
//! path instead (a clone of it from the server's detached mount: an empty read-only directory
//! or file that records each attempt to read it); a directory that must hold the run's own
//! directory, or a node that cannot be cloned, gets the `tmpfs` or empty file as before.
//!
//! A mask hides a path, not a file: a hard link to a hidden file made elsewhere beforehand,
//! or a copy, stays readable (see docs/security.md, "Read masks").

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr;

use crate::Error;
use crate::mounts::{
    self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY,
};

/// The name of the empty file made in the runs' directory's cover.
const EMPTY_FILE: &str = ".hidden";

/// What [`set_up`] does, prepared by the parent.
#[derive(Debug)]
pub(crate) struct MaskPlan {
    /// Directories bound onto themselves (step 1), shallowest first.
    pub(crate) pinned: Vec<CString>,
    /// The runs' directory, covered by an empty `tmpfs` (step 2).
    pub(crate) runs_dir: CString,
    /// The run's TMPDIR, whose mount point is made in that `tmpfs`.
    pub(crate) temp_dir: Option<CString>,
    /// The empty file made there, bound over each hidden file.
    pub(crate) empty_file: CString,
    /// Hidden directories, each with the directories to make in its cover, or the name of
    /// its mask server node.
    pub(crate) dirs: Vec<(CString, Vec<CString>, Option<CString>)>,
    /// Hidden files (and anything else that is not a directory), each with the name of its
    /// mask server node.
    pub(crate) files: Vec<(CString, Option<CString>)>,
    /// The mask server's detached root, which nodes are cloned from (-1: none).
    pub(crate) server_root: libc::c_int,
    /// The mask server's nodes of this plan and the entry of `hidden` each masks, for the
    /// run's watch (`mask_server::MaskServer::watch`).
    pub(crate) nodes: Vec<(u64, PathBuf)>,
}

impl MaskPlan {
    /// How many paths the run has hidden (directories and files).
    pub(crate) fn hidden(&self) -> usize {
        self.dirs.len() + self.files.len()
    }
}

/// The masks of a run: `hidden` resolved (symbolic links followed; what does not exist, `/`,
/// relative paths and the ancestors of the runs' directory left out and reported in the
/// returned notes), a path inside another hidden directory dropped, the directories leading
/// to `own_dir`'s parent kept in the cover of the hidden directory that holds it.
pub(crate) fn plan(
    hidden: &[PathBuf],
    runs_dir: &Path,
    temp_dir: Option<&Path>,
    own_dir: Option<&Path>,
) -> Result<(MaskPlan, Vec<String>), Error> {
    let mut notes = Vec::new();
    let mut resolved: Vec<(PathBuf, bool, &Path)> = Vec::new();
    for path in hidden {
        if !path.is_absolute() {
            notes.push(format!(
                "{} not hidden: not an absolute path",
                path.display()
            ));
            continue;
        }
        let Ok(real) = std::fs::canonicalize(path) else {
            continue;
        };
        if real == Path::new("/") || runs_dir.starts_with(&real) {
            notes.push(format!(
                "{} not hidden: it holds toolsmith's own run directories",
                path.display()
            ));
            continue;
        }
        let Ok(metadata) = real.symlink_metadata() else {
            continue;
        };
        resolved.push((real, metadata.is_dir(), path));
    }
    resolved.sort_by_key(|(path, _, _)| path.components().count());
    let mut kept: Vec<(PathBuf, bool, &Path)> = Vec::new();
    for (path, is_dir, entry) in resolved {
        let covered = kept
            .iter()
            .any(|(other, other_is_dir, _)| *other_is_dir && path.starts_with(other));
        if !covered {
            kept.push((path, is_dir, entry));
        }
    }
    let mut pinned: Vec<PathBuf> = Vec::new();
    for path in kept
        .iter()
        .map(|(path, _, _)| path.as_path())
        .chain([runs_dir])
    {
        for ancestor in path.ancestors().skip(1) {
            if ancestor != Path::new("/") && !pinned.iter().any(|other| other == ancestor) {
                pinned.push(ancestor.to_path_buf());
            }
        }
    }
    pinned.sort_by_key(|path| path.components().count());
    let own_parent = own_dir.and_then(Path::parent);
    let server = crate::mask_server::server().ok();
    let mut nodes = Vec::new();
    let mut node = |path: &Path, is_dir: bool, entry: &Path| {
        server.map(|server| {
            let (id, name) = server.node(path, is_dir);
            nodes.push((id, entry.to_path_buf()));
            name
        })
    };
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    for (path, is_dir, entry) in &kept {
        if *is_dir {
            let mut chain: Vec<&Path> = match own_parent {
                Some(parent) if parent.starts_with(path) => parent
                    .ancestors()
                    .take_while(|ancestor| ancestor != path)
                    .collect(),
                _ => Vec::new(),
            };
            chain.reverse();
            // A cover that must hold the run's own directory is a tmpfs: the server's
            // directories are empty and read-only.
            let served = if chain.is_empty() {
                node(path, true, entry)
            } else {
                None
            };
            dirs.push((
                c_path(path)?,
                chain.into_iter().map(c_path).collect::<Result<_, _>>()?,
                served,
            ));
        } else {
            files.push((c_path(path)?, node(path, false, entry)));
        }
    }
    Ok((
        MaskPlan {
            pinned: pinned
                .iter()
                .map(|path| c_path(path))
                .collect::<Result<_, _>>()?,
            runs_dir: c_path(runs_dir)?,
            temp_dir: temp_dir.map(c_path).transpose()?,
            empty_file: c_path(&runs_dir.join(EMPTY_FILE))?,
            dirs,
            files,
            server_root: server.map_or(-1, crate::mask_server::MaskServer::root_fd),
            nodes,
        },
        notes,
    ))
}

fn c_path(path: &Path) -> Result<CString, Error> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::NulByte {
        value: path.to_string_lossy().into_owned(),
    })
}

/// Steps 1 to 4 of the module's documentation, in the calling process, which is in a new
/// mount namespace. Returns false with errno set on the first failure.
///
/// # Safety
/// As [`mounts::set_up`]: async-signal-safe and allocation-free, in a new mount namespace.
pub(crate) unsafe fn set_up(plan: &MaskPlan) -> bool {
    // SAFETY: system calls on NUL-terminated strings prepared by the parent, in the child's
    // own mount namespace.
    unsafe {
        for path in &plan.pinned {
            if libc::mount(
                path.as_ptr(),
                path.as_ptr(),
                ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                ptr::null(),
            ) != 0
                && mounts::errno() != libc::ENOENT
            {
                return false;
            }
        }
        if !cover(&plan.runs_dir, c"size=16k,nr_inodes=8,mode=0711") {
            return false;
        }
        if let Some(temp_dir) = &plan.temp_dir
            && libc::mkdir(temp_dir.as_ptr(), 0o700) != 0
        {
            return false;
        }
        // `mknod`, not `open(O_CREAT)`: a file opened for writing holds a writer on the
        // `tmpfs` until its last reference goes, and a concurrent spawn that copies the
        // descriptor table in that window would keep it, so the read-only step below would
        // fail with `EBUSY` under load.
        if libc::mknod(plan.empty_file.as_ptr(), libc::S_IFREG | 0o444, 0) != 0 {
            return false;
        }
        if !read_only(&plan.runs_dir) {
            return false;
        }
        for (path, chain, node) in &plan.dirs {
            if let Some(node) = node
                && attach_node(plan.server_root, node, path)
            {
                continue;
            }
            if !cover(path, c"size=4k,nr_inodes=64,mode=0755") {
                return false;
            }
            for dir in chain {
                if libc::mkdir(dir.as_ptr(), 0o755) != 0 {
                    return false;
                }
            }
            if !read_only(path) {
                return false;
            }
        }
        for (path, node) in &plan.files {
            if let Some(node) = node
                && attach_node(plan.server_root, node, path)
            {
                continue;
            }
            if libc::mount(
                plan.empty_file.as_ptr(),
                path.as_ptr(),
                ptr::null(),
                libc::MS_BIND,
                ptr::null(),
            ) != 0
            {
                // Removed since the plan: nothing left to hide.
                if mounts::errno() == libc::ENOENT {
                    continue;
                }
                return false;
            }
            if !read_only(path) {
                return false;
            }
        }
        true
    }
}

/// Attaches a clone of the mask server's node `node` (already read-only, `nodev,nosuid,
/// noexec`) on `path`. False when it cannot (the caller falls back to a `tmpfs` or the empty
/// file, which is as tight, without the record).
///
/// # Safety
/// As [`set_up`].
unsafe fn attach_node(root: libc::c_int, node: &CStr, path: &CStr) -> bool {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    if root < 0 {
        return false;
    }
    // SAFETY: as set_up; `root` is the server's descriptor, inherited from the executor.
    unsafe {
        let tree = libc::syscall(
            libc::SYS_open_tree,
            root,
            node.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        ) as libc::c_int;
        if tree < 0 {
            return false;
        }
        let attached = mounts::attach(tree, path);
        libc::close(tree);
        attached
    }
}

/// Mounts an empty writable `tmpfs` with `options` on `path` (`nodev,nosuid,noexec`).
///
/// # Safety
/// As [`set_up`].
unsafe fn cover(path: &CStr, options: &CStr) -> bool {
    // SAFETY: as set_up.
    unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            path.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            options.as_ptr().cast(),
        ) == 0
    }
}

/// Makes the mount at `path` read-only, `nodev`, `nosuid` and `noexec`.
///
/// # Safety
/// As [`set_up`].
unsafe fn read_only(path: &CStr) -> bool {
    // SAFETY: as set_up.
    unsafe {
        mounts::set_attributes(
            libc::AT_FDCWD,
            path,
            0,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        )
    }
}
