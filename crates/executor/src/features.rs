//! Probing what the kernel allows: cgroups, namespaces, pidfds, subreapers,
//! Landlock, seccomp.
//!
//! [`DISABLE_FEATURES_VAR`] turns probes off, so that the fallbacks and the
//! fail-closed paths of the sandbox can be tested on a kernel that has everything.

use std::ffi::{CString, c_void};
use std::os::unix::ffi::OsStrExt;

use crate::cgroup::Cgroups;
use crate::mounts::MountPlan;
use crate::plan::IdMaps;

/// The result of probing one kernel feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Whether the executor can use it.
    pub available: bool,
    /// What was found, or why it is unusable.
    pub detail: String,
}

/// What the kernel allows this process, probed once at start-up.
#[derive(Debug, Clone)]
pub struct Features {
    /// A cgroup v2 leaf with `cgroup.kill` can be created below our cgroup.
    pub cgroup_kill: Probe,
    /// Memory of a run's tree can be limited and OOM kills counted (v2 or v1 memory controller).
    pub memory_controller: Probe,
    /// The number of processes of a run's tree can be capped (v2 or v1 pids controller).
    pub pids_controller: Probe,
    /// CPU time of a run's tree can be measured (v2 `cpu.stat` or v1 cpuacct).
    pub cpu_accounting: Probe,
    /// A new PID namespace can be created (through a user namespace when not root).
    pub pid_namespace: Probe,
    /// `PR_SET_CHILD_SUBREAPER` and a readable `/proc`.
    pub subreaper: Probe,
    /// `pidfd_open`, `pidfd_send_signal` and `CLONE_PIDFD` (Linux 5.3 or later).
    pub pidfd: Probe,
    /// A new network namespace (for `network = deny`).
    pub network_namespace: Probe,
    /// New PID and mount namespaces with a fresh `/proc` mounted (hides every
    /// other process, the executor's environment included).
    pub private_proc: Probe,
    /// A mount namespace with the run's whole layout (`mounts.rs`): private,
    /// `nodev,nosuid` and read-only mounts through `mount_setattr` (Linux
    /// 5.12), cloned device nodes, tmpfs, a fresh `/proc` with its masks.
    pub private_mounts: Probe,
    /// New IPC and UTS namespaces (private SysV objects, POSIX queues, hostname).
    pub ipc_namespace: Probe,
    /// Landlock filesystem rules (for `filesystem = project | read-only`).
    pub landlock: Probe,
    /// A seccomp filter can be installed (for `syscalls = filter`).
    pub seccomp: Probe,
    /// toolsmith's read-mask server (a detached FUSE mount, `/dev/fuse`): a run's attempts
    /// to read its masks are recorded ([`Outcome::reads_denied`](crate::Outcome)). Without
    /// it the masks are empty `tmpfs` and files that refuse the same, silently.
    pub read_watch: Probe,
    /// toolsmith's seccomp supervisor (user notifications, `pidfd_getfd`, `openat2`): Unix
    /// socket grants, and the supervised creations that refuse new repositories and missing
    /// protected paths at any depth of a writable root (`creations/`). Without it Unix
    /// socket grants fail closed and the missing protected paths' directories are sealed.
    pub supervisor: Probe,
    /// The Landlock ABI version, when Landlock is available.
    pub landlock_abi: Option<u32>,
}

/// The environment variable naming probes to treat as unavailable, separated
/// by commas: `netns`, `private-proc`, `mounts`, `ipc`, `landlock`, `seccomp`, `fuse` (the
/// read-mask server), `supervisor` (the seccomp supervisor), `hidepid` (a run's `/proc`
/// mounted as on a kernel older than 5.8). For tests of fallbacks.
pub const DISABLE_FEATURES_VAR: &str = "TOOLSMITH_DISABLE_FEATURES";

pub(crate) fn disabled(feature: &str) -> Option<Probe> {
    let list = std::env::var(DISABLE_FEATURES_VAR).ok()?;
    list.split(',')
        .any(|name| name.trim() == feature)
        .then(|| Probe {
            available: false,
            detail: format!("disabled by {DISABLE_FEATURES_VAR}"),
        })
}

impl Features {
    /// Every probe with its name, for reports such as `toolsmith doctor`.
    pub fn checks(&self) -> Vec<(&'static str, &Probe)> {
        vec![
            ("cgroup.kill", &self.cgroup_kill),
            ("memory controller", &self.memory_controller),
            ("pids controller", &self.pids_controller),
            ("cpu accounting", &self.cpu_accounting),
            ("pid namespace", &self.pid_namespace),
            ("subreaper", &self.subreaper),
            ("pidfd", &self.pidfd),
            ("network namespace", &self.network_namespace),
            ("private /proc", &self.private_proc),
            ("mount namespace", &self.private_mounts),
            ("ipc and uts namespaces", &self.ipc_namespace),
            ("landlock", &self.landlock),
            ("seccomp", &self.seccomp),
            ("read-mask server", &self.read_watch),
            ("seccomp supervisor", &self.supervisor),
        ]
    }
}

