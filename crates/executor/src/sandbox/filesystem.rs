//! The filesystem side of a run's plan: writable roots, Landlock, the
//! private TMPDIR, the run's own directory, the protected paths (bound,
//! sealed or supervised: `creations/`) and the read masks.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{AppliedSandbox, Enforcement, Filesystem, FilesystemAccess, Sandbox, TempDir};
use crate::runs_dir::RunsDir;
use crate::{Error, Features, RunAs, landlock};

/// Notes, for a run that hides paths, that a mount namespace is unavailable: nothing is hidden.
pub(super) fn masks_unavailable(
    sandbox: &Sandbox,
    features: &Features,
    applied: &mut AppliedSandbox,
) {
    if !sandbox.hidden.is_empty() && !features.private_mounts.available {
        applied.relaxed.push(format!(
            "read masks not applied: a mount namespace is unavailable ({})",
            features.private_mounts.detail
        ));
    }
}

/// The protected paths bound read-only: under `project` or `paths`, those that exist.
pub(super) fn protected_mounts(
    sandbox: &Sandbox,
    access: FilesystemAccess,
) -> Result<Vec<CString>, Error> {
    match access {
        FilesystemAccess::Project | FilesystemAccess::Paths => sandbox
            .protected
            .iter()
            .filter(|path| path.symlink_metadata().is_ok())
            .map(|path| c_path(path))
            .collect(),
        _ => Ok(Vec::new()),
    }
}

/// The masks of a run with a mount namespace; `applied` counts them and notes what was left out.
pub(super) fn plan_masks(
    sandbox: &Sandbox,
    runs: &RunsDir,
    temp_dir: Option<&TempDir>,
    applied: &mut AppliedSandbox,
) -> Result<crate::masks::MaskPlan, Error> {
    let (masks, notes) = crate::masks::plan(
        &sandbox.hidden,
        runs.path(),
        temp_dir.map(|dir| dir.path.as_path()),
        sandbox.own_dir.as_deref(),
    )?;
    applied.hidden = masks.hidden();
    applied.relaxed.extend(notes);
    Ok(masks)
}

/// The supervision of a run's creations (`creations/`): for a run that writes
/// below `roots` under the filter (`filtered`), of a root executor (the
/// supervisor enters the run's mount namespace, which a non-root executor's
/// user namespace owns), when the kernel has what the supervisor needs.
/// Without it the protected paths that do not exist are sealed instead
/// (`mounts::sealing`), and new repositories are not refused.
pub(super) fn plan_creations(
    sandbox: &Sandbox,
    features: &Features,
    roots: &[&Path],
    (filtered, is_root): (bool, bool),
    applied: &mut AppliedSandbox,
) -> Option<Arc<crate::creations::Creations>> {
    // Without the filter (`syscalls = "allow"`, reported as such) nothing
    // goes to a supervisor; the missing protected paths are sealed.
    if roots.is_empty() || !filtered {
        return None;
    }
    let unsupported = if is_root {
        (!features.supervisor.available).then(|| features.supervisor.detail.clone())
    } else {
        Some("toolsmith is not root (the supervisor enters the run's mount namespace)".to_owned())
    };
    if let Some(reason) = unsupported {
        applied.relaxed.push(format!(
            "new repositories (.git, HEAD) not refused in the writable roots: {reason}"
        ));
        return None;
    }
    Some(Arc::new(crate::creations::Creations::plan(
        roots,
        &sandbox.protected,
    )))
}

/// The filesystem part of a plan: the directories Landlock leaves
/// writable, its ruleset and the private TMPDIR; `applied` says what applies.
pub(super) struct FilesystemPlan<'sandbox> {
    pub(super) writable_roots: Vec<&'sandbox Path>,
    pub(super) landlock_ruleset: Option<OwnedFd>,
    pub(super) landlock_rights: u64,
    pub(super) temp_dir: Option<TempDir>,
}

