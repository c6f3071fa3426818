//! Sandbox profiles: what a run may reach (network, writable paths, other
//! processes, privileges, system calls), and how a profile becomes clone
//! flags, a Landlock ruleset, a private temporary directory, a privilege
//! plan and a seccomp filter before the spawn.
//!
//! Every mechanism is applied in the clone child with raw system calls
//! (see `spawn.rs`); everything that allocates happens here, in the parent.

use std::ffi::OsString;
use std::fmt;
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

mod filesystem;

use self::filesystem::{
    FilesystemPlan, c_path, c_paths, masks_unavailable, own_dir_mount, plan_filesystem, plan_masks,
    protect_missing, protected_mounts, unavailable,
};
use crate::mounts::MountPlan;
use crate::privileges::PrivilegePlan;
use crate::runs_dir::RunsDir;
use crate::{Error, Features, Privileges, RunAs, seccomp};

/// Whether a missing kernel feature fails the run or lets it run with less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// The run fails with [`Error::SandboxUnavailable`] (fail closed).
    Required,
    /// The run goes ahead without the mechanism, and [`AppliedSandbox::relaxed`] says so.
    IfPossible,
}

/// Network access of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// The executor's own network.
    Allow,
    /// A network namespace of its own whose only interface, loopback, is
    /// down: no address is reachable, the host's loopback included.
    Deny(Enforcement),
    /// A network namespace of its own whose only way out is a proxy the
    /// executor runs for the run, which lets through exactly the granted
    /// destinations (see `egress/`). Fails closed: without a network
    /// namespace the run fails with [`Error::SandboxUnavailable`].
    Proxy(crate::Egress),
}

impl Network {
    /// The enforcement of the run's own network namespace, `None` for [`Network::Allow`].
    pub fn namespace(&self) -> Option<Enforcement> {
        match self {
            Network::Allow => None,
            Network::Deny(enforcement) => Some(*enforcement),
            Network::Proxy(_) => Some(Enforcement::Required),
        }
    }
}

/// Where a run may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filesystem {
    /// Wherever the uid may.
    Full,
    /// Only below `root` and in the run's private temporary directory.
    Project {
        /// The directory the run may write in.
        root: PathBuf,
        /// What to do when Landlock is unavailable.
        enforcement: Enforcement,
    },
    /// Only in the run's private temporary directory.
    ReadOnly(Enforcement),
    /// Only below each of `roots` (absolute, existing at the start of the run) and in the
    /// run's private temporary directory; the protected paths below them stay read-only as
    /// under [`Filesystem::Project`].
    Paths {
        /// The directories (or files) the run may write.
        roots: Vec<PathBuf>,
        /// What to do when Landlock is unavailable.
        enforcement: Enforcement,
    },
}

/// Whether a run's system calls go through toolsmith's seccomp filter
/// (see `seccomp.rs` and `docs/security.md` for the list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syscalls {
    /// Every system call the kernel offers.
    Unfiltered,
    /// The deny-list filter, installed last before `execve`.
    Filtered(Enforcement),
}