/// Probes the kernel. Creates and removes a cgroup directory on the way.
pub fn probe_features() -> Features {
    probe().1
}

/// Probes the kernel, keeping the cgroup directories for an executor.
pub(crate) fn probe() -> (Option<Cgroups>, Features) {
    if disabled("hidepid").is_some() {
        crate::child::PROC_WITHOUT_HIDEPID.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let (cgroups, cgroup_probes) = Cgroups::create();
    let features = Features {
        cgroup_kill: cgroup_probes.kill,
        memory_controller: cgroup_probes.memory,
        pids_controller: cgroup_probes.pids,
        cpu_accounting: cgroup_probes.cpu,
        pid_namespace: probe_namespaces(libc::CLONE_NEWPID, false, "new PID namespaces"),
        subreaper: probe_subreaper(),
        pidfd: probe_pidfd(),
        network_namespace: disabled("netns").unwrap_or_else(|| {
            probe_namespaces(libc::CLONE_NEWNET, false, "new network namespaces")
        }),
        private_proc: disabled("private-proc").unwrap_or_else(|| {
            probe_namespaces(
                libc::CLONE_NEWPID | libc::CLONE_NEWNS,
                true,
                "new PID and mount namespaces with a fresh /proc",
            )
        }),
        private_mounts: disabled("mounts").unwrap_or_else(probe_mounts),
        ipc_namespace: disabled("ipc").unwrap_or_else(|| {
            probe_namespaces(
                libc::CLONE_NEWIPC | libc::CLONE_NEWUTS,
                false,
                "new IPC and UTS namespaces",
            )
        }),
        landlock: Probe {
            available: false,
            detail: String::new(),
        },
        read_watch: match crate::mask_server::server() {
            Ok(_) => Probe {
                available: true,
                detail: "a detached FUSE mount serves the read masks and records what runs try"
                    .to_owned(),
            },
            Err(reason) => Probe {
                available: false,
                detail: reason.to_owned(),
            },
        },
        seccomp: disabled("seccomp").unwrap_or_else(|| match crate::seccomp::probe() {
            Ok(()) => Probe {
                available: true,
                detail: "a seccomp filter can be installed".to_owned(),
            },
            Err(reason) => Probe {
                available: false,
                detail: reason,
            },
        }),
        supervisor: disabled("supervisor").unwrap_or_else(|| {
            match crate::egress::supervisor_supported() {
                // The supervisor's `/proc` is opened now, with the executor's
                // other descriptors, not at a first run's.
                Ok(()) if crate::egress::host_proc().is_some() => Probe {
                    available: true,
                    detail: "seccomp user notifications, pidfd_getfd and openat2".to_owned(),
                },
                Ok(()) => Probe {
                    available: false,
                    detail: "/proc cannot be opened".to_owned(),
                },
                Err(reason) => Probe {
                    available: false,
                    detail: reason,
                },
            }
        }),
        landlock_abi: None,
    };
    let mut features = features;
    match disabled("landlock") {
        Some(probe) => features.landlock = probe,
        None => match crate::landlock::abi_version() {
            Ok(abi) => {
                features.landlock = Probe {
                    available: true,
                    detail: format!("Landlock ABI {abi}"),
                };
                features.landlock_abi = Some(abi);
            }
            Err(error) => {
                features.landlock.detail = format!(
                    "landlock_create_ruleset failed: {error} (Linux 5.13 or later with `landlock` in the lsm= boot parameter)"
                );
            }
        },
    };
    (cgroups, features)
}

fn probe_pidfd() -> Probe {
    let own_pid = nix::unistd::getpid().as_raw();
    match crate::pidfd::open(own_pid) {
        Some(_) => Probe {
            available: true,
            detail: "pidfd_open works".to_owned(),
        },
        None => Probe {
            available: false,
            detail: format!("pidfd_open failed: {}", std::io::Error::last_os_error()),
        },
    }
}

fn probe_subreaper() -> Probe {
    let works = nix::sys::prctl::get_child_subreaper().is_ok();
    let proc_readable = std::fs::read("/proc/self/environ").is_ok();
    Probe {
        available: works && proc_readable,
        detail: match (works, proc_readable) {
            (true, true) => "PR_SET_CHILD_SUBREAPER and /proc/<pid>/environ usable".to_owned(),
            (false, _) => "PR_SET_CHILD_SUBREAPER is unsupported".to_owned(),
            (_, false) => "/proc/<pid>/environ is unreadable".to_owned(),
        },
    }
}

/// Arguments of the namespace probe's child.
struct NamespaceProbe {
    id_maps: Option<IdMaps>,
    mount_proc: bool,
    mounts: Option<MountPlan>,
}

/// Runs the whole mount layout of a read-only run with a private `/proc` in a
/// probe child, a tmpfs TMPDIR on the temporary directory included.
fn probe_mounts() -> Probe {
    let temp_dir = std::env::temp_dir();
    let Ok(temp_dir) = CString::new(temp_dir.as_os_str().as_bytes()) else {
        return Probe {
            available: false,
            detail: "the temporary directory's path holds a NUL byte".to_owned(),
        };
    };
    let plan = MountPlan {
        proc: true,
        host_proc: false,
        read_only: true,
        writable: Vec::new(),
        sealed: Vec::new(),
        reopened: Vec::new(),
        protected: Vec::new(),
        temp_dir: Some((
            temp_dir,
            MountPlan::tmpfs_options(Some(1 << 20), "0700", None),
        )),
        shm_options: MountPlan::tmpfs_options(Some(1 << 20), "1777", None),
        landlock: None,
        own_dir: None,
        masks: None,
    };
    probe_with(
        libc::CLONE_NEWPID | libc::CLONE_NEWNS,
        false,
        Some(plan),
        "a mount namespace with read-only, nodev mounts, a minimal /dev, a tmpfs TMPDIR and a masked /proc",
    )
}

/// Clones a child into new namespaces of `flags` (and a user namespace when
/// not root) that exits at once, after mounting a fresh `/proc` when asked.
fn probe_namespaces(flags: libc::c_int, mount_proc: bool, what: &str) -> Probe {
    probe_with(flags, mount_proc, None, what)
}

fn probe_with(
    flags: libc::c_int,
    mount_proc: bool,
    mounts: Option<MountPlan>,
    what: &str,
) -> Probe {
    let is_root = nix::unistd::geteuid().is_root();
    let probe = NamespaceProbe {
        id_maps: (!is_root).then(IdMaps::identity),
        mount_proc,
        mounts,
    };
    let flags = if is_root {
        flags
    } else {
        flags | libc::CLONE_NEWUSER
    };
    let mut stack = vec![0_u8; 64 * 1024];
    // SAFETY: a vfork-style clone whose child only makes system calls on the
    // given stack, then exits.
    let pid = unsafe {
        libc::clone(
            namespace_probe_child,
            stack.as_mut_ptr().add(stack.len()).cast::<c_void>(),
            libc::CLONE_VM | libc::CLONE_VFORK | flags | libc::SIGCHLD,
            std::ptr::from_ref(&probe).cast_mut().cast::<c_void>(),
        )
    };
    if pid < 0 {
        return Probe {
            available: false,
            detail: format!("clone refused {what}: {}", std::io::Error::last_os_error()),
        };
    }
    let code = match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None) {
        Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => code,
        _ => -1,
    };
    Probe {
        available: code == 0,
        detail: match code {
            0 if is_root => format!("{what} (as root)"),
            0 => format!("{what} through an unprivileged user namespace"),
            1 => "the probe child could not set up its user namespace".to_owned(),
            2 => format!("the probe child could not mount /proc in {what}"),
            _ => format!("the probe child could not set up {what}"),
        },
    }
}

extern "C" fn namespace_probe_child(argument: *mut c_void) -> libc::c_int {
    // SAFETY: the parent passes a NamespaceProbe that outlives the child.
    let probe = unsafe { &*argument.cast::<NamespaceProbe>() };
    if !probe.id_maps.as_ref().is_none_or(|maps| maps.write_own()) {
        // SAFETY: _exit never returns.
        unsafe { libc::_exit(1) }
    }
    // SAFETY: plain system calls in the probe child's own namespaces.
    if probe.mount_proc && !unsafe { crate::child::mount_private_proc() } {
        // SAFETY: _exit never returns.
        unsafe { libc::_exit(2) }
    }
    // SAFETY: the layout in the probe child's own mount namespace.
    if let Some(mounts) = &probe.mounts
        && !unsafe { crate::mounts::set_up(mounts) }
    {
        // SAFETY: _exit never returns.
        unsafe { libc::_exit(3) }
    }
    // SAFETY: _exit never returns.
    unsafe { libc::_exit(0) }
}