/// Plans the sandbox's filesystem restriction, or fails closed when a
/// required mechanism is unavailable.
pub(super) fn plan_filesystem<'sandbox>(
    sandbox: &'sandbox Sandbox,
    features: &Features,
    runs: &Arc<RunsDir>,
    run_name: &str,
    applied: &mut AppliedSandbox,
) -> Result<FilesystemPlan<'sandbox>, Error> {
    let (writable_roots, enforcement, access) = match &sandbox.filesystem {
        Filesystem::Full => (Vec::new(), Enforcement::IfPossible, FilesystemAccess::Full),
        Filesystem::Project { root, enforcement } => (
            vec![root.as_path()],
            *enforcement,
            FilesystemAccess::Project,
        ),
        Filesystem::ReadOnly(enforcement) => (Vec::new(), *enforcement, FilesystemAccess::ReadOnly),
        Filesystem::Paths { roots, enforcement } => {
            if roots.len() > crate::mounts::MAX_WRITABLE_ROOTS {
                return Err(Error::TooManyWritablePaths {
                    count: roots.len(),
                    max: crate::mounts::MAX_WRITABLE_ROOTS,
                });
            }
            for root in roots {
                if !root.is_absolute() || root.symlink_metadata().is_err() {
                    return Err(Error::WritablePath { path: root.clone() });
                }
            }
            (
                roots.iter().map(PathBuf::as_path).collect(),
                *enforcement,
                FilesystemAccess::Paths,
            )
        }
    };
    let requirement = match access {
        FilesystemAccess::Project => "filesystem = project",
        FilesystemAccess::Paths => "filesystem = a list of paths",
        _ => "filesystem = read-only",
    };
    let mounts_available = features.private_mounts.available;
    let mut landlock_ruleset = None;
    let mut landlock_rights = 0;
    let mut temp_dir = None;
    if let Some(dir) = &sandbox.own_dir {
        create_own_dir(dir, applied.run_as)?;
    }
    if access != FilesystemAccess::Full {
        match features
            .landlock_abi
            .filter(|_| features.landlock.available)
        {
            Some(abi) => {
                if !mounts_available {
                    // Without capabilities (a non-root executor), a program cannot change
                    // the metadata of files it does not own, so Landlock alone keeps the
                    // promise there; a root executor's programs need the read-only mounts.
                    let strict =
                        enforcement == Enforcement::Required && nix::unistd::geteuid().is_root();
                    unavailable(
                        if strict {
                            Enforcement::Required
                        } else {
                            Enforcement::IfPossible
                        },
                        requirement,
                        "a mount namespace (read-only mounts: file metadata and device nodes)",
                        &features.private_mounts.detail,
                        applied,
                    )?;
                }
                let dir = create_temp_dir(runs, run_name, applied.run_as)?;
                let mut writable: Vec<&Path> = vec![&dir.path];
                writable.extend(writable_roots.iter().copied());
                writable.extend(sandbox.own_dir.as_deref());
                landlock_ruleset = Some(landlock::ruleset(abi, &writable)?);
                landlock_rights = landlock::writable_rights(abi);
                temp_dir = Some(dir);
                applied.filesystem = access;
            }
            None => unavailable(
                enforcement,
                requirement,
                "Landlock",
                &features.landlock.detail,
                applied,
            )?,
        }
    }
    Ok(FilesystemPlan {
        writable_roots,
        landlock_ruleset,
        landlock_rights,
        temp_dir,
    })
}

/// The sealed directories and their reopened entries below each writable root (see
/// `mounts::sealing`).
/// How the protected paths that do not exist are kept from being made: by the
/// supervisor (`creations/`) when `filtered` and `is_root` and the kernel allows it,
/// else by sealing their nearest existing directories (the sealed ones and their
/// entries bound writable again).
pub(super) fn protect_missing(
    sandbox: &Sandbox,
    features: &Features,
    roots: &[&Path],
    filtered_and_root: (bool, bool),
    applied: &mut AppliedSandbox,
) -> (
    Option<Arc<crate::creations::Creations>>,
    Vec<PathBuf>,
    Vec<PathBuf>,
) {
    match plan_creations(sandbox, features, roots, filtered_and_root, applied) {
        Some(creations) => (Some(creations), Vec::new(), Vec::new()),
        None => {
            let (sealed, reopened) = sealing_below(roots, &sandbox.protected);
            (None, sealed, reopened)
        }
    }
}