/// The isolation of one run, set with [`Command::sandbox`](crate::Command::sandbox).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Network access.
    pub network: Network,
    /// Writable paths.
    pub filesystem: Filesystem,
    /// When the kernel allows it, a PID namespace and a mount namespace with a
    /// fresh `/proc`, so the program sees no process but its own (in
    /// particular not the executor's `/proc/<pid>/environ`). Best effort:
    /// [`AppliedSandbox::private_pids`] says whether it applied.
    pub private_pids: bool,
    /// When the kernel allows it, a mount namespace of the run's own (see
    /// `mounts.rs`): every mount `nodev,nosuid` and private, a minimal `/dev`,
    /// `/sys` and the cgroup filesystems read-only, Docker's masks on `/proc`.
    /// A filesystem restriction implies it (read-only mounts, the capped tmpfs
    /// TMPDIR and the protected paths are part of the restriction). Best effort
    /// otherwise: [`AppliedSandbox::private_mounts`] says whether it applied.
    pub private_mounts: bool,
    /// When the kernel allows it, IPC and UTS namespaces of the run's own: the
    /// SysV objects and POSIX message queues it creates die with it, the
    /// host's are out of sight, and its hostname is `toolsmith`. Best effort:
    /// [`AppliedSandbox::private_ipc`] says whether it applied.
    pub private_ipc: bool,
    /// Paths below the project root that stay read-only under
    /// [`Filesystem::Project`] (the project's `.git`, tool directories,
    /// configuration): bound read-only in the run's mount namespace. For a
    /// path that does not exist, its nearest existing directory in the project
    /// is sealed instead: no new entry can be made there (see `mounts.rs`).
    pub protected: Vec<PathBuf>,
    /// The identity and capabilities of the run's processes.
    pub privileges: Privileges,
    /// The system-call filter.
    pub syscalls: Syscalls,
    /// A directory of the host the run may write whatever its filesystem restriction, kept
    /// across runs (the interpreter cache of one tool): made if missing (mode 0700, owned by
    /// the run's identity), added to the Landlock rule and bound writable in the run's mount
    /// namespace. Its parent is hidden behind an empty read-only `tmpfs` holding only this
    /// directory, so the run sees none of its siblings (the other tools' caches). Without a
    /// mount namespace the siblings stay visible, and [`AppliedSandbox::relaxed`] says so.
    pub own_dir: Option<PathBuf>,
    /// Paths the run must not see, whatever its filesystem restriction (`full` included):
    /// in its mount namespace a hidden directory is an empty read-only `tmpfs` and a hidden
    /// file an empty read-only file (see `masks.rs`). Symbolic links are followed; a path that
    /// does not exist is skipped. The directory of every run's TMPDIR is hidden from every run
    /// with a mount namespace, listed here or not. Without a mount namespace nothing is hidden,
    /// and [`AppliedSandbox::relaxed`] says so.
    pub hidden: Vec<PathBuf>,
}

impl Sandbox {
    /// No isolation beyond the containment backend: network allowed,
    /// filesystem as the uid allows, processes visible.
    pub fn none() -> Sandbox {
        Sandbox {
            network: Network::Allow,
            filesystem: Filesystem::Full,
            private_pids: false,
            private_mounts: false,
            private_ipc: false,
            protected: Vec::new(),
            privileges: Privileges::Keep,
            syscalls: Syscalls::Unfiltered,
            own_dir: None,
            hidden: Vec::new(),
        }
    }
}

/// The kind of filesystem restriction that applied to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilesystemAccess {
    /// Not restricted.
    Full,
    /// Writes only below the project root and the private temporary directory.
    Project,
    /// Writes only in the private temporary directory.
    ReadOnly,
    /// Writes only below the listed paths and the private temporary directory.
    Paths,
}

impl FilesystemAccess {
    /// The name used in configuration and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FilesystemAccess::Full => "full",
            FilesystemAccess::Project => "project",
            FilesystemAccess::ReadOnly => "read-only",
            FilesystemAccess::Paths => "paths",
        }
    }
}

impl fmt::Display for FilesystemAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What isolation actually applied to a run, for audits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedSandbox {
    /// True when the run had a network namespace of its own (no network, or only its egress proxy).
    pub network_denied: bool,
    /// True when the run's only way out was its egress proxy ([`Network::Proxy`]).
    pub egress_proxy: bool,
    /// The filesystem restriction in force.
    pub filesystem: FilesystemAccess,
    /// True when the run had its own PID namespace and `/proc`.
    pub private_pids: bool,
    /// True when the run had its own mount namespace and layout (see [`Sandbox::private_mounts`]).
    pub private_mounts: bool,
    /// True when the run had its own IPC and UTS namespaces.
    pub private_ipc: bool,
    /// True when the run started with no capability (and an empty bounding set).
    pub capabilities_dropped: bool,
    /// The identity the run had, when it was switched (`[sandbox] user`).
    pub run_as: Option<RunAs>,
    /// True when the run's system calls went through the seccomp filter.
    pub syscall_filter: bool,
    /// How many paths of [`Sandbox::hidden`] the run had hidden (those that existed).
    pub hidden: usize,
    /// What an [`Enforcement::IfPossible`] request could not get, and why.
    pub relaxed: Vec<String>,
}

impl AppliedSandbox {
    /// A run to which no mechanism applied (what a plan starts from, and what
    /// [`Sandbox::none`] amounts to).
    pub fn none() -> AppliedSandbox {
        AppliedSandbox {
            network_denied: false,
            egress_proxy: false,
            filesystem: FilesystemAccess::Full,
            private_pids: false,
            private_mounts: false,
            private_ipc: false,
            capabilities_dropped: false,
            run_as: None,
            syscall_filter: false,
            hidden: 0,
            relaxed: Vec::new(),
        }
    }
}

/// A sandbox turned into what the spawn needs.
#[derive(Debug)]
pub(crate) struct SandboxPlan {
    /// Extra `CLONE_NEW*` flags.
    pub(crate) clone_flags: libc::c_int,
    /// Mount a fresh `/proc` in the child (it is in new PID and mount
    /// namespaces) when there is no mount layout to do it.
    pub(crate) mount_proc: bool,
    /// The run's mount layout, taken by the spawn plan.
    pub(crate) mounts: Option<MountPlan>,
    /// Set the hostname (the child is in a new UTS namespace).
    pub(crate) hostname: bool,
    /// A Landlock ruleset for `landlock_restrict_self` in the child.
    pub(crate) landlock: Option<OwnedFd>,
    /// The private temporary directory, removed when the plan is dropped.
    pub(crate) temp_dir: Option<TempDir>,
    /// What the child drops before `execve`, if anything.
    pub(crate) privileges: Option<PrivilegePlan>,
    /// The seccomp program the child installs last.
    pub(crate) seccomp: Option<&'static [libc::sock_filter]>,
    /// What applies, for the outcome.
    pub(crate) applied: AppliedSandbox,
    /// Under [`Network::Proxy`]: the grant and the channel that brings the
    /// listener of the run's namespace to the executor's proxy.
    pub(crate) egress: Option<crate::egress::EgressChannel>,
    /// The mask server's nodes of the run's masks, each with the hidden entry it masks: kept
    /// here for the run's watch when the spawn plan takes `mounts`.
    pub(crate) mask_nodes: Vec<(u64, std::path::PathBuf)>,
    /// The filter sends calls to a supervisor and is installed with a
    /// listener (a run with Unix socket grants or supervised creations).
    pub(crate) seccomp_listener: bool,
    /// What the run may not create, when its creations are supervised (`creations/`).
    pub(crate) creations: Option<Arc<crate::creations::Creations>>,
    /// The channel of the filter's listener when there is no egress channel to carry it.
    pub(crate) notify: Option<crate::egress::NotifyChannel>,
}

impl SandboxPlan {
    /// A duplicate of the filter's listener, for the run's supervisor.
    pub(crate) fn notifier(&self) -> Result<OwnedFd, Error> {
        match (&self.egress, &self.notify) {
            (Some(channel), _) => channel.notifier(),
            (None, Some(channel)) => channel.listener(),
            (None, None) => Err(Error::Sys {
                call: "receiving the filter's listener",
                source: std::io::Error::other("the run has no channel for it"),
            }),
        }
    }

    /// The child's end of the channel the filter's listener goes to, if any.
    pub(crate) fn notify_fd(&self) -> Option<std::os::fd::RawFd> {
        if !self.seccomp_listener {
            return None;
        }
        match (&self.egress, &self.notify) {
            (Some(channel), _) => Some(channel.child_fd()),
            (None, Some(channel)) => Some(channel.child_fd()),
            (None, None) => None,
        }
    }

    /// The environment the program gets on top of its command's.
    pub(crate) fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = match &self.temp_dir {
            Some(dir) => ["TMPDIR", "TMP", "TEMP"]
                .into_iter()
                .map(|name| (OsString::from(name), dir.path.clone().into_os_string()))
                .collect(),
            None => Vec::new(),
        };
        if self.egress.is_some() {
            env.extend(crate::egress::proxy_env());
        }
        env
    }
}

/// A directory removed, with its contents, on drop; it keeps the runs' directory it lies in.
#[derive(Debug)]
pub(crate) struct TempDir {
    path: PathBuf,
    _runs: Arc<RunsDir>,
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(path = %self.path.display(), %error, "could not remove a run's temporary directory");
        }
    }
}

/// What the executor knows about its own process, for the plans of its runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Host {
    /// The executor runs as root (euid 0).
    pub(crate) is_root: bool,
    /// The highest capability number of the kernel.
    pub(crate) last_capability: u32,
}