pub(super) fn sealing_below(
    roots: &[&Path],
    protected: &[PathBuf],
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut sealed, mut reopened) = (Vec::new(), Vec::new());
    for root in roots {
        let (root_sealed, root_reopened) = crate::mounts::sealing(root, protected);
        sealed.extend(root_sealed);
        reopened.extend(root_reopened);
    }
    (sealed, reopened)
}

pub(super) fn c_paths(paths: &[std::path::PathBuf]) -> Result<Vec<CString>, Error> {
    paths.iter().map(|path| c_path(path)).collect()
}

pub(super) fn c_path(path: &Path) -> Result<CString, Error> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::NulByte {
        value: path.to_string_lossy().into_owned(),
    })
}

pub(super) fn unavailable(
    enforcement: Enforcement,
    requirement: &'static str,
    mechanism: &'static str,
    reason: &str,
    applied: &mut AppliedSandbox,
) -> Result<(), Error> {
    match enforcement {
        Enforcement::Required => Err(Error::SandboxUnavailable {
            requirement,
            mechanism,
            reason: reason.to_owned(),
        }),
        Enforcement::IfPossible => {
            applied.relaxed.push(format!(
                "{requirement} not enforced: {mechanism} is unavailable ({reason})"
            ));
            Ok(())
        }
    }
}

/// The mount point of an own directory and its parent, for the mount plan.
pub(super) fn own_dir_mount(dir: &Path) -> Result<(CString, CString), Error> {
    let parent = dir
        .parent()
        .filter(|parent| dir.is_absolute() && *parent != Path::new("/"))
        .ok_or_else(|| Error::OwnDir {
            path: dir.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })?;
    Ok((c_path(dir)?, c_path(parent)?))
}

/// Makes the run's own directory (and its parents) if missing: mode 0700, owned by `owner`
/// when the run switches identity. A symbolic link in its place is refused: the directory
/// the run may write is exactly the one named.
pub(super) fn create_own_dir(dir: &Path, owner: Option<RunAs>) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    let own_dir_error = |source| Error::OwnDir {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(own_dir_error)?;
    let metadata = dir.symlink_metadata().map_err(own_dir_error)?;
    if !metadata.is_dir() {
        return Err(own_dir_error(std::io::Error::from(
            std::io::ErrorKind::NotADirectory,
        )));
    }
    if let Some(owner) = owner {
        std::os::unix::fs::chown(dir, Some(owner.uid()), Some(owner.gid()))
            .map_err(own_dir_error)?;
    }
    Ok(())
}

/// Creates the run's private temporary directory, owned by `owner` when the
/// run switches identity (so that it can write there).
pub(super) fn create_temp_dir(
    runs: &Arc<RunsDir>,
    run_name: &str,
    owner: Option<RunAs>,
) -> Result<TempDir, Error> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    // Unique in the process, not only in one executor: two executors of one process (a
    // library user's, the tests') number their runs alike, and the second would take the
    // first one's directory out from under its Landlock rule.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = runs.path().join(format!("toolsmith-run-{run_name}-{n}"));
    let create = || std::fs::DirBuilder::new().mode(0o700).create(&path);
    // A directory of the same name is left over from a killed executor whose pid was reused.
    create()
        .or_else(|error| match error.kind() {
            std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_dir_all(&path).and_then(|()| create())
            }
            _ => Err(error),
        })
        .map_err(|source| Error::Sys {
            call: "mkdir(private temporary directory)",
            source,
        })?;
    let dir = TempDir {
        path,
        _runs: Arc::clone(runs),
    };
    if let Some(owner) = owner {
        std::os::unix::fs::chown(&dir.path, Some(owner.uid()), Some(owner.gid())).map_err(
            |source| Error::Sys {
                call: "chown(private temporary directory)",
                source,
            },
        )?;
    }
    Ok(dir)
}