/// Turns `sandbox` into a plan, or fails closed when a required mechanism is
/// unavailable. `tmp_size` caps the private TMPDIR.
pub(crate) fn plan(
    sandbox: &Sandbox,
    features: &Features,
    host: Host,
    runs: &Arc<RunsDir>,
    run_name: &str,
    tmp_size: Option<u64>,
) -> Result<SandboxPlan, Error> {
    runs.check()?;
    let mut applied = AppliedSandbox::none();
    let (privileges, seccomp_program) = plan_privileges(sandbox, features, host, &mut applied)?;
    let mut clone_flags = plan_namespaces(sandbox, features, &mut applied)?;
    let private_pids = applied.private_pids;
    let FilesystemPlan {
        writable_roots,
        landlock_ruleset,
        landlock_rights,
        temp_dir,
    } = plan_filesystem(sandbox, features, runs, run_name, &mut applied)?;
    let mounts_available = features.private_mounts.available;
    if sandbox.own_dir.is_some() && !mounts_available {
        applied.relaxed.push(format!(
            "own directory's siblings not hidden: a mount namespace is unavailable ({})",
            features.private_mounts.detail
        ));
    }
    masks_unavailable(sandbox, features, &mut applied);
    let restricted = applied.filesystem != FilesystemAccess::Full;
    let owner = applied.run_as.map(|run_as| (run_as.uid(), run_as.gid()));
    let hiding = !sandbox.hidden.is_empty();
    let filtered = seccomp_program.is_some();
    let mut creations = None;
    let mounts = if (sandbox.private_mounts || restricted || hiding) && mounts_available {
        clone_flags |= libc::CLONE_NEWNS;
        applied.private_mounts = true;
        let writable_roots = match applied.filesystem {
            FilesystemAccess::Project | FilesystemAccess::Paths => writable_roots,
            _ => Vec::new(),
        };
        let (sealed, reopened);
        (creations, sealed, reopened) = protect_missing(
            sandbox,
            features,
            &writable_roots,
            (filtered, host.is_root),
            &mut applied,
        );
        Some(MountPlan {
            proc: private_pids,
            host_proc: !private_pids,
            read_only: restricted,
            writable: writable_roots
                .iter()
                .map(|root| c_path(root))
                .collect::<Result<_, _>>()?,
            sealed: c_paths(&sealed)?,
            reopened: c_paths(&reopened)?,
            protected: protected_mounts(sandbox, applied.filesystem)?,
            temp_dir: match &temp_dir {
                Some(dir) => Some((
                    c_path(&dir.path)?,
                    MountPlan::tmpfs_options(tmp_size, "0700", owner),
                )),
                None => None,
            },
            shm_options: MountPlan::tmpfs_options(tmp_size, "1777", None),
            own_dir: match &sandbox.own_dir {
                Some(dir) => Some(own_dir_mount(dir)?),
                None => None,
            },
            landlock: landlock_ruleset
                .as_ref()
                .map(|ruleset: &OwnedFd| (ruleset.as_raw_fd(), landlock_rights)),
            masks: Some(plan_masks(sandbox, runs, temp_dir.as_ref(), &mut applied)?),
        })
    } else {
        None
    };
    let supervised = creations.is_some();
    let mask_nodes = mounts
        .as_ref()
        .and_then(|mounts| mounts.masks.as_ref())
        .map(|masks| masks.nodes.clone())
        .unwrap_or_default();
    let sockets = sockets(&sandbox.network, &applied);
    let (egress, notify) = plan_channels(sandbox, features, filtered, supervised, &mut applied)?;
    Ok(SandboxPlan {
        mask_nodes,
        egress,
        notify,
        seccomp_listener: seccomp_program.is_some()
            && (sockets == seccomp::Sockets::ProxiedUnix || creations.is_some()),
        creations,
        clone_flags,
        mount_proc: private_pids && mounts.is_none(),
        mounts,
        hostname: applied.private_ipc,
        landlock: landlock_ruleset,
        temp_dir,
        privileges,
        seccomp: seccomp_program
            .map(|()| seccomp::program(sockets, applied.private_pids, supervised)),
        applied,
    })
}

/// The namespaces of a run: network (deny and the proxy), PID with its
/// `/proc`, IPC with UTS, as `CLONE_NEW*` flags; `applied` says which apply.
fn plan_namespaces(
    sandbox: &Sandbox,
    features: &Features,
    applied: &mut AppliedSandbox,
) -> Result<libc::c_int, Error> {
    let mut clone_flags = 0;
    if let Some(enforcement) = sandbox.network.namespace() {
        if features.network_namespace.available {
            clone_flags |= libc::CLONE_NEWNET;
            applied.network_denied = true;
            applied.egress_proxy = matches!(sandbox.network, Network::Proxy(_));
        } else {
            unavailable(
                enforcement,
                "network = deny",
                "a network namespace",
                &features.network_namespace.detail,
                applied,
            )?;
        }
    }
    let private_pids = sandbox.private_pids && features.private_proc.available;
    if private_pids {
        clone_flags |= libc::CLONE_NEWPID | libc::CLONE_NEWNS;
        applied.private_pids = true;
    }
    if sandbox.private_ipc && features.ipc_namespace.available {
        clone_flags |= libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
        applied.private_ipc = true;
    }
    Ok(clone_flags)
}

/// The channels of a run: the egress channel of a proxied run, and the channel
/// of the filter's listener for a run with supervised creations and no egress
/// channel to carry it.
fn plan_channels(
    sandbox: &Sandbox,
    features: &Features,
    filtered: bool,
    supervised: bool,
    applied: &mut AppliedSandbox,
) -> Result<
    (
        Option<crate::egress::EgressChannel>,
        Option<crate::egress::NotifyChannel>,
    ),
    Error,
> {
    let egress = plan_egress(&sandbox.network, features, filtered, applied)?;
    let notify = if supervised && egress.is_none() {
        Some(crate::egress::NotifyChannel::new()?)
    } else {
        None
    };
    Ok((egress, notify))
}

/// Which sockets the filter lets a run make (`seccomp::Sockets`).
fn sockets(network: &Network, applied: &AppliedSandbox) -> seccomp::Sockets {
    if let Network::Proxy(egress) = network {
        if egress.unix_sockets.is_empty() {
            seccomp::Sockets::Proxied
        } else {
            seccomp::Sockets::ProxiedUnix
        }
    } else {
        applied.network_denied.into()
    }
}

/// The channel of a proxied run. The namespace itself is planned (or the
/// run refused) with the other namespaces.
fn plan_egress(
    network: &Network,
    features: &Features,
    filtered: bool,
    applied: &mut AppliedSandbox,
) -> Result<Option<crate::egress::EgressChannel>, Error> {
    let Network::Proxy(egress) = network else {
        return Ok(None);
    };
    if !egress.unix_sockets.is_empty() {
        // Fail closed: only the filter's notifications and the supervisor
        // (`egress/unix.rs`) keep a run's Unix sockets to the granted paths.
        let unsupported = if filtered {
            (!features.supervisor.available).then(|| features.supervisor.detail.clone())
        } else {
            Some("the system-call filter is off for this run".to_owned())
        };
        if let Some(reason) = unsupported {
            return Err(Error::SandboxUnavailable {
                requirement: "network = [\"unix:...\"]",
                mechanism: "a seccomp supervisor of connect",
                reason,
            });
        }
    }
    if !filtered {
        applied.relaxed.push(
            "Unix sockets not refused under the egress proxy: the system-call filter is off"
                .to_owned(),
        );
    }
    crate::egress::EgressChannel::new(egress.clone()).map(Some)
}

/// The privileges a run drops and whether it gets the system-call filter,
/// or an error when they cannot be had; `applied` says what applies.
fn plan_privileges(
    sandbox: &Sandbox,
    features: &Features,
    host: Host,
    applied: &mut AppliedSandbox,
) -> Result<(Option<PrivilegePlan>, Option<()>), Error> {
    let privileges = match sandbox.privileges {
        Privileges::Keep => None,
        Privileges::Drop(run_as) => {
            if let Some(run_as) = run_as
                && !host.is_root
            {
                return Err(Error::RunAsNeedsRoot { run_as });
            }
            applied.capabilities_dropped = true;
            applied.run_as = run_as;
            Some(PrivilegePlan {
                run_as,
                last_capability: host.last_capability,
            })
        }
    };
    let seccomp_program = match sandbox.syscalls {
        Syscalls::Unfiltered => None,
        Syscalls::Filtered(enforcement) => {
            if features.seccomp.available {
                applied.syscall_filter = true;
                Some(())
            } else {
                unavailable(
                    enforcement,
                    "syscalls = filter",
                    "a seccomp filter",
                    &features.seccomp.detail,
                    applied,
                )?;
                None
            }
        }
    };
    Ok((privileges, seccomp_program))
}
